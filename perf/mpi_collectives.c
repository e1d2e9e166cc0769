/* mpi_collectives.c: the MPI program of `iccs bench mpi-collectives` (perf/bench_mpi_collectives.cpp).
 *
 * Linked with libiccs-magpie.so, it times each collective two ways in the same run, interleaved:
 * MPI_X (the library: MagPIe) and PMPI_X (the MPI library's own collectives: Open MPI's `tuned`,
 * or whatever module mpirun's --mca coll_* chose). Each measurement starts at one instant on
 * every rank: rank 0 broadcasts a start time far enough ahead (every rank is on this host and
 * reads one CLOCK_MONOTONIC), every rank sleeps until it, calls, and notes its end; the time is
 * the last end minus the start. The margin follows the start time's own slowest arrival (twice
 * it, at least --margin-ms, at most 2 s); a rank that got the start time late is noted. For the library's calls, the wide-area bytes of one call and
 * their minimum come from its counters (iccs_magpie_counter), summed over the ranks.
 *
 * Sizes are bytes per rank as in `iccs bench collectives`: bcast, reduce, allreduce, scan,
 * exscan and reduce_scatter_block move a vector of size/8 doubles (sum); gather, scatter,
 * allgather, alltoall and their v-forms a vector of size/8 doubles per rank in all (blocks of
 * size/8/P); barrier has no size. Rank 0 prints one line per measurement:
 *     m COLL SIZE IMPL REP TIME_US LATE WAN_BYTES WAN_BYTES_MIN
 * (IMPL magpie or mpi; REP 0 is the warm-up; the wide-area figures only for magpie).
 * Options: --sizes 8,1024,65536 --reps 5 --colls bcast,allreduce|all --margin-ms 50.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "iccs_magpie.h"

enum {
    BARRIER, BCAST, REDUCE, ALLREDUCE, GATHER, GATHERV, SCATTER, SCATTERV, ALLGATHER, ALLGATHERV, ALLTOALL,
    ALLTOALLV, REDUCE_SCATTER, REDUCE_SCATTER_BLOCK, SCAN, EXSCAN, NCOLLS
};
static const char* names[NCOLLS] = {"barrier", "bcast", "reduce", "allreduce", "gather", "gatherv", "scatter",
                                    "scatterv", "allgather", "allgatherv", "alltoall", "alltoallv", "reduce_scatter",
                                    "reduce_scatter_block", "scan", "exscan"};

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void sleep_until(int64_t at) {
    struct timespec t = {(time_t)(at / 1000000000), (long)(at % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) != 0) {
    }
}

static int P, me;
static double *a, *b;
static int *counts, *displs;

/* One call of collective k on n doubles per rank; magpie: the library's MPI_, else MPI's PMPI_. */
static int run(int k, int n, int magpie) {
    const int blk = n / P > 0 ? n / P : 1;
    MPI_Comm w = MPI_COMM_WORLD;
    for (int r = 0; r < P; ++r) counts[r] = blk, displs[r] = r * blk;
#define CALL(f, ...) (magpie ? MPI_##f(__VA_ARGS__) : PMPI_##f(__VA_ARGS__))
    switch (k) {
        case BARRIER: return CALL(Barrier, w);
        case BCAST: return CALL(Bcast, a, n, MPI_DOUBLE, 0, w);
        case REDUCE: return CALL(Reduce, a, b, n, MPI_DOUBLE, MPI_SUM, 0, w);
        case ALLREDUCE: return CALL(Allreduce, a, b, n, MPI_DOUBLE, MPI_SUM, w);
        case GATHER: return CALL(Gather, a, blk, MPI_DOUBLE, b, blk, MPI_DOUBLE, 0, w);
        case GATHERV: return CALL(Gatherv, a, blk, MPI_DOUBLE, b, counts, displs, MPI_DOUBLE, 0, w);
        case SCATTER: return CALL(Scatter, a, blk, MPI_DOUBLE, b, blk, MPI_DOUBLE, 0, w);
        case SCATTERV: return CALL(Scatterv, a, counts, displs, MPI_DOUBLE, b, blk, MPI_DOUBLE, 0, w);
        case ALLGATHER: return CALL(Allgather, a, blk, MPI_DOUBLE, b, blk, MPI_DOUBLE, w);
        case ALLGATHERV: return CALL(Allgatherv, a, blk, MPI_DOUBLE, b, counts, displs, MPI_DOUBLE, w);
        case ALLTOALL: return CALL(Alltoall, a, blk, MPI_DOUBLE, b, blk, MPI_DOUBLE, w);
        case ALLTOALLV: return CALL(Alltoallv, a, counts, displs, MPI_DOUBLE, b, counts, displs, MPI_DOUBLE, w);
        case REDUCE_SCATTER: return CALL(Reduce_scatter, a, b, counts, MPI_DOUBLE, MPI_SUM, w);
        case REDUCE_SCATTER_BLOCK: return CALL(Reduce_scatter_block, a, b, blk, MPI_DOUBLE, MPI_SUM, w);
        case SCAN: return CALL(Scan, a, b, n, MPI_DOUBLE, MPI_SUM, w);
        case EXSCAN: return CALL(Exscan, a, b, n, MPI_DOUBLE, MPI_SUM, w);
    }
#undef CALL
    return MPI_ERR_ARG;
}

