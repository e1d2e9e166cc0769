/* dsm_hang.C: a PARMACS program that never ends by itself, for the test signal-stops-run
 * (tests/integration/signal_stops_run.py, issue 34): a signal to `iccs run` must stop every
 * cluster within 1 s whatever its threads do. One mode a run:
 *   spin     every pid spins on a shared flag that nobody sets
 *   lock     pid 0 takes a lock and keeps it (spinning); every other pid blocks in LOCK
 *   barrier  the last pid never arrives (spinning); every other pid waits in BARRIER
 * Once the state is reached (pid 0 waits a moment for the others to get there) the program prints
 * "hang MODE: ready" on standard output.
 *   usage: dsm_hang spin|lock|barrier [NPROCS]
 */
MAIN_ENV

#include <string.h>
#include <unistd.h>

struct GlobalMemory {
    LOCKDEC(lock)
    BARDEC(bar)
    volatile long flag;      /* nobody sets it */
    volatile long spinning;  /* lock: pid 0 holds the lock */
};

struct GlobalMemory *Global;
long nprocs = 4;
const char *mode = "spin";

static void spin_forever(void)
{
    while (Global->flag == 0)
        ;
}

void slave(void)
{
    long pid;
    GET_PID(pid);
    if (strcmp(mode, "spin") == 0) {
        if (pid == 0) { usleep(300000); printf("hang spin: ready\n"); fflush(stdout); }
        spin_forever();
    } else if (strcmp(mode, "lock") == 0) {
        if (pid == 0) {
            LOCK(Global->lock)
            Global->spinning = 1;
            usleep(500000);          /* the others reach LOCK meanwhile */
            printf("hang lock: ready\n");
            fflush(stdout);
            spin_forever();
        }
        usleep(100000);
        LOCK(Global->lock)
        spin_forever();
    } else {
        if (pid == nprocs - 1) {
            usleep(500000);          /* the others reach BARRIER meanwhile */
            printf("hang barrier: ready\n");
            fflush(stdout);
            spin_forever();
        }
        BARRIER(Global->bar, nprocs)
        spin_forever();
    }
}

int main(int argc, char **argv)
{
    MAIN_INITENV(,4000000)
    if (argc < 2 || (strcmp(argv[1], "spin") != 0 && strcmp(argv[1], "lock") != 0 && strcmp(argv[1], "barrier") != 0)) {
        fprintf(stderr, "usage: dsm_hang spin|lock|barrier [NPROCS]\n");
        return 2;
    }
    mode = argv[1];
    if (argc > 2) nprocs = atol(argv[2]);
    Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
    memset((void *)Global, 0, sizeof *Global);
    LOCKINIT(Global->lock)
    BARINIT(Global->bar, nprocs)
    CREATE(slave, nprocs)
    WAIT_FOR_END(nprocs)
    MAIN_END
}
