// rt_launch.cpp: how a process becomes its cluster of the runtime (from our launcher's ICCS_*
// variables, or from mpirun/srun's rank and size), and `iccs run`'s launch of runtime programs.
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/personality.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <vector>

#include "activity.hpp"
#include "cluster_stop.hpp"
#include "owner_only.hpp"
#include "rt_core.hpp"
#include "runtime_launch.hpp"

namespace iccs {

#ifdef ICCS_RT_ICCS_AS_MODULE
// In the library PARMACS programs link (compute/meson.build): the iccs transport named weakly, so
// such a program neither loads DPDK's libraries nor runs their constructors over direct and
// delay, and gets the transport from its module when a run asks for it (make_iccs_transport).
std::unique_ptr<RtCore> make_iccs_runtime(const RtSpec& spec, std::string& err) __attribute__((weak));
#endif

namespace {

#ifdef ICCS_RT_ICCS_AS_MODULE
using MakeIccsModule = RtCore* (*)(const RtSpec*, std::string*);

// The iccs transport's module (compute/rt_iccs_module.cpp): ICCS_RT_MODULE if set (that one
// alone: a module the user named that does not fit is an error, not a reason to take another),
// else where it is installed, else in the build tree the library came from.
MakeIccsModule iccs_transport_module(std::string& err) {
    std::vector<std::string> paths;
    if (const char* env = std::getenv("ICCS_RT_MODULE"); env != nullptr && *env != '\0') {
        paths.emplace_back(env);
    } else {
        paths.emplace_back(ICCS_RT_MODULE_INSTALLED);
        paths.emplace_back(ICCS_RT_MODULE_BUILD);
    }
    std::string tried;
    for (const std::string& p : paths) {
        // RTLD_GLOBAL: as if the program had linked the transport (and DPDK with it).
        void* h = dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL);
        if (h == nullptr) {
            tried += "\n  " + std::string(dlerror());
            continue;
        }
        // A module of another build (an older install) would run with other struct layouts.
        const auto* id = static_cast<const char*>(dlsym(h, "iccs_rt_iccs_build_id"));
        if (id == nullptr || std::strcmp(id, ICCS_RT_MODULE_BUILD_ID) != 0) {
            tried += "\n  " + p + ": built by another build of iccs (build id " + (id != nullptr ? id : "none") +
                     ", this program's " + ICCS_RT_MODULE_BUILD_ID + ")";
            dlclose(h);
            continue;
        }
        if (void* f = dlsym(h, "iccs_rt_iccs_make")) return reinterpret_cast<MakeIccsModule>(f);
        tried += "\n  " + p + ": no iccs_rt_iccs_make";
    }
    err = "transport iccs: its module cannot be loaded (set ICCS_RT_MODULE to libiccs-rt-iccs.so):" + tried;
    return nullptr;
}
#endif

std::unique_ptr<RtCore> make_iccs_transport(const RtSpec& spec, std::string& err) {
#ifdef ICCS_RT_ICCS_AS_MODULE
    if (make_iccs_runtime == nullptr) {
        const MakeIccsModule make = iccs_transport_module(err);
        return make != nullptr ? std::unique_ptr<RtCore>(make(&spec, &err)) : nullptr;
    }
#endif
    return make_iccs_runtime(spec, err);
}

}  // namespace

bool load_security(const MachineConfig& cfg, ClusterPlan& plan, std::string& err) {
    const char* env = std::getenv("ICCS_KEY_FILE");
    const std::string path = env != nullptr && *env != '\0' ? std::string(env) : cfg.security.key_file;
    if (path.empty()) {
        if (cfg.security.encrypt) {
            err = "config error: [security] encrypt = true needs a key: [security] key_file or ICCS_KEY_FILE";
            return false;
        }
        return true;
    }
    plan.auth = slidwin_load_key(path, cfg.security.encrypt, err);
    if (!plan.auth) {
        err = std::string(env != nullptr && *env != '\0' ? "ICCS_KEY_FILE: " : "[security] key_file: ") + err;
        return false;
    }
    // The default piece fills a frame: leave room for the auth block (a set threshold is kept).
    if (plan.conv.stripe_threshold_bytes == 0)
        plan.conv.stripe_threshold_bytes = default_stripe_threshold(plan.mtu_bytes) - kSlidwinAuthLen;
    return true;
}

