// group_programs.cpp: `iccs run collectives` (see group_programs.hpp).
#include "group_programs.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "clock.hpp"
#include "coll_check.hpp"

namespace iccs::group {

std::string on_every_thread(uint16_t threads, const std::function<void(uint16_t t, const FailFn& failed)>& body) {
    std::mutex mu;
    std::string err;
    const FailFn failed = [&](const std::string& why) {
        std::lock_guard<std::mutex> lk(mu);
        if (err.empty()) err = why;
    };
    std::vector<std::thread> th;
    for (uint16_t t = 0; t < threads; ++t) th.emplace_back([&, t] { body(t, failed); });
    for (auto& x : th) x.join();
    return err;
}

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
    std::snprintf(line, sizeof line, "  %-15s %7s %9s %12s %9s %12s %13s %8s %12s %9s %9s\n", "collective", "calls",
                  "msgs", "bytes", "wan_msgs", "wan_bytes", "wan_bytes_min", "wan_hops", "shm_bytes", "wan_items",
                  "item_max");
    s += line;
    for (size_t k = 0; k < static_cast<size_t>(Coll::kCount); ++k) {
        const CollCounters& x = c.coll[k];
        if (x.calls == 0) continue;
        std::snprintf(line, sizeof line,
                      "  %-15s %7" PRIu64 " %9" PRIu64 " %12" PRIu64 " %9" PRIu64 " %12" PRIu64 " %13" PRIu64 " %8" PRIu64
                      " %12" PRIu64 " %9" PRIu64 " %9" PRIu64 "\n",
                      to_string(static_cast<Coll>(k)), x.calls, x.msgs, x.bytes, x.wan_msgs, x.wan_bytes, x.wan_bytes_min,
                      x.wan_hops_max, x.shm_bytes, x.items_crossed, x.item_crossings_max);
        s += line;
    }
    for (uint16_t a = 0; a < c.sites; ++a)
        for (uint16_t b = 0; b < c.sites; ++b) {
            const LinkCounters& l = c.link[size_t{a} * c.sites + b];
            if (l.msgs == 0) continue;
            std::snprintf(line, sizeof line,
                          "  wan link site %u -> site %u: msgs %" PRIu64 " data bytes %" PRIu64 " items %" PRIu64 "\n",
                          topo.site_id[a], topo.site_id[b], l.msgs, l.bytes, l.items);
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
    std::vector<std::string> report(o.families.size());
    std::vector<bool> rule_ok(o.families.size(), true);
    const std::string err = on_every_thread(T, [&](uint16_t t, const FailFn& failed) {
            RtEndpoint& ep = rt->endpoint(t);
            if (ep.barrier() != RtStatus::kOk) return failed("first barrier: " + ep.last_error());
            if (!o.bad.empty()) {
                Group& g = worlds[0]->group(t);
                const Family f = o.families[0];
                const bool last = g.rank() + 1 == g.ranks();
                std::vector<int64_t> in(last && o.bad == "size" ? 11 : 10, 1), out(11);
                bool ok = g.barrier(f);
                if (ok && o.bad == "root") ok = g.bcast(std::span<int64_t>(in), last ? 1 : 0, f);
                if (ok && o.bad == "size") ok = g.allreduce(std::span<const int64_t>(in), std::span<int64_t>(out), Op::kSum, f);
                if (ok && o.bad == "missing" && !last)
                    ok = g.allreduce(std::span<const int64_t>(in), std::span<int64_t>(out), Op::kSum, f);
                std::printf("cluster %u thread %u: %s\n", me, t, ok ? "no error" : g.last_error().c_str());
                return failed("bad use on purpose (--bad " + o.bad + ")");
            }
            for (size_t i = 0; i < o.families.size(); ++i) {
                iccs::group::testing::CheckPlan plan;
                iccs::group::testing::ResultDigests digests;
                plan.family = o.families[i];
                plan.sizes = o.elements;
                plan.rounds = o.rounds;
                plan.digests = &digests;
                plan.inject_error = o.inject_error;
                std::string why;
                if (!iccs::group::testing::check_all_collectives(worlds[i]->group(t), plan, why)) return failed(why);
                std::printf("results %u.%u %s: %s\n", me, t, to_string(o.families[i]), digests.format().c_str());
                Counters sum;
                if (!gather_counters(ep, *worlds[i], sum, why)) return failed(why);
                if (t != 0) continue;
                report[i] = format_counters(sum, topo);
                if (o.families[i] == Family::kHier && !iccs::group::testing::check_magpie_rule(sum, why)) {
                    rule_ok[i] = false;
                    report[i] += "  MagPIe's rule BROKEN: " + why + "\n";
                } else if (o.families[i] == Family::kHier) {
                    report[i] += "  MagPIe's rule holds: WAN data bytes = the minimum (each item once to each receiving "
                                 "site) for every collective; no item came into a site twice in a call; at most 1 WAN "
                                 "link behind any message\n";
                }
            }
        });
    bool ok = err.empty();
    for (bool r : rule_ok) ok = ok && r;
    if (!err.empty()) std::printf("cluster %u: collectives error: %s\n", me, err.c_str());
    for (size_t i = 0; ok && i < worlds.size(); ++i)  // leak check: every message taken by its call
        if (worlds[i]->pending_messages() != 0 || worlds[i]->bad_segments() != 0) {
            ok = false;
            std::printf("cluster %u: collectives error: %zu messages left over, %" PRIu64 " malformed segments (%s)\n",
                        me, worlds[i]->pending_messages(), worlds[i]->bad_segments(), to_string(o.families[i]));
        }
    if (me == 0 && err.empty()) {
        std::string sizes;
        for (uint32_t n : o.elements) {
            if (!sizes.empty()) sizes += ',';
            sizes += std::to_string(n);
        }
        for (size_t i = 0; i < o.families.size(); ++i)
            std::printf("collectives %s: %s; int64 elements per rank %s x %u rounds: every result equals the sequential "
                        "reference\n%s",
                        to_string(o.families[i]), topo.describe().c_str(), sizes.c_str(), o.rounds, report[i].c_str());
    }
    std::printf("cluster %u: collectives %s\n", me, ok ? "ok" : "FAILED");
    std::fflush(stdout);
    return runtime_finish(std::move(rt), ok);
}

namespace {


// A rank as one character (ranks up to 61; '?' beyond): the senders of a sequence, printed.
char rank_char(uint32_t r) {
    static const char k[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    return r < 62 ? k[r] : '?';
}

// The replicated object of `iccs run ordered`: a balance and an order-sensitive digest of writes,
// and who wrote, in the order applied (for the test's replay).
struct Ledger {
    int64_t balance = 0;
    uint64_t digest = 1469598103934665603ull, writes = 0;
    std::string writers;
};
// add: v = rank * 1000 + write number; halve: the writer's rank as its argument
void ledger_add(Ledger& l, std::span<const uint8_t> a) {
    uint32_t v = 0;
    std::memcpy(&v, a.data(), std::min<size_t>(4, a.size()));
    l.balance += v;
    l.digest = (l.digest ^ v) * 1099511628211ull;
    ++l.writes;
    l.writers += rank_char(v / 1000);
}
void ledger_halve(Ledger& l, std::span<const uint8_t> a) {
    uint32_t rank = 0;
    std::memcpy(&rank, a.data(), std::min<size_t>(4, a.size()));
    l.balance /= 2;
    l.digest = (l.digest ^ 0xFFFF) * 1099511628211ull;
    ++l.writes;
    l.writers += rank_char(rank);
}

// Every thread's 8-byte words gathered; true when every thread of every cluster gave the same.
bool all_same(RtEndpoint& ep, uint16_t threads, std::span<const uint64_t> mine, std::vector<uint64_t>& all, std::string& err) {
    std::vector<std::vector<uint8_t>> by;
    std::vector<uint8_t> b(mine.size() * 8);
    std::memcpy(b.data(), mine.data(), b.size());
    if (ep.barrier_gather(b, by) != RtStatus::kOk) {
        err = "barrier_gather: " + ep.last_error();
        return false;
    }
    all.clear();
    for (const auto& v : by) {
        if (v.size() != threads * b.size()) {
            err = "barrier_gather: a cluster gave " + std::to_string(v.size()) + " bytes";
            return false;
        }
        const size_t n = v.size() / 8;
        const size_t at = all.size();
        all.resize(at + n);
        std::memcpy(all.data() + at, v.data(), v.size());
    }
    return true;
}

}  // namespace

int program_ordered(std::unique_ptr<Runtime> rt, const Topology& topo, const OrderedRunOptions& o) {
    const uint16_t T = rt->threads(), me = rt->cluster();
    const uint32_t P = topo.ranks();
    std::vector<std::unique_ptr<OrderedBcast>> obs;
    std::vector<std::unique_ptr<Replicated<Ledger>>> reps;
    for (size_t i = 0; i < o.policies.size(); ++i) {
        obs.push_back(std::make_unique<OrderedBcast>(*rt, topo, o.policies[i], static_cast<uint16_t>(150 + 4 * i)));
        reps.push_back(std::make_unique<Replicated<Ledger>>(*rt, topo, o.policies[i], Ledger{},
                                                             std::vector<Replicated<Ledger>::WriteFn>{ledger_add, ledger_halve},
                                                             static_cast<uint16_t>(130 + 4 * i)));
    }
    std::vector<std::string> lines(o.policies.size());
    struct Result {
        double lat_us = 0, lat_mean_us = 0, rate = 0;
    };
    std::vector<Result> results(o.policies.size());
    const std::string err = on_every_thread(T, [&](uint16_t t, const FailFn& fail) {
            RtEndpoint& ep = rt->endpoint(t);
            const uint32_t rank = uint32_t{me} * T + t;
            auto failed = [&](const std::string& why) { fail("thread " + std::to_string(me) + "." + std::to_string(t) + ": " + why); };
            if (ep.barrier() != RtStatus::kOk) return failed("first barrier: " + ep.last_error());
            for (size_t pi = 0; pi < o.policies.size(); ++pi) {
                OrderedBcast& ob = *obs[pi];
                const char* pol = to_string(o.policies[pi]);
                // 1. everyone sends at once; every thread delivers all, in one order
                const uint64_t N = uint64_t{P} * o.messages;
                if (ep.barrier() != RtStatus::kOk) return failed("barrier: " + ep.last_error());
                const uint64_t t0 = now_ns();
                std::vector<uint8_t> body(std::max<uint32_t>(o.size, 8)), got;
                std::vector<uint32_t> next(P, 0);
                uint64_t hash = 1469598103934665603ull, delivered = 0;
                std::string senders;  // thread 0.0 prints them
                RtAddr from;
                auto take = [&]() {
                    if (!ob.deliver(t, got, &from)) return false;
                    uint32_t i = 0;
                    std::memcpy(&i, got.data(), 4);
                    const uint32_t src = uint32_t{from.cluster} * T + from.thread;
                    if (src >= P || i != next[src]++ || got.size() != body.size()) {
                        failed(std::string(pol) + ": message " + std::to_string(i) + " from rank " + std::to_string(src) +
                               " out of its sender's order or of the wrong size");
                        return false;
                    }
                    hash = (hash ^ (uint64_t{src} << 32 | i)) * 1099511628211ull;
                    ++delivered;
                    if (rank == 0) senders += rank_char(src);
                    return true;
                };
                for (uint32_t i = 0; i < o.messages; ++i) {
                    // the test hook: rank 0 sends its messages 0 and 1 the wrong way round
                    const uint32_t num = o.inject_error && rank == 0 && i < 2 && o.messages >= 2 ? 1 - i : i;
                    std::memcpy(body.data(), &num, 4);
                    if (!ob.send(t, body.data(), body.size())) return failed(ob.last_error());
                    if (i % 4 == 3 && !take()) return failed(ob.last_error());
                }
                while (delivered < N)
                    if (!take()) return failed(ob.last_error());
                const uint64_t t1 = now_ns();
                std::printf("sequence %u.%u %s: delivered %" PRIu64 " hash %016" PRIx64 "\n", me, t, pol, delivered, hash);
                if (rank == 0) std::printf("sequence %s senders: %s\n", pol, senders.c_str());
                std::vector<uint64_t> all;
                const uint64_t mine[3] = {hash, t0, t1};
                std::string why;
                if (!all_same(ep, T, mine, all, why)) return failed(why);
                uint64_t lo = UINT64_MAX, hi = 0;
                for (size_t k = 0; k < all.size(); k += 3) {
                    if (all[k] != hash) return failed(std::string(pol) + ": thread ranks delivered different sequences");
                    lo = std::min(lo, all[k + 1]);
                    hi = std::max(hi, all[k + 2]);
                }
                const double rate = double(N) / (double(hi - lo) / 1e9);
                // 2. latency: one message at a time, the sender changing every `phase` rounds
                std::vector<uint64_t> lat;
                for (uint32_t r = 0; r < o.latency_rounds; ++r) {
                    const uint32_t sender = (r / std::max<uint32_t>(1, o.phase)) % P;
                    uint64_t ts = now_ns();
                    if (sender == rank) {
                        std::memcpy(body.data(), &r, 4);
                        if (!ob.send(t, body.data(), body.size())) return failed(ob.last_error());
                    }
                    if (!ob.deliver(t, got, &from)) return failed(ob.last_error());
                    if (sender == rank) lat.push_back(now_ns() - ts);
                }
                std::vector<uint64_t> lat_pad(o.latency_rounds, 0);
                std::copy(lat.begin(), lat.end(), lat_pad.begin());
                if (!all_same(ep, T, lat_pad, all, why)) return failed(why);
                std::vector<uint64_t> lats;
                for (uint64_t x : all)
                    if (x) lats.push_back(x);
                std::sort(lats.begin(), lats.end());
                const double lat_us = lats.empty() ? 0 : double(lats[lats.size() / 2]) / 1e3;
                double lat_mean_us = 0;
                for (uint64_t x : lats) lat_mean_us += double(x) / 1e3 / double(lats.size());
                // 3. the replicated object
                Replicated<Ledger>& rep = *reps[pi];
                for (uint32_t w = 0; w < o.writes; ++w) {
                    const uint32_t v = rank * 1000 + w;
                    const bool ok = w % 5 == 4 ? rep.write(t, 1, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&rank), 4))
                                               : rep.write(t, 0, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&v), 4));
                    if (!ok) return failed(std::string(pol) + ": replicated write: " + rep.bcast().last_error());
                }
                if (!rep.bcast().wait_delivered(t, uint64_t{P} * o.writes))
                    return failed(std::string(pol) + ": the replicated object's writes did not all arrive: " +
                                  rep.bcast().last_error());
                const Ledger l = rep.read([](const Ledger& x) { return x; });
                std::printf("replica %u.%u %s: balance %" PRId64 " digest %016" PRIx64 " writes %" PRIu64 "\n", me, t, pol,
                            l.balance, l.digest, l.writes);
                if (rank == 0) std::printf("replica %s writers: %s\n", pol, l.writers.c_str());
                const uint64_t st[3] = {static_cast<uint64_t>(l.balance), l.digest, l.writes};
                if (!all_same(ep, T, st, all, why)) return failed(why);
                for (size_t k = 0; k < all.size(); k += 3)
                    if (all[k] != st[0] || all[k + 1] != st[1] || all[k + 2] != st[2])
                        return failed(std::string(pol) + ": replicas differ (balance " + std::to_string(all[k]) + " vs " +
                                      std::to_string(st[0]) + ")");
                if (t == 0) {
                    const OrderedCounters c = ob.counters();
                    char line[512];
                    std::snprintf(line, sizeof line,
                                  "ordered %s: %" PRIu64 " messages of %u bytes from %u threads at once, every thread "
                                  "delivered the same sequence, each sender's in order: %.0f msgs/s; one at a time "
                                  "(sender changes every %u): median %.1f us, mean %.1f us; replicated object identical on every cluster "
                                  "(%" PRIu64 " writes, balance %" PRId64 "); cluster %u: sequenced %" PRIu64
                                  ", token passes %" PRIu64 ", requests %" PRIu64 ", WAN msgs %" PRIu64 "\n",
                                  pol, N, o.size, P, rate, o.phase, lat_us, lat_mean_us, l.writes, l.balance, me, c.sequenced_here,
                                  c.token_passes, c.requests, c.wan_msgs);
                    lines[pi] = line;
                    results[pi] = {lat_us, lat_mean_us, rate};
                }
            }
        });
    const bool ok = err.empty();
    if (!ok) std::printf("cluster %u: ordered error: %s\n", me, err.c_str());
    if (me == 0 && ok) {
        for (const std::string& l : lines) std::fputs(l.c_str(), stdout);
        if (!o.result_file.empty())
            if (FILE* f = std::fopen(o.result_file.c_str(), "w")) {
                for (size_t i = 0; i < o.policies.size(); ++i)
                    std::fprintf(f, "ordered %s %.3f %.3f %.3f\n", to_string(o.policies[i]), results[i].lat_us,
                                 results[i].lat_mean_us, results[i].rate);
                std::fclose(f);
            }
    }
    std::printf("cluster %u: ordered %s\n", me, ok ? "ok" : "FAILED");
    std::fflush(stdout);
    return runtime_finish(std::move(rt), ok);
}

}  // namespace iccs::group
