// acp.cpp: ACP, arc consistency of a generated binary constraint network (n variables with
// domains of d values as bit masks, m constraints each a seeded relation). Variable x is owned by
// rank x % ranks; every thread keeps a replica of every domain. A thread revises its dirty
// variables against their constraints (a value stays while some value of the neighbour's domain
// supports it); when a domain shrinks, the owner broadcasts the new domain to every other thread,
// and every receiver intersects its replica and marks its own variables next to it dirty. Rounds:
// each thread revises until it has nothing dirty, the number of broadcasts is summed (group/
// allreduce), each thread waits for the broadcasts of the others, and the run stops at a round
// without a broadcast. The result (the largest arc-consistent domains) does not depend on the
// order of the revisions.
//
// original:    as Orca ran it: each reduction goes through the totally ordered broadcast (group/'s
//              OrderedBcast, one central sequencer: cluster 0's service endpoint); every thread
//              delivers every broadcast in the one order, and the writer waits until its own comes
//              back to it in that order (Orca's write on a replicated object), delivering the ones
//              before it meanwhile; no acknowledgement from the receivers. The study made no
//              change to ACP (its Table 5: "-"), so there is no optimized variant.
// async-bcast: ours: unordered broadcasts straight to every thread (one message each), the sender
//              revises on at once.
// Check: every replica of every thread of this cluster equals the sequential AC-3's domains.
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "ordered.hpp"
#include "wb_common.hpp"

namespace iccs::widearea {

namespace {

struct AcpParams {
    uint32_t vars, values, constraints;  // values <= 64
    uint32_t support_den;                // a pair of values is allowed with probability 1 / support_den
};
AcpParams params_of(Size s) { return s == Size::kTest ? AcpParams{300, 32, 1200, 7} : AcpParams{3000, 64, 15000, 12}; }

struct Arc {
    uint32_t to;       // the neighbour
    uint32_t rows;     // index into Network::rows: rows[rows + a] = the neighbour's values supporting a
};

struct Network {
    uint32_t n = 0, d = 0;
    uint64_t full = 0;
    std::vector<std::vector<Arc>> arcs;  // by variable
    std::vector<uint64_t> rows;
    std::vector<uint64_t> ref;           // the sequential AC-3's domains
    uint64_t ref_revisions = 0;

    // x's domain against all its arcs under domains `dom`.
    uint64_t revise(uint32_t x, const uint64_t* dom) const {
        uint64_t keep = 0;
        for (uint64_t left = dom[x]; left;) {
            const uint32_t a = uint32_t(std::countr_zero(left));
            left &= left - 1;
            bool ok = true;
            for (const Arc& arc : arcs[x])
                if ((rows[arc.rows + a] & dom[arc.to]) == 0) {
                    ok = false;
                    break;
                }
            if (ok) keep |= uint64_t{1} << a;
        }
        return keep;
    }
};

std::shared_ptr<Network> make_network(const AcpParams& p, uint64_t seed) {
    auto net = std::make_shared<Network>();
    net->n = p.vars;
    net->d = p.values;
    net->full = p.values == 64 ? ~0ull : (uint64_t{1} << p.values) - 1;
    net->arcs.resize(p.vars);
    Rng r(seed * 0xAC9ull + 5);
    for (uint32_t k = 0; k < p.constraints; ++k) {
        const uint32_t x = r.below(p.vars);
        uint32_t y = r.below(p.vars - 1);
        if (y >= x) ++y;
        const uint32_t fw = uint32_t(net->rows.size());
        net->rows.resize(fw + 2 * size_t{p.values}, 0);
        const uint32_t bw = fw + p.values;
        for (uint32_t a = 0; a < p.values; ++a)
            for (uint32_t b = 0; b < p.values; ++b)
                if (r.below(p.support_den) == 0) {
                    net->rows[fw + a] |= uint64_t{1} << b;
                    net->rows[bw + b] |= uint64_t{1} << a;
                }
        net->arcs[x].push_back(Arc{y, fw});
        net->arcs[y].push_back(Arc{x, bw});
    }
    return net;
}

class Acp final : public Instance {
public:
    explicit Acp(const Setup& s)
        : rt_(s.rt), net_(s.net), variant_(s.variant), shared_(s.shared), p_(params_of(s.opt.size)), h_(s.handler_base),
          world_(s.rt, s.topo, group::Options{group::Family::kHier, 64u << 10, s.opt.timeout_ms, s.group_base}),
          ob_(s.rt, s.topo, group::Sequencer::kCentral, s.ordered_base) {
        if (!shared_) shared_ = make_network(p_, s.opt.seed);
        nw_ = std::static_pointer_cast<Network>(shared_);
        ranks_ = uint32_t{s.rt.clusters()} * s.rt.threads();
        ts_.resize(s.rt.threads());
        // Now, not in run(): a faster thread's broadcast may arrive before this one's run().
        for (uint16_t t = 0; t < s.rt.threads(); ++t) {
            Thread& me = ts_[t];
            me.rank = uint32_t{s.rt.cluster()} * s.rt.threads() + t;
            me.dom.assign(nw_->n, nw_->full);
            me.dirty.assign(nw_->n, 0);
            for (uint32_t x = me.rank; x < nw_->n; x += ranks_) mark(me, x);
        }
        s.rt.set_handler(h_, &Acp::on_domain, this);
    }

