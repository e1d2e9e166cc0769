// The io_uring UDP port (proxy/uring_udp.hpp) over loopback, without DPDK: bursts arrive byte for
// byte with their addresses, in both receive modes; a multishot receive ended by ENOBUFS (a tiny
// provided-buffer ring) is armed again and loses nothing; sends beyond the send slots wait and
// go; oversize and truncated datagrams, and those the kernel dropped, are counted; a refused
// io_uring gives the one clear line. The ring's features are in test_uring_udp_features.cpp, the
// direct path in test_uring_udp_direct.cpp, what they share in uring_udp_harness.hpp. Every test
// ends with a leak check.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "uring_udp.hpp"
#include "uring_udp_harness.hpp"

using namespace iccs;
using namespace uring_udp_test;

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
