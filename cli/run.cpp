// run.cpp: `iccs run PROGRAM` and `iccs demo`: start every cluster of the machine as its own
// process over the fabric and run a built-in program on the compute threads.
#include "run.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "args.hpp"
#include "cluster.hpp"
#include "config.hpp"
#include "uring_udp.hpp"

namespace iccs {

namespace {

const char* kRunHelp =
    "usage: iccs run alltoall|errors|pingpong [options]\n"
    "  Starts every cluster of the machine as its own process (own DPDK EAL, proxies on pinned\n"
    "  lcores, memif links between the proxies of different clusters, or veths / NIC ports, or\n"
    "  the kernel's UDP sockets driven by io_uring) and runs a built-in program on every compute\n"
    "  thread, each with its own convergence module:\n"
    "  alltoall  every compute thread opens a parallel connection to every compute thread of every\n"
    "            other cluster and sends --messages messages over it (sizes random in\n"
    "            [--min-size, --max-size]; the first message has the smallest size, the second the\n"
    "            largest); every receiver checks each one: intact, exactly once, and in order on\n"
    "            ordered connections; then both ends close and the receiver sees end-of-stream.\n"
    "  errors    the failure cases of connections on 2 clusters: connect to a port nobody bound\n"
    "            (refused), recv after the peer closed (end-of-stream), and cluster 1 killing itself\n"
    "            (its peer is told the cluster is down within [cluster] peer_timeout_ms).\n"
    "  pingpong  thread 0 of cluster 0 sends --messages messages of --min-size bytes, one at a time,\n"
    "            to thread 0 of cluster 1, which sends each back (after --warmup untimed rounds);\n"
    "            prints the round-trip times: 'rtt_ns MEDIAN P99 MIN MAX N'.\n"
    "  Prints per-cluster PASS/FAIL, the proxy counters, and each compute thread's convergence\n"
    "  counters (messages handed to each proxy); exits non-zero on any failure. Ctrl-C stops every\n"
    "  cluster cleanly.\n"
    "options (each overrides the configuration file):\n"
    "  --config FILE        machine configuration (TOML; see iccs.example.toml)\n"
    "  --clusters N         [machine] clusters\n"
    "  --threads N          [cluster] compute_threads\n"
    "  --proxies P|auto     [cluster] proxies\n"
    "  --polling MODE       [cluster] polling: busy, adaptive, inline\n"
    "  --dispatch POLICY    [cluster] dispatch: fixed, round-robin, least-loaded\n"
    "  --order ORDER        [convergence] order: ordered, unordered\n"
    "  --stripe-threshold N [convergence] stripe_threshold_bytes (0 = one MTU's payload)\n"
    "  --fabric NAME        [machine] fabric: memif (shared-memory links between the cluster\n"
    "                       processes), af_packet (a veth per proxy on a Linux bridge; needs root),\n"
    "                       pci (NIC ports from [machine] pci_addresses), or udp (a kernel UDP\n"
    "                       socket per proxy driven by io_uring, on 127.0.0.1 unless [machine]\n"
    "                       udp_addresses says otherwise; ports udp_port + 64*cluster + proxy)\n"
    "  --mtu N              [machine] mtu_bytes\n"
    "  --drop P             [test] drop: probability a received frame is dropped\n"
    "  --duplicate P        [test] duplicate: probability a received frame is duplicated\n"
    "  --reorder N          [test] reorder_window: frames held back and released out of order\n"
    "  --seed N             [test] seed\n"
    "  --pcap DIR           [machine] pcap_dir: every proxy writes the frames its ports send and\n"
    "                       receive to DIR/cluster<C>-proxy<P>.pcapng (pcapng, ns timestamps,\n"
    "                       direction; created if missing), at most [machine] pcap_max_bytes\n"
    "                       (default 64 MiB) per file; read with tshark -r or Wireshark, decode\n"
    "                       with tools/wireshark/iccs.lua. DPDK fabrics only (not udp)\n"
    "  --sites LIST         [wan] sites: the site of each cluster, e.g. 0,0,1 (default: each its own)\n"
    "  --wan-latency-ms X   [wan] latency_ms: one-way latency of every inter-site link\n"
    "  --wan-bandwidth BPS  [wan] bandwidth_bytes_per_s of every inter-site link (0 = unlimited)\n"
    "  --wan-loss P         [wan] loss: probability that a frame on an inter-site link is lost\n"
    "  --wan-script FILE    [wan] script driving the links (read, sleep, set, set_sym, forever)\n"
    "  --wan-series FILE    [wan] series: a measured time series replayed\n"
    "  --set SECTION.KEY=V  any other key\n"
    "  --messages N         messages per pair of compute threads (default 1000)\n"
    "  --min-size N         smallest message payload [bytes] (default 1)\n"
    "  --max-size N         largest message payload [bytes] (default 9000, at most 16777216)\n"
    "  --warmup N           pingpong: untimed rounds first (default 10)\n"
    "  --gap-us N           pingpong: the pinger pauses N us before each round, outside the timing\n"
    "                       (so the other side is idle when a message comes; default 0)\n"
    "  --timeout S          stop the run after S seconds (default 300)\n";

[[noreturn]] void usage_error(const std::string& msg) { cli::usage_error("run", msg); }

uint64_t parse_u64(const std::string& flag, const std::string& v, uint64_t lo, uint64_t hi) {
    return cli::parse_u64("run", flag, v.c_str(), lo, hi);
}

}  // namespace

int cmd_run(int argc, char** argv, bool demo) {
    std::string config_path;
    std::vector<std::pair<std::string, std::string>> overrides;
    uint64_t messages = demo ? 2000 : 1000;
    uint32_t min_size = 1, max_size = 9000, timeout_s = 300;
    uint64_t warmup = 10;
    uint32_t gap_us = 0;
    std::string program = "alltoall";
    int i = 0;
    if (!demo) {
        if (argc < 1 || std::strcmp(argv[0], "--help") == 0 || std::strcmp(argv[0], "-h") == 0) {
            std::fputs(kRunHelp, argc < 1 ? stderr : stdout);
            return argc < 1 ? 2 : 0;
        }
        if (std::strcmp(argv[0], "alltoall") != 0 && std::strcmp(argv[0], "errors") != 0 &&
            std::strcmp(argv[0], "pingpong") != 0)
            usage_error(std::string("unknown program '") + argv[0] + "' (built-in programs: alltoall, errors, pingpong)");
        program = argv[0];
        i = 1;
    }
    const std::pair<const char*, const char*> flag_keys[] = {
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
    for (; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--help" || a == "-h") {
            std::fputs(kRunHelp, stdout);
            return 0;
        }
        if (i + 1 >= argc) usage_error(a + " needs a value (see iccs run --help)");
        const std::string v = argv[++i];
        bool mapped = false;
        for (const auto& [flag, key] : flag_keys)
            if (a == flag) {
                overrides.emplace_back(key, v);
                mapped = true;
            }
        if (mapped) continue;
        if (a == "--config") {
            config_path = v;
        } else if (a == "--set") {
            const auto eq = v.find('=');
            if (eq == std::string::npos) usage_error("--set takes SECTION.KEY=VALUE, got '" + v + "'");
            overrides.emplace_back(v.substr(0, eq), v.substr(eq + 1));
        } else if (a == "--messages") {
            messages = parse_u64(a, v, 1, 100'000'000);
        } else if (a == "--min-size") {
            min_size = static_cast<uint32_t>(parse_u64(a, v, 0, 16u << 20));
        } else if (a == "--max-size") {
            max_size = static_cast<uint32_t>(parse_u64(a, v, 0, 16u << 20));
        } else if (a == "--gap-us") {
            gap_us = static_cast<uint32_t>(parse_u64(a, v, 0, 10'000'000));
        } else if (a == "--warmup") {
            warmup = parse_u64(a, v, 0, 1'000'000);
        } else if (a == "--timeout") {
            timeout_s = static_cast<uint32_t>(parse_u64(a, v, 1, 86400));
        } else {
            usage_error("unknown option '" + a + "' (see iccs run --help)");
        }
    }
    if (min_size > max_size) usage_error("--min-size " + std::to_string(min_size) + " exceeds --max-size " +
                                         std::to_string(max_size));
    const ConfigResult cr = configure(config_path, overrides);
    if (!cr.ok()) {
        std::fprintf(stderr, "%s\n", cr.error.c_str());
        return 2;
    }
    const MachineConfig& cfg = *cr.config;
    if (cfg.machine.fabric == Fabric::kUdp) {  // io_uring refused: say so before anything starts
        UringCaps caps;
        std::string err;
        if (!uring_probe(caps, err)) {
            std::fprintf(stderr, "iccs: %s\n", err.c_str());
            return 2;
        }
    }
    if (cfg.machine.clusters < 2) {
        std::fprintf(stderr, "iccs run: %s needs at least 2 clusters ([machine] clusters = %u)\n",
                     program.c_str(), cfg.machine.clusters);
        return 2;
    }
    ClusterPlan plan;
    {
        std::string err;
        if (!to_wan_config(cfg, plan.wan, err)) {
            std::fprintf(stderr, "%s\n", err.c_str());
            return 2;
        }
    }
    plan.clusters = static_cast<uint16_t>(cfg.machine.clusters);
    plan.threads = static_cast<uint16_t>(cfg.cluster.compute_threads);
    const uint16_t nprox = static_cast<uint16_t>(cfg.cluster.proxies_resolved);
    plan.proxies_per_cluster.assign(plan.clusters, nprox);
    const unsigned cores = std::max(1u, host_core_count());
    // Pinning: proxies on the configured cores, else spread; compute threads spread after them.
    for (uint16_t p = 0; p < nprox; ++p)
        plan.proxy_cores.push_back(p < cfg.cluster.proxy_cores.size() ? cfg.cluster.proxy_cores[p]
                                                                       : (p + 1) % cores);
    for (uint32_t i = 0; i < uint32_t{plan.clusters} * plan.threads; ++i) plan.compute_cores.push_back(i % cores);
    plan.polling = cfg.cluster.polling;
    plan.conv = to_conv_config(cfg);
    plan.peer_timeout_ms = cfg.cluster.peer_timeout_ms;
    plan.workload = program;
    plan.pool_segments = cfg.cluster.mempool_mbufs * nprox;
    plan.fabric = std::string(to_string(cfg.machine.fabric));
    plan.pci_addresses = cfg.machine.pci_addresses;
    plan.mtu_bytes = cfg.machine.mtu_bytes;
    plan.base_ip = cfg.machine.base_ip.v;
    plan.udp_port = cfg.machine.udp_port;
    plan.udp_addresses = cfg.machine.udp_addresses;
    plan.slidwin = to_slidwin_config(cfg.slidwin);
    plan.reass = to_reassembly_config(cfg.reassembly);
    plan.impair.drop = cfg.test.drop;
    plan.impair.duplicate = cfg.test.duplicate;
    plan.impair.reorder_window = cfg.test.reorder_window;
    plan.impair.seed = cfg.test.seed;
    plan.impair.slow_proxy = static_cast<int32_t>(cfg.test.slow_proxy);
    plan.impair.slow_us = cfg.test.slow_proxy_us;
    plan.ring_entries = cfg.cluster.ring_entries;
    plan.messages = messages;
    plan.min_size = min_size;
    plan.max_size = max_size;
    plan.seed = cfg.test.seed + 1;
    plan.pcap_dir = cfg.machine.pcap_dir;
    plan.pcap_max_bytes = cfg.machine.pcap_max_bytes;
    plan.warmup = warmup;
    plan.gap_us = gap_us;
    std::string result_file;
    if (program == "pingpong") {
        result_file = "/tmp/iccs-pingpong-" + std::to_string(::getpid()) + ".txt";
        plan.result_file = result_file;
    }
    const bool kernel_udp = cfg.machine.fabric == Fabric::kUdp;
    std::printf("iccs %s: %u clusters x %u compute threads, %u proxies per cluster%s, fabric %s (%s, "
                "one process and EAL per cluster), polling %s, dispatch %s, %s connections, stripe threshold %u "
                "bytes, MTU %u%s; host has %u cores\n",
                demo ? "demo" : ("run " + program).c_str(), plan.clusters, plan.threads, nprox,
                cfg.cluster.proxies == kProxiesAuto ? " (auto)" : "", plan.fabric.c_str(),
                kernel_udp ? "kernel UDP sockets via io_uring" : "DPDK",
                std::string(to_string(cfg.cluster.polling)).c_str(),
                std::string(to_string(cfg.cluster.dispatch)).c_str(), plan.conv.ordered ? "ordered" : "unordered",
                plan.conv.stripe_threshold_bytes ? plan.conv.stripe_threshold_bytes
                                                 : default_stripe_threshold(plan.mtu_bytes),
                plan.mtu_bytes, kernel_udp ? " (not used: the kernel fragments to the route's MTU)" : "", cores);
    if (program == "alltoall")
        std::printf("alltoall: %llu messages of %u..%u bytes from every compute thread to every compute thread of "
                    "every other cluster, each pair over one parallel connection\n",
                    static_cast<unsigned long long>(messages), min_size, max_size);
    if (!plan.pcap_dir.empty())
        std::printf("capture: every proxy's frames to %s/cluster<C>-proxy<P>.pcapng, at most %llu bytes per file\n",
                    plan.pcap_dir.c_str(), static_cast<unsigned long long>(plan.pcap_max_bytes));
    std::fflush(stdout);
    if (plan.wan) {
        uint32_t nsites = 0;
        const std::vector<uint16_t> sites = wan_sites(cfg, nsites);
        std::string s;
        for (const uint16_t x : sites) s += (s.empty() ? "" : ",") + std::to_string(x);
        std::printf("wan: emulated links between %u sites (site of each cluster: %s), default latency %g ms, "
                    "loss %g, bandwidth %s%s%s\n",
                    nsites, s.c_str(), cfg.wan.latency_ms, cfg.wan.loss,
                    cfg.wan.bandwidth_bytes_per_s ? (std::to_string(cfg.wan.bandwidth_bytes_per_s) + " bytes/s").c_str()
                                                  : "unlimited",
                    cfg.wan.script.empty() ? "" : (", script " + cfg.wan.script).c_str(),
                    cfg.wan.series.empty() ? "" : (", series " + cfg.wan.series).c_str());
    }
    std::fflush(stdout);
    const int rc = launch_clusters(plan, timeout_s);
    if (!result_file.empty()) {
        if (FILE* f = std::fopen(result_file.c_str(), "r")) {
            char line[256];
            while (std::fgets(line, sizeof line, f)) std::printf("%s", line);
            std::fclose(f);
        }
        std::remove(result_file.c_str());
    }
    std::printf("%s\n", rc != 0 ? "FAIL"
                         : program == "pingpong" ? "PASS: every round trip completed"
                         : program == "errors"
                             ? "PASS: refused, end-of-stream and peer-down were each reported as documented"
                             : plan.conv.ordered ? "PASS: every message arrived exactly once, intact and in order"
                                                 : "PASS: every message arrived exactly once and intact");
    return rc;
}

}  // namespace iccs
