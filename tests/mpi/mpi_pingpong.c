/* mpi_pingpong.c: an 8-byte ping-pong between rank 0 and the first rank of the other cluster (the
   pattern of a latency benchmark: each side sends, then sleeps in its CQ wait for the answer),
   every message checked. Rank 0 prints the median one-way time ("rank 0: one way median X us over
   N rounds"); the launcher's check reads the ranks' counters from the report (run_mpi_cli.py
   --wakes). Other ranks only take part in the final barrier. Usage: mpi_pingpong [ROUNDS
   [MAX_FAULTS]] (default 2000). MAX_FAULTS: each of the two ranks fails if its process took more
   page faults than that during the rounds (every thread's: an in-rank cluster's proxies run in
   it), from the first round on: no packet buffer or memif slot may be mapped at its first use
   (proxy/dpdk_pool.hpp, populate_dpdk_memory). */
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>

#include "mpi_check.h"

static long page_faults(void) {
    struct rusage u;
    CHECK(getrusage(RUSAGE_SELF, &u) == 0);
    return u.ru_minflt + u.ru_majflt;
}

static int by_value(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

int main(int argc, char** argv) {
    int rank, size;
    mpi_check_init(&argc, &argv, &rank, &size);
    CHECK(size >= 2 && size % 2 == 0);
    const long rounds = argc > 1 ? atol(argv[1]) : 2000;
    CHECK(rounds > 0);
    const long max_faults = argc > 2 ? atol(argv[2]) : -1;
    const int peer = rank == 0 ? size / 2 : 0; /* the first rank of the other cluster (2 x 1, 2 x 2) */
    double* one_way = malloc(sizeof(double) * (size_t)rounds);
    CHECK(one_way != NULL);
    memset(one_way, 0, sizeof(double) * (size_t)rounds); /* its pages mapped before the rounds */
    /* Counting faults: the clusters up first (an in-rank cluster comes up behind the rank's first
       calls, and maps its pools then: those faults are the start's, not the rounds'). */
    if (max_faults >= 0) CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0 || rank == size / 2) {
        const long faults_before = page_faults();
        for (long i = 0; i < rounds; ++i) {
            uint64_t out = ((uint64_t)rank << 32) | (uint64_t)i, in = 0;
            const double t0 = MPI_Wtime();
            if (rank == 0) {
                CHECK_MPI(MPI_Send(&out, 8, MPI_BYTE, peer, 5, MPI_COMM_WORLD));
                CHECK_MPI(MPI_Recv(&in, 8, MPI_BYTE, peer, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            } else {
                CHECK_MPI(MPI_Recv(&in, 8, MPI_BYTE, peer, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                CHECK_MPI(MPI_Send(&out, 8, MPI_BYTE, peer, 5, MPI_COMM_WORLD));
            }
            one_way[i] = (MPI_Wtime() - t0) * 1e6 / 2;
            CHECK(in == (((uint64_t)peer << 32) | (uint64_t)i));
        }
        const long faults = page_faults() - faults_before;
        if (max_faults >= 0) {
            printf("rank %d: %ld page faults over %ld rounds\n", rank, faults, rounds);
            fflush(stdout);
        }
        if (max_faults >= 0 && faults > max_faults) {
            fprintf(stderr, "FAIL rank %d: %ld page faults over %ld rounds, more than %ld\n", rank, faults, rounds,
                    max_faults);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    if (rank == 0) {
        qsort(one_way, (size_t)rounds, sizeof(double), by_value);
        printf("rank 0: one way median %.2f us over %ld rounds\n", one_way[rounds / 2], rounds);
        fflush(stdout);
    }
    free(one_way);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    printf("PASS rank %d of %d\n", rank, size);
    MPI_Finalize();
    return 0;
}
