// ida.cpp: IDA*, iterative-deepening A* on the 15-puzzle (Manhattan distance), with work stealing.
// Every iteration (cost bound) searches the whole tree below the bound: the jobs are the nodes at
// depth kJobDepth from the root (every thread makes the same list), job j starts in the queue of
// rank j % ranks; a thread searches the jobs of its queue from the front and, when its queue is
// empty, steals half of another thread's queue from the back (a request answered by the victim's
// handler, which it runs while it searches); stolen jobs join the thief's queue (and may be stolen
// again). An idle thread broadcasts how many jobs it has searched in the iteration; the iteration
// ends for a thread when the counts it knows add up to all the jobs (each job is searched once).
// After an iteration the solutions, nodes and the next bound are reduced (group/ allreduce); the
// search stops at the first bound with a solution (all solutions of that length are counted, so
// the work is deterministic).
//
// original:  the paper's: an idle thread asks the threads at offsets 1, 2, 4, ... (mod P) from
//            itself, in that order, and after a pass that found nothing broadcasts its count and
//            tries again (after a pause of kRetryUs or when news arrives);
// optimized: the study's change: it asks the threads of its own site first, then the others, and
//            only threads not known to be idle: idle/active broadcasts (an idle thread says so, a
//            thread that found work again says so) tell the thieves whom not to ask; a pass asks
//            every such thread of its site and one of another site.
// Check: the solution length, the number of optimal solutions, the nodes of the last iteration
// and of the whole search equal the sequential search's (the same jobs in order).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <deque>

#include "wb_common.hpp"

