// launcher_env.cpp: what a process learns from the launcher that started it (our own, mpirun,
// srun): its rank and the run's size, the run id, and our launcher's flags (ICCS_OVERRIDES). No
// DPDK and no runtime here, so the MPI provider (mpi/provider/, loaded into every MPI process)
// links it as well as the runtime does.
#include <cctype>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "runtime_launch.hpp"

namespace iccs {

bool env_uint(const char* v, uint64_t max, uint64_t& out) {
    if (v == nullptr || *v == '\0') return false;
    uint64_t x = 0;
    for (const char* p = v; *p; ++p) {
        if (*p < '0' || *p > '9') return false;
        x = x * 10 + uint64_t(*p - '0');
        if (x > max) return false;
    }
    out = x;
    return true;
}

std::string env_bad(const char* var, const char* v, const std::string& why) {
    return std::string(var) + "=\"" + (v ? v : "") + "\": " + why;
}

bool rt_discover_rank(const std::function<const char*(const char*)>& get, RtRank& out, std::string& err,
                      const RankScheme& scheme) {
    out = RtRank{};
    // (rank variable, size variable), in the order of DESIGN.md §8, our own launcher first.
    const std::pair<const char*, const char*> order[] = {
        {scheme.own_rank, scheme.own_size},
        {"SLURM_PROCID", "SLURM_NTASKS"},
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
        {"PMI_RANK", "PMI_SIZE"},
        {"PMIX_RANK", "PMI_SIZE"},
    };
    const std::string max = std::to_string(scheme.max_size);
    for (const auto& [rv, sv] : order) {
        const char* r = get(rv);
        if (r == nullptr) continue;
        uint64_t rank = 0, size = 0;
        if (!env_uint(r, scheme.max_size - 1, rank)) {
            err = env_bad(rv, r, "expected a rank from 0 to " + std::to_string(scheme.max_size - 1) + " (" + scheme.what + ")");
            return false;
        }
        const char* s = get(sv);
        if (s != nullptr) {
            if (!env_uint(s, scheme.max_size, size) || size == 0) {
                err = env_bad(sv, s, "expected a size from 1 to " + max);
                return false;
            }
            if (rank >= size) {
                err = env_bad(rv, r, std::string("rank must be below ") + sv + " = " + s);
                return false;
            }
        } else if (std::strcmp(rv, "PMIX_RANK") != 0) {
            err = std::string(rv) + " is set but " + sv + " is not: the launcher must give both";
            return false;
        }
        out.found = true;
        out.rank = static_cast<uint16_t>(rank);
        out.size = static_cast<uint16_t>(size);
        out.source = rv;
        if (s != nullptr) out.size_source = sv;
        return true;
    }
    return true;
}

std::string launcher_run_id(const std::function<const char*(const char*)>& get) {
    // The run id names shared memory, EAL prefixes and socket directories: every process of one
    // run must agree on it, and no other run on the host may use it.
    std::string id;
    for (const char* v : {kEnvRunId, "SLURM_JOB_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"})
        if (const char* x = get(v); x != nullptr && *x != '\0') {
            id = x;
            if (std::strcmp(v, "SLURM_JOB_ID") == 0)
                if (const char* st = get("SLURM_STEP_ID")) id += std::string("s") + st;
            break;
        }
    if (id.empty()) id = "job";
    for (char& ch : id)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    if (id.size() > 8) {
        // DPDK object names (mempools: 25 characters) carry "iccs-<run>-c<id>-...": a long job id
        // (a PMIx namespace) becomes 8 hex digits of its FNV-1a hash.
        uint32_t h = 2166136261u;
        for (const char ch : id) h = (h ^ static_cast<uint8_t>(ch)) * 16777619u;
        char hex[9];
        std::snprintf(hex, sizeof hex, "%08x", h);
        id = hex;
    }
    return id;
}

bool parse_overrides(const char* text, std::vector<std::pair<std::string, std::string>>& out, std::string& err) {
    if (text == nullptr) return true;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        const auto eq = line.find('=');
        if (eq == std::string::npos) {
            err = std::string(kEnvOverrides) + ": line \"" + line + "\" is not section.key=value";
            return false;
        }
        out.emplace_back(line.substr(0, eq), line.substr(eq + 1));
    }
    return true;
}

}  // namespace iccs
