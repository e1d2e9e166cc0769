// apps/gauss/gauss.cpp: Gaussian elimination of a dense system A x = b (SPLASH style, PARMACS).
//
// The matrix is strictly diagonally dominant by construction (|a_ii| = n > sum of |a_ij|, j != i,
// each < 1), which elimination preserves, so no pivoting is needed and none is done. A is stored
// augmented with b, one row per stride of `ld` doubles, page-aligned, and rows are dealt to the
// threads block-cyclically in chunks of one page: each thread writes only its own pages, and the
// cyclic deal keeps all threads busy as the active part of the matrix shrinks. Step k: every
// thread eliminates column k from its rows below k using pivot row k; a barrier ends each step
// (n - 1 barriers). Thread 0 then back-substitutes x. Checked: the reduced matrix and x against
// the same elimination run sequentially, and x against the known solution b was made from.
#include "parmacs.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "app_common.hpp"

MAIN_ENV

namespace {

constexpr long kPageDoubles = 4096 / sizeof(double);

struct GlobalMemory {
    BARDEC(barrier);
    unsigned long start, end;
};

GlobalMemory* gl;
double* a;  // n rows of ld doubles: a[i*ld + 0..n-1] = row i of A, a[i*ld + n] = b_i
double* x;  // the solution, written by thread 0
long n, ld, chunk;
int nprocs;

// Row stride: a power of two dividing a page when a row fits in one (so `chunk` rows fill a page
// exactly), else whole pages.
void layout(long size) {
    long need = size + 1;
    if (need <= kPageDoubles) {
        ld = 1;
        while (ld < need) ld *= 2;
    } else {
        ld = (need + kPageDoubles - 1) / kPageDoubles * kPageDoubles;
    }
    chunk = ld >= kPageDoubles ? 1 : kPageDoubles / ld;
}

int owner(long row) { return static_cast<int>((row / chunk) % nprocs); }

double x_true(long i) { return 1.0 + static_cast<double>(i % 7) * 0.25; }

void init_system(double* m, long size, long stride) {
    apps::Rng rng(0x6a055);
    for (long i = 0; i < size; ++i) {
        double* row = m + i * stride;
        for (long j = 0; j < size; ++j) row[j] = i == j ? static_cast<double>(size) : rng.uniform(-1, 1);
        double b = 0;
        for (long j = 0; j < size; ++j) b += row[j] * x_true(j);
        row[size] = b;
    }
}

// Eliminates column k from row i with pivot row k; keeps the multiplier in a[i][k] (the L factor).
inline void eliminate_row(double* m, long size, long stride, long k, long i) {
    const double* pk = m + k * stride;
    double* ri = m + i * stride;
    double mult = ri[k] / pk[k];
    ri[k] = mult;
    for (long j = k + 1; j <= size; ++j) ri[j] -= mult * pk[j];
}

void back_substitute(const double* m, long size, long stride, double* out) {
    for (long i = size - 1; i >= 0; --i) {
        const double* ri = m + i * stride;
        double s = ri[size];
        for (long j = i + 1; j < size; ++j) s -= ri[j] * out[j];
        out[i] = s / ri[i];
    }
}

// G_MALLOC promises 16-byte alignment; the page layout above needs the matrix on a page boundary.
double* page_aligned_shared(std::size_t bytes) {
    auto p = reinterpret_cast<std::uintptr_t>(G_MALLOC_F(bytes + 4096));
    return reinterpret_cast<double*>((p + 4095) & ~std::uintptr_t{4095});
}

}  // namespace

void Worker(void) {
    int pid;
    GET_PID(pid);

    BARRIER(gl->barrier, nprocs);
    if (pid == 0) {
        SPLASH3_ROI_BEGIN();
        CLOCK(gl->start);
    }
    BARRIER(gl->barrier, nprocs);  // no thread starts before the clock does
    for (long k = 0; k < n - 1; ++k) {
        // My rows below k: start at the first row of my first chunk at or after k + 1.
        for (long c0 = (k + 1) / chunk * chunk; c0 < n; c0 += chunk) {
            if (owner(c0) != pid) continue;
            for (long i = c0 < k + 1 ? k + 1 : c0; i < c0 + chunk && i < n; ++i) eliminate_row(a, n, ld, k, i);
        }
        BARRIER(gl->barrier, nprocs);
    }
    if (pid == 0) {
        back_substitute(a, n, ld, x);
        CLOCK(gl->end);
        SPLASH3_ROI_END();
    }
}

int main(int argc, char** argv) {
    MAIN_INITENV();
    apps::Options opt = apps::parse_args(
        "gauss", "Gaussian elimination (diagonally dominant, no pivoting), rows block-cyclic by page.", argc, argv);
    nprocs = opt.nprocs;
    n = opt.size == apps::Size::paper ? 512 : 64;
    layout(n);

    gl = static_cast<GlobalMemory*>(G_MALLOC_F(sizeof(GlobalMemory)));
    BARINIT(gl->barrier, nprocs);
    a = page_aligned_shared(sizeof(double) * n * ld);
    x = static_cast<double*>(G_MALLOC_F(sizeof(double) * n));
    init_system(a, n, ld);

    CREATE(Worker, nprocs);
    WAIT_FOR_END(nprocs);

    if (opt.inject_error) a[(n / 2) * ld + n - 1] += 1.0;

    std::vector<double> ra(n * ld), rx(n), xt(n);
    init_system(ra.data(), n, ld);
    for (long k = 0; k < n - 1; ++k)
        for (long i = k + 1; i < n; ++i) eliminate_row(ra.data(), n, ld, k, i);
    back_substitute(ra.data(), n, ld, rx.data());
    for (long i = 0; i < n; ++i) xt[i] = x_true(i);

    // The reduced augmented matrix, row by row without the padding.
    std::vector<double> got(n * (n + 1)), want(n * (n + 1));
    for (long i = 0; i < n; ++i)
        for (long j = 0; j <= n; ++j) {
            got[i * (n + 1) + j] = a[i * ld + j];
            want[i * (n + 1) + j] = ra[i * ld + j];
        }

    apps::Report rep;
    rep.app = "gauss";
    rep.opt = opt;
    rep.parallel_s = static_cast<double>(gl->end - gl->start) * 1e-6;
    rep.problem = std::to_string(n) + "x" + std::to_string(n) + " matrix (diagonally dominant, no pivoting)";
    rep.params = {{"n", std::to_string(n)}};
    rep.add_array("reduced [L\\U|b]", "sequential elimination", got.data(), want.data(), got.size(), 1e-12, n + 1);
    rep.add_array("x", "sequential solution", x, rx.data(), n, 1e-12);
    rep.add_array("x", "known solution", x, xt.data(), n, 1e-9);
    int rc = apps::finish(rep);
    if (rc != 0) std::exit(rc);
    MAIN_END;
}