namespace iccs::widearea {

namespace {

constexpr uint32_t kJobDepth = 8;
constexpr uint32_t kPollEvery = 1024;  // nodes between two polls (steal requests are answered then)
constexpr uint64_t kRetryUs = 2000;    // an idle thread's pause between two steal passes without news

struct IdaParams {
    uint32_t walk;  // the instance: this many random moves from the goal
    uint64_t seed_salt;
};
IdaParams params_of(Size s) { return s == Size::kTest ? IdaParams{70, 15841} : IdaParams{110, 7922}; }

uint8_t g_md[16][16];  // Manhattan distance of tile t at position p (t = 0, the blank: 0)
const bool g_md_ready = [] {
    for (int t = 0; t < 16; ++t)
        for (int p = 0; p < 16; ++p) g_md[t][p] = t == 0 ? 0 : uint8_t(std::abs(t / 4 - p / 4) + std::abs(t % 4 - p % 4));
    return true;
}();

inline uint32_t tile(uint64_t b, int p) { return uint32_t(b >> (4 * p)) & 15; }
// Blank moves: 0 up, 1 down, 2 left, 3 right (the reverse of d is d ^ 1).
inline int target(int blank, int d) {
    switch (d) {
        case 0: return blank >= 4 ? blank - 4 : -1;
        case 1: return blank < 12 ? blank + 4 : -1;
        case 2: return blank % 4 ? blank - 1 : -1;
        default: return blank % 4 != 3 ? blank + 1 : -1;
    }
}

struct Node {
    uint64_t board;
    int8_t blank, prev;
    uint8_t h;
};

inline Node move(const Node& n, int d, int q) {
    const uint32_t t = tile(n.board, q);
    Node m;
    m.board = (n.board & ~(uint64_t{15} << (4 * q))) | (uint64_t{t} << (4 * n.blank));
    m.blank = int8_t(q);
    m.prev = int8_t(d);
    m.h = uint8_t(n.h + g_md[t][n.blank] - g_md[t][q]);
    return m;
}

Node make_instance(const IdaParams& p, uint64_t seed) {
    Node n{0, 0, -1, 0};
    for (int i = 0; i < 16; ++i) n.board |= uint64_t(i) << (4 * i);
    Rng r(seed * 7919 + p.seed_salt);
    for (uint32_t k = 0; k < p.walk;) {
        const int d = int(r.below(4));
        const int q = target(n.blank, d);
        if (q < 0 || (n.prev >= 0 && d == (n.prev ^ 1))) continue;
        n = move(n, d, q);
        ++k;
    }
    n.prev = -1;
    return n;
}

// Every path of kJobDepth moves from the root without an immediate reversal.
void expand(const Node& n, uint32_t depth, std::vector<Node>& out) {
    if (depth == 0) {
        out.push_back(n);
        return;
    }
    for (int d = 0; d < 4; ++d) {
        const int q = target(n.blank, d);
        if (q < 0 || (n.prev >= 0 && d == (n.prev ^ 1))) continue;
        expand(move(n, d, q), depth - 1, out);
    }
}

struct Search {
    uint32_t bound = 0;
    uint64_t nodes = 0, solutions = 0;
    uint32_t next = UINT32_MAX;  // the smallest f above the bound
    RtEndpoint* ep = nullptr;    // polled every kPollEvery nodes (null: sequential)
};

void dfs(Search& s, const Node& n, uint32_t g) {
    const uint32_t f = g + n.h;
    if (f > s.bound) {
        s.next = std::min(s.next, f);
        return;
    }
    if (++s.nodes % kPollEvery == 0 && s.ep) s.ep->poll();
    if (n.h == 0) {
        ++s.solutions;
        return;
    }
    for (int d = 0; d < 4; ++d) {
        if (n.prev >= 0 && d == (n.prev ^ 1)) continue;
        const int q = target(n.blank, d);
        if (q >= 0) dfs(s, move(n, d, q), g + 1);
    }
}

struct Result {
    uint32_t length = 0, iterations = 0;
    uint64_t solutions = 0, last_nodes = 0, nodes = 0;
};

class Ida final : public Instance {
public:
    explicit Ida(const Setup& s)
        : rt_(s.rt), net_(s.net), variant_(s.variant), shared_(s.shared), p_(params_of(s.opt.size)), h_(s.handler_base),
          world_(s.rt, s.topo, group::Options{group::Family::kHier, 64u << 10, s.opt.timeout_ms, s.group_base}) {
        (void)g_md_ready;
        root_ = make_instance(p_, s.opt.seed);
        expand(root_, kJobDepth, jobs_);
        ts_.resize(s.rt.threads());
        for (Thread& t : ts_)
            for (uint32_t k = 0; k < 2; ++k) t.view[(k + 1) & 1].reset(uint32_t{s.rt.clusters()} * s.rt.threads(), k + 1);
        s.rt.set_handler(h_, &Ida::on_steal, this);
        s.rt.set_handler(h_ + 1, &Ida::on_status, this);
    }

