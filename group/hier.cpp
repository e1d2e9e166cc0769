// hier.cpp: the hierarchical (MagPIe) family. Three levels: the threads of a cluster through
// shared memory (local_sync and the slots: a leader, thread 0, reads its threads' buffers
// directly), the clusters of a site through one LAN message per cluster leader, the sites through
// one coordinator each (the leader of the site's first cluster, or of the root's cluster in the
// root's site). Data from another site arrives at a site's coordinator once and spreads inside the
// site from there, so no path holds two WAN links and no item crosses to a site twice.
//
// Steps (message tags): 1 leader -> leader inside a site, 2 leader -> own coordinator,
// 3 coordinator -> coordinator (the WAN), 4 coordinator -> leader, 5 the root's leader releases its
// site's other leaders (gather, reduce). A WAN message of several segments is spread over the
// receiving site's leaders, which relay the segments to its coordinator (GroupImpl::send_wan).
#include <cstring>

#include "group_impl.hpp"

namespace iccs::group {

namespace {

uint32_t leader(const Topology& T, uint16_t c) { return uint32_t{c} * T.threads; }
// The coordinating cluster of site s (root_cluster: 0xFFFF when the call has no root).
uint16_t coord(const Topology& T, uint16_t s, uint16_t root_cluster) {
    if (root_cluster != 0xFFFF && T.site_of[root_cluster] == s) return root_cluster;
    return T.clusters_of[s].front();
}

// Every thread of the cluster called the same collective with the same arguments.
bool local_check(GroupImpl& g) {
    const ClusterLocal& L = g.local();
    for (uint16_t t = 0; t < g.topo().threads; ++t) {
        const Slot& s = L.slot[t];
        if (s.kind != static_cast<uint8_t>(g.kind))
            return g.fail(g.who(uint32_t{g.cluster} * g.topo().threads + t) + " called " +
                          to_string(static_cast<Coll>(s.kind)) + " in the same place");
        if (s.check != g.check)
            return g.fail(g.who(uint32_t{g.cluster} * g.topo().threads + t) +
                          " called it with different arguments (root, size, counts or operation)");
    }
    return true;
}

bool begin_local(GroupImpl& g, const void* in, void* out, const void* extra = nullptr) {
    Slot& s = g.local().slot[g.thread];
    s.in = in;
    s.out = out;
    s.extra = extra;
    return g.local_sync() && local_check(g);
}

}  // namespace

bool hier_barrier(GroupImpl& g) {
    const Topology& T = g.topo();
    if (!begin_local(g, nullptr, nullptr)) return false;
    if (g.thread == 0) {
        const uint16_t s = T.site_of[g.cluster], cc = coord(T, s, 0xFFFF);
        std::vector<uint8_t> m;
        if (g.cluster != cc) {
            if (!g.send(leader(T, cc), 1, nullptr, 0) || !g.recv(leader(T, cc), 4, m)) return false;
        } else {
            for (uint16_t c : T.clusters_of[s])
                if (c != g.cluster && !g.recv(leader(T, c), 1, m)) return false;
            for (uint16_t s2 = 0; s2 < T.sites; ++s2)
                if (s2 != s && !g.send(leader(T, coord(T, s2, 0xFFFF)), 3, nullptr, 0)) return false;
            for (uint16_t s2 = 0; s2 < T.sites; ++s2)
                if (s2 != s && !g.recv(leader(T, coord(T, s2, 0xFFFF)), 3, m)) return false;
            for (uint16_t c : T.clusters_of[s])
                if (c != g.cluster && !g.send(leader(T, c), 4, nullptr, 0)) return false;
        }
    }
    return g.local_sync();
}

bool hier_bcast(GroupImpl& g, uint8_t* buf, size_t n, uint32_t root) {
    const Topology& T = g.topo();
    ClusterLocal& L = g.local();
    const uint16_t rc = T.cluster_of_rank(root), rs = T.site_of[rc], s = T.site_of[g.cluster];
    if (!begin_local(g, nullptr, buf)) return false;
    std::vector<uint8_t> m;
    if (g.thread == 0) {
        const uint8_t* data = nullptr;
        if (g.cluster == rc) {
            data = static_cast<const uint8_t*>(L.slot[root % T.threads].out);
            for (uint16_t s2 = 0; s2 < T.sites; ++s2)  // the WAN first: its messages take longest
                if (s2 != rs && !g.send_wan(leader(T, coord(T, s2, rc)), 3, data, n)) return false;
            for (uint16_t c : T.clusters_of[rs])
                if (c != rc && !g.send(leader(T, c), 1, data, n)) return false;
        } else {
            const uint16_t cc = coord(T, s, rc);
            const bool from_root = s == rs || g.cluster == cc;
            const uint32_t from = from_root ? leader(T, rc) : leader(T, cc);
            if (!g.recv(from, s == rs ? 1 : g.cluster == cc ? 3 : 4, m) || !g.want_len(from, m.size(), n)) return false;
            if (s != rs && g.cluster == cc) g.item_arrived(rs, root);  // the root's buffer, into this site
            data = m.data();
            if (s != rs && g.cluster == cc)
                for (uint16_t c : T.clusters_of[s])
                    if (c != g.cluster && !g.send(leader(T, c), 4, data, n)) return false;
        }
        L.data = data;
        L.len = n;
        g.items_audit();
    }
    if (!g.local_sync()) return false;
    if (g.me != root && n) {
        std::memcpy(buf, L.data, n);
        g.count_shm(n);
    }
    const bool ok = g.local_sync();
    if (g.thread == 0) g.recycle(std::move(m));
    return ok;
}

// --- the data engine: records routed leader -> coordinator -> coordinator -> leader ----------------

namespace {

// The coordinator of site s tells its site's other leaders that its part is done (step 5); they
// wait for it, polling, so spread WAN segments they relay reach the coordinator.
bool release_site(GroupImpl& g, uint16_t s, uint16_t cc) {
    const Topology& T = g.topo();
    if (g.cluster != cc) {
        std::vector<uint8_t> m;
        return g.recv(leader(T, cc), 5, m);
    }
    for (uint16_t c : T.clusters_of[s])
        if (c != cc && !g.send(leader(T, c), 5, nullptr, 0)) return false;
    return true;
}

struct Engine {
    GroupImpl& g;
    const MoveArgs& a;
    const Topology& T;
    uint16_t rc;  // root cluster or 0xFFFF
    std::vector<std::vector<uint8_t>> keep;

