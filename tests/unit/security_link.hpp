// security_link.hpp: the fixture of the [security] unit tests (test_security*.cpp): two stacks
// joined by hand, so a test can record what crosses, forge frames from a's addresses with a
// third stack, and compare b's state before and after.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "mem_wire.hpp"
#include "slidwin_endpoint.hpp"
#include "stack.hpp"

namespace security_test {

using namespace iccs;

inline constexpr uint16_t kPort = 9410;

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
    // A slidwin datagram from a's address and port to b's, as a forger on the segment builds it
    // (with kSwAuth a made-up auth block; a SYN gets its handshake block: nonce, echo).
    Frame forge(uint8_t flags, uint32_t seq, uint32_t ack, uint64_t token, uint32_t payload = 0, uint32_t tsval = 0,
                uint64_t nonce = 0x5eed, uint64_t echo = 0, uint64_t sack = 0, uint16_t subconn = 0) {
        PktBuf* m = pkt_alloc(pool_f);
        SlidwinHdr h{};
        h.version = kSlidwinVersion;
        h.flags = flags;
        h.subconn = be16::of(subconn);
        h.seq = be32::of(seq);
        h.ack = be32::of(ack);
        h.wnd = be16::of(1024);
        h.sack = be64::of(sack);
        h.tsval = be32::of(tsval);
        h.token = be64::of(token);
        store_hdr(pkt_append(m, kSlidwinHdrLen), h);
        if (flags & kSwAuth) std::memset(pkt_append(m, kSlidwinAuthLen), 0x42, kSlidwinAuthLen);  // a made-up block
        if (flags & kSwSyn) store_hdr(pkt_append(m, kSlidwinSynBlkLen), SlidwinSynBlk{be64::of(nonce), be64::of(echo)});
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


inline SlidwinAuthKey test_key(bool encrypt) {
    uint8_t bytes[32];
    for (int i = 0; i < 32; ++i) bytes[i] = static_cast<uint8_t>(i * 37 + 11);
    std::string err;
    const auto k = slidwin_key_from_bytes(bytes, sizeof bytes, encrypt, "(test key)", err);
    REQUIRE(k != nullptr);
    return *k;
}

inline bool contains(const Frame& f, const char* s) {
    const size_t n = std::strlen(s);
    return std::search(f.begin(), f.end(), s, s + n) != f.end();
}


}  // namespace security_test
