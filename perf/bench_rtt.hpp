// bench_rtt.hpp: round-trip time of small messages between compute threads of two clusters, with
// the kernel's UDP ping-pong and the shared-memory floor measured in the same run.
#pragma once

#include <cstdint>
#include <string>

namespace iccs {

struct BenchRttOptions {
    uint32_t size_bytes = 100;
    uint64_t samples = 20'000;
    std::string polling = "inline";  // inline | adaptive | busy
    std::string fabric = "memif";    // memif (DPDK) | udp (kernel UDP sockets via io_uring)
    bool json = false;
    std::string pcap_dir;  // --pcap: capture the iccs runs (memif) under it ("" = off)
    std::string key_file;  // --key: the iccs round trip again with every datagram authenticated
    bool encrypt = false;  // --encrypt: ... and encrypted
    // --blocks: with a key, the plain and the authenticated runs take turns in this many blocks
    // each of samples / blocks timed round trips (at least 100), and auth_overhead is the median
    // of the blocks' ratios (perf/bench_paths.hpp, iccs_rtt_turns).
    uint32_t blocks = 40;
    // --only iccs|raw: measure that path alone (profiling one path: perf record sees nothing
    // else); the other paths' figures are then absent (0, and no ratios). "" = every path.
    std::string only;
};

int bench_rtt(const BenchRttOptions& o);

}  // namespace iccs
