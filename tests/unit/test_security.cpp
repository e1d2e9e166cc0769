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

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "slidwin_endpoint.hpp"
#include "stack.hpp"
#include "mem_wire.hpp"
#include "owner_only.hpp"

using namespace iccs;

namespace {

constexpr uint16_t kPort = 9410;

struct Sink : SlidwinSink {
    uint64_t got = 0;
    std::vector<uint64_t> restarts;  // new tokens reported
    bool on_message(SubConnection&, PktBuf* m) override {
        ++got;
        pkt_free(m);
        return true;
    }
    void on_peer_restarted(SubConnection&, uint64_t token) override { restarts.push_back(token); }
};

using Frame = std::vector<uint8_t>;

// Two stacks joined by hand (no loss), so a test can record what crosses and inject frames.
struct Link {
    HeapPktPool pool_a{4096, 2048}, pool_b{4096, 2048}, pool_f{64, 2048};
    std::unique_ptr<Stack> a_ = std::make_unique<Stack>(mem_wire_host(1), pool_a);
    std::unique_ptr<Stack> b_ = std::make_unique<Stack>(mem_wire_host(2), pool_b);
    std::unique_ptr<Stack> forger_ = std::make_unique<Stack>(mem_wire_host(1), pool_f);  // a's addresses, none of a's state
    Stack& a = *a_;
    Stack& b = *b_;
    Stack& forger = *forger_;
    TimerWheel wheel_a{10'000, 1024, 0}, wheel_b{10'000, 1024, 0};
    Sink sink_a, sink_b;
    SlidwinConfig cfg;
    std::unique_ptr<SlidwinEndpoint> ep_a, ep_b;
    SubConnection* sa = nullptr;
    SubConnection* sb = nullptr;
    uint64_t now = 1'000'000;
    std::vector<Frame>* record_a_to_b = nullptr;  // every frame a sends to b, when set

