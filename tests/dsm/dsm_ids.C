/* dsm_ids.C: threads that number themselves, as SPLASH-3's programs do first thing in the thread
 * function (LOCK(idlock); id = next++; UNLOCK(idlock)) and then cut their arrays by that id.
 *   usage: dsm_ids NPROCS THREADS_PER_CLUSTER [LATE_US [WORK_US]]
 * Cluster 0's threads reach their LOCK LATE_US (default 5000) late: with no order among the
 * clusters' first LOCKs, the other clusters' threads take the first ids. Main's epilogue checks
 * that the ids follow the clusters (the threads of cluster c hold ids c*T .. c*T+T-1, T threads a
 * cluster; dsm/README.md, "Thread ids follow the clusters") and prints one line: PASS, or FAIL
 * naming the first id on another cluster; exit status 0 or 1.
 * With WORK_US, cluster 0's threads then compute WORK_US (wall clock) with no sync operation
 * before the barrier, as SPLASH-3 radix generates its keys, and the check is also that no thread
 * of another cluster waited WORK_US / 2 or more in its LOCK of the id lock: the token cluster 0
 * released must come back at once, not at cluster 0's next sync operation.
 */
MAIN_ENV

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAXP 64

struct GlobalMemory {
    LOCKDEC(idlock)
    BARDEC(bar)
    long next;
    long cluster_of[MAXP];
    long lock_wait_us[MAXP];
};

struct GlobalMemory *Global;
long nprocs = 4, per_cluster = 2, late_us = 5000, work_us = 0;

static long now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000L + t.tv_nsec / 1000;
}

void worker(void)
{
    long id, cl = 0, t0, waited;
    const char *r = getenv("ICCS_CLUSTER");
    if (r != NULL) cl = atol(r);
    if (cl == 0) usleep((useconds_t)late_us);
    t0 = now_us();
    LOCK(Global->idlock)
    waited = now_us() - t0;
    id = Global->next;
    Global->next = id + 1;
    UNLOCK(Global->idlock)
    if (cl == 0 && work_us > 0)
        for (t0 = now_us(); now_us() - t0 < work_us;)
            ;
    Global->cluster_of[id] = cl;
    Global->lock_wait_us[id] = waited;
    BARRIER(Global->bar, nprocs)
}

int main(int argc, char **argv)
{
    long i;
    MAIN_INITENV(,4000000)
    if (argc < 3) { fprintf(stderr, "usage: dsm_ids NPROCS THREADS_PER_CLUSTER [LATE_US]\n"); return 2; }
    nprocs = atol(argv[1]);
    per_cluster = atol(argv[2]);
    if (argc > 3) late_us = atol(argv[3]);
    if (argc > 4) work_us = atol(argv[4]);
    if (nprocs < 1 || nprocs > MAXP || per_cluster < 1) { fprintf(stderr, "dsm_ids: bad NPROCS or THREADS\n"); return 2; }
    Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
    memset((void *)Global, 0, sizeof *Global);
    LOCKINIT(Global->idlock)
    BARINIT(Global->bar, nprocs)
    CREATE(worker, nprocs)
    WAIT_FOR_END(nprocs)
    for (i = 0; i < nprocs; i++)
        if (Global->cluster_of[i] != i / per_cluster) {
            printf("dsm_ids: FAIL: id %ld went to a thread of cluster %ld, not %ld\n", i, Global->cluster_of[i],
                   i / per_cluster);
            exit(1);
        }
    for (i = per_cluster; i < nprocs && work_us > 0; i++)
        if (Global->lock_wait_us[i] >= work_us / 2) {
            printf("dsm_ids: FAIL: id %ld waited %ld us in its LOCK of the id lock while cluster 0 computed %ld us "
                   "without a sync operation\n", i, Global->lock_wait_us[i], work_us);
            exit(1);
        }
    printf("dsm_ids: PASS: %ld ids, cluster c's threads hold ids %ld*c .. %ld*c+%ld\n", nprocs, per_cluster,
           per_cluster, per_cluster - 1);
    MAIN_END
}
