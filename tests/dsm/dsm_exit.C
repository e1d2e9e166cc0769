/* dsm_exit.C: a PARMACS program that ends as the SPLASH applications do on a wrong answer: after
 * WAIT_FOR_END, main calls exit(STATUS) and never reaches MAIN_END. The run must end cleanly
 * (tests/integration/dsm_run.py exit-status): main's epilogue runs once (on cluster 0, whose
 * exit ends the other clusters with its status), every cluster process exits with STATUS, its DSM
 * counters are printed, nothing is left behind, `iccs run` exits with STATUS.
 *   usage: dsm_exit STATUS [NPROCS]
 * The epilogue reads every pid's result, from pages homed on every cluster: the other clusters
 * keep serving until cluster 0 ends the run.
 */
MAIN_ENV

long *v;
long nprocs = 4;

void slave(void)
{
    long pid;
    GET_PID(pid);
    v[pid * 1024] = pid + 1;   /* one page per pid: homes on every cluster */
}

int main(int argc, char **argv)
{
    long i, sum = 0;
    MAIN_INITENV(,4000000)
    if (argc < 2) { fprintf(stderr, "usage: dsm_exit STATUS [NPROCS]\n"); return 2; }
    if (argc > 2) nprocs = atol(argv[2]);
    v = (long *) G_MALLOC(64 * 1024 * sizeof(long));
    CREATE(slave, nprocs)
    WAIT_FOR_END(nprocs)
    for (i = 0; i < nprocs; i++) sum += v[i * 1024];
    fprintf(stderr, "dsm_exit: sum %ld (expected %ld); exit(%s) without MAIN_END\n", sum, nprocs * (nprocs + 1) / 2, argv[1]);
    exit(sum == nprocs * (nprocs + 1) / 2 ? atoi(argv[1]) : 99);
    MAIN_END
}
