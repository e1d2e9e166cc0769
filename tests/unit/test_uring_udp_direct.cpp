// The io_uring UDP port's direct path over loopback: datagrams taken beside an armed multishot,
// each once; sends with sendmmsg, GSO runs included; a multishot the kernel ended, reaped on the
// direct path, waits for its owner to re-arm it. Every test ends with a leak check.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "uring_udp.hpp"
#include "uring_udp_harness.hpp"

using namespace iccs;
using namespace uring_udp_test;

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
