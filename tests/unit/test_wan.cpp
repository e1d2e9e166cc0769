// The WAN emulation stage (proxy/wan_emu.hpp) with an injected clock: arrival times from length,
// bandwidth and latency, queueing on a link, FIFO when the latency drops, the hold limit, routing
// around a cut link, the bandwidth share; the script and series parsers (errors name the line) and
// the driver following them in time.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "wan_emu.hpp"
#include "wan_script.hpp"

using namespace iccs;

namespace {

constexpr uint64_t kMs = 1'000'000;

// `sites` sites, cluster c in site c, every link at bw / lat.
WanConfig config(uint32_t sites, double bw, uint64_t lat_ns) {
    WanConfig c;
    for (uint32_t i = 0; i < sites; ++i) c.site_of_cluster.push_back(static_cast<uint16_t>(i));
    c.topo = WanTopology::uniform(sites, WanLinkParams{bw, lat_ns, true});
    return c;
}

}  // namespace

TEST_CASE("wan: arrival = now + len / bandwidth + latency", "[wan]") {
    const uint64_t t0 = 1'000 * kMs;
    for (const double bw : {1e5, 1e6, 1e7})
        for (const uint64_t lat : {1 * kMs, 10 * kMs, 100 * kMs})
            for (const uint32_t len : {1u, 65536u, 1u << 20}) {
                INFO("bw " << bw << " lat " << lat << " len " << len);
                WanEmulator_st e(config(2, bw, lat), 1, t0);
                const uint64_t want = t0 + static_cast<uint64_t>(std::llround(len * 1e9 / bw)) + lat;
                CHECK(e.arrival(0, len, t0) == want);
                CHECK(e.counters(0, 1).msgs == 1);
                CHECK(e.counters(0, 1).bytes == len);
            }
    WanEmulator_st unlimited(config(2, 0, 5 * kMs), 1, t0);  // bandwidth 0: latency only
    CHECK(unlimited.arrival(0, 1u << 20, t0) == t0 + 5 * kMs);
}

TEST_CASE("wan: messages queue on a link; idle time is not queueing", "[wan]") {
    WanEmulator_st e(config(2, 1e6, 10 * kMs), 1, 0);
    // three 1000-byte messages at once: serialized 1 ms each
    CHECK(e.arrival(0, 1000, 0) == 11 * kMs);
    CHECK(e.arrival(0, 1000, 0) == 12 * kMs);
    CHECK(e.arrival(0, 1000, 0) == 13 * kMs);
    CHECK(e.counters(0, 1).queue_ns_sum == 1 * kMs + 2 * kMs);
    CHECK(e.counters(0, 1).queue_ns_max == 2 * kMs);
    // after the link went idle: no queueing
    CHECK(e.arrival(0, 1000, 50 * kMs) == 61 * kMs);
    CHECK(e.counters(0, 1).queue_ns_sum == 3 * kMs);
}

TEST_CASE("wan: a link stays FIFO when its latency drops", "[wan]") {
    WanEmulator_st e(config(2, 0, 100 * kMs), 1, 0);
    const uint64_t first = e.arrival(0, 10, 0);
    CHECK(first == 100 * kMs);
    e.set_link(0, 1, WanLinkParams{0, 1 * kMs, true}, 5 * kMs);
    const uint64_t second = e.arrival(0, 10, 5 * kMs);
    CHECK(second == first);  // clamped: would be 6 ms
    CHECK(e.arrival(0, 10, 200 * kMs) == 201 * kMs);
    CHECK(e.counters(0, 1).changes == 1);
    REQUIRE(e.changes().size() == 1);
    CHECK(e.changes()[0].at_ns == 5 * kMs);
}

