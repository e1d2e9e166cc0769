// reduce.cpp: MPI_Reduce, MPI_Allreduce, MPI_Reduce_scatter(_block).
//
// All three start alike: a cluster's leader combines its ranks' inputs (shared memory), then a
// site's clusters' partials are combined (reduce, reduce_scatter: at the coordinator; allreduce:
// piece by piece at the site's leaders), so each site has one partial (or, for an operation
// that does not commute, one per row of consecutive ranks of the site: MPI fixes the order of
// the operands, x0 op x1 op ... op x(n-1), and only such rows may be combined early). Then:
//   reduce:         the partials cross once to the root's site (long ones in pieces to several of
//                   its leaders, which combine their piece and pass it on to the root); long
//                   vectors over 3 or more sites go by blocks instead (reduce_by_blocks: a
//                   reduce-scatter between the sites, then each site's reduced blocks to the
//                   root's site);
//   allreduce:      no coordinator: the vector is cut into pieces, one per leader of the site
//                   (one piece when short); the leaders swap the pieces of their cluster partials,
//                   so leader j holds piece j of the site's partials, and sends it to every other
//                   site (one wide-area latency; to the leader(s) holding that piece there); each
//                   leader combines its piece of every site's partials in rank order (so every site
//                   computes the same bits), and the pieces spread over the site's ranks; long
//                   vectors over 3 or more sites go by blocks instead (reduce_by_blocks: a
//                   reduce-scatter and an allgather between the sites, 2 (S - 1) / S of the
//                   vector out of each site instead of S - 1 vectors);
//   reduce_scatter: a coordinator sends each cluster of every site only that cluster's blocks of
//                   its partials; the cluster's leader combines them and hands each rank its block.
#include <algorithm>
#include <memory>

#include "magpie.hpp"

