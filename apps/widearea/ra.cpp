// ra.cpp: RA, retrograde analysis of a game database. The game: N positions, position p has
// 0..4 moves to seeded pseudo-random positions (cycles included); a position without moves is
// lost for the player to move. Retrograde analysis computes every position's value (won, lost,
// drawn) backwards from the terminal positions: a position with a lost successor is won; one
// whose successors are all won is lost; what remains is drawn. Positions are owned by threads by
// hash; when a thread resolves a position it sends "update predecessor" (4 bytes: the
// predecessor and whether the successor was lost) to the owner of each predecessor: many small
// irregular asynchronous messages. The work goes in rounds: each thread resolves its frontier,
// then the message counts per destination are summed (group/ allreduce), each thread waits for
// what was sent to it, and the updates received form the next frontier; it stops at a round
// whose frontiers are all empty. The values do not depend on the order of the updates.
//
// original:  one message per update to its owner;
// optimized: updates to another cluster are combined per destination cluster (a buffer of up
//            to kBatch updates, flushed when full or at the round's end) and sent to one thread
//            of that cluster (its thread 0), which hands each update to its owner (its own, or
//            into the owner thread's inbox in shared memory); updates to another thread of the
//            same cluster are combined per thread.
// grid:      (issue 20, Awari on a grid, Verstoep et al.) the optimized variant with five changes,
//            each switchable (--grid-opts): tree-sync: the round's synchronization (and
//            termination test) by a tree (group/ hierarchical), else flat; rings: a send ring
//            per destination (the runtime's own), else one shared ring, emulated: a batch to
//            another cluster is a request that holds this thread until that cluster took it;
//            polling: poll for arrivals every kPollEvery updates while resolving, else only at
//            the synchronization; grain: 8 KiB batches, else 4 KiB; autoflush: flush partly
//            filled buffers at the round's end by itself, else only when the sync message
//            arrives (a barrier first). The optimized variant is tree-sync,rings,autoflush.
// Check: every position this cluster owns has the sequential analysis's value (byte-exact).
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "wb_common.hpp"

