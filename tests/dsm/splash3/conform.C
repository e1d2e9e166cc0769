/* conform.C: a SPLASH-style program that uses every macro of SPLASH-3's pthread macro file (our
 * own code; dsm/README.md "Conformance" maps each macro to this test). Usage: CONFORM -p P. It
 * reads inputs/conform.in relative to the working directory, prints its input summary and, after
 * WAIT_FOR_END, every check against a sequential computation: the same lines under any backend. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "conform.h"
MAIN_ENV

struct GlobalMemory *Global;
long *data;
char *big;
long n, nprocs = 4, chunk = 37;
/* ordinary globals that workers write and main reads after WAIT_FOR_END (water's XTT, barnes's
 * Local[pid]): one value set by the last pid, one slot per pid */
double last_pid_value;
long per_pid[64];

long square_plus_one(long v) { return v * v + 1; }

void Worker(void)
{
    long pid, s, i, local = 0, home, k;
    long *scratch;
    GET_PID(pid)
    GET_HOME(home)
    Global->home_of[pid] = home;
    per_pid[pid] = 10 * pid + 1;
    if (pid == nprocs - 1) last_pid_value = 0.5 * pid;
    Global->seen_fn[pid] = Global->fn(pid) + (strcmp(Global->name, "conform") == 0 ? 0 : 1000000);
    BARRIER(Global->bar, nprocs)
    /* a work queue: chunks of the input summed into a locked total and locked buckets */
    for (;;) {
        GETSUB(Global->chunks, s, (n + chunk - 1) / chunk - 1, nprocs)
        if (s < 0) break;
        for (i = s * chunk; i < n && i < (s + 1) * chunk; i++) {
            local += data[i];
            ALOCK(Global->bucket_locks, data[i] % NBUCKETS)
            Global->buckets[data[i] % NBUCKETS] += 1;
            AULOCK(Global->bucket_locks, data[i] % NBUCKETS)
        }
    }
    LOCK(Global->sum_lock)
    Global->sum += local;
    UNLOCK(Global->sum_lock);              /* with a semicolon too */
    for (;;) {
        NU_GETSUB(Global->rows, s, 99, nprocs)
        if (s < 0) break;
        NLOCK(Global->nlock)
        Global->row_hits += 1;
        NUNLOCK(Global->nlock)
    }
    /* a flag: pid 0 publishes a value and sets the event; the others wait for it */
    if (pid == 0) {
        Global->published = 4242;
        SETPAUSE(Global->ready)
    } else {
        WAITPAUSE(Global->ready)
    }
    Global->seen_published[pid] = Global->published;
    /* a condition variable: the last to arrive wakes the rest */
    LOCK(Global->sum_lock)
    Global->arrived += 1;
    if (Global->arrived == nprocs) {
        CONDVARBCAST(Global->all_here)
    } else {
        while (Global->arrived < nprocs) CONDVARWAIT(Global->all_here, Global->sum_lock)
    }
    CONDVARSIGNAL(Global->all_here)
    UNLOCK(Global->sum_lock)
    BARRIER(Global->bar_nocount, nprocs)
    Global->homed[pid] = pid + 100;
    if (pid == 0) CLEARPAUSE(Global->ready)
    /* fences: pid 0 writes a value, then a flag; the others spin on the flag with acquire fences */
    if (pid == 0) {
        Global->fenced_value = 777;
        RELEASE_FENCE();
        Global->fence_flag = 1;
        RELEASE_FENCE;
    } else {
        while (!Global->fence_flag) ACQUIRE_FENCE();
        ACQUIRE_FENCE;
    }
    FULL_FENCE();
    Global->seen_fenced[pid] = Global->fenced_value;
    Global->seen_big[pid] = big[0] + big[BIG_BYTES / 2] + big[BIG_BYTES - 1];
    /* a cell's condition variable initialised again every step: 20000 steps a thread, more inits
     * in all than a DSM has sync ids, each init the same object */
    for (k = 0; k < 20000; k++) CONDVARINIT(Global->cell_cv[pid])
    LOCK(Global->sum_lock)
    CONDVARSIGNAL(Global->cell_cv[pid])
    UNLOCK(Global->sum_lock)
    /* a private allocation in the parallel section, expression form */
    scratch = (long *) G_MALLOC_F(16 * sizeof(long));
    for (k = 0; k < 16; k++) scratch[k] = k;
    G_FREE(scratch)
    /* whole lines from every thread: the launcher must never cut one */
    for (k = 0; k < 3; k++)
        printf("worker %ld line %ld: ....................................................................."
               "...................................................................... end\n", pid, k);
    BARRIER(Global->bar, nprocs)
}

