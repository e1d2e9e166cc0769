// dpdk_env.cpp: see dpdk_env.hpp.
#include "dpdk_env.hpp"
#include "owner_only.hpp"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mempool.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace iccs {

uint64_t meminfo_value(const std::string& key) {
    std::ifstream meminfo("/proc/meminfo");
    std::string k;
    while (meminfo >> k) {
        if (k == key + ":") {
            uint64_t v = 0;
            meminfo >> v;
            return v;
        }
        meminfo.ignore(256, '\n');
    }
    return 0;
}

bool hugepages_available() {
    if (meminfo_value("HugePages_Total") == 0) return false;
    std::ifstream mounts("/proc/mounts");
    std::string dev, dir, type;
    while (mounts >> dev >> dir >> type) {
        if (type == "hugetlbfs") return true;
        std::getline(mounts, dev);
    }
    return false;
}

std::vector<std::string> eal_args(const EalOptions& o) {
    // Telemetry stays on (the default): it serves ./iccs stat and dpdk-telemetry.py.
    // A memif client logs an error on every connection attempt that races its server's start;
    // the port retries, and a link that never comes up is reported by Port::wait_link instead.
    std::vector<std::string> a = {"iccs", "--file-prefix=" + o.file_prefix, "--log-level=pmd.net.memif:critical",
                                  "--log-level=lib.telemetry:error",
                                  "--log-level=" + o.log_level};
    std::string lcores;
    for (size_t i = 0; i < o.lcore_cpus.size(); ++i) {
        if (i > 0) lcores += ",";
        lcores += std::to_string(i) + "@" + std::to_string(o.lcore_cpus[i]);
    }
    if (!lcores.empty()) a.push_back("--lcores=" + lcores);
    // Without hugepages: --no-huge (EAL then refuses --in-memory). With them: --in-memory, so no
    // hugepage files are left behind by a cluster that dies.
    a.push_back(hugepages_available() ? "--in-memory" : "--no-huge");
    if (o.single_file_segments) a.push_back("--single-file-segments");
    a.push_back("-m");
    a.push_back(std::to_string(o.memory_mb));
    if (o.pci_allow.empty()) {
        a.push_back("--no-pci");
    } else {
        for (const auto& p : o.pci_allow) a.push_back("-a" + p);
    }
    return a;
}

bool eal_start(const EalOptions& o, std::string& err) {
    std::vector<std::string> args = eal_args(o);
    std::vector<char*> argv;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    // The runtime dir, its config file and the telemetry socket (which takes live WAN changes)
    // are created in here: owner-only (issue 17).
    const OwnerOnlyUmask owner_only;
    const int r = rte_eal_init(static_cast<int>(args.size()), argv.data());
    if (r < 0) {
        err = std::string("DPDK EAL init failed: ") + rte_strerror(rte_errno);
        return false;
    }
    return true;
}

void eal_stop(const std::string& file_prefix) {
    rte_eal_cleanup();
    eal_remove_runtime_dir(file_prefix);
}

EalThreadScope::EalThreadScope(bool on) { registered_ = on && rte_thread_register() == 0; }

void eal_thread_flush_caches() {
    if (rte_lcore_id() == LCORE_ID_ANY) return;  // not registered: nothing parked
    rte_mempool_walk(
        [](rte_mempool* mp, void*) {
            if (rte_mempool_cache* c = rte_mempool_default_cache(mp, rte_lcore_id())) rte_mempool_cache_flush(c, mp);
        },
        nullptr);
}

EalThreadScope::~EalThreadScope() {
    if (!registered_) return;
    eal_thread_flush_caches();
    rte_thread_unregister();
}

}  // namespace iccs
