// water_wa.cpp: Water, an n-body step loop in the pattern of SPLASH Water-Nsquared: the molecules
// in contiguous blocks over the ranks; each step every rank fetches the positions of the ranks in
// its half shell (the next floor((P-1)/2) ranks, and rank + P/2 for the lower half when P is even:
// every pair of blocks once), computes the pair forces of its block with itself and with those
// blocks, sends each of them its force updates, waits for its own, and integrates its molecules.
// Molecules interact by a softened repulsive force; positions and velocities start from the seed.
//
// original:  every fetch is an RPC to the owner, every update one message to the owner, whatever
//            the site (the study's Orca program: an RPC per remote process's data and update).
// optimized: the cluster cache (Bal et al.): for each remote rank one coordinator cluster in the
//            fetching site (the site's clusters take turns by rank) fetches its positions once
//            over the WAN and serves the site's requests; the updates of the site's ranks for a
//            remote rank are summed at that coordinator and cross the WAN once.
// Ranks of the same cluster read each other's positions from shared memory (they are one
// process); everything else is a message, counted. Sums arrive in any order: the check compares
// the positions with the sequential run within a stated tolerance.
#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "widearea.hpp"

namespace iccs::widearea {

namespace {

struct WaterParams {
    uint32_t mols, steps;
};
WaterParams water_params(Size s) { return s == Size::kTest ? WaterParams{256, 3} : WaterParams{8192, 4}; }

constexpr double kDt = 1e-3, kSoft = 0.05;

// Pair force on i from j (and minus it on j).
inline void pair_force(const double* xi, const double* xj, double* fi, double* fj) {
    const double dx = xi[0] - xj[0], dy = xi[1] - xj[1], dz = xi[2] - xj[2];
    const double r2 = dx * dx + dy * dy + dz * dz + kSoft;
    const double s = 1.0 / (r2 * r2);
    fi[0] += dx * s, fi[1] += dy * s, fi[2] += dz * s;
    fj[0] -= dx * s, fj[1] -= dy * s, fj[2] -= dz * s;
}

inline void integrate(double* x, double* v, const double* f, size_t n) {
    for (size_t k = 0; k < 3 * n; ++k) {
        v[k] += f[k] * kDt;
        x[k] += v[k] * kDt;
    }
}

struct Start {
    std::vector<double> x, v;
};
Start start_of(uint32_t m, uint64_t seed) {
    Start s;
    s.x.resize(size_t{m} * 3);
    s.v.resize(size_t{m} * 3);
    uint64_t r = seed * 0x9E3779B97F4A7C15ull + 11;
    auto rnd = [&r] {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        return double(r >> 11) / double(1ull << 53);
    };
    const uint32_t side = uint32_t(std::ceil(std::cbrt(double(m))));
    for (uint32_t i = 0; i < m; ++i) {
        const uint32_t a = i % side, b = (i / side) % side, c = i / (side * side);
        s.x[3 * i] = a + 0.3 * rnd(), s.x[3 * i + 1] = b + 0.3 * rnd(), s.x[3 * i + 2] = c + 0.3 * rnd();
        for (int k = 0; k < 3; ++k) s.v[3 * i + k] = rnd() - 0.5;
    }
    return s;
}

class WaterWa final : public Instance {
public:
    explicit WaterWa(const Setup& s)
        : rt_(s.rt), topo_(s.topo), net_(s.net), variant_(s.variant), shared_(s.shared), p_(water_params(s.opt.size)),
          h_(s.handler_base), me_(s.rt.cluster()), T_(s.rt.threads()), P_(s.topo.ranks()), seed_(s.opt.seed) {
        if (P_ > p_.mols) s.refuse = "water-wa: more ranks than molecules";
        const Start st = start_of(p_.mols, s.opt.seed);
        pos_ = st.x;
        vel_ = st.v;
        // expected messages per step: updates to each of this cluster's ranks, and (optimized) the
        // local contributions a coordinator sums for each remote rank
        exp_upd_.assign(P_, 0);
        exp_coord_.assign(P_, 0);
        for (uint32_t q = 0; q < P_; ++q) {
            std::vector<bool> site_seen(topo_.sites, false);
            for (uint32_t r = 0; r < P_; ++r) {
                if (!in_shell(r, q)) continue;
                const uint16_t sr = topo_.site_of_rank(r), sq = topo_.site_of_rank(q);
                if (variant_ == Variant::kOriginal || sr == sq) ++exp_upd_[q];
                else {
                    if (!site_seen[sr]) ++exp_upd_[q];
                    site_seen[sr] = true;
                    if (coordinator(sr, q) == me_) ++exp_coord_[q];
                }
            }
        }
        acc_.resize(T_);
        cnt_ = std::make_unique<std::atomic<uint64_t>[]>(T_);
        for (uint16_t t = 0; t < T_; ++t) {
            acc_[t].assign(size_t{block(me_ * T_ + t)} * 3, 0.0);
            cnt_[t] = 0;
        }
        ts_.resize(T_);
        for (Thread& t : ts_) {
            t.recv.resize(P_);
            t.stamp.assign(P_, 0);
        }
        cache_.resize(P_);
        s.rt.set_handler(h_, &WaterWa::on_req, this);
        s.rt.set_handler(h_ + 1, &WaterWa::on_data, this);
        s.rt.set_handler(h_ + 2, &WaterWa::on_upd, this);
    }

