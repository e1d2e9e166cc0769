// wan_min.cpp: the least wide-area data of each collective under MagPIe's rule 2 (every data item
// once to each site that needs it), computed from the topology and the counts only, apart from
// the algorithms, so that wan_bytes == wan_bytes_min is a check and not a restatement.
//
// The items: a broadcast's buffer; for a reduction, a site's partial (a partial per row of
// consecutive ranks of the site when the operation does not commute, as MPI's operand order
// allows no other combination; allreduce and reduce by blocks: a site's block of such a partial,
// and a reduced block); for scan and exscan, the partial of a row of consecutive ranks
// of a site, which only the sites with a rank after it need. (gather, scatter, allgather and
// alltoall count their blocks where they are sent or received: every block is an item.)
#include "magpie.hpp"

namespace iccs::magpie {

namespace {

uint64_t rows(const Comm& c, uint32_t site, bool split) { return runs_of(c.site_ranks[site], split).size(); }

// By blocks: the elements of the blocks site `site` reduces (block_range's layout).
uint64_t block_share(const Comm& c, uint64_t count, int elem_size, uint32_t site) {
    const uint32_t lanes = block_lanes(c, count * uint64_t(elem_size), count);
    uint64_t share = 0;
    for (uint32_t lane = 0; lane < lanes; ++lane) {
        uint64_t first, n;
        block_range(count, lanes, c.sites(), lane, site, first, n);
        share += n;
    }
    return share;
}

}  // namespace

uint64_t wan_min_bcast(const Comm& c, int, uint64_t bytes) { return bytes * (c.sites() - 1); }

uint64_t wan_min_reduce(const Comm& c, int root, uint64_t count, int elem_size, bool split) {
    const uint64_t bytes = count * uint64_t(elem_size);
    const uint32_t root_site = c.site_of[root];
    uint64_t sum = 0;
    if (!by_blocks(c, bytes)) {  // every other site's partials (rows) to the root's site
        for (uint32_t s = 0; s < c.sites(); ++s)
            if (s != root_site) sum += rows(c, s, split) * bytes;
        return sum;
    }
    // By blocks: a site's rows' blocks of another site once to that site, and every other site's
    // reduced blocks once to the root's site.
    for (uint32_t s = 0; s < c.sites(); ++s) {
        const uint64_t share = block_share(c, count, elem_size, s) * uint64_t(elem_size);
        sum += rows(c, s, split) * (bytes - share) + (s != root_site ? share : 0);
    }
    return sum;
}

uint64_t wan_min_allreduce(const Comm& c, uint64_t count, int elem_size, bool split) {
    const uint64_t bytes = count * uint64_t(elem_size), S = c.sites();
    uint64_t sum = 0;
    if (!by_blocks(c, bytes)) {  // every site's partials (rows) to every other site
        for (uint32_t s = 0; s < S; ++s) sum += rows(c, s, split) * bytes * (S - 1);
        return sum;
    }
    // By blocks the items are the blocks: a site's rows' blocks of another site go to that site
    // once (reduce-scatter), and a site's reduced blocks to every other site once (allgather). A
    // site's own share of the vector never leaves it as a row; each reduced share leaves S - 1
    // times. Commutative: (S - 1) + (S - 1) vectors in all, 2 (S - 1) / S of the vector out of each
    // site, the least any allreduce moves between S sites.
    for (uint32_t s = 0; s < S; ++s) {
        const uint64_t share = block_share(c, count, elem_size, s) * uint64_t(elem_size);
        sum += rows(c, s, split) * (bytes - share) + (S - 1) * share;
    }
    return sum;
}

uint64_t wan_min_reduce_scatter(const Comm& c, const int* counts, int elem_size, bool split) {
    std::vector<uint64_t> site_bytes(c.sites(), 0);  // the blocks of each site's ranks
    for (int r = 0; r < c.n; ++r) site_bytes[c.site_of[r]] += uint64_t(counts[r]) * uint64_t(elem_size);
    uint64_t sum = 0;
    for (uint32_t s = 0; s < c.sites(); ++s)
        for (uint32_t t = 0; t < c.sites(); ++t)
            if (t != s) sum += rows(c, s, split) * site_bytes[t];
    return sum;
}

uint64_t wan_min_scan(const Comm& c, uint64_t bytes) {
    uint64_t sum = 0;
    for (uint32_t s = 0; s < c.sites(); ++s)
        for (const auto& row : runs_of(c.site_ranks[s], true))
            for (uint32_t t = 0; t < c.sites(); ++t)
                if (t != s && c.site_ranks[t].back() > row.first) sum += bytes;
    return sum;
}

}  // namespace iccs::magpie
