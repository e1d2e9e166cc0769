// The io_uring UDP port's features over loopback: slidwin runs unchanged over two ports
// (SlidwinPair), also over GSO/GRO with loss; GSO sends and GRO receives; an SQPOLL ring; a
// deferred-task-run ring opened by one thread works when another polls it; zero-copy sends
// arrive whole (and are copied on loopback); a dry buffer ring under GRO and an empty RX pool
// lose nothing uncounted. Every test ends with a leak check.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "slidwin_endpoint.hpp"
#include "timer_wheel.hpp"
#include "uring_udp.hpp"
#include "uring_udp_harness.hpp"

using namespace iccs;
using namespace uring_udp_test;

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
