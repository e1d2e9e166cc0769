// scan.cpp: MPI_Scan and MPI_Exscan.
//
// A rank's result combines the inputs of every rank before it (and its own, for scan), in rank
// order. A cluster's leader gathers its ranks' inputs (shared memory) and computes their prefixes
// within each run of consecutive ranks of the cluster; a site's coordinator combines the runs of
// its clusters into the runs of the site (rows of consecutive ranks in the site) and sends each
// such partial once to every site that has a rank after it (the wide-area step, one latency);
// with everything before each of its cluster runs at hand, it sends each leader what precedes
// that leader's runs, and the leader finishes its ranks' results.
#include <algorithm>

#include "magpie.hpp"

namespace iccs::magpie {

namespace {

struct Item {
    int first = 0;
    const char* at = nullptr;
    int cluster_run = -1;  // index of an own cluster run, or -1 for another site's run
};

// acc = acc op x (acc holds the earlier ranks); acc empty: acc = x.
bool accumulate(TypedBuf& acc, bool& have, const char* x, const Reduction& red, Call& call) {
    TypedBuf next(red.t, red.count);
    if (copy_typed(x, next.base(), red.count, red.t) != MPI_SUCCESS) return call.fail(MPI_ERR_TYPE, "copy failed");
    if (have && red.apply(acc.base(), next.base(), red.count) != MPI_SUCCESS) return call.fail(MPI_ERR_OP, "the reduction failed");
    acc = std::move(next);
    have = true;
    return true;
}

}  // namespace

int scan(Call& call, const void* in, void* out, const Reduction& red, bool exclusive) {
    const Comm& c = call.comm();
    const int me = c.me, count = red.count;
    const uint64_t m = uint64_t(count) * uint64_t(red.t.size);
    call.add_bytes(m);
    if (count == 0) return MPI_SUCCESS;
    if (me == 0) call.add_wan_min(wan_min_scan(c, m));
    const uint32_t my_site = c.my_site(), my_cluster = c.my_cluster();
    const int leader = c.leader(my_cluster), coord = c.coord(my_site);
    if (me != leader) {  // rank 0 leads its cluster, so every member has a result to receive
        call.send(in, count, red.t.type, leader);
        if (!call.wait_all()) return call.error();
        call.recv(out, count, red.t.type, leader);
        return call.wait_all() ? MPI_SUCCESS : call.error();
    }

    // Leader: its ranks' inputs, and inclusive prefixes within each cluster run: pre[i] =
    // pre[i-1] op x[i], computed in x[i]'s own buffer.
    const auto& members = c.cluster_ranks[my_cluster];
    std::vector<TypedBuf> pre;
    if (!cluster_inputs(call, in, red, pre)) return call.error();
    const auto cruns = runs_of(members, true);
    std::vector<size_t> run_last(cruns.size());  // index in members of each run's last rank
    for (size_t k = 0, i = 0; k < cruns.size(); ++k) {
        for (; members[i] < cruns[k].second; ++i)
            if (red.apply(pre[i].base(), pre[i + 1].base(), count) != MPI_SUCCESS) return call.raise(MPI_ERR_OP, "the reduction failed");
        run_last[k] = i++;
    }

    // What precedes each of this cluster's runs (empty for a run starting at rank 0).
    std::vector<TypedBuf> before(cruns.size());
    if (me != coord) {
        for (size_t k = 0; k < cruns.size(); ++k) call.send(pre[run_last[k]].base(), count, red.t.type, coord);
        if (!call.wait_all()) return call.error();
        for (size_t k = 0; k < cruns.size(); ++k)
            if (cruns[k].first > 0) {
                before[k] = TypedBuf(red.t, count);
                call.recv(before[k].base(), count, red.t.type, coord);
            }
        if (!call.wait_all()) return call.error();
    } else {
        // Coordinator: the runs of every cluster of the site ...
        struct ClusterRun {
            int first = 0, last = 0;
            int leader = 0;
            size_t index = 0;  // among that leader's runs
            const char* at = nullptr;
            TypedBuf own;
        };
        std::vector<ClusterRun> site_cruns;
        for (size_t k = 0; k < cruns.size(); ++k)
            site_cruns.push_back(ClusterRun{cruns[k].first, cruns[k].second, me, k, pre[run_last[k]].base(), {}});
        for (uint32_t cl : c.site_clusters[my_site]) {
            if (cl == my_cluster) continue;
            const auto runs = runs_of(c.cluster_ranks[cl], true);
            for (size_t k = 0; k < runs.size(); ++k) {
                ClusterRun r{runs[k].first, runs[k].second, c.leader(cl), k, nullptr, TypedBuf(red.t, count)};
                call.recv(r.own.base(), count, red.t.type, r.leader);
                r.at = r.own.base();
                site_cruns.push_back(std::move(r));
            }
        }
        if (!call.wait_all()) return call.error();
        std::sort(site_cruns.begin(), site_cruns.end(), [](const ClusterRun& a, const ClusterRun& b) { return a.first < b.first; });
        // ... combined into the site's runs, each sent once to every site with a rank after it.
        const auto sruns = runs_of(c.site_ranks[my_site], true);
        std::vector<TypedBuf> spart(sruns.size());
        for (size_t k = 0; k < sruns.size(); ++k) {
            bool have = false;
            for (const ClusterRun& r : site_cruns)
                if (r.first >= sruns[k].first && r.last <= sruns[k].second && !accumulate(spart[k], have, r.at, red, call))
                    return call.error();
        }
        for (uint32_t t = 0; t < c.sites(); ++t) {
            if (t == my_site) continue;
            for (size_t k = 0; k < sruns.size(); ++k)
                if (sruns[k].first < c.site_ranks[t].back()) call.send(spart[k].base(), count, red.t.type, c.coord(t));
        }
        std::vector<Item> items;
        std::vector<TypedBuf> got;
        got.reserve(c.n);
        const int my_last = c.site_ranks[my_site].back();
        for (uint32_t s = 0; s < c.sites(); ++s) {
            if (s == my_site) continue;
            for (const auto& run : runs_of(c.site_ranks[s], true))
                if (run.first < my_last) {
                    got.emplace_back(red.t, count);
                    call.recv(got.back().base(), count, red.t.type, c.coord(s));
                    items.push_back(Item{run.first, got.back().base(), -1});
                }
        }
        if (!call.wait_all()) return call.error();
        for (size_t k = 0; k < site_cruns.size(); ++k) items.push_back(Item{site_cruns[k].first, site_cruns[k].at, int(k)});
        std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.first < b.first; });
        // Walk in rank order: before each own cluster run, what precedes it goes to its leader.
        TypedBuf acc;
        bool have = false;
        std::vector<TypedBuf> sent;
        sent.reserve(site_cruns.size());
        for (const Item& it : items) {
            if (it.cluster_run >= 0 && have) {
                const ClusterRun& r = site_cruns[it.cluster_run];
                TypedBuf copy(red.t, count);
                copy_typed(acc.base(), copy.base(), count, red.t);
                if (r.leader == me) {
                    before[r.index] = std::move(copy);
                } else {
                    sent.push_back(std::move(copy));
                    call.send(sent.back().base(), count, red.t.type, r.leader);
                }
            }
            if (!accumulate(acc, have, it.at, red, call)) return call.error();
        }
        if (!call.wait_all()) return call.error();
    }

    // Each rank's result: before(run) op its prefix within the run (exscan: the prefix of the
    // rank before it in the run, or just before(run) for the run's first rank).
    std::vector<TypedBuf> results;
    results.reserve(members.size());
    for (size_t k = 0, i = 0; k < cruns.size(); ++k) {
        const bool has_before = cruns[k].first > 0;
        for (size_t first_i = i; i <= run_last[k]; ++i) {
            const char* own = nullptr;  // the part from this run
            if (!exclusive)
                own = pre[i].base();
            else if (i > first_i)
                own = pre[i - 1].base();
            if (!own && !has_before) continue;  // exscan on rank 0: no result
            TypedBuf res(red.t, count);
            if (own) {
                copy_typed(own, res.base(), count, red.t);
                if (has_before && red.apply(before[k].base(), res.base(), count) != MPI_SUCCESS)
                    return call.raise(MPI_ERR_OP, "the reduction failed");
            } else {
                copy_typed(before[k].base(), res.base(), count, red.t);
            }
            if (members[i] == me) {
                copy_typed(res.base(), out, count, red.t);
            } else {
                results.push_back(std::move(res));
                call.send(results.back().base(), count, red.t.type, members[i]);
            }
        }
    }
    return call.wait_all() ? MPI_SUCCESS : call.error();
}

}  // namespace iccs::magpie
