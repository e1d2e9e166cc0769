// apps/unstructured/unstructured.cpp: edge-based computation over an unstructured mesh (SPLASH
// style, PARMACS).
//
// The mesh is generated deterministically: random points in the unit square (fixed seed),
// numbered by x so that a contiguous block of nodes is a vertical strip, joined by the E shortest
// distinct pairs (E exactly as asked: 17377 edges on 2800 nodes at paper size). Every node carries
// 4 values; every edge (a, b), a < b, carries a flux, a function of both endpoints' values (a
// linear diffusion term plus a non-linear one), that leaves a and enters b. An iteration sums the
// fluxes into a residual per node, then updates every node: u += dt * residual / volume; the
// residual norm is reduced under a lock.
//
// Partitioning is owner-computes: nodes are split in contiguous blocks (strips), one a thread; a
// thread walks the edges incident to its own nodes and accumulates into its own nodes only, so no
// accumulation needs a lock and all writes are local; an edge cut by the partition is computed by
// both owners (the same flux, always oriented from its smaller endpoint, so both agree to the
// bit). Reads of the other strip's boundary values are the communication; a barrier separates the
// flux phase from the update phase. Checked against the plain sequential edge loop
// (res[a] -= f, res[b] += f over all edges in order).
#include "parmacs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "app_common.hpp"

MAIN_ENV

namespace {

constexpr int kVars = 4;
constexpr int kMaxIters = 16;

struct Edge {
    int a, b;  // a < b
    double w;  // coupling: 1 / length
};

struct GlobalMemory {
    BARDEC(barrier);
    LOCKDEC(norm_lock);
    double norm2[kMaxIters];  // sum of squared residuals of each iteration
    unsigned long start, end;
};

GlobalMemory* gl;
double* u;         // nnode x kVars
double* res;       // nnode x kVars
double* vol;       // nnode
Edge* edges;       // nedge, sorted by (a, b)
int* adj_start;    // nnode + 1: node i's incident edges are adj_edge[adj_start[i] .. adj_start[i+1])
int* adj_edge;     // 2 * nedge edge ids, in increasing order per node
long nnode, nedge;
int iters;
double dt;
int nprocs;

struct Mesh {
    std::vector<double> x, y;
    std::vector<Edge> edges;
};

Mesh make_mesh(long n, long e) {
    apps::Rng rng(0x3e5d);
    std::vector<std::pair<double, double>> pts(n);
    for (auto& p : pts) {
        p.first = rng.uniform();
        p.second = rng.uniform();
    }
    std::sort(pts.begin(), pts.end());  // by x: node blocks are strips
    Mesh m;
    for (auto& p : pts) {
        m.x.push_back(p.first);
        m.y.push_back(p.second);
    }
    // Candidate pairs within radius r from a grid of r x r bins; r grows until there are enough.
    double r = std::sqrt(2.0 * static_cast<double>(e) / (3.14159265358979323846 * static_cast<double>(n * n))) * 1.3;
    std::vector<std::tuple<double, int, int>> cand;
    for (;;) {
        cand.clear();
        long g = std::max(1L, static_cast<long>(1.0 / r));
        std::vector<std::vector<int>> bins(g * g);
        auto bin_of = [&](double v) { return std::min(g - 1, static_cast<long>(v * static_cast<double>(g))); };
        for (long i = 0; i < n; ++i) bins[bin_of(m.x[i]) * g + bin_of(m.y[i])].push_back(static_cast<int>(i));
        for (long i = 0; i < n; ++i) {
            long bx = bin_of(m.x[i]), by = bin_of(m.y[i]);
            for (long dx = -1; dx <= 1; ++dx)
                for (long dy = -1; dy <= 1; ++dy) {
                    long cx = bx + dx, cy = by + dy;
                    if (cx < 0 || cy < 0 || cx >= g || cy >= g) continue;
                    for (int j : bins[cx * g + cy]) {
                        if (j <= i) continue;
                        double d = std::hypot(m.x[i] - m.x[j], m.y[i] - m.y[j]);
                        if (d < r) cand.emplace_back(d, static_cast<int>(i), j);
                    }
                }
        }
        if (static_cast<long>(cand.size()) >= e) break;
        r *= 1.5;
    }
    std::sort(cand.begin(), cand.end());  // by length, ties by (i, j): deterministic
    for (long k = 0; k < e; ++k) {
        auto [d, i, j] = cand[k];
        m.edges.push_back(Edge{i, j, 1.0 / d});
    }
    std::sort(m.edges.begin(), m.edges.end(), [](const Edge& p, const Edge& q) {
        return p.a != q.a ? p.a < q.a : p.b < q.b;
    });
    return m;
}

void init_values(double* v, long n) {
    apps::Rng rng(0x5eed);
    for (long i = 0; i < n * kVars; ++i) v[i] = rng.uniform(0.5, 1.5);
}

// Flux of edge e out of its first endpoint a into b, for each of the kVars values.
inline void flux(const Edge& e, const double* values, double* f) {
    const double* ua = values + e.a * kVars;
    const double* ub = values + e.b * kVars;
    for (int c = 0; c < kVars; ++c) {
        int c2 = (c + 1) % kVars;
        f[c] = e.w * (ua[c] - ub[c]) + 0.5 * e.w * (ua[c] * ua[c2] - ub[c] * ub[c2]);
    }
}

// Owner-computes residual of nodes [lo, hi): every incident edge, in edge order.
void residual_owned(long lo, long hi) {
    for (long i = lo; i < hi; ++i) {
        double r[kVars] = {0, 0, 0, 0};
        for (int k = adj_start[i]; k < adj_start[i + 1]; ++k) {
            const Edge& e = edges[adj_edge[k]];
            double f[kVars];
            flux(e, u, f);
            for (int c = 0; c < kVars; ++c) r[c] += e.a == i ? -f[c] : f[c];
        }
        for (int c = 0; c < kVars; ++c) res[i * kVars + c] = r[c];
    }
}

double update(double* values, const double* r, const double* volume, long lo, long hi) {
    double norm2 = 0;
    for (long i = lo; i < hi; ++i)
        for (int c = 0; c < kVars; ++c) {
            values[i * kVars + c] += dt * r[i * kVars + c] / volume[i];
            norm2 += r[i * kVars + c] * r[i * kVars + c];
        }
    return norm2;
}

}  // namespace