    bool run(Ctx& c) override {
        Thread& me = ts_[c.thread];
        group::Group& g = world_.group(c.thread);
        Search s;
        s.ep = &c.ep;
        uint32_t bound = root_.h;
        std::vector<uint8_t> reply;
        std::vector<uint32_t> order;
        Result& res = me.res;
        const uint64_t jobs = jobs_.size();
        for (uint32_t iter = 1;; ++iter) {
            s.bound = bound;
            s.nodes = s.solutions = 0;
            s.next = UINT32_MAX;
            me.view[(iter + 1) & 1].reset(c.ranks, iter + 1);  // the slot of the iteration after this one
            me.queue.clear();
            for (uint32_t j = c.rank; j < jobs; j += c.ranks) me.queue.push_back(j);
            me.done = 0;
            me.iter = iter;  // from now on steal requests of this iteration are answered from the queue
            View& v = me.view[iter & 1];
            uint64_t told = UINT64_MAX;  // the count this thread last broadcast as idle (none yet)
            bool said_idle = false;
            for (;;) {
                while (!me.queue.empty()) {
                    const uint32_t j = me.queue.front();
                    me.queue.pop_front();
                    dfs(s, jobs_[j], kJobDepth);
                    ++me.done;
                }
                // Every job searched: the others still need this thread's last count.
                if (v.others_done + me.done == jobs) {
                    if (told != me.done && !status(c, kIdle)) return false;
                    break;
                }
                // Idle: one pass over the victims.
                victims(c, v, order);
                bool got = false;
                for (uint32_t r : order) {
                    const uint32_t req = iter;
                    ++me.steal_requests;
                    if (c.site_of_rank(r) != c.site()) ++me.wan_steal_requests;
                    if (c.request(c.addr_of(r), h_, RtBytes{&req, sizeof req}, {}, reply) != RtStatus::kOk)
                        return c.fail("ida: steal request to rank " + std::to_string(r) + ": " + c.ep.last_error());
                    uint32_t status = kRetry;
                    if (reply.size() >= 4) std::memcpy(&status, reply.data(), 4);
                    const size_t n = status == kJobs ? (reply.size() - 4) / 4 : 0;
                    if (n == 0) continue;  // empty, or not yet in this iteration
                    me.stolen_jobs += n;
                    for (size_t k = 0; k < n; ++k) {
                        uint32_t j;
                        std::memcpy(&j, reply.data() + 4 + 4 * k, 4);
                        if (j < jobs) me.queue.push_back(j);
                    }
                    got = true;
                    break;
                }
                if (got) {
                    if (said_idle && c.optimized() && !status(c, kActive)) return false;
                    said_idle = false;
                    continue;
                }
                if (told != me.done || (c.optimized() && !said_idle)) {
                    if (!status(c, kIdle)) return false;
                    told = me.done;
                    said_idle = true;
                }
                if (v.others_done + me.done == jobs) break;
                // Wait for news (a count, a thread active again) or the pause, then try again.
                const uint64_t news = v.news;
                const RtStatus st = c.ep.wait_until([&] { return v.news != news; }, kRetryUs);
                if (st != RtStatus::kOk && st != RtStatus::kTimeout)
                    return c.fail(std::string("ida: waiting while idle: ") + iccs::to_string(st));
            }
            uint64_t mine[2] = {s.solutions, s.nodes}, sum[2] = {0, 0};
            uint64_t nx = s.next, gnext = 0;
            if (!g.allreduce(std::span<const uint64_t>(mine, 2), std::span<uint64_t>(sum, 2), group::Op::kSum) ||
                !g.allreduce(std::span<const uint64_t>(&nx, 1), std::span<uint64_t>(&gnext, 1), group::Op::kMin))
                return c.fail("ida: allreduce: " + g.last_error());
            res.nodes += sum[1];
            res.last_nodes = sum[1];
            res.iterations = iter;
            if (sum[0] > 0) {
                res.length = bound;
                res.solutions = sum[0];
                return true;
            }
            if (gnext == UINT32_MAX) return c.fail("ida: no solution below any bound (the instance is unsolvable?)");
            bound = uint32_t(gnext);
        }
    }

    void sequential() override {
        if (shared_) {
            ref_ = std::static_pointer_cast<Result>(shared_);
            return;
        }
        auto ref = std::make_shared<Result>();
        Search s;
        s.bound = root_.h;
        for (uint32_t iter = 1;; ++iter) {
            s.nodes = s.solutions = 0;
            s.next = UINT32_MAX;
            for (const Node& j : jobs_) dfs(s, j, kJobDepth);
            ref->nodes += s.nodes;
            ref->last_nodes = s.nodes;
            ref->iterations = iter;
            if (s.solutions > 0 || s.next == UINT32_MAX) {
                ref->length = s.bound;
                ref->solutions = s.solutions;
                break;
            }
            s.bound = s.next;
        }
        ref_ = ref;
        shared_ = ref;
    }