    bool run(Ctx& c) override {
        if (P_ > p_.mols) return c.fail("water: more ranks than molecules");
        Thread& me = ts_[c.thread];
        const uint32_t r = c.rank, n0 = first(r), nb = block(r);
        std::vector<uint32_t> shell;
        for (uint32_t q = 0; q < P_; ++q)
            if (in_shell(r, q)) shell.push_back(q);
        std::vector<double> f(size_t{nb} * 3);
        std::vector<std::vector<double>> upd(P_);
        for (uint32_t step = 0; step < p_.steps; ++step) {
            // 1. the shell's positions
            for (uint32_t q : shell) {
                const uint16_t cq = uint16_t(q / T_);
                if (cq == me_) continue;  // same process: shared memory
                const uint16_t dst = !c.optimized() || topo_.site_of[cq] == c.site() ? cq : coordinator(c.site(), q);
                const Req rq{step, q, me_, c.thread};
                if (c.send(RtAddr{dst, kRtService}, h_, RtBytes{&rq, sizeof rq}) != RtStatus::kOk)
                    return c.fail("water: fetch request to cluster " + std::to_string(dst));
            }
            for (uint32_t q : shell)
                if (q / T_ != me_ && !c.wait([&] { return me.stamp[q] == step + 1u; }, "a block's positions")) return false;
            // 2. forces
            std::fill(f.begin(), f.end(), 0.0);
            const double* x = pos_.data() + size_t{n0} * 3;
            for (uint32_t i = 0; i < nb; ++i)
                for (uint32_t j = i + 1; j < nb; ++j) pair_force(x + 3 * i, x + 3 * j, &f[3 * i], &f[3 * j]);
            for (uint32_t q : shell) {
                const double* xq = q / T_ == me_ ? pos_.data() + size_t{first(q)} * 3 : me.recv[q].data();
                upd[q].assign(size_t{block(q)} * 3, 0.0);
                for (uint32_t i = 0; i < nb; ++i)
                    for (uint32_t j = 0; j < block(q); ++j) pair_force(x + 3 * i, xq + 3 * j, &f[3 * i], &upd[q][3 * j]);
            }
            // 3. the updates: to the owner, or (optimized, another site) to this site's coordinator
            for (uint32_t q : shell) {
                const uint16_t cq = uint16_t(q / T_);
                const bool via = c.optimized() && topo_.site_of[cq] != c.site();
                const uint16_t dst = via ? coordinator(c.site(), q) : cq;
                const Upd u{step, q, via ? 1u : 0u};
                if (c.send(RtAddr{dst, kRtService}, h_ + 2, RtBytes{&u, sizeof u},
                           RtBytes{upd[q].data(), uint32_t(upd[q].size() * 8)}) != RtStatus::kOk)
                    return c.fail("water: update to cluster " + std::to_string(dst));
            }
            // 4. this block's updates, then the step
            const uint64_t want = uint64_t{step + 1} * exp_upd_[r];
            if (!c.wait([&] { return cnt_[c.thread].load(std::memory_order_acquire) >= want; }, "this block's updates"))
                return false;
            for (size_t k = 0; k < f.size(); ++k) f[k] += acc_[c.thread][k];
            std::fill(acc_[c.thread].begin(), acc_[c.thread].end(), 0.0);
            integrate(pos_.data() + size_t{n0} * 3, vel_.data() + size_t{n0} * 3, f.data(), nb);
            if (!c.barrier()) return false;  // nobody fetches positions of the next step before all moved
        }
        return true;
    }

