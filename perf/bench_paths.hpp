// bench_paths.hpp: the measured paths that `bench rtt` and `bench compare` set side by side.
//
// Every path uses the same two threads on the same two cores: the sender / pinger on core 0, the
// receiver / echo on core 1, each in its own process.
//  - iccs: thread 0 of cluster 0 and thread 0 of cluster 1, each cluster its own process with its
//    own EAL and one proxy, over a fabric (memif: DPDK shared-memory link; udp: the kernel's UDP
//    sockets driven by io_uring). With polling inline the two compute threads run the stack
//    themselves (no other thread runs); adaptive and busy add a proxy thread per cluster on core 1.
//  - kernel: two processes with plain blocking UDP sockets on loopback (sendto/recvfrom).
//  - floor: two processes passing a value through one shared cache line.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "slidwin_auth.hpp"

namespace iccs {

struct RttStats {
    double median_us = 0, p99_us = 0;
    size_t n = 0;
    std::string error;
};

struct RateStats {
    double msgs_per_s = 0;     // delivered messages / (first send .. last delivery)
    uint64_t sent = 0, delivered = 0;
    uint64_t dropped = 0;  // raw udp stream: counted as dropped (the receiving socket's kernel drops, the ports' own)
    std::string error;
};

// --pcap on a benchmark: the capture directory of its next cluster run, base/<what>-<n> (n counts
// the runs of this process from 1, so every run keeps its own files); "" when base is "" or the
// fabric is udp (kernel sockets: no frames to capture).
std::string bench_capture_dir(const std::string& base, const std::string& what, const std::string& fabric);
// The UDP port of the benchmarks' cluster runs (all fabrics): a range of their own, not the default
// 9410 a running machine may hold, below the kernel's ephemeral ports. Captures are decoded with
// tshark -o iccs.udp_port:<this>.
uint16_t bench_udp_port();

// One message of size bytes in flight, `samples` round trips timed (after samples/10 untimed).
// pcap_base: --pcap of the benchmark ("" = no capture; see bench_capture_dir). auth: with this
// key every datagram is authenticated (stack/slidwin_auth.hpp; null = off).
RttStats iccs_rtt(const std::string& fabric, const std::string& polling, uint32_t size, uint64_t samples,
                  const std::string& pcap_base = {}, std::shared_ptr<const SlidwinAuthKey> auth = nullptr);
// The iccs round trip plain and with `auth`, two runs (each its own pair of cluster processes)
// taking turns in `blocks` blocks of `block_rounds` timed round trips (after block_rounds/10, at
// least 20, untimed ones: the first round trips after a pause), plain first in each pair of
// blocks (compute/cluster.hpp, PingpongTurns): both runs meet the same state of the host, and
// the ratio of each pair of blocks' medians is taken on the same few milliseconds.
struct RttTurns {
    RttStats plain, auth;                          // over all timed round trips of each run
    std::vector<double> plain_block_us, auth_block_us;  // each block's median
    std::vector<double> ratio_by_block;            // auth / plain, block by block
    std::string error;
};
RttTurns iccs_rtt_turns(const std::string& fabric, const std::string& polling, uint32_t size, uint32_t blocks,
                        uint64_t block_rounds, std::shared_ptr<const SlidwinAuthKey> auth);
// The one-way message rate the same way: `blocks` blocks of block_messages messages, each timed
// from its first send to the receiver's answer to its last, the two runs taking turns.
struct RateTurns {
    RateStats plain, auth;                               // over all blocks of each run
    std::vector<double> plain_block_rate, auth_block_rate;  // each block's messages per second
    std::vector<double> ratio_by_block;                  // auth / plain, block by block
    std::string error;
};
RateTurns iccs_stream_turns(const std::string& fabric, const std::string& polling, uint32_t size, uint32_t blocks,
                            uint64_t block_messages, std::shared_ptr<const SlidwinAuthKey> auth);
RttStats kernel_rtt(uint32_t size, uint64_t samples);
RttStats floor_rtt(uint64_t samples);

// `messages` messages of size bytes one way from one sender thread, as fast as the path takes them.
// iccs: reliable (sliding window, exactly once); kernel: a blocking sendto loop and a recvfrom
// loop, nothing resent: `delivered` may fall short of `sent`. auth: as for iccs_rtt.
RateStats iccs_stream(const std::string& fabric, const std::string& polling, uint32_t size, uint64_t messages,
                      const std::string& pcap_base = {}, std::shared_ptr<const SlidwinAuthKey> auth = nullptr);
RateStats kernel_stream(uint32_t size, uint64_t messages);

// Message combining in the benchmarks' cluster runs ([cluster] combine_max_bytes; until set, the
// configuration's default): --combine BYTES of bench rtt and bench compare.
void bench_set_combine(uint32_t max_bytes);
uint32_t bench_combine();

// Threads that spin in an iccs run with this polling mode (2 compute threads; adaptive and busy
// add a proxy per cluster), for the "oversubscribed" note.
unsigned iccs_spinning_threads(const std::string& polling);

// Median, min and max of v (0s when empty).
struct Spread {
    double median = 0, min = 0, max = 0;
};
Spread spread_of(std::vector<double> v);

// s as a JSON string, quotes included (quote and backslash escaped, control characters dropped).
std::string json_str(const std::string& s);

}  // namespace iccs
