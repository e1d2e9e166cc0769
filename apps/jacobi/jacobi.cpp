// apps/jacobi/jacobi.cpp: Jacobi relaxation of a 2-D grid (SPLASH style, PARMACS).
//
// Two n x n grids: each iteration every interior point of the destination becomes the mean of
// its four neighbours in the source, then the grids swap; the boundary is fixed. Interior rows are
// split in contiguous blocks, one a thread, so each thread writes only its own rows (pages) and
// reads one row of each neighbouring block; a barrier ends every iteration. The largest change of
// each iteration is reduced under a lock. Checked against the same relaxation run sequentially.
#include "parmacs.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "app_common.hpp"

MAIN_ENV

namespace {

constexpr int kMaxIters = 16;

struct GlobalMemory {
    BARDEC(barrier);
    LOCKDEC(diff_lock);
    double maxdiff[kMaxIters];  // largest |change| of each iteration, reduced under diff_lock
    unsigned long start, end;   // CLOCK around the parallel section, taken by thread 0
};

// Globals: plain values and pointers into G_MALLOC memory, all set before CREATE.
GlobalMemory* gl;
double* grid[2];
long n;
int iters;
int nprocs;

void init_grid(double* g, long size) {
    apps::Rng rng(0x1ac0b1);
    for (long i = 0; i < size; ++i)
        for (long j = 0; j < size; ++j) {
            double v;
            if (i == 0)
                v = 1.0;  // a hot top edge
            else if (i == size - 1 || j == 0 || j == size - 1)
                v = 0.5 * std::sin(0.01 * static_cast<double>(i + j));
            else
                v = rng.uniform();
            g[i * size + j] = v;
        }
}

// Relaxes interior rows [lo, hi) of dst from src; returns the largest |change|. The parallel run
// and the sequential reference both use this function, so their results agree to the last bit.
double relax_rows(const double* src, double* dst, long size, long lo, long hi) {
    double maxdiff = 0;
    for (long i = lo; i < hi; ++i) {
        const double* up = src + (i - 1) * size;
        const double* row = src + i * size;
        const double* down = src + (i + 1) * size;
        double* out = dst + i * size;
        for (long j = 1; j < size - 1; ++j) {
            double v = 0.25 * (up[j] + down[j] + row[j - 1] + row[j + 1]);
            maxdiff = std::fmax(maxdiff, std::fabs(v - row[j]));
            out[j] = v;
        }
    }
    return maxdiff;
}

}  // namespace

void Worker(void) {
    int pid;
    GET_PID(pid);
    apps::Range r = apps::block_range(n - 2, nprocs, pid);  // interior rows 1..n-2
    long lo = r.lo + 1, hi = r.hi + 1;

    BARRIER(gl->barrier, nprocs);
    if (pid == 0) {
        SPLASH3_ROI_BEGIN();
        CLOCK(gl->start);
    }
    BARRIER(gl->barrier, nprocs);  // no thread starts before the clock does
    for (int t = 0; t < iters; ++t) {
        double d = relax_rows(grid[t % 2], grid[(t + 1) % 2], n, lo, hi);
        LOCK(gl->diff_lock);
        if (d > gl->maxdiff[t]) gl->maxdiff[t] = d;
        UNLOCK(gl->diff_lock);
        BARRIER(gl->barrier, nprocs);
    }
    if (pid == 0) {
        CLOCK(gl->end);
        SPLASH3_ROI_END();
    }
}

int main(int argc, char** argv) {
    MAIN_INITENV();
    apps::Options opt = apps::parse_args("jacobi", "Jacobi relaxation of a 2-D grid (two grids, rows split by thread).",
                                         argc, argv);
    nprocs = opt.nprocs;
    n = opt.size == apps::Size::paper ? 2048 : 128;
    iters = opt.size == apps::Size::paper ? 3 : 2;

    gl = static_cast<GlobalMemory*>(G_MALLOC_F(sizeof(GlobalMemory)));
    BARINIT(gl->barrier, nprocs);
    LOCKINIT(gl->diff_lock);
    for (int t = 0; t < kMaxIters; ++t) gl->maxdiff[t] = 0;
    for (int k = 0; k < 2; ++k) {
        grid[k] = static_cast<double*>(G_MALLOC_F(sizeof(double) * n * n));
        init_grid(grid[k], n);  // both grids carry the fixed boundary
    }

    CREATE(Worker, nprocs);
    WAIT_FOR_END(nprocs);

    double* result = grid[iters % 2];
    if (opt.inject_error) result[(n / 2) * n + n / 2] += 1.0;

    // Sequential reference, private memory.
    std::vector<double> ref[2] = {std::vector<double>(n * n), std::vector<double>(n * n)};
    init_grid(ref[0].data(), n);
    init_grid(ref[1].data(), n);
    std::vector<double> ref_diff(iters);
    for (int t = 0; t < iters; ++t) ref_diff[t] = relax_rows(ref[t % 2].data(), ref[(t + 1) % 2].data(), n, 1, n - 1);

    apps::Report rep;
    rep.app = "jacobi";
    rep.opt = opt;
    rep.parallel_s = static_cast<double>(gl->end - gl->start) * 1e-6;
    rep.problem = std::to_string(n) + "x" + std::to_string(n) + " grid, " + std::to_string(iters) + " iterations";
    rep.params = {{"n", std::to_string(n)}, {"iterations", std::to_string(iters)}};
    rep.add_array("grid", "sequential reference", result, ref[iters % 2].data(), n * n, 1e-12, n);
    rep.add_array("largest change per iteration (lock reduction)", "sequential reference", gl->maxdiff, ref_diff.data(), iters, 1e-12);
    int rc = apps::finish(rep);
    if (rc != 0) std::exit(rc);
    MAIN_END;
}
