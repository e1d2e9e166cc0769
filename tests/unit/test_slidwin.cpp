// slidwin between two stacks over the in-memory wire: exactly-once in-order delivery under loss,
// duplication, reordering and corruption; no retransmission without loss; flow control.
#include <catch2/catch.hpp>
#include <array>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "mem_wire.hpp"
#include "slidwin_endpoint.hpp"

using namespace iccs;

namespace {

StackConfig host(uint8_t last) { return mem_wire_host(last); }

// Message i: 8 bytes of i, then bytes derived from i; its size is drawn from a seeded generator.
uint32_t msg_size(uint64_t i, uint32_t max_size) {
    std::mt19937_64 g(i * 0x9e3779b97f4a7c15ull);
    // mostly small, some that need IP fragments
    return (g() % 16 == 0) ? 8 + static_cast<uint32_t>(g() % max_size) : 8 + static_cast<uint32_t>(g() % 1400);
}

PktBuf* make_msg(PktPool& pool, uint64_t i, uint32_t max_size) {
    const uint32_t n = msg_size(i, max_size);
    PktBuf* p = pkt_alloc(pool);
    if (p == nullptr) return nullptr;
    uint8_t buf[256];
    std::memcpy(buf, &i, 8);
    uint32_t done = 0;
    while (done < n) {
        const uint32_t k = std::min<uint32_t>(n - done, sizeof buf);
        for (uint32_t j = (done == 0 ? 8 : 0); j < k; ++j) buf[j] = static_cast<uint8_t>((done + j) * 7 + i);
        if (!pkt_write(p, pool, buf, k)) {
            pkt_free(p);
            return nullptr;
        }
        done += k;
    }
    return p;
}

// Checks each message it is given is the next one, byte for byte; can be made slow (a bounded
// queue drained by the test) to exercise flow control.
struct Verifier : SlidwinSink {
    uint64_t next = 0;
    uint64_t bad = 0;
    uint32_t max_size = 1400;
    size_t queue_cap = 0;  // 0: consume at once
    std::deque<PktBuf*> queue;
    bool on_message(SubConnection&, PktBuf* m) override {
        if (queue_cap > 0) {
            if (queue.size() >= queue_cap) return false;
            queue.push_back(m);
            return true;
        }
        check(m);
        return true;
    }
    void check(PktBuf* m) {
        uint64_t i = ~0ull;
        pkt_read(m, 0, 8, &i);
        bool ok = i == next && m->pkt_len == msg_size(next, max_size);
        if (ok) {
            std::vector<uint8_t> v(m->pkt_len);
            pkt_read(m, 0, m->pkt_len, v.data());
            for (uint32_t j = 8; j < v.size() && ok; ++j) ok = v[j] == static_cast<uint8_t>(j * 7 + i);
        }
        if (!ok) ++bad;
        ++next;
        pkt_free(m);
    }
    void consume(size_t k) {
        while (k-- > 0 && !queue.empty()) {
            check(queue.front());
            queue.pop_front();
        }
    }
    ~Verifier() override {
        for (PktBuf* m : queue) pkt_free(m);
    }
};

struct Pair {
    HeapPktPool pool_a, pool_b;
    Stack a{host(1), pool_a}, b{host(2), pool_b};
    MemWire wire;
    TimerWheel wheel_a{10'000, 1024, 0}, wheel_b{10'000, 1024, 0};
    Verifier sink_a, sink_b;
    SlidwinEndpoint ep_a, ep_b;
    SubConnection* sa;
    SubConnection* sb;
    uint64_t now = 0;

    // pool_bufs: buffers of each end's pool (the sweeps below build thousands of pairs).
    Pair(const WireImpairment& imp, const SlidwinConfig& cfg, uint32_t pool_bufs = 16384)
        : pool_a(pool_bufs, 2048),
          pool_b(pool_bufs, 2048),
          wire(a, b, imp),
          ep_a(a, wheel_a, 9410, cfg, sink_a),
          ep_b(b, wheel_b, 9410, cfg, sink_b) {
        a.arp().add_static(b.config().ip, b.config().mac);
        b.arp().add_static(a.config().ip, a.config().mac);
        sa = ep_a.open(0, b.config().ip, 9410, 0, 0);
        sb = ep_b.open(0, a.config().ip, 9410, 0, 0);
    }

