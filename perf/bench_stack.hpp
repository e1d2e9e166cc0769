// bench_stack.hpp: CPU cost of the stack per delivered message, against the kernel's UDP path.
#pragma once

#include <cstdint>
#include <string>

#include "bench_auth_stages.hpp"

namespace iccs {

struct BenchStackOptions {
    uint32_t size_bytes = 100;       // message payload
    uint64_t messages = 2'000'000;   // per run
    uint32_t runs = 5;               // the median of these is reported
    bool json = false;
    std::string key_file;            // --key: also measure with per-datagram authentication
    bool encrypt = false;            // --encrypt: ... and encryption (AES-GCM)
};

struct BenchStackResult {
    double iccs_ns_per_msg = 0, iccs_min = 0, iccs_max = 0;
    double kernel_ns_per_msg = 0, kernel_min = 0, kernel_max = 0;
    double ratio = 0;
    uint64_t iccs_retx = 0;
    std::string kernel_error;  // why the kernel baseline could not run, if it could not
    bool auth = false;         // --key given: the same iccs run with the key, interleaved
    double auth_ns_per_msg = 0, auth_min = 0, auth_max = 0;
    double auth_overhead = 0;  // auth / plain
    std::string key_error;     // the key file could not be used (then nothing ran)
    AuthStagesResult stages;   // with a key: what authenticating costs, stage by stage
    double rtt_plain_ns = 0, rtt_auth_ns = 0;  // with a key: CPU ns of a one-thread round trip
};

// Runs both measurements `runs` times, interleaved (and, with a key, the iccs stack again with
// authentication on), and returns medians and spread.
BenchStackResult bench_stack(const BenchStackOptions& o);
// Prints the result as a table or as one JSON object.
void print_bench_stack(const BenchStackOptions& o, const BenchStackResult& r);

}  // namespace iccs
