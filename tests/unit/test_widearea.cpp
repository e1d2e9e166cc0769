// test_widearea.cpp: the wide-area suite's counted messaging (apps/widearea/widearea.hpp, Net and
// Traffic) over the in-process loopback runtime (dsm/testing): what counts as inter-site traffic,
// per link and in total, with exact numbers; the words that carry counters between clusters.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>

#include "loopback_runtime.hpp"
#include "ordered.hpp"
#include "widearea.hpp"

using namespace iccs;
using namespace iccs::widearea;

namespace {

std::atomic<int> g_got{0};
void on_any(RtEndpoint&, const AmMsg&, void*) { g_got.fetch_add(1); }
void on_req(RtEndpoint& self, const AmMsg& m, void* ctx) {
    const char r[7] = "answer";
    static_cast<Net*>(ctx)->reply(self, m.token(), RtBytes{r, 7});
}

const LinkTraffic& link(const Traffic& t, uint16_t a, uint16_t b) { return t.link[size_t{a} * t.sites + b]; }

}  // namespace

TEST_CASE("widearea: traffic counters cross clusters as words", "[widearea]") {
    Traffic t;
    t.sites = 2;
    t.link.assign(4, {});
    t.msgs = 9, t.bytes = 900, t.wan_rpcs = 3, t.wan_rpc_bytes = 300, t.wan_bcasts = 1, t.wan_bcast_bytes = 10;
    t.link[1] = {3, 300, 1, 10};
    Traffic u;
    REQUIRE(u.from_words(t.to_words()));
    CHECK(u.to_words() == t.to_words());
    u.add(t);
    CHECK(u.wan_rpcs == 6);
    CHECK(link(u, 0, 1).rpc_bytes == 600);
    std::vector<uint64_t> w = t.to_words();
    w.pop_back();
    CHECK_FALSE(u.from_words(w));  // a truncated part is refused, not half read
}

TEST_CASE("widearea: Net counts RPCs, replies and broadcasts between sites only", "[widearea]") {
    testing::LoopbackWorld lw(3, 2);
    group::Topology topo;
    std::string err;
    REQUIRE(group::make_topology(3, 2, {0, 0, 1}, topo, err));  // clusters 0 and 1 in site 0, 2 in site 1
    std::vector<std::unique_ptr<Net>> nets;
    for (uint16_t c = 0; c < 3; ++c) {
        nets.push_back(std::make_unique<Net>(lw.runtime(c), topo));
        lw.runtime(c).set_handler(10, on_any, nullptr);
        lw.runtime(c).set_handler(11, on_req, nets.back().get());
    }
    g_got = 0;
    RtEndpoint& ep = lw.runtime(0).endpoint(0);
    Net& n0 = *nets[0];
    const char buf[100] = {};
    REQUIRE(n0.send(ep, RtAddr{1, 1}, 10, RtBytes{buf, 100}, RtBytes{buf, 20}) == RtStatus::kOk);  // same site
    REQUIRE(n0.send(ep, RtAddr{2, 0}, 10, RtBytes{buf, 50}) == RtStatus::kOk);                    // WAN
    REQUIRE(n0.bcast(ep, 10, RtBytes{buf, 10}) == RtStatus::kOk);  // 5 messages, 1 logical, site 1 reached
    std::vector<uint8_t> reply;
    REQUIRE(n0.request(ep, RtAddr{2, kRtService}, 11, RtBytes{buf, 4}, {}, reply, 10'000'000) == RtStatus::kOk);
    CHECK(reply.size() == 7);
    // the messages to compute threads are run by their owners' polls
    for (uint16_t c = 0; c < 3; ++c)
        for (uint16_t t = 0; t < 2; ++t)
            if (!(c == 0 && t == 0)) lw.runtime(c).endpoint(t).poll();
    lw.stop();
    CHECK(g_got.load() == 7);

    const Traffic a = n0.traffic();
    CHECK(a.msgs == 1 + 1 + 5 + 1);
    CHECK(a.bytes == 120 + 50 + 5 * 10 + 4);
    CHECK(a.wan_rpcs == 2);                  // the send to cluster 2 and the request
    CHECK(a.wan_rpc_bytes == 50 + 4);
    CHECK(a.wan_bcasts == 1);                // one WAN message per remote site it reached (one here) ...
    CHECK(a.wan_bcast_bytes == 10);          // ... with its bytes
    CHECK(link(a, 0, 1).rpcs == 2);
    CHECK(link(a, 0, 1).bcasts == 1);
    CHECK(link(a, 1, 0).rpcs == 0);
    const Traffic c = nets[2]->traffic();  // the reply: bytes on its own direction, no RPC
    CHECK(c.wan_rpcs == 0);
    CHECK(c.wan_rpc_bytes == 7);
    CHECK(link(c, 1, 0).rpc_bytes == 7);
    CHECK(nets[1]->traffic().msgs == 0);
}

