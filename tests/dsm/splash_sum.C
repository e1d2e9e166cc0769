/* splash_sum.C: a small SPLASH-2 style program written with the PARMACS macros, as SPLASH programs
 * are: shared data from G_MALLOC reached through pointers kept in ordinary globals (set before
 * CREATE), a lock-protected global sum, a GETSUB work queue, barriers between phases, a flag.
 * After WAIT_FOR_END, main recomputes everything sequentially and compares.
 *   usage: splash_sum [-p NPROCS] [-n ELEMENTS] [-s SEED]   exit 0 and "PASS ..." when equal
 * (-s exists so a test can give clusters different seeds: a prefix that is not deterministic.)
 * Built two ways (tests/dsm/meson.build): with -include parmacs.h, and through
 * m4 -Ulen -Uindex parmacs.m4 splash_sum.C > splash_sum.c.
 */
MAIN_ENV

#include <string.h>

#define MAX_PROCS 64
#define CHUNK 64
#define SWEEPS 4

struct GlobalMemory {
    LOCKDEC(sumlock)
    ALOCKDEC(binlock, 8)
    BARDEC(start)
    GSDEC(chunks)
    PAUSEDEC(ready)
    long sum;            /* sum of every element, added to under sumlock */
    long bins[8];        /* histogram of element mod 8, bin i under binlock[i] */
    long work_done;      /* chunks taken from the GETSUB queue, under sumlock */
    long magic;          /* written by pid 0 before SETPAUSE, read after WAITPAUSE */
    unsigned long start_time, end_time;
};

struct GlobalMemory *Global;   /* pointers in globals, as SPLASH keeps them */
long *data;                    /* n elements */
double *grid, *next;           /* relaxed in SWEEPS phases */
long nprocs = 4, n = 20000;
long checks_failed = 0;        /* per cluster process: only main reads it */

void slave(void)
{
    long pid, i, s, local = 0, mine[8], taken = 0, sweep;
    GET_PID(pid);
    for (i = 0; i < 8; i++) mine[i] = 0;
    BARRIER(Global->start, nprocs)
    if (pid == 0) {
        Global->magic = 4242;
        SETPAUSE(Global->ready)
    }
    /* work queue: chunks of CHUNK elements */
    for (;;) {
        GETSUB(Global->chunks, s, (n + CHUNK - 1) / CHUNK - 1, nprocs)
        if (s < 0) break;
        taken++;
        for (i = s * CHUNK; i < n && i < (s + 1) * CHUNK; i++) {
            local += data[i];
            mine[data[i] & 7]++;
        }
    }
    LOCK(Global->sumlock)
    Global->sum += local;
    Global->work_done += taken;
    UNLOCK(Global->sumlock)
    for (i = 0; i < 8; i++) {
        ALOCK(Global->binlock, i)
        Global->bins[i] += mine[i];
        AULOCK(Global->binlock, i)
    }
    WAITPAUSE(Global->ready)
    if (Global->magic != 4242) {
        LOCK(Global->sumlock)
        Global->sum = -1000000000; /* makes main report the failure */
        UNLOCK(Global->sumlock)
    }
    /* Jacobi sweeps over a 1-D grid, block partitioned, barrier between sweeps */
    for (sweep = 0; sweep < SWEEPS; sweep++) {
        long lo = pid * n / nprocs, hi = (pid + 1) * n / nprocs;
        double *src = (sweep & 1) ? next : grid, *dst = (sweep & 1) ? grid : next;
        for (i = lo; i < hi; i++) {
            double l = i > 0 ? src[i - 1] : 0.0, r = i < n - 1 ? src[i + 1] : 0.0;
            dst[i] = 0.25 * l + 0.5 * src[i] + 0.25 * r;
        }
        BARRIER(Global->start, nprocs)
    }
    if (pid == 0) CLOCK(Global->end_time)
}

int main(int argc, char **argv)
{
    long i, sum = 0, bins[8], sweep;
    unsigned long seed = 12345;
    double *a, *b, err = 0.0;
    MAIN_INITENV(,8000000)
    for (i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-p")) nprocs = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-n")) n = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-s")) seed = strtoul(argv[i + 1], NULL, 10);
    }
    if (nprocs < 1 || nprocs > MAX_PROCS || n < 1) {
        fprintf(stderr, "usage: splash_sum [-p 1..%d] [-n ELEMENTS] [-s SEED]\n", MAX_PROCS);
        exit(2);
    }
    Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
    data = (long *) G_MALLOC(n * sizeof(long));
    grid = (double *) G_MALLOC(n * sizeof(double));
    next = (double *) G_MALLOC(n * sizeof(double));
    /* a deterministic prefix: fixed seed, no time, the same on every cluster */
    for (i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ul + 1442695040888963407ul;
        data[i] = (long)((seed >> 33) % 1000);
        grid[i] = (double)(i % 17);
        next[i] = 0.0;
    }
    Global->sum = 0;
    Global->work_done = 0;
    Global->magic = 0;
    for (i = 0; i < 8; i++) Global->bins[i] = 0;
    LOCKINIT(Global->sumlock)
    ALOCKINIT(Global->binlock, 8)
    BARINIT(Global->start, nprocs)
    GSINIT(Global->chunks)
    PAUSEINIT(Global->ready)
    MONMINIT(0)
    printf("splash_sum: %ld elements, %ld processes\n", n, nprocs);
    CLOCK(Global->start_time)
    SPLASH3_ROI_BEGIN();
    CREATE(slave, nprocs)
    WAIT_FOR_END(nprocs)
    SPLASH3_ROI_END();

    /* the sequential answer */
    for (i = 0; i < 8; i++) bins[i] = 0;
    for (i = 0; i < n; i++) {
        sum += data[i];
        bins[data[i] & 7]++;
    }
    a = (double *) malloc(n * sizeof(double));
    b = (double *) malloc(n * sizeof(double));
    for (i = 0; i < n; i++) { a[i] = (double)(i % 17); b[i] = 0.0; }
    for (sweep = 0; sweep < SWEEPS; sweep++) {
        double *src = (sweep & 1) ? b : a, *dst = (sweep & 1) ? a : b;
        for (i = 0; i < n; i++) {
            double l = i > 0 ? src[i - 1] : 0.0, r = i < n - 1 ? src[i + 1] : 0.0;
            dst[i] = 0.25 * l + 0.5 * src[i] + 0.25 * r;
        }
    }
    for (i = 0; i < n; i++) {
        double d = grid[i] - a[i];
        if (d < 0) d = -d;
        if (d > err) err = d;
    }
    if (Global->sum != sum) { printf("FAIL sum %ld, sequential %ld\n", Global->sum, sum); checks_failed++; }
    for (i = 0; i < 8; i++)
        if (Global->bins[i] != bins[i]) { printf("FAIL bin %ld: %ld, sequential %ld\n", i, Global->bins[i], bins[i]); checks_failed++; }
    if (Global->work_done != (n + CHUNK - 1) / CHUNK) { printf("FAIL %ld chunks taken of %ld\n", Global->work_done, (n + CHUNK - 1) / CHUNK); checks_failed++; }
    if (err != 0.0) { printf("FAIL grid differs by %g\n", err); checks_failed++; }
    if (Global->end_time < Global->start_time) { printf("FAIL clock went back\n"); checks_failed++; }
    if (checks_failed) exit(1);
    printf("PASS sum=%ld grid[n/2]=%.6f\n", sum, grid[n / 2]);
    MAIN_END
}
