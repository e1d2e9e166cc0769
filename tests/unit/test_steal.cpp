// test_steal.cpp: group/steal.hpp (divide-and-conquer with work stealing) over the in-process
// loopback runtime (dsm/testing): a synthetic tree whose every leaf must be counted exactly once,
// under RS, CHS and CRS on several shapes of sites x clusters x threads; the four Satin programs
// against their sequential references and against answers from outside their kernels
// (satin_known.hpp, itself checked against brute force); CRS never has more than one WAN steal
// outstanding per thread; CHS never steals over the WAN while its cluster has work (the trace counter).
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "group.hpp"
#include "loopback_runtime.hpp"
#include "satin_apps.hpp"
#include "satin_known.hpp"
#include "steal.hpp"

using namespace iccs;
using namespace iccs::group;

namespace {

// A job of depth d and fan-out f: a leaf returns 1 after a little work; the sum over the tree is
// f^d. The argument carries a padding table (like TSP's) so that stolen jobs have a body.
void tree_job(Worker& w, std::span<const uint8_t> args, std::vector<uint8_t>& result) {
    uint32_t d = 0, f = 0;
    if (args.size() < 8) return;
    std::memcpy(&d, args.data(), 4);
    std::memcpy(&f, args.data() + 4, 4);
    uint64_t v = 0;
    if (d == 0) {
        volatile double x = 1;
        for (int i = 0; i < 20000; ++i) x = x * 1.0000001 + 1e-9;
        v = 1;
    } else {
        const uint32_t hdr[2] = {d - 1, f};
        for (uint32_t k = 0; k < f; ++k)
            w.spawn(0, std::span(reinterpret_cast<const uint8_t*>(hdr), 8), args.subspan(8));
        if (!w.sync()) return;
        for (uint32_t k = 0; k < f; ++k) {
            uint64_t x = 0;
            if (w.result(k).size() != 8) return;
            std::memcpy(&x, w.result(k).data(), 8);
            v += x;
        }
    }
    result.resize(8);
    std::memcpy(result.data(), &v, 8);
}

struct Outcome {
    std::vector<uint8_t> result;
    StealCounters sum;
    std::string err;
};

Outcome run_world(const std::vector<uint16_t>& site_of_cluster, uint16_t threads, StealPolicy p,
                  std::vector<JobFn> kinds, uint16_t root_kind, const std::vector<uint8_t>& root_args) {
    const auto C = static_cast<uint16_t>(site_of_cluster.size());
    iccs::testing::LoopbackWorld lw(C, threads);
    Topology topo;
    std::string err;
    REQUIRE(make_topology(C, threads, site_of_cluster, topo, err));
    StealOptions o;
    o.policy = p;
    o.timeout_ms = 120'000;
    std::vector<std::unique_ptr<Stealer>> st;
    for (uint16_t c = 0; c < C; ++c) st.push_back(std::make_unique<Stealer>(lw.runtime(c), topo, o, kinds));
    Outcome out;
    std::vector<std::string> errs(size_t{C} * threads);
    std::vector<StealCounters> sums(size_t{C} * threads);
    std::vector<std::thread> th;
    for (uint16_t c = 0; c < C; ++c)
        for (uint16_t t = 0; t < threads; ++t)
            th.emplace_back([&, c, t] {
                std::string& e = errs[size_t{c} * threads + t];
                if (!st[c]->run(t, root_kind, root_args, c == 0 && t == 0 ? &out.result : nullptr, nullptr))
                    e = st[c]->error();
                std::string g;
                if (!gather_steal_counters(lw.runtime(c).endpoint(t), *st[c], sums[size_t{c} * threads + t], g) &&
                    e.empty())
                    e = g;
            });
    for (auto& x : th) x.join();
    lw.stop();
    for (const auto& e : errs)
        if (!e.empty() && out.err.empty()) out.err = e;
    out.sum = sums[0];
    return out;
}

std::vector<uint8_t> tree_args(uint32_t d, uint32_t f, size_t pad) {
    std::vector<uint8_t> a(8 + pad, 7);
    std::memcpy(a.data(), &d, 4);
    std::memcpy(a.data() + 4, &f, 4);
    return a;
}

struct Shape {
    std::vector<uint16_t> sites;
    uint16_t threads;
};
const Shape kShapes[] = {
    {{0}, 1}, {{0}, 3}, {{0, 1}, 2}, {{0, 0, 1}, 2}, {{0, 1, 2, 3}, 1}, {{0, 1, 2, 3}, 2},
};

}  // namespace

