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
    // --single-file-segments: DPDK's memory in one file per segment list, which memif's zero-copy
    // mode hands to the peer ([machine] memif_zero_copy)
    bool single_file_segments = false;
};

// True when hugepages are configured and mounted (then --no-huge is not used).
// A /proc/meminfo field by name ("MemAvailable": in kB; "HugePages_Total": a count); 0 when
// absent or unreadable.
uint64_t meminfo_value(const std::string& key);
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

// A non-EAL thread that uses DPDK on the data path (a compute thread: convergence takes and frees
// message buffers; under inline polling it runs the proxies, port bursts included) registered
// with the EAL for its lifetime, so it has an lcore id and with it a per-lcore cache in every
// mempool. Unregistered, each get and put goes to the pool's shared ring (a compare-and-swap
// each): some 16 of them per round trip cost ~0.8 us of a 2.2 us memif round trip here
// (perf/README.md, issue 21). When the EAL has no lcore id free the thread stays unregistered:
// slower, still correct. On destruction the thread's cache of every mempool goes back to its
// pool (rte_thread_unregister alone would leave the objects parked under the lcore id).
// Construct it in the thread, before anything that frees buffers on its destruction. Only for a
// thread that also takes what it frees: a cache parks up to 1.5x its size (384 objects) of each
// pool, which a thread that only frees (received frames it does not poll for) never gives back
// until it ends, and an RX pool sized to what may be held then starves its port.
class EalThreadScope {
   public:
    explicit EalThreadScope(bool on = true);
    ~EalThreadScope();
    EalThreadScope(const EalThreadScope&) = delete;
    EalThreadScope& operator=(const EalThreadScope&) = delete;
    bool registered() const { return registered_; }

   private:
    bool registered_ = false;
};

// The calling thread's cache of every mempool back to its pool (a registered thread that took
// buffers on another's behalf and parks none between: an in-rank MPI cluster's stand-in).
void eal_thread_flush_caches();

}  // namespace iccs
