// The set-up and what a sub-connection takes after it (issue 37, a protocol reviewer's findings
// 1, 3, 4, 5 and 7): a SYN replayed from an earlier run, or forged, during the set-up cannot
// wedge it (the peer's token is tentative until it echoes our nonce); a restart challenge is 64
// bits, answered once, sent at most once per interval; without a key every sub-connection has its
// own token and every frame after the handshake carries an ack; the echoed timestamp comes only
// from the in-order datagram; a SYN flood costs a bounded number of answers and key set-ups.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "security_link.hpp"

using namespace iccs;
using namespace security_test;

namespace {

bool is_syn(const Frame& f) { return (f[42 + 1] & kSwSyn) != 0; }

// The tsecr of the last frame b queued for a (b's echo of a's timestamps), taken off b's queue.
uint32_t last_tsecr_from_b(Link& l) {
    PktBuf* f[64];
    uint32_t tsecr = 0, n = 0, total = 0;
    while ((n = l.b.tx_take(f, 64)) > 0) {
        for (uint32_t i = 0; i < n; ++i) {
            uint8_t w[4];
            pkt_read(f[i], 42 + offsetof(SlidwinHdr, tsecr), 4, w);
            tsecr = load_be32(w);
            pkt_free(f[i]);
        }
        total += n;
    }
    REQUIRE(total > 0);
    return tsecr;
}

}  // namespace

