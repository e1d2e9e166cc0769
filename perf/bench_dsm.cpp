// bench_dsm.cpp: `iccs bench dsm`. One DSM program (a built-in of the runtime's launcher, forked
// once per cluster) measures each operation `rounds` times at cluster 0 and writes the samples'
// median and p99 to a file the launcher's process reads; run once over iccs, once over direct.
#include "bench_dsm.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "config.hpp"
#include "dsm.hpp"
#include "floor_check.hpp"
#include "runtime_launch.hpp"

namespace iccs {

namespace {

constexpr const char* kOps[] = {"fetch", "diff", "lock", "barrier", "handoff_recall", "handoff_request", "lock_from_home"};
constexpr const char* kOpNames[] = {"page fetch round trip (fault to data)", "release of 1 fully written page (diff)",
                                    "lock acquire+release (home remote)", "barrier (2 clusters)",
                                    "lock hand-off, home here (a recall)", "lock hand-off, home at the holder",
                                    "LOCK of a token at its home (baseline)"};
constexpr int kNumOps = 7;
// The hand-off rows, also given as a ratio to the baseline row measured in the same rounds (a LOCK
// of a never-used lock homed at the other cluster: one request to its service thread, one grant).
constexpr int kFirstHandoff = 4, kLastHandoff = 5, kHandoffBase = 6;

struct OpStats {
    double median_us = 0, p99_us = 0;
    uint64_t n = 0;
};
struct TransportStats {
    OpStats op[kNumOps];
    std::string error;
};

OpStats stats_of(std::vector<double> v) {
    OpStats s;
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    s.n = v.size();
    s.median_us = v[v.size() / 2];
    s.p99_us = v[std::min(v.size() - 1, size_t(double(v.size()) * 0.99))];
    return s;
}

// The program of each cluster process: the DSM over the runtime it was given, one compute thread.
int dsm_bench_program(std::unique_ptr<Runtime> rt, uint32_t rounds, const std::string& out_file) {
    using namespace dsm;
    using clk = std::chrono::steady_clock;
    auto us = [](clk::time_point a, clk::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); };
    const uint16_t c = rt->cluster();
    DsmConfig cfg;
    std::string err;
    // The ICCS_DSM_* variables apply as to a PARMACS program (e.g. ICCS_DSM_LOCK_SPIN_US=0 for the
    // hand-off rows without the grant spin); the region is the benchmark's own size.
    if (!dsm_config_from_env(cfg, err)) std::fprintf(stderr, "bench dsm, cluster %u: %s\n", unsigned(c), err.c_str());
    cfg.region_bytes = 64ull << 20;
    std::unique_ptr<DsmNode> n = DsmNode::attach(*rt, cfg, err);
    bool ok = n != nullptr && rt->endpoint(0).barrier() == RtStatus::kOk;  // every cluster attached
    if (!ok) std::fprintf(stderr, "bench dsm, cluster %u: %s\n", unsigned(c), n ? rt->endpoint(0).last_error().c_str() : err.c_str());
    std::vector<double> samples[kNumOps];
    if (ok) {
        n->bind_thread(0);
        // Page 2r is homed at cluster 0, page 2r+1 at cluster 1 (round-robin homes): every
        // measured operation is at cluster 0 against cluster 1.
        auto* base = static_cast<uint8_t*>(n->alloc(uint64_t(rounds) * 2 * cfg.page_bytes, cfg.page_bytes));
        auto check = [&](DsmStatus s, const char* what) {
            if (s != DsmStatus::kOk && ok) {
                std::fprintf(stderr, "bench dsm, cluster %u: %s: %s\n", unsigned(c), what, DsmNode::error().c_str());
                ok = false;
            }
        };
        check(base ? n->start_parallel() : DsmStatus::kNoSpace, "start");
        // Diff: cluster 0 rewrites every word of a page homed at 1 and releases it (flush: twin
        // compare, one diff message, applied at the home, acked).
        for (uint32_t r = 0; ok && r < rounds && c == 0; r++) {
            auto* p = reinterpret_cast<uint32_t*>(base + uint64_t(2 * r + 1) * cfg.page_bytes);
            for (uint32_t i = 0; i < cfg.page_bytes / 4; i++) p[i] = r * 4096 + i + 1;
            const auto t0 = clk::now();
            check(n->flush(), "flush");
            samples[1].push_back(us(t0, clk::now()));
        }
        check(n->barrier(1), "barrier");
        // Fetch: cluster 1 writes the same pages (homed at it); after a barrier cluster 0's
        // copies are invalid and each first read fetches the page from cluster 1.
        if (c == 1)
            for (uint32_t r = 0; r < rounds; r++) base[uint64_t(2 * r + 1) * cfg.page_bytes] = uint8_t(r + 1);
        check(n->barrier(2), "barrier");
        for (uint32_t r = 0; ok && r < rounds && c == 0; r++) {
            volatile uint8_t* p = base + uint64_t(2 * r + 1) * cfg.page_bytes;
            const auto t0 = clk::now();
            const uint8_t v = *p;
            samples[0].push_back(us(t0, clk::now()));
            if (v != uint8_t(r + 1)) {
                std::fprintf(stderr, "bench dsm: page %u read %u, cluster 1 wrote %u\n", r, v, unsigned(uint8_t(r + 1)));
                ok = false;
            }
        }
        check(n->barrier(3), "barrier");
        // Lock homed at the other cluster (id mod 2), uncontended: one cluster at a time.
        for (uint16_t turn = 0; turn < 2; turn++) {
            for (uint32_t r = 0; ok && r < rounds && c == turn; r++) {
                const uint32_t id = 11 - turn;
                const auto t0 = clk::now();
                check(n->lock(id), "lock");
                check(n->unlock(id), "unlock");
                if (c == 0) samples[2].push_back(us(t0, clk::now()));
            }
            check(n->barrier(4), "barrier");
        }
        for (uint32_t r = 0; ok && r < rounds; r++) {
            const auto t0 = clk::now();
            check(n->barrier(6), "barrier");
            if (c == 0) samples[3].push_back(us(t0, clk::now()));
        }
        // Lock hand-off: the LOCK of a token the other cluster holds (free), while that cluster's
        // compute thread computes (it spins 500 us), as in a program whose clusters take each other's
        // locks (SPLASH-3 barnes's cell locks). Rounds in fours, a barrier before each: lock 20 (homed
        // at cluster 0) taken by 0, then 1; lock 21 (homed at 1) by 0, then 1. From the second four on,
        // each LOCK of cluster 0 finds the token at cluster 1: lock 20's at its home here (its LOCK
        // recalls it from 1), lock 21's at 1, its home (a request to 1). A word of a page is written
        // under the lock, so the token carries a write notice. The baseline, in the same rounds: a
        // lock homed at cluster 1 that nobody took yet (its token at the home): a request and a grant.
        auto* word = reinterpret_cast<volatile uint64_t*>(base + cfg.page_bytes);
        for (uint32_t r = 0; ok && r < 4 * (rounds + 1); r++) {
            const uint16_t turn = r % 2;
            const uint32_t id = 20 + (r / 2) % 2;
            check(n->barrier(7), "barrier");
            if (c != turn) {
                const auto s0 = clk::now();
                while (us(s0, clk::now()) < 500) {
                }
                continue;
            }
            if (c == 0 && r >= 4 && id == 20) {
                const uint32_t fresh = 1001 + 2 * (r / 4);  // odd: homed at cluster 1
                const auto b0 = clk::now();
                check(n->lock(fresh), "lock");
                samples[kHandoffBase].push_back(us(b0, clk::now()));
                check(n->unlock(fresh), "unlock");
            }
            const auto t0 = clk::now();
            check(n->lock(id), "lock");
            if (c == 0 && r >= 4) samples[kFirstHandoff + (id - 20)].push_back(us(t0, clk::now()));
            word[id - 20] = word[id - 20] + 1;
            check(n->unlock(id), "unlock");
        }
        n->unbind_thread();
    }
    if (c == 0) {
        if (FILE* f = std::fopen(out_file.c_str(), "w")) {
            for (int i = 0; i < kNumOps; i++) {
                const OpStats s = stats_of(samples[i]);
                std::fprintf(f, "%s %.3f %.3f %llu\n", kOps[i], s.median_us, s.p99_us, (unsigned long long)s.n);
            }
            std::fclose(f);
        }
    }
    if (n) std::fprintf(stderr, "%s", n->format_counters().c_str());
    const int rc = runtime_finish(std::move(rt), ok);
    // The node stays mapped (the process ends now): its handlers may be named until the runtime
    // is gone, which runtime_finish has just done.
    n.release();
    return rc;
}

TransportStats run_over(RtTransport t, uint32_t rounds) {
    TransportStats ts;
    const std::vector<std::pair<std::string, std::string>> overrides = {
        {"machine.clusters", "2"}, {"cluster.compute_threads", "1"}, {"cluster.proxies", "1"},
        {"cluster.polling", "adaptive"}};
    const ConfigResult cr = configure("", overrides);
    if (!cr.ok()) {
        ts.error = cr.error;
        return ts;
    }
    RtLaunch l;
    l.spec.clusters = 2;
    l.spec.threads = 1;
    l.spec.transport = t;
    l.spec.quiet = true;
    if (!plan_from_config(*cr.config, 0, l.spec.plan, ts.error)) return ts;
    l.spec.plan.quiet = true;  // stdout is the benchmark's (--json): cluster reports go to stderr
    l.overrides = overrides;
    l.timeout_s = 300;
    const std::string out = "/tmp/iccs-bench-dsm-" + std::to_string(getpid()) + "-" + to_string(t);
    std::remove(out.c_str());
    l.builtin = [rounds, out](std::unique_ptr<Runtime> rt) { return dsm_bench_program(std::move(rt), rounds, out); };
    const int rc = rt_launch(l);
    std::ifstream in(out);
    std::string name;
    int i = 0;
    for (; i < kNumOps && in >> name >> ts.op[i].median_us >> ts.op[i].p99_us >> ts.op[i].n; i++)
        if (name != kOps[i]) break;
    std::remove(out.c_str());
    if (rc != 0 || i != kNumOps)
        ts.error = std::string("the dsm benchmark over ") + to_string(t) + " failed (exit " + std::to_string(rc) +
                   "; see the clusters' messages above)";
    return ts;
}

}  // namespace

