/* dsm_exit.C: a PARMACS program that calls exit() instead of reaching MAIN_END.
 *   usage: dsm_exit STATUS [NPROCS [WHERE]]
 * WHERE (default `after`):
 *   after         as the SPLASH applications do on a wrong answer: after WAIT_FOR_END, main calls
 *                 exit(STATUS). The run must end cleanly (tests/integration/dsm_run.py exit-status):
 *                 main's epilogue runs once (on cluster 0, whose exit ends the other clusters with
 *                 its status), every cluster process exits with STATUS, its DSM counters are
 *                 printed, nothing is left behind, `iccs run` exits with STATUS. The epilogue reads
 *                 every pid's result, from pages homed on every cluster: the other clusters keep
 *                 serving until cluster 0 ends the run.
 *   pid0-barrier  pid 0 (main, on cluster 0) calls exit(STATUS) inside the parallel section while
 *                 every other pid waits for it in a BARRIER
 *   pid0-lock     pid 0 holds a lock and calls exit(STATUS) while every other pid waits in LOCK
 *   pid0-fence    pid 0 calls exit(STATUS) between fences while every other pid spins on a flag
 *                 with ACQUIRE_FENCE (a flag that is never set)
 *   last-barrier  the last pid (on the last cluster) calls exit(STATUS) while every other pid
 *                 waits for it in a BARRIER
 * In the early modes the run cannot be met collectively: it must end within seconds (the exiting
 * cluster with STATUS, the others failing because it is down), never hang, nothing left behind.
 */
MAIN_ENV

#include <string.h>
#include <unistd.h>

struct GlobalMemory {
    LOCKDEC(lock)
    BARDEC(bar)
    long flag;   /* pid0-fence: never set */
};

struct GlobalMemory *Global;
long *v;
long nprocs = 4;
const char *where = "after";
int status = 0;

static void leave(long pid)
{
    fprintf(stderr, "dsm_exit: pid %ld calls exit(%d) in %s\n", pid, status, where);
    exit(status);
}

void slave(void)
{
    long pid;
    GET_PID(pid);
    v[pid * 1024] = pid + 1;   /* one page per pid: homes on every cluster */
    if (strcmp(where, "pid0-barrier") == 0) {
        if (pid == 0) { usleep(200000); leave(pid); }  /* the others reach BARRIER meanwhile */
        BARRIER(Global->bar, nprocs)
    } else if (strcmp(where, "last-barrier") == 0) {
        if (pid == nprocs - 1) { usleep(200000); leave(pid); }
        BARRIER(Global->bar, nprocs)
    } else if (strcmp(where, "pid0-lock") == 0) {
        if (pid == 0) { LOCK(Global->lock) usleep(200000); leave(pid); }
        usleep(50000);
        LOCK(Global->lock)
        UNLOCK(Global->lock)
    } else if (strcmp(where, "pid0-fence") == 0) {
        if (pid == 0) { RELEASE_FENCE; usleep(200000); leave(pid); }
        ACQUIRE_FENCE;
        while (Global->flag == 0)
            ACQUIRE_FENCE;
    }
}

int main(int argc, char **argv)
{
    long i, sum = 0;
    MAIN_INITENV(,4000000)
    if (argc < 2) { fprintf(stderr, "usage: dsm_exit STATUS [NPROCS [WHERE]]\n"); return 2; }
    status = atoi(argv[1]);
    if (argc > 2) nprocs = atol(argv[2]);
    if (argc > 3) where = argv[3];
    if (strcmp(where, "after") != 0 && strcmp(where, "pid0-barrier") != 0 && strcmp(where, "pid0-lock") != 0 &&
        strcmp(where, "pid0-fence") != 0 && strcmp(where, "last-barrier") != 0) {
        fprintf(stderr, "dsm_exit: unknown WHERE %s (after, pid0-barrier, pid0-lock, pid0-fence, last-barrier)\n", where);
        return 2;
    }
    Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
    memset((void *)Global, 0, sizeof *Global);
    LOCKINIT(Global->lock)
    BARINIT(Global->bar, nprocs)
    v = (long *) G_MALLOC(64 * 1024 * sizeof(long));
    CREATE(slave, nprocs)
    WAIT_FOR_END(nprocs)
    for (i = 0; i < nprocs; i++) sum += v[i * 1024];
    fprintf(stderr, "dsm_exit: sum %ld (expected %ld); exit(%s) without MAIN_END\n", sum, nprocs * (nprocs + 1) / 2, argv[1]);
    exit(sum == nprocs * (nprocs + 1) / 2 ? status : 99);
    MAIN_END
}