    void sequential() override {
        if (!shared_) {
            Start s = start_of(p_.mols, seed_);
            std::vector<double> f(s.x.size());
            for (uint32_t step = 0; step < p_.steps; ++step) {
                std::fill(f.begin(), f.end(), 0.0);
                for (uint32_t i = 0; i < p_.mols; ++i)
                    for (uint32_t j = i + 1; j < p_.mols; ++j) pair_force(&s.x[3 * i], &s.x[3 * j], &f[3 * i], &f[3 * j]);
                integrate(s.x.data(), s.v.data(), f.data(), p_.mols);
            }
            shared_ = std::make_shared<std::vector<double>>(std::move(s.x));
        }
        ref_ = std::static_pointer_cast<std::vector<double>>(shared_);
    }

    Check check() override {
        Check ck;
        double err = 0, scale = 0;
        uint32_t at = 0;
        for (uint16_t t = 0; t < T_; ++t) {
            const uint32_t r = uint32_t{me_} * T_ + t;
            for (uint32_t k = first(r) * 3; k < (first(r) + block(r)) * 3; ++k) {
                const double e = std::fabs(pos_[k] - (*ref_)[k]);
                scale = std::max(scale, std::fabs((*ref_)[k]));
                if (!(e <= err)) err = std::isnan(e) ? INFINITY : e, at = k;
            }
        }
        const double tol = 1e-9 * std::max(1.0, scale);
        char b[320];
        std::snprintf(b, sizeof b,
                      "positions after %u steps: max |parallel - sequential| %.3g (tolerance %.3g: 1e-9 of the largest "
                      "coordinate; forces are summed in another order)",
                      p_.steps, err, tol);
        ck.what = b;
        ck.error = err;
        if (!(err <= tol)) {
            ck.ok = false;
            std::snprintf(b, sizeof b, "positions[%u][%u] = %.17g, sequential %.17g", at / 3, at % 3, pos_[at], (*ref_)[at]);
            ck.failure = b;
        }
        return ck;
    }

    void inject_error() override { pos_[size_t{first(uint32_t{me_} * T_)} * 3] += 1.0; }

    std::string stats_json() const override {
        return "\"molecules\":" + std::to_string(p_.mols) + ",\"steps\":" + std::to_string(p_.steps);
    }

    std::string problem() const override {
        return "Water-style n-body: " + std::to_string(p_.mols) + " molecules, " + std::to_string(p_.steps) +
               " steps, half-shell blocks, " +
               (variant_ == Variant::kOriginal ? "an RPC per remote block's positions and per update"
                                               : "cluster cache: one coordinator per remote block and site, updates summed there");
    }

private:
    struct Req {
        uint32_t step, q;
        uint16_t cluster, thread;  // who wants the positions
    };
    struct Data {
        uint32_t step, q;
    };
    struct Upd {
        uint32_t step, q, via;  // via: 1 to a coordinator, 0 to the owner
    };
    struct Thread {
        std::vector<std::vector<double>> recv;  // by rank: positions fetched
        std::vector<uint64_t> stamp;            // step + 1 of recv[q]
    };
    struct Cache {  // a coordinator's (service thread only)
        std::vector<double> x;
        uint64_t ready = 0, asked = 0;  // step + 1 when the positions are here / were asked for
        std::vector<RtAddr> waiting;
        std::vector<double> sum;
        uint64_t summed = 0;
    };

    uint32_t first(uint32_t r) const { return uint32_t(uint64_t{p_.mols} * r / P_); }
    uint32_t block(uint32_t r) const { return first(r + 1) - first(r); }
    bool in_shell(uint32_t r, uint32_t q) const {
        const uint32_t d = (q + P_ - r) % P_;
        if (d == 0) return false;
        if (2 * d < P_) return true;
        return 2 * d == P_ && r < P_ / 2;
    }
    // The cluster of `site` that fetches and sums for remote rank q.
    uint16_t coordinator(uint16_t site, uint32_t q) const {
        const auto& cs = topo_.clusters_of[site];
        return cs[q % cs.size()];
    }
    void send_data(RtEndpoint& self, RtAddr to, uint32_t step, uint32_t q, const double* x) {
        const Data d{step, q};
        net_.send_reply(self, to, h_ + 1, RtBytes{&d, sizeof d}, RtBytes{x, uint32_t(block(q) * 24)});
    }

