// tsp.cpp: travelling salesman by branch and bound (`iccs run satin-tsp`). Satin's version: every
// job carries the whole distance table as a parameter (n*n 32-bit distances after its header), so
// a stolen job brings its table along. A job fixes the next city of its partial tour for each
// unvisited one and spawns (farthest first, so its own thread runs the nearest first) the rest while the tour is shorter than `spawn_depth`;
// deeper, a sequential search. Pruning: the length so far plus each remaining city's shortest
// outgoing edge against the best tour known (the job's bound, or a better one found in this
// process). The result is the optimum, an integer: it must equal the sequential search's.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <numeric>

#include "satin_apps.hpp"

namespace iccs::satin {

namespace {

constexpr uint32_t kMaxCities = 24;
constexpr uint32_t kNone = UINT32_MAX;

struct Hdr {
    uint32_t n, count, len, bound, spawn_depth, nonce;
    uint8_t path[kMaxCities];
};
static_assert(sizeof(Hdr) == 48);

// The best tour found in this process for the run `nonce` (high 32 bits), its length low.
std::atomic<uint64_t> g_best{uint64_t{kNone}};

uint32_t process_best(uint32_t nonce) {
    const uint64_t v = g_best.load(std::memory_order_relaxed);
    return static_cast<uint32_t>(v >> 32) == nonce ? static_cast<uint32_t>(v) : kNone;
}
void offer_best(uint32_t nonce, uint32_t len) {
    uint64_t v = g_best.load(std::memory_order_relaxed);
    while (static_cast<uint32_t>(v >> 32) != nonce || static_cast<uint32_t>(v) > len)
        if (g_best.compare_exchange_weak(v, (uint64_t{nonce} << 32) | len)) break;
}

struct Search {
    uint32_t n;
    const uint32_t* d;  // n x n
    uint32_t min_out[kMaxCities];
    uint32_t nonce;
    bool shared_bound;  // use the process's best (parallel run) or only its own (sequential)