    // Step until both ends finished the handshake (SYN, SYN|ACK: two trips over the wire).
    void handshake() {
        for (int s = 0; s < 1000 && !(sa->established() && sb->established()); ++s) step(1'000);
        REQUIRE(sa->established());
        REQUIRE(sb->established());
    }

    // One step of "time": move frames, run timers.
    void step(uint64_t dt_ns) {
        if (wire.pump(now) == 0) wire.pump(now, true);  // a quiet wire lets held frames out
        now += dt_ns;
        wheel_a.advance(now);
        wheel_b.advance(now);
        a.timers(now);
        b.timers(now);
    }

    // Send n messages a -> b, stepping until all are delivered or the step budget runs out.
    void run(uint64_t n, uint64_t max_steps, uint32_t max_size, size_t consume_per_step = 0) {
        sink_b.max_size = max_size;
        uint64_t sent = 0;
        PktBuf* pending = nullptr;
        for (uint64_t s = 0; s < max_steps && sink_b.next < n; ++s) {
            while (sent < n) {
                if (pending == nullptr) pending = make_msg(pool_a, sent, max_size);
                if (pending == nullptr) break;  // pool empty: wait for acks to free buffers
                if (slidwin_send(*sa, pending, now) != SlidwinSendResult::kOk) break;
                pending = nullptr;
                ++sent;
                if (sa->send_space() == 0) break;
            }
            step(1'000);
            if (consume_per_step > 0) {
                sink_b.consume(consume_per_step);
                slidwin_deliver_pending(*sb, now);
            }
        }
        if (pending != nullptr) pkt_free(pending);
        // let the last acks arrive so the sender holds nothing
        for (int s = 0; s < 100000 && sa->unacked() > 0; ++s) step(1'000);
    }
};

}  // namespace

TEST_CASE("1,000,000 messages arrive exactly once and in order over a lossy, duplicating, reordering, "
          "corrupting wire",
          "[slidwin][reliability]") {
    // Sizes 8..1407 bytes: one frame each, so every flipped bit is caught by a checksum (a single
    // bit error always changes a one's-complement sum). Fragmented datagrams get their own test
    // below: there two flips in different fragments of one datagram can cancel in the 16-bit
    // UDP checksum (same bit lane, opposite directions), which no checksum of that width avoids.
    WireImpairment imp;
    imp.drop = 0.10;
    imp.duplicate = 0.05;
    imp.reorder_window = 64;
    imp.corrupt = 0.01;
    imp.seed = 2026;
    SlidwinConfig cfg;
    cfg.snd_buf_datagrams = 256;
    cfg.rcv_buf_datagrams = 256;
    const uint64_t n = 1'000'000;
    Pair p(imp, cfg);
    p.run(n, 50'000'000, 1400);
    INFO(p.sa->to_string() << " / " << p.sb->to_string());
    REQUIRE(p.sink_b.next == n);
    REQUIRE(p.sink_b.bad == 0);
    REQUIRE(p.sb->counters().delivered == n);
    REQUIRE(p.sb->counters().rx_data == n);  // each accepted exactly once
    const auto& w = p.wire.counters();
    REQUIRE(w.dropped > 0);
    REQUIRE(w.duplicated > 0);
    REQUIRE(w.corrupted > 0);
    REQUIRE(w.reordered > 0);
    REQUIRE(p.sb->counters().rx_dup > 0);
    const auto& cb = p.b.counters();
    REQUIRE(cb.drop_udp_csum + cb.drop_ip_csum > 0);
    REQUIRE(p.sa->counters().tx_fast_retx > 0);
    REQUIRE(p.sa->counters().tx_rto_retx > 0);
}

TEST_CASE("100,000 messages up to 16 KiB (IP fragments) arrive exactly once and in order over a lossy, "
          "duplicating, reordering wire",
          "[slidwin][reliability]") {
    WireImpairment imp;
    imp.drop = 0.05;
    imp.duplicate = 0.05;
    imp.reorder_window = 64;
    imp.seed = 1997;
    SlidwinConfig cfg;
    cfg.snd_buf_datagrams = 256;
    cfg.rcv_buf_datagrams = 256;
    const uint64_t n = 100'000;
    Pair p(imp, cfg);
    p.run(n, 50'000'000, 16'000);
    INFO(p.sa->to_string() << " / " << p.sb->to_string());
    REQUIRE(p.sink_b.next == n);
    REQUIRE(p.sink_b.bad == 0);
    REQUIRE(p.sb->counters().rx_data == n);
    REQUIRE(p.b.counters().ip_reass_ok > 0);
    REQUIRE(p.b.counters().ip_reass_dup > 0);
}

TEST_CASE("without loss nothing is retransmitted and acks are delayed and piggy-backed", "[slidwin]") {
    SlidwinConfig cfg;
    Pair p(WireImpairment{}, cfg);
    p.run(100'000, 10'000'000, 1400);
    REQUIRE(p.sink_b.next == 100'000);
    REQUIRE(p.sink_b.bad == 0);
    REQUIRE(p.sa->counters().tx_retx == 0);
    REQUIRE(p.sa->counters().rto_expired == 0);
    REQUIRE(p.sb->counters().rx_dup == 0);
    // delayed acks: about one pure ack per ack_every datagrams, never one per datagram
    REQUIRE(p.sb->counters().tx_ack <= 100'000 / 2 + 100);
    REQUIRE(p.sb->counters().tx_ack > 0);
}

TEST_CASE("both directions at once: acks ride on data", "[slidwin]") {
    Pair p(WireImpairment{}, SlidwinConfig{});
    const uint64_t n = 20'000;
    uint64_t sent_a = 0, sent_b = 0;
    for (int s = 0; s < 1'000'000 && (p.sink_a.next < n || p.sink_b.next < n); ++s) {
        if (sent_a < n && p.sa->send_space() > 0 &&
            slidwin_send(*p.sa, make_msg(p.pool_a, sent_a, 1400), p.now) == SlidwinSendResult::kOk)
            ++sent_a;
        if (sent_b < n && p.sb->send_space() > 0 &&
            slidwin_send(*p.sb, make_msg(p.pool_b, sent_b, 1400), p.now) == SlidwinSendResult::kOk)
            ++sent_b;
        p.step(1'000);
    }
    REQUIRE(p.sink_a.next == n);
    REQUIRE(p.sink_b.next == n);
    REQUIRE(p.sink_a.bad + p.sink_b.bad == 0);
    // With data flowing both ways, most acks are carried by data, not sent alone.
    REQUIRE(p.sa->counters().tx_ack + p.sb->counters().tx_ack < n / 4);
}

TEST_CASE("flow control: a slow receiver is never sent more than its window", "[slidwin]") {
    SlidwinConfig cfg;
    cfg.rcv_buf_datagrams = 32;
    cfg.snd_buf_datagrams = 256;
    WireImpairment imp;
    imp.drop = 0.05;  // window updates get lost too: the zero-window probe must recover
    imp.seed = 9;
    Pair p(imp, cfg);
    p.sink_b.queue_cap = 8;  // the user holds 8 and takes one per step
    p.run(20'000, 20'000'000, 1400, 1);
    p.sink_b.consume(100);
    REQUIRE(p.sink_b.next == 20'000);
    REQUIRE(p.sink_b.bad == 0);
    REQUIRE(p.sb->counters().drop_out_of_window == 0);
    REQUIRE(p.sa->counters().window_stalls > 0);
}

TEST_CASE("zero window: the sender stops, probes, and resumes when the user reads", "[slidwin]") {
    SlidwinConfig cfg;
    cfg.rcv_buf_datagrams = 16;
    cfg.persist_ns = 2'000'000;
    Pair p(WireImpairment{}, cfg);
    p.sink_b.queue_cap = 4;  // the user takes nothing for a while
    for (uint64_t i = 0; i < 100; ++i) REQUIRE(slidwin_send(*p.sa, make_msg(p.pool_a, i, 1400), p.now) == SlidwinSendResult::kOk);
    for (int s = 0; s < 20'000; ++s) p.step(1'000);  // 20 ms
    // held: 4 with the user + 16 in slidwin's buffer; the rest waits at the sender
    REQUIRE(p.sb->rcv_window() == 0);
    REQUIRE(p.sa->snd_sent() - p.sa->iss() == 20);
    REQUIRE(p.sa->counters().tx_probe > 0);
    REQUIRE(p.sb->counters().drop_out_of_window == 0);
    p.sink_b.queue_cap = 0;
    p.sink_b.consume(4);
    slidwin_deliver_pending(*p.sb, p.now);
    for (int s = 0; s < 20'000 && p.sink_b.next < 100; ++s) p.step(1'000);
    REQUIRE(p.sink_b.next == 100);
    REQUIRE(p.sink_b.bad == 0);
}

TEST_CASE("sequence numbers wrap around 2^32", "[slidwin]") {
    SlidwinConfig cfg;
    cfg.random_isn = false;
    cfg.initial_seq = 0xffffff00u;
    WireImpairment imp;
    imp.drop = 0.1;
    imp.reorder_window = 8;
    imp.seed = 3;
    Pair p(imp, cfg);
    p.run(5'000, 10'000'000, 1400);
    INFO(p.sa->to_string() << " / " << p.sb->to_string() << " pool " << p.pool_a.in_use() << " " << p.pool_b.in_use());
    REQUIRE(p.sink_b.next == 5'000);
    REQUIRE(p.sink_b.bad == 0);
    REQUIRE(p.sa->snd_nxt() == 0xffffff00u + 5'000u);
}

TEST_CASE("the retransmission timer backs off exponentially while the peer is silent", "[slidwin]") {
    SlidwinConfig cfg;
    cfg.rto_initial_ns = 1'000'000;
    cfg.rto_max_ns = 64'000'000;
    Pair p(WireImpairment{}, cfg);
    p.handshake();
    WireImpairment imp;
    imp.drop = 1.0;  // the link dies after the handshake
    p.wire.set_impairment(imp);
    REQUIRE(slidwin_send(*p.sa, make_msg(p.pool_a, 0, 100), p.now) == SlidwinSendResult::kOk);
    std::vector<uint64_t> rto;
    uint64_t last = 0;
    for (int s = 0; s < 200'000; ++s) {
        p.step(1'000);
        if (p.sa->counters().rto_expired != last) {
            last = p.sa->counters().rto_expired;
            rto.push_back(p.sa->rto_ns());
        }
    }
    REQUIRE(rto.size() >= 6);
    REQUIRE(rto[0] == 2'000'000);
    REQUIRE(rto[1] == 4'000'000);
    REQUIRE(rto[2] == 8'000'000);
    REQUIRE(rto.back() == 64'000'000);  // capped
    REQUIRE(p.sa->counters().tx_rto_retx == rto.size());
}

TEST_CASE("malformed slidwin datagrams are dropped and counted", "[slidwin]") {
    Pair p(WireImpairment{}, SlidwinConfig{});
    auto inject = [&](const std::vector<uint8_t>& body) {
        PktBuf* m = pkt_alloc(p.pool_a);
        pkt_write(m, p.pool_a, body.data(), static_cast<uint32_t>(body.size()));
        p.a.udp_output(m, 9410, p.b.config().ip, 9410);
        p.step(1'000);
    };
    inject({1, 2, 3});                                                  // short
    std::vector<uint8_t> h(kSlidwinHdrLen, 0);
    h[0] = 9;                                                           // bad version
    inject(h);
    h[0] = kSlidwinVersion;
    h[3] = 5;                                                           // subconn 5 not open
    inject(h);
    REQUIRE(p.sb->counters().rx_bad == 1);
    REQUIRE(p.ep_b.drop_unknown_subconn() == 2);  // short + unknown id
    REQUIRE(p.sink_b.next == 0);
}

namespace {

// Deterministic loss: drop every N-th frame, counting the frames a pattern looks at; `phase`
// frames are counted before the first (so phase p drops frame N - p first). A timeout resends
// the same frames each time while nothing moves; these droppers find whether that can starve the
// one frame that matters (the hole, or the ack that answers it) for ever.

// The slidwin flags of a frame on the in-memory wire (Ethernet, IPv4 without options, UDP).
uint8_t frame_flags(const PktBuf& f) {
    uint8_t v = 0;
    pkt_read(&f, 14 + 20 + 8 + 1, 1, &v);
    return v;
}

enum class Pattern { kShared, kPerDir, kAtoB, kBtoA, kDataOnly, kAckOnly };
const char* pattern_name(Pattern p) {
    switch (p) {
        case Pattern::kShared: return "every N-th frame, one counter for both directions";
        case Pattern::kPerDir: return "every N-th frame of each direction";
        case Pattern::kAtoB: return "every N-th frame a->b";
        case Pattern::kBtoA: return "every N-th frame b->a";
        case Pattern::kDataOnly: return "every N-th data frame of each direction";
        case Pattern::kAckOnly: return "every N-th pure ack of each direction";
    }
    return "?";
}

std::function<bool(int, const PktBuf&)> periodic_dropper(Pattern pat, uint32_t every, uint32_t phase) {
    auto cnt = std::make_shared<std::array<uint64_t, 2>>();
    (*cnt)[0] = (*cnt)[1] = phase;
    return [=](int dir, const PktBuf& f) {
        const uint8_t fl = frame_flags(f);
        uint64_t* c = nullptr;
        switch (pat) {
            case Pattern::kShared: c = &(*cnt)[0]; break;
            case Pattern::kPerDir: c = &(*cnt)[dir]; break;
            case Pattern::kAtoB: if (dir == 0) c = &(*cnt)[0]; break;
            case Pattern::kBtoA: if (dir == 1) c = &(*cnt)[0]; break;
            case Pattern::kDataOnly: if (fl & kSwData) c = &(*cnt)[dir]; break;
            case Pattern::kAckOnly: if ((fl & (kSwData | kSwSyn)) == 0) c = &(*cnt)[dir]; break;
        }
        return c != nullptr && ++*c % every == 0;
    };
}

// Send n small messages a -> b with a periodic dropper switched on after the handshake: every
// one must arrive once, in order, and be acked (3 s of protocol time; a stall backs off to 1 s).
// Returns the retransmission timeouts it took.
uint64_t periodic_run(Pattern pat, uint32_t every, uint32_t phase, uint32_t window, uint64_t n) {
    SlidwinConfig cfg;
    cfg.snd_buf_datagrams = window;
    cfg.rcv_buf_datagrams = window;
    Pair p(WireImpairment{}, cfg, 4 * window + 512);
    p.handshake();
    WireImpairment imp;
    imp.drop_if = periodic_dropper(pat, every, phase);
    p.wire.set_impairment(imp);
    p.run(n, 3'000'000, 100);
    INFO(pattern_name(pat) << ", N " << every << ", phase " << phase << ", window " << window << ": "
                           << p.sa->to_string() << " / " << p.sb->to_string() << ", retx "
                           << p.sa->counters().tx_retx << ", timeouts " << p.sa->counters().rto_expired);
    CHECK(p.sink_b.next == n);
    CHECK(p.sink_b.bad == 0);
    CHECK(p.sa->unacked() == 0);
    CHECK(p.wire.counters().dropped > 0);
    return p.sa->counters().rto_expired;
}

}  // namespace

TEST_CASE("periodic loss: every 11th frame both ways, the RTO burst's own period, no longer stalls the transfer",
          "[slidwin]") {
    // The case first seen over io_uring sockets. With more than 31 datagrams in flight beyond the
    // 64-bit SACK horizon, a timeout resends the hole and the 31 datagrams after the horizon, and
    // the receiver answers with one ack: 33 frames per timeout, the same 33 every time. Every 11th
    // frame (11 divides 33) then took the hole at every timeout once it had taken it once.
    uint64_t timeouts = 0;
    for (uint32_t window : {256u, 1024u})
        for (uint32_t phase = 0; phase < 11; ++phase) timeouts += periodic_run(Pattern::kShared, 11, phase, window, 2000);
    // The same with the receiver holding everything: 4 datagrams the sender never heard about
    // and the one ack that answers them, 5 frames per timeout; every 5th took the ack.
    for (uint32_t phase = 0; phase < 5; ++phase) timeouts += periodic_run(Pattern::kShared, 5, phase, 16, 2000);
    REQUIRE(timeouts > 0);  // the timer's bursts were what the loss met
}

TEST_CASE("periodic loss: every N-th frame (N 2..30, every phase; both ways, one way, data only, acks only) "
          "delays the transfer but never stalls it",
          "[slidwin][reliability]") {
    uint32_t runs = 0;
    for (uint32_t window : {16u, 256u})
        for (Pattern pat : {Pattern::kShared, Pattern::kPerDir, Pattern::kAtoB, Pattern::kBtoA, Pattern::kDataOnly,
                            Pattern::kAckOnly})
            for (uint32_t every = 2; every <= 30; ++every)
                for (uint32_t phase = 0; phase < every; ++phase, ++runs) periodic_run(pat, every, phase, window, 1000);
    REQUIRE(runs == 2 * 6 * 464);
}

namespace {

uint32_t frame_seq(const PktBuf& f) {
    uint8_t v[4] = {};
    pkt_read(&f, 14 + 20 + 8 + offsetof(SlidwinHdr, seq), 4, v);
    return uint32_t{v[0]} << 24 | uint32_t{v[1]} << 16 | uint32_t{v[2]} << 8 | v[3];
}

// A slidwin datagram a -> b built by hand (an ack of ack, no data): what a third party could send.
void inject_ack(Pair& p, uint32_t ack, uint64_t token) {
    SlidwinHdr h{};
    h.version = kSlidwinVersion;
    h.flags = kSwAck;
    h.subconn = be16::of(0);
    h.ack = be32::of(ack);
    h.wnd = be16::of(16);
    h.token = be64::of(token);
    PktBuf* m = pkt_alloc(p.pool_a);
    store_hdr(pkt_append(m, kSlidwinHdrLen), h);
    p.a.udp_output(m, 9410, p.b.config().ip, 9410);
    p.step(1'000);
}

}  // namespace

TEST_CASE("liveness: every valid datagram of the peer proves it alive, delivered or not; a keepalive is one",
          "[slidwin]") {
    // The proxy's peer time-out reads last_valid_rx_ns (proxy/README.md, liveness). A peer whose
    // data waits behind a hole (its first datagram lost at every transmission) delivers nothing
    // for as long as the hole lasts, yet every retransmission and every datagram beyond the hole
    // shows it is there.
    Pair p(WireImpairment{}, SlidwinConfig{});
    REQUIRE(!slidwin_keepalive(*p.sa, p.now));  // before the handshake: nothing to say it with
    REQUIRE(p.sa->counters().tx_ack == 0);
    p.handshake();
    const uint32_t head = p.sa->snd_nxt();
    WireImpairment imp;
    imp.drop_if = [head](int dir, const PktBuf& f) {
        return dir == 0 && (frame_flags(f) & kSwData) != 0 && frame_seq(f) == head;
    };
    p.wire.set_impairment(imp);
    for (uint64_t i = 0; i < 20; ++i)
        REQUIRE(slidwin_send(*p.sa, make_msg(p.pool_a, i, 1400), p.now) == SlidwinSendResult::kOk);
    for (int s = 0; s < 50; ++s) p.step(1'000'000);
    // b heard the 19 datagrams beyond the hole, and delivered none of them.
    const uint64_t early = p.sb->last_valid_rx_ns();
    REQUIRE(early > 0);
    REQUIRE(p.sink_b.next == 0);
    REQUIRE(p.sb->counters().rx_out_of_order == 19);
    for (int s = 0; s < 1'500; ++s) p.step(1'000'000);  // 1.5 s: the back-off reaches rto_max (1 s)
    INFO(p.sa->to_string() << " / " << p.sb->to_string());
    REQUIRE(p.sink_b.next == 0);
    REQUIRE(p.sa->counters().tx_rto_retx > 0);
    // Every second timeout that resends the hole alone sends a bare ack after it (slidwin.cpp,
    // on_rto): those arrive, and count, while the hole's copies do not.
    REQUIRE(p.sb->last_valid_rx_ns() > early);
    const uint64_t rx_ack = p.sb->counters().rx_ack, tx_ack = p.sa->counters().tx_ack;
    p.step(1'000);
    REQUIRE(slidwin_keepalive(*p.sa, p.now));
    const uint64_t sent_at = p.now;
    p.step(1'000);  // the pump at sent_at moves it
    REQUIRE(p.sa->counters().tx_ack == tx_ack + 1);
    REQUIRE(p.sb->counters().rx_ack == rx_ack + 1);
    REQUIRE(p.sb->last_valid_rx_ns() == sent_at);
    REQUIRE(p.sink_b.next == 0);
    // What is not the confirmed peer's, in the window, proves nothing: another token, an ack
    // of what b never sent.
    const uint64_t heard = p.sb->last_valid_rx_ns();
    inject_ack(p, p.sb->snd_nxt(), p.sa->local_token() ^ 1);
    REQUIRE(p.sb->counters().drop_token == 1);
    inject_ack(p, p.sb->snd_nxt() + 5000, p.sa->local_token());
    REQUIRE(p.sb->counters().drop_out_of_window == 1);
    REQUIRE(p.sb->last_valid_rx_ns() == heard);
    // The hole fills: everything arrives once, in order.
    p.wire.set_impairment(WireImpairment{});
    for (int s = 0; s < 3'000 && p.sink_b.next < 20; ++s) p.step(1'000'000);
    REQUIRE(p.sink_b.next == 20);
    REQUIRE(p.sink_b.bad == 0);
}
