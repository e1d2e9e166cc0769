// programs.hpp: the four programs of `iccs bench dsm --vs argo`, written once and run on both DSMs.
//
// Each program is the same C++ on both sides: what it allocates in shared memory, what each thread
// writes before the timed section (its own part of the data, as it computes on it), the parallel body every thread runs, and a sequential reference
// computed in the same process after the run. The DSM underneath is a template parameter `Sync`
// with three calls, barrier(), lock(k) and unlock(k) (k < kLocks), which each side maps onto its
// own (parmacs_programs.cpp: PARMACS BARRIER / LOCK; argo_programs.cpp: argo::barrier and Argo's
// cohort locks). Shared memory comes from an allocator each side passes to the constructor
// (G_MALLOC before CREATE; argo::conew_array), called by main before any thread starts.
//
// C++17 and the standard library only: the Argo side is compiled from this header by mpic++
// against an Argo build the user names (`--argo DIR`), outside this project's build.
#ifndef ICCS_PERF_DSM_VS_ARGO_PROGRAMS_HPP
#define ICCS_PERF_DSM_VS_ARGO_PROGRAMS_HPP

#include <chrono>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace dsm_vs_argo {

constexpr int kLocks = 2;  // lock ids 0 and 1 on both sides

// The command line both sides take: PROGRAM -p THREADS_IN_ALL [--n N] [--iters N] [--tasks N]
// [--work N]; 0 = the program's default size (the bench's).
struct Params {
    std::string program;
    int nprocs = 0;
    long n = 0;       // matmul: matrix order; jacobi: grid side; fft: rows = columns (a power of 2)
    long iters = 0;   // jacobi: sweeps; fft: forward+inverse 2-D transforms
    long tasks = 0;   // taskq: tasks in all (half seeded, half spawned by them)
    long work = 0;    // taskq: hash rounds per task
    bool inject_error = false;  // test hook: thread 0 corrupts one value of the result after the timed section
};

inline const char* const kPrograms[] = {"matmul", "jacobi", "fft", "taskq"};

inline std::string usage(const char* argv0) {
    return std::string("usage: ") + argv0 +
           " matmul|jacobi|fft|taskq -p THREADS [--n N] [--iters N] [--tasks N] [--work N] [--inject-error]\n"
           "  matmul: C = A*B, n x n (default 512), rows of C in blocks by thread\n"
           "  jacobi: n x n grid (default 1024), --iters sweeps (default 50), a barrier and a lock-reduced\n"
           "          largest change per sweep\n"
           "  fft:    n x n complex (default 512, a power of 2), --iters forward+inverse 2-D FFTs (default 2):\n"
           "          row FFTs on each thread's rows, then a transpose into the other matrix (all to all)\n"
           "  taskq:  a shared task queue under one lock, --tasks tasks (default 4096: half seeded, each\n"
           "          spawning one that reads its result), --work hash rounds each (default 2000), a\n"
           "          histogram of the results under a second lock\n"
           "  --inject-error: test hook: one value of the result is corrupted after the run; the check must FAIL\n"
           "prints one line: dsm-vs-argo program=P threads=N size=S parallel_s=T result=PASS|FAIL [failure=...]\n";
}

