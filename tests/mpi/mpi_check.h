/* mpi_check.h: what the MPI test programs share: a failed check names the rank, the line and the
   condition, and the run ends with MPI_Abort (a nonzero status from mpirun). */
#ifndef ICCS_MPI_CHECK_H
#define ICCS_MPI_CHECK_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int check_rank = -1;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL rank %d: %s:%d: %s\n", check_rank, __FILE__, __LINE__, #cond);   \
            fflush(stderr);                                                                        \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)

#define CHECK_MPI(call) CHECK((call) == MPI_SUCCESS)

/* MPI_Init, this rank and the world's size; failed checks name this rank from here on. */
static inline void mpi_check_init(int* argc, char*** argv, int* rank, int* size) {
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    check_rank = *rank;
}

/* The byte at index i of message k from src to dst: every message's bytes differ. */
static inline unsigned char pattern(int src, int dst, int k, long i) {
    return (unsigned char)(src * 131 + dst * 31 + k * 7 + i * 13 + (i >> 8));
}

static inline void fill(unsigned char* b, long n, int src, int dst, int k) {
    for (long i = 0; i < n; i++) b[i] = pattern(src, dst, k, i);
}

static inline int verify(const unsigned char* b, long n, int src, int dst, int k) {
    for (long i = 0; i < n; i++)
        if (b[i] != pattern(src, dst, k, i)) return 0;
    return 1;
}

#endif
