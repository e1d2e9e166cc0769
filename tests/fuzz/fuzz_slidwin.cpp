// fuzz_slidwin: the sliding-window protocol between two stacks joined by the in-memory wire,
// driven by a fuzzed sequence of operations, with forged datagrams injected on the wire.
//
// Two stacks, A (10.0.0.1) and B (10.0.0.2), each with a SlidwinEndpoint on port 9410 and two
// open sub-connections (local ids 0 and 3: ids 1 and 2 are holes in the table), joined by a
// MemWire. Input: an 8-byte setup, then at most 200 operations.
//   setup byte 0: 0x01 adversarial (forged datagrams, tiny pools, short TX queues allowed)
//                 0x06 MTU 1500, 576, 9000, 1500   0x08 messages up to 9 KB (else up to 1.3 KB)
//                 0x30 wire: clean, reordering, loss + duplication, all of them
//                 0x40 second sub-connection used
//                 0x80 every datagram authenticated (stack/slidwin_auth.hpp; byte 7 odd: and
//                      encrypted): the seal/open path, retransmissions re-sealed, and forged
//                      datagrams that must fail the tag (drop_auth) before slidwin sees them
//         bytes 1-4: initial sequence number (both ends start there, each learns the other's
//                    in the SYN handshake; near 2^32 tests wrap-around)
//         byte 5: send buffer 2^(bits 0-2), receive buffer 2^(bits 3-5), ack every 1 + (bits 6-7)
//         byte 6: adversarial only: pool limit 64 + 8 * n segments (0: none), and when odd a
//                 16-frame TX queue (else 1024)                            byte 7: wire seed
//   op byte, bits 0-2: 0,1 send (then a size byte, two when large), 2 inject a forged datagram
//                      (adversarial; else a send), 3 time passes (then a byte: (n + 1) * 40 us),
//                      4 pump the wire, 5 the user takes messages, 6 the user's queue limit,
//                      7 pump + 100 us + pump
//            bit 3: side (A or B); bit 4: which sub-connection; bits 4-7: counts for 5 and 6.
//   inject: a flags byte (0x01 subconn forced to an open id (0x02 which), 0x04 version/reserved
//           made valid, 0x08 seq put in the receiver's window, 0x10 ack put near what the
//           receiver sent, 0x20 token made the sender's real token, 0x40 a well-formed SYN or
//           SYN|ACK (the handshake block, nothing more; 0x80: acking the receiver's ISN and
//           echoing its nonce, as only a peer that saw its SYN can), else the fuzzed bytes,
//           which are almost never right), a length byte L, then 40 + L bytes of slidwin
//           datagram, sent with A's (or B's) udp_output from port 9410 so the endpoint takes it
//           for its peer's. Without 0x20 the token check must drop it (drop_token,
//           drop_unsynced, a tentative peer the real one replaces, or a restart challenge nobody
//           can answer). The handshake's states are all reached: SYNs and SYN|ACKs before,
//           during and after the real handshake, tentative peers replaced, challenges sent,
//           answered wrongly, rate-limited.
//
// Every real message starts with a 16-byte tag (magic, counter, direction, sub-connection) and
// its bytes are a function of those; the harness never lets a forged datagram carry the magic.
// Checked at the receiving user: real messages of a stream arrive in order, never twice, on the
// right sub-connection, with the right size and bytes; without forgery every message is real and
// consecutive, and after a final drain on a clean wire every message sent has arrived and
// nothing is unacked. Always: windows within their buffers, no leak (both pools back to zero).
#include <deque>

#include "fuzz_common.hpp"
#include "mem_wire.hpp"
#include "slidwin_endpoint.hpp"
#include "timer_wheel.hpp"

using namespace fuzz;

