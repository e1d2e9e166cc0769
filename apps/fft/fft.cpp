// apps/fft/fft.cpp: 1-D complex FFT by the six-step (transpose) algorithm (SPLASH style, PARMACS).
//
// N = n1 * n2 points (powers of two). The input, viewed as an n2 x n1 matrix, is transposed; each
// of the n1 rows gets an n2-point FFT and is multiplied by the twiddles w_N^(j1*k2); the matrix is
// transposed back, each of the n2 rows gets an n1-point FFT, and a last transpose puts the result
// in natural order. Rows of each destination matrix are split in contiguous blocks, one a thread:
// a thread writes only its own rows and gathers the columns it needs from everyone in the
// transposes, which is all the communication there is (barriers before the second and third
// transpose). Checked against a straightforward radix-2 FFT of all N points run sequentially, and
// a few bins against the direct DFT sum in long double.
#include "parmacs.h"

#include <cmath>
#include <complex>
#include <cstdio>
#include <numbers>
#include <string>
#include <vector>

#include "app_common.hpp"

MAIN_ENV

namespace {

using cplx = std::complex<double>;

struct GlobalMemory {
    BARDEC(barrier);
    unsigned long start, end;
};

GlobalMemory* gl;
cplx* A;  // input (n2 x n1), later the second row-FFT stage (n2 x n1)
cplx* B;  // first row-FFT stage (n1 x n2), then the result in natural order (n1 x n2 = N)
long N, n1, n2;
int nprocs;

void init_input(cplx* x, long len) {
    apps::Rng rng(0xff7);
    for (long i = 0; i < len; ++i) {
        double re = rng.uniform(-1, 1);
        double im = rng.uniform(-1, 1);
        x[i] = cplx(re, im);
    }
}

// w_len^k = exp(-2 pi i k / len) for k < len/2, each from its own sin/cos (no accumulated error).
std::vector<cplx> twiddles(long len) {
    std::vector<cplx> tw(len / 2);
    for (long k = 0; k < len / 2; ++k)
        tw[k] = std::polar(1.0, -2.0 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(len));
    return tw;
}

// In-place iterative radix-2 FFT (bit reversal, then log2(len) butterfly passes); tw from
// twiddles(len).
void fft_radix2(cplx* d, long len, const cplx* tw) {
    for (long i = 1, j = 0; i < len; ++i) {
        long bit = len >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j ^= bit;
        if (i < j) std::swap(d[i], d[j]);
    }
    for (long half = 1; half < len; half *= 2) {
        long step = len / (2 * half);
        for (long s = 0; s < len; s += 2 * half)
            for (long k = 0; k < half; ++k) {
                cplx t = tw[k * step] * d[s + k + half];
                d[s + k + half] = d[s + k] - t;
                d[s + k] += t;
            }
    }
}

// Rows [lo, hi) of dst (dst_rows x dst_cols) from src (dst_cols x dst_rows): dst[r][c] = src[c][r].
void transpose_rows(const cplx* src, cplx* dst, long dst_cols, long dst_rows, long lo, long hi) {
    for (long r = lo; r < hi; ++r)
        for (long c = 0; c < dst_cols; ++c) dst[r * dst_cols + c] = src[c * dst_rows + r];
}

}  // namespace

