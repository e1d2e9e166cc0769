// main.cpp: the iccs command's binary (the ./iccs script builds it and calls it). One table of
// subcommands; each is a thin call into a part.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "args.hpp"
#include "bench_compare.hpp"
#include "bench_rtt.hpp"
#include "bench_stack.hpp"
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
            "       iccs bench rtt [--size N] [--samples N] [--polling inline|adaptive|busy] [--fabric memif|udp]\n"
            "                      [--json]\n"
            "       iccs bench compare [--runs N] [--samples N] [--messages N] [--size N]\n"
            "                          [--polling inline|adaptive|busy] [--json]\n"
            "  rtt      round-trip time of messages between compute threads of two clusters (processes,\n"
            "           proxies) over --fabric memif (DPDK, the default) or udp (kernel UDP sockets via\n"
            "           io_uring), median and p99, with the kernel's UDP ping-pong on loopback and the\n"
            "           shared-memory floor (one cache line between two pinned processes) in the same run.\n"
            "           --samples N (default 20000, at least 100). JSON keys: iccs_rtt_median_us,\n"
            "           iccs_rtt_p99_us, kernel_rtt_median_us, floor_rtt_median_us, ratio_to_kernel,\n"
            "           ratio_to_floor, cores, fabric, polling.\n"
            "  compare  the headline table: the same 100-byte round trip (median) and one-way message rate\n"
            "           (one sender thread) over memif (DPDK), udp (io_uring) and plain blocking kernel\n"
            "           sockets, all on the same two pinned threads, interleaved over --runs N runs (default\n"
            "           5), medians with min and max, and the ratio of each to the kernel sockets.\n"
            "           --samples N round trips (default 10000) and --messages N (default 200000) per run;\n"
            "           --polling as for rtt (default inline: no thread but the two). JSON: paths.memif,\n"
            "           paths.udp, paths.kernel, each with rtt_median_us, rtt_ratio_to_kernel,\n"
            "           rate_msgs_per_s, rate_ratio_to_kernel, min/max; cores, oversubscribed.\n"
            "  stack    CPU ns per delivered message (send + receive + ack) of the iccs stack over the\n"
            "           in-memory wire, against the kernel's UDP loopback path (sendmmsg/recvmmsg x32)\n"
            "           measured in the same run; prints both and their ratio.\n"
            "  --size N       payload bytes (default 100; stack 1..1400, rtt and compare 1..9000)\n"
            "  --messages N   stack: messages per run (default 2000000)\n"
            "  --runs N       runs; the median is reported (default 5)\n"
            "  --json         one JSON object instead of the table\n");
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
            } else if (a == "--fabric") {
                if (v == nullptr || (std::strcmp(v, "memif") != 0 && std::strcmp(v, "udp") != 0))
                    usage_error(std::string("bad value '") + (v ? v : "") +
                                "' for --fabric: allowed values are memif, udp");
                o.fabric = v;
                ++i;
            } else if (a == "--json") {
                o.json = true;
            } else {
                usage_error("unknown option '" + a + "' for bench rtt (see iccs bench --help)");
            }
        }
        return iccs::bench_rtt(o);
    }
    if (which == "compare") {
        iccs::BenchCompareOptions o;
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
            if (a == "--size") {
                o.size_bytes = static_cast<uint32_t>(parse_u64(a, v, 1, 9000));
                ++i;
            } else if (a == "--runs") {
                o.runs = static_cast<uint32_t>(parse_u64(a, v, 1, 100));
                ++i;
            } else if (a == "--samples") {
                o.samples = parse_u64(a, v, 100, 10'000'000);
                ++i;
            } else if (a == "--messages") {
                o.messages = parse_u64(a, v, 1000, 100'000'000);
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
                usage_error("unknown option '" + a + "' for bench compare (see iccs bench --help)");
            }
        }
        return iccs::bench_compare(o);
    }
    if (which != "stack") usage_error("unknown benchmark '" + which + "' (available: stack, rtt, compare)");
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
