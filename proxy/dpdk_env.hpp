// dpdk_env.hpp: one DPDK EAL per cluster process, set up so several run side by side on one host.
//
// Each cluster gets its own --file-prefix (separate runtime dir, telemetry socket, memory files),
// --no-huge with -m sized to its pools when no hugepages are mounted (DESIGN.md §8), and an
// --lcores map that pins each proxy lcore to the core the configuration names. eal_stop() undoes
// everything, runtime dir included (the launcher also removes the dirs of a cluster that died).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace iccs {

struct EalOptions {
    std::string file_prefix;            // unique per cluster process on a host
    std::vector<unsigned> lcore_cpus;   // lcore i runs on CPU lcore_cpus[i]; lcore 0 is the main lcore
    uint32_t memory_mb = 256;           // -m: all pools of this process must fit
    std::vector<std::string> pci_allow; // -a PCI addresses (fabric pci); none: --no-pci
    std::string log_level = "*:warning";
};

// True when hugepages are configured and mounted (then --no-huge is not used).
bool hugepages_available();
// The EAL runtime directory of a file prefix (where the telemetry socket lives).
std::string eal_runtime_dir(const std::string& file_prefix);
// rte_eal_init with the arguments built from `o`; false with the reason in err.
bool eal_start(const EalOptions& o, std::string& err);
// The arguments eal_start passes (for logs and --help-like reports).
std::vector<std::string> eal_args(const EalOptions& o);
// rte_eal_cleanup and removal of the runtime dir.
void eal_stop(const std::string& file_prefix);
// Remove a runtime dir left by a process that died (called by the launcher).
void eal_remove_runtime_dir(const std::string& file_prefix);

}  // namespace iccs
