// tsp_wa.cpp: TSP, branch and bound over a job queue. A job is a tour prefix (city 0 and D more
// cities); a thread takes a job, searches every completion depth first and prunes a partial tour
// whose cost plus the cheapest edge out of every unvisited city reaches the bound. The bound is
// fixed for the whole run (the cost of a greedy tour, the same in every process), as the study
// fixed it, so the work (nodes searched) does not depend on timing: the parallel run searches
// exactly the nodes the sequential one does, and finds the same optimum.
//
// original:  one central job queue in cluster 0's service endpoint: every job is an RPC to it
//            (across the WAN for every other site).
// optimized: the study's TSP' (Plaat et al.): one queue per site (in the service endpoint of the
//            site's first cluster), the jobs dealt to the sites statically (job j to site j mod
//            sites), so every job RPC stays in its site; when a site's queue runs dry, one of its
//            threads steals half of another site's queue (the sites in turn from the next one) into
//            it, and when every other site's queue is empty the site is done.
// The minimum tour cost and the node count are reduced at the end (group/ allreduce).
#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>

#include "widearea.hpp"

namespace iccs::widearea {

namespace {

struct TspParams {
    uint32_t cities, depth;  // depth: cities fixed by a job after city 0
};
TspParams tsp_params(Size s) { return s == Size::kTest ? TspParams{12, 2} : TspParams{14, 3}; }

struct TspProblem {
    uint32_t n = 0;
    std::vector<int32_t> dist;     // n x n
    std::vector<int32_t> min_out;  // per city: its cheapest edge
    int32_t bound = 0;             // greedy tour cost: only tours cheaper than this are searched
    std::vector<std::vector<uint8_t>> jobs;  // prefixes (city 0 implied), in lexicographic order
};

TspProblem make_problem(const TspParams& p, uint64_t seed) {
    TspProblem t;
    t.n = p.cities;
    std::vector<int32_t> x(t.n), y(t.n);
    uint64_t r = seed * 0x2545F4914F6CDD1Dull + 3;
    for (uint32_t i = 0; i < t.n; ++i) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        x[i] = int32_t(r % 1000);
        y[i] = int32_t((r >> 20) % 1000);
    }
    t.dist.resize(size_t{t.n} * t.n);
    t.min_out.assign(t.n, INT32_MAX);
    for (uint32_t i = 0; i < t.n; ++i)
        for (uint32_t j = 0; j < t.n; ++j) {
            const double dx = x[i] - x[j], dy = y[i] - y[j];
            t.dist[size_t{i} * t.n + j] = int32_t(std::sqrt(dx * dx + dy * dy) + 0.5);
            if (i != j) t.min_out[i] = std::min(t.min_out[i], t.dist[size_t{i} * t.n + j]);
        }
    // greedy (nearest neighbour) tour from city 0: the fixed bound (+1: it is a tour itself)
    std::vector<bool> seen(t.n, false);
    uint32_t at = 0;
    seen[0] = true;
    int32_t cost = 0;
    for (uint32_t k = 1; k < t.n; ++k) {
        uint32_t best = 0;
        int32_t bd = INT32_MAX;
        for (uint32_t j = 0; j < t.n; ++j)
            if (!seen[j] && t.dist[size_t{at} * t.n + j] < bd) bd = t.dist[size_t{at} * t.n + j], best = j;
        seen[best] = true;
        cost += bd;
        at = best;
    }
    t.bound = cost + t.dist[size_t{at} * t.n] + 1;
    // jobs: every sequence of `depth` distinct cities of 1..n-1
    std::vector<uint8_t> pre;
    std::function<void()> gen = [&] {
        if (pre.size() == p.depth) {
            t.jobs.push_back(pre);
            return;
        }
        for (uint32_t c = 1; c < t.n; ++c)
            if (std::find(pre.begin(), pre.end(), uint8_t(c)) == pre.end()) {
                pre.push_back(uint8_t(c));
                gen();
                pre.pop_back();
            }
    };
    gen();
    return t;
}

struct SearchResult {
    int32_t best = INT32_MAX;
    uint64_t nodes = 0;
};

// Depth-first search of every completion of one job's prefix under the fixed bound.
void search_job(const TspProblem& t, const std::vector<uint8_t>& prefix, SearchResult& res) {
    const uint32_t n = t.n;
    bool visited[64] = {};
    visited[0] = true;
    int32_t cost = 0, rest = 0;
    for (uint32_t c = 1; c < n; ++c) rest += t.min_out[c];
    uint32_t at = 0;
    for (uint8_t c : prefix) {
        cost += t.dist[size_t{at} * n + c];
        visited[c] = true;
        rest -= t.min_out[c];
        at = c;
    }
    struct Rec {
        static void go(const TspProblem& t, bool* visited, uint32_t at, uint32_t depth, int32_t cost, int32_t rest,
                       SearchResult& res) {
            ++res.nodes;
            const uint32_t n = t.n;
            if (depth == n) {
                const int32_t total = cost + t.dist[size_t{at} * n];
                if (total < t.bound) res.best = std::min(res.best, total);
                return;
            }
            for (uint32_t c = 1; c < n; ++c) {
                if (visited[c]) continue;
                const int32_t nc = cost + t.dist[size_t{at} * n + c];
                if (nc + rest >= t.bound) continue;  // + the cheapest way out of c and of every city left
                visited[c] = true;
                go(t, visited, c, depth + 1, nc, rest - t.min_out[c], res);
                visited[c] = false;
            }
        }
    };
    if (cost + rest >= t.bound) {
        ++res.nodes;
        return;
    }
    Rec::go(t, visited, at, 1 + uint32_t(prefix.size()), cost, rest, res);
}

class TspWa final : public Instance {
public:
    explicit TspWa(const Setup& s)
        : rt_(s.rt), topo_(s.topo), variant_(s.variant), shared_(s.shared), p_(tsp_params(s.opt.size)),
          h_(s.handler_base), world_(s.rt, s.topo, group::Options{group::Family::kHier, 64u << 10, s.opt.timeout_ms, s.group_base}),
          net_(s.net) {
        t_ = make_problem(p_, s.opt.seed);
        ts_.resize(s.rt.threads());
        // this cluster's queue, if it holds one: original cluster 0 holds all jobs; optimized the
        // first cluster of each site holds that site's
        const uint16_t me = s.rt.cluster();
        if (variant_ == Variant::kOriginal ? me == 0 : s.topo.clusters_of[s.topo.site_of[me]].front() == me)
            for (uint32_t j = 0; j < t_.jobs.size(); ++j)
                if (variant_ == Variant::kOriginal || j % s.topo.sites == s.topo.site_of[me]) queue_.push_back(j);
        s.rt.set_handler(h_, &TspWa::on_take, this);
    }

