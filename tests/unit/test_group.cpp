// test_group.cpp: group/ over the in-process loopback runtime (dsm/testing): every collective
// against a sequential reference for several shapes (sites x clusters x threads), both families;
// MagPIe's rule from the counters; bad use ends with an error naming the call and the threads.
#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "coll_check.hpp"
#include "config.hpp"
#include "group.hpp"
#include "loopback_runtime.hpp"

using namespace iccs;
using namespace iccs::group;

namespace {

struct Shape {
    std::vector<uint16_t> site_of_cluster;
    uint16_t threads;
};

// Runs body(group, rank) on every thread of every cluster; returns each thread's error ("" = ok)
// and the counters summed over the clusters.
// clean: every thread made the same calls, so no message may be left over (the leak check).
std::vector<std::string> run_world(const Shape& s, const Options& o, const std::function<std::string(Group&)>& body,
                                   Counters* sum = nullptr, bool clean = true) {
    const auto C = static_cast<uint16_t>(s.site_of_cluster.size());
    iccs::testing::LoopbackWorld lw(C, s.threads);
    Topology topo;
    std::string err;
    REQUIRE(make_topology(C, s.threads, s.site_of_cluster, topo, err));
    std::vector<std::unique_ptr<World>> worlds;
    for (uint16_t c = 0; c < C; ++c) worlds.push_back(std::make_unique<World>(lw.runtime(c), topo, o));
    std::vector<std::string> errs(size_t{C} * s.threads);
    std::vector<std::thread> th;
    for (uint16_t c = 0; c < C; ++c)
        for (uint16_t t = 0; t < s.threads; ++t)
            th.emplace_back([&, c, t] { errs[size_t{c} * s.threads + t] = body(worlds[c]->group(t)); });
    for (auto& x : th) x.join();
    lw.stop();
    for (auto& w : worlds) {  // leak check: every message was taken by its call, none malformed
        if (clean) CHECK(w->pending_messages() == 0);
        CHECK(w->bad_segments() == 0);
    }
    if (sum) {
        *sum = Counters{};
        for (auto& w : worlds) sum->add(w->counters());
    }
    return errs;
}

std::string first_error(const std::vector<std::string>& e) {
    for (const auto& x : e)
        if (!x.empty()) return x;
    return "";
}

}  // namespace

TEST_CASE("group: topology from [wan] sites", "[group]") {
    Topology t;
    std::string err;
    REQUIRE(make_topology(4, 2, {3, 1, 3, 1}, t, err));
    CHECK(t.sites == 2);
    CHECK(t.site_of == std::vector<uint16_t>{0, 1, 0, 1});
    CHECK(t.clusters_of[0] == std::vector<uint16_t>{0, 2});
    CHECK(t.site_id == std::vector<uint16_t>{3, 1});
    CHECK(t.site_of_rank(5) == 0);  // cluster 2, thread 1
    REQUIRE(make_topology(3, 1, {}, t, err));
    CHECK(t.sites == 3);
    CHECK_FALSE(make_topology(3, 1, {0, 1}, t, err));
    CHECK(err.find("names 2 clusters") != std::string::npos);
}

TEST_CASE("group: the machine file's [group] section gives the default family and segment size", "[group]") {
    const ConfigResult dflt = configure("", {});
    REQUIRE(dflt.ok());
    CHECK(options_from_config(*dflt.config).family == Family::kHier);
    CHECK(options_from_config(*dflt.config).segment_bytes == 65536);
    const ConfigResult flat = load_config("[group]\nfamily = \"flat\"\nsegment_bytes = 4096\n", "g.toml");
    REQUIRE(flat.ok());
    CHECK(options_from_config(*flat.config).family == Family::kFlat);
    CHECK(options_from_config(*flat.config).segment_bytes == 4096);
    const ConfigResult bad = load_config("[group]\nfamily = \"tree\"\n", "g.toml");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error.find("[group] family = \"tree\"") != std::string::npos);
    CHECK(bad.error.find("hier, flat") != std::string::npos);
}

