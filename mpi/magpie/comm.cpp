// comm.cpp: the library's view of a communicator, cached on it as an attribute (MPI's own way to
// hang data on a communicator: it goes when the communicator is freed, and a duplicate starts
// without it, so a dup or split gets its own view and its own private duplicate).
#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include "magpie.hpp"

namespace iccs::magpie {

namespace {

int g_keyval = MPI_KEYVAL_INVALID;
std::mutex g_mutex;                 // g_live and the keyval
std::set<Comm*> g_live;             // every view not freed yet (freed at MPI_Finalize)

// Not copied to duplicates (MPI_COMM_NULL_COPY_FN), freed with the communicator.
int delete_view(MPI_Comm, int, void* attr, void*) {
    Comm* c = static_cast<Comm*>(attr);
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        g_live.erase(c);
    }
    if (c->dup_req != MPI_REQUEST_NULL) {  // the duplicate never completed (a failed first call)
        PMPI_Request_free(&c->dup_req);
        c->priv = MPI_COMM_NULL;
    }
    if (c->priv != MPI_COMM_NULL) PMPI_Comm_free(&c->priv);
    delete c;
    return MPI_SUCCESS;
}

int keyval() {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_keyval == MPI_KEYVAL_INVALID)
        PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_view, &g_keyval, nullptr);
    return g_keyval;
}

// A view that passes every call through (kept so the reason is computed once).
Comm* pass_view(MPI_Comm user, Pass why) {
    Comm* c = new Comm;
    c->user = user;
    c->passes = true;
    c->pass_reason = why;
    return c;
}

}  // namespace

int Comm::leader(uint32_t cluster, int root) const {
    if (root >= 0 && cluster_of[root] == cluster) return root;
    return cluster_ranks[cluster][0];
}

int Comm::coord(uint32_t site, int root) const {
    if (root >= 0 && site_of[root] == site) return root;
    return cluster_ranks[site_clusters[site][0]][0];
}

std::vector<uint32_t> Comm::clusters_for(uint32_t site, int root) const {
    std::vector<uint32_t> out = site_clusters[site];
    if (root >= 0 && site_of[root] == site) {
        const auto it = std::find(out.begin(), out.end(), cluster_of[root]);
        std::rotate(out.begin(), it, it + 1);  // the root's cluster first, the rest in order
    }
    return out;
}

Comm* comm_of(MPI_Comm user, Pass& why) {
    const int kv = keyval();
    void* attr = nullptr;
    int found = 0;
    if (PMPI_Comm_get_attr(user, kv, &attr, &found) == MPI_SUCCESS && found) {
        Comm* c = static_cast<Comm*>(attr);
        if (c->passes) {
            why = c->pass_reason;
            return nullptr;
        }
        return c;
    }
    Comm* view = nullptr;
    int inter = 0;
    PMPI_Comm_test_inter(user, &inter);
    const auto& places = world_places();
    if (inter) {
        view = pass_view(user, Pass::kIntercomm);
    } else if (places.empty()) {
        view = pass_view(user, Pass::kUnplaced);
    } else {
        MPI_Group group, world;
        PMPI_Comm_group(user, &group);
        PMPI_Comm_group(MPI_COMM_WORLD, &world);
        int n = 0;
        PMPI_Group_size(group, &n);
        std::vector<int> ranks(n), in_world(n);
        for (int i = 0; i < n; ++i) ranks[i] = i;
        PMPI_Group_translate_ranks(group, n, ranks.data(), world, in_world.data());
        PMPI_Group_free(&group);
        PMPI_Group_free(&world);
        if (std::any_of(in_world.begin(), in_world.end(), [](int w) { return w == MPI_UNDEFINED; })) {
            view = pass_view(user, Pass::kOutsideWorld);
        } else {
            Comm* c = new Comm;
            c->user = user;
            c->n = n;
            PMPI_Comm_rank(user, &c->me);
            c->site_of.resize(n);
            c->cluster_of.resize(n);
            std::map<uint32_t, uint32_t> site_index, cluster_index;  // placement id -> dense (by lowest rank)
            for (int r = 0; r < n; ++r) {
                const Place& p = places[in_world[r]];
                const auto s = site_index.emplace(p.site, static_cast<uint32_t>(site_index.size()));
                if (s.second) {
                    c->site_id.push_back(p.site);
                    c->site_clusters.emplace_back();
                    c->site_ranks.emplace_back();
                }
                const auto k = cluster_index.emplace(p.cluster, static_cast<uint32_t>(cluster_index.size()));
                if (k.second) {
                    c->cluster_ranks.emplace_back();
                    c->cluster_site.push_back(s.first->second);
                    c->site_clusters[s.first->second].push_back(k.first->second);
                }
                c->site_of[r] = s.first->second;
                c->cluster_of[r] = k.first->second;
                c->cluster_ranks[k.first->second].push_back(r);
                c->site_ranks[s.first->second].push_back(r);
            }
            // Every message of the library travels on a duplicate: it can never match the
            // program's own point-to-point receives (MPI_ANY_TAG, MPI_ANY_SOURCE included).
            // Nonblocking, so that the first call waits for it under the time-out (Call::ready).
            PMPI_Comm_idup(user, &c->priv, &c->dup_req);
            view = c;
        }
    }
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        g_live.insert(view);
    }
    PMPI_Comm_set_attr(user, kv, view);
    if (view->passes) {
        why = view->pass_reason;
        return nullptr;
    }
    return view;
}

void free_comms() {
    // Deleting the attribute runs delete_view (which frees the private duplicate); views of
    // communicators the program freed are gone already.
    std::vector<Comm*> live;
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        live.assign(g_live.begin(), g_live.end());
    }
    for (Comm* c : live) PMPI_Comm_delete_attr(c->user, g_keyval);
    if (g_keyval != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&g_keyval);
}

}  // namespace iccs::magpie