// False with err naming the bad argument.
inline bool parse_params(int argc, char** argv, Params& p, std::string& err) {
    if (argc < 2) {
        err = "no program named";
        return false;
    }
    p.program = argv[1];
    bool known = false;
    for (const char* k : kPrograms) known = known || p.program == k;
    if (!known) {
        err = "unknown program '" + p.program + "' (matmul, jacobi, fft, taskq)";
        return false;
    }
    for (int i = 2; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--inject-error") {
            p.inject_error = true;
            continue;
        }
        long* dst = a == "-p" ? nullptr : a == "--n" ? &p.n : a == "--iters" ? &p.iters : a == "--tasks" ? &p.tasks
                                                           : a == "--work" ? &p.work : nullptr;
        if (a != "-p" && dst == nullptr) {
            err = "unknown argument '" + a + "'";
            return false;
        }
        if (i + 1 >= argc) {
            err = a + " needs a value";
            return false;
        }
        char* end = nullptr;
        const long v = std::strtol(argv[++i], &end, 10);
        if (end == argv[i] || *end != '\0' || v < 1 || v > (1l << 24)) {
            err = a + " " + argv[i] + ": not a number in 1..16777216";
            return false;
        }
        if (dst)
            *dst = v;
        else
            p.nprocs = static_cast<int>(v);
    }
    if (p.nprocs < 1) {
        err = "-p THREADS (threads in all) is required";
        return false;
    }
    if (p.n == 0) p.n = p.program == "jacobi" ? 1024 : 512;
    if (p.iters == 0) p.iters = p.program == "jacobi" ? 50 : 2;
    if (p.tasks == 0) p.tasks = 4096;
    if (p.work == 0) p.work = 2000;
    if (p.program == "fft" && (p.n & (p.n - 1)) != 0) {
        err = "--n " + std::to_string(p.n) + ": fft needs a power of 2";
        return false;
    }
    if (p.program == "jacobi" && p.n < 3) {
        err = "--n " + std::to_string(p.n) + ": jacobi needs a grid of at least 3 x 3";
        return false;
    }
    if (p.program == "taskq" && p.tasks % 2 != 0) {
        err = "--tasks " + std::to_string(p.tasks) + ": must be even (half seeded, half spawned)";
        return false;
    }
    return true;
}

using Alloc = std::function<void*(std::size_t bytes)>;

// What a program allocates in shared memory, at most (each allocation padded for its alignment).
inline std::size_t shared_bytes(const Params& p) {
    const std::size_t n2 = static_cast<std::size_t>(p.n) * static_cast<std::size_t>(p.n);
    std::size_t b = 0;
    if (p.program == "matmul") b = 3 * n2 * sizeof(double);
    if (p.program == "jacobi") b = 2 * n2 * sizeof(double) + static_cast<std::size_t>(p.iters) * sizeof(double);
    if (p.program == "fft") b = 2 * n2 * 2 * sizeof(double);
    if (p.program == "taskq") b = 1024 + static_cast<std::size_t>(p.tasks) * (8 + 8 + 4);
    return b + 4 * 16;
}

inline double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Thread pid's rows [lo, hi) of `total` in nprocs contiguous blocks (the first total % nprocs one larger).
inline void block(long total, int nprocs, int pid, long& lo, long& hi) {
    const long q = total / nprocs, r = total % nprocs;
    lo = pid * q + (pid < r ? pid : r);
    hi = lo + q + (pid < r ? 1 : 0);
}

// splitmix64: the same data on both sides and in the reference.
inline std::uint64_t mix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
inline double uniform(std::uint64_t seed, std::uint64_t i) { return static_cast<double>(mix(seed ^ mix(i)) >> 11) * 0x1.0p-53; }

// "" when every |got - want| <= 1e-9 * max |want|, else the first element over it.
inline std::string compare(const char* what, const double* got, const double* want, std::size_t n) {
    double scale = 0;
    for (std::size_t i = 0; i < n; i++) scale = std::fmax(scale, std::fabs(want[i]));
    if (scale == 0) scale = 1;
    for (std::size_t i = 0; i < n; i++)
        if (!(std::fabs(got[i] - want[i]) <= 1e-9 * scale)) {
            char b[160];
            std::snprintf(b, sizeof b, "%s[%zu]=%.17g, the sequential reference's %.17g", what, i, got[i], want[i]);
            return b;
        }
    return "";
}

// ---- matmul: C = A * B, rows of C in blocks; i-k-j order (unit stride on B and C).

