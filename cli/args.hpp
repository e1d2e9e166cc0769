// args.hpp: the command-line helpers every subcommand shares: one message style for bad input
// ("iccs <cmd>: bad value 'x' for --flag: an integer from A to B is allowed"), exit status 2.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

namespace iccs::cli {

// Prints "iccs <who>: <msg>" and exits with status 2 (a usage error).
[[noreturn]] inline void usage_error(const std::string& who, const std::string& msg) {
    std::fprintf(stderr, "iccs%s%s: %s\n", who.empty() ? "" : " ", who.c_str(), msg.c_str());
    std::exit(2);
}

// An integer flag value in [lo, hi], or a usage error naming the flag, the value and the range.
inline uint64_t parse_u64(const std::string& who, const std::string& flag, const char* v, uint64_t lo, uint64_t hi) {
    if (v == nullptr) usage_error(who, flag + " needs a value");
    char* end = nullptr;
    errno = 0;
    const unsigned long long x = std::strtoull(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || *v == '-' || x < lo || x > hi)
        usage_error(who, "bad value '" + std::string(v) + "' for " + flag + ": an integer from " + std::to_string(lo) +
                             " to " + std::to_string(hi) + " is allowed");
    return x;
}

// --cluster-size and --threads name one key ([cluster] compute_threads): keeps what each said and
// stops with a usage error when both are given with different values.
inline void note_cluster_size(const std::string& who, const std::string& flag, const std::string& v,
                              std::string& cluster_size, std::string& threads) {
    (flag == "--cluster-size" ? cluster_size : threads) = v;
    if (!cluster_size.empty() && !threads.empty() && cluster_size != threads)
        usage_error(who, "--cluster-size " + cluster_size + " and --threads " + threads +
                             " disagree (both are the compute threads per cluster)");
}

// The flags of `iccs run` (every program, built in or PATH) that set one configuration key each.
inline constexpr std::pair<const char*, const char*> kRunConfigFlags[] = {
    {"--clusters", "machine.clusters"},   {"--threads", "cluster.compute_threads"},
    {"--proxies", "cluster.proxies"},     {"--polling", "cluster.polling"},
    {"--mtu", "machine.mtu_bytes"},       {"--drop", "test.drop"},
    {"--duplicate", "test.duplicate"},    {"--reorder", "test.reorder_window"},
    {"--seed", "test.seed"},              {"--fabric", "machine.fabric"},
    {"--dispatch", "cluster.dispatch"},   {"--order", "convergence.order"},
    {"--stripe-threshold", "convergence.stripe_threshold_bytes"},
    {"--pcap", "machine.pcap_dir"},
    {"--sites", "wan.sites"},             {"--wan-latency-ms", "wan.latency_ms"},
    {"--wan-bandwidth", "wan.bandwidth_bytes_per_s"}, {"--wan-script", "wan.script"},
    {"--wan-series", "wan.series"},       {"--wan-loss", "wan.loss"},
};

}  // namespace iccs::cli
