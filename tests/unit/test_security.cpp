// Only the run's own peers get in (issue 17): forged datagrams handed to the stack with the right
// addresses, ports and sub-connection id, but a wrong run token, a stale or far-ahead sequence
// number, an ack of what was never sent, or replayed from an earlier run's capture, deliver
// nothing, change no state (the sub-connection prints the same, nothing is sent in answer) and
// are counted by reason; a peer that restarts is reported once and never merged.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "security_link.hpp"

using namespace iccs;
using namespace security_test;


TEST_CASE("tokens and initial sequence numbers are random and learned in the handshake", "[security]") {
    Link l{SlidwinConfig{}};
    Link m{SlidwinConfig{}};
    REQUIRE(l.sa->local_token() != 0);
    REQUIRE(l.sa->local_token() != l.sb->local_token());
    REQUIRE(l.sa->local_token() != m.sa->local_token());
    REQUIRE(l.sa->iss() != m.sa->iss());  // 1 in 2^32 to fail
    // Before the handshake a message waits: nothing is sent the peer could not check.
    PktBuf* msg = pkt_alloc(l.pool_a);
    std::memcpy(pkt_append(msg, 5), "early", 5);
    REQUIRE(slidwin_send(*l.sa, msg, l.now) == SlidwinSendResult::kOk);
    REQUIRE(l.sa->counters().tx_data == 0);
    l.handshake();
    l.settle();
    REQUIRE(l.sb->peer_token() == l.sa->local_token());
    REQUIRE(l.sa->peer_token() == l.sb->local_token());
    REQUIRE(l.sink_b.got == 1);
    REQUIRE(l.sa->counters().tx_retx == 0);
    REQUIRE(l.sb->rcv_nxt() == l.sa->iss() + 1);
}

TEST_CASE("forged frames deliver nothing, change no state and are counted by reason", "[security]") {
    Link l{SlidwinConfig{}};
    // Before the handshake: nothing but a SYN is taken.
    l.inject(l.b, l.pool_b, l.forge(kSwData | kSwAck, 0, 0, 0x1234, 100));
    REQUIRE(l.sb->counters().drop_unsynced == 1);
    l.handshake();
    l.send_a(100);
    REQUIRE(l.sink_b.got == 100);
    const uint64_t token = l.sa->local_token();
    const uint32_t next = l.sb->rcv_nxt();
    const uint32_t b_sent = l.sb->snd_sent();
    const BState before(l);
    struct Case {
        const char* what;
        Frame f;
        uint64_t SlidwinCounters::*counter;
    };
    const std::vector<Case> cases = {
        {"wrong token, in-window seq", l.forge(kSwData | kSwAck, next, b_sent, token ^ 1, 100), &SlidwinCounters::drop_token},
        {"no token, pure ack", l.forge(kSwAck, 0, b_sent, 0), &SlidwinCounters::drop_token},
        {"stale seq", l.forge(kSwData | kSwAck, next - 5000, b_sent, token, 100), &SlidwinCounters::drop_out_of_window},
        {"far-ahead seq", l.forge(kSwData | kSwAck, next + 100000, b_sent, token, 100), &SlidwinCounters::drop_out_of_window},
        {"seq just past the buffer", l.forge(kSwData | kSwAck, next + 1024, b_sent, token, 100), &SlidwinCounters::drop_out_of_window},
        {"ack of what was never sent", l.forge(kSwAck, 0, b_sent + 10, token), &SlidwinCounters::drop_out_of_window},
        {"ack far behind", l.forge(kSwAck, 0, b_sent - 100000, token), &SlidwinCounters::drop_out_of_window},
        {"data with a bad ack", l.forge(kSwData | kSwAck, next, b_sent + 10, token, 100), &SlidwinCounters::drop_out_of_window},
    };
    for (const Case& c : cases) {
        INFO(c.what);
        const uint64_t was = l.sb->counters().*c.counter;
        l.inject(l.b, l.pool_b, c.f);
        l.ep_b->end_of_burst(l.now);
        REQUIRE(l.sb->counters().*c.counter == was + 1);
        REQUIRE(BState(l) == before);
        REQUIRE(l.b.tx_queued() == 0);  // no answer: an ack would be a change too
    }
    // The link still works, and the forgeries left nothing behind.
    l.send_a(10);
    REQUIRE(l.sink_b.got == 110);
    REQUIRE(l.sb->counters().rx_bad == 0);
}

