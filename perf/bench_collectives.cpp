// bench_collectives.cpp: `iccs bench collectives`. A program forked once per cluster by the
// runtime's launcher times every collective (both families, interleaved) on every thread against
// CLOCK_MONOTONIC (one host: one clock), gathers the start and end times and the group counters
// at cluster 0, which writes one line per collective to a file this process reads. A second
// launch runs `iccs run ordered`'s program for the ordered broadcast's figures.
#include "bench_collectives.hpp"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_paths.hpp"
#include "clock.hpp"
#include "config.hpp"
#include "group_programs.hpp"
#include "runtime_launch.hpp"

namespace iccs {

namespace {

using group::Coll;
using group::Family;


constexpr size_t kColls = static_cast<size_t>(Coll::kCount);

bool run_one(group::Group& g, Coll k, Family f, uint32_t size, std::vector<int64_t>& a, std::vector<int64_t>& b) {
    const uint32_t P = g.ranks();
    const size_t n = std::max<size_t>(1, size / 8), blk = std::max<size_t>(1, n / P);
    a.assign(std::max(n, blk * P), static_cast<int64_t>(g.rank()));
    b.assign(std::max(n, blk * P), 0);
    std::span<const int64_t> in(a.data(), n);
    std::span<int64_t> out(b.data(), n);
    switch (k) {
        case Coll::kBarrier: return g.barrier(f);
        case Coll::kBcast: return g.bcast(std::span<int64_t>(a.data(), n), 0, f);
        case Coll::kReduce: return g.reduce(in, out, group::Op::kSum, 0, f);
        case Coll::kAllreduce: return g.allreduce(in, out, group::Op::kSum, f);
        case Coll::kScan: return g.scan(in, out, group::Op::kSum, f);
        case Coll::kGather: return g.gather(std::span<const int64_t>(a.data(), blk), std::span<int64_t>(b.data(), blk * P), 0, f);
        case Coll::kScatter: return g.scatter(std::span<const int64_t>(a.data(), blk * P), std::span<int64_t>(b.data(), blk), 0, f);
        case Coll::kAllgather:
            return g.allgather(std::span<const int64_t>(a.data(), blk), std::span<int64_t>(b.data(), blk * P), f);
        case Coll::kAlltoall:
            return g.alltoall(std::span<const int64_t>(a.data(), blk * P), std::span<int64_t>(b.data(), blk * P), f);
        default: {
            std::vector<uint32_t> counts(P, static_cast<uint32_t>(blk));
            return g.reduce_scatter(std::span<const int64_t>(a.data(), blk * P), std::span<int64_t>(b.data(), blk),
                                    std::span<const uint32_t>(counts), group::Op::kSum, f);
        }
    }
}

int coll_program(std::unique_ptr<Runtime> rt, const group::Topology& topo, const BenchCollectivesOptions& o,
                 const std::string& out_file) {
    const uint16_t T = rt->threads(), me = rt->cluster();
    const uint32_t P = topo.ranks(), R = o.reps + 1;  // rep 0: warm-up
    group::Options ho, fo;
    ho.family = Family::kHier;
    fo.family = Family::kFlat;
    ho.handler_base = 180;
    fo.handler_base = 182;
    ho.segment_bytes = 16u << 10;  // spread over the proxies
    group::World hw(*rt, topo, ho), fw(*rt, topo, fo);
    const std::string err = group::on_every_thread(T, [&](uint16_t t, const group::FailFn& failed) {
            RtEndpoint& ep = rt->endpoint(t);
            std::vector<uint64_t> times;  // [coll][rep][family][start, end]
            std::vector<int64_t> a, b;
            for (size_t k = 0; k < kColls; ++k)
                for (uint32_t r = 0; r < R; ++r)
                    for (int fam = 0; fam < 2; ++fam) {
                        group::Group& g = fam == 0 ? hw.group(t) : fw.group(t);
                        if (ep.barrier() != RtStatus::kOk) return failed("barrier: " + ep.last_error());
                        const uint64_t t0 = now_ns();
                        if (!run_one(g, static_cast<Coll>(k), fam == 0 ? Family::kHier : Family::kFlat, o.size, a, b))
                            return failed(g.last_error());
                        times.push_back(t0);
                        times.push_back(now_ns());
                    }
            group::Counters hc, fc;
            std::string why;
            if (!group::gather_counters(ep, hw, hc, why) || !group::gather_counters(ep, fw, fc, why)) return failed(why);
            std::vector<uint8_t> mine(times.size() * 8);
            std::memcpy(mine.data(), times.data(), mine.size());
            std::vector<std::vector<uint8_t>> by;
            if (ep.barrier_gather(mine, by) != RtStatus::kOk) return failed("barrier_gather: " + ep.last_error());
            if (me != 0 || t != 0) return;
            std::vector<std::vector<uint64_t>> all;  // by thread of the run
            for (const auto& v : by)
                for (size_t off = 0; off + mine.size() <= v.size(); off += mine.size()) {
                    all.emplace_back(times.size());
                    std::memcpy(all.back().data(), v.data() + off, mine.size());
                }
            FILE* f = std::fopen(out_file.c_str(), "w");
            if (f == nullptr) return failed("cannot write " + out_file);
            for (size_t k = 0; k < kColls; ++k) {
                std::fprintf(f, "coll %s", group::to_string(static_cast<Coll>(k)));
                for (int fam = 0; fam < 2; ++fam) {
                    std::vector<double> d;
                    for (uint32_t r = 1; r < R; ++r) {
                        const size_t at = ((k * R + r) * 2 + fam) * 2;
                        uint64_t lo = UINT64_MAX, hi = 0;
                        for (const auto& x : all) {
                            lo = std::min(lo, x[at]);
                            hi = std::max(hi, x[at + 1]);
                        }
                        d.push_back(double(hi - lo) / 1e3);
                    }
                    std::sort(d.begin(), d.end());
                    const group::CollCounters& c = (fam == 0 ? hc : fc).of(static_cast<Coll>(k));
                    const double calls = double(c.calls) / P;
                    std::fprintf(f, " %.1f %.1f %.1f %.0f %.0f %" PRIu64, d[d.size() / 2], d.front(), d.back(),
                                 calls ? double(c.wan_bytes) / calls : 0.0, calls ? double(c.wan_bytes_min) / calls : 0.0,
                                 c.wan_hops_max);
                }
                std::fprintf(f, "\n");
            }
            std::fclose(f);
        });
    if (!err.empty()) std::fprintf(stderr, "bench collectives, cluster %u: %s\n", me, err.c_str());
    return runtime_finish(std::move(rt), err.empty());
}

struct Row {
    double med[2] = {0, 0}, lo[2] = {0, 0}, hi[2] = {0, 0}, wan[2] = {0, 0}, wan_min[2] = {0, 0};
    uint64_t hops[2] = {0, 0};
};
struct Ord {
    double median_us = 0, mean_us = 0, rate = 0;
};

double hier_speedup(const Row& r) { return r.med[0] > 0 ? r.med[1] / r.med[0] : 0.0; }

// What the two launches measured.
struct CollResults {
    std::map<std::string, Row> rows;  // by collective
    std::vector<std::string> order;   // the collectives in the order cluster 0 wrote them
    std::map<std::string, Ord> ord;   // the ordered broadcast, by sequencer policy
    std::string err;
};

// What the report says beside the figures.
struct CollSetting {
    const BenchCollectivesOptions& o;
    uint32_t P;          // ranks
    const char* layout;  // block or cyclic
    std::string sites;   // [wan] sites
    std::string lat;     // [wan] latency_ms
    unsigned proxies, cores, threads;
};

// The collectives' lines cluster 0 wrote to `out` (the file is removed).
void read_coll_rows(const std::string& out, CollResults& res) {
    std::ifstream in(out);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream ls(line);
        std::string tag, name;
        Row r;
        ls >> tag >> name;
        for (int f = 0; f < 2; ++f) ls >> r.med[f] >> r.lo[f] >> r.hi[f] >> r.wan[f] >> r.wan_min[f] >> r.hops[f];
        if (tag == "coll" && ls) {
            res.rows[name] = r;
            res.order.push_back(name);
        }
    }
    std::remove(out.c_str());
}

// The second launch: the ordered broadcast, every policy; its figures into res.ord. The exit code.
int run_ordered_bcast(RtLaunch& l, const group::Topology& topo, const BenchCollectivesOptions& o, uint32_t P,
                      const std::string& out, CollResults& res) {
    group::OrderedRunOptions oo;
    oo.messages = o.ordered_messages;
    oo.phase = 5;
    oo.latency_rounds = oo.phase * P;  // every rank sends one phase: every site's senders
    oo.writes = 5;
    oo.result_file = out + "-ordered";
    l.builtin = [topo, oo](std::unique_ptr<Runtime> rt) { return group::program_ordered(std::move(rt), topo, oo); };
    // the ordered program prints its own lines: keep stdout for the benchmark's table/JSON
    fflush(stdout);
    const int saved = dup(1);
    (void)!dup2(2, 1);
    const int rc = rt_launch(l);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    std::ifstream in(oo.result_file);
    std::string tag, name;
    Ord x;
    while (in >> tag >> name >> x.median_us >> x.mean_us >> x.rate)
        if (tag == "ordered") res.ord[name] = x;
    std::remove(oo.result_file.c_str());
    return rc;
}

void print_coll_json(const CollSetting& s, CollResults& res, bool goal_cfg, bool goal) {
    const BenchCollectivesOptions& o = s.o;
    std::printf("{\"sites\": %u, \"clusters_per_site\": %u, \"cluster_size\": %u, \"ranks\": %u, \"layout\": \"%s\", \"wan_latency_ms\": %s, "
                "\"wan_bandwidth\": %" PRIu64 ", \"size\": %u, \"reps\": %u, \"proxies\": %u, \"cores\": %u, "
                "\"threads\": %u, \"oversubscribed\": %s, \"collectives\": {",
                o.sites, o.clusters, o.cluster_size, s.P, s.layout, s.lat.c_str(), o.wan_bandwidth, o.size, o.reps, s.proxies,
                s.cores, s.threads, s.threads > s.cores ? "true" : "false");
    for (size_t i = 0; i < res.order.size(); ++i) {
        const Row& r = res.rows[res.order[i]];
        std::printf("%s\"%s\": {\"hier_median_us\": %.1f, \"flat_median_us\": %.1f, \"speedup\": %.3f, "
                    "\"wan_bytes\": %.0f, \"wan_bytes_min\": %.0f, \"flat_wan_bytes\": %.0f, \"hier_min_us\": %.1f, "
                    "\"hier_max_us\": %.1f, \"flat_min_us\": %.1f, \"flat_max_us\": %.1f, \"hier_wan_hops\": %" PRIu64
                    ", \"flat_wan_hops\": %" PRIu64 "}",
                    i ? ", " : "", res.order[i].c_str(), r.med[0], r.med[1], hier_speedup(r), r.wan[0], r.wan_min[0], r.wan[1],
                    r.lo[0], r.hi[0], r.lo[1], r.hi[1], r.hops[0], r.hops[1]);
    }
    std::printf("}, \"ordered_bcast\": {");
    int i = 0;
    for (const char* p : {"central", "rotating", "migrating"})
        std::printf("%s\"%s\": {\"latency_us\": %.1f, \"latency_mean_us\": %.1f, \"msgs_per_s\": %.0f}", i++ ? ", " : "",
                    p, res.ord[p].median_us, res.ord[p].mean_us, res.ord[p].rate);
    std::printf("}, \"goal_config\": %s, \"goal_met\": %s", goal_cfg ? "true" : "false", goal ? "true" : "false");
    if (!res.err.empty()) std::printf(", \"error\": \"%s\"", res.err.c_str());
    std::printf("}\n");
}

void print_coll_table(const CollSetting& s, CollResults& res, bool goal_cfg, bool goal) {
    const BenchCollectivesOptions& o = s.o;
    std::printf("bench collectives: %u sites x %u clusters x %u threads (%u ranks, %s layout: sites %s), WAN %s ms, %" PRIu64
                " bytes/s per link, %u bytes, median of %u reps (hier and flat interleaved), transport iccs\n",
                o.sites, o.clusters, o.cluster_size, s.P, s.layout, s.sites.c_str(), s.lat.c_str(), o.wan_bandwidth, o.size,
                o.reps);
    std::printf("  %-15s %11s %11s %8s %11s %11s %11s %9s  %s\n", "collective", "hier us", "flat us", "speedup",
                "wan bytes", "wan min", "flat wan", "hops h/f", "hier min..max / flat min..max us");
    for (const std::string& n : res.order) {
        const Row& r = res.rows[n];
        std::printf("  %-15s %11.1f %11.1f %8.2f %11.0f %11.0f %11.0f %5" PRIu64 "/%-3" PRIu64 "  %.0f..%.0f / %.0f..%.0f\n",
                    n.c_str(), r.med[0], r.med[1], hier_speedup(r), r.wan[0], r.wan_min[0], r.wan[1], r.hops[0], r.hops[1],
                    r.lo[0], r.hi[0], r.lo[1], r.hi[1]);
    }
    for (const char* p : {"central", "rotating", "migrating"})
        std::printf("  ordered broadcast, %-9s sequencer: latency median %.1f us, mean %.1f us (one at a time, "
                    "senders in phases of 5 over every rank), %.0f msgs/s (%u per thread at once)\n",
                    p, res.ord[p].median_us, res.ord[p].mean_us, res.ord[p].rate, o.ordered_messages);
    std::printf("  speedup = flat / hier; wan bytes = data bytes over WAN links per call (hier), wan min = each item "
                "once to each receiving site\n");
    std::printf("  goal (4 sites, 10 ms, 1 MB/s, 64 KiB: hier >= 3x flat for bcast and allreduce, WAN bytes = "
                "minimum): %s%s\n",
                goal ? "met" : "not met", goal_cfg ? "" : " (this is not the goal's configuration)");
    if (s.threads > s.cores)
        std::printf("  note: %u threads on %u cores: oversubscribed (adaptive polling), not a dedicated-core figure\n",
                    s.threads, s.cores);
    if (!res.err.empty()) std::printf("  error: %s\n", res.err.c_str());
}

}  // namespace