void Worker(void) {
    int pid;
    GET_PID(pid);
    apps::Range r = apps::block_range(nnode, nprocs, pid);

    BARRIER(gl->barrier, nprocs);
    if (pid == 0) {
        SPLASH3_ROI_BEGIN();
        CLOCK(gl->start);
    }
    BARRIER(gl->barrier, nprocs);  // no thread starts before the clock does
    for (int t = 0; t < iters; ++t) {
        residual_owned(r.lo, r.hi);
        BARRIER(gl->barrier, nprocs);  // every flux read the old values
        double n2 = update(u, res, vol, r.lo, r.hi);
        LOCK(gl->norm_lock);
        gl->norm2[t] += n2;
        UNLOCK(gl->norm_lock);
        BARRIER(gl->barrier, nprocs);  // values final before the next iteration
    }
    if (pid == 0) {
        CLOCK(gl->end);
        SPLASH3_ROI_END();
    }
}

int main(int argc, char** argv) {
    MAIN_INITENV();
    apps::Options opt = apps::parse_args(
        "unstructured", "Edge-based computation over a generated unstructured mesh, owner-computes by node strips.",
        argc, argv);
    nprocs = opt.nprocs;
    bool paper = opt.size == apps::Size::paper;
    nnode = paper ? 2800 : 400;
    nedge = paper ? 17377 : 2482;  // test: the paper's 6.2 edges per node
    iters = paper ? 1 : 2;

    Mesh mesh = make_mesh(nnode, nedge);

    gl = static_cast<GlobalMemory*>(G_MALLOC_F(sizeof(GlobalMemory)));
    BARINIT(gl->barrier, nprocs);
    LOCKINIT(gl->norm_lock);
    for (int t = 0; t < kMaxIters; ++t) gl->norm2[t] = 0;
    u = static_cast<double*>(G_MALLOC_F(sizeof(double) * nnode * kVars));
    res = static_cast<double*>(G_MALLOC_F(sizeof(double) * nnode * kVars));
    vol = static_cast<double*>(G_MALLOC_F(sizeof(double) * nnode));
    edges = static_cast<Edge*>(G_MALLOC_F(sizeof(Edge) * nedge));
    adj_start = static_cast<int*>(G_MALLOC_F(sizeof(int) * (nnode + 1)));
    adj_edge = static_cast<int*>(G_MALLOC_F(sizeof(int) * 2 * nedge));
    init_values(u, nnode);
    for (long i = 0; i <= nnode; ++i) adj_start[i] = 0;
    for (long i = 0; i < nnode; ++i) vol[i] = 0.01;
    double max_wsum_per_vol = 0;
    {
        std::vector<double> wsum(nnode, 0.0);
        for (long k = 0; k < nedge; ++k) {
            edges[k] = mesh.edges[k];
            adj_start[edges[k].a + 1]++;
            adj_start[edges[k].b + 1]++;
            // A node's volume: half the length of its edges (a dual-cell stand-in).
            vol[edges[k].a] += 0.5 / edges[k].w;
            vol[edges[k].b] += 0.5 / edges[k].w;
            wsum[edges[k].a] += edges[k].w;
            wsum[edges[k].b] += edges[k].w;
        }
        for (long i = 0; i < nnode; ++i) adj_start[i + 1] += adj_start[i];
        std::vector<int> fill(adj_start, adj_start + nnode);
        for (long k = 0; k < nedge; ++k) {  // edge order: each node's list is increasing
            adj_edge[fill[edges[k].a]++] = static_cast<int>(k);
            adj_edge[fill[edges[k].b]++] = static_cast<int>(k);
        }
        for (long i = 0; i < nnode; ++i) max_wsum_per_vol = std::max(max_wsum_per_vol, wsum[i] / vol[i]);
    }
    dt = 0.1 / max_wsum_per_vol;  // well inside the diffusion term's stability limit

    // Edges whose endpoints belong to different threads (computed by both owners).
    long cut = 0;
    for (long k = 0; k < nedge; ++k) {
        int oa = 0, ob = 0;
        for (int p = 0; p < nprocs; ++p) {
            apps::Range rg = apps::block_range(nnode, nprocs, p);
            if (edges[k].a >= rg.lo && edges[k].a < rg.hi) oa = p;
            if (edges[k].b >= rg.lo && edges[k].b < rg.hi) ob = p;
        }
        cut += oa != ob;
    }

    CREATE(Worker, nprocs);
    WAIT_FOR_END(nprocs);

    if (opt.inject_error) u[(nnode / 2) * kVars + 1] += 1.0;

    // Reference: the plain edge loop, one thread, private memory, same mesh and start values.
    std::vector<double> ru(nnode * kVars), rres(nnode * kVars), rnorm(iters);
    init_values(ru.data(), nnode);
    for (int t = 0; t < iters; ++t) {
        std::fill(rres.begin(), rres.end(), 0.0);
        for (long k = 0; k < nedge; ++k) {
            double f[kVars];
            flux(mesh.edges[k], ru.data(), f);
            for (int c = 0; c < kVars; ++c) {
                rres[mesh.edges[k].a * kVars + c] -= f[c];
                rres[mesh.edges[k].b * kVars + c] += f[c];
            }
        }
        rnorm[t] = update(ru.data(), rres.data(), vol, 0, nnode);
    }

    apps::Report rep;
    rep.app = "unstructured";
    rep.opt = opt;
    rep.parallel_s = static_cast<double>(gl->end - gl->start) * 1e-6;
    rep.problem = std::to_string(nnode) + " nodes, " + std::to_string(nedge) + " edges, " + std::to_string(iters) +
                  (iters == 1 ? " iteration" : " iterations");
    rep.params = {{"nodes", std::to_string(nnode)}, {"edges", std::to_string(nedge)},
                  {"iterations", std::to_string(iters)}, {"cut_edges", std::to_string(cut)}};
    rep.add_array("node values", "sequential edge loop", u, ru.data(), ru.size(), 1e-12, kVars);
    rep.add_array("last residual", "sequential edge loop", res, rres.data(), rres.size(), 1e-12, kVars);
    rep.add_array("residual norm^2 per iteration (lock reduction)", "sequential edge loop", gl->norm2, rnorm.data(),
                  iters, 1e-12);
    int rc = apps::finish(rep);
    if (rc != 0) std::exit(rc);
    MAIN_END;
}