bool plan_from_config(const MachineConfig& cfg, uint16_t cluster, ClusterPlan& plan, std::string& err) {
    plan = ClusterPlan{};
    if (!to_wan_config(cfg, plan.wan, err)) return false;  // reads and compiles a script or series
    plan.cluster_id = cluster;
    plan.clusters = static_cast<uint16_t>(cfg.machine.clusters);
    plan.threads = static_cast<uint16_t>(cfg.cluster.compute_threads);
    const uint16_t nprox = static_cast<uint16_t>(cfg.cluster.proxies_resolved);
    plan.proxies_per_cluster.assign(plan.clusters, nprox);
    const unsigned cores = std::max(1u, host_core_count());
    for (uint16_t p = 0; p < nprox; ++p)
        plan.proxy_cores.push_back(p < cfg.cluster.proxy_cores.size() ? cfg.cluster.proxy_cores[p] : (p + 1) % cores);
    for (uint32_t i = 0; i < uint32_t{plan.clusters} * plan.threads; ++i) plan.compute_cores.push_back(i % cores);
    plan.polling = cfg.cluster.polling;
    plan.conv = to_conv_config(cfg);
    plan.peer_timeout_ms = cfg.cluster.peer_timeout_ms;
    plan.combine_max_bytes = cfg.cluster.combine_max_bytes;
    plan.assist = cfg.cluster.assist;
    plan.pool_segments = cfg.cluster.mempool_mbufs * nprox;
    plan.fabric = std::string(to_string(cfg.machine.fabric));
    plan.pci_addresses = cfg.machine.pci_addresses;
    plan.mtu_bytes = cfg.machine.mtu_bytes;
    plan.base_ip = cfg.machine.base_ip.v;
    plan.udp_port = cfg.machine.udp_port;
    plan.udp_sqpoll = cfg.machine.udp_sqpoll;
    plan.memif_zero_copy = cfg.machine.memif_zero_copy && cfg.machine.fabric == Fabric::kMemif;
    // memif only: a frame crosses shared memory of one host, where nothing corrupts it (the
    // run's fault injection, [test] and the WAN emulation, drops, duplicates and reorders frames
    // but never changes a byte); every other fabric has a wire or a kernel between the proxies.
    plan.udp_checksum_off =
        cfg.machine.udp_checksum == UdpChecksum::kOffOnMemif && cfg.machine.fabric == Fabric::kMemif;
    plan.udp_addresses = cfg.machine.udp_addresses;
    plan.slidwin = to_slidwin_config(cfg.slidwin);
    if (!load_security(cfg, plan, err)) return false;
    plan.reass = to_reassembly_config(cfg.reassembly);
    plan.impair.drop = cfg.test.drop;
    plan.impair.duplicate = cfg.test.duplicate;
    plan.impair.reorder_window = cfg.test.reorder_window;
    plan.impair.seed = cfg.test.seed;
    plan.impair.slow_proxy = static_cast<int32_t>(cfg.test.slow_proxy);
    plan.impair.slow_us = cfg.test.slow_proxy_us;
    plan.ring_entries = cfg.cluster.ring_entries;
    plan.pcap_dir = cfg.machine.pcap_dir;
    plan.pcap_max_bytes = cfg.machine.pcap_max_bytes;
    plan.seed = cfg.test.seed + 1;
    return true;
}

std::vector<std::vector<std::string>> rt_peer_addresses(const ClusterPlan& plan) {
    std::vector<std::vector<std::string>> out(plan.clusters);
    for (uint16_t c = 0; c < plan.clusters; ++c)
        for (uint16_t p = 0; p < plan.proxies_per_cluster[c]; ++p) {
            if (plan.fabric == "udp")
                out[c].push_back(to_string(udp_ip(plan, c, p)) + ":" + std::to_string(udp_port(plan, c, p)));
            else if (plan.fabric == "pci")
                out[c].push_back("pci " + pci_address(plan, c, p) + " ip " + to_string(proxy_ip(plan, c, p)));
            else
                out[c].push_back(to_string(proxy_ip(plan, c, p)));
        }
    return out;
}