    bool run(Ctx& c) override {
        Thread& me = ts_[c.thread];
        const uint16_t qc = c.optimized() ? topo_.clusters_of[c.site()].front() : uint16_t{0};
        std::vector<uint8_t> reply;
        for (;;) {
            const uint32_t ask[2] = {kTake, 0};
            const RtStatus st = c.request(RtAddr{qc, kRtService}, h_, RtBytes{ask, sizeof ask}, {}, reply);
            if (st != RtStatus::kOk) return c.fail(std::string("tsp: job request: ") + iccs::to_string(st));
            uint32_t j = 0;
            if (reply.size() != 4) return c.fail("tsp: a job reply of " + std::to_string(reply.size()) + " bytes");
            std::memcpy(&j, reply.data(), 4);
            if (j == kDone) break;
            if (j == kWait) {  // another thread of the site is stealing for it: ask again shortly
                c.ep.wait_until([] { return false; }, kWaitUs);
                continue;
            }
            if (j == kSteal) {
                if (!steal(c, qc)) return false;
                continue;
            }
            if (j >= t_.jobs.size()) return c.fail("tsp: job " + std::to_string(j) + " does not exist");
            search_job(t_, t_.jobs[j], me.res);
            ++me.jobs;
        }
        group::Group& g = world_.group(c.thread);
        int64_t best = me.res.best, best_all = 0;
        uint64_t nodes = me.res.nodes, nodes_all = 0;
        if (!g.allreduce(std::span<const int64_t>(&best, 1), std::span<int64_t>(&best_all, 1), group::Op::kMin) ||
            !g.allreduce(std::span<const uint64_t>(&nodes, 1), std::span<uint64_t>(&nodes_all, 1), group::Op::kSum))
            return c.fail("tsp: allreduce: " + g.last_error());
        me.best_all = best_all;
        me.nodes_all = nodes_all;
        return true;
    }

