/* mpi_computes.c: each rank computes (here: sleeps) longer than the peer time-out (5 s, [cluster]
   peer_timeout_ms) without an MPI call while the other waits in MPI_Recv, then they exchange.
   With a cluster in its rank's process (inline polling, one rank a cluster) nothing but that rank
   runs its proxies; its cluster's compute thread must stand in while it computes, or the other
   cluster counts it as gone and the receive fails. Usage: mpi_computes [SECONDS] (default 6). */
#include <unistd.h>

#include "mpi_check.h"

int main(int argc, char** argv) {
    int rank, size;
    mpi_check_init(&argc, &argv, &rank, &size);
    CHECK(size == 2);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const unsigned seconds = argc > 1 ? (unsigned)atoi(argv[1]) : 6;
    const int peer = 1 - rank;
    int v = rank == 0 ? 42 : -1;
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) { /* rank 0 computes first, then rank 1 */
        sleep(seconds);
        CHECK_MPI(MPI_Send(&v, 1, MPI_INT, peer, 1, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    } else {
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        sleep(seconds);
        CHECK_MPI(MPI_Send(&v, 1, MPI_INT, peer, 2, MPI_COMM_WORLD));
    }
    CHECK(v == 42);
    MPI_Finalize();
    printf("PASS rank %d of %d\n", rank, size);
    return 0;
}