namespace iccs::widearea {

namespace {

constexpr uint32_t kBatch = 1024;     // updates in a combined message (4 KiB; grid with grain: 8 KiB)
constexpr uint32_t kPollEvery = 256;  // grid, polling: updates between two polls
enum Value : uint8_t { kDrawn = 0, kWon = 1, kLost = 2 };
constexpr uint32_t kLostBit = 0x80000000u;  // in an update: the successor was lost (else won)

uint32_t positions_of(Size s) { return s == Size::kTest ? 20'000 : 1'000'000; }

struct Graph {
    uint32_t n = 0;
    std::vector<uint8_t> deg;         // moves of each position
    std::vector<uint32_t> off, pred;  // predecessors of p: pred[off[p] .. off[p+1])
    std::vector<uint8_t> ref;         // the sequential analysis (empty until sequential())
    uint64_t ref_rounds = 0;
};

uint32_t succ(uint64_t seed, uint32_t p, uint32_t i, uint32_t n) {
    return uint32_t((mix64((seed << 40) ^ (uint64_t{p} << 3) ^ i) >> 32) * n >> 32);
}

std::shared_ptr<Graph> make_graph(uint32_t n, uint64_t seed) {
    auto g = std::make_shared<Graph>();
    g->n = n;
    g->deg.resize(n);
    g->off.assign(size_t{n} + 1, 0);
    for (uint32_t p = 0; p < n; ++p) {
        g->deg[p] = uint8_t(mix64(seed * 0x51ull + p) % 5);
        for (uint32_t i = 0; i < g->deg[p]; ++i) ++g->off[succ(seed, p, i, n) + 1];
    }
    for (uint32_t p = 0; p < n; ++p) g->off[p + 1] += g->off[p];
    g->pred.resize(g->off[n]);
    std::vector<uint32_t> at(g->off.begin(), g->off.end() - 1);
    for (uint32_t p = 0; p < n; ++p)
        for (uint32_t i = 0; i < g->deg[p]; ++i) g->pred[at[succ(seed, p, i, n)]++] = p;
    return g;
}

class Ra final : public Instance {
public:
    explicit Ra(const Setup& s)
        : rt_(s.rt), net_(s.net), variant_(s.variant), shared_(s.shared), h_(s.handler_base),
          combine_(s.variant != Variant::kOriginal),
          opts_(s.variant == Variant::kGrid ? s.opt.grid_opts : uint32_t{kGridTreeSync | kGridRings | kGridAutoflush}),
          batch_(opts_ & kGridGrain ? 2 * kBatch : kBatch),
          fam_(opts_ & kGridTreeSync ? group::Family::kHier : group::Family::kFlat),
          world_(s.rt, s.topo, group::Options{group::Family::kHier, 64u << 10, s.opt.timeout_ms, s.group_base}) {
        if (!shared_) shared_ = make_graph(positions_of(s.opt.size), s.opt.seed);
        g_ = std::static_pointer_cast<Graph>(shared_);
        value_.assign(g_->n, kDrawn);
        left_.assign(g_->deg.begin(), g_->deg.end());
        ranks_ = uint32_t{s.rt.clusters()} * s.rt.threads();
        ts_ = std::vector<Thread>(s.rt.threads());
        // Now, not in run(): a faster cluster's batch may arrive while this thread is still in the
        // barrier before run().
        for (Thread& t : ts_) {
            t.out.assign(combine_ ? ranks_ : 0, {});
            for (auto& b : t.out) b.reserve(batch_);
            t.split.assign(s.rt.threads(), {});
        }
        s.rt.set_handler(h_, &Ra::on_updates, this);
        s.rt.set_handler(h_ + 1, &Ra::on_cluster_batch, this);
    }

    bool run(Ctx& c) override {
        Thread& me = ts_[c.thread];
        group::Group& g = world_.group(c.thread);
        std::vector<uint64_t> counts(c.ranks + 1), sums(c.ranks + 1);
        std::vector<uint32_t> frontier;
        for (uint32_t p = 0; p < g_->n; ++p)
            if (owner(p) == c.rank && g_->deg[p] == 0) {
                value_[p] = kLost;
                frontier.push_back(p);
            }
        uint64_t expected = 0, gen = 0;
        for (;; ++me.rounds) {
            std::fill(counts.begin(), counts.end(), 0);
            uint32_t since_poll = 0;
            for (uint32_t p : frontier) {
                const uint32_t flag = value_[p] == kLost ? kLostBit : 0;
                for (uint32_t k = g_->off[p]; k < g_->off[p + 1]; ++k)
                    if (!route(c, me, g_->pred[k] | flag, counts)) return false;
                // grid, polling: take arrivals while resolving (their batches forwarded early, a
                // waiting sender answered), every kPollEvery updates (a poll costs about as much).
                if ((opts_ & kGridPolling) && (since_poll += g_->off[p + 1] - g_->off[p]) >= kPollEvery) {
                    since_poll = 0;
                    c.ep.poll();
                }
            }
            if (combine_) {
                // Without autoflush the partly filled buffers go out only when the sync message
                // arrives (a barrier first): one more synchronization per round.
                if (!(opts_ & kGridAutoflush) && !g.barrier(fam_)) return c.fail("ra: barrier: " + g.last_error());
                for (uint32_t r = 0; r < c.ranks; ++r)
                    if (!flush(c, me, r, counts)) return false;
            }
            counts[c.ranks] = frontier.size();
            frontier.clear();
            if (!g.allreduce(std::span<const uint64_t>(counts), std::span<uint64_t>(sums), group::Op::kSum, fam_))
                return c.fail("ra: allreduce: " + g.last_error());
            if (sums[c.ranks] == 0) break;
            expected += sums[c.rank];
            // At least what was sent to it in the rounds so far: it may also have handled updates
            // of the next round from a faster sender (applied already; a late one of this round
            // is then applied in a later round: the values do not depend on the order). In the
            // last round nothing is sent, so the count of the round before it is exact.
            if (!c.wait([&] { return me.received >= expected; }, "this round's updates")) return false;
            if (combine_) {
                // Every thread 0 of this cluster has handed out its batches: take this thread's.
                if (!sync_.arrive(c, gen, "the cluster's threads after the round")) return false;
                std::vector<uint32_t> in;
                {
                    std::lock_guard<std::mutex> lk(me.inbox_mu);
                    in.swap(me.inbox);
                }
                for (uint32_t u : in) apply(me, u);
            }
            frontier.swap(me.next);
        }
        return true;
    }

    void sequential() override {
        if (!g_->ref.empty()) return;
        std::vector<uint8_t> v(g_->n, kDrawn), left(g_->deg.begin(), g_->deg.end());
        std::vector<uint32_t> q;
        for (uint32_t p = 0; p < g_->n; ++p)
            if (g_->deg[p] == 0) {
                v[p] = kLost;
                q.push_back(p);
            }
        for (size_t i = 0; i < q.size(); ++i) {
            const uint32_t p = q[i];
            for (uint32_t k = g_->off[p]; k < g_->off[p + 1]; ++k) {
                const uint32_t r = g_->pred[k];
                if (v[r] != kDrawn) continue;
                if (v[p] == kLost) {
                    v[r] = kWon;
                    q.push_back(r);
                } else if (--left[r] == 0) {
                    v[r] = kLost;
                    q.push_back(r);
                }
            }
        }
        g_->ref = std::move(v);
    }

    Check check() override {
        Check ck;
        const uint32_t lo = uint32_t{rt_.cluster()} * rt_.threads(), hi = lo + rt_.threads();
        uint64_t mine = 0, bad = 0, n[3] = {0, 0, 0};
        char b[400];
        for (uint32_t p = 0; p < g_->n; ++p) {
            const uint32_t o = owner(p);
            if (o < lo || o >= hi) continue;
            ++mine;
            ++n[value_[p] % 3];
            if (value_[p] == g_->ref[p]) continue;
            if (bad++ == 0) {
                std::snprintf(b, sizeof b, "position %u (owner rank %u): value %u, sequential %u (0 drawn, 1 won, 2 lost)",
                              p, o, value_[p], g_->ref[p]);
                ck.failure = b;
            }
        }
        std::snprintf(b, sizeof b,
                      "positions of this cluster: %" PRIu64 " (won %" PRIu64 ", lost %" PRIu64 ", drawn %" PRIu64
                      "), differing from the sequential analysis: %" PRIu64 " (tolerance 0: byte-exact)",
                      mine, n[kWon], n[kLost], n[kDrawn], bad);
        ck.what = b;
        ck.ok = bad == 0;
        ck.error = double(bad);
        return ck;
    }

    void inject_error() override {
        for (uint32_t p = 0; p < g_->n; ++p)
            if (owner(p) < rt_.threads()) {
                value_[p] = uint8_t((value_[p] + 1) % 3);
                return;
            }
    }

    void account(Net& net) override { net.add_group(world_.counters()); }

    std::string stats_json() const override {
        uint64_t w = 0, l = 0;
        for (uint8_t v : g_->ref) w += v == kWon, l += v == kLost;
        char b[256];
        std::snprintf(b, sizeof b,
                      "\"positions\":%u,\"moves\":%zu,\"won\":%" PRIu64 ",\"lost\":%" PRIu64 ",\"drawn\":%" PRIu64
                      ",\"rounds\":%" PRIu64 ",\"batch\":%u,\"grid_opts\":\"%s\"",
                      g_->n, g_->pred.size(), w, l, g_->n - w - l, ts_[0].rounds, combine_ ? batch_ : 1,
                      variant_ == Variant::kGrid ? grid_opts_string(opts_).c_str() : "");
        return b;
    }

    std::string problem() const override {
        char b[400];
        const std::string grid = "Awari's grid changes: " + grid_opts_string(opts_);
        std::snprintf(b, sizeof b,
                      "RA: retrograde analysis of a game of %u positions and %zu moves, positions owned by hash; %s%s",
                      g_->n, g_->pred.size(),
                      combine_ ? "updates combined per destination cluster through its thread 0, up to "
                               : "one message per update to its owner",
                      combine_ ? (std::to_string(batch_) + " a message" + (variant_ == Variant::kGrid ? "; " + grid : ""))
                                     .c_str()
                               : "");
        return b;
    }

private:
    struct Thread {
        std::vector<std::vector<uint32_t>> out;  // optimized: per destination rank (a cluster's thread 0: the cluster's)
        std::vector<uint32_t> next;              // positions resolved, to be sent next round
        uint64_t received = 0;                   // messages handled by this thread's handlers
        uint64_t rounds = 0;
        std::mutex inbox_mu;
        std::vector<uint32_t> inbox;  // updates handed over by the cluster's thread 0
        std::vector<std::vector<uint32_t>> split;  // thread 0: a batch's updates by owner thread
        std::vector<uint8_t> ack;                  // grid without rings: the (empty) answer to a batch
    };

    uint32_t owner(uint32_t p) const { return uint32_t((mix64(p ^ 0x5EED0000ull) >> 32) * ranks_ >> 32); }

    // On the owner's thread.
    void apply(Thread& me, uint32_t u) {
        const uint32_t q = u & ~kLostBit;
        if (q >= g_->n || value_[q] != kDrawn) return;
        if (u & kLostBit) {
            value_[q] = kWon;
            me.next.push_back(q);
        } else if (left_[q] > 0 && --left_[q] == 0) {
            value_[q] = kLost;
            me.next.push_back(q);
        }
    }

    bool route(Ctx& c, Thread& me, uint32_t u, std::vector<uint64_t>& counts) {
        const uint32_t o = owner(u & ~kLostBit);
        if (o == c.rank) {
            apply(me, u);
            return true;
        }
        if (!combine_) {
            ++counts[o];
            const RtStatus st = c.send(c.addr_of(o), h_, RtBytes{&u, sizeof u});
            return st == RtStatus::kOk || c.fail("ra: update to rank " + std::to_string(o) + ": " + iccs::to_string(st));
        }
        const uint32_t dst = o / c.threads == c.cluster ? o : o / c.threads * c.threads;  // remote: its thread 0
        me.out[dst].push_back(u);
        return me.out[dst].size() < batch_ || flush(c, me, dst, counts);
    }

    bool flush(Ctx& c, Thread& me, uint32_t dst, std::vector<uint64_t>& counts) {
        std::vector<uint32_t>& b = me.out[dst];
        if (b.empty()) return true;
        ++counts[dst];
        const bool remote = dst / c.threads != c.cluster;
        const RtBytes bytes{b.data(), uint32_t(4 * b.size())};
        // grid without rings: one send ring shared by all destinations, emulated: a batch to another
        // cluster holds it until that cluster's thread 0 took it (a request answered on arrival),
        // so a slow WAN destination stalls every other send of this thread.
        const RtStatus st = !remote                     ? c.send(c.addr_of(dst), h_, bytes)
                            : (opts_ & kGridRings) != 0 ? c.send(c.addr_of(dst), h_ + 1, bytes)
                                                        : c.request(c.addr_of(dst), h_ + 1, bytes, {}, me.ack);
        b.clear();
        return st == RtStatus::kOk || c.fail("ra: batch to rank " + std::to_string(dst) + ": " + iccs::to_string(st));
    }

    // Updates for this thread (one, or a batch from a thread of this cluster).
    static void on_updates(RtEndpoint& self, const AmMsg& m, void* ctx) {
        Ra* a = static_cast<Ra*>(ctx);
        const uint16_t t = self.self().thread;
        if (t >= a->ts_.size()) return;
        Thread& me = a->ts_[t];
        ++me.received;
        for (size_t k = 0; k + 4 <= m.data.size(); k += 4) {
            uint32_t u;
            std::memcpy(&u, m.data.data() + k, 4);
            a->apply(me, u);
        }
    }

    // On a cluster's thread 0: a batch from another cluster, for any thread of this one.
    static void on_cluster_batch(RtEndpoint& self, const AmMsg& m, void* ctx) {
        Ra* a = static_cast<Ra*>(ctx);
        const uint16_t t = self.self().thread;
        if (t >= a->ts_.size()) return;
        Thread& me = a->ts_[t];
        ++me.received;
        const uint32_t base = uint32_t{a->rt_.cluster()} * a->rt_.threads();
        for (size_t k = 0; k + 4 <= m.data.size(); k += 4) {
            uint32_t u;
            std::memcpy(&u, m.data.data() + k, 4);
            const uint32_t o = a->owner(u & ~kLostBit);
            if (o == base + t) {
                a->apply(me, u);
            } else if (o >= base && o < base + a->rt_.threads()) {
                me.split[o - base].push_back(u);
            }
        }
        for (size_t k = 0; k < me.split.size(); ++k) {  // one lock per owner and batch
            if (me.split[k].empty()) continue;
            Thread& to = a->ts_[k];
            {
                std::lock_guard<std::mutex> lk(to.inbox_mu);
                to.inbox.insert(to.inbox.end(), me.split[k].begin(), me.split[k].end());
            }
            me.split[k].clear();
        }
        if (m.req_id != 0) a->net_.reply(self, m.token(), {});  // grid without rings: the sender waits for this
    }

    Runtime& rt_;
    Net& net_;
    Variant variant_;
    std::shared_ptr<void>& shared_;
    uint16_t h_;
    bool combine_;       // optimized and grid: combined per destination cluster
    uint32_t opts_;      // GridOpt bits in effect (original and optimized: tree-sync, rings, autoflush)
    uint32_t batch_;     // updates in a combined message
    group::Family fam_;  // of the round's synchronization
    group::World world_;
    std::shared_ptr<Graph> g_;
    std::vector<uint8_t> value_;  // by position; written by its owner thread only
    std::vector<uint8_t> left_;   // successors not yet known won
    uint32_t ranks_ = 1;
    std::vector<Thread> ts_;
    LocalSync sync_;
};

}  // namespace

std::unique_ptr<Instance> make_ra(const Setup& s) { return std::make_unique<Ra>(s); }

}  // namespace iccs::widearea
