/* mpi_bench.c: the MPI programs of `iccs bench mpi` (perf/bench_mpi.cpp), written to the MPI
   standard and built with mpicc: the same binary runs over every path the benchmark compares.
   Ranks 0 .. N/2-1 are one cluster, N/2 .. N-1 the other; a pair is (i, i + N/2), so every pair
   crosses the clusters. Rank 0 prints one line per figure: "KIND SIZE VALUE" (median of reps).
   SIZE: 0, 8, 64, 512, 4 KiB, 32 KiB, 64 KiB, 256 KiB, 1 MiB, 4 MiB (--quick: 8, 64 KiB, 1 MiB).
     latency SIZE US         ping-pong between ranks 0 and N/2, one way (half the round trip)
     bandwidth SIZE MB_S     ranks 0 -> N/2: a window of 64 non-blocking sends, then a 0-byte ack
     msgrate 8 MSGS_PER_S    every pair at once: windows of 64 8-byte messages each way
     barrier 0 US            MPI_Barrier over all ranks
     allreduce SIZE US       MPI_Allreduce (doubles, sum) over all ranks
   Usage: mpi_bench [--max-size BYTES] [--reps R] [--quick] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;
static int reps = 5;

static int cmp(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}
static double median(double* v, int n) {
    qsort(v, n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Iterations for a size: about 2 MB moved per timed repetition, at least 10, at most 1000. */
static int iters_for(long n) {
    long it = n > 0 ? (2L << 20) / n : 1000;
    return it < 10 ? 10 : it > 1000 ? 1000 : (int)it;
}

static void latency(char* buf, long n) {
    const int peer = size / 2;
    const int it = iters_for(n);
    double t[64];
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        for (int i = 0; i < it; i++) {
            if (rank == 0) {
                MPI_Send(buf, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == peer) {
                MPI_Recv(buf, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
            }
        }
        t[r] = (MPI_Wtime() - t0) / it / 2 * 1e6;
    }
    if (rank == 0) printf("latency %ld %.3f\n", n, median(t + 1, reps - 1));  /* the first rep warms up */
}

static void bandwidth(char* buf, long n) {
    const int peer = size / 2, window = 64;
    const int rounds = iters_for(n * window) < 20 ? iters_for(n * window) : 20;
    MPI_Request rq[64];
    double t[64];
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        for (int k = 0; k < rounds; k++) {
            if (rank == 0) {
                for (int w = 0; w < window; w++) MPI_Isend(buf, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &rq[w]);
                MPI_Waitall(window, rq, MPI_STATUSES_IGNORE);
                MPI_Recv(NULL, 0, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == peer) {
                /* one buffer for the whole window, as the public suites do: only the time counts */
                for (int w = 0; w < window; w++) MPI_Irecv(buf, (int)n, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &rq[w]);
                MPI_Waitall(window, rq, MPI_STATUSES_IGNORE);
                MPI_Send(NULL, 0, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
            }
        }
        const double s = MPI_Wtime() - t0;
        t[r] = (double)n * window * rounds / s / 1e6;
    }
    if (rank == 0) printf("bandwidth %ld %.3f\n", n, median(t + 1, reps - 1));
}

static void msgrate(void) {
    const int window = 64, rounds = 200, half = size / 2;
    const int peer = rank < half ? rank + half : rank - half;
    char s[8] = {0}, rbuf[64][8];
    MPI_Request rq[128];
    double t[64];
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        for (int k = 0; k < rounds; k++) {
            for (int w = 0; w < window; w++) MPI_Irecv(rbuf[w], 8, MPI_BYTE, peer, 4, MPI_COMM_WORLD, &rq[w]);
            for (int w = 0; w < window; w++) MPI_Isend(s, 8, MPI_BYTE, peer, 4, MPI_COMM_WORLD, &rq[window + w]);
            MPI_Waitall(2 * window, rq, MPI_STATUSES_IGNORE);
        }
        double mine = MPI_Wtime() - t0, longest = 0;
        MPI_Reduce(&mine, &longest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        t[r] = (double)size * window * rounds / longest; /* messages sent by all ranks per second */
    }
    if (rank == 0) printf("msgrate 8 %.1f\n", median(t + 1, reps - 1));
}

static void barrier(void) {
    const int it = 200;
    double t[64];
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        for (int i = 0; i < it; i++) MPI_Barrier(MPI_COMM_WORLD);
        t[r] = (MPI_Wtime() - t0) / it * 1e6;
    }
    if (rank == 0) printf("barrier 0 %.3f\n", median(t + 1, reps - 1));
}

static void allreduce(long bytes) {
    const int n = (int)(bytes / 8), it = iters_for(bytes) > 200 ? 200 : iters_for(bytes);
    double* in = calloc(n, sizeof(double));
    double* out = calloc(n, sizeof(double));
    double t[64];
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        for (int i = 0; i < it; i++) MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        t[r] = (MPI_Wtime() - t0) / it * 1e6;
    }
    if (rank == 0) printf("allreduce %ld %.3f\n", bytes, median(t + 1, reps - 1));
    free(in);
    free(out);
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long max = 4L << 20;
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--max-size") && i + 1 < argc) max = atol(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick")) quick = 1;
    }
    if (reps < 2) reps = 2;
    if (reps > 64) reps = 64;
    if (size < 2 || size % 2) {
        if (rank == 0) fprintf(stderr, "mpi_bench: an even number of ranks, at least 2\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    static const long sizes[] = {0, 8, 64, 512, 4096, 32768, 65536, 262144, 1 << 20, 4 << 20};
    static const long quick_sizes[] = {8, 65536, 1 << 20};
    const long* sz = quick ? quick_sizes : sizes;
    const int nsz = quick ? 3 : 10;
    char* buf = malloc((size_t)max + 64);
    memset(buf, 1, (size_t)max + 64);
    for (int k = 0; k < nsz; k++)
        if (sz[k] <= max) latency(buf, sz[k]);
    for (int k = 0; k < nsz; k++)
        if (sz[k] > 0 && sz[k] <= max) bandwidth(buf, sz[k]);
    msgrate();
    barrier();
    allreduce(8);
    allreduce(65536);
    if (rank == 0) fflush(stdout);
    free(buf);
    MPI_Finalize();
    return 0;
}
