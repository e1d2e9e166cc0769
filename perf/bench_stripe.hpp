// bench_stripe.hpp: what striping over several proxies buys: throughput of 1 MiB messages between
// two clusters with 1, 2 and 4 proxies per cluster, and the message rate of 100-byte messages
// with each dispatch policy; the kernel's TCP loopback stream of the same messages is measured in
// the same run as the baseline.
#pragma once

#include <cstdint>
#include <string>

namespace iccs {

struct BenchStripeOptions {
    uint32_t big_bytes = 1u << 20;     // the striped message size
    uint32_t big_messages = 64;        // per run
    uint32_t small_bytes = 100;
    uint32_t small_messages = 200'000; // per run
    uint32_t runs = 3;                 // median of
    std::string polling = "adaptive";
    std::string fabric = "memif";
    bool json = false;
    std::string pcap_dir;  // --pcap: capture the iccs runs (memif) under it ("" = off)
};

int bench_stripe(const BenchStripeOptions& o);

}  // namespace iccs