    // Does cluster c1 send anything to cluster c2 (c1 != c2) in this collective?
    bool ce(uint16_t c1, uint16_t c2) const {
        if (c1 == c2) return false;
        if (a.kind == Coll::kGather) return c2 == rc;
        if (a.kind == Coll::kScatter) return c1 == rc;
        return true;
    }
    bool to_cluster(const Rec& r, uint16_t c) const {
        const uint16_t sc = T.cluster_of_rank(r.src);
        if (r.dst == kAllRanks) return sc == c || ce(sc, c);
        return T.cluster_of_rank(r.dst) == c;
    }
    bool to_site(const Rec& r, uint16_t s) const {
        if (r.dst != kAllRanks) return T.site_of_rank(r.dst) == s;
        for (uint16_t c : T.clusters_of[s])
            if (to_cluster(r, c)) return true;
        return false;
    }
    bool site_edge(uint16_t s1, uint16_t s2) const {
        for (uint16_t c1 : T.clusters_of[s1])
            for (uint16_t c2 : T.clusters_of[s2])
                if (ce(c1, c2)) return true;
        return false;
    }
    bool cluster_to_site(uint16_t c1, uint16_t s2) const {
        for (uint16_t c2 : T.clusters_of[s2])
            if (ce(c1, c2)) return true;
        return false;
    }
    bool site_to_cluster(uint16_t s1, uint16_t c2) const {
        for (uint16_t c1 : T.clusters_of[s1])
            if (ce(c1, c2)) return true;
        return false;
    }

