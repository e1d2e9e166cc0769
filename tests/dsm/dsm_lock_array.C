/* dsm_lock_array.C: an array of locks that every pid walks once a step, each from its own place in
 * it (SPLASH-3 water-nsquared's molecule locks: each process adds its partial forces to every
 * molecule under the molecule's lock, the processes half a turn apart).
 *   usage: dsm_lock_array NPROCS [STEPS]
 * NLOCKS locks guard NLOCKS values; in each of STEPS (default 4) steps pid p takes every lock once,
 * starting at lock p * NLOCKS / NPROCS, and adds p + 1 to its value; a barrier ends the step.
 * Main's epilogue checks every value (STEPS times the sum of 1..NPROCS) and prints PASS or FAIL
 * (the first wrong value); exit status 0 or 1. The test (tests/integration/dsm_run.py, lock-array)
 * also reads the clusters' counters: a token the other cluster's walk left there goes home with
 * the one before it (PROTOCOL.md, "Tokens home ahead"), so few acquires wait for a recall.
 */
MAIN_ENV

#include <stdlib.h>
#include <string.h>

#define NLOCKS 512

struct GlobalMemory {
    LOCKDEC(startlock)
    BARDEC(bar)
    ALOCKDEC(locks, NLOCKS)
    long next_pid;
    double value[NLOCKS];
};

struct GlobalMemory *Global;
long nprocs = 2, steps = 4;

void worker(void)
{
    long pid, s, k, i;
    LOCK(Global->startlock)
    pid = Global->next_pid++;
    UNLOCK(Global->startlock)
    BARRIER(Global->bar, nprocs)
    for (s = 0; s < steps; s++) {
        for (k = 0; k < NLOCKS; k++) {
            i = (pid * NLOCKS / nprocs + k) % NLOCKS;
            ALOCK(Global->locks, i)
            Global->value[i] += (double)(pid + 1);
            AULOCK(Global->locks, i)
        }
        BARRIER(Global->bar, nprocs)
    }
}

int main(int argc, char **argv)
{
    long i;
    double want;
    MAIN_INITENV(,4000000)
    if (argc > 1) nprocs = atol(argv[1]);
    if (argc > 2) steps = atol(argv[2]);
    Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
    memset((void *)Global, 0, sizeof *Global);
    LOCKINIT(Global->startlock)
    BARINIT(Global->bar, nprocs)
    ALOCKINIT(Global->locks, NLOCKS)
    CREATE(worker, nprocs)
    WAIT_FOR_END(nprocs)
    want = (double)steps * (double)(nprocs * (nprocs + 1) / 2);
    for (i = 0; i < NLOCKS; i++)
        if (Global->value[i] != want) {
            printf("dsm_lock_array: FAIL: value[%ld] = %.0f, want %.0f\n", i, Global->value[i], want);
            exit(1);
        }
    printf("dsm_lock_array: PASS: %d locks, %ld pids, %ld steps\n", NLOCKS, nprocs, steps);
    MAIN_END
}
