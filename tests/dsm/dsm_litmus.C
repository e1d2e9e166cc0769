/* dsm_litmus.C: litmus and stress programs for the DSM across cluster processes, written with the
 * PARMACS macros and run through `./iccs run PATH --clusters C --threads S --transport T`
 * (tests/integration/dsm_run.py). One mode a run:
 *   lock     a token passed through one lock, pid after pid (every other hand-over crosses
 *            clusters): the holder first checks that the 3 pages the previous holder wrote carry
 *            its token, then writes them with its own (data before a release seen after the acquire)
 *   barrier  phases between barriers: every pid writes its own words of every page of an array,
 *            then every pid reads the whole array (data before a barrier seen by every thread after it)
 *   false    false sharing: the pids write interleaved 4-byte words of the same 2 pages, many times
 *            between barriers; after each barrier every word holds its writer's last value
 *   stress   randomized lock-protected read-modify-write updates (order-sensitive: x = 3x + v) of a
 *            shared array under K locks, in barrier phases; each update logs (pid, index, value
 *            read) under its lock; main replays the logs and checks every read against the
 *            sequential model, the final array against it, and that every pid saw the same array
 *            after every phase's barrier
 *   bytes    false sharing at byte grain: pid p writes bytes p, p + P, ... of the same 2 pages (so the
 *            clusters write different bytes of each 8-byte word), several times between barriers,
 *            some bytes rewritten with the value they had; after each barrier every byte holds its
 *            writer's last value (word diffs lost a neighbour's bytes)
 *   globals  the program's own globals shared as under pthreads while the threads run: a global
 *            pointer pid 0 sets (to memory it allocates) and every pid follows after a barrier; a
 *            global counter every pid increments under a lock and reads after a barrier; a global
 *            array of 2 pages written byte by byte as in `bytes`; a token passed through a lock in
 *            a global (before: each cluster had its own globals until WAIT_FOR_END)
 *   getsub   GETSUB as an acquire and release (SPLASH-2 builds it with a lock): before each GETSUB
 *            call a pid marks the call in its own page; the taker of index k records the marks it
 *            sees; main checks that every mark made before a call that got an index below k was
 *            seen by the taker of k (fails with ICCS_DSM_GETSUB=counter across clusters)
 *   usage: dsm_litmus MODE [-p NPROCS] [-r ROUNDS] [-s SEED]     exit 0 and "PASS litmus MODE ..."
 */
MAIN_ENV

#include <string.h>

#define MAX_PROCS 64
#define PAGE_WORDS 1024           /* 4-byte words in a 4 KiB page */
#define LOCKS 8
#define CELLS 512
#define OPS 40                    /* stress: updates per pid per phase */

struct LogEntry { long pid, idx; unsigned long seen, v; };

struct GlobalMemory {
    LOCKDEC(token_lock)
    ALOCKDEC(cell_locks, LOCKS)
    BARDEC(bar)
    GSDEC(gs)
    long turn;                    /* lock: whose turn, under token_lock */
    long fails[MAX_PROCS];        /* per pid: checks that failed */
    long log_len[LOCKS];          /* stress: entries of each lock's log, under that lock */
};

struct GlobalMemory *Global;
int *pages;                       /* lock: 3 pages; barrier: 4 pages; false: 2 pages */
unsigned long *cells;             /* stress: CELLS cells, cell i under lock i % LOCKS */
struct LogEntry *logs;            /* stress: LOCKS logs of cap entries */
unsigned long *phase_sums;        /* stress: [phase][pid] checksum of cells after the phase's barrier */
int *marks;                       /* getsub: [pid][call] (a 4 KiB-aligned row of GS_CALLS per pid) */
long *saw;                        /* getsub: [index][pid] the last call of pid whose mark the taker saw */
long *taken;                      /* getsub: [index] = pid * GS_CALLS + call */
#define GS_CALLS 1024             /* ints in a pid's row: one page */
long nprocs = 4, rounds = 20, cap = 0;
static long gs_indices(void) { return rounds * 8; }
unsigned long seed = 1;
const char *mode = "lock";
/* globals mode: ordinary globals of the program (not G_MALLOC memory) */
long *g_list;                     /* set by pid 0 in the parallel section, followed by all */
long g_counter;                   /* incremented under token_lock */
long g_turn;                      /* the token, under token_lock */
unsigned char g_bytes[2 * 4096];  /* byte i written by pid i % nprocs */
long g_seen[MAX_PROCS];           /* what each pid saw of g_counter after the last barrier */