TEST_CASE("steal: every leaf of a spawn tree is counted once, every policy and shape", "[steal]") {
    for (StealPolicy p : {StealPolicy::kRs, StealPolicy::kChs, StealPolicy::kCrs})
        for (const Shape& s : kShapes) {
            INFO("policy " << to_string(p) << ", " << s.sites.size() << " clusters x " << s.threads << " threads");
            const Outcome o = run_world(s.sites, s.threads, p, {tree_job}, 0, tree_args(6, 4, 256));
            REQUIRE(o.err.empty());
            REQUIRE(o.result.size() == 8);
            uint64_t v = 0;
            std::memcpy(&v, o.result.data(), 8);
            CHECK(v == 4096);
            CHECK(o.sum.jobs_spawned == 4 + 16 + 64 + 256 + 1024 + 4096);
            CHECK(o.sum.jobs_run == o.sum.jobs_spawned + 1);  // and the root
            CHECK(o.sum.local_successes <= o.sum.local_attempts);
            CHECK(o.sum.wan_successes <= o.sum.wan_attempts);
            if (s.sites.size() == 1) CHECK(o.sum.wan_attempts == 0);
            // CRS: at most one WAN steal outstanding per thread; the others are synchronous.
            CHECK(o.sum.max_outstanding_wan <= 1);
            if (p == StealPolicy::kChs) {
                CHECK(o.sum.wan_steals_cluster_busy == 0);  // the trace check
                CHECK(o.sum.wan_steals_traced == (s.sites.size() > 1 ? o.sum.wan_attempts : 0));
            } else {
                CHECK(o.sum.wan_steals_traced == 0);
            }
        }
}

TEST_CASE("steal: the four Satin programs equal their sequential references", "[steal]") {
    const std::vector<JobFn> kinds = satin::job_kinds();
    for (const satin::App& app : satin::apps())
        for (StealPolicy p : {StealPolicy::kRs, StealPolicy::kChs, StealPolicy::kCrs}) {
            INFO(app.name << " under " << to_string(p));
            const std::vector<uint8_t> root = app.root_args(false, 3);
            const Outcome o = run_world({0, 1}, 2, p, kinds, app.kind, root);
            REQUIRE(o.err.empty());
            CHECK(o.result == app.sequential(root));
            CHECK(o.sum.max_outstanding_wan <= 1);
            // and the answer from outside the program's kernel (what sequential() cannot give)
            std::string why;
            const bool known = satin_known::check(app.name, root, o.result, why);
            INFO(why);
            CHECK(known);
        }
}

TEST_CASE("steal: the known answers themselves (n-queens table, closed-form integral, Held-Karp)", "[steal]") {
    // Held-Karp against every tour of a small instance (5! orders from city 0)
    const uint32_t n = 6;
    const uint32_t d[n * n] = {0,  12, 29, 22, 13, 24, 12, 0,  19, 3,  25, 6,  29, 19, 0,  21, 23, 28,
                               22, 3,  21, 0,  4,  5,  13, 25, 23, 4,  0,  16, 24, 6,  28, 5,  16, 0};
    std::vector<uint32_t> order{1, 2, 3, 4, 5};
    uint64_t brute = UINT64_MAX;
    do {
        uint64_t len = d[0 * n + order[0]] + d[order.back() * n + 0];
        for (size_t i = 0; i + 1 < order.size(); ++i) len += d[order[i] * n + order[i + 1]];
        brute = std::min(brute, len);
    } while (std::next_permutation(order.begin(), order.end()));
    CHECK(satin_known::tsp_held_karp(n, d) == brute);
    // the closed form against a fine midpoint sum over [0, 10]
    double mid = 0;
    const int steps = 400'000;
    for (int i = 0; i < steps; ++i) {
        const double x = (i + 0.5) * 10.0 / steps;
        double f = 0;
        for (int k = 1; k <= 24; ++k) f += std::sin(x * k * 0.37) / k;
        mid += (f * std::exp(-0.01 * x) + 1.5) * 10.0 / steps;
    }
    CHECK(std::fabs(satin_known::integrate_exact(0, 10) - mid) < 1e-6);
    // n-queens: the table's small entries by brute force over permutations
    for (uint32_t q = 1; q <= 8; ++q) {
        std::vector<int> col(q);
        for (uint32_t i = 0; i < q; ++i) col[i] = static_cast<int>(i);
        uint64_t count = 0;
        do {
            bool ok = true;
            for (uint32_t i = 0; i < q && ok; ++i)
                for (uint32_t j = i + 1; j < q && ok; ++j) ok = std::abs(col[i] - col[j]) != static_cast<int>(j - i);
            count += ok;
        } while (std::next_permutation(col.begin(), col.end()));
        CHECK(count == satin_known::kQueens[q]);
    }
}

TEST_CASE("steal: a job of an unknown kind fails the run with its name on every cluster, no hang", "[steal]") {
    const Outcome o = run_world({0, 1}, 2, StealPolicy::kRs, {tree_job}, 5, tree_args(1, 2, 0));
    CHECK(o.err.find("unknown kind 5") != std::string::npos);
    CHECK(o.sum.failed_threads >= 1);
}

TEST_CASE("steal: policy names", "[steal]") {
    StealPolicy p;
    CHECK((parse_steal_policy("crs", p) && p == StealPolicy::kCrs));
    CHECK((parse_steal_policy("chs", p) && p == StealPolicy::kChs));
    CHECK((parse_steal_policy("rs", p) && p == StealPolicy::kRs));
    CHECK_FALSE(parse_steal_policy("random", p));
    CHECK(std::string(to_string(StealPolicy::kChs)) == "chs");
}