class Matmul {
public:
    Matmul(const Params& p, const Alloc& alloc) : n_(p.n), np_(p.nprocs) {
        a_ = static_cast<double*>(alloc(sizeof(double) * n_ * n_));
        b_ = static_cast<double*>(alloc(sizeof(double) * n_ * n_));
        c_ = static_cast<double*>(alloc(sizeof(double) * n_ * n_));
    }
    std::string size() const { return std::to_string(n_) + "x" + std::to_string(n_); }
    void init(int pid) {
        long lo, hi;
        block(n_, np_, pid, lo, hi);
        fill(a_, b_, lo, hi);
    }
    void corrupt() { c_[(n_ / 3) * n_ + n_ / 2] += 1; }
    template <class Sync>
    void run(int pid, Sync&) {
        long lo, hi;
        block(n_, np_, pid, lo, hi);
        rows(a_, b_, c_, lo, hi);
    }
    std::string check() const {
        std::vector<double> a(n_ * n_), b(n_ * n_), c(n_ * n_);
        fill(a.data(), b.data(), 0, n_);
        rows(a.data(), b.data(), c.data(), 0, n_);
        return compare("C", c_, c.data(), c.size());
    }

private:
    void fill(double* a, double* b, long lo, long hi) const {  // rows [lo, hi) of A and B
        for (long i = lo * n_; i < hi * n_; i++) a[i] = 2 * uniform(1, i) - 1;
        for (long i = lo * n_; i < hi * n_; i++) b[i] = 2 * uniform(2, i) - 1;
    }
    void rows(const double* a, const double* b, double* c, long lo, long hi) const {
        for (long i = lo; i < hi; i++) {
            double* ci = c + i * n_;
            for (long j = 0; j < n_; j++) ci[j] = 0;
            for (long k = 0; k < n_; k++) {
                const double aik = a[i * n_ + k];
                const double* bk = b + k * n_;
                for (long j = 0; j < n_; j++) ci[j] += aik * bk[j];
            }
        }
    }
    long n_;
    int np_;
    double *a_, *b_, *c_;
};

// ---- jacobi: two n x n grids, interior rows in blocks, a barrier per sweep; each sweep's largest
// change is reduced under lock 0 (one acquire per thread per sweep).

class Jacobi {
public:
    Jacobi(const Params& p, const Alloc& alloc) : n_(p.n), iters_(p.iters), np_(p.nprocs) {
        for (double*& g : grid_) g = static_cast<double*>(alloc(sizeof(double) * n_ * n_));
        maxdiff_ = static_cast<double*>(alloc(sizeof(double) * iters_));
    }
    std::string size() const { return std::to_string(n_) + "x" + std::to_string(n_) + "x" + std::to_string(iters_); }
    void init(int pid) {  // the thread's interior rows; the first and the last thread the boundary rows too
        long lo, hi;
        block(n_ - 2, np_, pid, lo, hi);
        lo = pid == 0 ? 0 : lo + 1;
        hi = pid == np_ - 1 ? n_ : hi + 1;
        fill(grid_[0], lo, hi);
        fill(grid_[1], lo, hi);
        if (pid == 0)
            for (long t = 0; t < iters_; t++) maxdiff_[t] = 0;
    }
    void corrupt() { grid_[iters_ % 2][(n_ / 2) * n_ + n_ / 2] += 1; }
    template <class Sync>
    void run(int pid, Sync& s) {
        long lo, hi;
        block(n_ - 2, np_, pid, lo, hi);
        for (long t = 0; t < iters_; t++) {
            const double d = sweep(grid_[t % 2], grid_[(t + 1) % 2], lo + 1, hi + 1);
            s.lock(0);
            if (d > maxdiff_[t]) maxdiff_[t] = d;
            s.unlock(0);
            s.barrier();
        }
    }
    std::string check() const {
        std::vector<double> g[2] = {std::vector<double>(n_ * n_), std::vector<double>(n_ * n_)};
        fill(g[0].data(), 0, n_);
        fill(g[1].data(), 0, n_);
        std::vector<double> md(iters_);
        for (long t = 0; t < iters_; t++) md[t] = sweep(g[t % 2].data(), g[(t + 1) % 2].data(), 1, n_ - 1);
        std::string f = compare("grid", grid_[iters_ % 2], g[iters_ % 2].data(), n_ * n_);
        return f.empty() ? compare("largest change", maxdiff_, md.data(), md.size()) : f;
    }

private:
    void fill(double* g, long lo, long hi) const {  // rows [lo, hi)
        for (long i = lo; i < hi; i++)
            for (long j = 0; j < n_; j++)
                g[i * n_ + j] = i == 0 ? 1.0 : (i == n_ - 1 || j == 0 || j == n_ - 1) ? 0.5 : uniform(3, i * n_ + j);
    }
    double sweep(const double* src, double* dst, long lo, long hi) const {
        double md = 0;
        for (long i = lo; i < hi; i++)
            for (long j = 1; j < n_ - 1; j++) {
                const double* r = src + i * n_;
                const double v = 0.25 * (r[j - n_] + r[j + n_] + r[j - 1] + r[j + 1]);
                md = std::fmax(md, std::fabs(v - r[j]));
                dst[i * n_ + j] = v;
            }
        return md;
    }
    long n_, iters_;
    int np_;
    double* grid_[2];
    double* maxdiff_;
};

