/* parmacs_misuse.C: PARMACS programs that use the macros wrongly, one per mode (argv[1]); each must
 * stop with one clear line (tests/dsm/run_parmacs.py --misuse over the loopback runtime;
 * tests/integration/dsm_run.py misuse through `iccs run` over the real runtime). */
MAIN_ENV

#include <string.h>

struct G { LOCKDEC(never_initialised) LOCKDEC(clobbered) BARDEC(bar) long x; } *Global;

ALOCKDEC(many, 70000)

void idle(void) {}

/* segv: the last pid (on the last cluster) writes outside the shared region: the program's own
 * crash, which the run must report as such (SIGSEGV, naming the cluster), not swallow. */
void crasher(void) {
    long pid;
    GET_PID(pid);
    volatile unsigned long wild = 16; /* through a variable: the compiler cannot prove (and warn) that it is wild */
    if (pid == 3) *(volatile long *) wild = 1;
}

void worker(void) {
    LOCK(Global->never_initialised)
    Global->x++;
    UNLOCK(Global->never_initialised)
}

int main(int argc, char **argv)
{
    MAIN_INITENV()
    if (argc < 2) return 2;
    if (!strcmp(argv[1], "bigalloc")) {
        G_MALLOC(1ul << 40);  /* far beyond ICCS_DSM_SIZE */
    } else if (!strcmp(argv[1], "noinit")) {
        Global = (struct G *) G_MALLOC(sizeof(struct G));
        Global->x = 0;
        CREATE(worker, 2)
        WAIT_FOR_END(2)
    } else if (!strcmp(argv[1], "lock-range")) {
        Global = (struct G *) G_MALLOC(sizeof(struct G));
        LOCKINIT(Global->clobbered)
        memset(&Global->clobbered, 0x7f, sizeof Global->clobbered);  /* a stray write over the lock */
        CREATE(idle, 1)
        LOCK(Global->clobbered)
    } else if (!strcmp(argv[1], "many-locks")) {
        ALOCKINIT(many, 70000)     /* more locks than the DSM has sync ids */
    } else if (!strcmp(argv[1], "segv")) {
        CREATE(crasher, 4)
        WAIT_FOR_END(4)
    } else if (!strcmp(argv[1], "barrier-n")) {
        Global = (struct G *) G_MALLOC(sizeof(struct G));
        BARINIT(Global->bar, 2)
        CREATE(idle, 1)
        BARRIER(Global->bar, 3)   /* 3 > the 1 thread CREATE started */
    }
    MAIN_END
}
