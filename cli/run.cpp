// run.cpp: `iccs run PROGRAM` and `iccs demo`: start every cluster of the machine as its own
// process over the fabric and run a built-in program on the compute threads.
#include "run.hpp"
#include "run_app.hpp"
#include "run_rt.hpp"
#include "run_widearea.hpp"

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
#include "runtime_launch.hpp"
#include "uring_udp.hpp"

namespace iccs {

namespace {

const char* kRunHelp =
    "usage: iccs run alltoall|errors|pingpong [options]\n"
    "       iccs run exchange|ping [--transport iccs|direct|delay] [--delay-us N|auto] [options]\n"
    "       iccs run collectives|ordered [--transport ...] [options]\n"
    "       (exchange, collectives, ordered: --inject-error, a test hook: a wrong message or value\n"
    "       on purpose, which the program's checks must catch: the run FAILs, exit 1)\n"
    "       iccs run integrate|nqueens|raytrace|satin-tsp --policy rs|chs|crs [--size test|paper] [--json]\n"
    "            [--inject-error] [--image FILE] [--transport ...] [options]\n"
    "       iccs run PATH [--transport ...] [--report FILE] [options] [-- ARGS]\n"
    "       iccs run APP [--clusters C] [--cluster-size S] [--transport ...] [--size test|paper] [--json]\n"
    "            APP: jacobi matmul gauss fft tsp water barnes unstructured, across clusters on the\n"
    "            DSM (iccs run APP --help)\n"
    "       iccs run WA [--variant V[,V...]|both|all] [--size test|paper] [--json] [--inject-error]\n"
    "            [--clusters C] [--cluster-size S] [--sites LIST] [--wan-latency-ms X] [--wan-bandwidth B] ...\n"
    "            WA: the wide-area suite on the runtime and group/ (apps/widearea/): sor asp tsp-wa\n"
    "            water-wa ... (iccs run --list-widearea lists them and their variants: original, the\n"
    "            study's optimized, ours; iccs run WA --help)\n"
    "  Starts every cluster of the machine as its own process (own DPDK EAL, proxies on pinned\n"
    "  lcores, memif links between the proxies of different clusters, or veths / NIC ports, or\n"
    "  the kernel's UDP sockets driven by io_uring) and runs a built-in program on every compute\n"
    "  thread, each with its own convergence module:\n"
    "  alltoall  every compute thread opens a parallel connection to every compute thread of every\n"
    "            other cluster and sends --messages messages over it (sizes random in\n"
    "            [--min-size, --max-size]; the first message has the smallest size, the second the\n"
    "            largest); every receiver checks each one: intact, exactly once, and in order on\n"
    "            ordered connections; then both ends close and the receiver sees end-of-stream.\n"
    "            --inject-error (a test hook): thread 0.0's message 1 to thread 1.0 leaves with a byte\n"
    "            wrong; its receiver counts it corrupt and the run FAILs (exit 1).\n"
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
    "                       (so the other side is idle when a message comes; default 0); alltoall:\n"
    "                       every compute thread pauses N us once its connections are open, then\n"
    "                       sends (idle proxies, then a burst)\n"
    "  --timeout S          stop the run after S seconds (default 300)\n"
    "programs on the cluster runtime (compute/runtime.hpp: active messages, request/reply, barriers):\n"
    "  exchange  every compute thread sends --messages active messages (default 200) of random sizes in\n"
    "            [--min-size, --max-size] to every compute thread of every other cluster; receivers check\n"
    "            the bytes, exactly-once and per-source order; each thread makes 20 requests (answered at\n"
    "            once by a service endpoint, or deferred and answered from another endpoint); then\n"
    "            --barriers N (default 10) barrier and barrier_gather rounds, contents checked.\n"
    "            --inject-error: thread 0.0 flips a byte of its message 1 to thread 1.0 (FAIL).\n"
    "            --max-size is at most 1048568 (max_message() = 1 MiB with its 8-byte number).\n"
    "  ping      thread 0 of cluster 0 sends --messages requests (default 1000, after --warmup) of --size\n"
    "            bytes (default 64) to thread 0 of cluster 1, which replies; prints median/p99 round trip.\n"
    "  collectives  group/'s collectives (barrier, bcast, reduce, allreduce, gather(v), scatter(v),\n"
    "            allgather(v), alltoall(v), reduce_scatter, scan; sum/min/max/prod/user function) on\n"
    "            every compute thread against a sequential reference, the hierarchical (MagPIe) and the\n"
    "            flat family; the topology is [wan] sites (--sites); cluster 0 prints the counters\n"
    "            summed over the clusters (WAN bytes against the minimum, WAN hops, per WAN link) and\n"
    "            MagPIe's rule is checked for the hierarchical family. --family hier|flat|both\n"
    "            (default both), --elements N,N,... int64 elements per rank (default 0,1,1000,20000;\n"
    "            at most 131072 = 1 MiB), --rounds R (default 1), --segment-bytes N (default 65536),\n"
    "            --call-timeout-ms N (a call waiting longer fails naming the peer; default 120000).\n"
    "            --bad root|size|missing: bad use on purpose instead (the last rank broadcasts from\n"
    "            another root, passes a longer allreduce, or skips the allreduce): every thread prints\n"
    "            its error (naming the call and the threads) and the run fails. Every thread prints a\n"
    "            CRC-32 of its results per collective ('results C.T FAMILY: bcast CRC ...').\n"
    "            --inject-error: rank 0 adds 1 to one element of its input to an allreduce (FAIL).\n"
    "  ordered   group/'s totally ordered broadcast: every thread sends --messages N (default 100) of\n"
    "            --size N bytes (default 64) at once and delivers everyone's; every thread of every\n"
    "            cluster must see the same sequence, each sender's in order; then --latency-rounds N\n"
    "            (default 60) one at a time from senders in phases of 10; then --writes N (default 20)\n"
    "            per thread to a replicated object, which must end identical on every cluster.\n"
    "            --sequencer central|rotating|migrating|all (default all). Every thread prints its\n"
    "            sequence's hash and its replica, thread 0.0 the senders of both in delivery order.\n"
    "            --inject-error: rank 0 sends its messages 0 and 1 the wrong way round (FAIL).\n"
    "  integrate, nqueens, raytrace, satin-tsp  Satin's divide-and-conquer programs on group/'s work\n"
    "            stealing (adaptive integration; N-queens; a ray tracer sending image segments back;\n"
    "            TSP with the distance table in every job), checked byte for byte against the\n"
    "            sequential computation in the same run (PASS/FAIL, exit 0/1). One cluster is allowed.\n"
    "            --policy rs|chs|crs (default crs): random stealing; cluster-hierarchical (a cluster\n"
    "            steals over the WAN only when all its threads are idle); cluster-aware random (at\n"
    "            most one asynchronous WAN steal per thread, synchronous steals inside the site).\n"
    "            --size test|paper (default test), --json (one object: time_s, sequential_s, the\n"
    "            steal counters summed: local_attempts, local_steals, wan_attempts, wan_steals,\n"
    "            max_outstanding_wan, idle_s, jobs_spawned, jobs_run, chs_wan_steals_traced,\n"
    "            chs_wan_steals_cluster_busy, ...; result), --inject-error (corrupt the result: must\n"
    "            FAIL), --image FILE (raytrace: the image as PPM), --seed N (TSP's cities), --timeout S.\n"
    "            WAN: --sites, --wan-latency-ms, --wan-bandwidth, or Satin's scenarios on 4 clusters:\n"
    "            --wan-script perf/wan_scenarios/sN.wan (N = 1..8), --wan-series .../s9.series.\n"
    "  PATH      any program linked with the runtime (runtime_dep): one process per cluster, exec'd\n"
    "            with ICCS_CLUSTER, ICCS_CLUSTERS, ICCS_CONFIG, ICCS_OVERRIDES, ICCS_RUN_ID,\n"
    "            ICCS_TRANSPORT, ICCS_DELAY_NS; it calls runtime_from_env() and ends with\n"
    "            runtime_finish(). Arguments after -- go to the program. A standard input that is not\n"
    "            a terminal is read once and given to every cluster process; a terminal stays with\n"
    "            cluster 0 (the others get /dev/null). As under mpirun: it runs in the caller's\n"
    "            working directory with the caller's environment; its standard output is the\n"
    "            program's (a PARMACS program's prefix and epilogue, standard output and error,\n"
    "            from cluster 0 only; whole lines from every thread after CREATE); the launcher's\n"
    "            lines and counters go to standard error; the exit status is the program's (the\n"
    "            first failing cluster's).\n"
    "            Its time limit is 24 h (86400 s) unless --timeout S says otherwise.\n"
    "  --report FILE        PATH and applications: the launcher's report (run shape, verdict, exit\n"
    "                       status, runtime, proxy and DSM counters of every cluster) as one JSON\n"
    "                       object in FILE, and nothing of it on standard error\n"
    "  --transport T        [runtime] transport (default iccs): iccs (the convergence library and\n"
    "                       the proxies), direct (\"no delay\": shared memory between the cluster\n"
    "                       processes, no proxy, no stack), or delay (\"no contention\": as direct,\n"
    "                       every message held --delay-us first)\n"
    "  --delay-us N|auto    [runtime] delay_us: the hold time [us]; auto = the idle ICCS's one-way\n"
    "                       latency at the application's mean message size: a first run over direct\n"
    "                       gives the mean (counters), an idle ping over iccs at that size gives\n"
    "                       median RTT / 2\n"
    "  Each cluster prints its runtime counters per endpoint (rt C.T; the service endpoint is\n"
    "  rt C.service), and over iccs also its proxies' counters (the service endpoint's module is\n"
    "  the last 'thread' line). --transport and --delay-us are for these programs only.\n";

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
    bool inject_error = false;
    std::string program = "alltoall";
    int i = 0;
    if (!demo) {
        if (argc < 1 || std::strcmp(argv[0], "--help") == 0 || std::strcmp(argv[0], "-h") == 0) {
            std::fputs(kRunHelp, argc < 1 ? stderr : stdout);
            return argc < 1 ? 2 : 0;
        }
        if (std::strcmp(argv[0], "--list-widearea") == 0) {
            print_widearea_list();
            return 0;
        }
        if (is_widearea_name(argv[0])) return cmd_run_widearea(argc, argv);
        if (is_app_name(argv[0])) return cmd_run_app(argc, argv);
        if (std::strchr(argv[0], '/') != nullptr) return cmd_run_path(argc, argv);
        if (is_rt_program(argv[0])) return cmd_run_rt(argc, argv);
        if (std::strcmp(argv[0], "alltoall") != 0 && std::strcmp(argv[0], "errors") != 0 &&
            std::strcmp(argv[0], "pingpong") != 0)
            usage_error(std::string("unknown program '") + argv[0] +
                        "' (built-in programs: alltoall, errors, pingpong, exchange, ping, collectives, ordered, integrate, nqueens, raytrace, satin-tsp; applications: jacobi, "
                        "matmul, gauss, fft, tsp, water, barnes, unstructured; wide-area programs: iccs run "
                        "--list-widearea; or a path to a program)");
        program = argv[0];
        i = 1;
    }
    for (; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--help" || a == "-h") {
            std::fputs(kRunHelp, stdout);
            return 0;
        }
        if (a == "--transport" || a == "--delay-us")
            usage_error(a + " is for programs on the cluster runtime (exchange, ping, or a PATH); " + program +
                        " is a convergence-level program that always runs over the proxies");
        if (a == "--inject-error" && program == "alltoall") {  // the test hook: the run must FAIL
            inject_error = true;
            continue;
        }
        if (i + 1 >= argc) usage_error(a + " needs a value (see iccs run --help)");
        const std::string v = argv[++i];
        bool mapped = false;
        for (const auto& [flag, key] : cli::kRunConfigFlags)
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
    std::string wan_err;
    ClusterPlan plan;
    if (!plan_from_config(cfg, 0, plan, wan_err)) {
        std::fprintf(stderr, "%s\n", wan_err.c_str());
        return 2;
    }
    const uint16_t nprox = plan.proxies_per_cluster[0];
    plan.workload = program;
    plan.messages = messages;
    plan.min_size = min_size;
    plan.max_size = max_size;
    plan.warmup = warmup;
    plan.gap_us = gap_us;
    plan.inject_error = inject_error;
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
                plan.mtu_bytes, kernel_udp ? " (not used: the kernel fragments to the route's MTU)" : "", host_core_count());
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
