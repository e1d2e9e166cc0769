// main.cpp: the iccs command's binary (the ./iccs script builds it and calls it). One table of
// subcommands; each is a thin call into a part.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "args.hpp"
#include "bench_compare.hpp"
#include "bench_collectives.hpp"
#include "bench_mpi_collectives.hpp"
#include "bench_dsm.hpp"
#include "bench_paths.hpp"
#include "bench_rtt.hpp"
#include "bench_stack.hpp"
#include "bench_stripe.hpp"
#include "cluster.hpp"
#include "demo.hpp"
#include "interop.hpp"
#include "run.hpp"

namespace {

[[noreturn]] void usage_error(const std::string& msg) { iccs::cli::usage_error("bench", msg); }

// v if it is one of `allowed`, else a usage error that names the flag, the value and what is allowed.
std::string one_of(const std::string& flag, const char* v, std::initializer_list<const char*> allowed) {
    std::string list;
    for (const char* a : allowed) {
        if (v != nullptr && std::strcmp(v, a) == 0) return v;
        list += (list.empty() ? "" : ", ") + std::string(a);
    }
    usage_error(std::string("bad value '") + (v ? v : "") + "' for " + flag + ": allowed values are " + list);
}

// --pcap DIR of the cluster benchmarks.
std::string pcap_arg(const char* v) {
    if (v == nullptr || *v == '\0') usage_error("--pcap needs a directory");
    return v;
}
// After the options: capture needs DPDK frames and a directory we can write (no-op when off).
void check_pcap(const std::string& dir, const std::string& fabric) {
    if (dir.empty()) return;
    if (fabric == "udp")
        usage_error("--pcap records the frames of DPDK ports; --fabric udp has kernel sockets and no frames "
                    "(use --fabric memif, or tcpdump -i lo)");
    std::string err;
    if (!iccs::pcap_dir_ready(dir, err)) usage_error(err);
}

uint64_t parse_u64(const std::string& flag, const char* v, uint64_t lo, uint64_t hi) {
    return iccs::cli::parse_u64("bench", flag, v, lo, hi);
}

// `--key FILE` and `--encrypt` of bench stack and bench rtt: true when `a` was one of them (`i`
// moved past a value it took).
bool key_flag(const std::string& a, const char* v, std::string& key_file, bool& encrypt, int& i) {
    if (a == "--key") {
        if (v == nullptr) usage_error("--key needs a key file (>= 16 random bytes, mode 0600)");
        key_file = v;
        ++i;
        return true;
    }
    if (a == "--encrypt") {
        encrypt = true;
        return true;
    }
    return false;
}

// A one-way latency in milliseconds, 0..100000.
double parse_ms(const std::string& flag, const char* v) {
    if (v == nullptr) usage_error(flag + " needs a value");
    char* end = nullptr;
    const double ms = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(ms >= 0) || ms > 100000)
        usage_error("bad value '" + std::string(v) + "' for " + flag + ": milliseconds from 0 to 100000");
    return ms;
}

// --colls: all, or collectives of MPI by their counter names.
std::string colls_arg(const char* v) {
    static const std::set<std::string> known = {"barrier", "bcast", "reduce", "allreduce", "gather", "gatherv",
                                                "scatter", "scatterv", "allgather", "allgatherv", "alltoall",
                                                "alltoallv", "reduce_scatter", "reduce_scatter_block", "scan", "exscan"};
    if (v == nullptr) usage_error("--colls needs a value: all, or a list such as bcast,allreduce");
    const std::string list = v;
    if (list == "all") return list;
    std::istringstream in(list);
    std::string c;
    while (std::getline(in, c, ','))
        if (!known.count(c))
            usage_error("bad value '" + c + "' in --colls: allowed are all, or a list of barrier, bcast, reduce, "
                        "allreduce, gather, gatherv, scatter, scatterv, allgather, allgatherv, alltoall, alltoallv, "
                        "reduce_scatter, reduce_scatter_block, scan, exscan");
    return list;
}

