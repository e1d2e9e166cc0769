// bench_compare.hpp: the project's headline comparison: the same 100-byte round trip and one-way
// message rate over memif (DPDK), udp (the kernel's UDP sockets driven by io_uring) and plain
// blocking kernel sockets, measured side by side in one run, as one table with ratios to the
// kernel sockets.
#pragma once

#include <cstdint>
#include <string>

namespace iccs {

struct BenchCompareOptions {
    uint32_t size_bytes = 100;        // message payload [bytes]
    uint32_t runs = 5;                // repetitions, interleaved; medians over them are reported
    uint64_t samples = 10'000;        // timed round trips per RTT measurement
    uint64_t messages = 200'000;      // messages per rate measurement
    std::string polling = "inline";   // iccs polling: inline runs on the same two threads as the kernel path
    bool json = false;
    std::string pcap_dir;  // --pcap: capture the iccs runs (memif) under it ("" = off)
    // --key FILE [--encrypt]: each iccs run again with every datagram authenticated (and
    // encrypted), interleaved with the plain one; ratios auth / plain ("" = off).
    std::string key_file;
    bool encrypt = false;
};

int bench_compare(const BenchCompareOptions& o);

}  // namespace iccs