TEST_CASE("widearea: group/'s collectives and ordered broadcast in the counters", "[widearea]") {
    testing::LoopbackWorld lw(2, 1);
    group::Topology topo;
    std::string err;
    REQUIRE(group::make_topology(2, 1, {}, topo, err));
    Net net(lw.runtime(0), topo);
    group::Counters gc;
    gc.sites = 2;
    gc.link.assign(4, {});
    gc.link[1] = {3, 24, 3};  // 3 WAN messages of a collective, 24 data bytes, site 0 -> 1
    gc.of(group::Coll::kAllreduce).msgs = 5;
    net.add_group(gc);
    group::OrderedCounters oc;
    oc.sent = 4;
    oc.sequenced_here = 2;
    oc.to_site = {{0, 0, 0, 0}, {6, 700, 2, 600}};  // 2 sequenced fan-outs, 4 others (requests, tokens)
    net.add_ordered(oc);
    lw.stop();
    const Traffic t = net.traffic();
    // Counted the study's way: every WAN message of the ordered broadcast is broadcast traffic
    // (the sequencer is part of the broadcast), none an RPC.
    CHECK(t.wan_bcasts == 3 + 6);
    CHECK(t.wan_bcast_bytes == 24 + 700);
    CHECK(t.wan_rpcs == 0);
    CHECK(t.wan_rpc_bytes == 0);
    CHECK(link(t, 0, 1).bcasts == 9);
    CHECK(link(t, 0, 1).rpcs == 0);
}

TEST_CASE("widearea: a broadcast counts one WAN message per site it reaches", "[widearea]") {
    testing::LoopbackWorld lw(3, 1);
    group::Topology topo;
    std::string err;
    REQUIRE(group::make_topology(3, 1, {}, topo, err));  // three sites of one cluster each
    std::vector<std::unique_ptr<Net>> nets;
    for (uint16_t c = 0; c < 3; ++c) {
        nets.push_back(std::make_unique<Net>(lw.runtime(c), topo));
        lw.runtime(c).set_handler(10, on_any, nullptr);
    }
    g_got = 0;
    const char buf[40] = {};
    RtEndpoint& ep = lw.runtime(1).endpoint(0);
    REQUIRE(nets[1]->bcast(ep, 10, RtBytes{buf, 40}) == RtStatus::kOk);
    nets[1]->note_bcast(ep, 8);  // one carried another way: to every other site
    for (uint16_t c : {0, 2}) lw.runtime(c).endpoint(0).poll();
    lw.stop();
    CHECK(g_got.load() == 2);
    const Traffic t = nets[1]->traffic();
    CHECK(t.wan_bcasts == 2 + 2);  // the sums over the links
    CHECK(t.wan_bcast_bytes == 2 * 40 + 2 * 8);
    CHECK(link(t, 1, 0).bcasts == 2);
    CHECK(link(t, 1, 2).bcasts == 2);
    CHECK(link(t, 1, 2).bcast_bytes == 48);
    CHECK(t.wan_rpcs == 0);
}
