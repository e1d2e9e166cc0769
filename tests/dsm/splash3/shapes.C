/* shapes.C: the shapes of sharing and of CREATE that SPLASH-3's programs rely on beyond the macro
 * table (our own code, written from the patterns; dsm/README.md "Conformance"). Usage: SHAPES -p P.
 * Every check prints one line, the same under any backend:
 *   pointer   a global pointer one thread sets in the parallel section (to memory it allocates),
 *             followed by every thread after a barrier (fmm keeps its box tree's root so)
 *   counter   a global counter every thread increments under a lock, read by all after a barrier
 *             and by main after WAIT_FOR_END (water's and barnes's globals)
 *   bytes     threads writing different bytes of the same words (volrend's 1- and 2-byte pixels)
 *   creates   five CREATEs with no WAIT_FOR_END between them, each thread function ending in a
 *             barrier with main, main resetting a shared index and a global between them
 *             (volrend); then a CREATE after WAIT_FOR_END
 *   epilogue  main's code after WAIT_FOR_END runs once: it appends a line to shapes.log in the
 *             working directory (the caller checks it holds one line) and returns a block to a
 *             free list in shared memory (raytrace frees its framebuffer from its own allocator;
 *             fmm writes a file) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
MAIN_ENV

#define MAXP 64
#define NBYTES 8192

struct GlobalMemory {
    LOCKDEC(lock)
    LOCKDEC(index_lock)
    BARDEC(bar)
    long index;              /* handed out under index_lock, reset by main before each CREATE */
    long phase_sum[6];       /* per CREATE: the sum of the ids threads took */
    long free_blocks;        /* the epilogue's free list: blocks on it */
    unsigned char pixels[NBYTES];
};

struct GlobalMemory *Global;
long nprocs = 4;
long *tree_root;             /* set by pid 0 inside the parallel section */
long counter;                /* under Global->lock */
long seen_counter[MAXP];
long seen_root[MAXP];
long phase_of_main;          /* a global main sets before each CREATE */
long phase_seen[6][MAXP];
unsigned char gbytes[NBYTES]; /* global bytes shared the same way */
long lost[MAXP], glost[MAXP];  /* bytes each thread found wrong */

void Work(void)
{
    long pid, i, k, bad = 0;
    GET_PID(pid)
    if (pid == 0) {
        tree_root = (long *) G_MALLOC_F(64 * sizeof(long));
        for (i = 0; i < 64; i++) tree_root[i] = 3 * i + 1;
    }
    BARRIER(Global->bar, nprocs)
    for (i = 0; tree_root != NULL && i < 64; i++) bad += tree_root[i] != 3 * i + 1;
    seen_root[pid] = tree_root == NULL ? -1 : bad;
    for (k = 0; k < 25; k++) {
        LOCK(Global->lock)
        counter++;
        UNLOCK(Global->lock)
    }
    BARRIER(Global->bar, nprocs)
    seen_counter[pid] = counter;
    /* 8 rounds: each thread writes its bytes (byte i is thread i mod P's) twice, then every thread
     * checks every byte after a barrier */
    for (k = 1; k <= 8; k++) {
        for (i = pid; i < NBYTES; i += nprocs) {
            Global->pixels[i] = (unsigned char) (i * 7 + k + 100);
            gbytes[i] = (unsigned char) (i * 11 + k + 100);
            Global->pixels[i] = (unsigned char) (i * 7 + k);
            gbytes[i] = (unsigned char) (i * 11 + k);
        }
        BARRIER(Global->bar, nprocs)
        for (i = 0; i < NBYTES; i++) {
            lost[pid] += Global->pixels[i] != (unsigned char) (i * 7 + k);
            glost[pid] += gbytes[i] != (unsigned char) (i * 11 + k);
        }
        BARRIER(Global->bar, nprocs)
    }
}

/* One of the five CREATEs: ids taken under a lock from an index main reset, then a barrier that
 * main's own call meets as well (as volrend's functions end). */
void Phase(void)
{
    long id, ph = phase_of_main;
    LOCK(Global->index_lock)
    id = Global->index++;
    Global->phase_sum[ph] += id;
    UNLOCK(Global->index_lock)
    GET_PID(id)
    phase_seen[ph][id] = ph;
    BARRIER(Global->bar, nprocs)
}

int main(int argc, char **argv)
{
    long p, ph, bad_bytes = 0, bad_gbytes = 0, bad_root = 0, bad_counter = 0, bad_phase = 0;
    FILE *log;
    if (argc == 3 && strcmp(argv[1], "-p") == 0) nprocs = atol(argv[2]);
    if (nprocs < 1 || nprocs > MAXP) { fprintf(stderr, "usage: SHAPES -p P (1..64)\n"); exit(2); }
    MAIN_INITENV(,80000000)
    Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
    memset(Global, 0, sizeof(struct GlobalMemory));
    LOCKINIT(Global->lock)
    LOCKINIT(Global->index_lock)
    BARINIT(Global->bar, nprocs)
    printf("shapes: %ld processes\n", nprocs);

    CREATE(Work, nprocs)
    WAIT_FOR_END(nprocs)
    for (p = 0; p < nprocs; p++) {
        bad_root += seen_root[p] != 0;
        bad_counter += seen_counter[p] != 25 * nprocs;
    }
    for (p = 0; p < nprocs; p++) {
        bad_bytes += lost[p];
        bad_gbytes += glost[p];
    }
    printf("pointer: a global pointer set by one thread, followed by %ld threads after a barrier: %s\n", nprocs,
           bad_root ? "WRONG" : "right");
    printf("counter: a global counter under a lock: %ld after the threads ended, every thread saw %s after the barrier\n",
           counter, bad_counter ? "another value" : "the total");
    printf("bytes: threads writing different bytes of one word, 8 rounds: %ld shared and %ld global bytes seen wrong\n",
           bad_bytes, bad_gbytes);

    /* main's code after the threads ended: once */
    Global->free_blocks++;
    log = fopen("shapes.log", "a");
    if (log == NULL) { perror("shapes.log"); exit(1); }
    fprintf(log, "epilogue of a run of %ld processes\n", nprocs);
    fclose(log);

    /* five CREATEs without WAIT_FOR_END (main takes part in each, then creates the next) */
    for (ph = 0; ph < 5; ph++) {
        Global->index = 0;
        phase_of_main = ph;
        CREATE(Phase, nprocs)
    }
    WAIT_FOR_END(nprocs)
    /* and one CREATE after WAIT_FOR_END */
    Global->index = 0;
    phase_of_main = 5;
    CREATE(Phase, nprocs)
    WAIT_FOR_END(nprocs)
    for (ph = 0; ph < 6; ph++) {
        bad_phase += Global->phase_sum[ph] != nprocs * (nprocs - 1) / 2;
        for (p = 0; p < nprocs; p++) bad_phase += phase_seen[ph][p] != ph;
    }
    printf("creates: five creates with no wait between them, then one after a wait: %s\n", bad_phase ? "WRONG" : "right");

    printf("epilogue: free list holds %ld block(s)\n", Global->free_blocks);
    if (bad_root || bad_counter || bad_bytes || bad_gbytes || bad_phase || Global->free_blocks != 1 ||
        counter != 25 * nprocs) {
        printf("FAIL\n");
        exit(1);
    }
    printf("PASS\n");
    MAIN_END
}