TEST_CASE("wan: held messages come out when due, in order, within the hold limit", "[wan]") {
    WanConfig c = config(3, 1e6, 10 * kMs);
    c.hold_limit_bytes = 4 * 2048;  // four buffers
    WanEmulator_st e(c, 2, 0);
    CHECK(e.remote(0));
    CHECK(e.remote(1));
    CHECK(!e.remote(2));
    int m[5] = {0, 1, 2, 3, 4};
    CHECK(e.hold(0, &m[0], 1000, 1, 0));        // due 11 ms
    CHECK(e.hold(0, &m[1], 1000, 1, 0));        // due 12 ms
    CHECK(e.hold(1, &m[2], 0, 1, 0));           // due 10 ms (other site, other link)
    CHECK(e.hold(1, &m[3], 0, 1, 0));           // 10 ms
    CHECK(!e.hold(1, &m[4], 0, 1, 0));          // the limit
    CHECK(e.held_msgs() == 4);
    CHECK(e.held_bytes() == 2000);
    CHECK(e.next_event_ns() == 10 * kMs);
    uint16_t site = 9;
    CHECK(e.peek_due(10 * kMs - 1, site) == nullptr);
    std::vector<int> order;
    for (uint64_t t : {10 * kMs, 11 * kMs, 12 * kMs})
        while (void* p = e.peek_due(t, site)) {
            order.push_back(*static_cast<int*>(p));
            e.pop(site);
        }
    CHECK(order == std::vector<int>{2, 3, 0, 1});
    CHECK(e.held_msgs() == 0);
    CHECK(e.next_event_ns() == UINT64_MAX);
    CHECK(e.hold(1, &m[4], 0, 1, 20 * kMs));
    int freed = 0;
    e.drain_all([&](void*) { ++freed; });
    CHECK(freed == 1);
}

TEST_CASE("wan: a cut link routes through another site and congests it", "[wan]") {
    WanConfig c = config(3, 1e6, 10 * kMs);
    c.topo.at(0, 2).present = false;
    WanEmulator_st e(c, 2, 0);
    REQUIRE(c.topo.path(0, 2) == std::vector<uint32_t>{0 * 3 + 1, 1 * 3 + 2});
    // 0 -> 1 (1 ms + 10 ms) then 1 -> 2 (1 ms + 10 ms)
    CHECK(e.arrival(0, 1000, 0) == 22 * kMs);
    CHECK(e.counters(0, 1).msgs == 1);
    CHECK(e.counters(1, 2).msgs == 1);
    CHECK(e.counters(0, 2).msgs == 0);
    // site 1's own message at 11 ms finds link 1 -> 2 busy until 12 ms
    CHECK(e.arrival(1, 1000, 11 * kMs) == 23 * kMs);
    CHECK(e.counters(1, 2).queue_ns_sum == 1 * kMs);
    const auto used = e.used_links();
    CHECK(used == std::vector<std::pair<uint32_t, uint32_t>>{{0, 1}, {1, 2}});
    // the link comes back: the path is direct again
    e.set_link(0, 2, WanLinkParams{1e6, 10 * kMs, true}, 30 * kMs);
    CHECK(e.arrival(0, 1000, 100 * kMs) == 111 * kMs);
    WanTopology cut = WanTopology::uniform(2, WanLinkParams{});
    cut.at(0, 1).present = false;
    CHECK(cut.unreachable() == "site 1 cannot be reached from site 0 (every link towards it is cut)");
}

TEST_CASE("wan: a proxy's bandwidth share is bandwidth / the site's receiving proxies", "[wan]") {
    WanConfig c = config(2, 1e6, 0);
    c.proxies_per_cluster = {2, 2};
    WanEmulator_st two(c, 1, 0);
    CHECK(two.share_divisor() == 2);
    CHECK(two.arrival(0, 1000, 0) == 2 * kMs);
    c.proxies_per_cluster = {1, 4};  // one remote proxy sends to proxy 0 only
    CHECK(WanEmulator_st(c, 1, 0).share_divisor() == 1);
    c.site_of_cluster = {0, 1, 1};  // two clusters in site 1, two proxies each, remote has 3
    c.proxies_per_cluster = {3, 2, 2};
    CHECK(WanEmulator_st(c, 1, 0).share_divisor() == 4);
}

