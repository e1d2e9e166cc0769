// allgather.cpp: MPI_Allgather(v).
//
// Every rank's block reaches every rank. The blocks meet at each site's coordinator (cluster ->
// leader -> coordinator) as the site's bundle; each coordinator sends its bundle once to every
// other site, in pieces to several of its leaders when it is long; the leaders of a site swap
// what they received (and the coordinator adds its own site's bundle); each leader passes all of
// it down its cluster. Every rank knows every count, so every rank lays the data out alike: sites
// by lowest rank, a site's clusters by lowest rank, a cluster's ranks ascending.
#include <algorithm>

#include "magpie.hpp"

namespace iccs::magpie {

int allgather(Call& call, const void* sbuf, int scount, const TypeInfo& st, void* rbuf, const Blocks& rb) {
    const Comm& c = call.comm();
    const int me = c.me;
    const uint32_t my_site = c.my_site(), my_cluster = c.my_cluster();
    const int leader = c.leader(my_cluster), coord = c.coord(my_site);

    // The layout: where each rank's block, each cluster's and each site's bundle sit.
    std::vector<uint64_t> at(c.n), cluster_at(c.cluster_ranks.size()), cluster_len(c.cluster_ranks.size()),
        site_at(c.sites()), site_len(c.sites());
    uint64_t total = 0;
    for (uint32_t s = 0; s < c.sites(); ++s) {
        site_at[s] = total;
        for (uint32_t k : c.site_clusters[s]) {
            cluster_at[k] = total;
            for (int r : c.cluster_ranks[k]) {
                at[r] = total;
                total += rb.bytes_of(r);
            }
            cluster_len[k] = total - cluster_at[k];
        }
        site_len[s] = total - site_at[s];
    }
    const uint64_t my_bytes = sbuf ? uint64_t(scount) * uint64_t(st.size) : rb.bytes_of(me);
    call.add_bytes(my_bytes);
    if (total == 0) return MPI_SUCCESS;
    if (total > uint64_t(INT32_MAX)) return call.raise(MPI_ERR_COUNT, "more than INT_MAX bytes in all");
    if (my_bytes != rb.bytes_of(me))
        return call.raise(MPI_ERR_TRUNCATE, "this rank sends " + std::to_string(my_bytes) + " bytes but its counts say " +
                                                std::to_string(rb.bytes_of(me)));
    if (me == 0) {
        uint64_t min = 0;
        for (uint32_t s = 0; s < c.sites(); ++s) min += site_len[s] * (c.sites() - 1);
        call.add_wan_min(min);
    }
    std::vector<char> all(total);
    char* data = all.data();
    const int e = sbuf ? pack(sbuf, scount, st, data + at[me])
                       : pack(static_cast<char*>(rbuf) + rb.offset_of(me), rb.count_of(me), rb.t, data + at[me]);
    if (e != MPI_SUCCESS) return call.raise(MPI_ERR_TYPE, "packing failed");

    if (me == leader) {
        for (int r : c.cluster_ranks[my_cluster])
            if (r != me) call.recv_bytes(data + at[r], rb.bytes_of(r), r);
        if (!call.wait_all()) return call.error();
        if (me != coord) {
            call.send_bytes(data + cluster_at[my_cluster], cluster_len[my_cluster], coord);
        } else {
            for (uint32_t k : c.site_clusters[my_site])
                if (k != my_cluster) call.recv_bytes(data + cluster_at[k], cluster_len[k], c.leader(k));
            if (!call.wait_all()) return call.error();
            // Across: the site's bundle once to every other site, piece j to its leader j.
            for (uint32_t t = 0; t < c.sites(); ++t) {
                if (t == my_site) continue;
                const auto clusters = c.clusters_for(t, -1);
                const uint32_t n = pieces_for(c, t, site_len[my_site], site_len[my_site]);
                for (uint32_t j = 0; j < n; ++j) {
                    uint64_t first, len;
                    piece_range(site_len[my_site], n, j, first, len);
                    call.send_bytes(data + site_at[my_site] + first, len, c.leader(clusters[j]));
                }
            }
        }
        // Piece j of every other site's bundle comes to leader j of this site ...
        const auto clusters = c.clusters_for(my_site, -1);
        const uint32_t j_me = uint32_t(std::find(clusters.begin(), clusters.end(), my_cluster) - clusters.begin());
        auto each_piece = [&](auto&& fn) {  // fn(site, holder index, first, len)
            for (uint32_t s = 0; s < c.sites(); ++s) {
                if (s == my_site) continue;
                const uint32_t n = pieces_for(c, my_site, site_len[s], site_len[s]);
                for (uint32_t j = 0; j < n; ++j) {
                    uint64_t first, len;
                    piece_range(site_len[s], n, j, first, len);
                    fn(s, j, site_at[s] + first, len);
                }
            }
        };
        each_piece([&](uint32_t s, uint32_t j, uint64_t first, uint64_t len) {
            if (j == j_me) call.recv_bytes(data + first, len, c.coord(s));
        });
        if (!call.wait_all()) return call.error();
        // ... and the leaders swap: the coordinator's own site bundle first, then the pieces.
        if (me == coord) {
            for (uint32_t k : clusters)
                if (k != my_cluster) call.send_bytes(data + site_at[my_site], site_len[my_site], c.leader(k));
        } else {
            // (its own cluster's part comes again: one message, no gaps to fill)
            call.recv_bytes(data + site_at[my_site], site_len[my_site], coord);
        }
        each_piece([&](uint32_t, uint32_t j, uint64_t first, uint64_t len) {
            if (j == j_me) {
                for (uint32_t k : clusters)
                    if (k != my_cluster) call.send_bytes(data + first, len, c.leader(k));
            } else {
                call.recv_bytes(data + first, len, c.leader(clusters[j]));
            }
        });
        if (!call.wait_all()) return call.error();
    } else {
        call.send_bytes(data + at[me], my_bytes, leader);
        if (!call.wait_all()) return call.error();
    }
    if (!cluster_bcast(call, data, int(total), MPI_BYTE, leader)) return call.error();
    for (int r = 0; r < c.n; ++r) {
        if (r == me && !sbuf) continue;  // in place: already there
        if (unpack(data + at[r], static_cast<char*>(rbuf) + rb.offset_of(r), rb.count_of(r), rb.t) != MPI_SUCCESS)
            return call.raise(MPI_ERR_TYPE, "unpacking the block of rank " + std::to_string(r) + " failed");
    }
    return MPI_SUCCESS;
}

}  // namespace iccs::magpie