bool rt_spec_from_env(const std::function<const char*(const char*)>& get, RtSpec& out, std::string& err) {
    RtRank rank;
    if (!rt_discover_rank(get, rank, err)) return false;
    if (!rank.found) {
        err = "this process was not started by `iccs run PATH`, mpirun or srun: none of ICCS_CLUSTER, SLURM_PROCID, "
              "OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK is set";
        return false;
    }
    const bool ours = rank.source == kEnvCluster;
    const char* cfg_path = get(kEnvConfig);
    if (!ours && (cfg_path == nullptr || *cfg_path == '\0')) {
        err = "started by a launcher (" + rank.source + ") but ICCS_CONFIG is not set: it must name the machine file "
              "(clusters, fabric, NI addresses of every cluster)";
        return false;
    }
    std::vector<std::pair<std::string, std::string>> overrides;
    if (!parse_overrides(get(kEnvOverrides), overrides, err)) return false;
    const ConfigResult cr = configure(cfg_path ? cfg_path : "", overrides);
    if (!cr.ok()) {
        err = cr.error;
        return false;
    }
    const MachineConfig& cfg = *cr.config;
    if (rank.size != 0 && rank.size != cfg.machine.clusters) {
        err = rank.size_source + "=" + std::to_string(rank.size) + ": the launcher started " + std::to_string(rank.size) +
              " processes but " +
              (cfg_path && *cfg_path ? std::string(cfg_path) : std::string("the configuration")) + " has [machine] clusters = " +
              std::to_string(cfg.machine.clusters) + " (one process per cluster)";
        return false;
    }
    if (rank.rank >= cfg.machine.clusters) {
        err = rank.source + " = " + std::to_string(rank.rank) + ": [machine] clusters = " +
              std::to_string(cfg.machine.clusters);
        return false;
    }
    out = RtSpec{};
    out.cluster = rank.rank;
    out.clusters = static_cast<uint16_t>(cfg.machine.clusters);
    out.threads = static_cast<uint16_t>(cfg.cluster.compute_threads);
    out.transport = cfg.runtime.transport;  // [runtime] transport; our launcher always says
    out.delay_ns = cfg.runtime.delay_us * 1000;
    if (const char* t = get(kEnvTransport); t != nullptr && *t != '\0') {
        if (!parse_transport(t, out.transport)) {
            err = env_bad(kEnvTransport, t, "allowed values are iccs, direct, delay");
            return false;
        }
    }
    if (const char* d = get(kEnvDelayNs); d != nullptr && !env_uint(d, 60'000'000'000ull, out.delay_ns)) {
        err = env_bad(kEnvDelayNs, d, "expected nanoseconds from 0 to 60000000000");
        return false;
    }
    const std::string id = launcher_run_id(get);
    out.run_id = id;
    if (!plan_from_config(cfg, out.cluster, out.plan, err)) return false;
    out.plan.run_id = id;
    out.plan.sock_dir = "/tmp/iccs-" + id;
    out.plan.exit_without_teardown = true;  // runtime_finish: the process ends right after
    if (!ours) {
        out.unlink_shm_at_end = out.cluster == 0;
        // No launcher of ours said it: cluster 0 does, once.
        if (out.cluster == 0 && out.transport == RtTransport::kIccs)
            if (const std::string w = unauthenticated_fabric_warning(out.plan); !w.empty())
                std::fprintf(stderr, "%s\n", w.c_str());
        // Every process of an mpirun/srun start may get here first: the directory is shared.
        if (out.transport == RtTransport::kIccs && out.plan.fabric == "memif" &&
            !make_private_dir(out.plan.sock_dir, err))
            return false;
    }
    return true;
}

std::unique_ptr<Runtime> make_runtime(const RtSpec& spec, std::string& err) {
    if (spec.threads == 0 || spec.clusters == 0 || spec.cluster >= spec.clusters) {
        err = "runtime: cluster " + std::to_string(spec.cluster) + " of " + std::to_string(spec.clusters) + ", " +
              std::to_string(spec.threads) + " threads: not a run";
        return nullptr;
    }
    // A cluster process from here on (cluster_stop.hpp, activity.hpp): a signal stops it at once
    // whatever its threads do, and its launcher can read what it was doing. The thread that makes
    // the runtime (the program's main) is the board's slot 0.
    cluster_stop_install(spec.cluster);
    activity_open(spec.plan.sock_dir.empty() ? std::string() : activity_path(spec.plan.sock_dir, spec.cluster),
                  spec.cluster);
    activity_bind_thread(0);
    std::unique_ptr<RtCore> core = spec.transport == RtTransport::kIccs ? make_iccs_transport(spec, err)
                                                                        : make_direct_runtime(spec, err);
    if (core) activity_phase(ClusterPhase::kRunning, "running");  // (over iccs run_cluster said so already)
    return core;
}

// Why: a DSM lock transfer or page fetch is a request to the other cluster's service thread and
// an answer back, each a futex wake. A thread sleeping on another core of this host's virtual
// CPUs took about 25 us to wake (a futex ping-pong: 48-64 us a round trip across two cores,
// 2.2 us on one). Left to the scheduler, a service thread ran on either core: SPLASH-3's
// water-nsquared (2 x 1) took 95-264 ms a run so, 211 ms (median of 7) with each service thread
// pinned to its own cluster's compute core, 118 ms pinned to the other's. With two clusters, the
// service thread on the core of the cluster whose requests it serves makes both hops of a
// transfer wake-ups on one core, and each compute thread keeps a core of its own. Asked for only
// (ICCS_PLACE_THREADS=1): with one more busy process on the host (an unpinned spin loop), pinned
// threads cannot leave its core, and barnes took 23.8 s against 8.0 s left to the scheduler.
bool place_on_host(RtSpec& spec, unsigned cores) {
    if (spec.transport == RtTransport::kIccs || spec.threads != 1 || spec.clusters < 2 || cores < 2) return false;
    if (const char* v = std::getenv("ICCS_PLACE_THREADS"); v == nullptr || std::strcmp(v, "1") != 0) return false;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(spec.cluster % cores, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) return false;  // a cpuset without that core: as before
    spec.service_core = int((spec.cluster + 1u) % spec.clusters % cores);
    return true;
}

std::unique_ptr<Runtime> runtime_from_env(std::string& err) {
    RtSpec spec;
    if (!rt_spec_from_env([](const char* n) -> const char* { return std::getenv(n); }, spec, err)) return nullptr;
    place_on_host(spec, host_core_count());
    return make_runtime(spec, err);
}

}  // namespace iccs