// ---- fft: a 2-D FFT as row FFTs and transposes, forward then inverse, --iters times. Each pass:
// every thread transforms its own rows of `from` in place (local), a barrier, then writes its own
// rows of `to` from its columns of `from` (reads a strip of every thread's rows: all to all), a
// barrier. Four passes a round trip; the data ends where it began, so the result is also compared
// with the input.

class Fft {
public:
    using cplx = std::complex<double>;
    Fft(const Params& p, const Alloc& alloc) : n_(p.n), iters_(p.iters), np_(p.nprocs) {
        for (cplx*& m : m_) m = static_cast<cplx*>(alloc(sizeof(cplx) * n_ * n_));
    }
    std::string size() const { return std::to_string(n_) + "x" + std::to_string(n_) + "x" + std::to_string(iters_); }
    void init(int pid) {
        long lo, hi;
        block(n_, np_, pid, lo, hi);
        fill(m_[0], lo, hi);
    }
    void corrupt() { m_[0][(n_ / 2) * n_ + n_ / 3] += 1; }
    template <class Sync>
    void run(int pid, Sync& s) {
        long lo, hi;
        block(n_, np_, pid, lo, hi);
        for (long pass = 0; pass < 4 * iters_; pass++) {
            cplx* from = m_[pass % 2];
            for (long i = lo; i < hi; i++) fft_row(from + i * n_, pass % 4 < 2 ? -1 : 1);
            s.barrier();
            transpose_rows(from, m_[(pass + 1) % 2], lo, hi);
            s.barrier();
        }
    }
    std::string check() const {
        std::vector<cplx> m[2] = {std::vector<cplx>(n_ * n_), std::vector<cplx>(n_ * n_)};
        fill(m[0].data(), 0, n_);
        const std::vector<cplx> input = m[0];
        for (long pass = 0; pass < 4 * iters_; pass++) {
            for (long i = 0; i < n_; i++) fft_row(m[pass % 2].data() + i * n_, pass % 4 < 2 ? -1 : 1);
            transpose_rows(m[pass % 2].data(), m[(pass + 1) % 2].data(), 0, n_);
        }
        const cplx* got = m_[0];  // 4 * iters passes: back in matrix 0
        std::string f = compare("re,im", reinterpret_cast<const double*>(got), reinterpret_cast<const double*>(m[0].data()),
                                2 * m[0].size());
        if (!f.empty()) return f;
        // The round trip is the identity up to rounding: a check of the transform itself.
        for (std::size_t i = 0; i < input.size(); i++)
            if (std::abs(got[i] - input[i]) > 1e-6) {
                char b[128];
                std::snprintf(b, sizeof b, "element %zu after inverse transforms: %g%+gi, the input %g%+gi", i, got[i].real(),
                              got[i].imag(), input[i].real(), input[i].imag());
                return b;
            }
        return "";
    }

private:
    void fill(cplx* m, long lo, long hi) const {  // rows [lo, hi)
        for (long i = lo * n_; i < hi * n_; i++) m[i] = cplx(2 * uniform(4, i) - 1, 2 * uniform(5, i) - 1);
    }
    // In-place iterative radix-2 FFT of one row; sign -1 forward, +1 inverse (scaled by 1/n).
    void fft_row(cplx* x, int sign) const {
        for (long i = 1, j = 0; i < n_; i++) {
            long bit = n_ >> 1;
            for (; j & bit; bit >>= 1) j ^= bit;
            j ^= bit;
            if (i < j) std::swap(x[i], x[j]);
        }
        for (long len = 2; len <= n_; len <<= 1) {
            const double ang = sign * 2 * M_PI / static_cast<double>(len);
            const cplx wl(std::cos(ang), std::sin(ang));
            for (long i = 0; i < n_; i += len) {
                cplx w(1, 0);
                for (long k = 0; k < len / 2; k++) {
                    const cplx u = x[i + k], v = x[i + k + len / 2] * w;
                    x[i + k] = u + v;
                    x[i + k + len / 2] = u - v;
                    w *= wl;
                }
            }
        }
        if (sign > 0)
            for (long i = 0; i < n_; i++) x[i] /= static_cast<double>(n_);
    }
    // Rows [lo, hi) of to = the transpose of from (column r of from).
    void transpose_rows(const cplx* from, cplx* to, long lo, long hi) const {
        for (long r = lo; r < hi; r++)
            for (long c = 0; c < n_; c++) to[r * n_ + c] = from[c * n_ + r];
    }
    long n_, iters_;
    int np_;
    cplx* m_[2];
};

