/* mpi_jacobi.c: Jacobi relaxation on an N x N grid, rows split over the ranks with a halo row
   exchanged with each neighbour every iteration; rank 0 also runs the same iterations alone and
   the gathered grid must equal it bit for bit (every point is computed by the same arithmetic).
   Usage: mpi_jacobi [N] [ITERATIONS] */
#include <string.h>

#include "mpi_check.h"

static void init(double* g, int n, int row0, int rows) {
    for (int i = 0; i < rows + 2; i++)
        for (int j = 0; j < n; j++) {
            const int gi = row0 + i - 1;
            g[i * n + j] = (gi <= 0 || gi >= n - 1 || j == 0 || j == n - 1) ? (double)((gi * 3 + j * 5) % 17) : 0.0;
        }
}

static void sweep(const double* g, double* h, int n, int rows, int row0) {
    for (int i = 1; i <= rows; i++) {
        const int gi = row0 + i - 1;
        for (int j = 0; j < n; j++) {
            if (gi == 0 || gi == n - 1 || j == 0 || j == n - 1) {
                h[i * n + j] = g[i * n + j];
                continue;
            }
            h[i * n + j] = 0.25 * (g[(i - 1) * n + j] + g[(i + 1) * n + j] + g[i * n + j - 1] + g[i * n + j + 1]);
        }
    }
}

int main(int argc, char** argv) {
    int rank, size;
    mpi_check_init(&argc, &argv, &rank, &size);
    const int n = argc > 1 ? atoi(argv[1]) : 256;
    const int iters = argc > 2 ? atoi(argv[2]) : 200;
    CHECK(n >= size && n % size == 0);
    const int rows = n / size, row0 = rank * rows;
    double* g = calloc((size_t)(rows + 2) * n, sizeof(double));
    double* h = calloc((size_t)(rows + 2) * n, sizeof(double));
    init(g, n, row0, rows);
    init(h, n, row0, rows);
    const double t0 = MPI_Wtime();
    for (int it = 0; it < iters; it++) {
        const int up = rank > 0 ? rank - 1 : MPI_PROC_NULL, down = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
        MPI_Request rq[4];
        CHECK_MPI(MPI_Irecv(&g[0], n, MPI_DOUBLE, up, 1, MPI_COMM_WORLD, &rq[0]));
        CHECK_MPI(MPI_Irecv(&g[(rows + 1) * n], n, MPI_DOUBLE, down, 2, MPI_COMM_WORLD, &rq[1]));
        CHECK_MPI(MPI_Isend(&g[rows * n], n, MPI_DOUBLE, down, 1, MPI_COMM_WORLD, &rq[2]));
        CHECK_MPI(MPI_Isend(&g[1 * n], n, MPI_DOUBLE, up, 2, MPI_COMM_WORLD, &rq[3]));
        CHECK_MPI(MPI_Waitall(4, rq, MPI_STATUSES_IGNORE));
        sweep(g, h, n, rows, row0);
        double* t = g;
        g = h;
        h = t;
    }
    const double par = MPI_Wtime() - t0;
    double* all = rank == 0 ? malloc((size_t)n * n * sizeof(double)) : NULL;
    CHECK_MPI(MPI_Gather(&g[n], rows * n, MPI_DOUBLE, all, rows * n, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    if (rank == 0) {
        double* sg = calloc((size_t)(n + 2) * n, sizeof(double));
        double* sh = calloc((size_t)(n + 2) * n, sizeof(double));
        init(sg, n, 0, n);
        init(sh, n, 0, n);
        for (int it = 0; it < iters; it++) {
            sweep(sg, sh, n, n, 0);
            double* t = sg;
            sg = sh;
            sh = t;
        }
        CHECK(memcmp(all, &sg[n], (size_t)n * n * sizeof(double)) == 0);
        printf("jacobi %dx%d, %d iterations on %d ranks: %.3f s, identical to the sequential run: PASS\n", n, n, iters,
               size, par);
        free(sg);
        free(sh);
        free(all);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    printf("jacobi PASS rank %d of %d\n", rank, size);
    free(g);
    free(h);
    MPI_Finalize();
    return 0;
}