    explicit Link(const SlidwinConfig& c) : cfg(c) {
        a.arp().add_static(b.config().ip, b.config().mac);
        b.arp().add_static(a.config().ip, a.config().mac);
        forger.arp().add_static(b.config().ip, b.config().mac);
        ep_b = std::make_unique<SlidwinEndpoint>(b, wheel_b, kPort, cfg, sink_b);
        sb = ep_b->open(0, a.config().ip, kPort, 0, now);
        open_a();
    }
    ~Link() {
        ep_a.reset();
        ep_b.reset();
        drop(a);
        drop(b);
        // Leak check (STYLE): what the stacks still hold (reassembly, ARP, TX) goes with them.
        a_.reset();
        b_.reset();
        forger_.reset();
        CHECK(pool_a.in_use() == 0);
        CHECK(pool_b.in_use() == 0);
        CHECK(pool_f.in_use() == 0);
    }
    // (Re)start a's end: a new endpoint, sub-connection and run token on the same addresses.
    void open_a() {
        ep_a.reset();
        drop(a);
        ep_a = std::make_unique<SlidwinEndpoint>(a, wheel_a, kPort, cfg, sink_a);
        sa = ep_a->open(0, b.config().ip, kPort, 0, now);
    }
    static void drop(Stack& s) {
        PktBuf* f[32];
        while (uint32_t n = s.tx_take(f, 32))
            for (uint32_t i = 0; i < n; ++i) pkt_free(f[i]);
    }
    static Frame bytes(PktBuf* f) {
        Frame v(f->pkt_len);
        pkt_read(f, 0, f->pkt_len, v.data());
        return v;
    }
    // Give frame bytes to `to` as if they came off the wire.
    void inject(Stack& to, PktPool& pool, const Frame& f) {
        PktBuf* p = pkt_alloc(pool);
        REQUIRE(p != nullptr);
        REQUIRE(pkt_write(p, pool, f.data(), static_cast<uint32_t>(f.size())));
        to.input_burst(&p, 1, now);
    }
    // Move what each side queued to the other; returns frames moved.
    uint32_t move(Stack& from, Stack& to, PktPool& to_pool, std::vector<Frame>* record) {
        PktBuf* f[32];
        uint32_t moved = 0;
        while (uint32_t n = from.tx_take(f, 32)) {
            for (uint32_t i = 0; i < n; ++i) {
                Frame v = bytes(f[i]);
                pkt_free(f[i]);
                if (record != nullptr) record->push_back(v);
                inject(to, to_pool, v);
            }
            moved += n;
        }
        return moved;
    }
    void step(uint64_t dt_ns = 1'000) {
        move(a, b, pool_b, record_a_to_b);
        move(b, a, pool_a, nullptr);
        now += dt_ns;
        wheel_a.advance(now);
        wheel_b.advance(now);
        a.timers(now);
        b.timers(now);
    }
    void settle() {
        for (int i = 0; i < 200; ++i) step();
    }
    void handshake() {
        for (int i = 0; i < 100 && !(sa->established() && sb->established()); ++i) step();
        REQUIRE(sa->established());
        REQUIRE(sb->established());
    }
    void send_a(uint32_t n) {
        for (uint32_t i = 0; i < n; ++i) {
            PktBuf* m = pkt_alloc(pool_a);
            std::memcpy(pkt_append(m, 100), std::string(100, static_cast<char>('a' + i % 26)).data(), 100);
            REQUIRE(slidwin_send(*sa, m, now) == SlidwinSendResult::kOk);
            step();
        }
        settle();
    }
    // A slidwin datagram from a's address and port to b's, as a forger on the segment builds it.
    Frame forge(uint8_t flags, uint32_t seq, uint32_t ack, uint64_t token, uint32_t payload = 0) {
        PktBuf* m = pkt_alloc(pool_f);
        SlidwinHdr h{};
        h.version = kSlidwinVersion;
        h.flags = flags;
        h.subconn = be16::of(0);
        h.seq = be32::of(seq);
        h.ack = be32::of(ack);
        h.wnd = be16::of(1024);
        h.token = be64::of(token);
        store_hdr(pkt_append(m, kSlidwinHdrLen), h);
        if (payload > 0) std::memset(pkt_append(m, payload), 'X', payload);
        REQUIRE(forger.udp_output(m, kPort, b.config().ip, kPort));
        PktBuf* f = nullptr;
        REQUIRE(forger.tx_take(&f, 1) == 1);
        Frame v = bytes(f);
        pkt_free(f);
        return v;
    }
};

// What must not change when b is handed a forged frame.
struct BState {
    std::string sc;
    uint64_t delivered, rx_data, rx_ack, tx_ack, tx_data, got;
    explicit BState(const Link& l)
        : sc(l.sb->to_string()),
          delivered(l.sb->counters().delivered),
          rx_data(l.sb->counters().rx_data),
          rx_ack(l.sb->counters().rx_ack),
          tx_ack(l.sb->counters().tx_ack),
          tx_data(l.sb->counters().tx_data),
          got(l.sink_b.got) {}
    bool operator==(const BState& o) const {
        return sc == o.sc && delivered == o.delivered && rx_data == o.rx_data && rx_ack == o.rx_ack &&
               tx_ack == o.tx_ack && tx_data == o.tx_data && got == o.got;
    }
};

}  // namespace

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
        {"seq just past the buffer", l.forge(kSwData, next + 1024, 0, token, 100), &SlidwinCounters::drop_out_of_window},
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
    // An old SYN has another token: b asks for proof (a challenge to the real peer, which holds
    // the right token and ignores it) and believes nothing.
    REQUIRE(run2.sb->counters().restart_challenges == syns);
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
    // The forger cannot see the challenge: a guessed answer is refused.
    for (uint32_t guess = 0; guess < 64; ++guess) l.inject(l.b, l.pool_b, l.forge(kSwAck, 0, guess, fake));
    REQUIRE(l.sb->counters().drop_token == 64);
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
    l.settle();
    REQUIRE(l.sink_b.got == 10);
    REQUIRE(l.sink_b.restarts.size() == 1);
    REQUIRE(l.sb->counters().drop_token > dropped);
}

namespace {

SlidwinAuthKey test_key(bool encrypt) {
    SlidwinAuthKey k;
    for (int i = 0; i < 32; ++i) k.secret.push_back(static_cast<uint8_t>(i * 37 + 11));
    k.encrypt = encrypt;
    k.path = "(test key)";
    return k;
}

bool contains(const Frame& f, const char* s) {
    const size_t n = std::strlen(s);
    return std::search(f.begin(), f.end(), s, s + n) != f.end();
}

}  // namespace

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
        const BState before(l);
        // A captured data frame with one bit flipped anywhere after the IP/UDP headers.
        Frame data;
        for (const Frame& f : wire)
            if (f[42 + 1] & kSwData) data = f;
        REQUIRE(!data.empty());
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
        // A flip in the subconn field sends the frame to no sub-connection; the rest fail the tag.
        REQUIRE(l.sb->counters().drop_auth + l.ep_b->drop_unknown_subconn() == flips);
        REQUIRE(l.sb->counters().drop_auth >= flips - 2);
        // Without the auth block, or with the flag but a made-up tag: dropped too.
        l.inject(l.b, l.pool_b, l.forge(kSwData | kSwAck, l.sb->rcv_nxt(), l.sb->snd_sent(), l.sa->local_token(), 100));
        l.inject(l.b, l.pool_b, l.forge(kSwAuth | kSwData | kSwAck, l.sb->rcv_nxt(), l.sb->snd_sent(),
                                        l.sa->local_token(), 100));
        l.ep_b->end_of_burst(l.now);
        REQUIRE(l.sb->counters().drop_auth >= flips);
        REQUIRE(BState(l) == before);
        REQUIRE(l.b.tx_queued() == 0);
        l.send_a(5);
        REQUIRE(l.sink_b.got == 35);
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