// ---- taskq: a shared queue under lock 0. Tasks 0 .. T/2-1 are seeded; task t < T/2 spawns task
// t + T/2, which starts from t's result (written by whichever thread ran t: ordered by the queue
// lock's release at the push and acquire at the pop). Each result also counts into a histogram
// under lock 1. A thread leaves when every task is done; an empty queue with tasks still running
// means another try after a yield (lock-heavy on purpose). Checked: every task ran exactly once, its result and
// the histogram equal the sequential run's.

class TaskQueue {
public:
    TaskQueue(const Params& p, const Alloc& alloc) : tasks_(p.tasks), work_(p.work), np_(p.nprocs) {
        q_ = static_cast<Queue*>(alloc(sizeof(Queue)));
        slot_ = static_cast<std::int64_t*>(alloc(sizeof(std::int64_t) * tasks_));
        result_ = static_cast<std::uint64_t*>(alloc(sizeof(std::uint64_t) * tasks_));
        runs_ = static_cast<std::uint32_t*>(alloc(sizeof(std::uint32_t) * tasks_));
    }
    std::string size() const { return std::to_string(tasks_) + "x" + std::to_string(work_); }
    void init(int pid) {  // thread 0 the queue's state, every thread a block of the arrays
        if (pid == 0) {
            q_->head = 0;
            q_->tail = tasks_ / 2;
            q_->done = 0;
            for (std::uint64_t& h : q_->hist) h = 0;
        }
        long lo, hi;
        block(tasks_, np_, pid, lo, hi);
        for (long t = lo; t < hi; t++) {
            slot_[t] = t < tasks_ / 2 ? t : -1;
            result_[t] = 0;
            runs_[t] = 0;
        }
    }
    void corrupt() { result_[tasks_ / 3] ^= 1; }
    template <class Sync>
    void run(int, Sync& s) {
        for (;;) {
            s.lock(0);
            if (q_->done == tasks_) {
                s.unlock(0);
                return;
            }
            const std::int64_t t = q_->head < q_->tail ? slot_[q_->head++] : -1;
            s.unlock(0);
            if (t < 0) {  // the queue is empty for now: running tasks will spawn more
                std::this_thread::yield();  // to them, on a host with fewer cores than threads
                continue;
            }
            const std::uint64_t v = value(t, t < tasks_ / 2 ? 0 : result_[t - tasks_ / 2]);
            result_[t] = v;
            runs_[t] += 1;
            s.lock(1);
            q_->hist[v % kBins] += 1;
            s.unlock(1);
            s.lock(0);
            if (t < tasks_ / 2) slot_[q_->tail++] = t + tasks_ / 2;
            q_->done += 1;
            s.unlock(0);
        }
    }
    std::string check() const {
        std::vector<std::uint64_t> r(tasks_);
        std::uint64_t hist[kBins] = {};
        for (long t = 0; t < tasks_; t++) {
            r[t] = value(t, t < tasks_ / 2 ? 0 : r[t - tasks_ / 2]);
            hist[r[t] % kBins] += 1;
        }
        char b[160];
        for (long t = 0; t < tasks_; t++) {
            if (runs_[t] != 1) {
                std::snprintf(b, sizeof b, "task %ld ran %u times, not once", t, runs_[t]);
                return b;
            }
            if (result_[t] != r[t]) {
                std::snprintf(b, sizeof b, "task %ld result %llu, the sequential run's %llu", t,
                              (unsigned long long)result_[t], (unsigned long long)r[t]);
                return b;
            }
        }
        for (int i = 0; i < kBins; i++)
            if (q_->hist[i] != hist[i]) {
                std::snprintf(b, sizeof b, "histogram bin %d counted %llu, the sequential run %llu", i,
                              (unsigned long long)q_->hist[i], (unsigned long long)hist[i]);
                return b;
            }
        return "";
    }

private:
    static constexpr int kBins = 64;
    struct Queue {
        std::int64_t head, tail, done;
        std::uint64_t hist[kBins];
    };
    std::uint64_t value(std::int64_t t, std::uint64_t parent) const {
        std::uint64_t v = parent ^ static_cast<std::uint64_t>(t);
        for (long k = 0; k < work_; k++) v = mix(v);
        return v;
    }
    long tasks_, work_;
    int np_;
    Queue* q_;
    std::int64_t* slot_;  // the queue's ring: task ids in push order
    std::uint64_t* result_;
    std::uint32_t* runs_;
};