static unsigned long rnd(unsigned long *s) {   /* xorshift64 */
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17; return *s;
}
static unsigned long op_seed(long pid, long phase) { return (seed * 1000003ul + (unsigned long)pid * 7919ul + (unsigned long)phase * 104729ul) | 1ul; }

static void failed(long pid, const char *what, long a, long b, long c)
{
    if (Global->fails[pid]++ < 3)
        fprintf(stderr, "litmus %s: pid %ld: %s (%ld, %ld, %ld)\n", mode, pid, what, a, b, c);
}

static void lock_mode(long pid)
{
    long k, i, t;
    for (k = 0; k < rounds; k++) {
        for (;;) {                       /* wait for this pid's turn: LOCK is the acquire */
            LOCK(Global->token_lock)
            t = Global->turn;
            if (t % nprocs == pid) break;
            UNLOCK(Global->token_lock)
        }
        for (i = 0; i < 3 * PAGE_WORDS; i++)
            if (pages[i] != (int)t) { failed(pid, "token pages after acquire (turn, word, seen)", t, i, pages[i]); break; }
        for (i = 0; i < 3 * PAGE_WORDS; i++) pages[i] = (int)(t + 1);
        Global->turn = t + 1;
        UNLOCK(Global->token_lock)
    }
}

static void barrier_mode(long pid)
{
    long k, i, words = 4 * PAGE_WORDS;
    for (k = 1; k <= rounds; k++) {
        for (i = pid; i < words; i += nprocs) pages[i] = (int)(k * 1000 + pid);
        BARRIER(Global->bar, nprocs)
        for (i = 0; i < words; i++)
            if (pages[i] != (int)(k * 1000 + i % nprocs)) { failed(pid, "word after barrier (phase, word, seen)", k, i, pages[i]); break; }
        BARRIER(Global->bar, nprocs)
    }
}

static void false_mode(long pid)
{
    long k, j, i, words = 2 * PAGE_WORDS;
    for (k = 1; k <= rounds; k++) {
        for (j = 0; j < 5; j++)                 /* several writes of each word in one interval */
            for (i = pid; i < words; i += nprocs) pages[i] = (int)(k * 100000 + j * 1000 + pid);
        BARRIER(Global->bar, nprocs)
        for (i = 0; i < words; i++)
            if (pages[i] != (int)(k * 100000 + 4 * 1000 + i % nprocs)) { failed(pid, "falsely shared word lost (phase, word, seen)", k, i, pages[i]); break; }
        BARRIER(Global->bar, nprocs)
    }
}

/* The value pid `owner`'s byte i holds after write j of phase k (a pattern whose bytes change). */
static unsigned char byte_value(long k, long j, long i) { return (unsigned char)(k * 31 + j * 7 + i * 13 + 1); }

static void bytes_mode(long pid, unsigned char *b, long nbytes, const char *what)
{
    long k, j, i;
    for (k = 1; k <= rounds; k++) {
        for (j = 0; j < 4; j++)                 /* several writes, the last the value of write 0 */
            for (i = pid; i < nbytes; i += nprocs) b[i] = byte_value(k, j == 3 ? 0 : j, i);
        BARRIER(Global->bar, nprocs)
        for (i = 0; i < nbytes; i++)
            if (b[i] != byte_value(k, 0, i)) { failed(pid, what, k, i, b[i]); break; }
        BARRIER(Global->bar, nprocs)
    }
}

