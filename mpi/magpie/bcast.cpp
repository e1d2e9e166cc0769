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
        for (uint32_t k : c.site_clusters[root_site])
            if (k != my_cluster) call.send_bytes(bytes, m, c.leader(k, root));
    } else if (me == c.leader(my_cluster, root)) {
        if (my_site == root_site) {
            call.wait(call.recv_bytes(bytes, m, root));
        } else {
            // Piece j came from the root to leader j; every leader needs all of them.
            const auto clusters = c.clusters_for(my_site, -1);
            const uint32_t n = pieces_for(c, my_site, m, m);
            const uint32_t mine = static_cast<uint32_t>(std::find(clusters.begin(), clusters.end(), my_cluster) - clusters.begin());
            int own = -1;
            for (uint32_t j = 0; j < n; ++j) {
                uint64_t first, len;
                piece_range(m, n, j, first, len);
                const int h = call.recv_bytes(bytes + first, len, j == mine ? root : c.leader(clusters[j]));
                if (j == mine) own = h;
            }
            if (own >= 0 && call.wait(own)) {
                uint64_t first, len;
                piece_range(m, n, mine, first, len);
                for (uint32_t k : clusters)
                    if (k != my_cluster) call.send_bytes(bytes + first, len, c.leader(k));
            }
        }
    }
    if (!call.wait_all()) return call.error();
    if (!cluster_bcast(call, bytes, static_cast<int>(m), MPI_BYTE, c.leader(my_cluster, root))) return call.error();
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
