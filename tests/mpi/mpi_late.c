/* mpi_late.c (tests/mpi, late-2x1-udp): the last rank enters MPI_Init SECONDS after the others (a rank whose start-up is slow:
   a loaded host, a large program to load), so its cluster's agent comes up that much later than the
   others, which are already connecting to it. Then every rank exchanges a checked message with
   every other rank and joins an allreduce. Usage: mpi_late [SECONDS] (default 8: more than the
   5 s a connection's handshake waits for an answer). The rank is read from the launcher's
   environment (OMPI_COMM_WORLD_RANK, _SIZE) before MPI_Init. */
#include <string.h>
#include <unistd.h>

#include "mpi_check.h"

int main(int argc, char** argv) {
    const char* env_rank = getenv("OMPI_COMM_WORLD_RANK");
    const char* env_size = getenv("OMPI_COMM_WORLD_SIZE");
    const int seconds = argc > 1 ? atoi(argv[1]) : 8;
    if (env_rank != NULL && env_size != NULL && atoi(env_rank) == atoi(env_size) - 1) sleep((unsigned)seconds);
    int rank, size;
    mpi_check_init(&argc, &argv, &rank, &size);
    enum { kLen = 4096 };
    unsigned char out[kLen], in[kLen];
    for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) continue;
        fill(out, kLen, rank, peer, 0);
        memset(in, 0, kLen);
        CHECK_MPI(MPI_Sendrecv(out, kLen, MPI_BYTE, peer, 3, in, kLen, MPI_BYTE, peer, 3, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
        CHECK(verify(in, kLen, peer, rank, 0));
    }
    long one = 1, sum = 0;
    CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == size);
    printf("PASS rank %d of %d\n", rank, size);
    MPI_Finalize();
    return 0;
}
