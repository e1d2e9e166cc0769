// gather.cpp: MPI_Gather(v) and MPI_Scatter(v), mirror images of one route:
// rank <-> its cluster's leader <-> its site's coordinator <-> the root (one wide-area link).
//
// Blocks travel packed (MPI_Pack's bytes; the buffer itself when the datatype is contiguous) and
// are bundled in a fixed order every rank can compute: a site's clusters by lowest rank, a
// cluster's ranks ascending. Gather: a long site bundle crosses to the root's site in pieces, to
// several of its leaders, which pass them on to the root. The v-forms keep one message per site:
// only the root knows the counts, so a leader or coordinator learns a bundle's length as it
// comes (gatherv) or from a directory of block lengths in front of it (scatterv).
#include <algorithm>
#include <cstring>
#include <numeric>

#include "magpie.hpp"

namespace iccs::magpie {

namespace {

// The blocks of `ranks` (this order) as packed bytes at the root: offsets into one buffer.
struct Layout {
    std::vector<int> ranks;
    std::vector<uint64_t> at;  // by position in ranks
    uint64_t total = 0;
};

Layout layout(const std::vector<int>& ranks, const Blocks& b) {
    Layout l;
    l.ranks = ranks;
    for (int r : ranks) {
        l.at.push_back(l.total);
        l.total += b.bytes_of(r);
    }
    return l;
}

// The ranks of a site in bundle order (clusters by lowest rank, ranks ascending), without `skip`'s
// cluster (the root's: its blocks do not travel as a site bundle).
std::vector<int> site_order(const Comm& c, uint32_t site, int skip_cluster = -1) {
    std::vector<int> out;
    for (uint32_t k : c.site_clusters[site])
        if (int(k) != skip_cluster) out.insert(out.end(), c.cluster_ranks[k].begin(), c.cluster_ranks[k].end());
    return out;
}

// Scatterv's bundles start with a directory: the number of blocks and each one's length (u64).
std::vector<char> with_directory(const std::vector<uint64_t>& lens, const char* data, uint64_t len) {
    std::vector<char> out(8 * (lens.size() + 1) + len);
    const uint64_t n = lens.size();
    std::memcpy(out.data(), &n, 8);
    std::memcpy(out.data() + 8, lens.data(), 8 * n);
    if (len) std::memcpy(out.data() + 8 * (n + 1), data, len);
    return out;
}

// The directory of a received bundle, checked against the blocks this rank expects.
bool read_directory(Call& call, const std::vector<char>& in, size_t blocks, std::vector<uint64_t>& lens, size_t& data_at) {
    uint64_t n = 0;
    if (in.size() >= 8) std::memcpy(&n, in.data(), 8);
    if (in.size() < 8 || n != blocks || in.size() < 8 * (n + 1))
        return call.fail(MPI_ERR_OTHER, "a scatterv bundle does not list " + std::to_string(blocks) + " blocks");
    lens.resize(n);
    std::memcpy(lens.data(), in.data() + 8, 8 * n);
    data_at = 8 * (n + 1);
    uint64_t sum = 0;
    for (uint64_t l : lens) sum += l;
    if (sum != in.size() - data_at) return call.fail(MPI_ERR_OTHER, "a scatterv bundle's directory does not match its length");
    return true;
}

bool too_big(Call& call, uint64_t bytes) {
    if (bytes <= uint64_t(INT32_MAX)) return false;
    call.fail(MPI_ERR_COUNT, "a bundle of " + std::to_string(bytes) + " bytes is more than one message can hold");
    return true;
}

}  // namespace

int gather(Call& call, const void* sbuf, int scount, const TypeInfo& st, void* rbuf, const Blocks& rb) {
    const Comm& c = call.comm();
    const int me = c.me, root = call.root();
    const bool v = call.coll() == Coll::kGatherv;  // only the root has the counts
    const uint32_t my_site = c.my_site(), my_cluster = c.my_cluster(), root_site = c.site_of[root];
    const int leader = c.leader(my_cluster, root), coord = c.coord(my_site, root);
    const uint64_t my_bytes = uint64_t(scount) * uint64_t(st.size);
    call.add_bytes(sbuf ? my_bytes : rb.bytes_of(me));

    // My own block, packed (the buffer itself when contiguous).
    std::vector<char> own;
    const char* own_bytes = static_cast<const char*>(sbuf) + st.true_lb;
    if (sbuf && !st.contiguous) {
        own.resize(my_bytes);
        pack(sbuf, scount, st, own.data());
        own_bytes = own.data();
    }
    if (me == root) {
        uint64_t min = 0;
        for (int r = 0; r < c.n; ++r)
            if (c.site_of[r] != root_site) min += rb.bytes_of(r);
        call.add_wan_min(min);
        if (sbuf && (my_bytes != rb.bytes_of(me) ||
                     unpack(own_bytes, static_cast<char*>(rbuf) + rb.offset_of(me), rb.count_of(me), rb.t) != MPI_SUCCESS))
            return call.raise(MPI_ERR_TRUNCATE, "the root's own send and receive arguments differ in length");
    }
    if (me != leader) {
        call.send_bytes(own_bytes, my_bytes, leader);
        return call.wait_all() ? MPI_SUCCESS : call.error();
    }

    const auto root_clusters = c.clusters_for(root_site, root);
    // Pieces of site s's bundle into the root's site (gather only: every rank can compute them).
    auto site_pieces = [&](uint64_t len) { return v ? 1u : pieces_for(c, root_site, len, len); };
    const uint32_t j_me = static_cast<uint32_t>(std::find(root_clusters.begin(), root_clusters.end(), my_cluster) - root_clusters.begin());

    if (me != root) {
        // A leader: its cluster's blocks in rank order (lengths as they come for gatherv).
        std::vector<char> bundle;
        std::vector<std::vector<char>> parts(c.cluster_ranks[my_cluster].size());
        for (size_t i = 0; i < parts.size(); ++i) {
            const int r = c.cluster_ranks[my_cluster][i];
            if (r == me) {
                parts[i].assign(own_bytes, own_bytes + my_bytes);
            } else if (v) {
                if (!call.recv_any_length(parts[i], r)) return call.error();
            } else {
                parts[i].resize(my_bytes);
                call.recv_bytes(parts[i].data(), my_bytes, r);
            }
        }
        if (!call.wait_all()) return call.error();
        for (auto& p : parts) bundle.insert(bundle.end(), p.begin(), p.end());
        if (me != coord) {
            call.send_bytes(bundle.data(), bundle.size(), coord);
            if (!call.wait_all()) return call.error();
        } else {
            // The coordinator of another site: the site's bundle, to the root (in pieces).
            std::vector<std::vector<char>> cparts;
            for (uint32_t k : c.site_clusters[my_site]) {
                if (k == my_cluster) continue;
                cparts.emplace_back();
                const int from = c.leader(k, root);
                if (v) {
                    if (!call.recv_any_length(cparts.back(), from)) return call.error();
                } else {
                    cparts.back().resize(c.cluster_ranks[k].size() * my_bytes);
                    call.recv_bytes(cparts.back().data(), cparts.back().size(), from);
                }
            }
            if (!call.wait_all()) return call.error();
            for (auto& p : cparts) bundle.insert(bundle.end(), p.begin(), p.end());
            if (too_big(call, bundle.size())) return call.error();
            const uint32_t n = site_pieces(bundle.size());
            for (uint32_t j = 0; j < n; ++j) {
                uint64_t first, len;
                piece_range(bundle.size(), n, j, first, len);
                call.send_bytes(bundle.data() + first, len, c.leader(root_clusters[j], root));
            }
            if (!call.wait_all()) return call.error();
        }
        // A leader of the root's site passes on piece j of every other site's bundle.
        if (my_site == root_site && !v) {
            std::vector<std::vector<char>> relay;
            for (uint32_t s = 0; s < c.sites(); ++s) {
                if (s == root_site) continue;
                const uint64_t len = c.site_ranks[s].size() * my_bytes;
                const uint32_t n = site_pieces(len);
                if (j_me >= n) continue;
                uint64_t first, cnt;
                piece_range(len, n, j_me, first, cnt);
                relay.emplace_back(cnt);
                call.recv_bytes(relay.back().data(), cnt, c.coord(s, root));
            }
            if (!call.wait_all()) return call.error();
            for (auto& piece : relay) call.send_bytes(piece.data(), piece.size(), root);
            if (!call.wait_all()) return call.error();  // before `relay` goes
        }
        return call.wait_all() ? MPI_SUCCESS : call.error();
    }

    // The root: its cluster's blocks one by one, its site's cluster bundles, every other site's
    // bundle (pieces from that site's coordinator and from its own site's leaders).
    struct Incoming {
        Layout l;
        std::vector<char> data;
    };
    std::vector<Incoming> in;
    for (int r : c.cluster_ranks[my_cluster])
        if (r != me) in.push_back(Incoming{layout({r}, rb), {}});
    for (uint32_t k : root_clusters)
        if (k != my_cluster) in.push_back(Incoming{layout(c.cluster_ranks[k], rb), {}});
    const size_t first_site = in.size();
    for (uint32_t s = 0; s < c.sites(); ++s)
        if (s != root_site) in.push_back(Incoming{layout(site_order(c, s), rb), {}});
    for (Incoming& i : in) {
        if (too_big(call, i.l.total)) return call.error();
        i.data.resize(i.l.total);
    }
    size_t next = 0;
    for (int r : c.cluster_ranks[my_cluster])
        if (r != me) call.recv_bytes(in[next].data.data(), in[next].l.total, r), ++next;
    for (uint32_t k : root_clusters)
        if (k != my_cluster) call.recv_bytes(in[next].data.data(), in[next].l.total, c.leader(k, root)), ++next;
    for (uint32_t s = 0, i = uint32_t(first_site); s < c.sites(); ++s) {
        if (s == root_site) continue;
        Incoming& b = in[i++];
        // The coordinator computes the pieces from its own block length, the root from its counts:
        // the same when the ranks agree (else a length check fails).
        const uint32_t n = site_pieces(b.l.total);
        for (uint32_t j = 0; j < n; ++j) {
            uint64_t first, len;
            piece_range(b.l.total, n, j, first, len);
            call.recv_bytes(b.data.data() + first, len, j == 0 ? c.coord(s, root) : c.leader(root_clusters[j], root));
        }
    }
    if (!call.wait_all()) return call.error();
    for (const Incoming& i : in)
        for (size_t p = 0; p < i.l.ranks.size(); ++p) {
            const int r = i.l.ranks[p];
            if (unpack(i.data.data() + i.l.at[p], static_cast<char*>(rbuf) + rb.offset_of(r), rb.count_of(r), rb.t) !=
                MPI_SUCCESS)
                return call.raise(MPI_ERR_TYPE, "unpacking the block of rank " + std::to_string(r) + " failed");
        }
    return MPI_SUCCESS;
}

int scatter(Call& call, const void* sbuf, const Blocks& sb, void* rbuf, int rcount, const TypeInfo& rt) {
    const Comm& c = call.comm();
    const int me = c.me, root = call.root();
    const bool v = call.coll() == Coll::kScatterv;
    const uint32_t my_site = c.my_site(), my_cluster = c.my_cluster(), root_site = c.site_of[root];
    const int leader = c.leader(my_cluster, root), coord = c.coord(my_site, root);
    const uint64_t my_bytes = uint64_t(rcount) * uint64_t(rt.size);
    call.add_bytes(rbuf ? my_bytes : sb.bytes_of(me));

    if (me == root) {
        uint64_t min = 0;
        for (int r = 0; r < c.n; ++r)
            if (c.site_of[r] != root_site) min += sb.bytes_of(r);
        call.add_wan_min(min);
        // The blocks of `ranks` packed one after the other (and their lengths).
        auto bundle_of = [&](const std::vector<int>& ranks, std::vector<uint64_t>& lens) {
            const Layout l = layout(ranks, sb);
            std::vector<char> out(l.total);
            lens.clear();
            for (size_t p = 0; p < ranks.size(); ++p) {
                pack(static_cast<const char*>(sbuf) + sb.offset_of(ranks[p]), sb.count_of(ranks[p]), sb.t, out.data() + l.at[p]);
                lens.push_back(sb.bytes_of(ranks[p]));
            }
            return out;
        };
        std::vector<std::vector<char>> keep;  // alive until the sends complete
        std::vector<uint64_t> lens;
        if (rbuf) {
            keep.push_back(bundle_of({me}, lens));
            if (sb.bytes_of(me) != my_bytes || unpack(keep.back().data(), rbuf, rcount, rt) != MPI_SUCCESS)
                return call.raise(MPI_ERR_TRUNCATE, "the root's own send and receive arguments differ in length");
        }
        for (int r : c.cluster_ranks[my_cluster])
            if (r != me) {
                keep.push_back(bundle_of({r}, lens));
                call.send_bytes(keep.back().data(), keep.back().size(), r);
            }
        auto send_bundle = [&](const std::vector<int>& ranks, int to) {
            std::vector<char> data = bundle_of(ranks, lens);
            if (too_big(call, data.size() + 8 * (lens.size() + 1))) return;
            keep.push_back(v ? with_directory(lens, data.data(), data.size()) : std::move(data));
            call.send_bytes(keep.back().data(), keep.back().size(), to, int64_t(layout(ranks, sb).total));
        };
        for (uint32_t k : c.site_clusters[root_site])
            if (k != my_cluster) send_bundle(c.cluster_ranks[k], c.leader(k, root));
        for (uint32_t s = 0; s < c.sites(); ++s)
            if (s != root_site) send_bundle(site_order(c, s), c.coord(s, root));
        return call.wait_all() ? MPI_SUCCESS : call.error();
    }

    // A member: its block from its leader.
    std::vector<char> mine(my_bytes);
    if (me != leader) {
        if (!call.wait(call.recv_bytes(mine.data(), my_bytes, leader))) return call.error();
        return unpack(mine.data(), rbuf, rcount, rt) == MPI_SUCCESS ? MPI_SUCCESS : call.raise(MPI_ERR_TYPE, "unpacking failed");
    }
    // A bundle for `ranks` from `from`: its blocks' lengths and where its data starts.
    auto take_bundle = [&](const std::vector<int>& ranks, int from, std::vector<char>& b, std::vector<uint64_t>& lens,
                           size_t& data_at) {
        if (v) return call.recv_any_length(b, from) && read_directory(call, b, ranks.size(), lens, data_at);
        b.resize(ranks.size() * my_bytes);
        lens.assign(ranks.size(), my_bytes);
        data_at = 0;
        return call.wait(call.recv_bytes(b.data(), b.size(), from));
    };
    std::vector<char> cluster_bundle, site_bundle;
    std::vector<uint64_t> lens;
    size_t data_at = 0;
    std::vector<std::vector<char>> keep;
    const auto& members = c.cluster_ranks[my_cluster];
    if (me == coord && my_site != root_site) {
        // Another site's coordinator: the site's bundle, split into cluster bundles.
        const std::vector<int> order = site_order(c, my_site);
        if (!take_bundle(order, root, site_bundle, lens, data_at)) return call.error();
        size_t p = 0;
        uint64_t at = data_at;
        for (uint32_t k : c.site_clusters[my_site]) {
            const size_t nk = c.cluster_ranks[k].size();
            const std::vector<uint64_t> klens(lens.begin() + p, lens.begin() + p + nk);
            const uint64_t len = std::accumulate(klens.begin(), klens.end(), uint64_t{0});
            std::vector<char> sub = v ? with_directory(klens, site_bundle.data() + at, len)
                                      : std::vector<char>(site_bundle.begin() + at, site_bundle.begin() + at + len);
            if (k == my_cluster) {
                cluster_bundle = std::move(sub);
            } else {
                keep.push_back(std::move(sub));
                call.send_bytes(keep.back().data(), keep.back().size(), c.leader(k, root), int64_t(len));
            }
            p += nk;
            at += len;
        }
        if (v && !read_directory(call, cluster_bundle, members.size(), lens, data_at)) return call.error();
        if (!v) lens.assign(members.size(), my_bytes), data_at = 0;
    } else if (!take_bundle(members, my_site == root_site ? root : coord, cluster_bundle, lens, data_at)) {
        return call.error();
    }
    // The leader: each member its block.
    uint64_t at = data_at;
    for (size_t p = 0; p < members.size(); ++p) {
        if (members[p] == me) {
            if (lens[p] != my_bytes || unpack(cluster_bundle.data() + at, rbuf, rcount, rt) != MPI_SUCCESS)
                return call.raise(MPI_ERR_TRUNCATE, "the root sent " + std::to_string(lens[p]) + " bytes where this rank expects " +
                                                         std::to_string(my_bytes) + " (counts that do not match)");
        } else {
            call.send_bytes(cluster_bundle.data() + at, lens[p], members[p]);
        }
        at += lens[p];
    }
    return call.wait_all() ? MPI_SUCCESS : call.error();
}

}  // namespace iccs::magpie
