/* mpi_iprobe.c: a rank that polls MPI_Iprobe (and, in a second round, MPI_Improbe) in a tight loop
   for a message from another cluster that comes late, the pattern of programs (and MagPIe's
   receive of a message of unknown length) that probe for work: the first rank of the second half
   sleeps WAIT_MS, then sends; rank 0 polls until the message is there, receives it, checks it,
   and prints how many probes it made and in how long ("probes N in M ms"), which the launcher's
   check compares with the time (run_mpi_cli.py --iprobe). Other ranks only take part in the final
   barrier. Usage: mpi_iprobe [WAIT_MS] (default 2000). */
#include <string.h>
#include <time.h>

#include "mpi_check.h"

static long probe_until_there(int src, int tag, int matched, MPI_Message* msg) {
    long probes = 0;
    for (int flag = 0; !flag; ++probes) {
        MPI_Status st;
        if (matched)
            CHECK_MPI(MPI_Improbe(src, tag, MPI_COMM_WORLD, &flag, msg, &st));
        else
            CHECK_MPI(MPI_Iprobe(src, tag, MPI_COMM_WORLD, &flag, &st));
    }
    return probes;
}

int main(int argc, char** argv) {
    int rank, size;
    mpi_check_init(&argc, &argv, &rank, &size);
    CHECK(size >= 2 && size % 2 == 0);
    const long wait_ms = argc > 1 ? atol(argv[1]) : 2000;
    const int sender = size / 2;  /* the first rank of the other cluster (2 x 1, 2 x 2) */
    enum { kWords = 1024 };
    int data[kWords];
    for (int round = 0; round < 2; ++round) {
        if (rank == sender) {
            const struct timespec pause = {wait_ms / 1000, (wait_ms % 1000) * 1000000L};
            nanosleep(&pause, NULL);
            for (int i = 0; i < kWords; i++) data[i] = round * 100000 + i;
            CHECK_MPI(MPI_Send(data, kWords, MPI_INT, 0, 7 + round, MPI_COMM_WORLD));
        } else if (rank == 0) {
            const double t0 = MPI_Wtime();
            MPI_Message msg = MPI_MESSAGE_NULL;
            const long probes = probe_until_there(sender, 7 + round, round, &msg);
            const double ms = (MPI_Wtime() - t0) * 1000.0;
            memset(data, 0, sizeof data);
            if (round == 0)
                CHECK_MPI(MPI_Recv(data, kWords, MPI_INT, sender, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            else
                CHECK_MPI(MPI_Mrecv(data, kWords, MPI_INT, &msg, MPI_STATUS_IGNORE));
            for (int i = 0; i < kWords; i++) CHECK(data[i] == round * 100000 + i);
            printf("rank 0: %s probes %ld in %.0f ms\n", round ? "MPI_Improbe" : "MPI_Iprobe", probes, ms);
            fflush(stdout);
        }
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    printf("PASS rank %d of %d\n", rank, size);
    MPI_Finalize();
    return 0;
}
