// apps/tsp/tsp.cpp: travelling salesman by branch and bound (SPLASH style, PARMACS).
//
// Cities are random points (fixed seed) with rounded Euclidean distances; tours start and end at
// city 0. A centralized work queue of partial tours (a binary heap on the lower bound, under one
// lock, with a condition variable for idle threads) holds the top of the search tree: a thread
// takes the most promising partial tour; above `queue_depth` cities it pushes the children whose
// bound beats the best tour, below it searches the rest depth-first privately. The best tour and
// its cost are global, under their own lock; a thread reads the bound when it takes work and
// writes it when it finds a shorter tour. The search ends when the queue is empty and no thread
// holds work. Checked against the optimum found by brute force over all (n-1)! tours.
#include "parmacs.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "app_common.hpp"

MAIN_ENV

namespace {

constexpr int kMaxCities = 16;
constexpr int kQueueCap = 4096;

struct Tour {
    int len;    // cities on the path so far (path[0] = 0)
    int cost;   // length of the path so far
    int bound;  // lower bound of any full tour extending it
    signed char path[kMaxCities];
};

struct GlobalMemory {
    LOCKDEC(queue_lock);
    CONDVARDEC(queue_cv);
    int qcount;  // tours in the heap
    int busy;    // threads holding a tour taken from the heap
    int done;    // set when the heap is empty and nobody is busy
    int overflow;
    long taken;  // tours taken from the heap in all

    LOCKDEC(best_lock);
    int best_cost;
    signed char best_path[kMaxCities];

    BARDEC(barrier);
    unsigned long start, end;
};

GlobalMemory* gl;
Tour* queue;    // binary heap on bound, kQueueCap entries
int* dist;      // ncities x ncities
int* min_edge;  // per city, its shortest edge
int ncities;
int queue_depth;
int nprocs;

void make_cities(int n, int* d) {
    apps::Rng rng(0x75b);
    std::vector<double> x(n), y(n);
    for (int i = 0; i < n; ++i) {
        x[i] = rng.uniform(0, 1000);
        y[i] = rng.uniform(0, 1000);
    }
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) d[i * n + j] = static_cast<int>(std::lround(std::hypot(x[i] - x[j], y[i] - y[j])));
}

// Lower bound: the path so far plus, for the last city and every unvisited one, its shortest edge
// (each must still be left once).
int lower_bound(const Tour& t, unsigned visited) {
    int b = t.cost + min_edge[t.path[t.len - 1]];
    for (int c = 0; c < ncities; ++c)
        if (!(visited & (1u << c))) b += min_edge[c];
    return b;
}

unsigned visited_of(const Tour& t) {
    unsigned v = 0;
    for (int i = 0; i < t.len; ++i) v |= 1u << t.path[i];
    return v;
}

// Heap operations: callers hold queue_lock.
void heap_push(const Tour& t) {
    if (gl->qcount == kQueueCap) {
        gl->overflow = 1;
        return;
    }
    int i = gl->qcount++;
    queue[i] = t;
    while (i > 0 && queue[(i - 1) / 2].bound > queue[i].bound) {
        std::swap(queue[(i - 1) / 2], queue[i]);
        i = (i - 1) / 2;
    }
}

Tour heap_pop() {
    Tour top = queue[0];
    queue[0] = queue[--gl->qcount];
    for (int i = 0;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < gl->qcount && queue[l].bound < queue[m].bound) m = l;
        if (r < gl->qcount && queue[r].bound < queue[m].bound) m = r;
        if (m == i) break;
        std::swap(queue[i], queue[m]);
        i = m;
    }
    return top;
}

// Publishes a complete tour if it beats the global best; returns the (possibly newer) best.
int offer_tour(const Tour& t, int cost) {
    LOCK(gl->best_lock);
    if (cost < gl->best_cost) {
        gl->best_cost = cost;
        for (int i = 0; i < ncities; ++i) gl->best_path[i] = t.path[i];
    }
    int b = gl->best_cost;
    UNLOCK(gl->best_lock);
    return b;
}

// Private depth-first search below t; `best` is this thread's copy of the global bound.
void search(Tour& t, unsigned visited, int& best) {
    int last = t.path[t.len - 1];
    if (t.len == ncities) {
        int cost = t.cost + dist[last * ncities + 0];
        if (cost < best) best = offer_tour(t, cost);
        return;
    }
    for (int c = 1; c < ncities; ++c) {
        if (visited & (1u << c)) continue;
        t.path[t.len++] = static_cast<signed char>(c);
        t.cost += dist[last * ncities + c];
        if (lower_bound(t, visited | (1u << c)) < best) search(t, visited | (1u << c), best);
        t.cost -= dist[last * ncities + c];
        --t.len;
    }
}

int read_best() {
    LOCK(gl->best_lock);
    int b = gl->best_cost;
    UNLOCK(gl->best_lock);
    return b;
}

int tour_cost(const signed char* path, int n, const int* d) {
    int c = 0;
    for (int i = 0; i < n; ++i) c += d[path[i] * n + path[(i + 1) % n]];
    return c;
}

}  // namespace

