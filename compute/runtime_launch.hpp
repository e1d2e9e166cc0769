// runtime_launch.hpp: how a cluster process becomes its cluster of the runtime (runtime.hpp), and
// how `iccs run` starts the processes of a runtime program (built in, or any binary).
//
// Three ways in, one description (RtSpec):
//   - `iccs run exchange|ping ...`: the launcher forks one process per cluster and builds the spec
//     itself (rt_launch_builtin);
//   - `iccs run PATH --clusters C ... -- ARGS`: the launcher execs PATH once per cluster with the
//     ICCS_* variables below (rt_launch_binary); the program calls runtime_from_env();
//   - mpirun / srun: no launcher of ours; runtime_from_env() takes rank and size from the
//     launcher's variables (DESIGN.md §8 order) and the machine from ICCS_CONFIG.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cluster.hpp"
#include "config.hpp"
#include "runtime.hpp"

namespace iccs {

// The environment of a cluster process started by `iccs run PATH`.
inline constexpr const char* kEnvCluster = "ICCS_CLUSTER";      // this process's cluster id
inline constexpr const char* kEnvClusters = "ICCS_CLUSTERS";    // clusters of the run
inline constexpr const char* kEnvConfig = "ICCS_CONFIG";        // machine file ("" = defaults)
inline constexpr const char* kEnvOverrides = "ICCS_OVERRIDES";  // flags: "section.key=value" lines
inline constexpr const char* kEnvRunId = "ICCS_RUN_ID";         // names EAL prefixes, sockets, shared memory
inline constexpr const char* kEnvTransport = "ICCS_TRANSPORT";  // iccs | direct | delay
inline constexpr const char* kEnvDelayNs = "ICCS_DELAY_NS";     // delay: the hold time [ns]
// When set, runtime_finish() writes "msgs N bytes B" (what this cluster's compute threads sent) to
// FILE.c<cluster>: `iccs run --delay-us auto` takes the application's mean message size from it.
inline constexpr const char* kEnvCountersFile = "ICCS_COUNTERS_FILE";
// When set (by `iccs run <app>`), runtime_finish() writes this cluster's runtime counters (every
// endpoint's messages and bytes; over iccs each proxy's counters) as one JSON object to
// FILE.rt.c<cluster>; the application adds FILE.app.c<cluster> and FILE.dsm.c<cluster>.
inline constexpr const char* kEnvReport = "ICCS_REPORT";
// The MTU MPI runs get on memif when nothing sets one (`iccs run --mpi` without --config, `iccs
// bench mpi`): the fabric is virtual, and a frame's fixed costs (stack, acks, memif descriptors)
// then go with 8.9 KB of payload instead of 1.4 (mpi/provider/README.md, "Speed").
inline constexpr uint32_t kMpiMemifMtuBytes = 9000;

// to_string(RtTransport) is in config.hpp. "iccs", "direct", "delay"; false for anything else.
bool parse_transport(const std::string& s, RtTransport& out);

// Everything one cluster process needs to become its cluster of the runtime.
struct RtSpec {
    uint16_t cluster = 0, clusters = 2, threads = 2;  // threads: compute threads per cluster
    RtTransport transport = RtTransport::kDirect;
    uint64_t delay_ns = 0;     // delay: every message is held until its send time + this
    std::string run_id;        // direct/delay: the shared memory is /iccs-<run_id>-rt
    ClusterPlan plan;          // iccs: the cluster (proxies, fabric, convergence); threads = threads
    bool quiet = false;
    bool unlink_shm_at_end = false;  // direct/delay without our launcher: cluster 0 removes the region
    int service_core = -1;  // the core the service thread is pinned to (-1: not pinned; place_on_host)
};

// The rank of this process from the environment. `get` reads a variable (nullptr when unset).
// Order: ICCS_CLUSTER/ICCS_CLUSTERS (our launcher), SLURM_PROCID/SLURM_NTASKS,
// OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE, PMI_RANK/PMI_SIZE, PMIX_RANK (size from PMI_SIZE,
// else unknown = 0). found=false (and true returned) when none is set; false with err naming the
// variable and its value when one is malformed (not a number, rank >= size, size 0 or > 64).
struct RtRank {
    bool found = false;
    uint16_t rank = 0;
    uint16_t size = 0;   // 0: the launcher did not say
    std::string source;       // "ICCS_CLUSTER", "SLURM_PROCID", ...
    std::string size_source;  // "ICCS_CLUSTERS", "SLURM_NTASKS", ... ("" when no size was given)
};
// Which of our own variables come first, and the ranks allowed: a cluster per process (the
// runtime, default), or the MPI provider's ranks (mpi/provider/: ICCS_RANK/ICCS_RANKS).
struct RankScheme {
    const char* own_rank;
    const char* own_size;
    uint32_t max_size;
    const char* what;  // said in the error of a rank out of range
};
inline constexpr RankScheme kClusterPerProcess{kEnvCluster, kEnvClusters, 64, "one cluster per process, at most 64 clusters"};
bool rt_discover_rank(const std::function<const char*(const char*)>& get, RtRank& out, std::string& err,
                      const RankScheme& scheme = kClusterPerProcess);
// The run id from the environment: ICCS_RUN_ID, else SLURM_JOB_ID(+step), else Open MPI's job id
// (OMPI_MCA_ess_base_jobid), else the PMIx namespace, else "job"; long ids become 8 hex digits.
std::string launcher_run_id(const std::function<const char*(const char*)>& get);
// A decimal number of at most max (false: empty, not a number, too large), and the line that
// says a variable's value is wrong: VAR="value": why. (launcher_env.cpp, with the two above and
// parse_overrides.)
bool env_uint(const char* v, uint64_t max, uint64_t& out);
std::string env_bad(const char* var, const char* v, const std::string& why);

// The ClusterPlan of cluster `cluster` of a machine configuration (pinning spread over this host's
// cores), for every launcher (`iccs run`, the runtime's). False with `err` when the [wan] script or
// series cannot be read or compiled (the file and line named).
bool plan_from_config(const MachineConfig& cfg, uint16_t cluster, ClusterPlan& plan, std::string& err);
// [security] (or ICCS_KEY_FILE): the key into plan.auth, read and checked now; false with err
// naming the file (missing, too short, readable by others).
bool load_security(const MachineConfig& cfg, ClusterPlan& plan, std::string& err);

// The NI addresses of every cluster as "ip:port" (fabric udp) or "pci ADDRESS" / "ip" (DPDK
// fabrics), by cluster id: what a process started by mpirun/srun reaches its peers at.
std::vector<std::vector<std::string>> rt_peer_addresses(const ClusterPlan& plan);

// ICCS_OVERRIDES' text ("section.key=value" lines; null: none) appended to `out`; false with err
// naming the line that is not one.
bool parse_overrides(const char* text, std::vector<std::pair<std::string, std::string>>& out, std::string& err);

// The spec of this process from its environment (as runtime_from_env). `get` as above.
bool rt_spec_from_env(const std::function<const char*(const char*)>& get, RtSpec& out, std::string& err);

// Builds the runtime of one cluster (any transport); nullptr with err.
std::unique_ptr<Runtime> make_runtime(const RtSpec& spec, std::string& err);
// With ICCS_PLACE_THREADS=1, a cluster process of `direct` or `delay` (every cluster on this
// host) with one compute thread, the caller: pins the caller to core `cluster mod cores` and
// names, in spec.service_core, the core of the next cluster's compute thread for this cluster's
// service thread. False, and nothing changed, without the variable, for other runs, on one core,
// or when the pin is refused.
bool place_on_host(RtSpec& spec, unsigned cores);

// The shared memory of a direct/delay run: created (sized, zeroed) by the launcher before any
// cluster starts, removed after; a process started without our launcher creates it if missing.
std::string rt_shm_name(const std::string& run_id);
bool rt_shm_create(const RtSpec& spec, std::string& err);
void rt_shm_remove(const std::string& run_id);

// `iccs run` of a runtime program. `main` runs in every forked cluster process (after its
// runtime is up) and returns the process's exit status (via runtime_finish). Returns 0 when
// every cluster succeeded.
using RtProgramMain = std::function<int(std::unique_ptr<Runtime> rt)>;
struct RtLaunch {
    RtSpec spec;                    // cluster is set per process
    std::string config_path;        // passed on to exec'd programs (ICCS_CONFIG)
    std::vector<std::pair<std::string, std::string>> overrides;  // ICCS_OVERRIDES
    uint32_t timeout_s = 300;
    RtProgramMain builtin;          // either this (fork) ...
    std::vector<std::string> argv;  // ... or this: exec argv[0] with these arguments
};
int rt_launch(RtLaunch l);

// The built-in programs (rt_programs.cpp): see `iccs run --help`.
struct RtExchangeOptions {
    uint64_t messages = 200;  // per pair of compute threads (of different clusters)
    uint32_t min_size = 1, max_size = 9000;
    uint32_t barriers = 10;   // barrier and barrier_gather rounds, contents checked
    uint64_t seed = 1;
    bool inject_error = false;  // test hook: thread 0.0 corrupts one byte of one message it sends
};
int rt_program_exchange(std::unique_ptr<Runtime> rt, const RtExchangeOptions& o);
struct RtPingOptions {
    uint64_t rounds = 1000, warmup = 100;
    uint32_t size = 64;
    std::string result_file;  // "rtt_ns MEDIAN P99 MIN MAX N" and "msg_bytes MEAN" (cluster 0)
};
int rt_program_ping(std::unique_ptr<Runtime> rt, const RtPingOptions& o);

}  // namespace iccs
