// satin_known.hpp: answers for the Satin programs that do not come from their own kernels (their
// sequential() shares the kernel with the parallel run, so a wrong kernel would pass against it):
// nqueens from the literature (OEIS A000170), integrate from the integral's closed form, satin-tsp
// from a Held-Karp dynamic program written here (the programs use branch and bound). The ray
// tracer has none here: tests/integration/satin_run.py renders sampled pixels with its own tracer.
// Used by the unit test `steal` and by the ThreadSanitizer driver tests/tsan/steal_tsan.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace iccs::satin_known {

// Solutions of the n-queens problem, n = 0..18 (OEIS A000170).
inline constexpr uint64_t kQueens[] = {1,     1,      0,      0,       2,        10,        4,
                                       40,    92,     352,    724,     2680,     14200,     73712,
                                       365596, 2279184, 14772512, 95815104, 666090624};

// The integral over [a, b] of the integrate program's integrand
//   f(x) = e^(-x/100) * sum_{k=1..24} sin(0.37 k x) / k + 1.5
// by the closed form of the integral of e^(-cx) sin(wx): (e^(-cx) (-c sin wx - w cos wx)) / (c^2 + w^2).
inline double integrate_exact(double a, double b) {
    const double c = 0.01;
    auto anti = [&](double x, double w) { return std::exp(-c * x) * (-c * std::sin(w * x) - w * std::cos(w * x)) / (c * c + w * w); };
    double s = 1.5 * (b - a);
    for (int k = 1; k <= 24; ++k) s += (anti(b, 0.37 * k) - anti(a, 0.37 * k)) / k;
    return s;
}

// The shortest closed tour through all n cities of the n x n distance table `d` (row-major), by
// Held-Karp: best[S][j] = the shortest path from city 0 through the set S ending at j.
inline uint64_t tsp_held_karp(uint32_t n, const uint32_t* d) {
    if (n < 2) return 0;
    const uint32_t m = n - 1, full = (1u << m) - 1;  // cities 1..n-1 as bits 0..m-1
    const uint64_t inf = UINT64_MAX / 4;
    std::vector<uint64_t> best((size_t{1} << m) * m, inf);
    for (uint32_t j = 0; j < m; ++j) best[(size_t{1} << j) * m + j] = d[0 * n + j + 1];
    for (uint32_t s = 1; s <= full; ++s)
        for (uint32_t j = 0; j < m; ++j) {
            const uint64_t here = best[size_t{s} * m + j];
            if (!(s >> j & 1) || here >= inf) continue;
            for (uint32_t k = 0; k < m; ++k) {
                if (s >> k & 1) continue;
                uint64_t& next = best[size_t{s | 1u << k} * m + k];
                next = std::min(next, here + d[(j + 1) * n + k + 1]);
            }
        }
    uint64_t tour = inf;
    for (uint32_t j = 0; j < m; ++j) tour = std::min(tour, best[size_t{full} * m + j] + d[(j + 1) * n + 0]);
    return tour;
}

// The program's answer in `result` against the known one for its root arguments `root`, by the
// program's name; false with `why`. Unknown programs (raytrace) return true with `why` saying so.
inline bool check(const std::string& app, std::span<const uint8_t> root, std::span<const uint8_t> result,
                  std::string& why) {
    auto word = [](std::span<const uint8_t> b, size_t off, auto& v) {
        if (off + sizeof v > b.size()) return false;
        std::memcpy(&v, b.data() + off, sizeof v);
        return true;
    };
    auto unreadable = [&] {
        why = app + ": root arguments or result of an unexpected size";
        return false;
    };
    if (app == "nqueens") {  // root: n, row, cols, d1, d2, spawn_rows (uint32 each)
        uint32_t n = 0;
        uint64_t got = 0;
        if (!word(root, 0, n) || n >= std::size(kQueens) || !word(result, 0, got)) return unreadable();
        why = std::to_string(n) + " queens: " + std::to_string(got) + " solutions, known " + std::to_string(kQueens[n]);
        return got == kQueens[n];
    }
    if (app == "integrate") {  // root: a, b, fa, fb, area, eps, grain (double each)
        double a = 0, b = 0, got = 0;
        if (!word(root, 0, a) || !word(root, 8, b) || !word(result, 0, got)) return unreadable();
        const double exact = integrate_exact(a, b);
        // the adaptive rule's own error at eps 1e-10: ~1e-8 over [0, 400]
        why = "integral " + std::to_string(got) + ", closed form " + std::to_string(exact) + ", difference " +
              std::to_string(got - exact);
        return std::fabs(got - exact) < 1e-6 * std::max(1.0, std::fabs(exact));
    }
    if (app == "satin-tsp") {  // root: n, count, len, bound, spawn_depth, nonce, path[24], then the n x n table
        uint32_t n = 0, got = 0;
        if (!word(root, 0, n) || n < 2 || n > 24 || root.size() != 48 + size_t{4} * n * n || !word(result, 0, got))
            return unreadable();
        std::vector<uint32_t> d(size_t{n} * n);
        std::memcpy(d.data(), root.data() + 48, d.size() * 4);
        const uint64_t opt = tsp_held_karp(n, d.data());
        why = std::to_string(n) + " cities: tour " + std::to_string(got) + ", Held-Karp's optimum " + std::to_string(opt);
        return got == opt;
    }
    why = "no known answer for " + app + " here";
    return true;
}

}  // namespace iccs::satin_known