TEST_CASE("frames replayed from an earlier run's capture are refused", "[security]") {
    // Both runs start their sequence numbers at the same place, so only the token tells them apart.
    SlidwinConfig cfg;
    cfg.random_isn = false;
    cfg.initial_seq = 77;
    std::vector<Frame> capture;
    {
        Link run1{cfg};
        run1.record_a_to_b = &capture;
        run1.handshake();
        run1.send_a(50);
        REQUIRE(run1.sink_b.got == 50);
    }
    REQUIRE(capture.size() > 50);
    Link run2{cfg};
    run2.handshake();
    run2.send_a(20);
    REQUIRE(run2.sink_b.got == 20);
    const BState before(run2);
    uint64_t syns = 0;
    for (const Frame& f : capture) {
        syns += (f[14 + 20 + 8 + 1] & kSwSyn) != 0;
        run2.inject(run2.b, run2.pool_b, f);
    }
    run2.ep_b->end_of_burst(run2.now);
    REQUIRE(BState(run2) == before);
    REQUIRE(run2.sb->counters().drop_token == capture.size() - syns);
    // An old SYN has another token: b asks for proof once (a challenge to the real peer, which
    // holds the right token and drops it) and believes nothing; the other old SYNs meet the
    // challenge rate limit, and the old SYN|ACKs answer it wrongly (which clears it).
    const SlidwinCounters& c = run2.sb->counters();
    REQUIRE(c.restart_challenges >= 1);
    REQUIRE(c.restart_challenges + c.drop_handshake_rate + c.challenge_failed == syns);
    run2.settle();
    REQUIRE(run2.sink_b.restarts.empty());
    REQUIRE(run2.sb->established());
    run2.send_a(5);
    REQUIRE(run2.sink_b.got == 25);
}

TEST_CASE("a forged SYN with a new token does not pass for a restart", "[security]") {
    Link l{SlidwinConfig{}};
    l.handshake();
    l.send_a(10);
    const uint64_t fake = 0x5eed5eed5eed5eedull;
    l.inject(l.b, l.pool_b, l.forge(kSwSyn, 1234, 0, fake));
    REQUIRE(l.sb->counters().restart_challenges == 1);
    // The forger cannot see the challenge (64 bits): a guessed answer is refused, and clears it.
    l.inject(l.b, l.pool_b, l.forge(kSwSyn | kSwAck, 1234, l.sb->iss(), fake, 0, 0, 0x5eed, 0x1234));
    REQUIRE(l.sb->counters().challenge_failed == 1);
    for (uint32_t guess = 0; guess < 64; ++guess)
        l.inject(l.b, l.pool_b, l.forge(kSwSyn | kSwAck, 1234, l.sb->iss(), fake, 0, 0, 0x5eed, guess));
    // Each is a new SYN of an unknown token now: within the challenge interval, dropped unanswered.
    REQUIRE(l.sb->counters().drop_handshake_rate == 64);
    REQUIRE(l.sb->counters().restart_challenges == 1);
    l.settle();
    REQUIRE(l.sink_b.restarts.empty());
    REQUIRE(l.sb->counters().peer_restarted == 0);
    l.send_a(10);
    REQUIRE(l.sink_b.got == 20);
}

TEST_CASE("a restarted peer is reported once and never merged into the old sub-connection", "[security]") {
    Link l{SlidwinConfig{}};
    l.handshake();
    l.send_a(10);
    const uint64_t old_token = l.sa->local_token();
    l.open_a();  // a's end starts again: a new token, a new ISN
    REQUIRE(l.sa->local_token() != old_token);
    for (int i = 0; i < 200 && l.sink_b.restarts.empty(); ++i) l.step();
    REQUIRE(l.sink_b.restarts.size() == 1);
    REQUIRE(l.sink_b.restarts[0] == l.sa->local_token());
    REQUIRE(l.sb->restarted());
    REQUIRE(l.sb->counters().peer_restarted == 1);
    // What the new incarnation sends is not taken by the old sub-connection.
    const uint64_t dropped = l.sb->counters().drop_token;
    for (int i = 0; i < 5; ++i) {
        PktBuf* m = pkt_alloc(l.pool_a);
        std::memcpy(pkt_append(m, 4), "new!", 4);
        if (slidwin_send(*l.sa, m, l.now) != SlidwinSendResult::kOk) pkt_free(m);
    }
    for (int i = 0; i < 30; ++i) l.step(10'000'000);  // its SYN timer fires: SYN|ACKs, all refused
    REQUIRE(l.sink_b.got == 10);
    REQUIRE(l.sink_b.restarts.size() == 1);
    REQUIRE(l.sb->counters().drop_token > dropped);
}