    template <class Pred>
    bool send_recs(uint32_t dst, uint16_t step, const std::vector<Rec>& recs, Pred keep_it) {
        uint32_t n = 0;
        size_t data = 0;
        for (const Rec& r : recs)
            if (keep_it(r)) {
                ++n;
                data += r.len;
            }
        std::vector<uint8_t> m = g.take(4 + size_t{n} * 12 + data);
        std::memcpy(m.data(), &n, 4);
        size_t tp = 4, dp = 4 + size_t{n} * 12;
        for (const Rec& r : recs)
            if (keep_it(r)) {
                const uint32_t t[3] = {r.src, r.dst, r.len};
                std::memcpy(m.data() + tp, t, 12);
                tp += 12;
                if (r.len) std::memcpy(m.data() + dp, r.data, r.len);
                dp += r.len;
            }
        const bool ok = step == 3 ? g.send_wan(dst, step, m.data(), m.size(), data) : g.send(dst, step, m.data(), m.size(), data);
        g.recycle(std::move(m));
        return ok;
    }
    bool recv_recs(uint32_t src, uint16_t step, std::vector<Rec>& out) {
        std::vector<uint8_t> m;
        if (!g.recv(src, step, m)) return false;
        uint32_t n = 0;
        bool ok = m.size() >= 4;
        if (ok) std::memcpy(&n, m.data(), 4);
        ok = ok && (m.size() - 4) / 12 >= n;
        size_t tp = 4, dp = 4 + size_t{n} * 12;
        for (uint32_t i = 0; ok && i < n; ++i) {
            uint32_t t[3];
            std::memcpy(t, m.data() + tp, 12);
            tp += 12;
            ok = t[0] < T.ranks() && (t[1] < T.ranks() || t[1] == kAllRanks) && dp + t[2] <= m.size();
            if (ok) out.push_back(Rec{t[0], t[1], t[2], m.data() + dp});
            if (ok && step == 3) g.item_arrived(T.site_of_rank(src), uint64_t{t[0]} << 32 | t[1]);  // a WAN arrival
            dp += t[2];
        }
        if (!ok) return g.fail("a malformed record message from " + g.who(src));
        keep.push_back(std::move(m));
        return true;
    }

