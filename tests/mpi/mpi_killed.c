/* mpi_killed.c: a rank dies mid-run (SIGKILL, after 20 rounds of allreduce and exchanges); every
   other rank must get an MPI error (MPI_ERRORS_RETURN), not hang. Run with mpirun's
   `--mca orte_enable_recovery 1`, so that the survivors end by their own error and not because
   mpirun killed them. A survivor prints "survivor RANK: MPI error after a peer died: TEXT" and
   exits 3; one that ran all its rounds without an error prints "survivor RANK: no error" (exit 1).
   With `late`, the victim dies after a first barrier, and every survivor, once the death has had
   time to be seen (2 s, then a probe that runs the provider's progress), posts a receive from the
   victim: a receive posted after its source was found dead must fail, not wait forever.
   Usage: mpi_killed [VICTIM [late]] */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "mpi_check.h"

int main(int argc, char** argv) {
    int rank, size;
    mpi_check_init(&argc, &argv, &rank, &size);
    const int victim = argc > 1 ? atoi(argv[1]) : 1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (argc > 2 && strcmp(argv[2], "late") == 0) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == victim) {
            fflush(stdout);
            raise(SIGKILL);
        }
        sleep(2);
        int flag = 0, v = -1;
        (void)MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        const int rc = MPI_Recv(&v, 1, MPI_INT, victim, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS) {
            printf("survivor %d: no error (received %d from the dead rank %d)\n", rank, v, victim);
            return 1;
        }
        char text[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, text, &len);
        printf("survivor %d: MPI error after a peer died: %s (a receive posted late)\n", rank, text);
        fflush(stdout);
        _exit(3);
    }
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