TEST_CASE("with a key every datagram is authenticated, and a forged or altered one is dropped", "[security]") {
    for (const bool encrypt : {false, true}) {
        INFO("encrypt " << encrypt);
        const SlidwinAuthKey key = test_key(encrypt);
        SlidwinConfig cfg;
        cfg.auth = &key;
        std::vector<Frame> wire;
        Link l{cfg};
        l.record_a_to_b = &wire;
        l.handshake();
        l.send_a(30);
        REQUIRE(l.sink_b.got == 30);
        REQUIRE(l.sb->counters().drop_auth == 0);
        // Every frame carries the auth block; the payload is readable on the wire only without encrypt.
        bool plain_seen = false;
        for (const Frame& f : wire) {
            REQUIRE(f.size() >= 42 + kSlidwinHdrLen + kSlidwinAuthLen);
            REQUIRE((f[42 + 1] & kSwAuth) != 0);
            plain_seen |= contains(f, "aaaaaaaaaaaaaaaa");
        }
        REQUIRE(plain_seen == !encrypt);
        // A data frame b has not seen yet (its counter fresh), with one bit flipped anywhere after
        // the IP/UDP headers: each copy must fail the tag (a copy of one b has seen is a replay).
        l.record_a_to_b = nullptr;
        PktBuf* last = pkt_alloc(l.pool_a);
        std::memcpy(pkt_append(last, 100), std::string(100, 'z').data(), 100);
        REQUIRE(slidwin_send(*l.sa, last, l.now) == SlidwinSendResult::kOk);
        PktBuf* qf = nullptr;
        REQUIRE(l.a.tx_take(&qf, 1) == 1);
        const Frame data = Link::bytes(qf);
        pkt_free(qf);
        REQUIRE((data[42 + 1] & kSwData) != 0);
        const BState before(l);
        uint64_t flips = 0;
        for (size_t at = 42; at < data.size(); at += 7) {
            if (at >= 42 + 32 && at < 42 + 40) continue;  // the token: drop_token, counted apart
            Frame f = data;
            f[at] ^= 0x10;
            // keep the UDP checksum right, so the frame reaches slidwin (a forger recomputes it)
            f[40] = f[41] = 0;  // UDP checksum 0 would be "none": recompute instead
            uint32_t sum = 0x0a00 + 0x0001 + 0x0a00 + 0x0002 + 17 + (f.size() - 34);
            for (size_t i = 34; i < f.size(); i += 2) sum += (f[i] << 8) | (i + 1 < f.size() ? f[i + 1] : 0);
            while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
            const uint16_t c = static_cast<uint16_t>(~sum) == 0 ? 0xffff : static_cast<uint16_t>(~sum);
            f[40] = static_cast<uint8_t>(c >> 8), f[41] = static_cast<uint8_t>(c);
            l.inject(l.b, l.pool_b, f);
            ++flips;
        }
        l.ep_b->end_of_burst(l.now);
        REQUIRE(l.b.counters().drop_udp_csum == 0);
        // A flip in the subconn field sends the frame to no sub-connection; one in the counter may
        // name a counter b has seen (a replay); the rest fail the tag.
        const uint64_t replays = l.sb->counters().drop_replay;
        REQUIRE(l.sb->counters().drop_auth + replays + l.ep_b->drop_unknown_subconn() == flips);
        REQUIRE(l.sb->counters().drop_auth >= flips - 3);
        // Without the auth block, or with the flag but a made-up tag: dropped too.
        const uint64_t auth_drops = l.sb->counters().drop_auth;
        l.inject(l.b, l.pool_b, l.forge(kSwData | kSwAck, l.sb->rcv_nxt(), l.sb->snd_sent(), l.sa->local_token(), 100));
        l.inject(l.b, l.pool_b, l.forge(kSwAuth | kSwData | kSwAck, l.sb->rcv_nxt(), l.sb->snd_sent(),
                                        l.sa->local_token(), 100));
        l.ep_b->end_of_burst(l.now);
        REQUIRE(l.sb->counters().drop_auth == auth_drops + 2);
        REQUIRE(BState(l) == before);
        REQUIRE(l.b.tx_queued() == 0);
        l.inject(l.b, l.pool_b, data);  // the frame as sent: taken
        l.ep_b->end_of_burst(l.now);
        REQUIRE(l.sink_b.got == 31);
        l.send_a(5);
        REQUIRE(l.sink_b.got == 36);
    }
}