namespace {

constexpr uint8_t kMagic[8] = {'I', 'C', 'C', 'S', 'F', 'U', 'Z', 'Z'};
constexpr uint32_t kTagLen = 16;
constexpr uint16_t kPort = 9410;
constexpr uint16_t kIds[2] = {0, 3};
constexpr uint32_t kMaxOps = 200;

uint8_t body(uint32_t dir, uint32_t sub, uint32_t c, uint32_t k) {
    return static_cast<uint8_t>(k * 13 + (k >> 8) * 3 + c * 7 + dir * 3 + sub * 5 + 1);
}

// Bytes [at, at + n) of real message c of (dir, sub): the tag, then body().
ICCS_FUZZ_NO_COV void message_bytes(uint8_t* out, uint32_t at, uint32_t n, uint32_t dir, uint32_t sub, uint32_t c) {
    for (uint32_t j = 0; j < n; ++j, ++at) {
        if (at < 8)
            out[j] = kMagic[at];
        else if (at < 12)
            out[j] = static_cast<uint8_t>(c >> (8 * (at - 8)));
        else if (at == 12)
            out[j] = static_cast<uint8_t>(dir);
        else if (at == 13)
            out[j] = static_cast<uint8_t>(sub);
        else if (at < kTagLen)
            out[j] = 0;
        else
            out[j] = body(dir, sub, c, at);
    }
}

// True when the body of v (after the tag) is that of real message c of (dir, sub).
ICCS_FUZZ_NO_COV bool body_ok(const std::vector<uint8_t>& v, uint32_t dir, uint32_t sub, uint32_t c) {
    for (uint32_t k = kTagLen; k < v.size(); ++k)
        if (v[k] != body(dir, sub, c, k)) return false;
    return true;
}

struct World;

// One direction of one sub-connection: what was sent, what has arrived.
struct Stream {
    std::vector<uint32_t> sizes;  // real message c had sizes[c] bytes
    int64_t last = -1;            // counter of the last real message delivered
};

struct Sink : SlidwinSink {
    World& w;
    int side;  // the receiving side: 0 = A, 1 = B
    size_t cap = 0;  // user queue limit; 0: the user takes every message at once
    std::deque<PktBuf*> queue;
    Sink(World& world, int s) : w(world), side(s) {}
    ~Sink() override {
        for (PktBuf* m : queue) pkt_free(m);
    }
    bool on_message(SubConnection& sc, PktBuf* m) override;
    void consume(size_t k) {
        while (k-- > 0 && !queue.empty()) {
            pkt_free(queue.front());
            queue.pop_front();
        }
    }
};

struct World {
    bool adversarial;
    FuzzPool& pool_a;
    FuzzPool& pool_b;
    Stack a, b;
    MemWire wire;
    TimerWheel wheel_a, wheel_b;
    Sink sink_a{*this, 0}, sink_b{*this, 1};
    SlidwinEndpoint ep_a, ep_b;
    SubConnection* sc[2][2] = {};  // [side][sub]
    Stream streams[2][2];          // [dir: 0 = A->B, 1 = B->A][sub]
    uint64_t now;