int bench_dsm(const BenchDsmOptions& o) {
    const unsigned cores = std::max(1u, host_core_count());
    // Per run: 2 cluster processes x (1 compute thread + the runtime's service thread), and over
    // iccs 1 proxy thread each; adaptive polling: they sleep when idle, but they do compete.
    const unsigned threads_iccs = 2 * 3, threads_direct = 2 * 2;
    const bool over = threads_iccs > cores;
    std::fprintf(stderr, "bench dsm: 2 clusters x 1 compute thread, %u rounds per operation, 4 KiB pages, %u runs "
                         "each over iccs (1 proxy per cluster, fabric memif) and direct, interleaved; host has %u cores\n",
                 o.rounds, o.runs, cores);
    std::fflush(stderr);
    // Interleaved runs; each figure is the median over the runs of the run's median (or p99).
    std::vector<TransportStats> ics, dis;
    for (uint32_t r = 0; r < o.runs; r++) {
        ics.push_back(run_over(RtTransport::kIccs, o.rounds));
        dis.push_back(run_over(RtTransport::kDirect, o.rounds));
    }
    auto combine = [](const std::vector<TransportStats>& v) {
        TransportStats t;
        for (const auto& x : v)
            if (!x.error.empty() && t.error.empty()) t.error = x.error;
        for (int i = 0; i < kNumOps; i++) {
            std::vector<double> med, p99;
            for (const auto& x : v) {
                med.push_back(x.op[i].median_us);
                p99.push_back(x.op[i].p99_us);
                t.op[i].n += x.op[i].n;
            }
            std::sort(med.begin(), med.end());
            std::sort(p99.begin(), p99.end());
            t.op[i].median_us = med[med.size() / 2];
            t.op[i].p99_us = p99[p99.size() / 2];
        }
        return t;
    };
    const TransportStats ic = combine(ics), di = combine(dis);
    auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    // direct must be a floor (perf/floor_check.hpp): per operation, the runs' medians of each side.
    bool broken[kNumOps] = {};
    int nbroken = 0;
    for (int i = 0; i < kNumOps; i++) {
        std::vector<double> d, c;
        for (const auto& x : dis)
            if (x.error.empty()) d.push_back(x.op[i].median_us);
        for (const auto& x : ics)
            if (x.error.empty()) c.push_back(x.op[i].median_us);
        broken[i] = floor_broken(d, c);
        nbroken += broken[i];
    }
    if (o.json) {
        std::printf("{\"rounds\": %u, \"runs\": %u, \"cores\": %u, \"threads_iccs\": %u, \"threads_direct\": %u, \"oversubscribed\": %s, "
                    "\"page_bytes\": 4096",
                    o.rounds, o.runs, cores, threads_iccs, threads_direct, over ? "true" : "false");
        for (int i = 0; i < kNumOps; i++) {
            std::printf(", \"%s\": {\"iccs_median_us\": %.3f, \"iccs_p99_us\": %.3f, \"direct_median_us\": %.3f, "
                        "\"direct_p99_us\": %.3f, \"samples\": %llu, \"ratio_iccs_direct\": %.3f, "
                        "\"direct_slower\": %s",
                        kOps[i], ic.op[i].median_us, ic.op[i].p99_us, di.op[i].median_us, di.op[i].p99_us,
                        (unsigned long long)ic.op[i].n, ratio(ic.op[i].median_us, di.op[i].median_us),
                        broken[i] ? "true" : "false");
            // A hand-off against the baseline of the same rounds: both are one exchange with the
            // other cluster's service thread at best (request, answer).
            if (i >= kFirstHandoff && i <= kLastHandoff)
                std::printf(", \"iccs_per_base\": %.3f, \"direct_per_base\": %.3f",
                            ratio(ic.op[i].median_us, ic.op[kHandoffBase].median_us),
                            ratio(di.op[i].median_us, di.op[kHandoffBase].median_us));
            std::printf("}");
        }
        std::printf(", \"floor_ok\": %s", nbroken == 0 ? "true" : "false");
        if (!ic.error.empty() || !di.error.empty())
            std::printf(", \"error\": \"%s%s%s\"", ic.error.c_str(), ic.error.empty() || di.error.empty() ? "" : "; ",
                        di.error.c_str());
        std::printf("}\n");
    } else {
        std::printf("bench dsm: 2 clusters x 1 compute thread, %u rounds per operation, 4 KiB pages, %u interleaved runs "
                    "per transport (medians of the runs' medians and p99s); host has %u cores\n",
                    o.rounds, o.runs, cores);
        std::printf("  %-40s %11s %11s %11s %11s %8s\n", "operation (us)", "iccs med", "iccs p99", "direct med",
                    "direct p99", "ratio");
        for (int i = 0; i < kNumOps; i++)
            std::printf("  %-40s %11.2f %11.2f %11.2f %11.2f %8.2f\n", kOpNames[i], ic.op[i].median_us, ic.op[i].p99_us,
                        di.op[i].median_us, di.op[i].p99_us, ratio(ic.op[i].median_us, di.op[i].median_us));
        std::printf("  ratio = iccs median / direct median (direct: shared memory between the cluster processes, no "
                    "proxy, no stack)\n");
        std::printf("  hand-off (LOCK of a free token the other cluster holds while its compute thread runs) per baseline "
                    "(medians, same rounds):");
        for (int i = kFirstHandoff; i <= kLastHandoff; i++)
            std::printf(" %s iccs %.2f, direct %.2f%s", kOps[i], ratio(ic.op[i].median_us, ic.op[kHandoffBase].median_us),
                        ratio(di.op[i].median_us, di.op[kHandoffBase].median_us), i < kLastHandoff ? ";" : "\n");
        for (int i = 0; i < kNumOps; i++)
            if (broken[i])
                std::printf("  FLOOR BROKEN: %s: direct (the no-delay baseline) is slower than iccs beyond noise "
                            "(median %.2f against %.2f us, more than %.0f%% over, and its best run slower too)\n",
                            kOpNames[i], di.op[i].median_us, ic.op[i].median_us, kFloorTolerance * 100);
        if (over)
            std::printf("  note: %u threads over iccs (2 x compute, service, proxy) and %u over direct on %u cores: "
                        "oversubscribed (adaptive polling), not a dedicated-core figure\n",
                        threads_iccs, threads_direct, cores);
        if (!ic.error.empty()) std::printf("  iccs: %s\n", ic.error.c_str());
        if (!di.error.empty()) std::printf("  direct: %s\n", di.error.c_str());
    }
    return ic.error.empty() && di.error.empty() ? 0 : 1;
}

}  // namespace iccs