    void sequential() override {
        if (!shared_) {
            auto ref = std::make_shared<SearchResult>();
            for (const auto& job : t_.jobs) search_job(t_, job, *ref);
            shared_ = ref;
        }
        ref_ = std::static_pointer_cast<SearchResult>(shared_);
    }

    Check check() override {
        Check ck;
        const Thread& me = ts_[0];
        char b[320];
        std::snprintf(b, sizeof b,
                      "shortest tour %" PRId64 " (sequential %d; tolerance 0); nodes searched %" PRIu64
                      " (sequential %" PRIu64 ", must be equal: the bound is fixed); fixed bound %d",
                      me.best_all, ref_->best, me.nodes_all, ref_->nodes, t_.bound);
        ck.what = b;
        if (me.best_all != ref_->best) {
            ck.ok = false;
            std::snprintf(b, sizeof b, "shortest tour %" PRId64 ", sequential %d", me.best_all, ref_->best);
            ck.failure = b;
        } else if (me.nodes_all != ref_->nodes) {
            ck.ok = false;
            std::snprintf(b, sizeof b, "%" PRIu64 " nodes searched, sequential %" PRIu64, me.nodes_all, ref_->nodes);
            ck.failure = b;
        }
        ck.error = double(std::llabs(me.best_all - ref_->best));
        return ck;
    }

    void inject_error() override { ts_[0].best_all += 1; }

    void account(Net& net) override { net.add_group(world_.counters()); }

    std::string stats_json() const override {
        uint64_t jobs = 0;
        for (const Thread& t : ts_) jobs += t.jobs;
        char b[256];
        std::snprintf(b, sizeof b,
                      "\"cities\":%u,\"jobs\":%zu,\"bound\":%d,\"best\":%" PRId64 ",\"nodes\":%" PRIu64
                      ",\"jobs_cluster0\":%" PRIu64 ",\"site_steals_cluster0\":%" PRIu64 ",\"jobs_stolen_cluster0\":%" PRIu64,
                      t_.n, t_.jobs.size(), t_.bound, ts_[0].best_all, ts_[0].nodes_all, jobs, steals_.load(),
                      stolen_.load());
        return b;
    }

    std::string problem() const override {
        return "TSP on " + std::to_string(t_.n) + " cities (seeded), " + std::to_string(t_.jobs.size()) + " jobs of " +
               std::to_string(p_.depth) + " fixed cities, fixed bound " + std::to_string(t_.bound) + " (greedy tour), " +
               (variant_ == Variant::kOriginal ? "one central job queue (cluster 0)"
                                               : "one job queue per site, jobs dealt statically, an empty site queue "
                                                 "stealing half of another's");
    }

private:
    struct Thread {
        SearchResult res;
        uint64_t jobs = 0;
        int64_t best_all = 0;
        uint64_t nodes_all = 0;
    };
    // Requests to a queue (first word) and the answers to kTake besides a job id.
    enum : uint32_t { kTake = 0, kStealHalf = 1, kDeposit = 2 };
    static constexpr uint32_t kDone = UINT32_MAX, kSteal = UINT32_MAX - 1, kWait = UINT32_MAX - 2;
    static constexpr uint64_t kWaitUs = 200;