int cmd_bench(int argc, char** argv) {
    if (argc < 1 || std::strcmp(argv[0], "--help") == 0 || std::strcmp(argv[0], "-h") == 0) {
        std::printf(
            "usage: iccs bench stack [--size N] [--messages N] [--runs N] [--key FILE [--encrypt]] [--json]\n"
            "       iccs bench rtt [--size N] [--samples N] [--polling inline|adaptive|busy] [--fabric memif|udp]\n"
            "                      [--combine BYTES] [--pcap DIR] [--key FILE [--encrypt]] [--only iccs|raw] [--json]\n"
            "       iccs bench stripe [--runs N] [--messages N] [--polling inline|adaptive|busy]\n"
            "                         [--fabric memif|udp] [--pcap DIR] [--json]\n"
            "       iccs bench compare [--runs N] [--samples N] [--messages N] [--size N]\n"
            "                          [--polling inline|adaptive|busy] [--combine BYTES] [--pcap DIR] [--json]\n"
            "       iccs bench dsm [--rounds N] [--runs N] [--json]\n"
            "       iccs bench collectives [--sites S] [--clusters C] [--cluster-size T] [--wan-latency-ms L]\n"
            "                              [--wan-bandwidth B] [--size N] [--reps R] [--layout block|cyclic]\n"
            "                              [--ordered-messages M] [--json]\n"
            "       iccs bench mpi-collectives [--sites S] [--clusters C] [--cluster-size R] [--proxies P]\n"
            "                              [--wan-latency-ms L] [--wan-bandwidth B] [--size N] [--reps R]\n"
            "                              [--colls all|NAME,...] [--no-han] [--transport iccs|tcp] [--json]\n"
            "  rtt      round-trip time of messages between compute threads of two clusters (processes,\n"
            "           proxies) over --fabric memif (DPDK, the default) or udp (kernel UDP sockets via\n"
            "           io_uring), median and p99, with the kernel's UDP ping-pong on loopback and the\n"
            "           shared-memory floor (one cache line between two pinned processes) in the same run,\n"
            "           and the raw fabric: the same two pinned processes exchanging a frame of the same\n"
            "           size over the same fabric with no stack (memif: DPDK rx/tx bursts on a net_memif\n"
            "           port; udp: the proxies' io_uring loop with bare datagrams); refused, with the\n"
            "           reason, where that fabric is unavailable. --samples N (default 20000, at least 100).\n"
            "           JSON keys: iccs_rtt_median_us, iccs_rtt_p99_us, kernel_rtt_median_us,\n"
            "           floor_rtt_median_us, raw_rtt_median_us, raw_rtt_p99_us, raw_frame_bytes,\n"
            "           overhead_ratio (iccs / raw), ratio_to_kernel, ratio_to_floor, cores, fabric, polling.\n"
            "           --key FILE: the iccs round trip again with every datagram authenticated\n"
            "           ([security] key_file; --encrypt: and encrypted), beside the plain one:\n"
            "           auth_rtt_median_us, auth_rtt_p99_us, auth_overhead (auth / plain).\n"
            "           --only iccs|raw: that path alone (to profile it: perf record sees nothing else);\n"
            "           the other paths' figures and the ratios are then 0.\n"
            "  compare  the headline table: the same 100-byte round trip (median) and one-way message rate\n"
            "           (one sender thread) over memif (DPDK), udp (io_uring) and plain blocking kernel\n"
            "           sockets, all on the same two pinned threads, interleaved over --runs N runs (default\n"
            "           5), medians with min and max, and the ratio of each to the kernel sockets; beside each\n"
            "           iccs path its raw fabric (as for rtt: no stack) and ours / raw.\n"
            "           --samples N round trips (default 10000) and --messages N (default 200000) per run;\n"
            "           --polling as for rtt (default inline: no thread but the two). JSON: paths.memif,\n"
            "           paths.raw_memif, paths.udp, paths.raw_udp, paths.kernel, each with rtt_median_us,\n"
            "           rtt_ratio_to_kernel, rate_msgs_per_s, rate_ratio_to_kernel, min/max; memif and udp\n"
            "           also raw_rtt_median_us, raw_rate_msgs_per_s, overhead_ratio (round trip, ours / raw),\n"
            "           rate_overhead_ratio (time per message, ours / raw); cores, oversubscribed,\n"
            "           combine_max_bytes (--combine).\n"
            "  stripe   what striping buys: throughput of 1 MiB messages between two clusters (processes)\n"
            "           over one parallel connection with 1, 2 and 4 proxies per cluster, against a kernel\n"
            "           TCP loopback stream of the same messages in the same run; and the message rate of\n"
            "           100-byte messages with each dispatch policy (fixed, round-robin, least-loaded) over 2\n"
            "           proxies, also with proxy 1 slowed on purpose. --fabric memif (default) or udp;\n"
            "           --polling (default adaptive); --runs N (default 3, medians); --messages N: 1 MiB\n"
            "           messages per run (default 64). States the host's cores; with fewer cores than\n"
            "           threads the figures are functional, and it says so. JSON keys: cores, fabric,\n"
            "           kernel_tcp_mb_per_s, mb_per_s_1_proxy, mb_per_s_2_proxies, mb_per_s_4_proxies,\n"
            "           ratio_2_to_1, ratio_4_to_1, ratio_1_proxy_to_kernel, msgs_per_s_fixed,\n"
            "           msgs_per_s_round_robin, msgs_per_s_least_loaded, slowed_msgs_per_s_round_robin,\n"
            "           slowed_msgs_per_s_least_loaded, slowed_share_round_robin, slowed_share_least_loaded\n"
            "           (proxy 1 slowed: rate and the share it got), functional_only.\n"
            "  dsm      the DSM's costs between 2 cluster processes (1 compute thread each) started by the\n"
            "           runtime's launcher, over the iccs transport (1 proxy per cluster, memif) and over\n"
            "           direct (shared memory, no proxy) in the same command: page fetch round trip (fault\n"
            "           to data), release of one fully written 4 KiB page (diff to its home, acked), lock\n"
            "           acquire+release of a lock homed at the other cluster, 2-cluster barrier; median and\n"
            "           p99 of --rounds N (default 400, 10..100000) each, and the ratio iccs/direct of the\n"
            "           medians; --runs N (default 3, 1..20) runs per transport, interleaved iccs, direct,\n"
            "           iccs, ..., each figure the median of the runs'. States the host's cores and whether\n"
            "           threads are oversubscribed. direct is the floor: an operation where it is slower\n"
            "           than iccs beyond noise (median over 10%% higher and its best run slower) is printed\n"
            "           as FLOOR BROKEN. JSON: runs, cores, oversubscribed, floor_ok, and fetch, diff, lock,\n"
            "           barrier, each with iccs_median_us, iccs_p99_us, direct_median_us, direct_p99_us,\n"
            "           samples (of all runs), ratio_iccs_direct, direct_slower.\n"
            "  collectives  group/'s collectives across S sites (default 4) of C clusters (default 1 per\n"
            "           site) of T compute threads (default 1), the sites joined by the proxies' WAN emulation\n"
            "           (transport iccs; L ms one way, default 10; B bytes/s per link, default 1000000):\n"
            "           completion time of each collective (barrier, bcast, reduce, allreduce, gather,\n"
            "           scatter, allgather, alltoall, reduce_scatter, scan) in the hierarchical (MagPIe) and\n"
            "           the flat family, interleaved, median (and min..max) of --reps R (default 5) after a\n"
            "           warm-up; --size N bytes (default 65536: the vector of bcast, reduce, allreduce, scan,\n"
            "           reduce_scatter; the total of gather, scatter, allgather; each rank's buffer of\n"
            "           alltoall); WAN data bytes per call against the minimum (each item once to each\n"
            "           receiving site); then the ordered broadcast per sequencer policy: latency (median,\n"
            "           one message at a time, senders in phases of 5 over every rank) and throughput (M\n"
            "           messages per thread at once, default 50). --layout block (default: clusters numbered\n"
            "           site by site) or cyclic (cluster c on site c mod S: rank order unrelated to sites,\n"
            "           as a grid-unaware numbering may be). JSON: layout, collectives.<name> with\n"
            "           hier_median_us, flat_median_us, speedup (flat / hier), wan_bytes, wan_bytes_min,\n"
            "           flat_wan_bytes, min/max, hops; ordered_bcast.<central|rotating|migrating> with\n"
            "           latency_us (median), latency_mean_us and msgs_per_s; goal_config, goal_met, cores, oversubscribed.\n"
            "  mpi-collectives  MagPIe for MPI programs (mpi/magpie/, libiccs-magpie.so) against Open MPI's\n"
            "           own collectives: our MPI program (perf/mpi_collectives.c) under real mpirun on S sites\n"
            "           (default 4) of C clusters (default 2) of R ranks (default 2), P proxies per cluster\n"
            "           (default 1), over the iccs provider (mpi/provider/: pml cm, mtl ofi) whose proxies\n"
            "           emulate the WAN (L ms one way, default 10; B bytes/s per link, default 1000000); each\n"
            "           collective timed as MPI_X (MagPIe) and PMPI_X (Open MPI's tuned) in the same run,\n"
            "           interleaved, every measurement started at one instant on every rank (one host, one\n"
            "           clock), median (and min..max) of --reps R (default 5) after a warm-up; then a second\n"
            "           run with coll han preferred (--no-han: not), reported where it runs. Sizes (bytes per\n"
            "           rank; --size N for one): 8, 1024, 65536 for all 16 collectives, 1048576 for bcast and\n"
            "           allreduce; --colls a list. WAN data bytes per MagPIe call against the minimum.\n"
            "           --transport tcp: Open MPI's own TCP, no WAN emulation (checks the programs; not the\n"
            "           WAN figure). JSON: mpi_collectives.<name>.<size> with magpie_ms, mpi_ms, speedup\n"
            "           (tuned / magpie), wan_bytes, wan_bytes_min, min/max, han_ms, speedup_han;\n"
            "           wan_bytes_at_min, goal_config, goal_met, cores, oversubscribed.\n"
            "  stack    CPU ns per delivered message (send + receive + ack) of the iccs stack over the\n"
            "           in-memory wire, against the kernel's UDP loopback path (sendmmsg/recvmmsg x32)\n"
            "           measured in the same run; prints both and their ratio. --key FILE [--encrypt]: the\n"
            "           iccs stack also with every datagram authenticated (and encrypted), runs interleaved:\n"
            "           auth_ns_per_msg, auth_overhead (auth / plain).\n"
            "  --size N       payload bytes (default 100; stack 1..1400, rtt and compare 1..9000)\n"
            "  --messages N   stack: messages per run (default 2000000)\n"
            "  --runs N       runs; the median is reported (default 5)\n"
            "  --combine BYTES  rtt, compare: message combining in the iccs runs, as [cluster]\n"
            "                 combine_max_bytes (0 = off, at most 1400; default: that key's default, %u)\n"
            "  --pcap DIR     rtt, stripe, compare: every proxy of each cluster run writes its frames to\n"
            "                 DIR/<measurement>-<fabric>-<n>/cluster<C>-proxy<P>.pcapng (as iccs run --pcap;\n"
            "                 n counts the runs); memif only (with --fabric udp it is refused; compare\n"
            "                 captures its memif runs only); the iccs figures then include the capture's cost\n"
            "  --json         one JSON object instead of the table\n", iccs::bench_combine());
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
                o.polling = one_of("--polling", v, {"inline", "adaptive", "busy"});
                ++i;
            } else if (a == "--fabric") {
                o.fabric = one_of("--fabric", v, {"memif", "udp"});
                ++i;
            } else if (a == "--pcap") {
                o.pcap_dir = pcap_arg(v);
                ++i;
            } else if (a == "--combine") {
                iccs::bench_set_combine(static_cast<uint32_t>(parse_u64(a, v, 0, 1400)));
                ++i;
            } else if (a == "--only") {
                o.only = one_of("--only", v, {"iccs", "raw"});
                ++i;
            } else if (key_flag(a, v, o.key_file, o.encrypt, i)) {
            } else if (a == "--json") {
                o.json = true;
            } else {
                usage_error("unknown option '" + a + "' for bench rtt (see iccs bench --help)");
            }
        }
        if (o.encrypt && o.key_file.empty()) usage_error("--encrypt needs --key FILE");
        check_pcap(o.pcap_dir, o.fabric);
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
                o.polling = one_of("--polling", v, {"inline", "adaptive", "busy"});
                ++i;
            } else if (a == "--pcap") {
                o.pcap_dir = pcap_arg(v);
                ++i;
            } else if (a == "--combine") {
                iccs::bench_set_combine(static_cast<uint32_t>(parse_u64(a, v, 0, 1400)));
                ++i;
            } else if (a == "--json") {
                o.json = true;
            } else {
                usage_error("unknown option '" + a + "' for bench compare (see iccs bench --help)");
            }
        }
        check_pcap(o.pcap_dir, "memif");  // compare captures its memif runs only
        return iccs::bench_compare(o);
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
                o.polling = one_of("--polling", v, {"inline", "adaptive", "busy"});
                ++i;
            } else if (a == "--fabric") {
                o.fabric = one_of("--fabric", v, {"memif", "udp"});
                ++i;
            } else if (a == "--pcap") {
                o.pcap_dir = pcap_arg(v);
                ++i;
            } else if (a == "--json") {
                o.json = true;
            } else {
                usage_error("unknown option '" + a + "' for bench stripe (see iccs bench --help)");
            }
        }
        check_pcap(o.pcap_dir, o.fabric);
        return iccs::bench_stripe(o);
    }
    if (which == "dsm") {
        iccs::BenchDsmOptions o;
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
            if (a == "--rounds") {
                o.rounds = static_cast<uint32_t>(parse_u64(a, v, 10, 100'000));
                ++i;
            } else if (a == "--runs") {
                o.runs = static_cast<uint32_t>(parse_u64(a, v, 1, 20));
                ++i;
            } else if (a == "--json") {
                o.json = true;
            } else {
                usage_error("unknown option '" + a + "' for bench dsm (see iccs bench --help)");
            }
        }
        return iccs::bench_dsm(o);
    }
    if (which == "collectives") {
        iccs::BenchCollectivesOptions o;
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
            if (a == "--json") {
                o.json = true;
                continue;
            }
            ++i;
            if (a == "--sites") o.sites = static_cast<uint32_t>(parse_u64(a, v, 1, 16));
            else if (a == "--clusters") o.clusters = static_cast<uint32_t>(parse_u64(a, v, 1, 16));
            else if (a == "--cluster-size") o.cluster_size = static_cast<uint32_t>(parse_u64(a, v, 1, 16));
            else if (a == "--wan-latency-ms") o.wan_latency_ms = parse_ms(a, v);
            else if (a == "--wan-bandwidth") o.wan_bandwidth = parse_u64(a, v, 0, 1'000'000'000'000);
            else if (a == "--size") o.size = static_cast<uint32_t>(parse_u64(a, v, 8, 16u << 20));
            else if (a == "--reps") o.reps = static_cast<uint32_t>(parse_u64(a, v, 1, 1000));
            else if (a == "--layout") {
                if (v == nullptr || (std::strcmp(v, "block") != 0 && std::strcmp(v, "cyclic") != 0))
                    usage_error("bad value '" + std::string(v ? v : "") + "' for --layout: allowed values are block, cyclic");
                o.cyclic = std::strcmp(v, "cyclic") == 0;
            } else if (a == "--ordered-messages") o.ordered_messages = static_cast<uint32_t>(parse_u64(a, v, 1, 100'000));
            else usage_error("unknown option '" + a + "' for bench collectives (see iccs bench --help)");
        }
        if (o.sites * o.clusters > 64) usage_error("--sites x --clusters is at most 64 clusters");
        return iccs::bench_collectives(o);
    }
    if (which == "mpi-collectives") {
        iccs::BenchMpiCollectivesOptions o;
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
            if (a == "--json") {
                o.json = true;
                continue;
            }
            if (a == "--no-han") {
                o.han = false;
                continue;
            }
            ++i;
            if (a == "--sites") o.sites = static_cast<uint32_t>(parse_u64(a, v, 1, 16));
            else if (a == "--clusters") o.clusters = static_cast<uint32_t>(parse_u64(a, v, 1, 16));
            else if (a == "--cluster-size") o.cluster_size = static_cast<uint32_t>(parse_u64(a, v, 1, 16));
            else if (a == "--proxies") o.proxies = static_cast<uint32_t>(parse_u64(a, v, 1, 8));
            else if (a == "--wan-latency-ms") o.wan_latency_ms = parse_ms(a, v);
            else if (a == "--wan-bandwidth") o.wan_bandwidth = parse_u64(a, v, 0, 1'000'000'000'000);
            else if (a == "--size") o.size = static_cast<uint32_t>(parse_u64(a, v, 8, 16u << 20));
            else if (a == "--reps") o.reps = static_cast<uint32_t>(parse_u64(a, v, 1, 1000));
            else if (a == "--colls") o.colls = colls_arg(v);
            else if (a == "--transport") o.transport = one_of("--transport", v, {"iccs", "tcp"});
            else usage_error("unknown option '" + a + "' for bench mpi-collectives (see iccs bench --help)");
        }
        if (o.sites * o.clusters > 64) usage_error("--sites x --clusters is at most 64 clusters");
        return iccs::bench_mpi_collectives(o);
    }
    if (which != "stack")
        usage_error("unknown benchmark '" + which +
                    "' (available: stack, rtt, stripe, compare, dsm, collectives, mpi-collectives)");
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
        } else if (key_flag(a, v, o.key_file, o.encrypt, i)) {
        } else if (a == "--json") {
            o.json = true;
        } else {
            usage_error("unknown option '" + a + "' for bench stack (see iccs bench --help)");
        }
    }
    if (o.encrypt && o.key_file.empty()) usage_error("--encrypt needs --key FILE");
    const auto r = iccs::bench_stack(o);
    if (!r.key_error.empty()) {
        std::fprintf(stderr, "iccs bench stack: --key: %s\n", r.key_error.c_str());
        return 2;
    }
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
