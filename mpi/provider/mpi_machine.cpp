// mpi_machine.cpp: the run's machine from the environment and the machine file.
#include "mpi_machine.hpp"

#include <cstdio>

#include "runtime_launch.hpp"

namespace iccs::mpi {

uint64_t mpi_run_hash(const std::string& run_id) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a, 64 bits
    for (const char ch : run_id) h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
    return h;
}

bool mpi_machine_from_env(const std::function<const char*(const char*)>& get, bool need_rank, MpiMachine& out,
                          std::string& err) {
    out = MpiMachine{};
    const char* cfg_path = get(kEnvConfig);
    if (cfg_path == nullptr || *cfg_path == '\0') {
        err = "ICCS_CONFIG is not set: it must name the iccs machine file that says which ranks form which cluster "
              "([machine] clusters x [cluster] compute_threads ranks; pass it to the ranks, e.g. mpirun -x "
              "ICCS_CONFIG=$PWD/machine.toml)";
        return false;
    }
    out.config_path = cfg_path;
    if (!parse_overrides(get(kEnvOverrides), out.overrides, err)) return false;
    ConfigResult cr = configure(out.config_path, out.overrides);
    if (!cr.ok()) {
        err = cr.error;
        return false;
    }
    out.config = std::make_shared<const MachineConfig>(std::move(*cr.config));
    const MachineConfig& cfg = *out.config;
    out.clusters = cfg.machine.clusters;
    out.cluster_size = cfg.cluster.compute_threads;
    out.world = out.clusters * out.cluster_size;
    if (out.world > kMaxRanks) {
        err = out.config_path + ": [machine] clusters = " + std::to_string(out.clusters) + " x [cluster] compute_threads = " +
              std::to_string(out.cluster_size) + " makes " + std::to_string(out.world) + " ranks; the provider takes at most " +
              std::to_string(kMaxRanks);
        return false;
    }
    out.transport = cfg.runtime.transport;
    out.delay_ns = cfg.runtime.delay_us * 1000;
    if (const char* t = get(kEnvTransport); t != nullptr && *t != '\0' && !parse_transport(t, out.transport)) {
        err = env_bad(kEnvTransport, t, "allowed values are iccs, direct, delay");
        return false;
    }
    if (const char* d = get(kEnvDelayNs); d != nullptr && !env_uint(d, 60'000'000'000ull, out.delay_ns)) {
        err = env_bad(kEnvDelayNs, d, "expected nanoseconds from 0 to 60000000000");
        return false;
    }
    // Inline polling that would keep more threads spinning than the host has cores: adaptive
    // (mpi_machine.hpp says why). `cfg` names the file's config, which this replaces: not used after.
    if (out.bridged() && cfg.cluster.polling == Polling::kInline &&
        inline_agent_falls_back(out.cluster_size, out.world, host_core_count())) {
        auto adaptive = std::make_shared<MachineConfig>(cfg);
        adaptive->cluster.polling = Polling::kAdaptive;
        out.config = std::move(adaptive);
    }
    // "m" + the launcher's id: a run id that is all digits is taken for a pid by the launchers'
    // clean-up of stale runs (compute/cluster.cpp), which would remove a live MPI run's files.
    // 8 characters at most, as every run id (DPDK's object names are short).
    std::string id = launcher_run_id(get);
    if (id.size() > 7) {
        char hex[9];
        std::snprintf(hex, sizeof hex, "%07llx", static_cast<unsigned long long>(mpi_run_hash(id) & 0xfffffff));
        id = hex;
    }
    out.run_id = "m" + id;
    out.run_hash = mpi_run_hash(out.run_id);
    out.run_dir = "/tmp/iccs-" + out.run_id;

    RtRank rank;
    const RankScheme ranks{kEnvRank, kEnvRanks, kMaxRanks, "an MPI rank"};
    if (!rt_discover_rank(get, rank, err, ranks)) return false;
    if (!rank.found) {
        if (!need_rank) return true;
        err = "no rank: this process was not started by mpirun or srun (none of ICCS_RANK, SLURM_PROCID, "
              "OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK is set)";
        return false;
    }
    const std::string shape = "[machine] clusters = " + std::to_string(out.clusters) +
                              " x [cluster] compute_threads = " + std::to_string(out.cluster_size);
    if (rank.size != 0 && rank.size != out.world) {
        err = rank.size_source + "=" + std::to_string(rank.size) + ": the launcher started " + std::to_string(rank.size) +
              " ranks but the machine file " + out.config_path + " makes " + std::to_string(out.world) + " (" + shape +
              ")";
        return false;
    }
    if (rank.rank >= out.world) {
        err = rank.source + "=" + std::to_string(rank.rank) + ": the machine file " + out.config_path + " makes " +
              std::to_string(out.world) + " ranks (" + shape + ")";
        return false;
    }
    out.rank_known = true;
    out.rank = rank.rank;
    out.rank_source = rank.source;
    return true;
}

}  // namespace iccs::mpi