    bool leader_part(std::vector<Rec>& local_in) {
        const uint16_t c = g.cluster, s = T.site_of[c], cc = coord(T, s, rc);
        std::vector<Rec> mine;
        for (uint16_t t = 0; t < T.threads; ++t) {
            const auto* v = static_cast<const std::vector<Rec>*>(g.local().slot[t].extra);
            mine.insert(mine.end(), v->begin(), v->end());
        }
        for (const Rec& r : mine)
            if (to_cluster(r, c)) local_in.push_back(r);
        for (uint16_t c2 : T.clusters_of[s])
            if (ce(c, c2) && !send_recs(leader(T, c2), 1, mine, [&](const Rec& r) { return to_cluster(r, c2); }))
                return false;
        auto leaves = [&](const Rec& r) {
            for (uint16_t s2 = 0; s2 < T.sites; ++s2)
                if (s2 != s && to_site(r, s2)) return true;
            return false;
        };
        bool out_needed = false;
        for (uint16_t s2 = 0; s2 < T.sites; ++s2) out_needed |= s2 != s && cluster_to_site(c, s2);
        if (c != cc) {
            if (out_needed && !send_recs(leader(T, cc), 2, mine, leaves)) return false;
            bool in_needed = false;
            for (uint16_t s1 = 0; s1 < T.sites; ++s1) in_needed |= s1 != s && site_to_cluster(s1, c);
            if (in_needed && !recv_recs(leader(T, cc), 4, local_in)) return false;
        } else {
            std::vector<Rec> outb;
            for (const Rec& r : mine)
                if (leaves(r)) outb.push_back(r);
            for (uint16_t c1 : T.clusters_of[s]) {
                bool needed = false;
                for (uint16_t s2 = 0; s2 < T.sites; ++s2) needed |= s2 != s && cluster_to_site(c1, s2);
                if (c1 != c && needed && !recv_recs(leader(T, c1), 2, outb)) return false;
            }
            for (uint16_t s2 = 0; s2 < T.sites; ++s2)
                if (s2 != s && site_edge(s, s2) &&
                    !send_recs(leader(T, coord(T, s2, rc)), 3, outb, [&](const Rec& r) { return to_site(r, s2); }))
                    return false;
            std::vector<Rec> inb;
            for (uint16_t s1 = 0; s1 < T.sites; ++s1)
                if (s1 != s && site_edge(s1, s) && !recv_recs(leader(T, coord(T, s1, rc)), 3, inb)) return false;
            for (uint16_t c2 : T.clusters_of[s]) {
                bool needed = false;
                for (uint16_t s1 = 0; s1 < T.sites; ++s1) needed |= s1 != s && site_to_cluster(s1, c2);
                if (c2 != c && needed &&
                    !send_recs(leader(T, c2), 4, inb, [&](const Rec& r) { return to_cluster(r, c2); }))
                    return false;
            }
            for (const Rec& r : inb)
                if (to_cluster(r, c)) local_in.push_back(r);
        }
        for (uint16_t c1 : T.clusters_of[s])
            if (ce(c1, c) && !recv_recs(leader(T, c1), 1, local_in)) return false;
        // gather: the root site's other leaders wait until the root's leader has everything, so
        // they relay spread WAN segments meanwhile (step 5: an empty release)
        if (a.kind == Coll::kGather && s == T.site_of[rc]) return release_site(g, s, cc);
        return true;
    }
};

}  // namespace

bool hier_move(GroupImpl& g, const MoveArgs& a) {
    const Topology& T = g.topo();
    const uint32_t P = T.ranks();
    ClusterLocal& L = g.local();
    const bool rooted = a.kind == Coll::kGather || a.kind == Coll::kScatter;
    Engine e{g, a, T, rooted ? T.cluster_of_rank(a.root) : uint16_t{0xFFFF}, {}};
    // this thread's records
    std::vector<Rec> mine;
    std::vector<size_t> off = offsets(a.kind == Coll::kAlltoall ? a.send_bytes : a.all_bytes);
    size_t expect = 0;  // records this thread must receive
    switch (a.kind) {
        case Coll::kGather:
            mine.push_back(Rec{g.me, a.root, static_cast<uint32_t>(a.all_bytes[g.me]), a.in});
            expect = g.me == a.root ? P : 0;
            break;
        case Coll::kScatter:
            if (g.me == a.root)
                for (uint32_t r = 0; r < P; ++r) mine.push_back(Rec{g.me, r, static_cast<uint32_t>(a.all_bytes[r]), a.in + off[r]});
            expect = 1;
            break;
        case Coll::kAllgather:
            mine.push_back(Rec{g.me, kAllRanks, static_cast<uint32_t>(a.all_bytes[g.me]), a.in});
            expect = P;
            break;
        default:
            for (uint32_t r = 0; r < P; ++r) mine.push_back(Rec{g.me, r, static_cast<uint32_t>(a.send_bytes[r]), a.in + off[r]});
            expect = P;
    }
    if (!begin_local(g, a.in, a.out, &mine)) return false;
    if (g.thread == 0) {
        L.recs.clear();
        if (!e.leader_part(L.recs)) return false;
        g.items_audit();
    }
    if (!g.local_sync()) return false;
    // deliver
    const std::vector<size_t> ro = offsets(a.kind == Coll::kAlltoall ? a.recv_bytes : a.all_bytes);
    size_t got = 0;
    std::string bad;
    for (const Rec& r : L.recs) {
        if (r.dst != kAllRanks && r.dst != g.me) continue;
        const size_t want = a.kind == Coll::kAlltoall ? a.recv_bytes[r.src] : a.kind == Coll::kScatter ? a.all_bytes[g.me] : a.all_bytes[r.src];
        if (r.len != want) {
            if (bad.empty())
                bad = g.who(r.src) + " sent " + std::to_string(r.len) + " bytes where " + std::to_string(want) +
                      " were expected (mismatched sizes or counts)";
            continue;
        }
        uint8_t* to = a.kind == Coll::kScatter ? a.out : a.out + ro[r.src];
        if (r.len) std::memcpy(to, r.data, r.len);
        if (T.cluster_of_rank(r.src) == g.cluster) g.count_shm(r.len);
        ++got;
    }
    const bool ok = g.local_sync();
    if (g.thread == 0)
        for (auto& m : e.keep) g.recycle(std::move(m));
    if (!bad.empty()) return g.fail(bad);
    if (ok && got != expect)
        return g.fail("received " + std::to_string(got) + " blocks where " + std::to_string(expect) + " were expected");
    return ok;
}

// --- reductions -----------------------------------------------------------------------------------

namespace {

// The coordinator's exchange of site partials for allreduce and reduce; result in `res`.
bool sites_combine(GroupImpl& g, const RedArgs& a, std::vector<uint8_t>& site_part, std::vector<uint8_t>& res,
                   uint16_t rc) {
    const Topology& T = g.topo();
    const uint16_t s = T.site_of[g.cluster];
    const uint16_t target_site = a.kind == Coll::kReduce ? T.site_of[rc] : 0xFFFF;
    if (a.kind == Coll::kReduce && s != target_site)
        return g.send_wan(leader(T, coord(T, target_site, rc)), 3, site_part.data(), site_part.size());
    if (a.kind == Coll::kAllreduce)
        for (uint16_t s2 = 0; s2 < T.sites; ++s2)
            if (s2 != s && !g.send_wan(leader(T, coord(T, s2, rc)), 3, site_part.data(), site_part.size())) return false;
    bool first = true;
    std::vector<uint8_t> m;
    for (uint16_t s2 = 0; s2 < T.sites; ++s2) {  // site order: every coordinator computes the same bits
        const uint8_t* p = site_part.data();
        if (s2 != s) {
            const uint32_t from = leader(T, coord(T, s2, rc));
            if (!g.recv(from, 3, m) || !g.want_len(from, m.size(), a.bytes)) return false;
            g.item_arrived(s2, s2);  // site s2's partial
            p = m.data();
        }
        if (first) res.assign(p, p + a.bytes);
        else combine(a.r, res.data(), p, a.bytes);
        first = false;
    }
    g.recycle(std::move(m));
    return true;
}

// Scan, on the leader of the site's coordinating cluster: it gathers the partials of its site's
// clusters, swaps with every other site the partials that site's clusters need (those of clusters
// before its last one), and sends each of its clusters' leaders the exclusive prefix of the
// clusters before it; its own prefix goes to `x`.
bool coordinator_scan_prefixes(GroupImpl& g, const RedArgs& a, const std::vector<uint8_t>& part, uint16_t rc,
                               std::vector<uint8_t>& x, std::vector<uint8_t>& m) {
    const Topology& T = g.topo();
    const uint16_t c = g.cluster, s = T.site_of[c];
    const size_t B = a.bytes;
    std::vector<std::vector<uint8_t>> pc(T.clusters);  // partials known here, by cluster
    pc[c] = part;
    for (uint16_t c1 : T.clusters_of[s])
        if (c1 != c) {
            if (!g.recv(leader(T, c1), 1, pc[c1]) || !g.want_len(leader(T, c1), pc[c1].size(), B)) return false;
        }
    for (uint16_t s2 = 0; s2 < T.sites; ++s2) {
        if (s2 == s) continue;
        std::vector<uint8_t> out;
        bool any = false;
        for (uint16_t c1 : T.clusters_of[s])
            if (c1 < T.clusters_of[s2].back()) {
                out.insert(out.end(), pc[c1].begin(), pc[c1].end());
                any = true;
            }
        if (any && !g.send_wan(leader(T, coord(T, s2, rc)), 3, out.data(), out.size())) return false;
    }
    for (uint16_t s2 = 0; s2 < T.sites; ++s2) {
        if (s2 == s) continue;
        std::vector<uint16_t> from;
        for (uint16_t c1 : T.clusters_of[s2])
            if (c1 < T.clusters_of[s].back()) from.push_back(c1);
        if (from.empty()) continue;
        const uint32_t src = leader(T, coord(T, s2, rc));
        if (!g.recv(src, 3, m) || !g.want_len(src, m.size(), from.size() * B)) return false;
        for (size_t i = 0; i < from.size(); ++i) {
            pc[from[i]].assign(m.begin() + i * B, m.begin() + (i + 1) * B);
            g.item_arrived(s2, from[i]);  // cluster from[i]'s partial
        }
    }
    for (uint16_t c2 : T.clusters_of[s]) {
        std::vector<uint8_t> xp;
        for (uint16_t k = 0; k < c2; ++k) {
            if (xp.empty()) xp = pc[k];
            else combine(a.r, xp.data(), pc[k].data(), B);
        }
        if (c2 == c) x = xp;
        else if (!g.send(leader(T, c2), 4, xp.data(), xp.size())) return false;
    }
    return true;
}

// The cluster's partial: its threads' inputs combined in thread order (leader_scan, leader_reduce).
std::vector<uint8_t> cluster_partial(const RedArgs& a, const ClusterLocal& L, uint16_t threads) {
    const auto* first = static_cast<const uint8_t*>(L.slot[0].in);
    std::vector<uint8_t> part(first, first + a.bytes);
    for (uint16_t t = 1; t < threads; ++t) combine(a.r, part.data(), L.slot[t].in, a.bytes);
    return part;
}

// Scan, on a cluster's leader: the local partial, then the exclusive prefix of the clusters before
// this one, then every thread's inclusive result, thread after thread, into `res`.
bool leader_scan(GroupImpl& g, const RedArgs& a, uint16_t rc, std::vector<uint8_t>& res, std::vector<uint8_t>& m) {
    const Topology& T = g.topo();
    ClusterLocal& L = g.local();
    const uint16_t c = g.cluster, s = T.site_of[c], cc = coord(T, s, rc);
    const size_t B = a.bytes;
    std::vector<uint8_t> part = cluster_partial(a, L, T.threads);
    std::vector<uint8_t> x;  // exclusive prefix (empty: none, cluster 0)
    if (c != cc) {
        if (!g.send(leader(T, cc), 1, part.data(), B) || !g.recv(leader(T, cc), 4, x)) return false;
        if (!x.empty() && !g.want_len(leader(T, cc), x.size(), B)) return false;
    } else if (!coordinator_scan_prefixes(g, a, part, rc, x, m)) {
        return false;
    }
    res.resize(size_t{T.threads} * B);
    for (uint16_t t = 0; t < T.threads; ++t) {
        uint8_t* r = res.data() + t * B;
        const auto* in = static_cast<const uint8_t*>(L.slot[t].in);
        if (t == 0) {
            if (x.empty()) std::memcpy(r, in, B);
            else {
                std::memcpy(r, x.data(), B);
                combine(a.r, r, in, B);
            }
        } else {
            std::memcpy(r, r - B, B);
            combine(a.r, r, in, B);
        }
    }
    return true;
}

// Reduce-scatter, on a site's coordinator holding its site partial `sp`: to each other site the
// blocks of its ranks, from each the blocks of ours; combined in site order, then each of the
// site's clusters gets its own ranks' blocks (this cluster's into `res`).
bool coordinator_reduce_scatter(GroupImpl& g, const RedArgs& a, const std::vector<uint8_t>& sp, uint16_t rc,
                                std::vector<uint8_t>& res, std::vector<uint8_t>& m) {
    const Topology& T = g.topo();
    const uint16_t c = g.cluster, s = T.site_of[c];
    std::vector<size_t> off(T.ranks() + 1, 0);
    for (uint32_t r = 0; r < T.ranks(); ++r) off[r + 1] = off[r] + a.block_bytes[r];
    auto range = [&](uint16_t cl) { return std::pair<size_t, size_t>{off[leader(T, cl)], off[leader(T, cl) + T.threads]}; };
    auto site_bytes = [&](const std::vector<uint8_t>& v, uint16_t s2) {
        std::vector<uint8_t> o;
        for (uint16_t c2 : T.clusters_of[s2]) {
            auto [lo, hi] = range(c2);
            o.insert(o.end(), v.begin() + lo, v.begin() + hi);
        }
        return o;
    };
    for (uint16_t s2 = 0; s2 < T.sites; ++s2)
        if (s2 != s) {
            const std::vector<uint8_t> o = site_bytes(sp, s2);
            if (!g.send_wan(leader(T, coord(T, s2, rc)), 3, o.data(), o.size())) return false;
        }
    const std::vector<uint8_t> own = site_bytes(sp, s);
    std::vector<uint8_t> acc;
    for (uint16_t s2 = 0; s2 < T.sites; ++s2) {
        const uint8_t* p = own.data();
        if (s2 != s) {
            const uint32_t from = leader(T, coord(T, s2, rc));
            if (!g.recv(from, 3, m) || !g.want_len(from, m.size(), own.size())) return false;
            g.item_arrived(s2, s2);  // site s2's partial of this site's blocks
            p = m.data();
        }
        if (s2 == 0) acc.assign(p, p + own.size());
        else combine(a.r, acc.data(), p, own.size());
    }
    size_t pos = 0;
    for (uint16_t c2 : T.clusters_of[s]) {
        auto [lo, hi] = range(c2);
        if (c2 == c) res.assign(acc.begin() + pos, acc.begin() + pos + (hi - lo));
        else if (!g.send(leader(T, c2), 4, acc.data() + pos, hi - lo)) return false;
        pos += hi - lo;
    }
    return true;
}

// Reduce, allreduce and reduce-scatter, on a cluster's leader: the cluster partial goes to the
// site's coordinator, which combines the site partial (clusters in ascending order), exchanges
// with the other sites and hands each of its clusters its result; this cluster's goes to `res`.
bool leader_reduce(GroupImpl& g, const RedArgs& a, uint16_t rc, std::vector<uint8_t>& res, std::vector<uint8_t>& m) {
    const Topology& T = g.topo();
    ClusterLocal& L = g.local();
    const uint16_t c = g.cluster, s = T.site_of[c], cc = coord(T, s, rc);
    const size_t B = a.bytes;
    std::vector<uint8_t> part = cluster_partial(a, L, T.threads);
    g.count_shm(size_t{T.threads - 1u} * B);
    if (c != cc) {
        if (!g.send(leader(T, cc), 1, part.data(), B)) return false;
        if (a.kind == Coll::kReduce && s == T.site_of[rc] && !release_site(g, s, cc)) return false;
        if (a.kind == Coll::kAllreduce && (!g.recv(leader(T, cc), 4, res) || !g.want_len(leader(T, cc), res.size(), B)))
            return false;
        if (a.kind == Coll::kReduceScatter && !g.recv(leader(T, cc), 4, res)) return false;
        return true;
    }
    // the site partial, clusters in ascending order
    std::vector<uint8_t> sp;
    for (uint16_t c1 : T.clusters_of[s]) {
        const uint8_t* p = part.data();
        if (c1 != c) {
            if (!g.recv(leader(T, c1), 1, m) || !g.want_len(leader(T, c1), m.size(), B)) return false;
            p = m.data();
        }
        if (sp.empty()) sp.assign(p, p + B);
        else combine(a.r, sp.data(), p, B);
    }
    if (a.kind == Coll::kReduceScatter) return coordinator_reduce_scatter(g, a, sp, rc, res, m);
    if (!sites_combine(g, a, sp, res, rc)) return false;
    if (a.kind == Coll::kReduce && s == T.site_of[rc] && !release_site(g, s, cc)) return false;
    if (a.kind == Coll::kAllreduce)
        for (uint16_t c2 : T.clusters_of[s])
            if (c2 != c && !g.send(leader(T, c2), 4, res.data(), B)) return false;
    return true;
}

// Each thread takes its own result from the leader's buffer (L.data, L.len).
bool copy_own_result(GroupImpl& g, const RedArgs& a) {
    const Topology& T = g.topo();
    const ClusterLocal& L = g.local();
    size_t from = 0, len = 0;
    switch (a.kind) {
        case Coll::kReduce: len = g.me == a.root ? a.bytes : 0; break;
        case Coll::kAllreduce: len = a.bytes; break;
        case Coll::kScan:
            from = size_t{g.thread} * a.bytes;
            len = a.bytes;
            break;
        default:
            for (uint32_t r = leader(T, g.cluster); r < g.me; ++r) from += a.block_bytes[r];
            len = a.block_bytes[g.me];
    }
    bool ok = true;
    if (len) {
        if (from + len > L.len) ok = g.fail("the cluster's result holds " + std::to_string(L.len) + " bytes, too few");
        else {
            std::memcpy(a.out, L.data + from, len);
            g.count_shm(len);
        }
    }
    return ok;
}

}  // namespace

bool hier_reduce(GroupImpl& g, const RedArgs& a) {
    const Topology& T = g.topo();
    ClusterLocal& L = g.local();
    const uint16_t rc = a.kind == Coll::kReduce ? T.cluster_of_rank(a.root) : uint16_t{0xFFFF};
    if (!begin_local(g, a.in, a.out)) return false;
    std::vector<uint8_t> res, m;  // res: the cluster's result, read by every thread until the last sync
    if (g.thread == 0) {
        const bool led = a.kind == Coll::kScan ? leader_scan(g, a, rc, res, m) : leader_reduce(g, a, rc, res, m);
        if (!led) return false;
        L.data = res.data();
        L.len = res.size();
        g.items_audit();
    }
    if (!g.local_sync()) return false;
    const bool ok = copy_own_result(g, a);
    return g.local_sync() && ok;
}

}  // namespace iccs::group
