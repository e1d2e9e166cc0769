/* dsm_initdata.C: initialised globals that main's prefix never touches, first read by the threads
 * of CREATE on every cluster.
 *   usage: dsm_initdata NPROCS
 * `table` is 64 KiB of initialised .data (every word 7 but one per page, its index); nothing
 * before CREATE reads or writes it, so its pages are still the executable file's, untouched, at
 * CREATE. Every pid sums the whole table after CREATE and checks the sum and a word on each page;
 * main's epilogue prints PASS or FAIL (the first pid and word that were wrong) and exits 0 or 1.
 * (The DSM took such pages for zeros: SPLASH-3 radiosity read garbage from its room_model.)
 */
MAIN_ENV

#include <string.h>

#define WORDS 8192   /* 64 KiB */
#define PER_PAGE 512 /* 8-byte words in a 4 KiB page */

long table[WORDS] = { [0 ... WORDS - 1] = 7,
    [1] = 1,
    [513] = 513,
    [1025] = 1025,
    [1537] = 1537,
    [2049] = 2049,
    [2561] = 2561,
    [3073] = 3073,
    [3585] = 3585,
    [4097] = 4097,
    [4609] = 4609,
    [5121] = 5121,
    [5633] = 5633,
    [6145] = 6145,
    [6657] = 6657,
    [7169] = 7169,
    [7681] = 7681 };

struct GlobalMemory {
    BARDEC(bar)
    long bad_pid, bad_word, bad_value;
};
struct GlobalMemory *Global;
long nprocs = 2;

static long expect(long i) { return i % PER_PAGE == 1 ? i : 7; }

void worker(void)
{
    long pid, i, sum = 0, want = 0;
    GET_PID(pid);
    for (i = 0; i < WORDS; i++) {
        sum += table[i];
        want += expect(i);
        if (table[i] != expect(i) && Global->bad_pid < 0) {
            Global->bad_pid = pid;
            Global->bad_word = i;
            Global->bad_value = table[i];
        }
    }
    if (sum != want && Global->bad_pid < 0) Global->bad_pid = pid;
    BARRIER(Global->bar, nprocs)
}

int main(int argc, char **argv)
{
    long i;
    MAIN_INITENV(,4000000)
    if (argc > 1) nprocs = atol(argv[1]);
    Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
    memset((void *)Global, 0, sizeof *Global);
    Global->bad_pid = -1;
    BARINIT(Global->bar, nprocs)
    CREATE(worker, nprocs)
    WAIT_FOR_END(nprocs)
    if (Global->bad_pid >= 0) {
        printf("dsm_initdata: FAIL: pid %ld read table[%ld] = %ld, want %ld\n", Global->bad_pid, Global->bad_word,
               Global->bad_value, expect(Global->bad_word));
        exit(1);
    }
    for (i = 0; i < WORDS; i++)
        if (table[i] != expect(i)) {
            printf("dsm_initdata: FAIL: main read table[%ld] = %ld\n", i, table[i]);
            exit(1);
        }
    printf("dsm_initdata: PASS: %d words of initialised globals untouched before CREATE read right by %ld pids\n", WORDS,
           nprocs);
    MAIN_END
}