void Worker(void) {
    int pid;
    GET_PID(pid);

    BARRIER(gl->barrier, nprocs);
    if (pid == 0) {
        SPLASH3_ROI_BEGIN();
        CLOCK(gl->start);
    }
    BARRIER(gl->barrier, nprocs);  // no thread starts before the clock does
    for (;;) {
        Tour t;
        bool got = false;
        LOCK(gl->queue_lock);
        for (;;) {
            if (gl->qcount > 0) {
                t = heap_pop();
                gl->busy++;
                gl->taken++;
                got = true;
                break;
            }
            if (gl->busy == 0 || gl->done) {  // nobody can add work any more
                gl->done = 1;
                CONDVARBCAST(gl->queue_cv);
                break;
            }
            CONDVARWAIT(gl->queue_cv, gl->queue_lock);
        }
        UNLOCK(gl->queue_lock);
        if (!got) break;

        int best = read_best();
        unsigned visited = visited_of(t);
        if (t.bound < best) {
            if (t.len < queue_depth) {
                // Expand one level into the queue.
                Tour kids[kMaxCities];
                int nk = 0;
                int last = t.path[t.len - 1];
                for (int c = 1; c < ncities; ++c) {
                    if (visited & (1u << c)) continue;
                    Tour k = t;
                    k.path[k.len++] = static_cast<signed char>(c);
                    k.cost += dist[last * ncities + c];
                    k.bound = lower_bound(k, visited | (1u << c));
                    if (k.bound < best) kids[nk++] = k;
                }
                if (nk > 0) {
                    LOCK(gl->queue_lock);
                    for (int i = 0; i < nk; ++i) heap_push(kids[i]);
                    CONDVARBCAST(gl->queue_cv);
                    UNLOCK(gl->queue_lock);
                }
            } else {
                search(t, visited, best);
            }
        }
        LOCK(gl->queue_lock);
        gl->busy--;
        if (gl->busy == 0 && gl->qcount == 0) {
            gl->done = 1;
            CONDVARBCAST(gl->queue_cv);
        }
        UNLOCK(gl->queue_lock);
    }
    BARRIER(gl->barrier, nprocs);
    if (pid == 0) {
        CLOCK(gl->end);
        SPLASH3_ROI_END();
    }
}

int main(int argc, char** argv) {
    MAIN_INITENV();
    apps::Options opt = apps::parse_args(
        "tsp", "Travelling salesman: branch and bound, central work queue under a lock, global bound under a lock.",
        argc, argv);
    nprocs = opt.nprocs;
    ncities = opt.size == apps::Size::paper ? 10 : 8;
    queue_depth = 3;  // partial tours of up to 3 cities go through the queue: 72 (paper) / 42 (test) leaves

    gl = static_cast<GlobalMemory*>(G_MALLOC_F(sizeof(GlobalMemory)));
    LOCKINIT(gl->queue_lock);
    CONDVARINIT(gl->queue_cv);
    LOCKINIT(gl->best_lock);
    BARINIT(gl->barrier, nprocs);
    gl->qcount = gl->busy = gl->done = gl->overflow = 0;
    gl->taken = 0;
    gl->best_cost = INT_MAX;
    for (int i = 0; i < kMaxCities; ++i) gl->best_path[i] = -1;
    queue = static_cast<Tour*>(G_MALLOC_F(sizeof(Tour) * kQueueCap));
    dist = static_cast<int*>(G_MALLOC_F(sizeof(int) * ncities * ncities));
    min_edge = static_cast<int*>(G_MALLOC_F(sizeof(int) * ncities));
    make_cities(ncities, dist);
    for (int i = 0; i < ncities; ++i) {
        int m = INT_MAX;
        for (int j = 0; j < ncities; ++j)
            if (j != i) m = std::min(m, dist[i * ncities + j]);
        min_edge[i] = m;
    }
    Tour root{};
    root.len = 1;
    root.cost = 0;
    root.path[0] = 0;
    root.bound = lower_bound(root, 1u);
    heap_push(root);

    CREATE(Worker, nprocs);
    WAIT_FOR_END(nprocs);

    if (opt.inject_error) gl->best_cost += 1;

    // Known answer: brute force over every tour that starts at city 0.
    std::vector<int> d(ncities * ncities);
    make_cities(ncities, d.data());
    std::vector<signed char> perm(ncities);
    std::iota(perm.begin(), perm.end(), 0);
    int optimum = INT_MAX;
    do {
        optimum = std::min(optimum, tour_cost(perm.data(), ncities, d.data()));
    } while (std::next_permutation(perm.begin() + 1, perm.end()));

    apps::Report rep;
    rep.app = "tsp";
    rep.opt = opt;
    rep.parallel_s = static_cast<double>(gl->end - gl->start) * 1e-6;
    rep.problem = std::to_string(ncities) + "-city tour";
    rep.params = {{"cities", std::to_string(ncities)}, {"optimum", std::to_string(optimum)},
                  {"best_cost", std::to_string(gl->best_cost)}, {"queue_tours_taken", std::to_string(gl->taken)}};
    rep.add("best cost " + std::to_string(gl->best_cost) + " vs brute-force optimum " + std::to_string(optimum) + " (exact)",
            gl->best_cost == optimum ? "" : "best cost " + std::to_string(gl->best_cost) + ", brute-force optimum " +
                                                std::to_string(optimum));
    // The best path must be a tour (every city once, from city 0) of exactly the reported cost.
    std::vector<int> seen(ncities, 0);
    bool is_tour = gl->best_path[0] == 0;
    for (int i = 0; i < ncities; ++i) {
        int c = gl->best_path[i];
        if (c < 0 || c >= ncities || seen[c]++) is_tour = false;
    }
    std::string path_fail;
    if (!is_tour)
        path_fail = "best path is not a tour of all cities from city 0";
    else if (tour_cost(gl->best_path, ncities, d.data()) != gl->best_cost)
        path_fail = "best path has length " + std::to_string(tour_cost(gl->best_path, ncities, d.data())) +
                    ", reported cost " + std::to_string(gl->best_cost);
    rep.add("best path is a tour of the reported cost", path_fail);
    rep.add("work queue never overflowed", gl->overflow ? "work queue overflowed (" + std::to_string(kQueueCap) + " tours)" : "");
    int rc = apps::finish(rep);
    if (rc != 0) std::exit(rc);
    MAIN_END;
}