namespace iccs::magpie {

std::vector<std::pair<int, int>> runs_of(const std::vector<int>& ranks, bool split) {
    std::vector<std::pair<int, int>> out;
    if (ranks.empty()) return out;
    if (!split) return {{ranks.front(), ranks.back()}};
    for (int r : ranks) {
        if (!out.empty() && out.back().second + 1 == r)
            out.back().second = r;
        else
            out.emplace_back(r, r);
    }
    return out;
}

bool by_blocks(const Comm& c, uint64_t bytes) {
    const uint64_t at_least = settings().blocks_bytes;
    return c.sites() >= 3 && at_least > 0 && bytes >= at_least;
}

uint32_t block_lanes(const Comm& c, uint64_t bytes, uint64_t count) {
    uint32_t lanes = UINT32_MAX;
    for (uint32_t s = 0; s < c.sites(); ++s) lanes = std::min(lanes, pieces_for(c, s, bytes, count));
    return lanes;
}

void block_range(uint64_t total, uint32_t lanes, uint32_t sites, uint32_t lane, uint32_t site, uint64_t& first,
                 uint64_t& count) {
    uint64_t lane_first, lane_count;
    piece_range(total, lanes, lane, lane_first, lane_count);
    piece_range(lane_count, sites, site, first, count);
    first += lane_first;
}

uint32_t chunks_of_block(uint64_t block_n, int elem_size) {
    const uint64_t least = std::max<uint64_t>(1, settings().segment_bytes / 16);  // bytes of a chunk
    const uint64_t most = std::min<uint64_t>(settings().block_chunks, block_n);
    return uint32_t(std::clamp<uint64_t>(block_n * uint64_t(elem_size) / least, 1, std::max<uint64_t>(most, 1)));
}

namespace {

// An operand of the final combination: the reduction of the inputs of a row of ranks starting at
// `first`, `count` elements at `at` (at may point into another buffer).
struct Operand {
    int first = 0;
    char* at = nullptr;
};

// A partial owned here: ranks [first, last] reduced.
struct Partial {
    int first = 0, last = 0;
    TypedBuf buf;
};

// Combines `ops` in rank order into the buffer of the last one and returns it: each step is
// next = acc op next (MPI_Reduce_local), so no operand before it is needed again.
char* combine(std::vector<Operand>& ops, int count, const Reduction& red, Call& call) {
    if (ops.empty()) {
        call.fail(MPI_ERR_INTERN, "no partial to combine");
        return nullptr;
    }
    std::sort(ops.begin(), ops.end(), [](const Operand& a, const Operand& b) { return a.first < b.first; });
    char* acc = ops.front().at;
    for (size_t i = 1; i < ops.size(); ++i) {
        if (red.apply(acc, ops[i].at, count) != MPI_SUCCESS) {
            call.fail(MPI_ERR_OP, "the reduction failed");
            return nullptr;
        }
        acc = ops[i].at;
    }
    return acc;
}

// The partials of `rows` (runs of ranks) from `parts` (partials of sub-runs, each inside one row),
// each combined in rank order into the buffer of its last part.
bool merge_rows(Call& call, std::vector<Partial>& parts, const std::vector<std::pair<int, int>>& rows, int count,
                const Reduction& red, std::vector<Partial>& out) {
    std::sort(parts.begin(), parts.end(), [](const Partial& a, const Partial& b) { return a.first < b.first; });
    out.clear();
    for (const auto& [first, last] : rows) {
        std::vector<Operand> ops;
        size_t last_i = 0;
        for (size_t i = 0; i < parts.size(); ++i)
            if (parts[i].first >= first && parts[i].first <= last) {
                ops.push_back(Operand{parts[i].first, parts[i].buf.base()});
                last_i = i;
            }
        if (!combine(ops, count, red, call)) return false;  // (fails on a row without partials)
        out.push_back(Partial{first, last, std::move(parts[last_i].buf)});
    }
    return true;
}

// Phase 1: at a cluster's leader, the partials of the cluster's runs (rows of consecutive ranks,
// or all of it when the operation commutes); a member sends its input to its leader (and returns
// with `parts` empty).
bool cluster_partials(Call& call, const void* in, const Reduction& red, int root, bool split, std::vector<Partial>& parts) {
    const Comm& c = call.comm();
    const uint32_t my_cluster = c.my_cluster();
    const int leader = c.leader(my_cluster, root);
    parts.clear();
    if (c.me != leader) {
        call.send(in, red.count, red.t.type, leader);
        return call.wait_all();
    }
    const auto& members = c.cluster_ranks[my_cluster];
    std::vector<TypedBuf> xs;
    if (!cluster_inputs(call, in, red, xs)) return false;
    std::vector<Partial> inputs;
    for (size_t i = 0; i < members.size(); ++i) inputs.push_back(Partial{members[i], members[i], std::move(xs[i])});
    return merge_rows(call, inputs, runs_of(members, split), red.count, red, parts);
}

// Phases 1 and 2 (see the top of the file): on return the site's coordinator holds `out`, the
// partials of the site's runs in rank order; every other rank's part is sent.
bool site_partials(Call& call, const void* in, const Reduction& red, int root, bool split, std::vector<Partial>& out) {
    const Comm& c = call.comm();
    const uint32_t my_cluster = c.my_cluster(), my_site = c.my_site();
    const int coord = c.coord(my_site, root);
    std::vector<Partial> parts;
    out.clear();
    if (!cluster_partials(call, in, red, root, split, parts)) return false;
    if (parts.empty()) return true;  // a member
    if (c.me != coord) {
        for (Partial& p : parts) call.send(p.buf.base(), red.count, red.t.type, coord);
        return call.wait_all();
    }
    for (uint32_t k : c.site_clusters[my_site]) {
        if (k == my_cluster) continue;
        for (const auto& [first, last] : runs_of(c.cluster_ranks[k], split)) {
            parts.push_back(Partial{first, last, TypedBuf(red.t, red.count)});
            call.recv(parts.back().buf.base(), red.count, red.t.type, c.leader(k, root));
        }
    }
    return call.wait_all() && merge_rows(call, parts, runs_of(c.site_ranks[my_site], split), red.count, red, out);
}

uint32_t index_in(const std::vector<uint32_t>& v, uint32_t x) {
    return static_cast<uint32_t>(std::find(v.begin(), v.end(), x) - v.begin());
}

// At a site's leaders (the root leads its cluster): piece j of n of every cluster partial goes to
// the leader of the site's cluster j, which combines piece j of the site's rows (one row when the operation
// commutes) into `rows` and sets [first, first + cnt). Leaders of no piece return with rows empty.
bool site_rows_of_piece(Call& call, std::vector<Partial>& parts, const Reduction& red, uint32_t n, bool split, int root,
                        std::vector<Partial>& rows, uint64_t& first, uint64_t& cnt) {
    const Comm& c = call.comm();
    const uint32_t my_site = c.my_site(), my_cluster = c.my_cluster();
    const auto& clusters = c.site_clusters[my_site];
    const uint32_t j_me = index_in(clusters, my_cluster);
    rows.clear();
    for (uint32_t j = 0; j < n; ++j) {
        if (j == j_me) continue;
        piece_range(uint64_t(red.count), n, j, first, cnt);
        for (Partial& p : parts) call.send(p.buf.base() + red.offset(first), int(cnt), red.t.type, c.leader(clusters[j], root));
    }
    if (j_me >= n) return true;
    piece_range(uint64_t(red.count), n, j_me, first, cnt);
    std::vector<Partial> mine;
    for (Partial& p : parts) {  // own partials: their piece, moved to the front
        TypedBuf b(red.t, cnt);
        copy_typed(p.buf.base() + red.offset(first), b.base(), int(cnt), red.t);
        mine.push_back(Partial{p.first, p.last, std::move(b)});
    }
    for (uint32_t k : clusters) {
        if (k == my_cluster) continue;
        for (const auto& [f, l] : runs_of(c.cluster_ranks[k], split)) {
            mine.push_back(Partial{f, l, TypedBuf(red.t, cnt)});
            call.recv(mine.back().buf.base(), int(cnt), red.t.type, c.leader(k, root));
        }
    }
    return call.wait_all() && merge_rows(call, mine, runs_of(c.site_ranks[my_site], split), int(cnt), red, rows);
}

}  // namespace

bool cluster_inputs(Call& call, const void* in, const Reduction& red, std::vector<TypedBuf>& xs) {
    const Comm& c = call.comm();
    const auto& members = c.cluster_ranks[c.my_cluster()];
    xs.assign(members.size(), TypedBuf());
    for (size_t i = 0; i < members.size(); ++i) {
        xs[i] = TypedBuf(red.t, red.count);
        if (members[i] == c.me) {
            if (copy_typed(in, xs[i].base(), red.count, red.t) != MPI_SUCCESS) return call.fail(MPI_ERR_TYPE, "copy failed");
        } else {
            call.recv(xs[i].base(), red.count, red.t.type, members[i]);
        }
    }
    return call.wait_all();
}

namespace {

// By blocks (long vectors over 3 or more sites), for allreduce (root -1) and reduce: as allreduce
// below up to the site's rows of lane i at the site's leader of lane i (the root leads its
// cluster); then, between the sites' leaders of lane i, a reduce-scatter (each sends block t of its
// rows to site t, which combines block t of every site's rows in rank order) and an allgather
// (each sends its reduced block to every other site; reduce: to the root's site only, whose leaders
// pass their lanes to the root); allreduce: then every rank of the site gets every lane. A reduced
// block crosses a second wide-area link (wan_hops 2): one more latency for 2 (S - 1) / S of the
// vector out of each site instead of S - 1 vectors (reduce: into the root's site instead of S - 1).
int reduce_by_blocks(Call& call, void* out, const Reduction& red, std::vector<Partial>& parts) {
    const Comm& c = call.comm();
    const int root = call.root();
    const uint64_t count = uint64_t(red.count);
    const uint32_t S = c.sites(), my_site = c.my_site();
    const uint32_t root_site = root >= 0 ? c.site_of[root] : S;  // S: every site gets the result
    const auto& clusters = c.site_clusters[my_site];
    const uint32_t lanes = block_lanes(c, count * uint64_t(red.t.size), count);
    const uint32_t i = index_in(clusters, c.my_cluster());  // this leader's lane (if < lanes)
    auto holder = [&](uint32_t site) { return c.leader(c.site_clusters[site][i], root); };  // of lane i
    const bool holds = c.me == c.leader(c.my_cluster(), root) && i < lanes;
    uint64_t lane_first = 0, lane_n = 0;
    TypedBuf lane;  // reduce: lane i's result here (allreduce: in out)
    if (c.me == c.leader(c.my_cluster(), root)) {
        // The site's leaders: lane i of the site's rows at its leader of lane i ...
        std::vector<Partial> rows;
        if (!site_rows_of_piece(call, parts, red, lanes, !red.commutative, root, rows, lane_first, lane_n))
            return call.error();
        if (holds) {
            // Element e of lane i's result is at result + offset(e - lane_first).
            if (root >= 0) lane = TypedBuf(red.t, lane_n);
            char* result = root >= 0 ? lane.base() : static_cast<char*>(out) + red.offset(lane_first);
            // Each block goes in chunks, so that a site forwards the first reduced chunks while
            // the last are still on their way to it (the allgather overlaps the reduce-scatter).
            auto chunk = [&](uint64_t block_first, uint64_t block_n, uint32_t k, uint64_t& first, uint64_t& n) {
                piece_range(block_n, chunks_of_block(block_n, red.t.size), k, first, n);
                first += block_first;
            };
            // Every chunk of the blocks of lane i of the other sites: each(site, first, n).
            auto other_chunks = [&](auto&& each) {
                for (uint32_t t = 0; t < S; ++t) {
                    uint64_t bf, bn;
                    block_range(count, lanes, S, i, t, bf, bn);
                    if (t == my_site || bn == 0) continue;
                    for (uint32_t k = 0; k < chunks_of_block(bn, red.t.size); ++k) {
                        uint64_t first, n;
                        chunk(bf, bn, k, first, n);
                        each(t, first, n);
                    }
                }
            };
            // ... sends block t of its rows to site t, chunk by chunk (reduce-scatter) ...
            other_chunks([&](uint32_t t, uint64_t first, uint64_t n) {
                for (Partial& r : rows) call.send(r.buf.base() + red.offset(first - lane_first), int(n), red.t.type, holder(t));
            });
            uint64_t mine_first, mine_n;
            block_range(count, lanes, S, i, my_site, mine_first, mine_n);
            const uint32_t my_chunks = mine_n ? chunks_of_block(mine_n, red.t.size) : 0;
            // Its own block of its rows (copied: the rows' other blocks may still be sending), and
            // of every other site's rows, chunk by chunk ...
            std::vector<TypedBuf> got;
            std::vector<Operand> ops;  // rank order within a chunk: every row's first rank
            std::vector<std::vector<int>> waits(my_chunks);
            for (Partial& r : rows) {
                got.emplace_back(red.t, mine_n);
                copy_typed(r.buf.base() + red.offset(mine_first - lane_first), got.back().base(), int(mine_n), red.t);
                ops.push_back(Operand{r.first, got.back().base()});
            }
            for (uint32_t s = 0; s < S && mine_n > 0; ++s) {
                if (s == my_site) continue;
                for (const auto& row : runs_of(c.site_ranks[s], !red.commutative)) {
                    got.emplace_back(red.t, mine_n);
                    ops.push_back(Operand{row.first, got.back().base()});
                }
            }
            for (uint32_t k = 0; k < my_chunks; ++k) {
                uint64_t first, n;
                chunk(0, mine_n, k, first, n);
                size_t o = rows.size();
                for (uint32_t s = 0; s < S; ++s) {
                    if (s == my_site) continue;
                    const size_t site_rows = runs_of(c.site_ranks[s], !red.commutative).size();
                    for (size_t row = 0; row < site_rows; ++row, ++o)
                        waits[k].push_back(call.recv(ops[o].at + red.offset(first), int(n), red.t.type, holder(s)));
                }
            }
            // ... and the other sites' reduced blocks, chunk by chunk, into place (allgather; reduce:
            // at the root's site only) ...
            if (root < 0 || my_site == root_site)
                other_chunks([&](uint32_t t, uint64_t first, uint64_t n) {
                    call.recv(result + red.offset(first - lane_first), int(n), red.t.type, holder(t));
                });
            // ... each chunk of its own block combined in rank order as soon as every site's rows
            // of it are here, and sent on to every other site (reduce: to the root's site).
            for (uint32_t k = 0; k < my_chunks; ++k) {
                for (int h : waits[k])
                    if (!call.wait(h)) return call.error();
                uint64_t first, n;
                chunk(0, mine_n, k, first, n);
                std::vector<Operand> at = ops;
                for (Operand& x : at) x.at += red.offset(first);
                char* acc = combine(at, int(n), red, call);
                char* dst = result + red.offset(mine_first + first - lane_first);
                if (!acc || copy_typed(acc, dst, int(n), red.t) != MPI_SUCCESS)
                    return call.raise(MPI_ERR_OP, "combining the partials failed");
                for (uint32_t t = 0; t < S; ++t)
                    if (t != my_site && (root < 0 || t == root_site)) call.send(dst, int(n), red.t.type, holder(t));
            }
        }
    }
    if (!call.wait_all()) return call.error();
    if (root < 0)  // every rank of the site gets every lane
        return spread_in_site(call, static_cast<char*>(out), count, lanes, clusters, red.t.type, red.t.extent, -1)
                   ? MPI_SUCCESS
                   : call.error();
    // Reduce: the root gets every lane from its site's leaders of them.
    if (my_site != root_site) return MPI_SUCCESS;
    if (holds && c.me != root) call.send(lane.base(), int(lane_n), red.t.type, root);
    if (c.me == root)
        for (uint32_t j = 0; j < lanes; ++j) {
            uint64_t first, n;
            piece_range(count, lanes, j, first, n);
            char* at = static_cast<char*>(out) + red.offset(first);
            if (c.leader(clusters[j], root) != root)
                call.recv(at, int(n), red.t.type, c.leader(clusters[j], root));
            else if (copy_typed(lane.base(), at, int(n), red.t) != MPI_SUCCESS)
                return call.raise(MPI_ERR_TYPE, "copy failed");
        }
    return call.wait_all() ? MPI_SUCCESS : call.error();
}

}  // namespace

int reduce(Call& call, const void* in, void* out, const Reduction& red) {
    const Comm& c = call.comm();
    const int me = c.me, root = call.root(), count = red.count;
    const uint64_t m = uint64_t(count) * uint64_t(red.t.size);
    const bool split = !red.commutative;
    call.add_bytes(m);
    if (count == 0) return MPI_SUCCESS;
    if (me == root) call.add_wan_min(wan_min_reduce(c, root, uint64_t(count), red.t.size, split));
    if (by_blocks(c, m)) {
        std::vector<Partial> parts;
        if (!cluster_partials(call, in, red, root, split, parts)) return call.error();
        return reduce_by_blocks(call, out, red, parts);
    }
    std::vector<Partial> mine;
    if (!site_partials(call, in, red, root, split, mine)) return call.error();

    const uint32_t root_site = c.site_of[root], my_site = c.my_site(), my_cluster = c.my_cluster();
    const auto clusters = c.clusters_for(root_site, root);
    const uint32_t n = c.sites() > 1 ? pieces_for(c, root_site, m, count) : 1;  // pieces are for wide-area data
    // Another site's coordinator: its partials, piece j to the root site's leader j.
    if (my_site != root_site) {
        if (me != c.coord(my_site, root)) return MPI_SUCCESS;
        for (uint32_t j = 0; j < n; ++j) {
            uint64_t first, cnt;
            piece_range(count, n, j, first, cnt);
            for (Partial& p : mine) call.send(p.buf.base() + red.offset(first), int(cnt), red.t.type, c.leader(clusters[j], root));
        }
        return call.wait_all() ? MPI_SUCCESS : call.error();
    }
    // The root site: leader j (not the root) gets piece j of the other sites' partials; it
    // combines them (the operation commutes) or passes them on in order (it does not).
    const uint32_t j_me = index_in(clusters, my_cluster);
    auto other_runs = [&](auto&& each) {
        for (uint32_t s = 0; s < c.sites(); ++s)
            if (s != root_site)
                for (const auto& run : runs_of(c.site_ranks[s], split)) each(s, run.first);
    };
    if (me != root) {
        if (me != c.leader(my_cluster, root) || j_me >= n) return MPI_SUCCESS;
        uint64_t first, cnt;
        piece_range(count, n, j_me, first, cnt);
        std::vector<TypedBuf> got;
        std::vector<Operand> ops;
        other_runs([&](uint32_t s, int run_first) {
            got.emplace_back(red.t, cnt);
            ops.push_back(Operand{run_first, got.back().base()});
            call.recv(got.back().base(), int(cnt), red.t.type, c.coord(s, root));
        });
        if (!call.wait_all()) return call.error();
        if (red.commutative) {
            char* acc = combine(ops, int(cnt), red, call);
            if (!acc) return call.error();
            call.send(acc, int(cnt), red.t.type, root);
        } else {
            for (Operand& o : ops) call.send(o.at, int(cnt), red.t.type, root);
        }
        return call.wait_all() ? MPI_SUCCESS : call.error();
    }
    // The root: its site's partials, piece 0 of the others' straight from their coordinators,
    // piece j >= 1 from leader j; each piece combined in rank order into `out`.
    std::vector<std::vector<Operand>> ops(n);
    std::vector<TypedBuf> got;
    for (uint32_t j = 0; j < n; ++j) {
        uint64_t first, cnt;
        piece_range(count, n, j, first, cnt);
        for (Partial& p : mine) ops[j].push_back(Operand{p.first, p.buf.base() + red.offset(first)});
        if (j == 0 || !red.commutative) {
            other_runs([&](uint32_t s, int run_first) {
                got.emplace_back(red.t, cnt);
                ops[j].push_back(Operand{run_first, got.back().base()});
                call.recv(got.back().base(), int(cnt), red.t.type, j == 0 ? c.coord(s, root) : c.leader(clusters[j], root));
            });
        } else {
            got.emplace_back(red.t, cnt);
            ops[j].push_back(Operand{c.n, got.back().base()});  // any place: the operation commutes
            call.recv(got.back().base(), int(cnt), red.t.type, c.leader(clusters[j], root));
        }
    }
    if (!call.wait_all()) return call.error();
    for (uint32_t j = 0; j < n; ++j) {
        uint64_t first, cnt;
        piece_range(count, n, j, first, cnt);
        char* acc = combine(ops[j], int(cnt), red, call);
        if (!acc || copy_typed(acc, static_cast<char*>(out) + red.offset(first), int(cnt), red.t) != MPI_SUCCESS)
            return call.raise(MPI_ERR_OP, "combining the partials failed");
    }
    return MPI_SUCCESS;
}

int allreduce(Call& call, const void* in, void* out, const Reduction& red) {
    const Comm& c = call.comm();
    const int me = c.me, count = red.count;
    const uint64_t m = uint64_t(count) * uint64_t(red.t.size);
    const bool split = !red.commutative;
    call.add_bytes(m);
    if (count == 0) return MPI_SUCCESS;
    if (me == 0) call.add_wan_min(wan_min_allreduce(c, uint64_t(count), red.t.size, split));
    std::vector<Partial> parts;
    if (!cluster_partials(call, in, red, -1, split, parts)) return call.error();
    if (by_blocks(c, m)) return reduce_by_blocks(call, out, red, parts);
    const uint32_t my_site = c.my_site(), my_cluster = c.my_cluster();
    // Every site's vector is cut into pieces, one per leader (of the first n of its clusters).
    auto pieces = [&](uint32_t s) { return pieces_for(c, s, m, count); };
    const auto& clusters = c.site_clusters[my_site];
    const uint32_t n = pieces(my_site);
    if (me == c.leader(my_cluster)) {
        // The site's leaders: piece j of the site's rows at leader j ...
        std::vector<Partial> rows;
        uint64_t first, cnt;
        if (!site_rows_of_piece(call, parts, red, n, split, -1, rows, first, cnt)) return call.error();
        if (!rows.empty()) {
            // ... sends them to every other site, to the leader(s) whose piece overlaps it (the
            // same pieces when the sites are alike) ...
            for (uint32_t t = 0; t < c.sites(); ++t) {
                if (t == my_site) continue;
                const auto tc = c.clusters_for(t, -1);
                const uint32_t tn = pieces(t);
                for (uint32_t i = 0; i < tn; ++i) {
                    uint64_t tf, tcnt;
                    piece_range(count, tn, i, tf, tcnt);
                    const uint64_t lo = std::max(first, tf), hi = std::min(first + cnt, tf + tcnt);
                    if (lo >= hi) continue;
                    for (Partial& r : rows) call.send(r.buf.base() + red.offset(lo - first), int(hi - lo), red.t.type, c.leader(tc[i]));
                }
            }
            // ... and gets the other sites' rows for its piece, assembled from their pieces.
            std::vector<Operand> ops;
            for (Partial& r : rows) ops.push_back(Operand{r.first, r.buf.base()});
            std::vector<TypedBuf> got;
            got.reserve(c.n);
            for (uint32_t s = 0; s < c.sites(); ++s) {
                if (s == my_site) continue;
                const auto sc = c.clusters_for(s, -1);
                const uint32_t sn = pieces(s);
                for (const auto& row : runs_of(c.site_ranks[s], split)) {
                    got.emplace_back(red.t, cnt);
                    ops.push_back(Operand{row.first, got.back().base()});
                    for (uint32_t j = 0; j < sn; ++j) {
                        uint64_t sf, scnt;
                        piece_range(count, sn, j, sf, scnt);
                        const uint64_t lo = std::max(first, sf), hi = std::min(first + cnt, sf + scnt);
                        if (lo < hi) call.recv(got.back().base() + red.offset(lo - first), int(hi - lo), red.t.type, c.leader(sc[j]));
                    }
                }
            }
            if (!call.wait_all()) return call.error();
            char* acc = combine(ops, int(cnt), red, call);
            if (!acc || copy_typed(acc, static_cast<char*>(out) + red.offset(first), int(cnt), red.t) != MPI_SUCCESS)
                return call.raise(MPI_ERR_OP, "combining the partials failed");
        }
    }
    if (!call.wait_all()) return call.error();
    // Every rank of the site gets every piece.
    return spread_in_site(call, static_cast<char*>(out), uint64_t(count), n, clusters, red.t.type, red.t.extent, -1)
               ? MPI_SUCCESS
               : call.error();
}

int reduce_scatter(Call& call, const void* in, void* out, const int* counts, const Reduction& whole) {
    const Comm& c = call.comm();
    const int me = c.me;
    const bool split = !whole.commutative;
    std::vector<int> displ(c.n + 1, 0);
    for (int r = 0; r < c.n; ++r) displ[r + 1] = displ[r] + counts[r];
    const int total = displ[c.n];
    const uint64_t m = uint64_t(total) * uint64_t(whole.t.size);
    call.add_bytes(m);
    if (total == 0) return MPI_SUCCESS;
    if (me == 0) call.add_wan_min(wan_min_reduce_scatter(c, counts, whole.t.size, split));
    Reduction red = whole;
    red.count = total;
    std::vector<Partial> mine;
    if (!site_partials(call, in, red, -1, split, mine)) return call.error();

    const uint32_t my_site = c.my_site(), my_cluster = c.my_cluster();
    const int leader = c.leader(my_cluster);
    auto cluster_elems = [&](uint32_t k) {
        int sum = 0;
        for (int r : c.cluster_ranks[k]) sum += counts[r];
        return sum;
    };
    // The coordinator: to every other cluster, that cluster's blocks of each partial (an indexed
    // datatype over the partial picks them out).
    std::vector<MPI_Datatype> picks;
    if (me == c.coord(my_site)) {
        for (uint32_t k = 0; k < c.cluster_ranks.size(); ++k) {
            if (k == my_cluster || cluster_elems(k) == 0) continue;
            std::vector<int> lens, offs;
            for (int r : c.cluster_ranks[k])
                if (counts[r] > 0) {
                    lens.push_back(counts[r]);
                    offs.push_back(displ[r]);
                }
            MPI_Datatype pick;
            PMPI_Type_indexed(static_cast<int>(lens.size()), lens.data(), offs.data(), red.t.type, &pick);
            PMPI_Type_commit(&pick);
            picks.push_back(pick);
            for (Partial& p : mine) call.send(p.buf.base(), 1, pick, c.leader(k));
        }
    }
    // The leader: its cluster's blocks of every site's partials, combined in rank order; then each
    // rank its block.
    const int elems = cluster_elems(my_cluster);
    std::vector<TypedBuf> got;
    if (me == leader && elems > 0) {
        std::vector<Operand> ops;
        for (uint32_t s = 0; s < c.sites(); ++s) {
            if (s == my_site && me == c.coord(my_site)) {
                for (Partial& p : mine) {  // own blocks, picked out locally
                    got.emplace_back(red.t, elems);
                    int at = 0;
                    for (int r : c.cluster_ranks[my_cluster]) {
                        copy_typed(p.buf.base() + red.offset(displ[r]), got.back().base() + red.offset(at), counts[r], red.t);
                        at += counts[r];
                    }
                    ops.push_back(Operand{p.first, got.back().base()});
                }
                continue;
            }
            for (const auto& run : runs_of(c.site_ranks[s], split)) {
                got.emplace_back(red.t, elems);
                ops.push_back(Operand{run.first, got.back().base()});
                call.recv(got.back().base(), elems, red.t.type, c.coord(s));
            }
        }
        if (!call.wait_all()) {
            for (MPI_Datatype& p : picks) PMPI_Type_free(&p);
            return call.error();
        }
        char* acc = combine(ops, elems, red, call);
        if (!acc) return call.error();
        int at = 0;
        for (int r : c.cluster_ranks[my_cluster]) {
            if (r == me)
                copy_typed(acc + red.offset(at), out, counts[r], red.t);
            else
                call.send(acc + red.offset(at), counts[r], red.t.type, r);
            at += counts[r];
        }
    } else if (me != leader && elems > 0) {
        call.recv(out, counts[me], red.t.type, leader);
    }
    const bool ok = call.wait_all();
    for (MPI_Datatype& p : picks) PMPI_Type_free(&p);
    return ok ? MPI_SUCCESS : call.error();
}

}  // namespace iccs::magpie
