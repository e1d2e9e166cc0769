// bcast.cpp: MPI_Bcast and MPI_Barrier, and the cluster-level broadcast the others end with.
//
// bcast: the root sends the data once to every other site: whole to the coordinator, or, when it
// is long, cut into pieces sent at once to several cluster leaders of that site (each piece
// crosses the wide-area link once; the receiving site's leaders then swap pieces over the LAN);
// the root's own site gets it over the LAN; each leader passes it down a binomial tree in its
// cluster. barrier: arrivals go up (cluster -> leader -> coordinator), the coordinators exchange
// one message each (one wide-area latency), the release comes down the same way.
#include <algorithm>

#include "magpie.hpp"

namespace iccs::magpie {

bool cluster_bcast(Call& call, void* buf, int count, MPI_Datatype t, int leader) {
    const Comm& c = call.comm();
    std::vector<int> ranks = c.cluster_ranks[c.my_cluster()];
    std::rotate(ranks.begin(), std::find(ranks.begin(), ranks.end(), leader), std::find(ranks.begin(), ranks.end(), leader) + 1);
    int parent = -1;
    std::vector<int> children;
    binomial_tree(ranks, c.me, parent, children);
    if (parent >= 0 && !call.wait(call.recv(buf, count, t, parent))) return false;
    for (int child : children) call.send(buf, count, t, child);
    return call.wait_all();
}

bool spread_in_site(Call& call, char* buf, uint64_t total, uint32_t n, const std::vector<uint32_t>& clusters,
                    MPI_Datatype t, MPI_Aint unit, int root) {
    const Comm& c = call.comm();
    const uint32_t my_cluster = c.my_cluster();
    const auto& site = c.site_ranks[c.my_site()];
    const uint32_t holder = static_cast<uint32_t>(std::find(clusters.begin(), clusters.end(), my_cluster) - clusters.begin());
    const bool holds = holder < n && c.me == c.leader(my_cluster, root);
    auto piece = [&](uint32_t j, int dest_or_src, bool send) {
        uint64_t first, len;
        piece_range(total, n, j, first, len);
        if (send)
            call.send(buf + first * unit, int(len), t, dest_or_src);
        else
            call.recv(buf + first * unit, int(len), t, dest_or_src);
    };
    if (site.size() <= kFanOutRanks) {
        // One hop: each holder to every other rank of the site.
        if (holds)
            for (int r : site)
                if (r != c.me) piece(holder, r, true);
        for (uint32_t j = 0; j < n; ++j)
            if (!(holds && j == holder)) piece(j, c.leader(clusters[j], root), false);
        return call.wait_all();
    }
    // The holders swap pieces among the site's leaders, then each leader down its cluster.
    if (c.me == c.leader(my_cluster, root)) {
        for (uint32_t j = 0; j < n; ++j) {
            if (holds && j == holder) {
                for (uint32_t k : clusters)
                    if (k != my_cluster) piece(j, c.leader(k, root), true);
            } else {
                piece(j, c.leader(clusters[j], root), false);
            }
        }
        if (!call.wait_all()) return false;
    }
    return cluster_bcast(call, buf, int(total), t, c.leader(my_cluster, root));
}

int bcast(Call& call, void* buf, int count, const TypeInfo& t) {
    const Comm& c = call.comm();
    const int root = call.root(), me = c.me;
    const uint64_t m = uint64_t(count) * uint64_t(t.size);
    call.add_bytes(m);
    if (m == 0) return MPI_SUCCESS;

    // The data as bytes: the buffer itself when contiguous, else packed (at the root) or
    // unpacked at the end (elsewhere).
    std::vector<char> packed;
    char* bytes = static_cast<char*>(buf) + t.true_lb;
    if (!t.contiguous) {
        packed.resize(m);
        bytes = packed.data();
        if (me == root && pack(buf, count, t, bytes) != MPI_SUCCESS) return call.raise(MPI_ERR_TYPE, "packing failed");
    }
    const uint32_t root_site = c.site_of[root], my_site = c.my_site(), my_cluster = c.my_cluster();

    // The root: the whole to its own site, and piece j of it to leader j of every other site.
    if (me == root) {
        call.add_wan_min(wan_min_bcast(c, root, m));
        for (uint32_t s = 0; s < c.sites(); ++s) {
            if (s == root_site) continue;
            const auto clusters = c.clusters_for(s, -1);
            const uint32_t n = pieces_for(c, s, m, m);
            for (uint32_t j = 0; j < n; ++j) {
                uint64_t first, len;
                piece_range(m, n, j, first, len);
                call.send_bytes(bytes + first, len, c.leader(clusters[j]));
            }
        }
    }
    const bool root_site_here = my_site == root_site;
    const auto clusters = c.clusters_for(my_site, root);
    const uint32_t n = root_site_here ? 1 : pieces_for(c, my_site, m, m);
    const uint32_t j_me = static_cast<uint32_t>(std::find(clusters.begin(), clusters.end(), my_cluster) - clusters.begin());
    if (!root_site_here && j_me < n && me == c.leader(my_cluster)) {  // a piece comes from the root
        uint64_t first, len;
        piece_range(m, n, j_me, first, len);
        if (!call.wait(call.recv_bytes(bytes + first, len, root))) return call.error();
    }
    // (the root's own sends complete in there: its site need not wait for them)
    if (!spread_in_site(call, bytes, m, n, clusters, MPI_BYTE, 1, root)) return call.error();
    if (!t.contiguous && me != root && unpack(bytes, buf, count, t) != MPI_SUCCESS)
        return call.raise(MPI_ERR_TYPE, "unpacking failed");
    return MPI_SUCCESS;
}

int barrier(Call& call) {
    const Comm& c = call.comm();
    const int me = c.me;
    const uint32_t my_site = c.my_site(), my_cluster = c.my_cluster();
    const int leader = c.leader(my_cluster), coord = c.coord(my_site);
    const auto& members = c.cluster_ranks[my_cluster];
    char none = 0;
    // Up: members to their leader, leaders to their coordinator.
    if (me != leader) {
        call.send_bytes(&none, 0, leader);
        call.wait(call.recv_bytes(&none, 0, leader));
        return call.wait_all() ? MPI_SUCCESS : call.error();
    }
    for (int r : members)
        if (r != me) call.recv_bytes(&none, 0, r);
    if (!call.wait_all()) return call.error();
    if (me != coord) {
        call.send_bytes(&none, 0, coord);
        call.wait(call.recv_bytes(&none, 0, coord));
    } else {
        for (uint32_t k : c.site_clusters[my_site])
            if (k != my_cluster) call.recv_bytes(&none, 0, c.leader(k));
        if (!call.wait_all()) return call.error();
        // Across: every coordinator tells every other one (one wide-area latency).
        for (uint32_t s = 0; s < c.sites(); ++s)
            if (s != my_site) {
                call.send_bytes(&none, 0, c.coord(s));
                call.recv_bytes(&none, 0, c.coord(s));
            }
        if (!call.wait_all()) return call.error();
        for (uint32_t k : c.site_clusters[my_site])
            if (k != my_cluster) call.send_bytes(&none, 0, c.leader(k));
    }
    if (!call.wait_all()) return call.error();
    // Down: the leader releases its members.
    for (int r : members)
        if (r != me) call.send_bytes(&none, 0, r);
    return call.wait_all() ? MPI_SUCCESS : call.error();
}

}  // namespace iccs::magpie