    World(bool adv, FuzzPool& pa, FuzzPool& pb, const StackConfig& ca, const StackConfig& cb, const WireImpairment& imp,
          const SlidwinConfig& cfg, uint64_t t0)
        : adversarial(adv),
          pool_a(pa),
          pool_b(pb),
          a(ca, pa),
          b(cb, pb),
          wire(a, b, imp),
          wheel_a(10'000, 1024, t0),
          wheel_b(10'000, 1024, t0),
          ep_a(a, wheel_a, kPort, cfg, sink_a),
          ep_b(b, wheel_b, kPort, cfg, sink_b),
          now(t0) {
        a.arp().add_static(kIpB, kMacB);
        b.arp().add_static(kIpA, kMacA);
        for (int s = 0; s < 2; ++s) {
            sc[0][s] = ep_a.open(kIds[s], kIpB, kPort, kIds[s], now);
            sc[1][s] = ep_b.open(kIds[s], kIpA, kPort, kIds[s], now);
            FUZZ_CHECK(sc[0][s] != nullptr && sc[1][s] != nullptr);
        }
    }

    Stack& stack(int side) { return side == 0 ? a : b; }
    FuzzPool& pool(int side) { return side == 0 ? pool_a : pool_b; }
    Sink& sink(int side) { return side == 0 ? sink_a : sink_b; }

    void advance(uint64_t dt) {
        now += dt;
        wheel_a.advance(now);
        wheel_b.advance(now);
        a.timers(now);
        b.timers(now);
    }

    void send(int side, int sub, uint32_t size) {
        Stream& st = streams[side][sub];
        const uint32_t c = static_cast<uint32_t>(st.sizes.size());
        PktBuf* m = pkt_alloc(pool(side));
        if (m == nullptr) return;
        uint8_t buf[512];
        for (uint32_t done = 0; done < size;) {
            const uint32_t k = std::min<uint32_t>(size - done, sizeof buf);
            message_bytes(buf, done, k, static_cast<uint32_t>(side), static_cast<uint32_t>(sub), c);
            if (!pkt_write(m, pool(side), buf, k)) {
                pkt_free(m);
                return;
            }
            done += k;
        }
        if (slidwin_send(*sc[side][sub], m, now) == SlidwinSendResult::kOk)
            st.sizes.push_back(size);
        else
            pkt_free(m);  // refused: the caller keeps it
    }

    // A forged datagram from `side` to the other side's endpoint.
    void inject(int side, Reader& in) {
        const uint8_t f = in.u8();
        const uint8_t extra = in.u8();
        std::vector<uint8_t> d = in.bytes(kSlidwinHdrLen + extra);
        const int peer = 1 - side;
        if (d.size() >= kSlidwinHdrLen) {
            if (f & 0x01) set16(&d[2], kIds[(f >> 1) & 1]);
            if (f & 0x04) {
                d[0] = kSlidwinVersion;
                d[14] = d[15] = 0;
            }
            // The receiver's state, as the peer would know it.
            const SubConnection* r = sc[peer][(f >> 1) & 1];
            if (f & 0x08) {
                const uint32_t seq = r->rcv_nxt() + (get32(&d[4]) & 0x3f);
                d[4] = static_cast<uint8_t>(seq >> 24), d[5] = static_cast<uint8_t>(seq >> 16);
                d[6] = static_cast<uint8_t>(seq >> 8), d[7] = static_cast<uint8_t>(seq);
            }
            if (f & 0x10) {
                const uint32_t ack = r->snd_sent() - (get32(&d[8]) & 0x3f);
                d[8] = static_cast<uint8_t>(ack >> 24), d[9] = static_cast<uint8_t>(ack >> 16);
                d[10] = static_cast<uint8_t>(ack >> 8), d[11] = static_cast<uint8_t>(ack);
            }
            if (f & 0x20) {
                const uint64_t t = sc[side][(f >> 1) & 1]->local_token();
                for (int i = 0; i < 8; ++i) d[32 + i] = static_cast<uint8_t>(t >> (56 - 8 * i));
            }
            if (f & 0x40) {  // a well-formed SYN or SYN|ACK: its handshake block, nothing else
                d.resize(kSlidwinHdrLen + kSlidwinSynBlkLen);
                d[1] = static_cast<uint8_t>(kSwSyn | (d[1] & (kSwAck | kSwAuth | kSwEnc)));
                if (f & 0x80) {  // that proves it saw the receiver's SYN: acks its ISN, echoes its nonce
                    d[1] |= kSwAck;
                    const uint32_t isn = r->iss();
                    const uint64_t nonce = r->nonce();
                    d[8] = static_cast<uint8_t>(isn >> 24), d[9] = static_cast<uint8_t>(isn >> 16);
                    d[10] = static_cast<uint8_t>(isn >> 8), d[11] = static_cast<uint8_t>(isn);
                    for (int i = 0; i < 8; ++i) d[kSlidwinHdrLen + 8 + i] = static_cast<uint8_t>(nonce >> (56 - 8 * i));
                }
            }
            // Only real messages carry the magic.
            if (d.size() >= kSlidwinHdrLen + 8 && std::equal(kMagic, kMagic + 8, d.begin() + kSlidwinHdrLen))
                d[kSlidwinHdrLen] ^= 0xff;
        }
        if (PktBuf* p = make_pkt(pool(side), d)) stack(side).udp_output(p, kPort, side == 0 ? kIpB : kIpA, kPort);
    }

    void check_windows() const {
        for (int s = 0; s < 2; ++s)
            for (int k = 0; k < 2; ++k) {
                const SubConnection& c = *sc[s][k];
                FUZZ_CHECK(c.unacked() <= c.config().snd_buf_datagrams);
                FUZZ_CHECK(c.send_space() <= c.config().snd_buf_datagrams);
                FUZZ_CHECK(c.rcv_window() <= c.config().rcv_buf_datagrams);
            }
    }

    bool complete() const {
        for (int s = 0; s < 2; ++s)
            for (int k = 0; k < 2; ++k) {
                if (sc[s][k]->unacked() != 0) return false;
                if (streams[s][k].last + 1 != static_cast<int64_t>(streams[s][k].sizes.size())) return false;
            }
        return wire.held() == 0 && a.tx_queued() == 0 && b.tx_queued() == 0;
    }

    // The end: a clean wire and a user that takes everything, until all is delivered and acked.
    void drain() {
        wire.set_impairment(WireImpairment{});
        pool_a.set_limit(pool_a.capacity());
        pool_b.set_limit(pool_b.capacity());
        const int rounds = adversarial ? 200 : 4000;
        for (int i = 0; i < rounds; ++i) {
            for (int s = 0; s < 2; ++s) {
                sink(s).cap = 0;
                sink(s).consume(SIZE_MAX);
                for (int k = 0; k < 2; ++k) slidwin_deliver_pending(*sc[s][k], now);
            }
            wire.pump(now, true);
            if (complete()) break;
            advance(500'000);
            wire.pump(now, true);
            check_windows();
        }
        if (verbose() || (!adversarial && !complete())) {
            dump_counters("A", a.counters());
            dump_counters("B", b.counters());
        }
        if (!adversarial) {
            if (!complete()) {
                for (int s = 0; s < 2; ++s)
                    for (int k = 0; k < 2; ++k)
                        std::fprintf(stderr, "side %d sub %d: %s; delivered %lld of %zu\n", s, k,
                                     sc[s][k]->to_string().c_str(), static_cast<long long>(streams[s][k].last + 1),
                                     streams[s][k].sizes.size());
            }
            FUZZ_CHECK(complete());
        }
        if (verbose())
            for (int d = 0; d < 2; ++d)
                for (int k = 0; k < 2; ++k)
                    std::fprintf(stderr, "%s sub %d: %zu sent, last delivered %lld; %s\n", d == 0 ? "A->B" : "B->A", k,
                                 streams[d][k].sizes.size(), static_cast<long long>(streams[d][k].last),
                                 sc[d][k]->to_string().c_str());
    }
};

bool Sink::on_message(SubConnection& sc, PktBuf* m) {
    if (cap > 0 && queue.size() >= cap) return false;  // the user's queue is full: later
    check_chain(m);
    const int dir = side == 1 ? 0 : 1;
    FUZZ_CHECK(sc.local_id() == kIds[0] || sc.local_id() == kIds[1]);
    const int sub = sc.local_id() == kIds[0] ? 0 : 1;
    FUZZ_CHECK(w.sc[side][sub] == &sc);
    uint8_t tag[kTagLen];
    const bool real = pkt_read(m, 0, kTagLen, tag) == kTagLen && std::equal(kMagic, kMagic + 8, tag);
    if (real) {
        const uint32_t c = uint32_t{tag[8]} | uint32_t{tag[9]} << 8 | uint32_t{tag[10]} << 16 | uint32_t{tag[11]} << 24;
        Stream& st = w.streams[dir][sub];
        FUZZ_CHECK(tag[12] == dir && tag[13] == sub);  // on the sub-connection it was sent on
        FUZZ_CHECK(c < st.sizes.size());                // it was sent
        FUZZ_CHECK(static_cast<int64_t>(c) > st.last);  // in order, never twice
        if (!w.adversarial) FUZZ_CHECK(static_cast<int64_t>(c) == st.last + 1);  // nothing skipped
        FUZZ_CHECK(m->pkt_len == st.sizes[c]);
        const std::vector<uint8_t> v = pkt_bytes(m);
        FUZZ_CHECK(body_ok(v, static_cast<uint32_t>(dir), static_cast<uint32_t>(sub), c));
        st.last = c;
    } else {
        FUZZ_CHECK(w.adversarial);  // only a forged datagram carries something else
    }
    if (cap == 0)
        pkt_free(m);
    else
        queue.push_back(m);
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static FuzzPool pool_a(4096, 2048);
    static FuzzPool pool_b(4096, 2048);
    if (size > 8 + kMaxOps * 300) return 0;
    Reader in(data, size);
    const uint8_t h0 = in.u8();
    const uint32_t iss = in.u32();
    const uint8_t h5 = in.u8();
    const uint8_t h6 = in.u8();
    const uint8_t h7 = in.u8();
    const bool adversarial = (h0 & 0x01) != 0;
    const bool big = (h0 & 0x08) != 0;
    const int subs = (h0 & 0x40) ? 2 : 1;

    static constexpr uint32_t kMtus[4] = {1500, 576, 9000, 1500};
    StackConfig ca = host_config(kMacA, kIpA, kMtus[(h0 >> 1) & 3]);
    StackConfig cb = host_config(kMacB, kIpB, kMtus[(h0 >> 1) & 3]);
    ca.reass.max_bytes = cb.reass.max_bytes = 1u << 20;
    ca.tx_queue_frames = cb.tx_queue_frames = adversarial && (h6 & 1) ? 16 : 1024;

    WireImpairment imp;
    imp.seed = h7;
    switch ((h0 >> 4) & 3) {
        case 1: imp.reorder_window = 4; break;
        case 2: imp.drop = 0.1, imp.duplicate = 0.1; break;
        case 3: imp.drop = 0.2, imp.duplicate = 0.1, imp.reorder_window = 16; break;
        default: break;
    }

    SlidwinConfig cfg;
    cfg.snd_buf_datagrams = 1u << (h5 & 7);
    cfg.rcv_buf_datagrams = 1u << ((h5 >> 3) & 7);
    cfg.ack_every = 1u + (h5 >> 6);
    cfg.rto_initial_ns = 2'000'000;
    cfg.rto_min_ns = 1'000'000;
    cfg.rto_max_ns = 8'000'000;
    cfg.delack_ns = 50'000;
    cfg.persist_ns = 2'000'000;
    cfg.random_isn = false;
    cfg.initial_seq = iss;
    static const SlidwinAuthKey mac_key = [] {
        uint8_t bytes[32];
        for (int i = 0; i < 32; ++i) bytes[i] = static_cast<uint8_t>(i * 29 + 3);
        std::string err;
        return *slidwin_key_from_bytes(bytes, sizeof bytes, false, "(fuzz key)", err);
    }();
    static const SlidwinAuthKey aead_key = [] {
        SlidwinAuthKey k = mac_key;
        k.encrypt = true;
        return k;
    }();
    if (h0 & 0x80) cfg.auth = (h7 & 1) ? &aead_key : &mac_key;

    if (adversarial && h6 != 0) {
        pool_a.set_limit(64 + 8u * h6);
        pool_b.set_limit(64 + 8u * h6);
    }
    {
        World w(adversarial, pool_a, pool_b, ca, cb, imp, cfg, 1'000'000'000);
        for (uint32_t ops = 0; ops < kMaxOps && !in.empty(); ++ops) {
            const uint8_t op = in.u8();
            const int side = (op >> 3) & 1;
            const int sub = subs == 2 ? (op >> 4) & 1 : 0;
            switch (op & 7) {
                case 2:
                    if (adversarial) {
                        w.inject(side, in);
                        break;
                    }
                    [[fallthrough]];
                case 0:
                case 1: {
                    const uint8_t s = in.u8();
                    const uint32_t n = big && (s & 1) ? 16u + in.u16() % 9000u : 16u + s * 5u;
                    w.send(side, sub, n);
                    break;
                }
                case 3: w.advance((uint64_t{in.u8()} + 1) * 40'000); break;
                case 4: w.wire.pump(w.now, (op & 0x10) != 0); break;
                case 5: {
                    const uint32_t k = op >> 4;
                    w.sink(side).consume(k == 0 ? SIZE_MAX : k);
                    for (int j = 0; j < 2; ++j) slidwin_deliver_pending(*w.sc[side][j], w.now);
                    break;
                }
                case 6: w.sink(side).cap = op >> 4; break;
                default:
                    w.wire.pump(w.now);
                    w.advance(100'000);
                    w.wire.pump(w.now);
                    break;
            }
            w.check_windows();
        }
        w.drain();
    }
    pool_a.end_of_input();
    pool_b.end_of_input();
    return 0;
}