TEST_CASE("wan: the script language, Panda's example, and errors naming the line", "[wan]") {
    const WanTopology base = WanTopology::uniform(5, WanLinkParams{1e7, 1 * kMs, true});
    const std::string dir = "/tmp/iccs-wan-test-" + std::to_string(::getpid()) + "/";
    std::system(("mkdir -p " + dir).c_str());
    std::ofstream(dir + "scenario3") << "# a scenario\nset_sym 1 4 50000 0.02\ncut 0 3\n";
    WanProgram p;
    std::string err;
    const std::string panda =
        "read scenario3\nsleep 2000\nforever\nset_sym one 1 4 1000 0.3\nsleep 1000\nset_sym one 1 4 1000000 0.001\n"
        "sleep 2000\n";
    REQUIRE(wan_parse_script(panda, "fig4.wan", dir, base, p, err));
    INFO(err);
    REQUIRE(p.scenarios.size() == 1);
    CHECK(p.scenarios[0].at(1, 4) == WanLinkParams{50000, 20 * kMs, true});
    CHECK(p.scenarios[0].at(4, 1) == WanLinkParams{50000, 20 * kMs, true});
    CHECK(!p.scenarios[0].at(0, 3).present);
    CHECK(p.scenarios[0].at(3, 0).present);
    CHECK(p.scenarios[0].at(2, 3) == base.at(2, 3));
    // scenario, sleep, [set, set, sleep, set, set, sleep], jump to 2
    REQUIRE(p.ops.size() == 9);
    CHECK(p.ops[8].kind == WanOp::kJump);
    CHECK(p.ops[8].target == 2);

    // The driver follows it in time (an injected clock).
    WanConfig c;
    c.site_of_cluster = {0, 1, 2, 3, 4};
    c.topo = base;
    c.script = p;
    WanEmulator_st e(c, 4, 0);
    CHECK(e.mode() == WanMode::kScript);
    CHECK(e.topology().at(1, 4).bw_bytes_per_s == 50000);
    CHECK(e.next_event_ns() == 2000 * kMs);
    e.drive(1999 * kMs);
    CHECK(e.topology().at(1, 4).bw_bytes_per_s == 50000);
    e.drive(2000 * kMs);
    CHECK(e.topology().at(1, 4) == WanLinkParams{1000, 300 * kMs, true});
    e.drive(3000 * kMs);
    CHECK(e.topology().at(1, 4) == WanLinkParams{1e6, 1 * kMs, true});
    e.drive(5000 * kMs);  // the loop again
    CHECK(e.topology().at(1, 4).bw_bytes_per_s == 1000);
    CHECK(e.next_event_ns() == 6000 * kMs);
    CHECK(e.set_mode(WanMode::kConstant, 5500 * kMs));
    CHECK(e.topology().at(1, 4) == base.at(1, 4));
    CHECK(e.next_event_ns() == UINT64_MAX);
    CHECK(!e.set_mode(WanMode::kSeries, 5500 * kMs));  // none configured

    auto error = [&](const std::string& text) {
        WanProgram q;
        std::string e2;
        CHECK(!wan_parse_script(text, "s.wan", dir, base, q, e2));
        return e2;
    };
    CHECK(error("sleep 10\nset_sym 1 4\n") == "s.wan:2: set_sym needs 4 values (A B BW LAT_S; optionally a name first), got 2");
    CHECK(error("set 1 9 1000 0.1\n") == "s.wan:1: site '9': expected a site id from 0 to 4");
    CHECK(error("\n\nset 1 2 fast 0.1\n") ==
          "s.wan:3: bandwidth 'fast': expected bytes per second >= 0 (0 = unlimited)");
    CHECK(error("set 1 2 100 -1\n") == "s.wan:1: latency '-1': expected seconds from 0 to 100");
    CHECK(error("sleep\n") == "s.wan:1: sleep needs 1 value (MS), got 0");
    CHECK(error("sleep soon\n") == "s.wan:1: sleep 'soon': expected milliseconds from 0 to 86400000");
    CHECK(error("jump 3\n") == "s.wan:1: unknown command 'jump' (commands: read, sleep, set, set_sym, loss, loss_sym, forever)");
    CHECK(error("forever\nset 1 2 100 0.1\n") ==
          "s.wan:1: forever loop never sleeps (it would spin): add a sleep MS with MS > 0");
    CHECK(error("forever {\nsleep 1\n") == "s.wan:1: forever { is never closed by '}'");
    CHECK(error("forever {\nsleep 1\n}\nsleep 2\n") == "s.wan:4: 'sleep' after the forever block never runs");
    CHECK(error("forever\nsleep 1\nforever\n") == "s.wan:3: forever inside forever (line 1)");
    CHECK(error("}\n") == "s.wan:1: '}' without 'forever {'");
    CHECK(error("# nothing\n") == "s.wan: the script has no commands");
    CHECK_THAT(error("read nosuch\n"), Catch::StartsWith("s.wan:1: read nosuch: cannot read " + dir + "nosuch: "));
    std::ofstream(dir + "bad") << "set 1 2 100 0.1\nsleep 5\n";
    CHECK(error("sleep 1\nread bad\n") ==
          "s.wan:2: read bad: " + dir + "bad:2: unknown scenario line 'sleep' (a scenario has set, set_sym, cut, cut_sym, loss, loss_sym)");
    std::ofstream(dir + "island") << "cut_sym 0 4\ncut_sym 1 4\ncut_sym 2 4\ncut_sym 3 4\n";
    CHECK(error("read island\n") == "s.wan:1: read island: " + dir +
                                        "island: site 4 cannot be reached from site 0 (every link towards it is cut)");
    std::ofstream(dir + "braces.wan") << "forever {\n  set 0 1 1000 0.5\n  sleep 1000\n}\n";
    CHECK(wan_load_script(dir + "braces.wan", base, p, err));
    CHECK(!wan_load_script(dir + "missing.wan", base, p, err));
    CHECK_THAT(err, Catch::StartsWith("cannot read " + dir + "missing.wan: "));
    std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("wan: a measured series is replayed by time", "[wan]") {
    const WanTopology base = WanTopology::uniform(2, WanLinkParams{0, 0, true});
    WanProgram p;
    std::string err;
    REQUIRE(wan_parse_series("# t a b bw lat\n0 0 1 1e6 0.010\n0 1 0 1e6 0.010\n1.5 0 1 2e5 0.050\n3 0 1 1e7 0.001\n",
                             "m.series", base, p, err));
    WanConfig c;
    c.site_of_cluster = {0, 1};
    c.topo = base;
    c.series = p;
    WanEmulator_st e(c, 1, 100 * kMs);  // starts at 100 ms: series times are from the start
    CHECK(e.mode() == WanMode::kSeries);
    CHECK(e.topology().at(0, 1) == WanLinkParams{1e6, 10 * kMs, true});
    CHECK(e.topology().at(1, 0) == WanLinkParams{1e6, 10 * kMs, true});
    e.drive(1599 * kMs);
    CHECK(e.topology().at(0, 1).bw_bytes_per_s == 1e6);
    e.drive(1600 * kMs);
    CHECK(e.topology().at(0, 1) == WanLinkParams{2e5, 50 * kMs, true});
    e.drive(3100 * kMs);
    CHECK(e.topology().at(0, 1) == WanLinkParams{1e7, 1 * kMs, true});
    CHECK(e.next_event_ns() == UINT64_MAX);  // the end: the last values stay
    REQUIRE(e.changes().size() == 4);
    CHECK(e.changes()[2].at_ns == 1500 * kMs);
    CHECK(e.changes()[3].at_ns == 3000 * kMs);

    auto error = [&](const std::string& text) {
        WanProgram q;
        std::string e2;
        CHECK(!wan_parse_series(text, "m.series", base, q, e2));
        return e2;
    };
    CHECK(error("0 0 1 1e6\n") == "m.series:1: a series line needs 5 values (TIME_S A B BW LAT_S) or 6 (... LOSS), got 4");
    CHECK(error("1 0 1 1e6 0.1\n0.5 0 1 1e6 0.1\n") ==
          "m.series:2: time 0.5 goes back (the previous line is at 1.000000 s)");
    CHECK(error("x 0 1 1e6 0.1\n") == "m.series:1: time 'x': expected seconds >= 0");
    CHECK(error("0 1 1 1e6 0.1\n") == "m.series:1: link 1 -> 1: a link joins two different sites");
    CHECK(error("") == "m.series: the series has no lines");
}

TEST_CASE("wan: restart begins the driver and the change clock again", "[wan]") {
    WanProgram p;
    std::string err;
    const WanTopology base = WanTopology::uniform(2, WanLinkParams{});
    REQUIRE(wan_parse_script("forever\nset 0 1 1000 0.1\nsleep 1000\nset 0 1 2000 0.2\nsleep 1000\n", "r.wan", "",
                             base, p, err));
    WanConfig c;
    c.site_of_cluster = {0, 1};
    c.topo = base;
    c.script = p;
    WanEmulator_st e(c, 1, 0);
    e.restart(700 * kMs);  // links came up 700 ms after construction
    REQUIRE(e.changes().size() == 1);
    CHECK(e.changes()[0].at_ns == 0);
    CHECK(e.next_event_ns() == 1700 * kMs);
    e.drive(1700 * kMs);
    CHECK(e.topology().at(0, 1).bw_bytes_per_s == 2000);
    REQUIRE(e.changes().size() == 2);
    CHECK(e.changes()[1].at_ns == 1000 * kMs);
}

TEST_CASE("wan: loss drops frames at the link's rate and counts them per link", "[wan]") {
    WanConfig c = config(3, 0, 0);
    c.topo.at(0, 2).loss = 0.25;
    c.loss_seed = 42;
    WanEmulator_st e(c, 2, 0);
    REQUIRE(e.lossy());
    constexpr int kFrames = 40'000;
    int lost0 = 0, lost1 = 0;
    for (int i = 0; i < kFrames; ++i) {
        lost0 += e.lose(0) ? 1 : 0;
        lost1 += e.lose(1) ? 1 : 0;  // link 1 -> 2 has no loss
    }
    CHECK(lost1 == 0);
    CHECK(e.counters(1, 2).dropped == 0);
    CHECK(e.counters(0, 2).dropped == static_cast<uint64_t>(lost0));
    // binomial(40000, 0.25): sd ~87; 5 sd either way
    CHECK(lost0 > 10'000 - 450);
    CHECK(lost0 < 10'000 + 450);
    CHECK_FALSE(e.lose(2));  // from our own site: never

    // same seed, same decisions; another seed, others
    WanEmulator_st same(c, 2, 0), other([&] { WanConfig o = c; o.loss_seed = 43; return o; }(), 2, 0);
    WanEmulator_st again(c, 2, 0);
    int differ = 0;
    for (int i = 0; i < 1000; ++i) {
        const bool a = same.lose(0);
        CHECK(a == again.lose(0));
        differ += a != other.lose(0) ? 1 : 0;
    }
    CHECK(differ > 0);

    // probability 1 loses everything, 0 (a live change back) nothing and the stage is not lossy
    e.set_link(0, 2, WanLinkParams{0, 0, true, 1.0}, 0);
    for (int i = 0; i < 100; ++i) CHECK(e.lose(0));
    e.set_link(0, 2, WanLinkParams{0, 0, true, 0.0}, 0);
    CHECK_FALSE(e.lossy());
    CHECK_FALSE(e.lose(0));
    CHECK(e.counters(0, 2).dropped == static_cast<uint64_t>(lost0) + 100);
}

TEST_CASE("wan: loss on a relayed path counts on the hop that lost the frame", "[wan]") {
    WanConfig c = config(3, 0, 0);
    c.topo.at(0, 2).present = false;  // 0 -> 2 goes 0 -> 1 -> 2
    c.topo.at(0, 1).loss = 1.0;
    WanEmulator_st e(c, 2, 0);
    CHECK(e.lossy());
    CHECK(e.lose(0));
    CHECK(e.counters(0, 1).dropped == 1);
    CHECK(e.counters(1, 2).dropped == 0);
    CHECK_FALSE(e.lose(1));  // 1 -> 2 directly: no loss
}

TEST_CASE("wan: loss in scripts, scenarios and series; set keeps a link's loss", "[wan]") {
    const WanTopology base = WanTopology::uniform(2, WanLinkParams{1e6, kMs, true});
    WanProgram p;
    std::string err;
    REQUIRE(wan_parse_script("loss_sym 0 1 0.1\nsleep 10\nset 0 1 2000 0.002\nsleep 10\nloss 0 1 0\n", "s.wan", "",
                             base, p, err));
    WanConfig c = config(2, 1e6, kMs);
    c.script = p;
    WanEmulator_st e(c, 1, 0);
    CHECK(e.topology().at(0, 1).loss == 0.1);
    CHECK(e.topology().at(1, 0).loss == 0.1);
    e.drive(10 * kMs);
    CHECK(e.topology().at(0, 1).bw_bytes_per_s == 2000);
    CHECK(e.topology().at(0, 1).loss == 0.1);  // set did not reset it
    e.drive(20 * kMs);
    CHECK(e.topology().at(0, 1).loss == 0);
    CHECK(e.topology().at(1, 0).loss == 0.1);

    // errors name the line and the value
    CHECK_FALSE(wan_parse_script("sleep 1\nloss 0 1 1.5\n", "s.wan", "", base, p, err));
    CHECK(err.find("s.wan:2:") != std::string::npos);
    CHECK(err.find("loss '1.5'") != std::string::npos);
    CHECK_FALSE(wan_parse_script("loss 0 1\n", "s.wan", "", base, p, err));
    CHECK(err.find("s.wan:1: loss needs 3 values") != std::string::npos);
    // the Panda syntax is unchanged: set_sym NAME A B BW LAT
    REQUIRE(wan_parse_script("set_sym one 0 1 1000 0.3\n", "s.wan", "", base, p, err));

    // series: an optional sixth value is the loss; without it the link keeps its loss
    REQUIRE(wan_parse_series("0 0 1 1000 0.01 0.2\n1 0 1 1000 0.01\n", "m.txt", base, p, err));
    WanConfig cs = config(2, 1e6, kMs);
    cs.series = p;
    WanEmulator_st s(cs, 1, 0);
    CHECK(s.topology().at(0, 1).loss == 0.2);
    s.drive(1000 * kMs);
    CHECK(s.topology().at(0, 1).loss == 0.2);
    CHECK_FALSE(wan_parse_series("0 0 1 1000 0.01 -1\n", "m.txt", base, p, err));
    CHECK(err.find("m.txt:1: loss '-1'") != std::string::npos);

    // a scenario may set loss
    char dir[] = "/tmp/iccs-wanloss-XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    const std::string scen = std::string(dir) + "/lossy";
    std::ofstream(scen) << "loss_sym 0 1 0.05\n";
    REQUIRE(wan_parse_script("read lossy\nsleep 5\n", "s.wan", std::string(dir) + "/", base, p, err));
    CHECK(p.scenarios.at(0).at(0, 1).loss == 0.05);
    std::remove(scen.c_str());
    rmdir(dir);

    // live: "A B P"
    uint32_t a = 0, b = 0;
    double loss = 0;
    REQUIRE(wan_parse_loss_values("1 0 0.3", 2, a, b, loss, err));
    CHECK((a == 1 && b == 0 && loss == 0.3));
    CHECK_FALSE(wan_parse_loss_values("0 1 2", 2, a, b, loss, err));
    CHECK(err.find("loss '2'") != std::string::npos);
}