TEST_CASE("a SYN replayed from an earlier run during the set-up does not wedge it", "[security]") {
    // Both runs start their sequence numbers at the same place and use the same key: only the
    // tokens and the nonces tell them apart. The earlier run's SYNs reach b before a's first SYN
    // and again at every step of the set-up; the set-up still completes with a's token.
    for (const int mode : {0, 1, 2}) {  // no key, MAC, MAC + encryption
        INFO("mode " << mode);
        const SlidwinAuthKey key = test_key(mode == 2);
        SlidwinConfig cfg;
        cfg.random_isn = false;
        cfg.initial_seq = 77;
        if (mode > 0) cfg.auth = &key;
        std::vector<Frame> capture;
        {
            Link run1{cfg};
            run1.record_a_to_b = &capture;
            run1.handshake();
            run1.send_a(5);
            REQUIRE(run1.sink_b.got == 5);
        }
        std::vector<Frame> old_syns;
        for (const Frame& f : capture)
            if (is_syn(f)) old_syns.push_back(f);
        REQUIRE(!old_syns.empty());
        Link run2{cfg};
        for (int i = 0; i < 400 && !(run2.sa->established() && run2.sb->established()); ++i) {
            for (const Frame& f : old_syns) run2.inject(run2.b, run2.pool_b, f);
            run2.step(10'000);
        }
        REQUIRE(run2.sa->established());
        REQUIRE(run2.sb->established());
        REQUIRE(run2.sb->peer_token() == run2.sa->local_token());
        const SlidwinCounters& c = run2.sb->counters();
        if (mode == 0)
            REQUIRE(c.tentative_replaced >= 1);  // the old SYN was tentative, a's replaced it
        else
            REQUIRE(c.drop_replay > 0);  // the same SYN again: its counter was seen under its key
        run2.send_a(10);
        REQUIRE(run2.sink_b.got == 10);
        REQUIRE(run2.sink_b.restarts.empty());
    }
}

TEST_CASE("a forged SYN before the peer's is only tentative: the peer's SYN replaces it", "[security]") {
    Link l{SlidwinConfig{}};
    // A blind forger's SYN reaches b first: b answers it (to a's address) and waits for proof.
    l.inject(l.b, l.pool_b, l.forge(kSwSyn, 4242, 0, 0xf0f0f0f0f0f0f0f0ull, 0, 0, 0x77));
    REQUIRE(l.sb->peer_token() == 0xf0f0f0f0f0f0f0f0ull);
    REQUIRE(!l.sb->peer_confirmed());
    // Its answer goes to a, which drops it (it echoes a nonce a never sent); a's own SYN follows.
    l.handshake();
    REQUIRE(l.sb->peer_token() == l.sa->local_token());
    REQUIRE(l.sb->counters().tentative_replaced == 1);
    l.send_a(3);
    REQUIRE(l.sink_b.got == 3);
}

TEST_CASE("a restart challenge is 64 bits, answered once, and sent at most once per interval", "[security]") {
    Link l{SlidwinConfig{}};
    l.handshake();
    l.send_a(3);
    Link::drop(l.b);
    const uint64_t fresh = 0x0dd0dd0dd0dd0dd0ull;
    const uint32_t isn = 9000;
    const uint64_t nonce = 0xabcdef;
    auto challenge_sent = [&]() {  // the challenge b sent (the test sees what a forger cannot)
        PktBuf* f = nullptr;
        REQUIRE(l.b.tx_take(&f, 1) == 1);
        uint8_t blk[kSlidwinSynBlkLen], hdr[kSlidwinHdrLen];
        pkt_read(f, 42, kSlidwinHdrLen, hdr);
        pkt_read(f, 42 + kSlidwinHdrLen, kSlidwinSynBlkLen, blk);
        pkt_free(f);
        const SlidwinHdr h = load_hdr<SlidwinHdr>(hdr);
        REQUIRE(h.flags == (kSwSyn | kSwAck));
        REQUIRE(h.ack.get() == isn);
        REQUIRE(load_be64(blk + offsetof(SlidwinSynBlk, echo)) == nonce);  // echoes the new SYN
        return load_be64(blk + offsetof(SlidwinSynBlk, nonce));
    };
    l.inject(l.b, l.pool_b, l.forge(kSwSyn, isn, 0, fresh, 0, 0, nonce));
    const uint64_t c1 = challenge_sent();
    REQUIRE(l.sb->counters().restart_challenges == 1);
    // A wrong answer clears it: the right one after it no longer counts.
    l.inject(l.b, l.pool_b, l.forge(kSwSyn | kSwAck, isn, l.sb->iss(), fresh, 0, 0, nonce, c1 ^ 1));
    REQUIRE(l.sb->counters().challenge_failed == 1);
    l.inject(l.b, l.pool_b, l.forge(kSwSyn | kSwAck, isn, l.sb->iss(), fresh, 0, 0, nonce, c1));
    REQUIRE(l.sink_b.restarts.empty());
    REQUIRE(l.b.tx_queued() == 0);  // within the interval: not even a new challenge
    // A flood of SYNs with new tokens within the interval: no challenge at all.
    for (uint64_t t = 1; t <= 1000; ++t) l.inject(l.b, l.pool_b, l.forge(kSwSyn, isn, 0, fresh + t, 0, 0, nonce));
    REQUIRE(l.sb->counters().restart_challenges == 1);
    REQUIRE(l.b.tx_queued() == 0);
    // After the interval the restarted peer's SYN gets a new challenge; echoing it is believed.
    l.now += SlidwinConfig{}.challenge_interval_ns;
    l.inject(l.b, l.pool_b, l.forge(kSwSyn, isn, 0, fresh, 0, 0, nonce));
    const uint64_t c2 = challenge_sent();
    REQUIRE(c2 != c1);
    l.inject(l.b, l.pool_b, l.forge(kSwSyn | kSwAck, isn, l.sb->iss(), fresh, 0, 0, nonce, c2));
    REQUIRE(l.sink_b.restarts.size() == 1);
    REQUIRE(l.sink_b.restarts[0] == fresh);
    Link::drop(l.b);
}

TEST_CASE("without a key, each sub-connection has its own token: one sniffed opens no other", "[security]") {
    SlidwinConfig cfg;
    cfg.run_token = 0x1111222233334444ull;  // as a cluster process sets it: one for all its sub-connections
    Link l{cfg};
    SubConnection* sb1 = l.ep_b->open(1, l.a.config().ip, kPort, 1, l.now);
    SubConnection* sa1 = l.ep_a->open(1, l.b.config().ip, kPort, 1, l.now);
    for (int i = 0; i < 200 && !(sa1->established() && sb1->established()); ++i) l.step();
    REQUIRE(sa1->established());
    l.handshake();
    REQUIRE(l.sa->local_token() != sa1->local_token());
    REQUIRE(l.sa->local_token() == slidwin_subconn_token(cfg.run_token, 0, 0));
    // The token of a's sub-connection 0, as seen on the wire, put on sub-connection 1 of b.
    const uint64_t sniffed = l.sa->local_token();
    const uint64_t got = l.sink_b.got;
    l.inject(l.b, l.pool_b, l.forge(kSwData | kSwAck, sb1->rcv_nxt(), sb1->snd_sent(), sniffed, 100, 0, 0, 0, 0, 1));
    l.ep_b->end_of_burst(l.now);
    REQUIRE(l.sink_b.got == got);
    REQUIRE(sb1->counters().drop_token == 1);
}

TEST_CASE("without a key, every frame after the handshake must carry an ack", "[security]") {
    Link l{SlidwinConfig{}};
    l.handshake();
    l.send_a(5);
    const BState before(l);
    const uint64_t bad = l.sb->counters().rx_bad;
    // In-window data with the right token but no ACK flag (its ack field is then never checked).
    l.inject(l.b, l.pool_b, l.forge(kSwData, l.sb->rcv_nxt(), 0, l.sa->local_token(), 100));
    l.ep_b->end_of_burst(l.now);
    REQUIRE(BState(l) == before);
    REQUIRE(l.sink_b.got == 5);
    REQUIRE(l.sb->counters().rx_bad == bad + 1);
    REQUIRE(l.b.tx_queued() == 0);
    l.send_a(2);
    REQUIRE(l.sink_b.got == 7);
}

TEST_CASE("sack bits beyond what was sent free nothing", "[security]") {
    SlidwinConfig cfg;
    cfg.rcv_buf_datagrams = 4;  // a's window: 4 of b's 8 datagrams go, 4 wait
    Link l{cfg};
    l.handshake();
    for (int i = 0; i < 8; ++i) {
        PktBuf* m = pkt_alloc(l.pool_b);
        std::memset(pkt_append(m, 8), 'a' + i, 8);
        REQUIRE(slidwin_send(*l.sb, m, l.now) == SlidwinSendResult::kOk);
    }
    const uint32_t una = l.sb->snd_sent() - 4;
    REQUIRE(l.sb->snd_nxt() == una + 8);
    // A forged ack (the right token) whose sack names only seqs b has not sent yet: ack + 1 + i
    // for i >= 3 is una + 4 on. Freeing them would lose messages a never received.
    l.inject(l.b, l.pool_b, l.forge(kSwAck, 0, una, l.sa->local_token(), 0, 0, 0, 0, ~0ull << 3));
    l.settle();
    REQUIRE(l.sink_a.got == 8);  // all of them, each once (the sink counts; slidwin checks order)
    REQUIRE(l.sb->unacked() == 0);
    REQUIRE(l.sb->counters().tx_retx == 0);
}

TEST_CASE("a duplicate with an old timestamp does not change the timestamp echoed", "[security]") {
    Link l{SlidwinConfig{}};
    l.handshake();
    l.send_a(5);
    // b's echo now: the tsval of a's last data datagram. A duplicate of an old datagram (the right
    // token, an old tsval) asks for an ack; that ack must echo the same tsval, not the old one
    // (with a wrong echo, a's next round trip would measure from the forged time).
    PktBuf* m = pkt_alloc(l.pool_b);
    std::memcpy(pkt_append(m, 4), "echo", 4);
    REQUIRE(slidwin_send(*l.sb, m, l.now) == SlidwinSendResult::kOk);
    const uint32_t echoed = last_tsecr_from_b(l);
    REQUIRE(echoed != 0);
    l.inject(l.b, l.pool_b, l.forge(kSwData | kSwAck, l.sb->rcv_nxt() - 1, l.sb->snd_sent(), l.sa->local_token(), 100,
                                    echoed - 5'000'000));
    // ... and so must an out-of-order datagram beyond a gap (not the in-order one).
    l.inject(l.b, l.pool_b, l.forge(kSwData | kSwAck, l.sb->rcv_nxt() + 3, l.sb->snd_sent(), l.sa->local_token(), 100,
                                    echoed + 5'000'000));
    l.ep_b->end_of_burst(l.now);
    REQUIRE(last_tsecr_from_b(l) == echoed);
}

TEST_CASE("a SYN flood costs a bounded number of answers and key set-ups, and never an abort", "[security]") {
    for (const int mode : {0, 1}) {  // no key, MAC
        INFO("mode " << mode);
        const SlidwinAuthKey key = test_key(false);
        SlidwinConfig cfg;
        if (mode == 1) cfg.auth = &key;
        Link l{cfg};
        // 20,000 SYNs with new tokens (with a key: a made-up block) at one instant, before the
        // handshake and after it.
        auto flood = [&](uint64_t base) {
            for (uint64_t i = 0; i < 10'000; ++i)
                l.inject(l.b, l.pool_b,
                         l.forge(static_cast<uint8_t>(kSwSyn | (mode == 1 ? kSwAuth : 0)), 5, 0, base + i, 0, 0, i + 1));
        };
        Link::drop(l.b);  // b's own first SYN
        flood(0x100000);
        const uint64_t answers = l.b.tx_queued();
        const SlidwinCounters& c = l.sb->counters();
        const uint32_t burst = cfg.handshake_burst;
        REQUIRE(answers <= burst);
        REQUIRE(c.key_setups <= burst + 2);  // the budget, plus our own SYN key
        REQUIRE(c.drop_handshake_rate >= 10'000 - burst);
        Link::drop(l.b);
        // The budget refills with time: the real SYNs (retried by a's timer) get through.
        for (int i = 0; i < 2000 && !(l.sa->established() && l.sb->established()); ++i) l.step(10'000);
        REQUIRE(l.sa->established());
        REQUIRE(l.sb->established());
        flood(0x900000);
        REQUIRE(l.b.tx_queued() <= burst);
        REQUIRE(c.restart_challenges <= 1);
        Link::drop(l.b);
        l.send_a(5);
        REQUIRE(l.sink_b.got == 5);
        REQUIRE(l.sink_b.restarts.empty());
    }
}