TEST_CASE("group: every collective equals the sequential reference, both families, several shapes", "[group]") {
    const std::vector<Shape> shapes = {
        {{0}, 1},          {{0}, 3},          {{0, 0}, 2},       {{0, 1}, 1},          {{0, 1, 2}, 2},
        {{0, 0, 1, 1}, 2}, {{0, 1, 0, 1}, 2}, {{0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3}, 1}, {{0, 1, 2, 3}, 3},
        {{0, 0, 0, 1, 1, 1}, 3}, {{2, 0, 1, 2, 0}, 2},
    };
    Options o;
    o.segment_bytes = 4096;  // long messages go in several segments even at test sizes
    o.timeout_ms = 120'000;
    for (const Shape& s : shapes)
        for (Family f : {Family::kHier, Family::kFlat}) {
            iccs::group::testing::CheckPlan plan;
            plan.family = f;
            plan.sizes = {0, 1, 5, 1500};
            Counters sum;
            const auto errs = run_world(s, o, [&](Group& g) {
                std::string why;
                return iccs::group::testing::check_all_collectives(g, plan, why) ? std::string() : why;
            }, &sum);
            INFO("shape: " << s.site_of_cluster.size() << " clusters, " << s.threads << " threads, family "
                           << to_string(f));
            CHECK(first_error(errs) == "");
            if (f == Family::kHier) {
                std::string why;
                INFO(why);
                CHECK(iccs::group::testing::check_magpie_rule(sum, why));
                CHECK(why == "");
            }
            CHECK(sum.of(Coll::kBcast).calls == size_t{4} * s.site_of_cluster.size() * s.threads);
            // 1500 elements (12000 bytes) > 4 KiB segments: with several clusters in a site the
            // hierarchical family spreads WAN segments over the site's leaders, which relay them
            bool spread_shape = false;
            for (uint16_t site : s.site_of_cluster)
                spread_shape |= std::count(s.site_of_cluster.begin(), s.site_of_cluster.end(), site) > 1 &&
                                std::count(s.site_of_cluster.begin(), s.site_of_cluster.end(), site) <
                                    static_cast<long>(s.site_of_cluster.size());
            if (f == Family::kHier) {  // the coordinators' audit: items came in, each once per call
                uint64_t link_items = 0, items = 0;
                for (const LinkCounters& l : sum.link) link_items += l.items;
                for (const CollCounters& c : sum.coll) {
                    items += c.items_crossed;
                    CHECK(c.item_crossings_max <= 1);
                }
                CHECK(link_items == items);
                std::set<uint16_t> distinct(s.site_of_cluster.begin(), s.site_of_cluster.end());
                if (distinct.size() > 1) {
                    CHECK(sum.of(Coll::kBcast).items_crossed > 0);
                    CHECK(sum.of(Coll::kAlltoall).item_crossings_max == 1);
                    CHECK(sum.of(Coll::kAllreduce).item_crossings_max == 1);
                }
            }
            if (f == Family::kHier && spread_shape) {
                CHECK(sum.of(Coll::kBcast).relayed > 0);
                CHECK(sum.of(Coll::kAllreduce).relayed > 0);
            }
            if (f == Family::kFlat) CHECK(sum.of(Coll::kBcast).relayed == 0);
        }
}

