// integrate.cpp: adaptive numerical integration (trapezoid rule, an interval halved until the two
// halves agree with the whole within eps). Latency-bound: a job's arguments are 56 bytes and its
// result 8. Jobs split intervals wider than `grain`; narrower ones recurse sequentially. Every
// interval is split at the same point and the two halves added in the same order as in the
// sequential recursion, so the result equals the sequential one bit for bit.
#include <cmath>

#include "satin_apps.hpp"

namespace iccs::satin {

namespace {

struct Args {
    double a, b, fa, fb, area, eps, grain;
};
static_assert(sizeof(Args) == 56);

// The integrand: a sum of oscillating terms (costly enough that a leaf is worth a job).
double f(double x) {
    double s = 0;
    for (int k = 1; k <= 24; ++k) s += std::sin(x * k * 0.37) / k;
    return s * std::exp(-0.01 * x) + 1.5;
}

struct Step {
    double m, fm, l, r;
    bool done;
};
// One halving, shared by the job and the sequential recursion.
Step step(const Args& x) {
    Step s;
    s.m = (x.a + x.b) / 2;
    s.fm = f(s.m);
    s.l = (x.fa + s.fm) * (s.m - x.a) / 2;
    s.r = (s.fm + x.fb) * (x.b - s.m) / 2;
    s.done = std::fabs(s.l + s.r - x.area) < x.eps;
    return s;
}

double seq(const Args& x) {
    const Step s = step(x);
    if (s.done) return s.l + s.r;
    return seq(Args{x.a, s.m, x.fa, s.fm, s.l, x.eps, x.grain}) + seq(Args{s.m, x.b, s.fm, x.fb, s.r, x.eps, x.grain});
}

void job(group::Worker& w, std::span<const uint8_t> args, std::vector<uint8_t>& result) {
    Args x;
    if (!read_one(args, x)) return;
    if (x.b - x.a < x.grain) {
        result = bytes_of(seq(x));
        return;
    }
    const Step s = step(x);
    if (s.done) {
        result = bytes_of(s.l + s.r);
        return;
    }
    const Args l{x.a, s.m, x.fa, s.fm, s.l, x.eps, x.grain}, r{s.m, x.b, s.fm, x.fb, s.r, x.eps, x.grain};
    const auto hl = w.spawn(kIntegrate, std::span(reinterpret_cast<const uint8_t*>(&l), sizeof l));
    const auto hr = w.spawn(kIntegrate, std::span(reinterpret_cast<const uint8_t*>(&r), sizeof r));
    if (!w.sync()) return;
    double vl = 0, vr = 0;
    if (!read_one(std::span(w.result(hl)), vl) || !read_one(std::span(w.result(hr)), vr)) return;
    result = bytes_of(vl + vr);
}

struct Size {
    double b, eps, grain;
};
Size size_of(bool paper) { return paper ? Size{4000.0, 2e-12, 4.0} : Size{400.0, 1e-10, 8.0}; }

std::vector<uint8_t> root_args(bool paper, uint64_t) {
    const Size z = size_of(paper);
    const Args x{0.0, z.b, f(0.0), f(z.b), (f(0.0) + f(z.b)) * z.b / 2, z.eps, z.grain};
    std::vector<uint8_t> b;
    put(b, x);
    return b;
}

std::vector<uint8_t> sequential(std::span<const uint8_t> args) {
    Args x;
    if (!read_one(args, x)) return {};
    return bytes_of(seq(x));
}

std::string describe(std::span<const uint8_t> r) {
    double v = 0;
    if (!read_one(r, v)) return "no result (" + std::to_string(r.size()) + " bytes)";
    char s[64];
    std::snprintf(s, sizeof s, "integral %.17g", v);
    return s;
}

std::string problem(bool paper) {
    const Size z = size_of(paper);
    char s[128];
    std::snprintf(s, sizeof s, "integral over [0, %g], eps %g, jobs split intervals wider than %g", z.b, z.eps, z.grain);
    return s;
}

}  // namespace

App integrate_app() {
    return App{"integrate", kIntegrate, job, "adaptive numerical integration: 56-byte jobs, 8-byte results (latency-bound)",
               root_args, sequential, describe, problem};
}

}  // namespace iccs::satin