    Check check() override {
        Check ck;
        const Result& r = ts_[0].res;
        const Result& q = *ref_;
        char b[512];
        std::snprintf(b, sizeof b,
                      "solution length %u (sequential %u), optimal solutions %" PRIu64 " (sequential %" PRIu64
                      "), nodes of the last iteration %" PRIu64 " (sequential %" PRIu64 "), all nodes %" PRIu64
                      " (sequential %" PRIu64 "), iterations %u (sequential %u): all must be equal",
                      r.length, q.length, r.solutions, q.solutions, r.last_nodes, q.last_nodes, r.nodes, q.nodes,
                      r.iterations, q.iterations);
        ck.what = b;
        if (r.length != q.length || r.solutions != q.solutions || r.last_nodes != q.last_nodes || r.nodes != q.nodes ||
            r.iterations != q.iterations) {
            ck.ok = false;
            ck.error = double(r.length > q.length ? r.length - q.length : q.length - r.length);
            ck.failure = std::string("cluster's search differs from the sequential one: ") + b;
        }
        return ck;
    }

    void inject_error() override { ts_[0].res.length += 2; }

    void account(Net& net) override { net.add_group(world_.counters()); }

    std::string stats_json() const override {
        uint64_t reqs = 0, wan = 0, stolen = 0, said = 0;
        for (const Thread& t : ts_)
            reqs += t.steal_requests, wan += t.wan_steal_requests, stolen += t.stolen_jobs, said += t.status_bcasts;
        const Result& r = ts_[0].res;
        char b[320];
        std::snprintf(b, sizeof b,
                      "\"walk\":%u,\"h0\":%u,\"jobs\":%zu,\"length\":%u,\"solutions\":%" PRIu64 ",\"nodes\":%" PRIu64
                      ",\"iterations\":%u,\"steal_requests_cluster0\":%" PRIu64 ",\"wan_steal_requests_cluster0\":%" PRIu64
                      ",\"stolen_jobs_cluster0\":%" PRIu64 ",\"status_bcasts_cluster0\":%" PRIu64,
                      p_.walk, unsigned(root_.h), jobs_.size(), r.length, r.solutions, r.nodes, r.iterations, reqs, wan,
                      stolen, said);
        return b;
    }

    std::string problem() const override {
        char b[320];
        std::snprintf(b, sizeof b,
                      "IDA* on a 15-puzzle %u random moves from the goal (Manhattan %u), %zu jobs at depth %u per "
                      "iteration; idle threads steal %s",
                      p_.walk, unsigned(root_.h), jobs_.size(), kJobDepth,
                      variant_ == Variant::kOptimized
                          ? "in their site first, only from threads not known idle (idle/active broadcasts)"
                          : "from the threads at offsets 1, 2, 4, ... in turn");
        return b;
    }

private:
    enum : uint32_t { kJobs = 0, kRetry = 1 };
    enum : uint32_t { kIdle = 0, kActive = 1 };
    struct Status {
        uint32_t iter, kind;
        uint64_t done;
    };
    // What a thread knows of the others in one iteration (from their broadcasts).
    struct View {
        std::vector<uint64_t> done;  // each thread's count at its last idle broadcast
        std::vector<uint8_t> idle;   // optimized: said idle and not active since
        uint64_t others_done = 0;    // the sum of done
        uint64_t news = 0;           // broadcasts taken (a thread waits for this to change)
        uint32_t iter = 0;           // the iteration this view is of (a late one of an older is dropped)
        void reset(uint32_t ranks, uint32_t it) {
            iter = it;
            done.assign(ranks, 0);
            idle.assign(ranks, 0);
            others_done = 0;
        }
    };
    struct Thread {
        std::deque<uint32_t> queue;  // this iteration's jobs not yet searched (owner: front; thieves: back)
        uint32_t iter = 0;           // the iteration whose jobs `queue` holds
        uint64_t done = 0;           // jobs this thread searched in the iteration
        View view[2];                // by iteration parity
        uint64_t steal_requests = 0, wan_steal_requests = 0, stolen_jobs = 0, status_bcasts = 0;
        uint32_t last_remote = 0;    // optimized: the thread of another site asked last
        Result res;
    };