// ---- what both sides run: every thread writes its part of the data (the rows it computes on), a
// barrier, the clock between two barriers around the parallel body (read by thread 0), the result
// line after the run.

template <class Prog, class Sync>
void thread_body(Prog& prog, int pid, Sync& s, double* parallel_s, bool inject_error) {
    prog.init(pid);
    s.barrier();
    double t0 = 0;
    if (pid == 0) t0 = now_s();
    s.barrier();  // no thread starts before the clock does
    prog.run(pid, s);
    s.barrier();
    if (pid == 0) *parallel_s = now_s() - t0;
    if (pid == 0 && inject_error) prog.corrupt();  // read by the check on the same node
}

// Prints the result line; returns the exit status (0 PASS, 1 FAIL).
inline int report(const Params& p, const std::string& size, double parallel_s, const std::string& failure) {
    std::printf("dsm-vs-argo program=%s threads=%d size=%s parallel_s=%.6f result=%s%s%s\n", p.program.c_str(), p.nprocs,
                size.c_str(), parallel_s, failure.empty() ? "PASS" : "FAIL", failure.empty() ? "" : " failure=",
                failure.c_str());
    std::fflush(stdout);
    return failure.empty() ? 0 : 1;
}

}  // namespace dsm_vs_argo

#endif  // ICCS_PERF_DSM_VS_ARGO_PROGRAMS_HPP