static void globals_mode(long pid)
{
    long k, i, t;
    if (pid == 0) {
        g_list = (long *) G_MALLOC(100 * sizeof(long));
        for (i = 0; i < 100; i++) g_list[i] = i * i;
    }
    BARRIER(Global->bar, nprocs)
    if (g_list == NULL) failed(pid, "the global pointer pid 0 set is null after the barrier", 0, 0, 0);
    else for (i = 0; i < 100; i++) if (g_list[i] != i * i) { failed(pid, "global pointer's data", i, g_list[i], 0); break; }
    for (k = 0; k < rounds; k++) {
        LOCK(Global->token_lock)
        g_counter++;
        UNLOCK(Global->token_lock)
    }
    BARRIER(Global->bar, nprocs)
    g_seen[pid] = g_counter;
    if (g_counter != rounds * nprocs) failed(pid, "global counter after the barrier (seen, expected)", g_counter, rounds * nprocs, 0);
    bytes_mode(pid, g_bytes, sizeof g_bytes, "global byte lost (phase, byte, seen)");
    for (k = 0; k < rounds; k++) {              /* the token, in a global */
        for (;;) {
            LOCK(Global->token_lock)
            t = g_turn;
            if (t % nprocs == pid) break;
            UNLOCK(Global->token_lock)
        }
        g_turn = t + 1;
        UNLOCK(Global->token_lock)
    }
}

static void stress_mode(long pid)
{
    long ph, o, i, l;
    unsigned long s, v, x, sum;
    for (ph = 0; ph < rounds; ph++) {
        s = op_seed(pid, ph);
        for (o = 0; o < OPS; o++) {
            i = (long)(rnd(&s) % CELLS);
            v = rnd(&s) % 1000;
            l = i % LOCKS;
            ALOCK(Global->cell_locks, l)
            x = cells[i];
            cells[i] = x * 3 + v;
            if (Global->log_len[l] < cap) {
                struct LogEntry *e = &logs[l * cap + Global->log_len[l]];
                e->pid = pid; e->idx = i; e->seen = x; e->v = v;
            }
            Global->log_len[l]++;
            AULOCK(Global->cell_locks, l)
        }
        BARRIER(Global->bar, nprocs)
        for (sum = 0, i = 0; i < CELLS; i++) sum = sum * 1099511628211ul + cells[i];
        phase_sums[ph * nprocs + pid] = sum;
        BARRIER(Global->bar, nprocs)
    }
}

static void getsub_mode(long pid)
{
    long call, k, q, j;
    for (call = 1; call < GS_CALLS; call++) {
        marks[pid * GS_CALLS + call] = 1;     /* written before this call's GETSUB */
        GETSUB(Global->gs, k, gs_indices() - 1, nprocs)
        if (k < 0) break;
        taken[k] = pid * GS_CALLS + call;
        for (q = 0; q < nprocs; q++) {        /* the last mark of each pid this taker sees */
            for (j = GS_CALLS - 1; j > 0 && !marks[q * GS_CALLS + j]; j--) ;
            saw[k * nprocs + q] = j;
        }
    }
}

static long check_getsub(void)
{
    long bad = 0, k, q, j, need[MAX_PROCS];
    for (q = 0; q < nprocs; q++) need[q] = 0;
    for (k = 0; k < gs_indices(); k++) {
        /* every call that got an index below k was marked before it: the taker of k must see it */
        for (q = 0; q < nprocs; q++)
            if (saw[k * nprocs + q] < need[q] && bad++ < 3)
                printf("FAIL: the taker of index %ld saw pid %ld's mark of call %ld, but that pid's call %ld got an "
                       "earlier index\n", k, q, saw[k * nprocs + q], need[q]);
        j = taken[k];
        if (j <= 0) { printf("FAIL: index %ld was never taken\n", k); return bad + 1; }
        if (j % GS_CALLS > need[j / GS_CALLS]) need[j / GS_CALLS] = j % GS_CALLS;
    }
    return bad;
}