    static void on_req(RtEndpoint& self, const AmMsg& m, void* ctx) {
        WaterWa* s = static_cast<WaterWa*>(ctx);
        Req rq;
        if (m.data.size() != sizeof rq) return;
        std::memcpy(&rq, m.data.data(), sizeof rq);
        if (rq.q >= s->P_) return;
        const RtAddr to{rq.cluster, rq.thread};
        if (rq.q / s->T_ == s->me_) return s->send_data(self, to, rq.step, rq.q, s->pos_.data() + size_t{s->first(rq.q)} * 3);
        Cache& c = s->cache_[rq.q];  // a coordinator
        if (c.ready == rq.step + 1u) return s->send_data(self, to, rq.step, rq.q, c.x.data());
        c.waiting.push_back(to);
        if (c.asked == rq.step + 1u) return;
        c.asked = rq.step + 1u;
        const Req up{rq.step, rq.q, s->me_, kRtService};
        s->net_.send(self, RtAddr{uint16_t(rq.q / s->T_), kRtService}, s->h_, RtBytes{&up, sizeof up});
    }
    static void on_data(RtEndpoint& self, const AmMsg& m, void* ctx) {
        WaterWa* s = static_cast<WaterWa*>(ctx);
        Data d;
        if (m.data.size() < sizeof d) return;
        std::memcpy(&d, m.data.data(), sizeof d);
        if (d.q >= s->P_ || m.data.size() != sizeof d + size_t{s->block(d.q)} * 24) return;
        const double* x = reinterpret_cast<const double*>(m.data.data() + sizeof d);
        const uint16_t t = self.self().thread;
        if (t == kRtService) {  // a coordinator: keep it, serve who waited
            Cache& c = s->cache_[d.q];
            c.x.assign(x, x + size_t{s->block(d.q)} * 3);
            c.ready = d.step + 1u;
            for (const RtAddr& to : c.waiting) s->send_data(self, to, d.step, d.q, c.x.data());
            c.waiting.clear();
            return;
        }
        if (t >= s->T_) return;
        Thread& th = s->ts_[t];
        th.recv[d.q].assign(x, x + size_t{s->block(d.q)} * 3);
        th.stamp[d.q] = d.step + 1u;
    }
    static void on_upd(RtEndpoint& self, const AmMsg& m, void* ctx) {
        WaterWa* s = static_cast<WaterWa*>(ctx);
        Upd u;
        if (m.data.size() < sizeof u) return;
        std::memcpy(&u, m.data.data(), sizeof u);
        if (u.q >= s->P_ || m.data.size() != sizeof u + size_t{s->block(u.q)} * 24) return;
        const double* f = reinterpret_cast<const double*>(m.data.data() + sizeof u);
        const size_t n = size_t{s->block(u.q)} * 3;
        if (u.via == 0) {  // the owner
            if (u.q / s->T_ != s->me_) return;
            const uint16_t t = uint16_t(u.q % s->T_);
            std::vector<double>& a = s->acc_[t];
            for (size_t k = 0; k < n; ++k) a[k] += f[k];
            s->cnt_[t].fetch_add(1, std::memory_order_release);
            s->rt_.endpoint(t).notify();
            return;
        }
        Cache& c = s->cache_[u.q];  // a coordinator: sum the site's, then one message over the WAN
        if (c.sum.size() != n) c.sum.assign(n, 0.0);
        for (size_t k = 0; k < n; ++k) c.sum[k] += f[k];
        if (++c.summed < s->exp_coord_[u.q]) return;
        const Upd up{u.step, u.q, 0};
        s->net_.send(self, RtAddr{uint16_t(u.q / s->T_), kRtService}, s->h_ + 2, RtBytes{&up, sizeof up},
                     RtBytes{c.sum.data(), uint32_t(n * 8)});
        std::fill(c.sum.begin(), c.sum.end(), 0.0);
        c.summed = 0;
    }

    Runtime& rt_;
    const group::Topology& topo_;
    Net& net_;
    Variant variant_;
    std::shared_ptr<void>& shared_;
    WaterParams p_;
    uint16_t h_, me_, T_;
    uint32_t P_;
    uint64_t seed_;
    std::vector<double> pos_, vel_;
    std::vector<uint32_t> exp_upd_, exp_coord_;
    std::vector<std::vector<double>> acc_;
    std::unique_ptr<std::atomic<uint64_t>[]> cnt_;
    std::vector<Thread> ts_;
    std::vector<Cache> cache_;
    std::shared_ptr<std::vector<double>> ref_;
};

}  // namespace

std::unique_ptr<Instance> make_water_wa(const Setup& s) { return std::make_unique<WaterWa>(s); }

}  // namespace iccs::widearea