    bool run(Ctx& c) override {
        Thread& me = ts_[c.thread];
        group::Group& g = world_.group(c.thread);
        const bool ordered = variant_ == Variant::kOriginal;
        uint64_t expected = 0;  // broadcasts of the run so far this thread must have taken
        for (;; ++me.rounds) {
            uint64_t sent = 0;
            while (!me.work.empty()) {
                const uint32_t x = me.work.back();
                me.work.pop_back();
                me.dirty[x] = 0;
                ++me.revisions;
                const uint64_t nd = nw_->revise(x, me.dom.data());
                if (nd == me.dom[x]) continue;
                me.dom[x] = nd;
                touch(me, x);
                const Update u{x, 0, nd};
                ++sent;
                if (!ordered) {
                    if (c.bcast(h_, RtBytes{&u, sizeof u}) != RtStatus::kOk)
                        return c.fail("acp: broadcast of variable " + std::to_string(x) + ": " + c.ep.last_error());
                    continue;
                }
                if (!ob_.send(c.thread, &u, sizeof u))
                    return c.fail("acp: ordered broadcast of variable " + std::to_string(x) + ": " + ob_.last_error());
                // Orca's write: done when this thread has delivered it (and every one before it).
                const uint64_t mine = ++me.own_sent;
                while (me.own_delivered < mine)
                    if (!deliver_one(c, me)) return false;
            }
            uint64_t total = 0;
            if (!g.allreduce(std::span<const uint64_t>(&sent, 1), std::span<uint64_t>(&total, 1), group::Op::kSum))
                return c.fail("acp: allreduce: " + g.last_error());
            me.bcasts += sent;
            if (total == 0) break;
            // Every broadcast of this round (async-bcast: maybe some of the next: a late one of this
            // round is then taken in a later round; in the last round none is sent).
            if (ordered) {
                expected += total;  // every thread delivers every broadcast, its own too
                while (me.delivered < expected)
                    if (!deliver_one(c, me)) return false;
            } else {
                expected += total - sent;
                if (!c.wait([&] { return me.received >= expected; }, "the broadcasts of this round")) return false;
            }
        }
        return true;
    }

    void sequential() override {
        if (!nw_->ref.empty()) return;
        std::vector<uint64_t> dom(nw_->n, nw_->full);
        std::vector<uint8_t> queued(nw_->n, 1);
        std::vector<uint32_t> q(nw_->n);
        for (uint32_t x = 0; x < nw_->n; ++x) q[x] = x;
        for (size_t i = 0; i < q.size(); ++i) {
            const uint32_t x = q[i];
            queued[x] = 0;
            ++nw_->ref_revisions;
            const uint64_t nd = nw_->revise(x, dom.data());
            if (nd == dom[x]) continue;
            dom[x] = nd;
            for (const Arc& a : nw_->arcs[x])
                if (!queued[a.to]) {
                    queued[a.to] = 1;
                    q.push_back(a.to);
                }
        }
        nw_->ref = std::move(dom);
    }

    Check check() override {
        Check ck;
        uint64_t bad = 0, values = 0, empty = 0;
        char b[400];
        for (uint32_t x = 0; x < nw_->n; ++x) {
            values += uint64_t(std::popcount(nw_->ref[x]));
            empty += nw_->ref[x] == 0;
        }
        for (const Thread& me : ts_)
            for (uint32_t x = 0; x < nw_->n; ++x) {
                if (me.dom[x] == nw_->ref[x]) continue;
                if (bad++ == 0) {
                    std::snprintf(b, sizeof b,
                                  "rank %u's domain of variable %u (owner rank %u) = 0x%016" PRIx64 ", sequential 0x%016" PRIx64,
                                  me.rank, x, x % ranks_, me.dom[x], nw_->ref[x]);
                    ck.failure = b;
                }
            }
        std::snprintf(b, sizeof b,
                      "every replica of this cluster's %u threads: domains differing from the sequential AC-3's: "
                      "%" PRIu64 " (tolerance 0); sequential: %" PRIu64 " of %" PRIu64 " values left, %" PRIu64
                      " empty domains",
                      rt_.threads(), bad, values, uint64_t{nw_->n} * nw_->d, empty);
        ck.what = b;
        ck.ok = bad == 0;
        ck.error = double(bad);
        return ck;
    }