void slave(void)
{
    long pid;
    GET_PID(pid);
    BARRIER(Global->bar, nprocs)
    if (!strcmp(mode, "lock")) lock_mode(pid);
    else if (!strcmp(mode, "barrier")) barrier_mode(pid);
    else if (!strcmp(mode, "false")) false_mode(pid);
    else if (!strcmp(mode, "getsub")) getsub_mode(pid);
    else if (!strcmp(mode, "bytes")) bytes_mode(pid, (unsigned char *) pages, 2 * 4096, "falsely shared byte lost (phase, byte, seen)");
    else if (!strcmp(mode, "globals")) globals_mode(pid);
    else stress_mode(pid);
}

/* After WAIT_FOR_END: the sequential model of the stress mode. */
static long check_stress(void)
{
    static unsigned long model[CELLS];
    long bad = 0, l, e, p, ph, i;
    long pos[LOCKS];
    memset(model, 0, sizeof model);
    for (l = 0; l < LOCKS; l++) pos[l] = 0;
    for (l = 0; l < LOCKS; l++)
        if (Global->log_len[l] > cap) { printf("FAIL: log of lock %ld overflowed\n", l); return 1; }
    /* Phase by phase (barriers order the phases); within a phase each lock's log is the order. */
    for (ph = 0; ph < rounds; ph++) {
        long expect[LOCKS];
        for (l = 0; l < LOCKS; l++) expect[l] = 0;
        for (p = 0; p < nprocs; p++) {   /* how many updates of each lock this phase has */
            unsigned long ss = op_seed(p, ph);
            long o;
            for (o = 0; o < OPS; o++) { i = (long)(rnd(&ss) % CELLS); rnd(&ss); expect[i % LOCKS]++; }
        }
        for (l = 0; l < LOCKS; l++)
            for (e = 0; e < expect[l]; e++) {
                struct LogEntry *en = &logs[l * cap + pos[l] + e];
                unsigned long x;
                if (en->pid < 0 || en->pid >= nprocs) { printf("FAIL: lock %ld log entry %ld: pid %ld\n", l, pos[l] + e, en->pid); return 1; }
                p = en->pid;
                if (en->seen != model[en->idx] && bad++ < 3)
                    printf("FAIL: phase %ld lock %ld update %ld by pid %ld read %lu of cell %ld, the sequential model has %lu\n",
                           ph, l, pos[l] + e, p, en->seen, en->idx, model[en->idx]);
                x = model[en->idx];
                model[en->idx] = x * 3 + en->v;
            }
        for (l = 0; l < LOCKS; l++) pos[l] += expect[l];
        for (p = 1; p < nprocs; p++)
            if (phase_sums[ph * nprocs + p] != phase_sums[ph * nprocs] && bad++ < 3)
                printf("FAIL: after the barrier of phase %ld pid %ld saw a different array than pid 0\n", ph, p);
    }
    for (l = 0; l < LOCKS; l++)
        if (pos[l] != Global->log_len[l]) { printf("FAIL: lock %ld: %ld updates logged, %ld made\n", l, Global->log_len[l], pos[l]); bad++; }
    for (i = 0; i < CELLS; i++)
        if (cells[i] != model[i] && bad++ < 3) printf("FAIL: cell %ld is %lu, the sequential model %lu\n", i, cells[i], model[i]);
    return bad;
}

