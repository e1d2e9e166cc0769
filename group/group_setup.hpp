// group_setup.hpp: what a group World is set up with (group.hpp): the algorithm families, the
// collectives and the reduction operations by name, who is where (Topology, from the machine
// file's [wan] sites) and the Options (from its [group] section).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace iccs {
struct MachineConfig;
}

namespace iccs::group {

enum class Family : uint8_t { kHier, kFlat, kDefault };
const char* to_string(Family f);
bool parse_family(const std::string& s, Family& out);  // "hier" | "flat"

enum class Coll : uint8_t {
    kBarrier, kBcast, kReduce, kAllreduce, kGather, kScatter, kAllgather, kAlltoall, kReduceScatter, kScan,
    kCount
};
const char* to_string(Coll c);  // "barrier", "bcast", ..., "reduce_scatter", "scan"

// Who is where. Sites are numbered densely here (site index 0..sites-1 in order of the first
// cluster of each site id); site_id[i] is the machine file's id of site i.
struct Topology {
    uint16_t clusters = 1, threads = 1, sites = 1;
    std::vector<uint16_t> site_of;                   // by cluster: site index
    std::vector<uint16_t> site_id;                   // by site index: the [wan] sites id
    std::vector<std::vector<uint16_t>> clusters_of;  // by site index: its clusters, ascending
    uint32_t ranks() const { return uint32_t{clusters} * threads; }
    uint16_t cluster_of_rank(uint32_t r) const { return static_cast<uint16_t>(r / threads); }
    uint16_t site_of_rank(uint32_t r) const { return site_of[r / threads]; }
    std::string describe() const;  // "2 sites x 2 clusters x 3 threads" or per-site cluster lists
};
// `site_of_cluster` by cluster id (any ids 0..63; empty: every cluster its own site).
bool make_topology(uint16_t clusters, uint16_t threads, const std::vector<uint16_t>& site_of_cluster, Topology& out,
                   std::string& err);
// From the machine file: [machine] clusters, [cluster] compute_threads, [wan] sites.
bool topology_from_config(const MachineConfig& cfg, Topology& out, std::string& err);

struct Options {
    Family family = Family::kHier;  // used when a call says Family::kDefault
    uint32_t segment_bytes = 64u << 10;  // messages longer than this go as segments of this size
    uint64_t timeout_ms = 60'000;        // a call waiting longer for a peer fails (naming the peer)
    uint16_t handler_base = 190;         // runtime handler ids used: handler_base, handler_base + 1
};

// The machine file's [group] section (family, segment_bytes) over the defaults above.
Options options_from_config(const MachineConfig& cfg);

enum class Op : uint8_t { kSum, kMin, kMax, kProd };
const char* to_string(Op o);

}  // namespace iccs::group
