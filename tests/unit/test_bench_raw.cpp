// The raw-fabric baselines of `bench rtt` / `bench compare` (perf/bench_raw.hpp): they measure
// over memif and udp (every round trip timed, every memif frame of a stream delivered, every udp
// datagram delivered or counted dropped by the kernel or a port), and they
// refuse with the reason where the fabric is unavailable: io_uring refused (simulated with
// ICCS_URING_DISABLE), a memif socket directory that cannot be written, a fabric they do not have.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "bench_raw.hpp"

using namespace iccs;

TEST_CASE("raw baseline: memif and udp round trips and streams are measured", "[bench]") {
    for (const char* fabric : {"memif", "udp"}) {
        INFO(fabric);
        const RttStats r = raw_rtt(fabric, 100, 200);
        INFO(r.error);
        REQUIRE(r.error.empty());
        CHECK(r.n == 200);
        CHECK(r.median_us > 0);
        CHECK(r.p99_us >= r.median_us);
        const RateStats s = raw_stream(fabric, 100, 2000);
        INFO(s.error);
        REQUIRE(s.error.empty());
        CHECK(s.msgs_per_s > 0);
        CHECK(s.sent == 2000);
        if (std::string(fabric) == "memif") {
            CHECK(s.delivered == 2000);  // memif loses nothing
        } else {
            // kernel UDP may drop when the receiving socket's buffer is full, but never uncounted:
            // every datagram sent arrived or was counted dropped (SO_MEMINFO, the ports' counters)
            INFO("delivered " << s.delivered << ", counted dropped " << s.dropped);
            CHECK(s.delivered > 0);
            CHECK(s.delivered + s.dropped == s.sent);
        }
    }
    // eth, ipv4, udp, slidwin (40 bytes with its run token), convergence, the message
    CHECK(raw_frame_bytes("memif", 100) == 14 + 20 + 8 + 40 + 40 + 100);
    CHECK(raw_frame_bytes("udp", 100) == 40 + 40 + 100);
}

TEST_CASE("raw baseline: refuses with the reason where its fabric is unavailable", "[bench]") {
    SECTION("io_uring refused") {
        setenv("ICCS_URING_DISABLE", "1", 1);
        const std::string why = raw_unavailable("udp");
        const RttStats r = raw_rtt("udp", 100, 100);
        const RateStats s = raw_stream("udp", 100, 100);
        unsetenv("ICCS_URING_DISABLE");
        CHECK(why.rfind("raw udp baseline: fabric \"udp\" needs io_uring, which this kernel refused", 0) == 0);
        CHECK(r.error == why);
        CHECK(r.n == 0);
        CHECK(s.error == why);
        CHECK(s.delivered == 0);
    }
    SECTION("memif socket directory not writable") {
        RawOptions o;
        o.sock_dir = "/nonexistent-iccs-dir";
        const std::string why = raw_unavailable("memif", o);
        CHECK(why == "raw memif baseline: its socket directory /nonexistent-iccs-dir is not writable "
                     "(No such file or directory)");
        CHECK(raw_rtt("memif", 100, 100, o).error == why);
        CHECK(raw_stream("memif", 100, 100, o).error == why);
    }
    SECTION("a fabric with no raw baseline") {
        CHECK(raw_rtt("af_packet", 100, 100).error == "raw baseline: fabric \"af_packet\" has none (memif and udp do)");
    }
}
