/* dsm_prefix_locks.C: a lock taken again and again by main before CREATE, as SPLASH-3 raytrace's
 * allocator does while its prefix builds the scene's hierarchy (GlobalMalloc under one lock), then
 * by every thread of CREATE.
 *   usage: dsm_prefix_locks NPROCS [ROUNDS [hold]]
 * The prefix runs ROUNDS (default 4000) LOCK / pop-push on a free list in shared memory / UNLOCK,
 * reading the clock every 20 rounds (every cluster but 0 waits there for cluster 0's value: the
 * clusters replay the prefix in step). After CREATE every pid takes the same lock 50 times to add
 * to a counter and move a free-list node. Main's epilogue checks the counter and the list and
 * prints PASS or FAIL; exit status 0 or 1. With `hold`, main still holds the lock at CREATE: the
 * run must stop with an error naming it. The test (tests/integration/dsm_run.py, prefix-locks)
 * reads each cluster's lock_requests: the prefix's LOCKs must ask no other cluster (each cluster
 * replays the prefix on its own copy; they passed the token back and forth: thousands of requests).
 */
MAIN_ENV

#include <stdlib.h>
#include <string.h>

#define NODES 64
#define PER_PID 50

struct GlobalMemory {
    LOCKDEC(memlock)
    BARDEC(bar)
    long head;            /* first free node, -1: none */
    long next[NODES];     /* the free list */
    long taken_in_prefix; /* nodes popped and pushed back before CREATE */
    long counter;         /* PER_PID from each pid */
};

struct GlobalMemory *Global;
long nprocs = 2;

/* Pop the first node and push it back at the end (the list stays whole). The lock held. */
static void cycle_list(void)
{
    long n = Global->head, k;
    Global->head = Global->next[n];
    Global->next[n] = -1;
    for (k = Global->head; Global->next[k] != -1; k = Global->next[k]) {
    }
    Global->next[k] = n;
}

void worker(void)
{
    long i;
    for (i = 0; i < PER_PID; i++) {
        LOCK(Global->memlock)
        Global->counter++;
        cycle_list();
        UNLOCK(Global->memlock)
    }
    BARRIER(Global->bar, nprocs)
}

int main(int argc, char **argv)
{
    long i, rounds = 4000, seen, k;
    unsigned long t;
    MAIN_INITENV(,4000000)
    if (argc > 1) nprocs = atol(argv[1]);
    if (argc > 2) rounds = atol(argv[2]);
    Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
    memset((void *)Global, 0, sizeof *Global);
    LOCKINIT(Global->memlock)
    BARINIT(Global->bar, nprocs)
    Global->head = 0;
    for (i = 0; i < NODES; i++) Global->next[i] = i + 1 < NODES ? i + 1 : -1;
    for (i = 0; i < rounds; i++) {
        if (i % 20 == 0) CLOCK(t)
        LOCK(Global->memlock)
        cycle_list();
        Global->taken_in_prefix++;
        UNLOCK(Global->memlock)
    }
    (void)t;
    if (argc > 3 && strcmp(argv[3], "hold") == 0) LOCK(Global->memlock)
    CREATE(worker, nprocs)
    WAIT_FOR_END(nprocs)
    for (seen = 0, k = Global->head; k != -1 && seen <= NODES; k = Global->next[k]) seen++;
    if (Global->counter != nprocs * PER_PID || Global->taken_in_prefix != rounds || seen != NODES) {
        printf("dsm_prefix_locks: FAIL: counter %ld (want %ld), prefix rounds %ld (want %ld), free list %ld nodes (want %d)\n",
               Global->counter, nprocs * PER_PID, Global->taken_in_prefix, rounds, seen, NODES);
        exit(1);
    }
    printf("dsm_prefix_locks: PASS: %ld rounds under the lock before CREATE, %ld pids x %d after\n", rounds, nprocs,
           PER_PID);
    MAIN_END
}
