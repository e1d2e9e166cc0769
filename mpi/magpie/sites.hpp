// sites.hpp: where each rank of MPI_COMM_WORLD is, as MagPIe needs it: its site (the wide-area
// boundary) and its cluster (the ranks that share memory). Pure parsing, no MPI: the profiling
// layer (profile.cpp) reads the environment at MPI_Init and asks here.
//
// Sources, first found wins (README.md "Where the ranks are"):
//   ICCS_SITES   one entry per world rank, "SITE:CLUSTER" or "SITE" (then the cluster is the
//                rank's host), separated by ',' or blanks; or "SxCxR": S sites of C clusters of R
//                ranks, ranks placed in blocks (rank r in cluster r / R, cluster c in site c / C).
//   ICCS_CONFIG  the iccs machine file (with ICCS_OVERRIDES, as for runtime programs): rank r is
//                in cluster r / [cluster] compute_threads (the ranks of a cluster are consecutive,
//                as `iccs run --mpi` places them) and in site [wan] sites[cluster].
//   host names   a cluster per host; the site is the host name without its first label
//                ("node3.vu.das" -> "vu.das"), one site for names without a domain.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace iccs::magpie {

// One world rank: its site and cluster, as ids (any numbers; equal ids mean the same site or
// cluster). Cluster ids are global: two ranks of different sites never share one.
struct Place {
    uint32_t site = 0;
    uint32_t cluster = 0;
    friend bool operator==(const Place&, const Place&) = default;
};

// ICCS_SITES for `world_size` ranks. `host_cluster[r]` is rank r's cluster id when an entry gives
// no cluster (the caller numbers hosts); may be empty when every entry names its cluster. On an
// error: false, `err` names the entry and what is allowed.
bool parse_sites(std::string_view text, uint32_t world_size, const std::vector<uint32_t>& host_cluster,
                 std::vector<Place>& out, std::string& err);

// The machine file's view: `clusters` clusters of `ranks_per_cluster` ranks, cluster c in site
// `site_of_cluster[c]` (empty: every cluster its own site). The world must have exactly
// clusters * ranks_per_cluster ranks.
bool places_from_machine(uint32_t clusters, uint32_t ranks_per_cluster, const std::vector<uint32_t>& site_of_cluster,
                         uint32_t world_size, std::vector<Place>& out, std::string& err);

// From every rank's host name (index = world rank).
std::vector<Place> places_from_hosts(const std::vector<std::string>& hosts);
// The site part of a host name: everything after the first '.', or "" for a bare name.
std::string_view site_of_host(std::string_view host);

// "2 sites, 4 clusters, 8 ranks" (for the report).
std::string describe(const std::vector<Place>& places);

}  // namespace iccs::magpie
