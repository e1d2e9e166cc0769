// run.cpp: `iccs run alltoall|errors|pingpong` and `iccs demo --alltoall`: start every cluster of
// the machine as its own process over the fabric and run a built-in program of compute/ on the
// compute threads (the convergence level: parallel connections, no runtime).
#include "run.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cluster.hpp"
#include "config.hpp"
#include "run_table.hpp"
#include "runtime_launch.hpp"
#include "uring_udp.hpp"

namespace iccs {

namespace {

int run_convergence(const std::string& program, const ProgramRow* row, const cli::Args& p, bool demo,
                    const SoakHooks* soak = nullptr) {
    const std::string who = soak ? "soak" : demo ? "demo" : "run " + program;
    const uint64_t messages = p.u64("--messages", demo ? 2000 : 1000);
    const uint32_t min_size = static_cast<uint32_t>(p.u64("--min-size", 1));
    const uint32_t max_size = static_cast<uint32_t>(p.u64("--max-size", 9000));
    // A soak's default time-out: its length, then the drain and the report.
    const uint32_t timeout_s = static_cast<uint32_t>(p.u64("--timeout", soak ? soak->seconds + 300 : 300));
    const uint64_t warmup = p.u64("--warmup", 10);
    const uint32_t gap_us = static_cast<uint32_t>(p.u64("--gap-us", 0));
    const std::string& config_path = p.config_path;
    std::vector<std::pair<std::string, std::string>> overrides = p.overrides;
    if (soak) overrides.insert(overrides.begin(), soak->defaults.begin(), soak->defaults.end());
    auto usage_error = [&who](const std::string& msg) { cli::usage_error(who, msg); };
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
    plan.inject_error = p.flag("--inject-error");  // alltoall's test hook: the run must FAIL
    if (soak) {
        if (!plan.conv.ordered) usage_error("--order unordered: a soak checks every connection's order (ordered only)");
        plan.soak_s = soak->seconds;
        plan.run_id = std::to_string(::getpid());  // (the launcher's default, known here for the run directory)
    }
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
    if (soak)
        std::printf("soak: %u s of alltoall, %u..%u bytes from every compute thread to every compute thread of every "
                    "other cluster, each pair over one ordered parallel connection; frames dropped with probability "
                    "%g, duplicated %g, reordered within %u; %s; %s\n",
                    soak->seconds, min_size, max_size, cfg.test.drop, cfg.test.duplicate, cfg.test.reorder_window,
                    plan.wan ? "WAN emulation on" : "WAN emulation off",
                    cfg.security.key_file.empty() ? "no key" : ("key " + cfg.security.key_file).c_str());
    else if (program == "alltoall")
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
        for (const uint16_t x : sites) {
            if (!s.empty()) s += ',';
            s += std::to_string(x);
        }
        std::printf("wan: emulated links between %u sites (site of each cluster: %s), default latency %g ms, "
                    "loss %g, bandwidth %s%s%s\n",
                    nsites, s.c_str(), cfg.wan.latency_ms, cfg.wan.loss,
                    cfg.wan.bandwidth_bytes_per_s ? (std::to_string(cfg.wan.bandwidth_bytes_per_s) + " bytes/s").c_str()
                                                  : "unlimited",
                    cfg.wan.script.empty() ? "" : (", script " + cfg.wan.script).c_str(),
                    cfg.wan.series.empty() ? "" : (", series " + cfg.wan.series).c_str());
    }
    std::fflush(stdout);
    LaunchTick tick;
    if (soak && soak->tick) tick = [soak, dir = "/tmp/iccs-" + plan.run_id](const std::vector<pid_t>& pids) { soak->tick(pids, dir); };
    const int rc = launch_clusters(plan, timeout_s, tick);
    if (soak) return rc;  // (the soak says its verdict)
    if (!result_file.empty()) {
        if (FILE* f = std::fopen(result_file.c_str(), "r")) {
            char line[256];
            while (std::fgets(line, sizeof line, f)) std::printf("%s", line);
            std::fclose(f);
        }
        std::remove(result_file.c_str());
    }
    const std::string pass = program == "alltoall" && !plan.conv.ordered
                                 ? "PASS: every message arrived exactly once and intact"
                                 : row != nullptr ? row->pass_line
                                                  : "PASS: every message arrived exactly once, intact and in order";
    std::printf("%s\n", rc != 0 ? "FAIL" : pass.c_str());
    return rc;
}

}  // namespace

int launch_convergence(const ProgramRow& row, const std::string&, const cli::Args& p) {
    return run_convergence(row.name, &row, p, false);
}

int run_alltoall_demo(const cli::Args& p) { return run_convergence("alltoall", nullptr, p, true); }

int run_alltoall_soak(const cli::Args& p, const SoakHooks& h) { return run_convergence("alltoall", nullptr, p, false, &h); }

}  // namespace iccs
