// group_setup.cpp: what group_setup.hpp declares: the names of families, collectives and
// operations, the topology (made, read from the machine file, described) and the options.
#include "group_setup.hpp"

#include <algorithm>

#include "config.hpp"

namespace iccs::group {

const char* to_string(Family f) { return f == Family::kFlat ? "flat" : f == Family::kHier ? "hier" : "default"; }
bool parse_family(const std::string& s, Family& out) {
    if (s == "hier" || s == "hierarchical") out = Family::kHier;
    else if (s == "flat") out = Family::kFlat;
    else return false;
    return true;
}
const char* to_string(Coll c) {
    static const char* const n[] = {"barrier", "bcast",     "reduce",   "allreduce",      "gather",
                                    "scatter", "allgather", "alltoall", "reduce_scatter", "scan"};
    return c < Coll::kCount ? n[static_cast<size_t>(c)] : "?";
}
const char* to_string(Op o) {
    return o == Op::kSum ? "sum" : o == Op::kMin ? "min" : o == Op::kMax ? "max" : "prod";
}

// --- topology -------------------------------------------------------------------------------------

bool make_topology(uint16_t clusters, uint16_t threads, const std::vector<uint16_t>& site_of_cluster, Topology& out,
                   std::string& err) {
    if (clusters == 0 || threads == 0) {
        err = "group: a topology needs at least 1 cluster and 1 thread";
        return false;
    }
    if (!site_of_cluster.empty() && site_of_cluster.size() != clusters) {
        err = "group: [wan] sites names " + std::to_string(site_of_cluster.size()) + " clusters, the run has " +
              std::to_string(clusters);
        return false;
    }
    Topology t;
    t.clusters = clusters;
    t.threads = threads;
    t.site_of.resize(clusters);
    for (uint16_t c = 0; c < clusters; ++c) {
        const uint16_t id = site_of_cluster.empty() ? c : site_of_cluster[c];
        auto it = std::find(t.site_id.begin(), t.site_id.end(), id);
        if (it == t.site_id.end()) {
            t.site_id.push_back(id);
            t.clusters_of.emplace_back();
            it = t.site_id.end() - 1;
        }
        const auto s = static_cast<uint16_t>(it - t.site_id.begin());
        t.site_of[c] = s;
        t.clusters_of[s].push_back(c);
    }
    t.sites = static_cast<uint16_t>(t.site_id.size());
    out = std::move(t);
    return true;
}

Options options_from_config(const MachineConfig& cfg) {
    Options o;
    o.family = cfg.group.family == CollFamily::kFlat ? Family::kFlat : Family::kHier;
    o.segment_bytes = cfg.group.segment_bytes;
    return o;
}

bool topology_from_config(const MachineConfig& cfg, Topology& out, std::string& err) {
    uint32_t sites = 0;
    const std::vector<uint16_t> s = wan_sites(cfg, sites);
    return make_topology(static_cast<uint16_t>(cfg.machine.clusters), static_cast<uint16_t>(cfg.cluster.compute_threads),
                         s, out, err);
}

std::string Topology::describe() const {
    std::string d = std::to_string(sites) + (sites == 1 ? " site" : " sites") + " (";
    for (uint16_t s = 0; s < sites; ++s) {
        d += (s ? "; site " : "site ") + std::to_string(site_id[s]) + ": clusters";
        for (uint16_t c : clusters_of[s]) {
            d += ' ';
            d += std::to_string(c);
        }
    }
    return d + ") x " + std::to_string(threads) + " threads per cluster";
}

}  // namespace iccs::group
