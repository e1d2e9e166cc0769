// framework.cpp: run_cluster, the per-cluster-process driver of a wide-area program
// (widearea.hpp): the variants in turn, timed between barriers; the sequential computation and
// the check in every cluster; the verdicts and traffic of every cluster summed on cluster 0.
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "config.hpp"
#include "group_programs.hpp"
#include "widearea.hpp"

namespace iccs::widearea {

namespace {

constexpr size_t kFirstHandler = 10, kHandlersPerVariant = 30;
constexpr size_t kMaxVariants = (kRtUserHandlers - kFirstHandler) / kHandlersPerVariant;

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string jnum(double v) {
    if (!std::isfinite(v) || v < 0) return "null";
    char b[48];
    std::snprintf(b, sizeof b, "%.9g", v);
    return b;
}

struct VariantResult {
    double time_s = -1, seq_s = -1, error = 0;
    bool ok = false, done = false;
    std::string check, failure, stats, problem;
    Traffic traffic;
};

// This cluster's verdict and traffic as bytes: ok, error (as bits), traffic words, failure text.
std::vector<uint8_t> encode(const Check& ck, const Traffic& tr) {
    std::vector<uint64_t> w = {ck.ok ? 1u : 0u, 0};
    std::memcpy(&w[1], &ck.error, 8);
    const std::vector<uint64_t> tw = tr.to_words();
    w.push_back(tw.size());
    w.insert(w.end(), tw.begin(), tw.end());
    std::vector<uint8_t> b(w.size() * 8 + ck.failure.size());
    std::memcpy(b.data(), w.data(), w.size() * 8);
    std::memcpy(b.data() + w.size() * 8, ck.failure.data(), ck.failure.size());
    return b;
}

bool decode(const std::vector<uint8_t>& b, bool& ok, double& error, Traffic& tr, std::string& failure) {
    if (b.size() < 24) return false;
    uint64_t h[3];
    std::memcpy(h, b.data(), 24);
    if (b.size() < 24 + h[2] * 8) return false;
    std::vector<uint64_t> tw(h[2]);
    std::memcpy(tw.data(), b.data() + 24, tw.size() * 8);
    if (!tr.from_words(tw)) return false;
    ok = h[0] == 1;
    std::memcpy(&error, &h[1], 8);
    failure.assign(reinterpret_cast<const char*>(b.data()) + 24 + tw.size() * 8, b.size() - 24 - tw.size() * 8);
    return true;
}

std::string result_json(const Program& p, const Options& o, Variant v, const VariantResult& r, const group::Topology& topo) {
    std::string j = "{\"app\":" + json_quote(p.name) + ",\"variant\":\"" + to_string(v) + "\",\"size\":\"" +
                    to_string(o.size) + "\"";
    j += std::string(",\"result\":\"") + (r.ok ? "PASS" : "FAIL") + "\"";
    j += ",\"time_s\":" + jnum(r.time_s) + ",\"seq_s\":" + jnum(r.seq_s);
    j += ",\"speedup\":" + (r.time_s > 0 && r.seq_s > 0 ? jnum(r.seq_s / r.time_s) : std::string("null"));
    j += ",\"check\":" + (r.check.empty() ? std::string("null") : json_quote(r.check));
    if (!r.ok) j += ",\"failure\":" + json_quote(r.failure.empty() ? "no failure recorded" : r.failure);
    j += ",\"error\":" + jnum(r.error);
    j += ",\"problem\":" + json_quote(r.problem);
    j += std::string(",\"inject_error\":") + (o.inject_error ? "true" : "false");
    const Traffic& t = r.traffic;
    j += ",\"wan_rpcs\":" + std::to_string(t.wan_rpcs) + ",\"wan_rpc_bytes\":" + std::to_string(t.wan_rpc_bytes);
    j += ",\"wan_bcasts\":" + std::to_string(t.wan_bcasts) + ",\"wan_bcast_bytes\":" + std::to_string(t.wan_bcast_bytes);
    j += ",\"msgs\":" + std::to_string(t.msgs) + ",\"msg_bytes\":" + std::to_string(t.bytes);
    // The keys of the applications' run contract (apps/README.md) that the experiments read, so
    // `iccs experiment wan` takes these programs too: the parallel section, the messages.
    j += ",\"parallel_s\":" + jnum(r.time_s) + ",\"rt\":{\"msgs\":" + std::to_string(t.msgs) + ",\"bytes\":" +
         std::to_string(t.bytes) + ",\"mean_msg_bytes\":" + (t.msgs ? jnum(double(t.bytes) / double(t.msgs)) : "null") +
         "},\"iccs\":null,\"dsm\":null";
    j += ",\"sites\":" + std::to_string(topo.sites) + ",\"wan_links\":[";
    bool first = true;
    for (uint16_t a = 0; a < t.sites; ++a)
        for (uint16_t b = 0; b < t.sites; ++b) {
            if (a == b) continue;
            const LinkTraffic& l = t.link[size_t{a} * t.sites + b];
            j += std::string(first ? "" : ",") + "{\"from_site\":" + std::to_string(topo.site_id[a]) +
                 ",\"to_site\":" + std::to_string(topo.site_id[b]) + ",\"rpcs\":" + std::to_string(l.rpcs) +
                 ",\"rpc_bytes\":" + std::to_string(l.rpc_bytes) + ",\"bcasts\":" + std::to_string(l.bcasts) +
                 ",\"bcast_bytes\":" + std::to_string(l.bcast_bytes) + "}";
            first = false;
        }
    j += "],\"stats\":{" + r.stats + "}}";
    return j;
}

void print_result(const Program& p, Variant v, const VariantResult& r, const group::Topology& topo) {
    std::printf("%s %s: %s", p.name, to_string(v), r.ok ? "PASS" : "FAIL");
    if (r.time_s >= 0) std::printf(", parallel section %.6f s", r.time_s);
    if (r.seq_s >= 0) std::printf(", sequential %.6f s", r.seq_s);
    if (r.time_s > 0 && r.seq_s > 0) std::printf(", speedup %.2f", r.seq_s / r.time_s);
    std::printf("\n  problem: %s\n", r.problem.c_str());
    if (!r.check.empty()) std::printf("  check: %s\n", r.check.c_str());
    if (!r.ok) std::printf("  failure: %s\n", r.failure.c_str());
    const Traffic& t = r.traffic;
    std::printf("  WAN traffic: %" PRIu64 " RPCs (%" PRIu64 " bytes), %" PRIu64 " broadcasts (%" PRIu64
                " bytes); all messages: %" PRIu64 " (%" PRIu64 " bytes)\n",
                t.wan_rpcs, t.wan_rpc_bytes, t.wan_bcasts, t.wan_bcast_bytes, t.msgs, t.bytes);
    for (uint16_t a = 0; a < t.sites; ++a)
        for (uint16_t b = 0; b < t.sites; ++b) {
            const LinkTraffic& l = t.link[size_t{a} * t.sites + b];
            if (a == b || (l.rpcs | l.rpc_bytes | l.bcasts | l.bcast_bytes) == 0) continue;
            std::printf("  WAN link site %u -> site %u: %" PRIu64 " RPCs (%" PRIu64 " bytes), %" PRIu64
                        " broadcasts (%" PRIu64 " bytes)\n",
                        topo.site_id[a], topo.site_id[b], l.rpcs, l.rpc_bytes, l.bcasts, l.bcast_bytes);
        }
}

}  // namespace

bool Ctx::fail(const std::string& why) {
    if (error.empty()) error = "thread " + std::to_string(cluster) + "." + std::to_string(thread) + ": " + why;
    return false;
}

bool Ctx::wait(const std::function<bool()>& done, const char* what) {
    const RtStatus st = ep.wait_until(done, opt.timeout_ms * 1000);
    if (st == RtStatus::kOk) return true;
    return fail(std::string("waiting for ") + what + ": " + iccs::to_string(st) +
                (st == RtStatus::kTimeout ? " after " + std::to_string(opt.timeout_ms) + " ms" : ": " + ep.last_error()));
}

bool Ctx::barrier() {
    const RtStatus st = ep.barrier(opt.timeout_ms * 1000);
    if (st == RtStatus::kOk) return true;
    return fail(std::string("barrier: ") + iccs::to_string(st) + ": " + ep.last_error());
}

int run_cluster(std::unique_ptr<Runtime> rt, const group::Topology& topo, const Program& p, const Options& o) {
    const uint16_t T = rt->threads(), me = rt->cluster(), C = rt->clusters();
    const size_t V = o.variants.size();
    std::shared_ptr<void> shared;
    std::string refused;
    std::vector<std::unique_ptr<Net>> nets;
    std::vector<std::unique_ptr<Instance>> insts;
    if (V > kMaxVariants) {
        if (me == 0) std::printf("%s: %zu variants in one launch, at most %zu\n", p.name, V, kMaxVariants);
        std::fflush(stdout);
        return runtime_finish(std::move(rt), false);
    }
    for (size_t v = 0; v < V; ++v) {
        // Each variant its own block of handler ids: 20 for the program, then group/'s objects.
        const size_t base = kFirstHandler + kHandlersPerVariant * v;
        nets.push_back(std::make_unique<Net>(*rt, topo));
        const Setup s{*rt,
                      *nets[v],
                      topo,
                      o,
                      o.variants[v],
                      static_cast<uint16_t>(base),
                      static_cast<uint16_t>(base + 20),
                      static_cast<uint16_t>(base + 22),
                      static_cast<uint16_t>(base + 26),
                      shared,
                      refused};
        insts.push_back(p.make(s));
    }
    if (!refused.empty()) {  // the same decision in every cluster: nobody waits for anybody
        if (me == 0) std::printf("%s: cannot run this shape: %s\n", p.name, refused.c_str());
        std::fflush(stdout);
        return runtime_finish(std::move(rt), false);
    }
    std::vector<VariantResult> res(V);
    const std::string err = group::on_every_thread(T, [&](uint16_t t, const group::FailFn& failed) {
        RtEndpoint& ep = rt->endpoint(t);
        for (size_t v = 0; v < V; ++v) {
            Ctx c{*rt, ep, *nets[v], topo, o, o.variants[v], me, t, T, C, uint32_t{me} * T + t, uint32_t{C} * T, {}};
            if (!c.barrier()) return failed(c.error);
            const double t0 = now_s();
            if (!insts[v]->run(c)) return failed(c.error.empty() ? "run() failed without saying why" : c.error);
            if (!c.barrier()) return failed(c.error);
            if (t == 0) res[v].time_s = now_s() - t0;
        }
        for (size_t v = 0; v < V; ++v) {
            Ctx c{*rt, ep, *nets[v], topo, o, o.variants[v], me, t, T, C, uint32_t{me} * T + t, uint32_t{C} * T, {}};
            // Cluster 0 computes the sequential reference alone (its time is the speedup's base),
            // then the others, while cluster 0 waits.
            for (int turn = 0; turn < 2; ++turn) {
                if (!c.barrier()) return failed(c.error);
                if (t != 0 || (turn == 0) != (me == 0)) continue;
                const bool had = shared != nullptr;
                const double s0 = now_s();
                insts[v]->sequential();
                if (!had || v == 0) res[v].seq_s = now_s() - s0;
                else res[v].seq_s = res[0].seq_s;  // the reference was computed for variant 0
            }
            std::vector<uint8_t> mine;
            if (t == 0) {
                if (o.inject_error && me == 0) insts[v]->inject_error();
                const Check ck = insts[v]->check();
                insts[v]->account(*nets[v]);
                mine = encode(ck, nets[v]->traffic());
                res[v].check = ck.what;
                if (me == 0) {
                    res[v].stats = insts[v]->stats_json();
                    res[v].problem = insts[v]->problem();
                }
            }
            std::vector<std::vector<uint8_t>> by;
            const RtStatus st = ep.barrier_gather(mine, by, o.timeout_ms * 1000);
            if (st != RtStatus::kOk) return failed("barrier_gather of the checks: " + ep.last_error());
            if (t != 0) continue;
            VariantResult& r = res[v];
            r.ok = true;
            r.traffic = Traffic{};
            for (size_t k = 0; k < by.size(); ++k) {
                bool ok = false;
                double e = 0;
                Traffic tr;
                std::string why;
                if (!decode(by[k], ok, e, tr, why)) return failed("cluster " + std::to_string(k) + " sent a malformed check");
                r.traffic.add(tr);
                r.error = std::max(r.error, e);
                if (!ok && r.ok) r.failure = "cluster " + std::to_string(k) + ": " + why;
                r.ok = r.ok && ok;
            }
            r.done = true;
        }
    });
    bool ok = err.empty();
    for (VariantResult& r : res) {
        if (!r.done) {
            r.ok = false;
            r.failure = err.empty() ? "the run ended before this variant's check" : err;
        }
        ok = ok && r.ok;
    }
    if (me == 0) {
        for (size_t v = 0; v < V; ++v) print_result(p, o.variants[v], res[v], topo);
        if (!err.empty()) std::printf("%s: error: %s\n", p.name, err.c_str());
        if (!o.result_file.empty()) {
            if (FILE* f = std::fopen(o.result_file.c_str(), "w")) {
                for (size_t v = 0; v < V; ++v)
                    std::fprintf(f, "%s\n", result_json(p, o, o.variants[v], res[v], topo).c_str());
                std::fclose(f);
            }
        }
    } else if (!err.empty()) {
        std::printf("cluster %u: %s: error: %s\n", me, p.name, err.c_str());
    }
    std::fflush(stdout);
    return runtime_finish(std::move(rt), ok);
}

}  // namespace iccs::widearea