int bench_collectives(const BenchCollectivesOptions& o) {
    const unsigned cores = std::max(1u, host_core_count());
    const uint32_t C = o.sites * o.clusters, P = C * o.cluster_size;
    std::string sites;
    for (uint32_t c = 0; c < C; ++c) {
        if (c) sites += ',';
        sites += std::to_string(o.cyclic ? c % o.sites : c / o.clusters);
    }
    const char* layout = o.cyclic ? "cyclic" : "block";
    char lat[64];
    std::snprintf(lat, sizeof lat, "%g", o.wan_latency_ms);
    const std::vector<std::pair<std::string, std::string>> overrides = {
        {"machine.clusters", std::to_string(C)},
        {"cluster.compute_threads", std::to_string(o.cluster_size)},
        {"cluster.polling", "adaptive"},
        {"wan.sites", sites},
        {"wan.latency_ms", lat},
        {"wan.bandwidth_bytes_per_s", std::to_string(o.wan_bandwidth)}};
    const ConfigResult cr = configure("", overrides);
    if (!cr.ok()) {
        std::fprintf(stderr, "iccs bench collectives: %s\n", cr.error.c_str());
        return 2;
    }
    group::Topology topo;
    std::string err;
    if (!group::topology_from_config(*cr.config, topo, err)) {
        std::fprintf(stderr, "iccs bench collectives: %s\n", err.c_str());
        return 2;
    }
    const unsigned proxies = cr.config->cluster.proxies_resolved;
    // per cluster: compute threads, the runtime's service thread, the proxies
    const unsigned threads = C * (o.cluster_size + 1 + proxies);
    std::fprintf(stderr,
                 "bench collectives: %u sites x %u clusters x %u threads (%u ranks, %s layout), WAN %s ms one way and %" PRIu64
                 " bytes/s per link (proxies' emulation, transport iccs, %u proxies per cluster), %u bytes, %u reps "
                 "after a warm-up; %u threads on %u cores\n",
                 o.sites, o.clusters, o.cluster_size, P, layout, lat, o.wan_bandwidth, proxies, o.size, o.reps, threads, cores);
    RtLaunch l;
    l.spec.clusters = static_cast<uint16_t>(C);
    l.spec.threads = static_cast<uint16_t>(o.cluster_size);
    l.spec.transport = RtTransport::kIccs;
    l.spec.quiet = true;
    if (!plan_from_config(*cr.config, 0, l.spec.plan, err)) {
        std::fprintf(stderr, "iccs bench collectives: %s\n", err.c_str());
        return 2;
    }
    l.spec.plan.quiet = true;
    l.overrides = overrides;
    l.timeout_s = 1800;
    const std::string out = "/tmp/iccs-bench-coll-" + std::to_string(getpid());
    std::remove(out.c_str());
    l.builtin = [topo, o, out](std::unique_ptr<Runtime> rt) { return coll_program(std::move(rt), topo, o, out); };
    int rc = rt_launch(l);
    CollResults res;
    read_coll_rows(out, res);
    if (rc != 0 || res.rows.size() != kColls) res.err = "the collectives run failed (exit " + std::to_string(rc) + ")";
    rc = run_ordered_bcast(l, topo, o, P, out, res);
    if (rc != 0 || res.ord.size() != 3)
        res.err += (res.err.empty() ? "" : "; ") + std::string("the ordered broadcast run failed");
    const Row& bc = res.rows["bcast"];
    const Row& ar = res.rows["allreduce"];
    const bool goal_cfg = o.sites == 4 && o.wan_latency_ms == 10 && o.wan_bandwidth == 1'000'000 && o.size == 65536;
    const bool goal = hier_speedup(bc) >= 3 && hier_speedup(ar) >= 3 && bc.wan[0] == bc.wan_min[0] && ar.wan[0] == ar.wan_min[0];
    const CollSetting setting{o, P, layout, sites, lat, proxies, cores, threads};
    if (o.json) print_coll_json(setting, res, goal_cfg, goal);
    else print_coll_table(setting, res, goal_cfg, goal);
    return res.err.empty() ? 0 : 1;
}

}  // namespace iccs
