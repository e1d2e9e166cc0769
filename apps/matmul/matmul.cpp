// apps/matmul/matmul.cpp: dense matrix multiply C = A * B (SPLASH style, PARMACS).
//
// Rows of C (and of A) are split in contiguous blocks, one a thread: each thread writes only its
// own rows of C and reads its rows of A and all of B. One barrier before and one after. Checked
// against the same product computed sequentially.
#include "parmacs.h"

#include <cstdio>
#include <string>
#include <vector>

#include "app_common.hpp"

MAIN_ENV

namespace {

struct GlobalMemory {
    BARDEC(barrier);
    unsigned long start, end;
};

GlobalMemory* gl;
double* A;
double* B;
double* C;
long n;
int nprocs;

void init_matrices(double* a, double* b, long size) {
    apps::Rng rng(0x3a73a7);
    for (long i = 0; i < size * size; ++i) a[i] = rng.uniform(-1, 1);
    for (long i = 0; i < size * size; ++i) b[i] = rng.uniform(-1, 1);
}

// Rows [lo, hi) of c = a * b, i-k-j order (unit stride on b and c). Shared by the parallel run and
// the reference, so both sum in the same order.
void multiply_rows(const double* a, const double* b, double* c, long size, long lo, long hi) {
    for (long i = lo; i < hi; ++i) {
        double* ci = c + i * size;
        for (long j = 0; j < size; ++j) ci[j] = 0;
        for (long k = 0; k < size; ++k) {
            double aik = a[i * size + k];
            const double* bk = b + k * size;
            for (long j = 0; j < size; ++j) ci[j] += aik * bk[j];
        }
    }
}

}  // namespace

void Worker(void) {
    int pid;
    GET_PID(pid);
    apps::Range r = apps::block_range(n, nprocs, pid);

    BARRIER(gl->barrier, nprocs);
    if (pid == 0) {
        SPLASH3_ROI_BEGIN();
        CLOCK(gl->start);
    }
    BARRIER(gl->barrier, nprocs);  // no thread starts before the clock does
    multiply_rows(A, B, C, n, r.lo, r.hi);
    BARRIER(gl->barrier, nprocs);
    if (pid == 0) {
        CLOCK(gl->end);
        SPLASH3_ROI_END();
    }
}

int main(int argc, char** argv) {
    MAIN_INITENV();
    apps::Options opt = apps::parse_args("matmul", "Dense matrix multiply C = A*B, row blocks of C by thread.", argc, argv);
    nprocs = opt.nprocs;
    n = opt.size == apps::Size::paper ? 384 : 64;

    gl = static_cast<GlobalMemory*>(G_MALLOC_F(sizeof(GlobalMemory)));
    BARINIT(gl->barrier, nprocs);
    A = static_cast<double*>(G_MALLOC_F(sizeof(double) * n * n));
    B = static_cast<double*>(G_MALLOC_F(sizeof(double) * n * n));
    C = static_cast<double*>(G_MALLOC_F(sizeof(double) * n * n));
    init_matrices(A, B, n);

    CREATE(Worker, nprocs);
    WAIT_FOR_END(nprocs);

    if (opt.inject_error) C[(n / 3) * n + n / 2] += 1.0;

    std::vector<double> ra(n * n), rb(n * n), rc(n * n);
    init_matrices(ra.data(), rb.data(), n);
    multiply_rows(ra.data(), rb.data(), rc.data(), n, 0, n);

    apps::Report rep;
    rep.app = "matmul";
    rep.opt = opt;
    rep.parallel_s = static_cast<double>(gl->end - gl->start) * 1e-6;
    rep.problem = std::to_string(n) + "x" + std::to_string(n) + " matrices";
    rep.params = {{"n", std::to_string(n)}};
    rep.add_array("C", "sequential product", C, rc.data(), n * n, 1e-12, n);
    int rc_exit = apps::finish(rep);
    if (rc_exit != 0) std::exit(rc_exit);
    MAIN_END;
}