int main(int argc, char **argv)
{
    long i, ref_sum = 0, ref_buckets[NBUCKETS] = {0, 0, 0, 0}, bad = 0;
    long *nu;
    char title[128];
    if (argc == 3 && strcmp(argv[1], "-p") == 0) nprocs = atol(argv[2]);
    if (nprocs < 1 || nprocs > 64) { fprintf(stderr, "usage: CONFORM -p P (1..64)\n"); exit(2); }
    /* a title on standard input, as barnes and water read their parameters: every cluster reads
     * the same bytes */
    if (fgets(title, sizeof title, stdin) == NULL) strcpy(title, "(none)\n");
    read_input("inputs/conform.in");     /* G_MALLOC before MAIN_INITENV */
    MAIN_INITENV(,80000000)
    printf("conform: %ld numbers from inputs/conform.in, %ld processes, page size %d\n", n, nprocs, PAGE_SIZE);
    printf("title: %s", title);
    nu = (long *) NU_MALLOC(64 * sizeof(long), 0)
    nu[0] = (long) NU_MALLOC_F(8, 0) != 0;
    NU_FREE(nu)
    LOCKINIT(Global->sum_lock)
    ALOCKINIT(Global->bucket_locks, NBUCKETS)
    NLOCKINIT(Global->nlock)
    BARINIT(Global->bar, nprocs)
    BARINIT(Global->bar_nocount)
    GSINIT(Global->chunks)
    NU_GSINIT(Global->rows)
    PAUSEINIT(Global->ready)
    CONDVARINIT(Global->all_here)
    Global->fn = square_plus_one;
    Global->name = "conform";
    AINIT(Global->unused)
    MONINIT(0)
    MONMINIT(0)
    SET_HOME(Global, 0)
    ST_LOG(0, 0)
    AUG_DELAY(0)
    BAREXCLUDE(Global->bar)
    BARINCLUDE(Global->bar)
    EVENT(0)
    PAUSE(0)
    MENTER(0)
    MEXIT(0)
    DELAY(0)
    CONTINUE(0)
    PROBEND(0)
    NEWPROC
    AUG_ON
    AUG_OFF
    TRACE_ON
    TRACE_OFF
    REF_TRACE_ON
    REF_TRACE_OFF
    DYN_TRACE_ON
    DYN_TRACE_OFF
    DYN_REF_TRACE_ON
    DYN_REF_TRACE_OFF
    DYN_SIM_ON
    DYN_SIM_OFF
    DYN_SCHED_ON
    DYN_SCHED_OFF
    AUG_SET_LOLIMIT(0, 0)
    AUG_SET_HILIMIT(0, 0)
    CLOCK(Global->start_us)
    SPLASH3_ROI_BEGIN();
    CREATE(Worker, nprocs);
    WAIT_FOR_END(nprocs);
    SPLASH3_ROI_END;
    CLOCK(Global->end_us)
    MONMEXIT(0)

    for (i = 0; i < n; i++) { ref_sum += data[i]; ref_buckets[data[i] % NBUCKETS]++; }
    printf("sum %ld (sequential %ld)\n", Global->sum, ref_sum);
    bad += Global->sum != ref_sum;
    for (i = 0; i < NBUCKETS; i++) {
        printf("bucket %ld: %ld (sequential %ld)\n", i, Global->buckets[i], ref_buckets[i]);
        bad += Global->buckets[i] != ref_buckets[i];
    }
    printf("rows %ld of 100\n", Global->row_hits);
    for (i = 0; i < nprocs; i++) bad += per_pid[i] != 10 * i + 1;
    printf("globals the workers wrote: last pid's value %.1f, per-pid slots %s\n", last_pid_value,
           bad ? "wrong" : "right");
    bad += Global->row_hits != 100;
    for (i = 0; i < nprocs; i++) {
        bad += Global->seen_fn[i] != i * i + 1 || Global->homed[i] != i + 100;
        bad += Global->seen_published[i] != 4242 || Global->seen_fenced[i] != 777 || Global->home_of[i] != 0 ||
               Global->seen_big[i] != 'a' + 'b' + 'c';
    }
    printf("every process saw the event's value, the fenced value, the 2 GiB allocation's ends and called the "
           "function stored before the threads started: %s\n",
           bad ? "no" : "yes");
    printf("time %lu us\n", Global->end_us - Global->start_us);
    printf("%s\n", bad ? "FAIL" : "PASS");
    if (bad) exit(1);
    MAIN_END
}
