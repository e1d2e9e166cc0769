// main.cpp: the iccs command's binary (the ./iccs script builds it and calls it). One table of
// subcommands; each is a thin call into a part.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "args.hpp"
#include "bench_rtt.hpp"
#include "bench_stack.hpp"
#include "bench_stripe.hpp"
#include "demo.hpp"
#include "interop.hpp"
#include "run.hpp"

namespace {

[[noreturn]] void usage_error(const std::string& msg) { iccs::cli::usage_error("bench", msg); }

uint64_t parse_u64(const std::string& flag, const char* v, uint64_t lo, uint64_t hi) {
    return iccs::cli::parse_u64("bench", flag, v, lo, hi);
}

int cmd_bench(int argc, char** argv) {
    if (argc < 1 || std::strcmp(argv[0], "--help") == 0 || std::strcmp(argv[0], "-h") == 0) {
        std::printf(
            "usage: iccs bench stack [--size N] [--messages N] [--runs N] [--json]\n"
            "       iccs bench rtt [--size N] [--samples N] [--polling inline|adaptive|busy] [--json]\n"
            "       iccs bench stripe [--runs N] [--messages N] [--polling adaptive|inline|busy] [--json]\n"
            "  rtt     round-trip time of messages between compute threads of two clusters (processes,\n"
            "          proxies, memif), median and p99, with the kernel's UDP ping-pong on loopback and\n"
            "          the shared-memory floor (one cache line between two pinned processes) in the same\n"
            "          run. JSON keys: iccs_rtt_median_us, iccs_rtt_p99_us, kernel_rtt_median_us,\n"
            "          floor_rtt_median_us, ratio_to_kernel, ratio_to_floor, cores, polling.\n"
            "  stripe  what striping buys: throughput of 1 MiB messages between two clusters (processes,\n"
            "          memif) over one parallel connection with 1, 2 and 4 proxies per cluster, against a\n"
            "          kernel TCP loopback stream of the same messages in the same run; and the message rate\n"
            "          of 100-byte messages with each dispatch policy (fixed, round-robin, least-loaded) over\n"
            "          2 proxies, also with proxy 1 slowed on purpose. States the host's cores; with fewer cores than threads the figures are\n"
            "          functional, and it says so. --messages N: 1 MiB messages per run (default 64).\n"
            "          JSON keys: cores, kernel_tcp_mb_per_s, mb_per_s_1_proxy, mb_per_s_2_proxies,\n"
            "          mb_per_s_4_proxies, ratio_2_to_1, ratio_4_to_1, ratio_1_proxy_to_kernel,\n"
            "          msgs_per_s_fixed, msgs_per_s_round_robin, msgs_per_s_least_loaded,\n"
            "          slowed_msgs_per_s_round_robin, slowed_msgs_per_s_least_loaded, slowed_share_round_robin,\n"
            "          slowed_share_least_loaded (proxy 1 slowed on purpose: rate and its share), functional_only.\n"
            "  stack   CPU ns per delivered message (send + receive + ack) of the iccs stack over the\n"
            "          in-memory wire, against the kernel's UDP loopback path (sendmmsg/recvmmsg x32)\n"
            "          measured in the same run; prints both and their ratio.\n"
            "  --size N       payload bytes (default 100, 1..1400)\n"
            "  --messages N   messages per run (default 2000000)\n"
            "  --runs N       runs; the median is reported (default 5)\n"
            "  --json         one JSON object: iccs_ns_per_msg, kernel_ns_per_msg, ratio, ...\n");
        return argc < 1 ? 2 : 0;
    }
    const std::string which = argv[0];
    if (which == "rtt") {
        iccs::BenchRttOptions o;
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
            if (a == "--size") {
                o.size_bytes = static_cast<uint32_t>(parse_u64(a, v, 1, 9000));
                ++i;
            } else if (a == "--samples") {
                o.samples = parse_u64(a, v, 100, 10'000'000);
                ++i;
            } else if (a == "--polling") {
                if (v == nullptr || (std::strcmp(v, "inline") != 0 && std::strcmp(v, "adaptive") != 0 &&
                                     std::strcmp(v, "busy") != 0))
                    usage_error(std::string("bad value '") + (v ? v : "") +
                                "' for --polling: allowed values are inline, adaptive, busy");
                o.polling = v;
                ++i;
            } else if (a == "--json") {
                o.json = true;
            } else {
                usage_error("unknown option '" + a + "' for bench rtt (see iccs bench --help)");
            }
        }
        return iccs::bench_rtt(o);
    }
    if (which == "stripe") {
        iccs::BenchStripeOptions o;
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
            if (a == "--runs") {
                o.runs = static_cast<uint32_t>(parse_u64(a, v, 1, 101));
                ++i;
            } else if (a == "--messages") {
                o.big_messages = static_cast<uint32_t>(parse_u64(a, v, 2, 100'000));
                ++i;
            } else if (a == "--polling") {
                if (v == nullptr || (std::strcmp(v, "inline") != 0 && std::strcmp(v, "adaptive") != 0 &&
                                     std::strcmp(v, "busy") != 0))
                    usage_error(std::string("bad value '") + (v ? v : "") +
                                "' for --polling: allowed values are inline, adaptive, busy");
                o.polling = v;
                ++i;
            } else if (a == "--json") {
                o.json = true;
            } else {
                usage_error("unknown option '" + a + "' for bench stripe (see iccs bench --help)");
            }
        }
        return iccs::bench_stripe(o);
    }
    if (which != "stack") usage_error("unknown benchmark '" + which + "' (available: stack, rtt, stripe)");
    iccs::BenchStackOptions o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (a == "--size") {
            o.size_bytes = static_cast<uint32_t>(parse_u64(a, v, 1, 1400));
            ++i;
        } else if (a == "--messages") {
            o.messages = parse_u64(a, v, 1000, 1'000'000'000);
            ++i;
        } else if (a == "--runs") {
            o.runs = static_cast<uint32_t>(parse_u64(a, v, 1, 100));
            ++i;
        } else if (a == "--json") {
            o.json = true;
        } else {
            usage_error("unknown option '" + a + "' for bench stack (see iccs bench --help)");
        }
    }
    const auto r = iccs::bench_stack(o);
    iccs::print_bench_stack(o, r);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) iccs::cli::usage_error("", "no subcommand (see ./iccs --help)");
    const std::string cmd = argv[1];
    if (cmd == "demo") return iccs::cmd_demo(argc - 2, argv + 2);
    if (cmd == "bench") return cmd_bench(argc - 2, argv + 2);
    if (cmd == "run") return iccs::cmd_run(argc - 2, argv + 2, false);
    if (cmd == "interop") return iccs::cmd_interop(argc - 2, argv + 2);
    iccs::cli::usage_error("", "unknown subcommand '" + cmd + "' (see ./iccs --help)");
}
