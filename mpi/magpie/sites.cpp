// sites.cpp: ICCS_SITES, the machine file's placement and host names, to one Place per world rank.
#include "sites.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <utility>

namespace iccs::magpie {

namespace {

bool parse_u32(std::string_view s, uint32_t& v) {
    if (s.empty()) return false;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && p == s.data() + s.size();
}

std::vector<std::string_view> split_entries(std::string_view text) {
    std::vector<std::string_view> out;
    size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && (text[i] == ',' || text[i] == ' ' || text[i] == '\t' || text[i] == '\n')) ++i;
        size_t j = i;
        while (j < text.size() && text[j] != ',' && text[j] != ' ' && text[j] != '\t' && text[j] != '\n') ++j;
        if (j > i) out.push_back(text.substr(i, j - i));
        i = j;
    }
    return out;
}

// "SxCxR": S sites of C clusters of R ranks, in blocks.
bool parse_shape(std::string_view text, uint32_t world_size, std::vector<Place>& out, std::string& err) {
    uint32_t dim[3];
    size_t start = 0;
    for (int d = 0; d < 3; ++d) {
        const size_t x = d < 2 ? text.find('x', start) : text.size();
        if (x == std::string_view::npos || !parse_u32(text.substr(start, x - start), dim[d]) || dim[d] == 0 ||
            dim[d] > 65536) {
            err = "ICCS_SITES=\"" + std::string(text) +
                  "\": a shape is SITESxCLUSTERSxRANKS, three whole numbers 1..65536 (e.g. 4x2x2)";
            return false;
        }
        start = x + 1;
    }
    const uint64_t ranks = uint64_t{dim[0]} * dim[1] * dim[2];
    if (ranks != world_size) {
        err = "ICCS_SITES=\"" + std::string(text) + "\" places " + std::to_string(ranks) + " ranks but MPI_COMM_WORLD has " +
              std::to_string(world_size);
        return false;
    }
    out.resize(world_size);
    for (uint32_t r = 0; r < world_size; ++r) {
        const uint32_t cluster = r / dim[2];
        out[r] = Place{cluster / dim[1], cluster};
    }
    return true;
}

}  // namespace

bool parse_sites(std::string_view text, uint32_t world_size, const std::vector<uint32_t>& host_cluster,
                 std::vector<Place>& out, std::string& err) {
    out.clear();
    const auto entries = split_entries(text);
    if (entries.size() == 1 && entries[0].find('x') != std::string_view::npos)
        return parse_shape(entries[0], world_size, out, err);
    if (entries.size() != world_size) {
        err = "ICCS_SITES has " + std::to_string(entries.size()) + " entries but MPI_COMM_WORLD has " +
              std::to_string(world_size) + " ranks (one entry per rank: SITE:CLUSTER or SITE; or a shape SxCxR)";
        return false;
    }
    // Entries without a cluster: the cluster is (site, host), numbered after the largest given id.
    uint32_t next_cluster = 0;
    std::vector<bool> given(world_size, false);
    out.resize(world_size);
    for (uint32_t r = 0; r < world_size; ++r) {
        const std::string_view e = entries[r];
        const size_t colon = e.find(':');
        uint32_t site = 0, cluster = 0;
        const bool ok = colon == std::string_view::npos
                            ? parse_u32(e, site)
                            : parse_u32(e.substr(0, colon), site) && parse_u32(e.substr(colon + 1), cluster);
        if (!ok) {
            err = "ICCS_SITES entry " + std::to_string(r) + " \"" + std::string(e) +
                  "\": expected SITE:CLUSTER or SITE (whole numbers)";
            return false;
        }
        if (colon == std::string_view::npos && r >= host_cluster.size()) {
            err = "ICCS_SITES entry " + std::to_string(r) + " \"" + std::string(e) +
                  "\" names no cluster and the rank's host is unknown: write SITE:CLUSTER";
            return false;
        }
        out[r].site = site;
        if (colon != std::string_view::npos) {
            out[r].cluster = cluster;
            given[r] = true;
            next_cluster = std::max(next_cluster, cluster + 1);
        }
    }
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> host_ids;  // (site, host) -> cluster id
    for (uint32_t r = 0; r < world_size; ++r) {
        if (given[r]) continue;
        const auto key = std::make_pair(out[r].site, host_cluster[r]);
        auto it = host_ids.find(key);
        if (it == host_ids.end()) it = host_ids.emplace(key, next_cluster++).first;
        out[r].cluster = it->second;
    }
    // A cluster is one multiprocessor: it cannot be in two sites.
    std::map<uint32_t, std::pair<uint32_t, uint32_t>> site_of;  // cluster -> (site, first rank)
    for (uint32_t r = 0; r < world_size; ++r) {
        auto [it, fresh] = site_of.emplace(out[r].cluster, std::make_pair(out[r].site, r));
        if (!fresh && it->second.first != out[r].site) {
            err = "ICCS_SITES: cluster " + std::to_string(out[r].cluster) + " is in site " +
                  std::to_string(it->second.first) + " (rank " + std::to_string(it->second.second) + ") and in site " +
                  std::to_string(out[r].site) + " (rank " + std::to_string(r) + "): a cluster belongs to one site";
            return false;
        }
    }
    return true;
}

bool places_from_machine(uint32_t clusters, uint32_t ranks_per_cluster, const std::vector<uint32_t>& site_of_cluster,
                         uint32_t world_size, std::vector<Place>& out, std::string& err) {
    out.clear();
    if (uint64_t{clusters} * ranks_per_cluster != world_size) {
        err = "the machine file has " + std::to_string(clusters) + " clusters x " + std::to_string(ranks_per_cluster) +
              " compute threads ([machine] clusters x [cluster] compute_threads) = " +
              std::to_string(uint64_t{clusters} * ranks_per_cluster) + " ranks, but MPI_COMM_WORLD has " +
              std::to_string(world_size) + " (iccs run --mpi starts one rank per compute thread)";
        return false;
    }
    out.resize(world_size);
    for (uint32_t r = 0; r < world_size; ++r) {
        const uint32_t c = r / ranks_per_cluster;
        out[r] = Place{site_of_cluster.empty() ? c : site_of_cluster.at(c), c};
    }
    return true;
}

std::string_view site_of_host(std::string_view host) {
    const size_t dot = host.find('.');
    return dot == std::string_view::npos ? std::string_view{} : host.substr(dot + 1);
}

std::vector<Place> places_from_hosts(const std::vector<std::string>& hosts) {
    std::map<std::string_view, uint32_t> site_ids, cluster_ids;
    std::vector<Place> out(hosts.size());
    for (size_t r = 0; r < hosts.size(); ++r) {
        const auto s = site_ids.emplace(site_of_host(hosts[r]), static_cast<uint32_t>(site_ids.size())).first->second;
        const auto c = cluster_ids.emplace(hosts[r], static_cast<uint32_t>(cluster_ids.size())).first->second;
        out[r] = Place{s, c};
    }
    return out;
}

std::string describe(const std::vector<Place>& places) {
    std::set<uint32_t> sites, clusters;
    for (const Place& p : places) {
        sites.insert(p.site);
        clusters.insert(p.cluster);
    }
    return std::to_string(sites.size()) + (sites.size() == 1 ? " site, " : " sites, ") + std::to_string(clusters.size()) +
           (clusters.size() == 1 ? " cluster, " : " clusters, ") + std::to_string(places.size()) +
           (places.size() == 1 ? " rank" : " ranks");
}

}  // namespace iccs::magpie