TEST_CASE("a key file is refused with the reason: missing, too short, readable by others", "[security]") {
    char dir[] = "/tmp/iccs-keytest-XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    const std::string path = std::string(dir) + "/key";
    std::string err;
    REQUIRE(slidwin_load_key(path, false, err) == nullptr);
    REQUIRE(err == "key file " + path + ": No such file or directory");
    auto write = [&](size_t n, mode_t mode) {
        FILE* f = std::fopen(path.c_str(), "wb");
        for (size_t i = 0; i < n; ++i) std::fputc(static_cast<int>(i * 7), f);
        std::fclose(f);
        chmod(path.c_str(), mode);
    };
    write(8, 0600);
    REQUIRE(slidwin_load_key(path, false, err) == nullptr);
    REQUIRE(err == "key file " + path + ": 8 bytes; at least 16 random bytes are needed (e.g. head -c 32 /dev/urandom > " +
                       path + ")");
    write(32, 0644);
    REQUIRE(slidwin_load_key(path, false, err) == nullptr);
    REQUIRE(err == "key file " + path + ": readable by others (mode 0644): chmod 600 " + path);
    write(32, 0600);
    const auto key = slidwin_load_key(path, true, err);
    REQUIRE(key != nullptr);
    REQUIRE(key->secret.size() == 32);
    REQUIRE(key->encrypt);
    std::remove(path.c_str());
    rmdir(dir);
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

namespace {
// A private temporary directory, removed with what it holds.
struct ScratchDir {
    std::string path;
    ScratchDir() {
        char d[] = "/tmp/iccs-owner-only-XXXXXX";
        REQUIRE(mkdtemp(d) != nullptr);
        path = d;
    }
    ~ScratchDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};
void write_file(const std::string& path, const std::vector<uint8_t>& bytes, mode_t mode) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    ::close(fd);
    REQUIRE(::chmod(path.c_str(), mode) == 0);
}
}  // namespace

// Issue 37, finding 8: checked by path and then used by name, another user's file was truncated
// and made ours (failed on the previous main: open_private_file returned a descriptor).
TEST_CASE("owner-only files and directories are checked on their descriptors", "[security]") {
    ScratchDir dir;
    std::string err;
    // A file of ours with loose bits: taken, made 0600, truncated.
    const std::string f = dir.path + "/counters.json";
    write_file(f, {1, 2, 3}, 0644);
    int fd = open_private_file(f, err);
    REQUIRE(fd >= 0);
    struct stat st{};
    REQUIRE(::fstat(fd, &st) == 0);
    REQUIRE((st.st_mode & 0777) == 0600);
    REQUIRE(st.st_size == 0);
    ::close(fd);
    // A symlink planted at the name: refused.
    const std::string link = dir.path + "/capture.pcapng";
    REQUIRE(::symlink(f.c_str(), link.c_str()) == 0);
    REQUIRE(open_private_file(link, err) < 0);
    // A directory of ours with loose bits: made 0700; a symlink to one: refused.
    const std::string d = dir.path + "/run";
    REQUIRE(::mkdir(d.c_str(), 0755) == 0);
    REQUIRE(make_private_dir(d, err));
    REQUIRE(::stat(d.c_str(), &st) == 0);
    REQUIRE((st.st_mode & 0777) == 0700);
    const std::string dlink = dir.path + "/runlink";
    REQUIRE(::symlink(d.c_str(), dlink.c_str()) == 0);
    REQUIRE(!make_private_dir(dlink, err));
    REQUIRE(err == dlink + ": is a symlink, not a directory of ours (refused)");
    if (::geteuid() != 0) {
        WARN("not root: the other-owner cases need chown (skipped)");
        return;
    }
    // Another user's file and directory: never taken over (root could truncate and chmod them).
    write_file(f, {1, 2, 3}, 0644);
    REQUIRE(::chown(f.c_str(), 65534, 65534) == 0);
    REQUIRE(open_private_file(f, err) < 0);
    REQUIRE(err == f + ": permission denied: owned by UID 65534");
    REQUIRE(::stat(f.c_str(), &st) == 0);
    REQUIRE(st.st_size == 3);  // not truncated
    REQUIRE((st.st_mode & 0777) == 0644);
    REQUIRE(::chown(d.c_str(), 65534, 65534) == 0);
    REQUIRE(::chmod(d.c_str(), 0755) == 0);
    REQUIRE(!make_private_dir(d, err));
    REQUIRE(err == d + ": permission denied: owned by UID 65534");
    REQUIRE(::stat(d.c_str(), &st) == 0);
    REQUIRE((st.st_mode & 0777) == 0755);
}
