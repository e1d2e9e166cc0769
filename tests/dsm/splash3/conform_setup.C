/* conform_setup.C: the sequential set-up of the conformance program, in its own file (EXTERN_ENV).
 * It runs before MAIN_INITENV and allocates shared memory first, as some SPLASH programs do. */
#include <stdio.h>
#include <string.h>
#include "conform.h"
EXTERN_ENV

void read_input(const char *name)
{
    FILE *f = fopen(name, "r");          /* a relative name: the caller's working directory */
    long i;
    if (f == NULL) { perror(name); exit(2); }
    if (fscanf(f, "%ld", &n) != 1 || n < 1 || n > 1000000) { fprintf(stderr, "%s: bad count\n", name); exit(2); }
    data = (long *) G_MALLOC(n * sizeof(long))      /* no semicolon: the expansion ends in one */
    for (i = 0; i < n; i++)
        if (fscanf(f, "%ld", &data[i]) != 1) { fprintf(stderr, "%s: short input\n", name); exit(2); }
    fclose(f);
    /* padded to the page size the suite's macro file defines */
    Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory) + PAGE_SIZE);
    memset(Global, 0, sizeof(struct GlobalMemory));
    Global->homed = (long *) G_MALLOC(64 * sizeof(long), 0);
    big = (char *) G_MALLOC(BIG_BYTES);
    big[0] = 'a';
    big[BIG_BYTES / 2] = 'b';
    big[BIG_BYTES - 1] = 'c';
}
