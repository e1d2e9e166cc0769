// ra.cpp: RA, retrograde analysis of a game database. The game: N positions, position p has
// 0..4 moves to seeded pseudo-random positions (cycles included); a position without moves is
// lost for the player to move. Retrograde analysis computes every position's value (won, lost,
// drawn) backwards from the terminal positions: a position with a lost successor is won; one
// whose successors are all won is lost; what remains is drawn. Positions are owned by threads by
// hash (the cluster from one hash, the thread in it from another, so a position's cluster does
// not depend on the threads per cluster); when a thread resolves a position it sends "update
// predecessor" (4 bytes: the predecessor and whether the successor was lost) to the owner of each
// predecessor: many small irregular asynchronous messages, combined. The work goes in rounds:
// each thread resolves its frontier, then the message counts per destination are summed (group/
// allreduce), each thread waits for what was sent to it in the round, and the updates received
// form the next frontier; it stops at a round whose frontiers are all empty. Every message carries
// its round, and one that arrives a round early waits for its round, so a position's round (and so
// every message count) depends on the graph only, not on timing; the values do not depend on the
// order of the updates.
//
// original:  updates combined per destination thread (the study's original RA already combined
//            messages per destination processor): a buffer of up to kBatch updates per
//            destination, flushed when full or at the round's end;
// optimized: the study's change: updates for another cluster combined per destination cluster in
//            one buffer of the sending cluster (its designated combiner: the cluster's threads
//            share memory, so they fill one buffer per destination cluster; a full buffer is sent
//            at once, the rest by the cluster's thread 0 at the round's end) to that cluster's
//            thread 0, which hands each update to its owner (itself, or the owner thread's inbox in
//            shared memory); updates for another thread of the same cluster as in the original.
//            Its WAN messages do not depend on the threads per cluster.
// grid:      (issue 20, Awari on a grid, Verstoep et al.) per sending thread, updates for another
//            cluster combined per destination cluster (to its thread 0), with five changes, each
//            switchable (--grid-opts): tree-sync: the round's synchronization (and termination
//            test) by a tree (group/ hierarchical), else flat; rings: a send ring per destination
//            (the runtime's own), else one shared ring, emulated: a batch to another cluster is a
//            request that holds this thread until that cluster took it; polling: poll for arrivals
//            every kPollEvery updates while resolving, else only at the synchronization; grain:
//            8 KiB batches, else 4 KiB; autoflush: flush partly filled buffers at the round's end
//            by itself, else only when the sync message arrives (a barrier first).
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
          opts_(s.variant == Variant::kGrid ? s.opt.grid_opts : uint32_t{kGridTreeSync | kGridRings | kGridAutoflush}),
          batch_(opts_ & kGridGrain ? 2 * kBatch : kBatch),
          fam_(opts_ & kGridTreeSync ? group::Family::kHier : group::Family::kFlat),
          world_(s.rt, s.topo, group::Options{group::Family::kHier, 64u << 10, s.opt.timeout_ms, s.group_base}) {
        if (!shared_) shared_ = make_graph(positions_of(s.opt.size), s.opt.seed);
        g_ = std::static_pointer_cast<Graph>(shared_);
        value_.assign(g_->n, kDrawn);
        left_.assign(g_->deg.begin(), g_->deg.end());
        clusters_ = s.rt.clusters();
        threads_ = s.rt.threads();
        ranks_ = uint32_t{clusters_} * threads_;
        ts_ = std::vector<Thread>(threads_);
        cbuf_ = std::vector<ClusterBuffer>(variant_ == Variant::kOptimized ? clusters_ : 0);
        // Now, not in run(): a faster cluster's batch may arrive while this thread is still in the
        // barrier before run().
        for (Thread& t : ts_) {
            t.out.assign(ranks_, {});
            t.stage.assign(variant_ == Variant::kOptimized ? clusters_ : 0, {});
            t.split.assign(threads_, {});
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
        uint64_t gen = 0;
        const bool to_cluster = variant_ != Variant::kOriginal;  // batches to another cluster's thread 0
        for (;; ++me.rounds) {
            // This round's messages are taken from now on; those that came a round early first.
            ++me.round;
            me.got = 0;
            std::vector<Stashed> early;
            early.swap(me.early);
            for (const Stashed& e : early) take(me, e.cluster_batch, e.updates.data(), e.updates.size());
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
            // Without autoflush (grid) the partly filled buffers go out only when the sync message
            // arrives (a barrier first): one more synchronization per round.
            if (to_cluster && !(opts_ & kGridAutoflush) && !g.barrier(fam_)) return c.fail("ra: barrier: " + g.last_error());
            for (uint32_t r = 0; r < c.ranks; ++r)
                if (!flush(c, me, r, counts)) return false;
            if (variant_ == Variant::kOptimized) {
                // The cluster's combining buffers: every thread's staged updates in, then thread 0
                // sends what is left of each (at most one partly filled message per destination
                // cluster and round, whatever the threads per cluster).
                for (uint16_t dc = 0; dc < clusters_; ++dc)
                    if (!stage_out(c, me, dc, counts)) return false;
                if (!sync_.arrive(c, gen, "the cluster's threads before its combining buffers go out")) return false;
                if (c.thread == 0)
                    for (uint16_t dc = 0; dc < clusters_; ++dc)
                        if (!send_cluster(c, dc, 1, counts)) return false;
            }
            counts[c.ranks] = frontier.size();
            frontier.clear();
            if (!g.allreduce(std::span<const uint64_t>(counts), std::span<uint64_t>(sums), group::Op::kSum, fam_))
                return c.fail("ra: allreduce: " + g.last_error());
            if (sums[c.ranks] == 0) break;
            if (!c.wait([&] { return me.got >= sums[c.rank]; }, "this round's updates")) return false;
            if (me.got != sums[c.rank])
                return c.fail("ra: round " + std::to_string(me.round) + ": " + std::to_string(me.got) +
                              " messages taken, " + std::to_string(sums[c.rank]) + " sent to this thread");
            if (to_cluster) {
                // Every thread 0 of this cluster has handed out this round's batches: take this thread's.
                if (!sync_.arrive(c, gen, "the cluster's threads after the round")) return false;
                std::vector<uint32_t> in;
                {
                    std::lock_guard<std::mutex> lk(me.inbox_mu);
                    in.swap(me.inbox[me.round & 1]);
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
        uint64_t dropped = 0;
        for (const Thread& t : ts_) dropped += t.dropped;
        std::snprintf(b, sizeof b,
                      "positions of this cluster: %" PRIu64 " (won %" PRIu64 ", lost %" PRIu64 ", drawn %" PRIu64
                      "), differing from the sequential analysis: %" PRIu64 " (tolerance 0: byte-exact); messages of "
                      "an unexpected round: %" PRIu64,
                      mine, n[kWon], n[kLost], n[kDrawn], bad, dropped);
        ck.what = b;
        if (dropped && ck.failure.empty()) ck.failure = std::to_string(dropped) + " messages of an unexpected round";
        ck.ok = bad == 0 && dropped == 0;
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
                      g_->n, g_->pred.size(), w, l, g_->n - w - l, ts_[0].rounds, batch_,
                      variant_ == Variant::kGrid ? grid_opts_string(opts_).c_str() : "");
        return b;
    }

    std::string problem() const override {
        const std::string how =
            variant_ == Variant::kOriginal ? "updates combined per destination thread"
            : variant_ == Variant::kOptimized
                ? "updates for another cluster combined per destination cluster in one buffer of the sending cluster"
                : "updates for another cluster combined per sending thread and destination cluster; Awari's grid "
                  "changes: " + grid_opts_string(opts_);
        char b[400];
        std::snprintf(b, sizeof b,
                      "RA: retrograde analysis of a game of %u positions and %zu moves, positions owned by hash; %s, "
                      "up to %u a message",
                      g_->n, g_->pred.size(), how.c_str(), batch_);
        return b;
    }

private:
    static constexpr uint32_t kStage = 64;  // optimized: a thread's updates per destination cluster before they go into the shared buffer
    struct Stashed {
        bool cluster_batch;
        std::vector<uint32_t> updates;
    };
    struct Thread {
        std::vector<std::vector<uint32_t>> out;    // per destination rank (grid: a remote cluster's thread 0 for the cluster)
        std::vector<std::vector<uint32_t>> stage;  // optimized: per destination cluster, not yet in the shared buffer
        std::vector<uint32_t> next;                // positions resolved, to be sent next round
        uint64_t round = 0;                        // the round whose messages this thread takes (1, 2, ...)
        uint64_t got = 0;                          // messages of this round taken
        std::vector<Stashed> early;                // messages of the next round, taken when it starts
        uint64_t rounds = 0, dropped = 0;
        std::mutex inbox_mu;
        std::vector<uint32_t> inbox[2];  // updates handed over by the cluster's thread 0, by round parity
        std::vector<std::vector<uint32_t>> split;  // thread 0: a batch's updates by owner thread
        std::vector<uint32_t> scratch;             // optimized: a message taken out of a cluster buffer
        std::vector<uint8_t> ack;                  // grid without rings: the (empty) answer to a batch
    };
    // optimized: the cluster's combining buffer for one destination cluster.
    struct ClusterBuffer {
        std::mutex mu;
        std::vector<uint32_t> updates;
    };

    uint32_t owner(uint32_t p) const {
        const uint32_t cl = uint32_t((mix64(p ^ 0x5EED0000ull) >> 32) * clusters_ >> 32);
        return cl * threads_ + uint32_t((mix64(p ^ 0x7EAD0000ull) >> 32) * threads_ >> 32);
    }

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
        const uint16_t oc = uint16_t(o / c.threads);
        if (variant_ == Variant::kOptimized && oc != c.cluster) {
            std::vector<uint32_t>& st = me.stage[oc];
            st.push_back(u);
            return st.size() < kStage || stage_out(c, me, oc, counts);
        }
        const uint32_t dst = variant_ == Variant::kGrid && oc != c.cluster ? uint32_t{oc} * c.threads : o;
        me.out[dst].push_back(u);
        return me.out[dst].size() < batch_ || flush(c, me, dst, counts);
    }

    // The round's number, then the updates: one message.
    bool send_updates(Ctx& c, uint32_t dst, uint16_t handler, const std::vector<uint32_t>& b, size_t n,
                      std::vector<uint8_t>* wait_ack, std::vector<uint64_t>& counts) {
        ++counts[dst];
        const uint32_t round = uint32_t(ts_[c.thread].round);
        const RtBytes hdr{&round, sizeof round}, bytes{b.data(), uint32_t(4 * n)};
        const RtStatus st = wait_ack ? c.request(c.addr_of(dst), handler, hdr, bytes, *wait_ack)
                                     : c.send(c.addr_of(dst), handler, hdr, bytes);
        return st == RtStatus::kOk || c.fail("ra: batch to rank " + std::to_string(dst) + ": " + iccs::to_string(st));
    }

    bool flush(Ctx& c, Thread& me, uint32_t dst, std::vector<uint64_t>& counts) {
        std::vector<uint32_t>& b = me.out[dst];
        if (b.empty()) return true;
        const bool remote = dst / c.threads != c.cluster;
        // grid without rings: one send ring shared by all destinations, emulated: a batch to another
        // cluster holds it until that cluster's thread 0 took it (a request answered on arrival),
        // so a slow WAN destination stalls every other send of this thread.
        const bool ok = send_updates(c, dst, remote ? h_ + 1 : h_, b, b.size(),
                                     remote && !(opts_ & kGridRings) ? &me.ack : nullptr, counts);
        b.clear();
        return ok;
    }

    // optimized: this thread's staged updates for cluster dc into the cluster's buffer; full
    // messages of it go out at once.
    bool stage_out(Ctx& c, Thread& me, uint16_t dc, std::vector<uint64_t>& counts) {
        std::vector<uint32_t>& st = me.stage[dc];
        if (st.empty()) return true;
        {
            std::lock_guard<std::mutex> lk(cbuf_[dc].mu);
            cbuf_[dc].updates.insert(cbuf_[dc].updates.end(), st.begin(), st.end());
        }
        st.clear();
        return send_cluster(c, dc, batch_, counts);
    }

    // optimized: while the buffer for cluster dc holds at least `min` updates, one message of up to
    // batch_ of them to that cluster's thread 0 (min = batch_: full messages; 1: everything).
    bool send_cluster(Ctx& c, uint16_t dc, uint32_t min, std::vector<uint64_t>& counts) {
        std::vector<uint32_t>& b = ts_[c.thread].scratch;
        for (;;) {
            {
                std::lock_guard<std::mutex> lk(cbuf_[dc].mu);
                std::vector<uint32_t>& all = cbuf_[dc].updates;
                if (all.size() < min || all.empty()) return true;
                const size_t n = std::min<size_t>(all.size(), batch_);
                b.assign(all.begin(), all.begin() + ptrdiff_t(n));
                all.erase(all.begin(), all.begin() + ptrdiff_t(n));
            }
            const bool ok = send_updates(c, uint32_t{dc} * c.threads, h_ + 1, b, b.size(), nullptr, counts);
            b.clear();
            if (!ok) return false;
        }
    }

    // A message of this thread's current round: taken now; of the next round: kept for it.
    // Returns false for any other round (counted: the check fails).
    static bool accept(Thread& me, const AmMsg& m, bool cluster_batch, const uint32_t*& u, size_t& n) {
        uint32_t round = 0;
        if (m.data.size() < 4 || m.data.size() % 4) return ++me.dropped, false;
        std::memcpy(&round, m.data.data(), 4);
        n = m.data.size() / 4 - 1;
        u = reinterpret_cast<const uint32_t*>(m.data.data() + 4);
        if (round == me.round) return true;
        if (round == me.round + 1) {
            me.early.push_back(Stashed{cluster_batch, std::vector<uint32_t>(n)});
            std::memcpy(me.early.back().updates.data(), u, 4 * n);
        } else {
            ++me.dropped;
        }
        return false;
    }

    // A message of this thread's round: its updates for this thread (or, a cluster batch on
    // thread 0, for the cluster's threads).
    void take(Thread& me, bool cluster_batch, const uint32_t* u, size_t n) {
        ++me.got;
        if (!cluster_batch) {
            for (size_t k = 0; k < n; ++k) apply(me, u[k]);
            return;
        }
        const uint32_t base = uint32_t{rt_.cluster()} * threads_;
        for (size_t k = 0; k < n; ++k) {
            const uint32_t o = owner(u[k] & ~kLostBit);
            if (o == base + uint32_t(&me - ts_.data())) {
                apply(me, u[k]);
            } else if (o >= base && o < base + threads_) {
                me.split[o - base].push_back(u[k]);
            }
        }
        for (size_t k = 0; k < me.split.size(); ++k) {  // one lock per owner and batch
            if (me.split[k].empty()) continue;
            Thread& to = ts_[k];
            {
                std::lock_guard<std::mutex> lk(to.inbox_mu);
                to.inbox[me.round & 1].insert(to.inbox[me.round & 1].end(), me.split[k].begin(), me.split[k].end());
            }
            me.split[k].clear();
        }
    }

    // Updates for this thread (one message from a thread of this cluster, or, in the original, from
    // anywhere).
    static void on_updates(RtEndpoint& self, const AmMsg& m, void* ctx) {
        Ra* a = static_cast<Ra*>(ctx);
        const uint16_t t = self.self().thread;
        if (t >= a->ts_.size()) return;
        Thread& me = a->ts_[t];
        const uint32_t* u = nullptr;
        size_t n = 0;
        if (accept(me, m, false, u, n)) a->take(me, false, u, n);
    }

    // On a cluster's thread 0: a batch from another cluster, for any thread of this one.
    static void on_cluster_batch(RtEndpoint& self, const AmMsg& m, void* ctx) {
        Ra* a = static_cast<Ra*>(ctx);
        const uint16_t t = self.self().thread;
        if (t >= a->ts_.size()) return;
        Thread& me = a->ts_[t];
        const uint32_t* u = nullptr;
        size_t n = 0;
        if (accept(me, m, true, u, n)) a->take(me, true, u, n);
        if (m.req_id != 0) a->net_.reply(self, m.token(), {});  // grid without rings: the sender waits for this
    }

    Runtime& rt_;
    Net& net_;
    Variant variant_;
    std::shared_ptr<void>& shared_;
    uint16_t h_;
    uint32_t opts_;      // GridOpt bits in effect (original and optimized: tree-sync, rings, autoflush)
    uint32_t batch_;     // updates in a combined message
    group::Family fam_;  // of the round's synchronization
    group::World world_;
    std::shared_ptr<Graph> g_;
    std::vector<uint8_t> value_;  // by position; written by its owner thread only
    std::vector<uint8_t> left_;   // successors not yet known won
    uint16_t clusters_ = 1, threads_ = 1;
    uint32_t ranks_ = 1;
    std::vector<Thread> ts_;
    std::vector<ClusterBuffer> cbuf_;  // optimized: by destination cluster
    LocalSync sync_;
};

}  // namespace

std::unique_ptr<Instance> make_ra(const Setup& s) { return std::make_unique<Ra>(s); }

}  // namespace iccs::widearea