    // optimized: this site's queue ran dry and this thread steals for it: half of the next site's
    // queue that has jobs, into this site's queue (or "nothing": every other site is empty, this
    // site is done).
    bool steal(Ctx& c, uint16_t qc) {
        std::vector<uint8_t> got, ack;
        for (uint16_t k = 1; k < topo_.sites && got.empty(); ++k) {
            const uint16_t victim = topo_.clusters_of[(c.site() + k) % topo_.sites].front();
            const uint32_t ask[2] = {kStealHalf, 0};
            if (c.request(RtAddr{victim, kRtService}, h_, RtBytes{ask, sizeof ask}, {}, got) != RtStatus::kOk)
                return c.fail("tsp: steal from the queue of cluster " + std::to_string(victim) + ": " + c.ep.last_error());
            if (got.size() % 4) return c.fail("tsp: a steal reply of " + std::to_string(got.size()) + " bytes");
        }
        steals_.fetch_add(1);
        stolen_.fetch_add(got.size() / 4);
        const uint32_t dep[2] = {kDeposit, uint32_t(got.size() / 4)};
        if (c.request(RtAddr{qc, kRtService}, h_, RtBytes{dep, sizeof dep}, RtBytes{got.data(), uint32_t(got.size())}, ack) !=
            RtStatus::kOk)
            return c.fail("tsp: deposit into the site's queue: " + c.ep.last_error());
        return true;
    }

    // The queue, on the service endpoint of the cluster that holds it: the next job (kTake; or
    // kSteal, kWait, kDone when it is empty), half of it from the back (kStealHalf, from another
    // site), or stolen jobs in (kDeposit, from this site's stealer; none: the site is done).
    static void on_take(RtEndpoint& self, const AmMsg& m, void* ctx) {
        TspWa* s = static_cast<TspWa*>(ctx);
        uint32_t req[2] = {kTake, 0};
        if (m.data.size() >= sizeof req) std::memcpy(req, m.data.data(), sizeof req);
        std::vector<uint32_t> out;
        {
            std::lock_guard<std::mutex> lk(s->qmu_);
            std::deque<uint32_t>& q = s->queue_;
            if (req[0] == kTake) {
                uint32_t j = kDone;
                if (!q.empty()) {
                    j = q.front();
                    q.pop_front();
                } else if (s->variant_ != Variant::kOriginal && !s->site_done_) {
                    j = s->stealing_ ? kWait : kSteal;
                    s->stealing_ = true;
                }
                out.push_back(j);
            } else if (req[0] == kStealHalf) {
                for (size_t n = (q.size() + 1) / 2; n > 0; --n) {
                    out.push_back(q.back());
                    q.pop_back();
                }
            } else if (req[0] == kDeposit && m.data.size() == sizeof req + 4 * size_t{req[1]}) {
                for (uint32_t k = 0; k < req[1]; ++k) {
                    uint32_t j;
                    std::memcpy(&j, m.data.data() + sizeof req + 4 * k, 4);
                    q.push_back(j);
                }
                s->site_done_ = req[1] == 0;
                s->stealing_ = false;
            }
        }
        s->net_.reply(self, m.token(), RtBytes{out.data(), uint32_t(4 * out.size())});
    }

    Runtime& rt_;
    const group::Topology& topo_;
    Variant variant_;
    std::shared_ptr<void>& shared_;
    TspParams p_;
    uint16_t h_;
    group::World world_;
    Net& net_;
    TspProblem t_;
    std::mutex qmu_;
    std::deque<uint32_t> queue_;  // this cluster's, if it holds a queue
    bool stealing_ = false;      // optimized: a thread of the site is stealing for this queue
    bool site_done_ = false;     // optimized: every other site's queue was found empty
    std::atomic<uint64_t> steals_{0}, stolen_{0};
    std::vector<Thread> ts_;
    std::shared_ptr<SearchResult> ref_;
};

}  // namespace

std::unique_ptr<Instance> make_tsp_wa(const Setup& s) { return std::make_unique<TspWa>(s); }

}  // namespace iccs::widearea
