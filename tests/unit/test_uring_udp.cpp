// The io_uring UDP port (proxy/uring_udp.hpp) over loopback, without DPDK: bursts arrive byte for
// byte with their addresses, in both receive modes; a multishot receive ended by ENOBUFS (a tiny
// provided-buffer ring) is armed again and loses nothing; sends beyond the send slots wait and
// go; oversize and truncated datagrams, and those the kernel dropped, are counted; a refused
// io_uring gives the one clear line; slidwin runs unchanged over two ports (SlidwinPair); a
// deferred-task-run ring opened by one thread works when another polls it; zero-copy sends
// arrive whole (and are copied on loopback); a dry buffer ring under GRO and an empty RX pool
// lose nothing uncounted. Every test ends with a leak check.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "slidwin_endpoint.hpp"
#include "timer_wheel.hpp"
#include "uring_udp.hpp"

using namespace iccs;

namespace {

constexpr Ipv4Addr kLoopback{0x7f000001};

uint8_t pattern(uint32_t i, uint32_t k) { return static_cast<uint8_t>(i * 31 + k * 7 + (k >> 8)); }

PktBuf* make_dgram(PktPool& pool, uint32_t i, uint32_t len) {
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
bool pump(std::vector<UringUdpPort*> ports, const std::function<bool()>& done, uint32_t max = 32) {
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

std::vector<UringRxMode> modes() {
    UringCaps caps;
    std::string err;
    REQUIRE(uring_probe(caps, err));
    std::vector<UringRxMode> m{UringRxMode::kBatched};
    if (caps.multishot_recvmsg) m.push_back(UringRxMode::kMultishot);
    else WARN("this kernel has no multishot recvmsg: only the batched receive is tested");
    return m;
}

const char* mode_name(UringRxMode m) { return m == UringRxMode::kMultishot ? "multishot" : "batched"; }

// Lengths that exercise GSO/GRO: runs of one length (longer than a send's 64 datagrams), a
// shorter one ending a run, a longer one, lengths over the GSO limit, empty ones.
std::vector<uint32_t> gso_mix() {
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
void check_received(const Recorder& rec, const std::vector<uint32_t>& sent, const UringUdpPort& a) {
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
void send_all(UringUdpPort& a, UringUdpPort& b, PktPool& pool, const std::vector<uint32_t>& sent,
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

}  // namespace

TEST_CASE("uring: a burst over loopback arrives byte for byte, with its addresses", "[uring]") {
    for (const UringRxMode mode : modes()) {
        SECTION(mode_name(mode)) {
            HeapPktPool pool(4096, 2048 + kPktHeadroom);
            {
                UringUdpConfig ca, cb;
                cb.rx_mode = mode;
                std::string err;
                auto a = UringUdpPort::open(ca, pool, pool, err);
                REQUIRE(a);
                auto b = UringUdpPort::open(cb, pool, pool, err);
                REQUIRE(b);
                CHECK(b->rx_mode() == mode);
                CHECK(b->describe().find(mode == UringRxMode::kMultishot ? "multishot recvmsg" : "batched recvmsg") !=
                      std::string::npos);
                Recorder rec;
                b->bind(b->port(), &rec);
                pump({b.get()}, [&] { return true; });  // arm b's receive from this thread
                const std::vector<uint32_t> sizes{0, 1, 100, 1472, 2047, 2048, 2049, 9000, 30000, 65507};
                std::vector<uint32_t> sent;
                for (uint32_t i = 0; i < 40; ++i) {
                    const uint32_t len = sizes[i % sizes.size()];
                    CHECK(a->udp_output(make_dgram(pool, i, len), 0, kLoopback, b->port()));
                    sent.push_back(len);
                }
                REQUIRE(pump({a.get(), b.get()}, [&] { return rec.payloads.size() == sent.size() && a->tx_idle(); }));
                for (uint32_t i = 0; i < sent.size(); ++i) {
                    INFO("datagram " << i << " of " << sent[i] << " bytes");
                    REQUIRE(rec.payloads[i].size() == sent[i]);  // loopback keeps the order
                    bool same = true;
                    for (uint32_t k = 0; k < sent[i] && same; ++k) same = rec.payloads[i][k] == pattern(i, k);
                    CHECK(same);
                    CHECK(rec.metas[i].src == kLoopback);
                    CHECK(rec.metas[i].src_port == a->port());
                    CHECK(rec.metas[i].dst_port == b->port());
                }
                CHECK(a->counters().tx_datagrams == 40);
                CHECK(b->counters().rx_datagrams == 40);
                CHECK(a->counters().tx_errors == 0);
                CHECK(b->counters().rx_errors == 0);
                CHECK(rec.bursts > 0);
                // one system call per loop iteration at most: far fewer than datagrams
                CHECK(a->counters().submits <= 40);
            }
            CHECK(pool.in_use() == 0);
        }
    }
}

// The tiny-buffer-ring cases need multishot recvmsg; without it they say so and pass.
static bool multishot_or_warn() {
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

TEST_CASE("uring: ENOBUFS ends the multishot receive; it is armed again and nothing is lost", "[uring]") {
    if (!multishot_or_warn()) return;
    HeapPktPool pool(4096, 2048 + kPktHeadroom);
    {
        TinyRingPair pair(pool);  // a tiny provided-buffer ring
        auto& a = pair.a;
        auto& b = pair.b;
        Recorder& rec = pair.rec;
        for (uint32_t i = 0; i < 64; ++i) CHECK(a->udp_output(make_dgram(pool, i, 100 + i), 0, kLoopback, b->port()));
        REQUIRE(pump({a.get()}, [&] { return a->tx_idle(); }));  // all 64 wait in b's socket now
        REQUIRE(pump({a.get(), b.get()}, [&] { return rec.payloads.size() == 64; }));
        for (uint32_t i = 0; i < 64; ++i) {
            REQUIRE(rec.payloads[i].size() == 100 + i);
            CHECK(rec.payloads[i][5] == pattern(i, 5));
        }
        CHECK(b->counters().rx_nobufs >= 1);
        CHECK(b->counters().rx_arms >= 2);
        CHECK(b->counters().rx_errors == 0);
    }
    CHECK(pool.in_use() == 0);
}

TEST_CASE("uring: sends beyond the send slots wait in the queue and all go", "[uring]") {
    HeapPktPool pool(4096, 2048 + kPktHeadroom);
    {
        UringUdpConfig ca, cb;
        ca.tx_slots = 4;
        ca.gso = false;  // one datagram per send slot
        std::string err;
        auto a = UringUdpPort::open(ca, pool, pool, err);
        auto b = UringUdpPort::open(cb, pool, pool, err);
        REQUIRE(a);
        REQUIRE(b);
        Recorder rec;
        b->bind(b->port(), &rec);
        pump({b.get()}, [&] { return true; });
        for (uint32_t i = 0; i < 200; ++i) CHECK(a->udp_output(make_dgram(pool, i, 64), 0, kLoopback, b->port()));
        CHECK(!a->tx_idle());
        REQUIRE(pump({a.get(), b.get()}, [&] { return rec.payloads.size() == 200 && a->tx_idle(); }));
        CHECK(a->counters().tx_waits > 0);
        CHECK(a->counters().tx_datagrams == 200);
    }
    CHECK(pool.in_use() == 0);
}

TEST_CASE("uring: oversize, truncated and unbound datagrams are dropped and counted", "[uring]") {
    for (const UringRxMode mode : modes()) {
        SECTION(mode_name(mode)) {
            HeapPktPool pool(4096, 2048 + kPktHeadroom);
            {
                UringUdpConfig ca, cb;
                cb.rx_mode = mode;
                cb.rx_buffer_bytes = 256;
                ca.gso = false;  // one datagram per receive buffer (GRO would join the two below)
                std::string err;
                auto a = UringUdpPort::open(ca, pool, pool, err);
                auto b = UringUdpPort::open(cb, pool, pool, err);
                REQUIRE(a);
                REQUIRE(b);
                Recorder rec;
                b->bind(b->port(), &rec);
                pump({b.get()}, [&] { return true; });
                CHECK(!a->udp_output(make_dgram(pool, 0, kUdpMaxPayload + 1), 0, kLoopback, b->port()));
                CHECK(a->counters().tx_drop_too_big == 1);
                CHECK(a->udp_output(make_dgram(pool, 1, 1000), 0, kLoopback, b->port()));  // longer than b's buffers
                CHECK(a->udp_output(make_dgram(pool, 2, 200), 0, kLoopback, b->port()));
                REQUIRE(pump({a.get(), b.get()}, [&] { return rec.payloads.size() == 1; }));
                CHECK(rec.payloads[0].size() == 200);
                CHECK(b->counters().rx_drop_trunc == 1);
                // a datagram for a port nobody bound
                b->bind(b->port(), nullptr);
                CHECK(a->udp_output(make_dgram(pool, 3, 10), 0, kLoopback, b->port()));
                REQUIRE(pump({a.get(), b.get()}, [&] { return b->counters().rx_drop_port == 1; }));
                CHECK(rec.payloads.size() == 1);
            }
            CHECK(pool.in_use() == 0);
        }
    }
}

TEST_CASE("uring: datagrams the kernel dropped for a full socket buffer are counted", "[uring]") {
    HeapPktPool pool(4096, 2048 + kPktHeadroom);
    {
        UringUdpConfig ca, cb;
        cb.socket_buffer_bytes = 4096;  // the kernel's smallest receive buffer
        ca.gso = false;  // the kernel counts the buffers it drops: a GSO send is one
        std::string err;
        auto a = UringUdpPort::open(ca, pool, pool, err);
        auto b = UringUdpPort::open(cb, pool, pool, err);
        REQUIRE(a);
        REQUIRE(b);
        // b never receives: after a few datagrams its socket is full and the kernel drops the rest.
        for (uint32_t i = 0; i < 200; ++i) CHECK(a->udp_output(make_dgram(pool, i, 1000), 0, kLoopback, b->port()));
        REQUIRE(pump({a.get()}, [&] { return a->tx_idle(); }));
        b->sample_kernel_drops(uint64_t{1} << 62);
        CHECK(b->counters().rx_kernel_drops > 100);
        CHECK(a->counters().tx_datagrams == 200);  // UDP: the sender never knows
    }
    CHECK(pool.in_use() == 0);
}

TEST_CASE("uring: a refused io_uring fails at open with the message that names the alternative", "[uring]") {
    HeapPktPool pool(64, 2048 + kPktHeadroom);
    setenv("ICCS_URING_DISABLE", "1", 1);
    std::string err;
    UringCaps caps;
    const bool probed = uring_probe(caps, err);
    auto port = UringUdpPort::open(UringUdpConfig{}, pool, pool, err);
    unsetenv("ICCS_URING_DISABLE");
    CHECK(!probed);
    CHECK(!port);
    CHECK_THAT(err, Catch::StartsWith("fabric \"udp\" needs io_uring, which this kernel refused (io_uring_queue_init: "
                                      "Operation not permitted); use fabric = \"memif\" or \"af_packet\""));
    CHECK(pool.in_use() == 0);
    // and with the variable gone it works again
    CHECK(uring_probe(caps, err));
}

TEST_CASE("uring: a port already taken is refused with the address and what to change", "[uring]") {
    HeapPktPool pool(64, 2048 + kPktHeadroom);
    std::string err;
    auto a = UringUdpPort::open(UringUdpConfig{}, pool, pool, err);
    REQUIRE(a);
    UringUdpConfig same;
    same.port = a->port();
    auto b = UringUdpPort::open(same, pool, pool, err);
    CHECK(!b);
    CHECK_THAT(err, Catch::Contains("127.0.0.1:" + std::to_string(a->port())) &&
                        Catch::Contains("Address already in use") && Catch::Contains("[machine] udp_port"));
}

namespace {
struct InOrderSink : SlidwinSink {
    uint32_t next = 0, bad = 0;
    bool on_message(SubConnection&, PktBuf* m) override {
        uint32_t i = UINT32_MAX;
        pkt_read(m, 0, 4, &i);
        bool ok = i == next;
        for (uint32_t k = 4; k < m->pkt_len && ok; k += 97) {
            uint8_t v = 0;
            pkt_read(m, k, 1, &v);
            ok = v == pattern(i, k);
        }
        if (!ok) ++bad;
        ++next;
        pkt_free(m);
        return true;
    }
};

// Two io_uring UDP sockets with a slidwin endpoint each and one sub-connection a -> b (and its
// reverse), stepped by hand: the set-up both slidwin tests share.
struct SlidwinPair {
    std::unique_ptr<UringUdpPort> a, b;
    std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    TimerWheel wa{10'000, 1024, 0}, wb{10'000, 1024, 0};
    InOrderSink sa, sb;
    std::unique_ptr<SlidwinEndpoint> ea, eb;
    SubConnection* ca = nullptr;

    explicit SlidwinPair(PktPool& pool, const UringUdpConfig& cfg = UringUdpConfig{}) {
        std::string err;
        a = UringUdpPort::open(cfg, pool, pool, err);
        REQUIRE(a);
        b = UringUdpPort::open(cfg, pool, pool, err);
        REQUIRE(b);
        const SlidwinConfig sc;
        ea = std::make_unique<SlidwinEndpoint>(*a, wa, a->port(), sc, sa);
        eb = std::make_unique<SlidwinEndpoint>(*b, wb, b->port(), sc, sb);
        ca = ea->open(0, kLoopback, b->port(), 0, 0);
        eb->open(0, kLoopback, a->port(), 0, 0);
        REQUIRE(ca != nullptr);
    }
    uint64_t now() const {
        return static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    }
    // One loop iteration of each side (reap, input, timers, flush); lose(p) true: p was taken
    // out (freed by it) before the endpoint saw it.
    void step(uint64_t t, const std::function<bool(PktBuf*)>& lose = {}) {
        PktBuf* got[32];
        for (auto [u, w] : {std::pair{a.get(), &wa}, std::pair{b.get(), &wb}}) {
            uint32_t n = u->rx_burst(got, 32), kept = 0;
            for (uint32_t j = 0; j < n; ++j)
                if (!lose || !lose(got[j])) got[kept++] = got[j];
            n = kept;
            if (n > 0) u->input_burst(got, n, t);
            w->advance(t);
            u->flush();
        }
    }
    // The last sends complete before the sockets go.
    void drain() { REQUIRE(pump({a.get(), b.get()}, [&] { return a->tx_idle() && b->tx_idle(); })); }
};
}  // namespace

TEST_CASE("uring: slidwin runs unchanged over two io_uring UDP sockets", "[uring]") {
    HeapPktPool pool(16384, 2048 + kPktHeadroom);
    {
        SlidwinPair s(pool);
        constexpr uint32_t kMsgs = 3000;
        uint32_t sent = 0;
        PktBuf* pending = nullptr;
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while ((s.sb.next < kMsgs || s.ca->unacked() > 0) && std::chrono::steady_clock::now() < end) {
            const uint64_t t = s.now();
            while (sent < kMsgs) {
                if (pending == nullptr) {
                    const uint32_t len = 4 + (sent * 7919u) % 9000u;
                    pending = make_dgram(pool, sent, len);
                    std::memcpy(pending->data(), &sent, 4);
                }
                if (slidwin_send(*s.ca, pending, t) != SlidwinSendResult::kOk) break;
                pending = nullptr;
                ++sent;
            }
            s.step(t);
        }
        CHECK(s.sb.next == kMsgs);
        CHECK(s.sb.bad == 0);
        CHECK(s.ca->unacked() == 0);
        if (pending != nullptr) pkt_free(pending);
        s.drain();
    }
    CHECK(pool.in_use() == 0);
}

TEST_CASE("uring: GSO sends runs to one peer in few sendmsg, GRO cuts them apart, byte for byte", "[uring]") {
    for (const UringRxMode mode : modes()) {
        for (const bool gso : {true, false}) {
            SECTION(std::string(mode_name(mode)) + (gso ? ", gso on" : ", gso off")) {
                HeapPktPool pool(4096, 2048 + kPktHeadroom);
                {
                    UringUdpConfig ca, cb;
                    ca.gso = gso;
                    cb.rx_mode = mode;
                    std::string err;
                    auto a = UringUdpPort::open(ca, pool, pool, err);
                    auto b = UringUdpPort::open(cb, pool, pool, err);
                    REQUIRE(a);
                    REQUIRE(b);
                    if (gso && !a->gso()) WARN("this kernel refused UDP_SEGMENT: GSO is not tested");
                    Recorder rec;
                    b->bind(b->port(), &rec);
                    pump({b.get()}, [&] { return true; });
                    const std::vector<uint32_t> sent = gso_mix();
                    send_all(*a, *b, pool, sent, rec);
                    check_received(rec, sent, *a);
                    const UringUdpCounters& ta = a->counters();
                    const UringUdpCounters& rb = b->counters();
                    CHECK(ta.tx_datagrams == sent.size());
                    CHECK(ta.tx_errors == 0);
                    CHECK(rb.rx_datagrams == sent.size());
                    if (a->gso()) {
                        CHECK(ta.tx_gso_sends > 0);
                        CHECK(ta.tx_gso_datagrams > 150);
                        CHECK(ta.tx_gso_refused == 0);
                    } else {
                        CHECK(ta.tx_gso_sends == 0);
                    }
                    if (mode == UringRxMode::kBatched) CHECK_FALSE(b->gro());
                    if (a->gso() && b->gro()) CHECK(rb.rx_gro_buffers > 0);  // loopback keeps a GSO send whole
                    CHECK(rb.rx_gro_datagrams <= ta.tx_gso_datagrams);
                    CHECK(rb.rx_errors == 0);
                    CHECK(rb.rx_drop_nopool == 0);
                }
                CHECK(pool.in_use() == 0);
            }
        }
    }
}

TEST_CASE("uring: slidwin over GSO/GRO sockets with loss delivers every message once, in order", "[uring]") {
    // Either loss: the second once stalled slidwin for good (its timeouts resent 32 datagrams and
    // drew one ack, 33 frames each time; stack/README.md, "Periodic loss").
    bool every_11th = false;
    SECTION("2% pseudo-random loss") {}
    SECTION("every 11th datagram, one count for both ways") { every_11th = true; }
    HeapPktPool pool(16384, 2048 + kPktHeadroom);
    {
        SlidwinPair s(pool);
        constexpr uint32_t kMsgs = 20000;
        uint32_t sent = 0, seen = 0, dropped = 0;
        // loss: 2% of the datagrams either way (a fixed pseudo-random draw) or exactly every
        // 11th, cut out of GRO buffers as any other
        auto lose = [&](PktBuf* p) {
            uint64_t z = ++seen * 0x9e3779b97f4a7c15ull;
            z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
            if (!(every_11th ? seen % 11 == 0 : (z >> 40) % 50 == 0)) return false;
            pkt_free(p);
            ++dropped;
            return true;
        };
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while ((s.sb.next < kMsgs || s.ca->unacked() > 0) && std::chrono::steady_clock::now() < end) {
            const uint64_t t = s.now();
            while (sent < kMsgs) {  // one length: runs that GSO sends together
                PktBuf* m = make_dgram(pool, sent, 100);
                std::memcpy(m->data(), &sent, 4);
                if (slidwin_send(*s.ca, m, t) != SlidwinSendResult::kOk) {
                    pkt_free(m);
                    break;
                }
                ++sent;
            }
            s.step(t, lose);
        }
        CHECK(s.sb.next == kMsgs);
        CHECK(s.sb.bad == 0);
        CHECK(s.ca->unacked() == 0);
        CHECK(dropped > 0);
        if (s.a->gso()) CHECK(s.a->counters().tx_gso_sends > 0);
        if (s.a->gso() && s.b->gro()) CHECK(s.b->counters().rx_gro_datagrams > 0);
        s.drain();
    }
    CHECK(pool.in_use() == 0);
}

TEST_CASE("uring: an SQPOLL ring sends and receives as the plain one", "[uring]") {
    HeapPktPool pool(4096, 2048 + kPktHeadroom);
    {
        UringUdpConfig ca, cb;
        ca.sqpoll = cb.sqpoll = true;
        std::string err;
        auto a = UringUdpPort::open(ca, pool, pool, err);
        if (!a) {
            // a kernel or sandbox without SQPOLL: the one clear line naming the key
            CHECK_THAT(err, Catch::Contains("[machine] udp_sqpoll = true"));
            WARN("SQPOLL refused here: " << err);
            return;
        }
        auto b = UringUdpPort::open(cb, pool, pool, err);
        REQUIRE(b);
        CHECK_THAT(a->describe(), Catch::Contains("SQPOLL"));
        Recorder rec;
        b->bind(b->port(), &rec);
        pump({b.get()}, [&] { return true; });
        for (uint32_t i = 0; i < 300; ++i) REQUIRE(a->udp_output(make_dgram(pool, i, 1 + i % 1500), 0, kLoopback, b->port()));
        REQUIRE(pump({a.get(), b.get()}, [&] { return rec.payloads.size() == 300 && a->tx_idle(); }));
        for (uint32_t i = 0; i < 300; ++i) {
            REQUIRE(rec.payloads[i].size() == 1 + i % 1500);
            bool same = true;
            for (uint32_t k = 0; k < rec.payloads[i].size() && same; ++k) same = rec.payloads[i][k] == pattern(i, k);
            REQUIRE(same);
        }
    }
    CHECK(pool.in_use() == 0);
}

TEST_CASE("uring: a deferred-task-run ring opened by one thread and polled by another, byte for byte", "[uring]") {
    UringCaps caps;
    std::string err;
    REQUIRE(uring_probe(caps, err));
    bool off = false, same_thread = false;
    SECTION("on") {}
    SECTION("on, polled and destroyed by the opener (cancels and waits at close)") { same_thread = true; }
    SECTION("ICCS_URING_DEFER=0") { off = true; }
    if (off) setenv("ICCS_URING_DEFER", "0", 1);
    HeapPktPool pool(4096, 2048 + kPktHeadroom);
    {
        UringUdpConfig c;
        c.single_issuer = true;
        auto a = UringUdpPort::open(c, pool, pool, err);  // opened here, as the cluster's main thread does
        REQUIRE(a);
        auto b = UringUdpPort::open(c, pool, pool, err);
        REQUIRE(b);
        unsetenv("ICCS_URING_DEFER");
        if (off) {
            CHECK_FALSE(a->defer_taskrun());
            CHECK_THAT(a->describe(), Catch::Contains("deferred task run off: ICCS_URING_DEFER=0"));
        } else if (caps.defer_taskrun) {
            CHECK(a->defer_taskrun());
            CHECK_THAT(a->describe(), Catch::Contains("deferred task run (single issuer)"));
        } else {
            WARN("this kernel refused DEFER_TASKRUN: " << a->describe());
            CHECK_THAT(a->describe(), Catch::Contains("refused by this kernel"));
        }
        Recorder rec;
        b->bind(b->port(), &rec);
        const std::vector<uint32_t> sent = gso_mix();
        // the one polling thread (a proxy's): the first poll enables the rings and owns them
        auto poll = [&] {
            pump({b.get()}, [&] { return true; });
            send_all(*a, *b, pool, sent, rec);
        };
        if (same_thread) {
            poll();
        } else {
            std::thread poller(poll);
            poller.join();
        }
        check_received(rec, sent, *a);
        const UringUdpCounters& ca = a->counters();
        CHECK(ca.submit_errors == 0);
        CHECK(b->counters().submit_errors == 0);
        CHECK(ca.tx_datagrams == sent.size());
        // at most one system call per loop iteration
        CHECK(ca.flushes > 0);
        CHECK(ca.submits <= ca.flushes);
        // destroyed here, after the poller ended (its exit cancelled what it had in flight)
    }
    CHECK(pool.in_use() == 0);
}

TEST_CASE("uring: zero-copy sends arrive byte for byte; over loopback the kernel copies them", "[uring]") {
    UringCaps caps;
    std::string err;
    REQUIRE(uring_probe(caps, err));
    for (const UringRxMode mode : modes()) {
        SECTION(mode_name(mode)) {
            HeapPktPool pool(4096, 2048 + kPktHeadroom);
            {
                UringUdpConfig ca, cb;
                ca.zc_send = true;
                cb.rx_mode = mode;
                auto a = UringUdpPort::open(ca, pool, pool, err);
                REQUIRE(a);
                auto b = UringUdpPort::open(cb, pool, pool, err);
                REQUIRE(b);
                if (!caps.send_zc) {
                    WARN("no IORING_OP_SENDMSG_ZC here: " << a->describe());
                    CHECK_THAT(a->describe(), Catch::Contains("zero-copy sendmsg refused"));
                    return;
                }
                CHECK_THAT(a->describe(), Catch::Contains("zero-copy sendmsg"));
                Recorder rec;
                b->bind(b->port(), &rec);
                pump({b.get()}, [&] { return true; });
                const std::vector<uint32_t> sent = gso_mix();
                send_all(*a, *b, pool, sent, rec);
                check_received(rec, sent, *a);
                const UringUdpCounters& t = a->counters();
                CHECK(a->zc_send());
                CHECK(t.tx_errors == 0);
                CHECK(t.tx_datagrams == sent.size());
                CHECK(t.tx_zc_sends > 0);
                // a send's buffers stay held until its notification: all are back (tx_idle above);
                // over loopback the kernel copies every one (its notification says so)
                CHECK(t.tx_zc_copied == t.tx_zc_sends);
            }
            CHECK(pool.in_use() == 0);
        }
    }
}

TEST_CASE("uring: a provided-buffer ring that runs out while GRO buffers are cut apart loses nothing", "[uring]") {
    if (!multishot_or_warn()) return;
    HeapPktPool pool(4096, 2048 + kPktHeadroom);
    {
        TinyRingPair pair(pool);  // two buffers: a GRO buffer held while cut apart leaves one
        auto& a = pair.a;
        auto& b = pair.b;
        Recorder& rec = pair.rec;
        const std::vector<uint32_t> sent = gso_mix();
        // all sent before b reaps anything: they wait in b's socket, the ring runs dry at once
        for (uint32_t i = 0; i < sent.size(); ++i)
            REQUIRE(a->udp_output(make_dgram(pool, i, sent[i]), 0, kLoopback, b->port()));
        REQUIRE(pump({a.get()}, [&] { return a->tx_idle(); }));
        // 3 datagrams per rx_burst: GRO buffers are cut apart over many bursts
        REQUIRE(pump({a.get(), b.get()}, [&] { return rec.payloads.size() >= sent.size(); }, 3));
        check_received(rec, sent, *a);
        const UringUdpCounters& r = b->counters();
        CHECK(r.rx_nobufs >= 1);  // counted, and the receive armed again
        CHECK(r.rx_arms >= 2);
        CHECK(r.rx_datagrams == sent.size());
        CHECK(r.rx_errors == 0);
        CHECK(r.rx_drop_nopool == 0);
        if (a->gso() && b->gro()) CHECK(r.rx_gro_buffers > 0);
        b->sample_kernel_drops(uint64_t{1} << 62);
        CHECK(r.rx_kernel_drops == 0);
    }
    CHECK(pool.in_use() == 0);
}

TEST_CASE("uring: datagrams that find the RX pool empty are dropped and counted, never lost silently", "[uring]") {
    for (const UringRxMode mode : modes()) {
        SECTION(mode_name(mode)) {
            HeapPktPool tx_pool(256, 2048 + kPktHeadroom), rx_pool(16, 2048 + kPktHeadroom);
            std::vector<PktBuf*> held;
            {
                UringUdpConfig ca, cb;
                cb.rx_mode = mode;
                std::string err;
                auto a = UringUdpPort::open(ca, tx_pool, tx_pool, err);
                auto b = UringUdpPort::open(cb, rx_pool, rx_pool, err);
                REQUIRE(a);
                REQUIRE(b);
                pump({b.get()}, [&] { return true; });
                constexpr uint32_t kSent = 40;
                for (uint32_t i = 0; i < kSent; ++i)
                    REQUIRE(a->udp_output(make_dgram(tx_pool, i, 100), 0, kLoopback, b->port()));
                // b holds what it receives: after 16 its pool is empty
                PktBuf* got[32];
                const UringUdpCounters& r = b->counters();
                REQUIRE(pump({a.get()}, [&] {
                    const uint32_t n = b->rx_burst(got, 32);
                    held.insert(held.end(), got, got + n);
                    b->flush();
                    return r.rx_datagrams + r.rx_drop_nopool == kSent && a->tx_idle();
                }));
                CHECK(held.size() == 16);
                CHECK(r.rx_datagrams == 16);
                CHECK(r.rx_drop_nopool == kSent - 16);
                for (uint32_t i = 0; i < held.size(); ++i) {  // the first 16, whole
                    CHECK(held[i]->pkt_len == kDgramAddrLen + 100);
                    uint8_t v = 0;
                    pkt_read(held[i], kDgramAddrLen + 50, 1, &v);
                    CHECK(v == pattern(i, 50));
                }
                for (PktBuf* p : held) pkt_free(p);
            }
            CHECK(tx_pool.in_use() == 0);
            CHECK(rx_pool.in_use() == 0);
        }
    }
}

namespace {

// Datagrams that carry their index in their first 4 bytes (then pattern(i, k)), so a receiver
// that may see two paths interleave can tell each one apart: lengths >= 4, GSO runs among them.
std::vector<uint32_t> indexed_mix() {
    std::vector<uint32_t> sent;
    for (uint32_t len : gso_mix())
        if (len >= 4) sent.push_back(len);
    sent.push_back(65507);  // the largest datagram, alone in its receive buffer
    return sent;
}

// Sender a and receiver b (bound to rec) on loopback, opened with ca and cb.
struct PortPair {
    std::unique_ptr<UringUdpPort> a, b;
    Recorder rec;
    PortPair(PktPool& pool, const UringUdpConfig& ca, const UringUdpConfig& cb) {
        std::string err;
        a = UringUdpPort::open(ca, pool, pool, err);
        b = UringUdpPort::open(cb, pool, pool, err);
        REQUIRE(a);
        REQUIRE(b);
        b->bind(b->port(), &rec);
    }
};

PktBuf* make_indexed(PktPool& pool, uint32_t i, uint32_t len) {
    std::vector<uint8_t> b(len);
    for (uint32_t k = 0; k < len; ++k) b[k] = pattern(i, k);
    std::memcpy(b.data(), &i, sizeof i);
    PktBuf* p = pkt_alloc(pool);
    REQUIRE(p != nullptr);
    REQUIRE(pkt_write(p, pool, b.data(), len));
    return p;
}

// Every datagram of sent[] (base + index) exactly once and byte for byte, in any order.
void check_once(const Recorder& rec, const std::vector<uint32_t>& sent, uint32_t base, size_t from = 0) {
    REQUIRE(rec.payloads.size() - from == sent.size());
    std::vector<uint32_t> seen(sent.size(), 0);
    for (size_t r = from; r < rec.payloads.size(); ++r) {
        const std::vector<uint8_t>& b = rec.payloads[r];
        REQUIRE(b.size() >= 4);
        uint32_t i;
        std::memcpy(&i, b.data(), sizeof i);
        REQUIRE(i >= base);
        REQUIRE(i - base < sent.size());
        INFO("datagram " << i << " of " << sent[i - base] << " bytes");
        ++seen[i - base];
        REQUIRE(b.size() == sent[i - base]);
        bool same = true;
        for (uint32_t k = 4; k < b.size() && same; ++k) same = b[k] == pattern(i, k);
        REQUIRE(same);
    }
    for (uint32_t i = 0; i < sent.size(); ++i) {
        INFO("datagram " << base + i);
        CHECK(seen[i] == 1);
    }
}

std::string nonzero(const UringUdpCounters& c) {
    std::string s;
    c.for_each([&](const char* n, const char*, uint64_t v) {
        if (v) s += std::string(n) + "=" + std::to_string(v) + " ";
    });
    return s;
}

}  // namespace

TEST_CASE("uring: the direct path takes datagrams beside an armed multishot, each once, byte for byte", "[uring]") {
    if (!multishot_or_warn()) return;
    HeapPktPool pool(16384, 2048 + kPktHeadroom);
    {
        UringUdpConfig ca, cb;
        cb.single_issuer = true;  // as a proxy's with its own thread
        PortPair pair(pool, ca, cb);
        auto& a = pair.a;
        auto& b = pair.b;
        Recorder& rec = pair.rec;
        std::mutex flag;  // the proxy's poller flag: one poller of b (and of the pool) at a time
        PktBuf* got[32];
        auto poll_b = [&] {  // one iteration of b, as Proxy::poll_once
            const uint32_t n = b->rx_burst(got, 32);
            if (n > 0) b->input_burst(got, n, 0);
            return n + b->flush();
        };
        auto send_round = [&](const std::vector<uint32_t>& sent, uint32_t base) {
            std::lock_guard<std::mutex> g(flag);
            for (uint32_t i = 0; i < sent.size(); ++i)
                REQUIRE(a->udp_output(make_indexed(pool, base + i, sent[i]), 0, kLoopback, b->port()));
            REQUIRE(pump({a.get()}, [&] { return a->tx_idle(); }));
        };
        // The owner (this thread) polls first: it owns the ring and arms the multishot.
        poll_b();
        CHECK_FALSE(b->direct_st());
        const std::vector<uint32_t> mix = indexed_mix();
        uint32_t base = 0;
        size_t from = 0;
        auto helper_until = [&](size_t want) {  // another thread takes the direct path
            bool ok = false;
            std::thread t([&] {
                const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
                CHECK(b->direct_st());
                while (std::chrono::steady_clock::now() < end) {
                    std::lock_guard<std::mutex> g(flag);
                    poll_b();
                    if (rec.payloads.size() >= want) {
                        ok = true;
                        break;
                    }
                }
            });
            t.join();
            return ok;
        };
        SECTION("the direct path alone, then the owner alone") {
            send_round(mix, base);  // all wait in b's socket, the multishot's work deferred
            REQUIRE(helper_until(mix.size()));
            check_once(rec, mix, base);
            const UringUdpCounters& c = b->counters();
            CHECK(c.rx_direct_datagrams == mix.size());
            CHECK(c.rx_datagrams == mix.size());
            CHECK(c.rx_direct_calls > 0);
            if (a->gso() && b->gro()) CHECK(c.rx_gro_buffers > 0);  // GRO buffers cut on the direct path too
            // The owner enters again: the multishot's deferred work finds the socket empty
            // (it stays armed) and takes what comes next.
            base += static_cast<uint32_t>(mix.size());
            from = rec.payloads.size();
            send_round(mix, base);
            REQUIRE(pump({b.get()}, [&] { return rec.payloads.size() >= from + mix.size(); }));
            check_once(rec, mix, base, from);
            CHECK(c.rx_direct_datagrams == mix.size());  // none more on the direct path
            CHECK(c.rx_datagrams == 2 * mix.size());
            CHECK(c.rx_errors == 0);
        }
        SECTION("both at once: the owner sleeps in its ring while another thread polls") {
            std::atomic<bool> stop{false};
            constexpr int kRounds = 8;
            for (int r = 0; r < kRounds; ++r) {
                send_round(mix, base);
                const size_t want = from + mix.size();
                // The helper polls (direct) while this thread, the owner, alternates its own
                // iterations with sleeps in the ring that run without the flag.
                std::thread helper([&] {
                    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
                    while (!stop.load() && std::chrono::steady_clock::now() < end) {
                        std::lock_guard<std::mutex> g(flag);
                        poll_b();
                        if (rec.payloads.size() >= want) break;
                    }
                });
                const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
                for (;;) {
                    {
                        std::lock_guard<std::mutex> g(flag);
                        poll_b();
                        if (rec.payloads.size() >= want || std::chrono::steady_clock::now() > end) break;
                        b->wait_prepare();
                    }
                    b->wait(200'000);  // unowned, beside the helper's direct path
                }
                stop.store(true);
                helper.join();
                stop.store(false);
                INFO("round " << r << ": b " << nonzero(b->counters()));
                check_once(rec, mix, base, from);
                base += static_cast<uint32_t>(mix.size());
                from = rec.payloads.size();
            }
            const UringUdpCounters& c = b->counters();
            INFO("b " << nonzero(c));
            CHECK(c.rx_datagrams == kRounds * mix.size());
            CHECK(c.rx_errors == 0);
            CHECK(c.rx_drop_trunc == 0);
            CHECK(c.submit_errors == 0);  // the helper never entered the owner's ring
            CHECK(c.waits > 0);
        }
    }
    CHECK(pool.in_use() == 0);
}

TEST_CASE("uring: the direct path sends with sendmmsg, GSO runs included, byte for byte and in order", "[uring]") {
    HeapPktPool pool(16384, 2048 + kPktHeadroom);
    {
        UringUdpConfig ca, cb;
        ca.single_issuer = true;
        PortPair pair(pool, ca, cb);
        auto& a = pair.a;
        auto& b = pair.b;
        Recorder& rec = pair.rec;
        pump({a.get(), b.get()}, [&] { return true; });  // this thread owns a's ring
        std::vector<uint32_t> sent;  // more sends than one sendmmsg takes (32), GSO or not
        for (int r = 0; r < 3; ++r)
            for (uint32_t len : gso_mix()) sent.push_back(len);
        std::thread helper([&] {  // queues and flushes on the direct path: no ring call
            CHECK(a->direct_st());
            for (uint32_t i = 0; i < sent.size(); ++i)
                REQUIRE(a->udp_output(make_dgram(pool, i, sent[i]), 0, kLoopback, b->port()));
            // One sendmmsg per flush, of at most 32 sends: the rest is left (and said: work),
            // so the poller flag is never held for a whole backlog.
            CHECK(a->flush() > 0);
            CHECK(a->counters().tx_direct_calls == 1);
            CHECK_FALSE(a->tx_idle());
            CHECK(a->owner_needed());  // if nobody polls again, the owner must come
            for (int k = 0; k < 1000 && !a->tx_idle(); ++k) a->flush();
            CHECK(a->tx_idle());
        });
        helper.join();
        REQUIRE(pump({b.get()}, [&] { return rec.payloads.size() >= sent.size(); }));
        check_received(rec, sent, *a);
        const UringUdpCounters& c = a->counters();
        INFO("a " << nonzero(c));
        CHECK(c.tx_direct_datagrams == sent.size());
        CHECK(c.tx_datagrams == sent.size());
        CHECK(c.submit_errors == 0);
        CHECK(c.tx_errors == 0);
        if (a->gso()) {
            CHECK(c.tx_gso_sends > 0);
            // one sendmmsg per 32 sends (a GSO run is one), not one per datagram
            const uint64_t sends = c.tx_gso_sends + (sent.size() - c.tx_gso_datagrams);
            CHECK(c.tx_direct_calls == (sends + 31) / 32);
        }
    }
    CHECK(pool.in_use() == 0);
}

TEST_CASE("uring: a multishot the kernel ended, reaped on the direct path, waits for its owner to re-arm it", "[uring]") {
    if (!multishot_or_warn()) return;
    HeapPktPool pool(4096, 2048 + kPktHeadroom);
    {
        UringUdpConfig ca, cb;
        cb.single_issuer = true;
        cb.rx_buffers = 2;  // ENOBUFS ends the multishot after two datagrams
        PortPair pair(pool, ca, cb);
        auto& a = pair.a;
        auto& b = pair.b;
        Recorder& rec = pair.rec;
        pump({b.get()}, [&] { return true; });  // this thread owns b's ring, the multishot armed
        constexpr uint32_t kSent = 64;
        for (uint32_t i = 0; i < kSent; ++i)
            REQUIRE(a->udp_output(make_indexed(pool, i, 100 + i), 0, kLoopback, b->port()));
        REQUIRE(pump({a.get()}, [&] { return a->tx_idle(); }));
        b->flush();  // the owner enters: the multishot's work fills both buffers and ends
        CHECK_FALSE(b->owner_needed());
        std::thread helper([&] {
            PktBuf* got[32];
            for (int k = 0; k < 8; ++k) {
                const uint32_t n = b->rx_burst(got, 32);
                if (n > 0) b->input_burst(got, n, 0);
                b->flush();
            }
            CHECK(b->owner_needed());  // the ended receive: only the owner can arm it
        });
        helper.join();
        std::vector<uint32_t> sizes(kSent);
        for (uint32_t i = 0; i < kSent; ++i) sizes[i] = 100 + i;
        check_once(rec, sizes, 0);
        const UringUdpCounters& c = b->counters();
        INFO("b " << nonzero(c));
        CHECK(c.rx_nobufs >= 1);
        if (b->defer_taskrun()) CHECK(c.rx_direct_datagrams == kSent - 2);  // the rest went direct
        else CHECK(c.rx_direct_datagrams > 0);
        const uint64_t direct = c.rx_direct_datagrams;
        const uint64_t arms = c.rx_arms;
        pump({b.get()}, [&] { return true; });  // the owner re-arms
        CHECK(c.rx_arms == arms + 1);
        CHECK_FALSE(b->owner_needed());
        // and the multishot serves again
        for (uint32_t i = 0; i < 2; ++i)
            REQUIRE(a->udp_output(make_indexed(pool, kSent + i, 50), 0, kLoopback, b->port()));
        REQUIRE(pump({a.get(), b.get()}, [&] { return rec.payloads.size() == kSent + 2; }));
        CHECK(c.rx_direct_datagrams == direct);
    }
    CHECK(pool.in_use() == 0);
}
