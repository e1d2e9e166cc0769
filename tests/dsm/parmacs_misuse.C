/* parmacs_misuse.C: PARMACS programs that use the macros wrongly, one per mode (argv[1]); each must
 * stop with one clear line (tests/dsm/run_parmacs.py --misuse). */
MAIN_ENV

#include <string.h>

struct G { LOCKDEC(never_initialised) BARDEC(bar) long x; } *Global;

void idle(void) {}

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
    } else if (!strcmp(argv[1], "barrier-n")) {
        Global = (struct G *) G_MALLOC(sizeof(struct G));
        BARINIT(Global->bar, 2)
        CREATE(idle, 1)
        BARRIER(Global->bar, 3)   /* 3 > the 1 thread CREATE started */
    }
    MAIN_END
}