TEST_CASE("group: flat algorithms break MagPIe's rule where the hierarchical ones keep it", "[group]") {
    // 4 sites of 3 clusters of 1 thread: a binomial broadcast sends over a WAN link data that
    // already crossed one, and sends one site's data to another site more than once.
    const Shape s{{0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3}, 1};
    for (Family f : {Family::kHier, Family::kFlat}) {
        Counters sum;
        Options o;
        o.family = f;
        const auto errs = run_world(s, o, [&](Group& g) {
            std::vector<int64_t> b(1000, g.rank() == 0 ? 7 : 0), out(1000);
            if (!g.bcast(std::span<int64_t>(b), 0)) return g.last_error();
            if (!g.allreduce(std::span<const int64_t>(b), std::span<int64_t>(out), Op::kSum)) return g.last_error();
            return out[999] == 7 * 12 ? std::string() : std::string("wrong sum");
        }, &sum);
        CHECK(first_error(errs) == "");
        const CollCounters& b = sum.of(Coll::kBcast);
        CHECK(b.wan_bytes_min == 3 * 8000);
        if (f == Family::kHier) {
            CHECK(b.wan_bytes == b.wan_bytes_min);
            CHECK(b.wan_hops_max == 1);
            CHECK(b.wan_msgs == 3);  // one message to each other site (8000 bytes: one 64 KiB segment)
        } else {
            CHECK(b.wan_hops_max >= 2);
            CHECK(sum.of(Coll::kAllreduce).wan_bytes > sum.of(Coll::kAllreduce).wan_bytes_min);
        }
        uint64_t link_bytes = 0;
        for (const LinkCounters& l : sum.link) link_bytes += l.bytes;
        uint64_t all = 0;
        for (const CollCounters& c : sum.coll) all += c.wan_bytes;
        CHECK(link_bytes == all);
    }
}

TEST_CASE("group: bad use ends with an error naming the call and the threads, not a hang", "[group]") {
    Options o;
    o.timeout_ms = 1500;
    const Shape s{{0, 1}, 2};
    for (Family f : {Family::kHier, Family::kFlat}) {
        // an allreduce of n ones; "" or the error
        auto allreduce_of = [f](Group& g, size_t n) {
            std::vector<int64_t> in(n, 1), out(5);
            return g.allreduce(std::span<const int64_t>(in), std::span<int64_t>(out), Op::kSum, f) ? std::string()
                                                                                                    : g.last_error();
        };
        SECTION(std::string("mismatched roots, ") + to_string(f)) {
            const auto errs = run_world(s, o, [&](Group& g) {
                std::vector<int32_t> b(10, 1);
                if (!g.barrier(f)) return g.last_error();
                const uint32_t root = g.rank() == 3 ? 1 : 0;
                return g.bcast(std::span<int32_t>(b), root, f) ? std::string() : g.last_error();
            }, nullptr, false);
            const std::string e = first_error(errs);
            INFO(e);
            CHECK(e.find("bcast (call 2)") != std::string::npos);
            CHECK(e.find("thread ") != std::string::npos);
        }
        SECTION(std::string("mismatched sizes, ") + to_string(f)) {
            const auto errs = run_world(s, o, [&](Group& g) { return allreduce_of(g, g.rank() == 2 ? 5 : 4); }, nullptr, false);
            const std::string e = first_error(errs);
            INFO(e);
            CHECK(e.find("allreduce (call 1)") != std::string::npos);
        }
        SECTION(std::string("called by some threads only, ") + to_string(f)) {
            const auto errs = run_world(s, o, [&](Group& g) { return g.rank() == 1 ? std::string() : allreduce_of(g, 4); },
                                        nullptr, false);
            const std::string e = first_error(errs);
            INFO(e);
            CHECK(e.find("allreduce (call 1)") != std::string::npos);
            CHECK(e.find("timed out") != std::string::npos);
            CHECK(e.find("thread 0.1") != std::string::npos);
        }
    }
    SECTION("counts that do not add up are refused on the calling thread") {
        const auto errs = run_world(s, o, [&](Group& g) {
            std::vector<uint32_t> counts{1, 1, 1};  // 4 ranks
            std::vector<int64_t> in(3), out(1);
            return g.reduce_scatter(std::span<const int64_t>(in), std::span<int64_t>(out),
                                    std::span<const uint32_t>(counts), Op::kSum)
                       ? std::string()
                       : g.last_error();
        }, nullptr, false);
        CHECK(errs[0].find("reduce_scatter (call 1) on thread 0.0: counts has 3 entries for 4 ranks") != std::string::npos);
    }
}