TEST_CASE("authenticated and encrypted messages survive loss, duplication and reordering", "[security]") {
    // Retransmissions re-seal the stored datagram (a new counter; with encrypt, the old
    // ciphertext is undone first): every message arrives intact, exactly once, in order.
    for (const bool encrypt : {false, true}) {
        INFO("encrypt " << encrypt);
        const SlidwinAuthKey key = test_key(encrypt);
        HeapPktPool pa(8192, 2048), pb(8192, 2048);
        Stack a(mem_wire_host(1), pa), b(mem_wire_host(2), pb);
        a.arp().add_static(b.config().ip, b.config().mac);
        b.arp().add_static(a.config().ip, a.config().mac);
        WireImpairment imp;
        imp.drop = 0.1;
        imp.duplicate = 0.05;
        imp.reorder_window = 8;
        imp.seed = 17;
        MemWire wire(a, b, imp);
        TimerWheel wa(10'000, 1024, 0), wb(10'000, 1024, 0);
        struct Check : SlidwinSink {
            uint64_t next = 0, bad = 0;
            bool on_message(SubConnection&, PktBuf* m) override {
                std::vector<uint8_t> v(m->pkt_len);
                pkt_read(m, 0, m->pkt_len, v.data());
                uint64_t i = ~0ull;
                if (v.size() >= 8) std::memcpy(&i, v.data(), 8);
                bool ok = i == next && v.size() == 8 + i % 3000;
                for (size_t j = 8; j < v.size() && ok; ++j) ok = v[j] == static_cast<uint8_t>(j + i);
                bad += !ok;
                ++next;
                pkt_free(m);
                return true;
            }
        } sa, sb;
        SlidwinConfig cfg;
        cfg.auth = &key;
        SlidwinEndpoint ea(a, wa, kPort, cfg, sa), eb(b, wb, kPort, cfg, sb);
        SubConnection* ca = ea.open(0, b.config().ip, kPort, 0, 0);
        SubConnection* cb = eb.open(0, a.config().ip, kPort, 0, 0);
        const uint64_t n = 3000;
        uint64_t sent = 0, now = 0;
        std::vector<uint8_t> buf(8 + 3000);
        for (int s = 0; s < 3'000'000 && sb.next < n; ++s) {
            while (sent < n && ca->send_space() > 0) {
                const uint32_t size = 8 + static_cast<uint32_t>(sent % 3000);  // some take IP fragments
                std::memcpy(buf.data(), &sent, 8);
                for (uint32_t j = 8; j < size; ++j) buf[j] = static_cast<uint8_t>(j + sent);
                PktBuf* m = pkt_alloc(pa);
                if (m == nullptr) break;
                if (!pkt_write(m, pa, buf.data(), size)) {
                    pkt_free(m);
                    break;
                }
                REQUIRE(slidwin_send(*ca, m, now) == SlidwinSendResult::kOk);
                ++sent;
            }
            if (wire.pump(now) == 0) wire.pump(now, true);
            now += 1'000;
            wa.advance(now);
            wb.advance(now);
            a.timers(now);
            b.timers(now);
        }
        REQUIRE(sb.next == n);
        REQUIRE(sb.bad == 0);
        REQUIRE(ca->counters().tx_retx > 0);
        REQUIRE(cb->counters().drop_auth == 0);
        REQUIRE(ca->counters().drop_auth == 0);
    }
}

