/* mpi_killed.c: a rank dies mid-run (SIGKILL, after 20 rounds of allreduce and exchanges); every
   other rank must get an MPI error (MPI_ERRORS_RETURN), not hang. Run with mpirun's
   `--mca orte_enable_recovery 1`, so that the survivors end by their own error and not because
   mpirun killed them. A survivor prints "survivor RANK: MPI error after a peer died: TEXT" and
   exits 3; one that ran all its rounds without an error prints "survivor RANK: no error" (exit 1).
   Usage: mpi_killed [VICTIM] */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "mpi_check.h"

int main(int argc, char** argv) {
    int rank, size;
    mpi_check_init(&argc, &argv, &rank, &size);
    const int victim = argc > 1 ? atoi(argv[1]) : 1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (long round = 0; round < 2000000; round++) {
        if (rank == victim && round == 20) {
            fflush(stdout);
            raise(SIGKILL);
        }
        int v = 1, rc = MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (rc == MPI_SUCCESS) {
            const int to = (rank + 1) % size, from = (rank - 1 + size) % size;
            int out = rank, in = -1;
            rc = MPI_Sendrecv(&out, 1, MPI_INT, to, 3, &in, 1, MPI_INT, from, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        if (rc != MPI_SUCCESS) {
            char text[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(rc, text, &len);
            printf("survivor %d: MPI error after a peer died: %s (round %ld)\n", rank, text, round);
            fflush(stdout);
            _exit(3);  /* MPI_Finalize would wait for the dead rank */
        }
    }
    printf("survivor %d: no error\n", rank);
    MPI_Finalize();
    return 1;
}