void Worker(void) {
    int pid;
    GET_PID(pid);
    apps::Range r1 = apps::block_range(n1, nprocs, pid);  // my rows of the n1 x n2 matrices
    apps::Range r2 = apps::block_range(n2, nprocs, pid);  // my rows of the n2 x n1 matrices
    std::vector<cplx> tw1 = twiddles(n1), tw2 = twiddles(n2);  // private

    BARRIER(gl->barrier, nprocs);
    if (pid == 0) {
        SPLASH3_ROI_BEGIN();
        CLOCK(gl->start);
    }
    BARRIER(gl->barrier, nprocs);  // no thread starts before the clock does
    // 1-3: B = transpose(A); n2-point FFT of each row j1; times w_N^(j1*k2).
    transpose_rows(A, B, n2, n1, r1.lo, r1.hi);
    for (long j1 = r1.lo; j1 < r1.hi; ++j1) {
        cplx* row = B + j1 * n2;
        fft_radix2(row, n2, tw2.data());
        for (long k2 = 0; k2 < n2; ++k2)
            row[k2] *= std::polar(1.0, -2.0 * std::numbers::pi * static_cast<double>((j1 * k2) % N) / static_cast<double>(N));
    }
    BARRIER(gl->barrier, nprocs);
    // 4-5: A = transpose(B); n1-point FFT of each row k2.
    transpose_rows(B, A, n1, n2, r2.lo, r2.hi);
    for (long k2 = r2.lo; k2 < r2.hi; ++k2) fft_radix2(A + k2 * n1, n1, tw1.data());
    BARRIER(gl->barrier, nprocs);
    // 6: B = transpose(A): X[k2 + n2*k1] = B[k1][k2].
    transpose_rows(A, B, n2, n1, r1.lo, r1.hi);
    BARRIER(gl->barrier, nprocs);
    if (pid == 0) {
        CLOCK(gl->end);
        SPLASH3_ROI_END();
    }
}

int main(int argc, char** argv) {
    MAIN_INITENV();
    apps::Options opt = apps::parse_args("fft", "1-D complex FFT by the six-step (transpose) algorithm, rows by thread.",
                                         argc, argv);
    nprocs = opt.nprocs;
    int log2n = opt.size == apps::Size::paper ? 15 : 10;
    N = 1L << log2n;
    n1 = 1L << ((log2n + 1) / 2);
    n2 = 1L << (log2n / 2);

    gl = static_cast<GlobalMemory*>(G_MALLOC_F(sizeof(GlobalMemory)));
    BARINIT(gl->barrier, nprocs);
    A = static_cast<cplx*>(G_MALLOC_F(sizeof(cplx) * N));
    B = static_cast<cplx*>(G_MALLOC_F(sizeof(cplx) * N));
    init_input(A, N);

    CREATE(Worker, nprocs);
    WAIT_FOR_END(nprocs);

    if (opt.inject_error) B[N / 3] += cplx(1.0, 0.0);

    std::vector<cplx> x(N), ref(N);
    init_input(x.data(), N);
    ref = x;
    std::vector<cplx> tw = twiddles(N);
    fft_radix2(ref.data(), N, tw.data());

    apps::Report rep;
    rep.app = "fft";
    rep.opt = opt;
    rep.parallel_s = static_cast<double>(gl->end - gl->start) * 1e-6;
    rep.problem = std::to_string(N) + " complex points (" + std::to_string(n1) + " x " + std::to_string(n2) + ")";
    rep.params = {{"points", std::to_string(N)}, {"n1", std::to_string(n1)}, {"n2", std::to_string(n2)}};
    rep.add_array("X", "sequential radix-2 FFT", reinterpret_cast<const double*>(B),
                  reinterpret_cast<const double*>(ref.data()), 2 * N, 1e-12, 2);

    // A few bins by the direct sum, in long double: guards against an error the two FFTs share.
    const long bins[] = {0, 1, N / 2 - 1, N / 2, N / 3, N - 1};
    std::vector<double> got, want;
    for (long k : bins) {
        std::complex<long double> s = 0;
        for (long j = 0; j < N; ++j) {
            long double ang = -2.0L * std::numbers::pi_v<long double> * static_cast<long double>((j * k) % N) /
                              static_cast<long double>(N);
            s += std::complex<long double>(x[j].real(), x[j].imag()) *
                 std::complex<long double>(std::cos(ang), std::sin(ang));
        }
        got.push_back(B[k].real());
        got.push_back(B[k].imag());
        want.push_back(static_cast<double>(s.real()));
        want.push_back(static_cast<double>(s.imag()));
    }
    rep.add_array("X at bins 0, 1, N/2-1, N/2, N/3, N-1", "direct DFT", got.data(), want.data(), got.size(), 1e-12, 2);
    int rc = apps::finish(rep);
    if (rc != 0) std::exit(rc);
    MAIN_END;
}