    void init() {
        for (uint32_t i = 0; i < n; ++i) {
            min_out[i] = kNone;
            for (uint32_t j = 0; j < n; ++j)
                if (j != i) min_out[i] = std::min(min_out[i], d[i * n + j]);
        }
    }
    // The order in which to try the unvisited cities from `cur`: nearest first (ties by index).
    uint32_t order(uint32_t cur, uint32_t visited, uint8_t* out) const {
        uint32_t k = 0;
        for (uint32_t j = 0; j < n; ++j)
            if (!(visited >> j & 1)) out[k++] = static_cast<uint8_t>(j);
        std::sort(out, out + k, [&](uint8_t a, uint8_t b) {
            return d[cur * n + a] != d[cur * n + b] ? d[cur * n + a] < d[cur * n + b] : a < b;
        });
        return k;
    }
    uint32_t lower(uint32_t cur, uint32_t visited, uint32_t len) const {
        uint64_t lb = uint64_t{len} + min_out[cur];
        for (uint32_t j = 0; j < n; ++j)
            if (!(visited >> j & 1)) lb += min_out[j];
        return static_cast<uint32_t>(std::min<uint64_t>(lb, kNone));
    }
    // Best tour completing the partial one (at `cur`, `visited`, `len`) shorter than `bound`; kNone if none.
    uint32_t dfs(uint32_t cur, uint32_t visited, uint32_t count, uint32_t len, uint32_t& bound) const {
        if (count == n) {
            const uint32_t total = len + d[cur * n + 0];
            if (total < bound) {
                bound = total;
                if (shared_bound) offer_best(nonce, total);
                return total;
            }
            return kNone;
        }
        if (shared_bound) bound = std::min(bound, process_best(nonce));
        if (lower(cur, visited, len) >= bound) return kNone;
        uint8_t next[kMaxCities];
        const uint32_t k = order(cur, visited, next);
        uint32_t best = kNone;
        for (uint32_t i = 0; i < k; ++i) {
            const uint32_t j = next[i];
            const uint32_t r = dfs(j, visited | 1u << j, count + 1, len + d[cur * n + j], bound);
            best = std::min(best, r);
        }
        return best;
    }
};

bool parse(std::span<const uint8_t> args, Hdr& h, const uint32_t*& d) {
    if (!read_one(args, h) || h.n < 2 || h.n > kMaxCities || h.count < 1 || h.count > h.n) return false;
    if (args.size() != sizeof h + size_t{4} * h.n * h.n) return false;
    for (uint32_t i = 0; i < h.count; ++i)
        if (h.path[i] >= h.n) return false;
    d = reinterpret_cast<const uint32_t*>(args.data() + sizeof h);  // vector storage: aligned
    return true;
}

void job(group::Worker& w, std::span<const uint8_t> args, std::vector<uint8_t>& result) {
    Hdr h;
    const uint32_t* d = nullptr;
    if (!parse(args, h, d)) return;
    Search s{h.n, d, {}, h.nonce, true};
    s.init();
    uint32_t visited = 0;
    for (uint32_t i = 0; i < h.count; ++i) visited |= 1u << h.path[i];
    const uint32_t cur = h.path[h.count - 1];
    uint32_t bound = std::min(h.bound, process_best(h.nonce));
    if (h.count >= h.spawn_depth || h.count == h.n) {
        result = bytes_of(s.dfs(cur, visited, h.count, h.len, bound));
        return;
    }
    if (s.lower(cur, visited, h.len) >= bound) {
        result = bytes_of(kNone);
        return;
    }
    uint8_t next[kMaxCities];
    const uint32_t k = s.order(cur, visited, next);
    const std::span<const uint8_t> table = args.subspan(sizeof h);
    for (uint32_t i = k; i-- > 0;) {  // farthest first: the owner pops the nearest (bottom) first
        Hdr c = h;
        c.path[c.count++] = next[i];
        c.len = h.len + d[cur * h.n + next[i]];
        c.bound = bound;
        w.spawn(kTsp, std::span(reinterpret_cast<const uint8_t*>(&c), sizeof c), table);
    }
    if (!w.sync()) return;
    uint32_t best = kNone;
    for (uint32_t i = 0; i < k; ++i) {
        uint32_t v = 0;
        if (!read_one(std::span(w.result(i)), v)) return;
        best = std::min(best, v);
    }
    result = bytes_of(best);
}

struct Size {
    uint32_t n, spawn_depth;
};
Size size_of(bool paper) { return paper ? Size{15, 4} : Size{13, 3}; }

// Cities at random points of a 1000 x 1000 square, distances rounded Euclidean; the first tour
// bound is the nearest-neighbour tour + 1 (so the optimum, <= it, is always found).
std::vector<uint8_t> root_args(bool paper, uint64_t seed) {
    const Size z = size_of(paper);
    const uint32_t n = z.n;
    uint64_t s = seed * 2654435761u + 12345;
    auto rnd = [&] {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        return static_cast<double>(s >> 11) / 9007199254740992.0;
    };
    std::vector<double> x(n), y(n);
    for (uint32_t i = 0; i < n; ++i) x[i] = rnd() * 1000, y[i] = rnd() * 1000;
    std::vector<uint32_t> d(size_t{n} * n);
    for (uint32_t i = 0; i < n; ++i)
        for (uint32_t j = 0; j < n; ++j)
            d[i * n + j] = static_cast<uint32_t>(std::lround(std::hypot(x[i] - x[j], y[i] - y[j])));
    uint32_t visited = 1, cur = 0, nn = 0;
    for (uint32_t step = 1; step < n; ++step) {
        uint32_t best = kNone, bj = 0;
        for (uint32_t j = 0; j < n; ++j)
            if (!(visited >> j & 1) && d[cur * n + j] < best) best = d[cur * n + j], bj = j;
        nn += best;
        visited |= 1u << bj;
        cur = bj;
    }
    nn += d[cur * n];
    Hdr h{};
    h.n = n;
    h.count = 1;
    h.path[0] = 0;
    h.bound = nn + 1;
    h.spawn_depth = z.spawn_depth;
    // One nonce per run (not per instance): the process's best of an earlier run of the same
    // instance would prune the optimum away (a tour is taken only when strictly shorter).
    static std::atomic<uint32_t> runs{0};
    h.nonce = static_cast<uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count()) * 2654435761u +
              runs.fetch_add(1) + 1;
    std::vector<uint8_t> b;
    put(b, h);
    b.resize(sizeof h + d.size() * 4);
    std::memcpy(b.data() + sizeof h, d.data(), d.size() * 4);
    return b;
}

std::vector<uint8_t> sequential(std::span<const uint8_t> args) {
    Hdr h;
    const uint32_t* d = nullptr;
    std::vector<uint8_t> copy(args.begin(), args.end());
    if (!parse(copy, h, d)) return {};
    Search s{h.n, d, {}, 0, false};
    s.init();
    uint32_t bound = h.bound;
    return bytes_of(s.dfs(h.path[0], 1u << h.path[0], 1, 0, bound));
}

std::string describe(std::span<const uint8_t> r) {
    uint32_t v = 0;
    if (!read_one(r, v)) return "no result (" + std::to_string(r.size()) + " bytes)";
    return "shortest tour " + std::to_string(v);
}

std::string problem(bool paper) {
    const Size z = size_of(paper);
    return std::to_string(z.n) + " cities, jobs for the first " + std::to_string(z.spawn_depth - 1) +
           " cities of the tour, each carrying the " + std::to_string(4 * z.n * z.n) + "-byte distance table";
}

}  // namespace

App tsp_app() {
    return App{"satin-tsp", kTsp, job, "TSP: branch and bound, every job carries the distance table", root_args,
               sequential, describe, problem};
}

}  // namespace iccs::satin
