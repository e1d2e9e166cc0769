// group_programs.cpp: `iccs run collectives` (see group_programs.hpp).
#include "group_programs.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "coll_check.hpp"

namespace iccs::group {

bool gather_counters(RtEndpoint& ep, const World& w, Counters& sum, std::string& err) {
    std::vector<uint8_t> mine;
    if (ep.barrier() != RtStatus::kOk) {  // every thread of the cluster is between calls
        err = "barrier before the counters: " + ep.last_error();
        return false;
    }
    if (ep.self().thread == 0) {
        const std::vector<uint64_t> words = w.counters().to_words();
        mine.resize(words.size() * 8);
        std::memcpy(mine.data(), words.data(), mine.size());
    }
    std::vector<std::vector<uint8_t>> by;
    if (ep.barrier_gather(mine, by) != RtStatus::kOk) {
        err = "barrier_gather of the counters: " + ep.last_error();
        return false;
    }
    sum = Counters{};
    sum.sites = w.topology().sites;
    sum.link.assign(size_t{sum.sites} * sum.sites, {});
    for (size_t c = 0; c < by.size(); ++c) {
        std::vector<uint64_t> words(by[c].size() / 8);
        std::memcpy(words.data(), by[c].data(), words.size() * 8);
        Counters one;
        if (!one.from_words(words, sum.sites)) {
            err = "cluster " + std::to_string(c) + " sent counters of " + std::to_string(by[c].size()) + " bytes";
            return false;
        }
        sum.add(one);
    }
    return true;
}

std::string format_counters(const Counters& c, const Topology& topo) {
    std::string s;
    char line[256];
    std::snprintf(line, sizeof line, "  %-15s %7s %9s %12s %9s %12s %13s %8s %12s\n", "collective", "calls", "msgs",
                  "bytes", "wan_msgs", "wan_bytes", "wan_bytes_min", "wan_hops", "shm_bytes");
    s += line;
    for (size_t k = 0; k < static_cast<size_t>(Coll::kCount); ++k) {
        const CollCounters& x = c.coll[k];
        if (x.calls == 0) continue;
        std::snprintf(line, sizeof line,
                      "  %-15s %7" PRIu64 " %9" PRIu64 " %12" PRIu64 " %9" PRIu64 " %12" PRIu64 " %13" PRIu64 " %8" PRIu64
                      " %12" PRIu64 "\n",
                      to_string(static_cast<Coll>(k)), x.calls, x.msgs, x.bytes, x.wan_msgs, x.wan_bytes, x.wan_bytes_min,
                      x.wan_hops_max, x.shm_bytes);
        s += line;
    }
    for (uint16_t a = 0; a < c.sites; ++a)
        for (uint16_t b = 0; b < c.sites; ++b) {
            const LinkCounters& l = c.link[size_t{a} * c.sites + b];
            if (l.msgs == 0) continue;
            std::snprintf(line, sizeof line, "  wan link site %u -> site %u: msgs %" PRIu64 " data bytes %" PRIu64 "\n",
                          topo.site_id[a], topo.site_id[b], l.msgs, l.bytes);
            s += line;
        }
    return s;
}

int program_collectives(std::unique_ptr<Runtime> rt, const Topology& topo, const CollectivesRunOptions& o) {
    const uint16_t T = rt->threads(), me = rt->cluster();
    std::vector<std::unique_ptr<World>> worlds;
    for (size_t i = 0; i < o.families.size(); ++i) {
        Options opt;
        opt.family = o.families[i];
        opt.segment_bytes = o.segment_bytes;
        opt.timeout_ms = o.timeout_ms;
        opt.handler_base = static_cast<uint16_t>(180 + 2 * i);  // a World per family: counters apart
        worlds.push_back(std::make_unique<World>(*rt, topo, opt));
    }
    std::mutex mu;
    std::string err;
    std::vector<std::string> report(o.families.size());
    std::vector<bool> rule_ok(o.families.size(), true);
    std::vector<std::thread> th;
    for (uint16_t t = 0; t < T; ++t)
        th.emplace_back([&, t] {
            RtEndpoint& ep = rt->endpoint(t);
            auto failed = [&](const std::string& why) {
                std::lock_guard<std::mutex> lk(mu);
                if (err.empty()) err = why;
            };
            if (ep.barrier() != RtStatus::kOk) return failed("first barrier: " + ep.last_error());
            for (size_t i = 0; i < o.families.size(); ++i) {
                iccs::group::testing::CheckPlan plan;
                plan.family = o.families[i];
                plan.sizes = o.elements;
                plan.rounds = o.rounds;
                std::string why;
                if (!iccs::group::testing::check_all_collectives(worlds[i]->group(t), plan, why)) return failed(why);
                Counters sum;
                if (!gather_counters(ep, *worlds[i], sum, why)) return failed(why);
                if (t != 0) continue;
                report[i] = format_counters(sum, topo);
                if (o.families[i] == Family::kHier && !iccs::group::testing::check_magpie_rule(sum, why)) {
                    rule_ok[i] = false;
                    report[i] += "  MagPIe's rule BROKEN: " + why + "\n";
                } else if (o.families[i] == Family::kHier) {
                    report[i] += "  MagPIe's rule holds: WAN data bytes = the minimum (each item once to each receiving "
                                 "site) for every collective; at most 1 WAN link behind any message\n";
                }
            }
        });
    for (auto& x : th) x.join();
    bool ok = err.empty();
    for (bool r : rule_ok) ok = ok && r;
    if (!err.empty()) std::printf("cluster %u: collectives error: %s\n", me, err.c_str());
    if (me == 0 && err.empty()) {
        std::string sizes;
        for (uint32_t n : o.elements) sizes += (sizes.empty() ? "" : ",") + std::to_string(n);
        for (size_t i = 0; i < o.families.size(); ++i)
            std::printf("collectives %s: %s; int64 elements per rank %s x %u rounds: every result equals the sequential "
                        "reference\n%s",
                        to_string(o.families[i]), topo.describe().c_str(), sizes.c_str(), o.rounds, report[i].c_str());
    }
    std::printf("cluster %u: collectives %s\n", me, ok ? "ok" : "FAILED");
    std::fflush(stdout);
    return runtime_finish(std::move(rt), ok);
}

}  // namespace iccs::group