int main(int argc, char **argv)
{
    long i, bad = 0, a;
    MAIN_INITENV(,64000000)
    if (argc < 2) { fprintf(stderr, "usage: dsm_litmus lock|barrier|false|bytes|globals|stress|getsub [-p N] [-r ROUNDS] [-s SEED]\n"); return 2; }
    mode = argv[1];
    if (strcmp(mode, "lock") && strcmp(mode, "barrier") && strcmp(mode, "false") && strcmp(mode, "stress") &&
        strcmp(mode, "getsub") && strcmp(mode, "bytes") && strcmp(mode, "globals")) {
        fprintf(stderr, "dsm_litmus: mode %s: allowed are lock, barrier, false, bytes, globals, stress, getsub\n", mode);
        return 2;
    }
    for (a = 2; a + 1 < argc; a += 2) {
        if (!strcmp(argv[a], "-p")) nprocs = atol(argv[a + 1]);
        else if (!strcmp(argv[a], "-r")) rounds = atol(argv[a + 1]);
        else if (!strcmp(argv[a], "-s")) seed = strtoul(argv[a + 1], 0, 10);
        else { fprintf(stderr, "dsm_litmus: unknown flag %s\n", argv[a]); return 2; }
    }
    if (nprocs < 1 || nprocs > MAX_PROCS || rounds < 1) { fprintf(stderr, "dsm_litmus: -p 1..%d, -r >= 1\n", MAX_PROCS); return 2; }
    Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
    memset(Global, 0, sizeof *Global);
    pages = (int *) G_MALLOC(5 * 4096);
    pages = (int *) (((unsigned long) pages + 4095) & ~4095ul);   /* page-aligned: 4 whole pages */
    memset(pages, 0, 4 * 4096);
    cap = OPS * nprocs * rounds;
    cells = (unsigned long *) G_MALLOC(CELLS * sizeof(unsigned long));
    logs = (struct LogEntry *) G_MALLOC(LOCKS * cap * sizeof(struct LogEntry));
    phase_sums = (unsigned long *) G_MALLOC(rounds * nprocs * sizeof(unsigned long));
    memset(cells, 0, CELLS * sizeof(unsigned long));
    marks = (int *) G_MALLOC((nprocs + 1) * GS_CALLS * sizeof(int));
    marks = (int *) (((unsigned long) marks + 4095) & ~4095ul);
    memset(marks, 0, nprocs * GS_CALLS * sizeof(int));
    saw = (long *) G_MALLOC(gs_indices() * nprocs * sizeof(long));
    taken = (long *) G_MALLOC(gs_indices() * sizeof(long));
    memset(saw, 0, gs_indices() * nprocs * sizeof(long));
    memset(taken, 0, gs_indices() * sizeof(long));
    GSINIT(Global->gs)
    LOCKINIT(Global->token_lock)
    ALOCKINIT(Global->cell_locks, LOCKS)
    BARINIT(Global->bar, nprocs)
    CREATE(slave, nprocs)
    WAIT_FOR_END(nprocs)
    for (i = 0; i < nprocs; i++) bad += Global->fails[i];
    if (!strcmp(mode, "lock") && Global->turn != rounds * nprocs) { printf("FAIL: turn %ld, expected %ld\n", Global->turn, rounds * nprocs); bad++; }
    if (!strcmp(mode, "stress")) bad += check_stress();
    if (!strcmp(mode, "globals")) {   /* main's epilogue reads the globals the threads wrote */
        if (g_counter != rounds * nprocs || g_turn != rounds * nprocs) { printf("FAIL: globals after WAIT_FOR_END: counter %ld, turn %ld, expected %ld\n", g_counter, g_turn, rounds * nprocs); bad++; }
        for (i = 0; i < nprocs; i++) if (g_seen[i] != rounds * nprocs) { printf("FAIL: pid %ld saw the global counter at %ld\n", i, g_seen[i]); bad++; }
    }
    if (!strcmp(mode, "getsub")) bad += check_getsub();
    if (bad) { printf("FAIL litmus %s: %ld checks failed\n", mode, bad); exit(1); }
    printf("PASS litmus %s: %ld processes, %ld rounds\n", mode, nprocs, rounds);
    MAIN_END
}
