// uring_udp_harness.hpp: what the [uring] unit tests (test_uring_udp*.cpp) share: datagrams with
// a pattern, a recording handler, the loop that pumps ports, the receive modes this kernel has,
// a GSO/GRO length mix and its check, and a pair with a tiny provided-buffer ring.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "uring_udp.hpp"

namespace uring_udp_test {

using namespace iccs;

inline constexpr Ipv4Addr kLoopback{0x7f000001};

inline uint8_t pattern(uint32_t i, uint32_t k) { return static_cast<uint8_t>(i * 31 + k * 7 + (k >> 8)); }

inline PktBuf* make_dgram(PktPool& pool, uint32_t i, uint32_t len) {
    PktBuf* p = pkt_alloc(pool);
    REQUIRE(p != nullptr);
    std::vector<uint8_t> b(len);
    for (uint32_t k = 0; k < len; ++k) b[k] = pattern(i, k);
    REQUIRE(pkt_write(p, pool, b.data(), len));
    return p;
}

struct Recorder : UdpHandler {
    std::vector<std::vector<uint8_t>> payloads;
    std::vector<UdpMeta> metas;
    uint32_t bursts = 0;
    void udp_deliver(PktBuf* p, const UdpMeta& m, uint64_t) override {
        std::vector<uint8_t> b(p->pkt_len);
        pkt_read(p, 0, p->pkt_len, b.data());
        payloads.push_back(std::move(b));
        metas.push_back(m);
        pkt_free(p);
    }
    void end_of_burst(uint64_t) override { ++bursts; }
};

// Runs the ports' loops (reap, input, flush) at least once, then until done() or 5 s pass.
// max: datagrams per rx_burst (1..32).
inline bool pump(std::vector<UringUdpPort*> ports, const std::function<bool()>& done, uint32_t max = 32) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    PktBuf* got[32];
    do {
        if (std::chrono::steady_clock::now() > end) return false;
        for (UringUdpPort* u : ports) {
            const uint32_t n = u->rx_burst(got, max);
            if (n > 0) u->input_burst(got, n, 0);
            u->flush();
        }
    } while (!done());
    return true;
}

inline std::vector<UringRxMode> modes() {
    UringCaps caps;
    std::string err;
    REQUIRE(uring_probe(caps, err));
    std::vector<UringRxMode> m{UringRxMode::kBatched};
    if (caps.multishot_recvmsg) m.push_back(UringRxMode::kMultishot);
    else WARN("this kernel has no multishot recvmsg: only the batched receive is tested");
    return m;
}

inline const char* mode_name(UringRxMode m) { return m == UringRxMode::kMultishot ? "multishot" : "batched"; }

// Lengths that exercise GSO/GRO: runs of one length (longer than a send's 64 datagrams), a
// shorter one ending a run, a longer one, lengths over the GSO limit, empty ones.
inline std::vector<uint32_t> gso_mix() {
    std::vector<uint32_t> sent;
    auto run = [&](uint32_t count, uint32_t len) {
        for (uint32_t j = 0; j < count; ++j) sent.push_back(len);
    };
    run(150, 100);
    run(1, 37);
    run(20, 1000);
    run(3, 1472);
    run(3, 1473);
    run(2, 0);
    run(70, 64);
    run(1, 65);
    run(5, 9000);
    run(40, 1);
    return sent;
}

// Datagram i of sent[i] bytes (pattern(i, k)) from a to b, each exactly once, in order.
inline void check_received(const Recorder& rec, const std::vector<uint32_t>& sent, const UringUdpPort& a) {
    REQUIRE(rec.payloads.size() == sent.size());
    for (uint32_t i = 0; i < sent.size(); ++i) {
        INFO("datagram " << i << " of " << sent[i] << " bytes");
        REQUIRE(rec.payloads[i].size() == sent[i]);  // loopback keeps the order
        bool same = true;
        for (uint32_t k = 0; k < sent[i] && same; ++k) same = rec.payloads[i][k] == pattern(i, k);
        REQUIRE(same);
        CHECK(rec.metas[i].src_port == a.port());
    }
}

// Sends sent[] from a to b and pumps both (rx_burst of at most max) until b has them all and a's
// sends are done (a zero-copy send: its notification came too).
inline void send_all(UringUdpPort& a, UringUdpPort& b, PktPool& pool, const std::vector<uint32_t>& sent,
              const Recorder& rec, uint32_t max = 32) {
    for (uint32_t i = 0; i < sent.size(); ++i)
        REQUIRE(a.udp_output(make_dgram(pool, i, sent[i]), 0, kLoopback, b.port()));
    const bool done = pump({&a, &b}, [&] { return rec.payloads.size() >= sent.size() && a.tx_idle(); }, max);
    if (!done) {
        std::string why;
        a.counters().for_each([&](const char* n, const char*, uint64_t v) { if (v) why += std::string(n) + "=" + std::to_string(v) + " "; });
        why += "| b: ";
        b.counters().for_each([&](const char* n, const char*, uint64_t v) { if (v) why += std::string(n) + "=" + std::to_string(v) + " "; });
        FAIL("received " << rec.payloads.size() << " of " << sent.size() << "; a: " << why);
    }
}

// The tiny-buffer-ring cases need multishot recvmsg; without it they say so and pass.
inline bool multishot_or_warn() {
    UringCaps caps;
    std::string err;
    REQUIRE(uring_probe(caps, err));
    if (!caps.multishot_recvmsg) WARN("no multishot recvmsg on this kernel: nothing to test");
    return caps.multishot_recvmsg;
}

// Sender a and receiver b on loopback, b with multishot recvmsg over a provided-buffer ring of
// two buffers, bound to rec and armed before anything arrives.
struct TinyRingPair {
    std::unique_ptr<UringUdpPort> a, b;
    Recorder rec;
    explicit TinyRingPair(PktPool& pool) {
        std::string err;
        UringUdpConfig ca, cb;
        cb.rx_mode = UringRxMode::kMultishot;
        cb.rx_buffers = 2;
        a = UringUdpPort::open(ca, pool, pool, err);
        b = UringUdpPort::open(cb, pool, pool, err);
        REQUIRE(a);
        REQUIRE(b);
        b->bind(b->port(), &rec);
        pump({b.get()}, [&] { return true; });
    }
};

}  // namespace uring_udp_test