TEST_CASE("floods stay within the documented caps: fragments, out-of-order data", "[security]") {
    // Caps (stack/README.md, "Caps"): reassembly holds at most max_datagrams partial datagrams and
    // max_bytes of fragments; a sub-connection holds at most rcv_buf_datagrams datagrams beyond
    // what its user took, and drops anything further out.
    SlidwinConfig cfg;
    cfg.rcv_buf_datagrams = 64;
    Link l{cfg};
    l.handshake();
    l.send_a(5);
    const uint32_t base_in_use = l.pool_b.in_use();
    // 1. 5000 first fragments of 5000 datagrams (from a's address; they never complete).
    const ReassemblyConfig& rc = l.b.config().reass;
    for (uint32_t i = 0; i < 5000; ++i) {
        Frame f = l.forge(kSwData | kSwAck, l.sb->rcv_nxt(), l.sb->snd_sent(), l.sa->local_token(), 600);
        // make it a first fragment (MF, offset 0, id i) of a larger datagram: fix the IPv4 header
        f[14 + 4] = static_cast<uint8_t>(i >> 8), f[14 + 5] = static_cast<uint8_t>(i);
        f[14 + 6] = 0x20, f[14 + 7] = 0;  // MF
        f[14 + 10] = f[14 + 11] = 0;
        uint32_t sum = 0;
        for (int k = 0; k < 20; k += 2) sum += (f[14 + k] << 8) | f[14 + k + 1];
        while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
        f[14 + 10] = static_cast<uint8_t>(~sum >> 8), f[14 + 11] = static_cast<uint8_t>(~sum);
        l.inject(l.b, l.pool_b, f);
        REQUIRE(l.pool_b.in_use() <= base_in_use + rc.max_datagrams);
    }
    REQUIRE(l.b.counters().drop_reass_cap >= 5000 - rc.max_datagrams);
    // After the reassembly timeout the partial datagrams are gone.
    for (int i = 0; i < 20; ++i) l.step(rc.timeout_ns / 10);
    REQUIRE(l.pool_b.in_use() <= base_in_use);
    REQUIRE(l.b.counters().drop_reass_timeout > 0);
    // 2. Out-of-order data from an insider (right token): at most rcv_buf_datagrams held.
    const uint32_t next = l.sb->rcv_nxt();
    uint64_t held_max = 0;
    for (uint32_t i = 1; i < 5000; ++i) {
        l.inject(l.b, l.pool_b,
                 l.forge(kSwData | kSwAck, next + i, l.sb->snd_sent(), l.sa->local_token(), 200));
        Link::drop(l.b);  // b's acks (they would only tell a about seqs it never sent)
        held_max = std::max<uint64_t>(held_max, l.pool_b.in_use() - std::min(l.pool_b.in_use(), base_in_use));
    }
    l.ep_b->end_of_burst(l.now);
    REQUIRE(held_max == cfg.rcv_buf_datagrams - 1);  // next + 1 .. next + 63: the window less the gap
    REQUIRE(l.sb->counters().drop_out_of_window >= 5000 - cfg.rcv_buf_datagrams);
    REQUIRE(l.sink_b.got == 5);  // the gap at `next` holds everything back
    // The real sender fills the gap: the held ones are delivered (they were in the window).
    l.send_a(1);
    REQUIRE(l.sink_b.got == 5 + cfg.rcv_buf_datagrams);
}

TEST_CASE("first fragments from spoofed sources do not evict a peer's partial datagram", "[security]") {
    // Reassembly quotas (issue 37): a's partial datagram counts against a's quota (a is a
    // configured peer of b: a static ARP entry); 5000 first fragments from 5000 other sources
    // share the strangers' small quota and evict only each other.
    Link l{SlidwinConfig{}};
    l.handshake();
    l.send_a(2);
    PktBuf* m = pkt_alloc(l.pool_a);
    const std::string text(3000, 'R');
    REQUIRE(pkt_write(m, l.pool_a, text.data(), 3000));
    REQUIRE(slidwin_send(*l.sa, m, l.now) == SlidwinSendResult::kOk);
    PktBuf* f[4];
    REQUIRE(l.a.tx_take(f, 4) == 3);  // three fragments at MTU 1500
    std::vector<Frame> frags;
    for (int i = 0; i < 3; ++i) {
        frags.push_back(Link::bytes(f[i]));
        pkt_free(f[i]);
    }
    l.inject(l.b, l.pool_b, frags[0]);
    l.inject(l.b, l.pool_b, frags[1]);
    const ReassemblyConfig& rc = l.b.config().reass;
    for (uint32_t i = 0; i < 5000; ++i) {
        Frame g = l.forge(kSwData | kSwAck, l.sb->rcv_nxt(), l.sb->snd_sent(), l.sa->local_token(), 600);
        g[14 + 4] = static_cast<uint8_t>(i >> 8), g[14 + 5] = static_cast<uint8_t>(i);  // id
        g[14 + 6] = 0x20, g[14 + 7] = 0;                                                   // MF, offset 0
        g[14 + 12] = 10, g[14 + 13] = 9, g[14 + 14] = static_cast<uint8_t>(i >> 8),        // source 10.9.x.y
            g[14 + 15] = static_cast<uint8_t>(i);
        g[14 + 10] = g[14 + 11] = 0;
        uint32_t sum = 0;
        for (int k = 0; k < 20; k += 2) sum += (g[14 + k] << 8) | g[14 + k + 1];
        while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
        g[14 + 10] = static_cast<uint8_t>(~sum >> 8), g[14 + 11] = static_cast<uint8_t>(~sum);
        l.inject(l.b, l.pool_b, g);
    }
    REQUIRE(l.b.counters().drop_reass_cap >= 5000 - rc.max_datagrams / 8);
    REQUIRE(l.b.reassembler().datagrams_held() <= 1 + rc.max_datagrams / 8);
    l.inject(l.b, l.pool_b, frags[2]);  // a's datagram completes
    l.ep_b->end_of_burst(l.now);
    REQUIRE(l.sink_b.got == 3);
}