    void inject_error() override { ts_[0].dom[0] ^= 1; }

    void account(Net& net) override {
        net.add_group(world_.counters());
        net.add_ordered(ob_.counters());
    }

    std::string stats_json() const override {
        uint64_t bc = 0, rev = 0;
        for (const Thread& t : ts_) bc += t.bcasts, rev += t.revisions;
        char b[320];
        std::snprintf(b, sizeof b,
                      "\"vars\":%u,\"values\":%u,\"constraints\":%u,\"rounds\":%" PRIu64 ",\"bcasts_cluster0\":%" PRIu64
                      ",\"revisions_cluster0\":%" PRIu64 ",\"seq_revisions\":%" PRIu64,
                      p_.vars, p_.values, p_.constraints, ts_[0].rounds, bc, rev, nw_->ref_revisions);
        return b;
    }

    std::string problem() const override {
        char b[320];
        std::snprintf(b, sizeof b,
                      "ACP: arc consistency of %u variables of %u values, %u random constraints (a pair allowed with "
                      "probability 1/%u); domain reductions broadcast %s",
                      p_.vars, p_.values, p_.constraints, p_.support_den,
                      variant_ == Variant::kAsyncBcast ? "asynchronously to every thread (ours: async-bcast)"
                                                       : "through the totally ordered broadcast (central sequencer), "
                                                         "the writer waiting for its own");
        return b;
    }

private:
    struct Update {
        uint32_t var, pad;
        uint64_t dom;
    };
    struct Thread {
        uint32_t rank = 0;
        std::vector<uint64_t> dom;     // this thread's replica
        std::vector<uint8_t> dirty;    // own variables to revise
        std::vector<uint32_t> work;    // the dirty ones
        uint64_t received = 0, bcasts = 0, revisions = 0, rounds = 0;
        uint64_t delivered = 0, own_sent = 0, own_delivered = 0;  // original: the ordered broadcast
        std::vector<uint8_t> msg;
    };

    void mark(Thread& me, uint32_t x) {
        if (me.dirty[x]) return;
        me.dirty[x] = 1;
        me.work.push_back(x);
    }
    // x's domain shrank: this thread's variables next to it are dirty.
    void touch(Thread& me, uint32_t x) {
        for (const Arc& a : nw_->arcs[x])
            if (a.to % ranks_ == me.rank) mark(me, a.to);
    }

    // A domain reduction from another thread: into this thread's replica.
    void intersect(Thread& me, const Update& u) {
        if (u.var >= nw_->n) return;
        const uint64_t nd = me.dom[u.var] & u.dom;
        if (nd != me.dom[u.var]) {
            me.dom[u.var] = nd;
            touch(me, u.var);
        }
    }

    // original: the next broadcast in the total order, into this thread's replica.
    bool deliver_one(Ctx& c, Thread& me) {
        RtAddr from{};
        if (!ob_.deliver(c.thread, me.msg, &from, nullptr, c.opt.timeout_ms * 1000))
            return c.fail("acp: waiting for a broadcast: " + ob_.last_error());
        ++me.delivered;
        Update u;
        if (me.msg.size() != sizeof u) return c.fail("acp: a broadcast of " + std::to_string(me.msg.size()) + " bytes");
        std::memcpy(&u, me.msg.data(), sizeof u);
        if (from == c.ep.self()) ++me.own_delivered;  // applied when it was made
        else intersect(me, u);
        return true;
    }

    static void on_domain(RtEndpoint& self, const AmMsg& m, void* ctx) {
        Acp* a = static_cast<Acp*>(ctx);
        const uint16_t t = self.self().thread;
        Update u;
        if (m.data.size() != sizeof u || t >= a->ts_.size()) return;
        std::memcpy(&u, m.data.data(), sizeof u);
        Thread& me = a->ts_[t];
        ++me.received;
        a->intersect(me, u);
    }

    Runtime& rt_;
    Net& net_;
    Variant variant_;
    std::shared_ptr<void>& shared_;
    AcpParams p_;
    uint16_t h_;
    group::World world_;
    group::OrderedBcast ob_;  // original
    std::shared_ptr<Network> nw_;
    uint32_t ranks_ = 1;
    std::vector<Thread> ts_;
};

}  // namespace

std::unique_ptr<Instance> make_acp(const Setup& s) { return std::make_unique<Acp>(s); }

}  // namespace iccs::widearea
