// mpi_machine.hpp: which ranks form which cluster, as every rank and agent of a run computes it
// from the same environment and machine file (mpi/provider/README.md, "The model").
//
// The machine file is the iccs one (iccs.example.toml): [machine] clusters = C and [cluster]
// compute_threads = S make C*S ranks, and ranks c*S .. c*S+S-1 form cluster c (mpirun's default
// mapping by slot places consecutive ranks together; a rank is a compute processor of its
// cluster). The transport ([runtime] transport, or ICCS_TRANSPORT) says how clusters meet: `iccs`
// through each cluster's agent and proxies, `direct` and `delay` straight through shared memory
// (the study's "no delay" and "no contention").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config.hpp"

namespace iccs::mpi {

inline constexpr const char* kEnvRank = "ICCS_RANK";    // this process's rank, when no launcher says
inline constexpr const char* kEnvRanks = "ICCS_RANKS";  // ... and the number of ranks
inline constexpr uint32_t kMaxRanks = 1024;

struct MpiMachine {
    uint32_t world = 0;         // ranks: clusters * cluster_size
    uint32_t clusters = 0;
    uint32_t cluster_size = 0;  // ranks per cluster ([cluster] compute_threads)
    bool rank_known = false;
    uint32_t rank = 0;          // this process's rank (when rank_known)
    std::string rank_source;    // the variable it came from ("OMPI_COMM_WORLD_RANK", ...)
    RtTransport transport = RtTransport::kIccs;
    uint64_t delay_ns = 0;      // delay: the hold time of a record from another cluster
    std::string run_id;         // names the run directory, EAL prefixes, sockets
    uint64_t run_hash = 0;      // FNV-1a of run_id, in every address (an address of another run is refused)
    std::string run_dir;        // /tmp/iccs-<run_id>: agent sockets, memif sockets, doorbells
    std::string config_path;    // ICCS_CONFIG
    std::vector<std::pair<std::string, std::string>> overrides;  // ICCS_OVERRIDES
    std::shared_ptr<const MachineConfig> config;  // polling as the clusters run it (below)

    uint32_t cluster_of(uint32_t r) const { return r / cluster_size; }
    // Shared-memory domains: a cluster under iccs, the whole machine under direct and delay.
    bool bridged() const { return transport == RtTransport::kIccs; }
    uint32_t domains() const { return bridged() ? clusters : 1; }
    uint32_t domain_of(uint32_t r) const { return bridged() ? cluster_of(r) : 0; }
    uint32_t domain_first(uint32_t d) const { return bridged() ? d * cluster_size : 0; }
    uint32_t domain_members() const { return bridged() ? cluster_size : world; }
    // The agent of domain d: its socket, the lock the first rank takes to start it, the file
    // where a starting agent leaves its error.
    std::string agent_socket(uint32_t d) const { return run_dir + "/mpi-d" + std::to_string(d) + ".sock"; }
    std::string agent_lock(uint32_t d) const { return run_dir + "/mpi-d" + std::to_string(d) + ".lock"; }
    std::string agent_error_file(uint32_t d) const { return run_dir + "/mpi-d" + std::to_string(d) + ".err"; }
};

// Inline polling in an agent process (a cluster of more than one rank) makes each bridge thread
// spin, running its cluster's proxies, and never sleep (no proxy thread would take a frame off the
// fabric): the run keeps a rank and a bridge busy per rank. With fewer cores than that, a thread
// with work waits for a scheduler slice behind spinning bridges: 2 clusters x 2 ranks on 2 cores,
// an 8-byte MPI_Allreduce took ~31 ms a call against ~0.2 ms adaptive (osu_allreduce, load ~15)
// (mpi/provider/README.md, "Inline polling with an agent process"). Such a run's clusters poll
// adaptively instead (mpi_machine_from_env rewrites [cluster] polling; `iccs run --mpi` says so).
// A cluster of one rank under inline runs in its rank (prov_in_rank.cpp) and keeps inline.
inline bool inline_agent_falls_back(uint32_t cluster_size, uint32_t world, uint32_t cores) {
    return cluster_size > 1 && uint64_t{2} * world > cores;
}

// The machine of this process's run from its environment (`get` reads a variable): ICCS_CONFIG
// (required), ICCS_OVERRIDES, ICCS_TRANSPORT, ICCS_DELAY_NS, the run id (ICCS_RUN_ID, else the
// launcher's job id), and the rank from ICCS_RANK/ICCS_RANKS, SLURM_PROCID/SLURM_NTASKS,
// OMPI_COMM_WORLD_RANK/_SIZE, PMI_RANK/PMI_SIZE or PMIX_RANK. need_rank: no rank is an error.
// False with err: one line that names the variable or key and the value (a launcher that started
// a number of ranks other than the machine file's names both counts).
bool mpi_machine_from_env(const std::function<const char*(const char*)>& get, bool need_rank, MpiMachine& out,
                          std::string& err);

uint64_t mpi_run_hash(const std::string& run_id);

}  // namespace iccs::mpi
