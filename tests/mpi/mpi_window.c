/* mpi_window.c: streaming with a window, the pattern of a multi-pair bandwidth benchmark: the first
   half of the ranks send to the second half (rank r to r + size/2; 2 x 2: the pairs cross the
   clusters), each round a window of 64 non-blocking messages of 8 B .. 1 MiB and a 4-byte
   acknowledgement back. Every message is checked (its first and last 4 KiB, and one whole message
   of each window). With 2 ranks per cluster on 2 cores the senders wait for room in their rings to
   the agent (the provider's room wait). The pattern of OSU's osu_mbw_mr, which made a cluster's
   proxy go unrun for the peer time-out when the agent's bridges were pinned beside the proxies;
   this program did not reproduce that (it passed with them pinned): it checks the data.
   Usage: mpi_window [ROUNDS] (default 3). */
#include <string.h>

#include "mpi_check.h"

#define WINDOW 64
static const long kSizes[] = {8, 1024, 65536, 262144, 1 << 20};

static int ends_ok(const unsigned char* b, long n, int src, int dst, int k) {
    const long edge = n < 8192 ? n : 4096;
    for (long i = 0; i < edge; i++)
        if (b[i] != pattern(src, dst, k, i)) return 0;
    for (long i = n - edge; i < n; i++)
        if (b[i] != pattern(src, dst, k, i)) return 0;
    return 1;
}

int main(int argc, char** argv) {
    int rank, size;
    mpi_check_init(&argc, &argv, &rank, &size);
    CHECK(size >= 2 && size % 2 == 0);
    const int rounds = argc > 1 ? atoi(argv[1]) : 3;
    CHECK(rounds > 0);
    const int half = size / 2, sender = rank < half, peer = sender ? rank + half : rank - half;
    unsigned char** bufs = malloc(WINDOW * sizeof *bufs);
    for (int w = 0; w < WINDOW; w++) bufs[w] = malloc(1 << 20);
    MPI_Request req[WINDOW];
    for (int s = 0; s < (int)(sizeof kSizes / sizeof kSizes[0]); s++) {
        const long n = kSizes[s];
        for (int r = 0; r < rounds; r++) {
            const int k = s * 1000 + r;
            if (sender) {
                for (int w = 0; w < WINDOW; w++) fill(bufs[w], n, rank, peer, k + w);
                for (int w = 0; w < WINDOW; w++)
                    CHECK_MPI(MPI_Isend(bufs[w], (int)n, MPI_BYTE, peer, 7, MPI_COMM_WORLD, &req[w]));
                CHECK_MPI(MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE));
                int ack = 0;
                CHECK_MPI(MPI_Recv(&ack, 1, MPI_INT, peer, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                CHECK(ack == k);
            } else {
                for (int w = 0; w < WINDOW; w++)
                    CHECK_MPI(MPI_Irecv(bufs[w], (int)n, MPI_BYTE, peer, 7, MPI_COMM_WORLD, &req[w]));
                CHECK_MPI(MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE));
                for (int w = 0; w < WINDOW; w++) CHECK(ends_ok(bufs[w], n, peer, rank, k + w));
                CHECK(verify(bufs[r % WINDOW], n, peer, rank, k + r % WINDOW));
                CHECK_MPI(MPI_Send(&k, 1, MPI_INT, peer, 8, MPI_COMM_WORLD));
            }
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    printf("window PASS rank %d of %d\n", rank, size);
    for (int w = 0; w < WINDOW; w++) free(bufs[w]);
    free(bufs);
    MPI_Finalize();
    return 0;
}