    // This pass's victims, in the order to ask them. original: offsets 1, 2, 4, ... < P. optimized:
    // the threads of this site not known idle (from rank + 1 on), then one thread of another site
    // not known idle (the next after the one asked last: a WAN request per pass at most).
    void victims(Ctx& c, const View& v, std::vector<uint32_t>& out) {
        out.clear();
        if (!c.optimized()) {
            for (uint32_t d = 1; d < c.ranks; d *= 2) out.push_back((c.rank + d) % c.ranks);
            return;
        }
        for (uint32_t d = 1; d < c.ranks; ++d) {
            const uint32_t r = (c.rank + d) % c.ranks;
            if (!v.idle[r] && c.site_of_rank(r) == c.site()) out.push_back(r);
        }
        uint32_t& last = ts_[c.thread].last_remote;
        for (uint32_t d = 1; d < c.ranks; ++d) {
            const uint32_t r = (last + d) % c.ranks;
            if (!v.idle[r] && c.site_of_rank(r) != c.site()) {
                out.push_back(r);
                last = r;
                break;
            }
        }
    }

    // A broadcast of this thread's state in this iteration to every other thread.
    bool status(Ctx& c, uint32_t kind) {
        Thread& me = ts_[c.thread];
        const Status st{me.iter, kind, me.done};
        ++me.status_bcasts;
        if (c.bcast(h_ + 1, RtBytes{&st, sizeof st}) == RtStatus::kOk) return true;
        return c.fail("ida: status broadcast: " + c.ep.last_error());
    }

    static void on_status(RtEndpoint& self, const AmMsg& m, void* ctx) {
        Ida* a = static_cast<Ida*>(ctx);
        const uint16_t t = self.self().thread;
        Status st;
        if (m.data.size() != sizeof st || t >= a->ts_.size()) return;
        std::memcpy(&st, m.data.data(), sizeof st);
        const uint32_t from = uint32_t{m.src.cluster} * a->rt_.threads() + m.src.thread;
        View& v = a->ts_[t].view[st.iter & 1];
        if (from >= v.done.size() || st.iter != v.iter) return;
        if (st.kind == kIdle) {
            if (st.done > v.done[from]) {
                v.others_done += st.done - v.done[from];
                v.done[from] = st.done;
            }
            v.idle[from] = 1;
        } else {
            v.idle[from] = 0;
        }
        ++v.news;
    }

    // On the victim's thread: half of its queue (from the back), or "retry" when it has not yet
    // started the thief's iteration.
    static void on_steal(RtEndpoint& self, const AmMsg& m, void* ctx) {
        Ida* a = static_cast<Ida*>(ctx);
        const uint16_t t = self.self().thread;
        uint32_t iter = 0;
        if (m.data.size() != 4 || t >= a->ts_.size()) return;
        std::memcpy(&iter, m.data.data(), 4);
        Thread& v = a->ts_[t];
        uint32_t out[1 + 4096];
        uint32_t n = 0;
        if (v.iter < iter) {
            out[0] = kRetry;
        } else {
            out[0] = kJobs;
            const size_t take = v.iter == iter ? std::min<size_t>((v.queue.size() + 1) / 2, 4096) : 0;
            for (; n < take; ++n) {
                out[1 + n] = v.queue.back();
                v.queue.pop_back();
            }
        }
        a->net_.reply(self, m.token(), RtBytes{out, 4 * (1 + n)});
    }

    Runtime& rt_;
    Net& net_;
    Variant variant_;
    std::shared_ptr<void>& shared_;
    IdaParams p_;
    uint16_t h_;
    group::World world_;
    Node root_;
    std::vector<Node> jobs_;
    std::vector<Thread> ts_;
    std::shared_ptr<Result> ref_;
};

}  // namespace

std::unique_ptr<Instance> make_ida(const Setup& s) { return std::make_unique<Ida>(s); }

}  // namespace iccs::widearea