static unsigned long long counter_sum(const char* coll, const char* field) {
    unsigned long long mine = iccs_magpie_counter(coll, field), sum = 0;
    PMPI_Reduce(&mine, &sum, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    return sum;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    long sizes[32] = {8, 1024, 65536};
    int nsizes = 3, reps = 5, use[NCOLLS];
    double margin_ms = 50;
    for (int k = 0; k < NCOLLS; ++k) use[k] = 1;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
            nsizes = 0;
            for (char* s = strtok(argv[++i], ","); s && nsizes < 32; s = strtok(NULL, ",")) sizes[nsizes++] = atol(s);
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--margin-ms") == 0 && i + 1 < argc) {
            margin_ms = atof(argv[++i]);
        } else if (strcmp(argv[i], "--colls") == 0 && i + 1 < argc) {
            const char* list = argv[++i];
            for (int k = 0; k < NCOLLS; ++k) {
                char want[64];
                snprintf(want, sizeof want, ",%s,", names[k]);
                char have[1024];
                snprintf(have, sizeof have, ",%s,", list);
                use[k] = strcmp(list, "all") == 0 || strstr(have, want) != NULL;
            }
        } else {
            if (me == 0) fprintf(stderr, "mpi_collectives: unknown argument %s\n", argv[i]);
            MPI_Finalize();
            return 2;
        }
    }
    long most = 1;
    for (int s = 0; s < nsizes; ++s)
        if (sizes[s] / 8 > most) most = sizes[s] / 8;
    a = malloc(sizeof(double) * (size_t)(most + P));
    b = malloc(sizeof(double) * (size_t)(most + P));
    counts = malloc(sizeof(int) * P);
    displs = malloc(sizeof(int) * P);
    for (long i = 0; i < most + P; ++i) a[i] = me + i % 7, b[i] = 0;
    const int64_t base_margin = (int64_t)(margin_ms * 1e6);
    int64_t margin = base_margin;
    int64_t* ends = malloc(sizeof(int64_t) * P);
    for (int rep = 0; rep <= reps; ++rep)
        for (int k = 0; k < NCOLLS; ++k) {
            if (!use[k]) continue;
            for (int s = 0; s < (k == BARRIER ? 1 : nsizes); ++s) {
                const long size = k == BARRIER ? 0 : sizes[s];
                const int n = size / 8 > 0 ? (int)(size / 8) : 1;
                for (int turn = 0; turn < 2; ++turn) {
                    const int magpie = (turn + rep) % 2 == 0; /* the order alternates between reps */
                    unsigned long long wan0 = 0, min0 = 0;
                    if (magpie) wan0 = counter_sum(names[k], "wan_bytes"), min0 = counter_sum(names[k], "wan_bytes_min");
                    PMPI_Barrier(MPI_COMM_WORLD);
                    int64_t when[2] = {now_ns(), 0}; /* sent at, start */
                    when[1] = when[0] + margin;
                    PMPI_Bcast(when, 2, MPI_INT64_T, 0, MPI_COMM_WORLD);
                    const int64_t start = when[1], took = now_ns() - when[0];
                    const int late = now_ns() > start;
                    sleep_until(start);
                    const int rc = run(k, n, magpie);
                    const int64_t end = now_ns();
                    if (rc != MPI_SUCCESS) {
                        fprintf(stderr, "mpi_collectives: rank %d: %s (%s) failed: %d\n", me, names[k],
                                magpie ? "magpie" : "mpi", rc);
                        MPI_Abort(MPI_COMM_WORLD, 1);
                    }
                    int any_late = 0;
                    int64_t slowest = 0;
                    PMPI_Gather(&end, 1, MPI_INT64_T, ends, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
                    PMPI_Allreduce(&late, &any_late, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
                    PMPI_Allreduce(&took, &slowest, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
                    /* The next margin: twice the slowest arrival of the start time, within [base, 2 s]. */
                    margin = 2 * slowest;
                    if (margin < base_margin) margin = base_margin;
                    if (margin > 2000000000) margin = 2000000000;
                    unsigned long long wan = 0, min = 0;
                    if (magpie) {
                        wan = counter_sum(names[k], "wan_bytes") - wan0;
                        min = counter_sum(names[k], "wan_bytes_min") - min0;
                    }
                    if (me == 0) {
                        int64_t last = start;
                        for (int r = 0; r < P; ++r)
                            if (ends[r] > last) last = ends[r];
                        printf("m %s %ld %s %d %.1f %d %llu %llu\n", names[k], size, magpie ? "magpie" : "mpi", rep,
                               (double)(last - start) / 1e3, any_late, wan, min);
                        fflush(stdout);
                    }
                }
            }
        }
    free(ends);
    MPI_Finalize();
    return 0;
}
