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
// original:  a synchronous broadcast: after each broadcast the sender waits for an
//            acknowledgement from every other thread before it revises on;
// optimized: asynchronous, pipelined broadcasts: the sender revises on at once (no
//            acknowledgements).
// Check: every replica of every thread of this cluster equals the sequential AC-3's domains.
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstring>

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
          world_(s.rt, s.topo, group::Options{group::Family::kHier, 64u << 10, s.opt.timeout_ms, s.group_base}) {
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
        s.rt.set_handler(h_ + 1, &Acp::on_ack, this);
    }

    bool run(Ctx& c) override {
        Thread& me = ts_[c.thread];
        group::Group& g = world_.group(c.thread);
        uint64_t expected = 0;
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
                const uint64_t acks0 = me.acks;
                if (c.bcast(h_, RtBytes{&u, sizeof u}) != RtStatus::kOk)
                    return c.fail("acp: broadcast of variable " + std::to_string(x) + ": " + c.ep.last_error());
                ++sent;
                if (!c.optimized() &&
                    !c.wait([&] { return me.acks - acks0 == c.ranks - 1; }, "the acknowledgements of a broadcast"))
                    return false;
            }
            uint64_t total = 0;
            if (!g.allreduce(std::span<const uint64_t>(&sent, 1), std::span<uint64_t>(&total, 1), group::Op::kSum))
                return c.fail("acp: allreduce: " + g.last_error());
            me.bcasts += sent;
            if (total == 0) break;
            // Every other thread's broadcasts of this round (and maybe some of the next: a late one
            // of this round is then taken in a later round; in the last round none is sent).
            expected += total - sent;
            if (!c.wait([&] { return me.received >= expected; }, "the broadcasts of this round")) return false;
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

    void account(Net& net) override { net.add_group(world_.counters()); }

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
                      variant_ == Variant::kOptimized ? "asynchronously (pipelined)"
                                                      : "synchronously (acknowledged by every thread)");
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
        uint64_t received = 0, acks = 0, bcasts = 0, revisions = 0, rounds = 0;
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

    static void on_domain(RtEndpoint& self, const AmMsg& m, void* ctx) {
        Acp* a = static_cast<Acp*>(ctx);
        const uint16_t t = self.self().thread;
        Update u;
        if (m.data.size() != sizeof u || t >= a->ts_.size()) return;
        std::memcpy(&u, m.data.data(), sizeof u);
        Thread& me = a->ts_[t];
        ++me.received;
        if (u.var < a->nw_->n) {
            const uint64_t nd = me.dom[u.var] & u.dom;
            if (nd != me.dom[u.var]) {
                me.dom[u.var] = nd;
                a->touch(me, u.var);
            }
        }
        if (a->variant_ == Variant::kOriginal) {
            const uint32_t var = u.var;
            a->net_.send(self, m.src, a->h_ + 1, RtBytes{&var, sizeof var});
        }
    }
    static void on_ack(RtEndpoint& self, const AmMsg&, void* ctx) {
        Acp* a = static_cast<Acp*>(ctx);
        const uint16_t t = self.self().thread;
        if (t < a->ts_.size()) ++a->ts_[t].acks;
    }

    Runtime& rt_;
    Net& net_;
    Variant variant_;
    std::shared_ptr<void>& shared_;
    AcpParams p_;
    uint16_t h_;
    group::World world_;
    std::shared_ptr<Network> nw_;
    uint32_t ranks_ = 1;
    std::vector<Thread> ts_;
};

}  // namespace

std::unique_ptr<Instance> make_acp(const Setup& s) { return std::make_unique<Acp>(s); }

}  // namespace iccs::widearea
