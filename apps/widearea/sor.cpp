// sor.cpp: SOR, red/black successive over-relaxation of Laplace's equation on an n x n grid
// (fixed boundary), interior rows in contiguous blocks over the ranks; after each colour's sweep a
// rank sends its first row to the rank above and its last to the rank below; every iteration the
// largest change is reduced (group/ allreduce, max) and the run stops below the tolerance.
//
// original:   every exchange, every iteration's reduction: bit for bit the sequential red/black
//             iteration (same updates, same stopping iteration).
// optimized:  the study's chaotic relaxation (Bal et al.): between ranks in different sites the
//             rows go only in every k-th iteration (after each of its sweeps); in the other
//             iterations each side computes with its last copy of the other's row (stale), and
//             the convergence test runs in the exchange iterations (when every copy is fresh).
//             It needs more iterations (how many is counted); the result is checked against the
//             sequential solution within the stated tolerance, not bit for bit.
// exact-halo: ours: between sites the rows go only every k-th iteration, 2k rows deep (one message
//             instead of 2k); meanwhile each side updates its copy of the other's rows itself as
//             the halo shrinks by a row per sweep (the same updates on the same inputs as the
//             owner's, so nothing is stale), and the reduction runs every k-th iteration: it stops
//             at the first multiple of k at or after the sequential's stopping iteration, and
//             equals the sequential iteration at that count bit for bit.
// At the optimal omega stale rows cost iterations (README.md, "SOR": about 3.5x at k = 3 on the
// test grid over 4 sites), which is why exact-halo exists.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "widearea.hpp"

namespace iccs::widearea {

namespace {

struct SorParams {
    uint32_t n;         // grid side, boundary included
    double eps;         // stop when the largest change of an iteration is below this
    uint32_t max_iter;  // a bound (never reached at these sizes; the check would tell)
    uint32_t k;         // optimized, exact-halo: inter-site exchanges (exact-halo: 2k rows deep) and the
                        // reduction every k-th iteration
};
SorParams params_of(Size s) { return s == Size::kTest ? SorParams{130, 1e-6, 100000, 3} : SorParams{770, 1e-6, 100000, 3}; }

double omega_of(uint32_t n) { return 2.0 / (1.0 + std::sin(M_PI / double(n - 1))); }

// The grid with its boundary: top row from a sine, the other three sides from the seeded generator.
std::vector<double> initial_grid(uint32_t n, uint64_t seed) {
    std::vector<double> g(size_t{n} * n, 0.0);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    auto rnd = [&x] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        return double(x >> 11) / double(1ull << 53);
    };
    for (uint32_t j = 0; j < n; ++j) {
        g[j] = std::sin(M_PI * double(j) / double(n - 1));
        g[size_t{n - 1} * n + j] = 0.5 * rnd();
    }
    for (uint32_t i = 1; i + 1 < n; ++i) {
        g[size_t{i} * n] = 0.5 * rnd();
        g[size_t{i} * n + n - 1] = 0.5 * rnd();
    }
    return g;
}

// One colour's points of global row i (colour c: (i + j) % 2 == c); returns the largest change.
inline double sweep_row(double* row, const double* up, const double* down, uint32_t n, uint32_t i, uint32_t c,
                        double omega) {
    double maxd = 0;
    for (uint32_t j = 2 - ((i + c) & 1); j + 1 < n; j += 2) {
        const double nb = (up[j] + down[j] + row[j - 1] + row[j + 1]) * 0.25;
        const double d = omega * (nb - row[j]);
        row[j] += d;
        maxd = std::max(maxd, std::fabs(d));
    }
    return maxd;
}

// Largest |average of the 4 neighbours - value| over a row's interior points.
double row_residual(const double* row, const double* up, const double* down, uint32_t n) {
    double r = 0;
    for (uint32_t j = 1; j + 1 < n; ++j)
        r = std::max(r, std::fabs((up[j] + down[j] + row[j - 1] + row[j + 1]) * 0.25 - row[j]));
    return r;
}

struct Reference {
    std::vector<double> grid;  // when the stopping rule held: after `iterations` iterations
    uint32_t iterations = 0;
    double residual = 0;
    // The grid after iterations + 1 .. iterations + k - 1: the optimized variant tests the rule
    // only every k-th iteration, so it stops up to k - 1 iterations later, on one of these.
    std::vector<std::vector<double>> after;
};

class Sor final : public Instance {
public:
    explicit Sor(const Setup& s)
        : rt_(s.rt), topo_(s.topo), opt_(s.opt), variant_(s.variant), shared_(s.shared), p_(params_of(s.opt.size)),
          h_(s.handler_base), omega_(omega_of(p_.n)),
          world_(s.rt, s.topo, group::Options{group::Family::kHier, 64u << 10, s.opt.timeout_ms, s.group_base}) {
        init_ = initial_grid(p_.n, s.opt.seed);
        ts_.resize(s.rt.threads());
        // Receive buffers now: a neighbour's first row may arrive while this thread is still in
        // the barrier before run().
        for (Thread& t : ts_)
            for (auto& side : t.in)
                for (auto& b : side) b.assign(size_t{2} * p_.k * p_.n, 0.0);
        s.rt.set_handler(h_, &Sor::on_row, this);
        if (s.topo.ranks() > p_.n - 2)
            s.refuse = "sor: " + std::to_string(s.topo.ranks()) + " ranks for " + std::to_string(p_.n - 2) +
                       " rows (at most one rank a row)";
    }

    bool run(Ctx& c) override {
        const uint32_t n = p_.n, m = n - 2, H = 2 * p_.k;
        if (c.ranks > m) return c.fail("sor: " + std::to_string(c.ranks) + " ranks for " + std::to_string(m) + " rows");
        Thread& me = ts_[c.thread];
        auto first_row = [&](uint32_t r) { return 1 + uint32_t(uint64_t{m} * r / c.ranks); };
        me.r0 = first_row(c.rank);
        me.r1 = first_row(c.rank + 1);
        const uint32_t rows = me.r1 - me.r0;
        // Local rows: H ghost rows above, the own rows, H ghost rows below (global r0 - H .. r1 + H - 1;
        // those outside the grid stay 0 and are never read).
        me.local.assign(size_t{rows + 2 * H} * n, 0.0);
        for (uint32_t l = 0; l < rows + 2 * H; ++l) {
            const int64_t gi = int64_t{me.r0} - H + l;
            if (gi >= 0 && gi < int64_t{n}) std::memcpy(row(me, l), init_.data() + size_t(gi) * n, n * sizeof(double));
        }
        // Neighbours: side 0 above (rank - 1), side 1 below (rank + 1). A side in another site is
        // "deep" in exact-halo (both blocks at least H rows): H rows every k-th iteration, and the
        // ghost rows are updated here meanwhile as the neighbour updates them (they are its rows, so
        // the values are exactly its own); "stale" in optimized: one row after each sweep of every
        // k-th iteration, the last copy used in between; otherwise one row after every sweep.
        bool has[2], deep[2], stale[2];
        for (int s = 0; s < 2; ++s) {
            has[s] = s == 0 ? c.rank > 0 : c.rank + 1 < c.ranks;
            const uint32_t nb = s == 0 ? c.rank - 1 : c.rank + 1;
            const bool wan = has[s] && c.site_of_rank(nb) != c.site();
            deep[s] = wan && c.variant == Variant::kExactHalo && rows >= H && first_row(nb + 1) - first_row(nb) >= H;
            stale[s] = wan && c.variant == Variant::kOptimized;
        }
        const bool every_kth = c.variant != Variant::kOriginal;  // the convergence test
        group::Group& g = world_.group(c.thread);
        uint32_t age = 0;  // sweeps since the deep sides' last exchange
        uint32_t it = 0;
        for (; it < p_.max_iter; ++it) {
            const bool wan_now = it % p_.k == p_.k - 1;
            double d = 0;
            for (uint32_t col = 0; col < 2; ++col) {
                ++age;
                for (uint32_t r = H; r < H + rows; ++r)
                    d = std::max(d, sweep_row(row(me, r), row(me, r - 1), row(me, r + 1), n, me.r0 + r - H, col, omega_));
                for (int s = 0; s < 2; ++s) {  // the ghost rows still exact after this sweep
                    if (!deep[s]) continue;
                    for (uint32_t j = 1; j + age <= H; ++j) {
                        const uint32_t l = s == 0 ? H - j : H + rows - 1 + j;
                        const uint32_t gi = me.r0 + l - H;
                        if (gi >= 1 && gi + 1 < n) sweep_row(row(me, l), row(me, l - 1), row(me, l + 1), n, gi, col, omega_);
                    }
                }
                bool ex[2];
                for (int s = 0; s < 2; ++s) {
                    ex[s] = has[s] && (deep[s] ? col == 1 && wan_now : !stale[s] || wan_now);
                    if (has[s] && !ex[s]) ++me.skipped;
                    if (!ex[s]) continue;
                    const uint32_t D = deep[s] ? H : 1;
                    const Header hd{uint32_t(1 - s), D, me.seq[s]};
                    const RtStatus st = c.send(c.addr_of(s == 0 ? c.rank - 1 : c.rank + 1), h_, RtBytes{&hd, sizeof hd},
                                               RtBytes{row(me, s == 0 ? H : H + rows - D), uint32_t(D * n * sizeof(double))});
                    if (st != RtStatus::kOk) return c.fail(std::string("sor: row send: ") + iccs::to_string(st));
                }
                for (int s = 0; s < 2; ++s) {
                    if (!ex[s]) continue;
                    const uint64_t want = me.seq[s];
                    const int slot = int(want & 1);
                    if (!c.wait([&] { return me.stamp[s][slot] == want + 1; }, "a neighbour's rows")) return false;
                    const uint32_t D = deep[s] ? H : 1;
                    if (me.got[s][slot] != D) return c.fail("sor: a neighbour sent " + std::to_string(me.got[s][slot]) + " rows, not " + std::to_string(D));
                    std::memcpy(row(me, s == 0 ? H - D : H + rows), me.in[s][slot].data(), size_t{D} * n * sizeof(double));
                    ++me.seq[s];
                }
            }
            if (col_exchanged_deep(deep, wan_now)) age = 0;
            if (every_kth && !wan_now) continue;
            double gd = 0;
            if (!g.allreduce(std::span<const double>(&d, 1), std::span<double>(&gd, 1), group::Op::kMax))
                return c.fail("sor: allreduce: " + g.last_error());
            me.last_change = gd;
            if (gd < p_.eps) {
                ++it;
                break;
            }
        }
        me.iterations = it;
        return true;
    }

    void sequential() override {
        if (shared_) {
            ref_ = std::static_pointer_cast<Reference>(shared_);
            return;
        }
        auto ref = std::make_shared<Reference>();
        const uint32_t n = p_.n;
        ref->grid = init_;
        double* g = ref->grid.data();
        uint32_t it = 0;
        for (; it < p_.max_iter; ++it) {
            double d = 0;
            for (uint32_t col = 0; col < 2; ++col)
                for (uint32_t i = 1; i + 1 < n; ++i)
                    d = std::max(d, sweep_row(g + size_t{i} * n, g + size_t{i - 1} * n, g + size_t{i + 1} * n, n, i, col, omega_));
            if (d < p_.eps) {
                ++it;
                break;
            }
        }
        ref->iterations = it;
        for (uint32_t i = 1; i + 1 < n; ++i)
            ref->residual = std::max(ref->residual, row_residual(g + size_t{i} * n, g + size_t{i - 1} * n, g + size_t{i + 1} * n, n));
        std::vector<double> w = ref->grid;
        for (uint32_t e = 1; e < p_.k; ++e) {
            for (uint32_t col = 0; col < 2; ++col)
                for (uint32_t i = 1; i + 1 < n; ++i)
                    sweep_row(w.data() + size_t{i} * n, w.data() + size_t{i - 1} * n, w.data() + size_t{i + 1} * n, n, i, col,
                              omega_);
            ref->after.push_back(w);
        }
        ref_ = ref;
        shared_ = ref;
    }

    Check check() override {
        Check ck;
        const uint32_t n = p_.n;
        const uint32_t its = ts_[0].iterations;
        // The sequential iteration at the same count when there is one (the original's, and
        // exact-halo's when it stopped within k - 1 of it): bit for bit. Otherwise (the chaotic
        // optimized variant, or the change rose above the tolerance again at a k-th iteration) the
        // final solutions, within eps * n.
        const bool chaotic = variant_ == Variant::kOptimized;
        const std::vector<double>* target = &ref_->grid;
        if (!chaotic && its > ref_->iterations && its - ref_->iterations <= ref_->after.size())
            target = &ref_->after[its - ref_->iterations - 1];
        const bool exact =
            !chaotic && (variant_ == Variant::kOriginal || its == ref_->iterations || target != &ref_->grid);
        const double agree_tol = exact ? 0.0 : agree_tolerance();
        const double res_tol = residual_tolerance();
        double maxdiff = 0, maxres = 0;
        uint32_t at_i = 0, at_j = 0;
        double at_v = 0, at_ref = 0;
        for (const Thread& me : ts_) {
            const uint32_t rows = me.r1 - me.r0;
            for (uint32_t r = 1; r <= rows; ++r) {
                const double* pr = me.local.data() + size_t{r + 2 * p_.k - 1} * n;
                const double* rr = target->data() + size_t{me.r0 + r - 1} * n;
                for (uint32_t j = 0; j < n; ++j) {
                    const double e = std::fabs(pr[j] - rr[j]);
                    if (e > maxdiff || std::isnan(e)) {
                        maxdiff = std::isnan(e) ? INFINITY : e;
                        at_i = me.r0 + r - 1, at_j = j, at_v = pr[j], at_ref = rr[j];
                    }
                }
                maxres = std::max(maxres, row_residual(pr, pr - n, pr + n, n));
            }
        }
        char b[640];
        std::snprintf(b, sizeof b,
                      "grid: max |parallel - sequential after %u iterations| %.3g (tolerance %.3g%s); residual max %.3g "
                      "(tolerance %.3g; sequential %.3g); iterations %u (the sequential stopped after %u%s)",
                      its, maxdiff, agree_tol, exact ? ": bit for bit" : ": the final solutions", maxres, res_tol,
                      ref_->residual, its, ref_->iterations,
                      variant_ == Variant::kOriginal ? ", must be equal"
                      : chaotic ? "; chaotic: inter-site rows stale 2 of 3 iterations, the rule tested every 3rd"
                                : "; the rule is tested every 3rd iteration");
        ck.what = b;
        ck.error = maxdiff;
        if (maxdiff > agree_tol) {
            ck.ok = false;
            std::snprintf(b, sizeof b, "grid[%u][%u] = %.17g, sequential %.17g (difference %.3g > tolerance %.3g)", at_i,
                          at_j, at_v, at_ref, std::fabs(at_v - at_ref), agree_tol);
            ck.failure = b;
        } else if (maxres > res_tol) {
            ck.ok = false;
            std::snprintf(b, sizeof b, "residual %.3g exceeds the tolerance %.3g", maxres, res_tol);
            ck.failure = b;
        } else if (variant_ == Variant::kOriginal && its != ref_->iterations) {
            ck.ok = false;
            ck.failure = "stopped after " + std::to_string(its) + " iterations, the sequential after " +
                         std::to_string(ref_->iterations);
        }
        return ck;
    }

    void inject_error() override {
        Thread& me = ts_[0];
        me.local[size_t{2 * p_.k} * p_.n + p_.n / 2] += 1.0;
    }

    void account(Net& net) override { net.add_group(world_.counters()); }

    std::string stats_json() const override {
        uint64_t skipped = 0;
        for (const Thread& t : ts_) skipped += t.skipped;
        char b[256];
        std::snprintf(b, sizeof b,
                      "\"n\":%u,\"eps\":%g,\"omega\":%.6f,\"k\":%u,\"iterations\":%u,\"seq_iterations\":%u,"
                      "\"exchanges_skipped_cluster0\":%" PRIu64,
                      p_.n, p_.eps, omega_, p_.k, ts_[0].iterations, ref_ ? ref_->iterations : 0, skipped);
        return b;
    }

    std::string problem() const override {
        char b[400];
        std::snprintf(b, sizeof b,
                      "SOR red/black on a %ux%u grid (%u interior rows in row blocks), omega %.4f, stop when the largest "
                      "change < %g%s",
                      p_.n, p_.n, p_.n - 2, omega_, p_.eps,
                      variant_ == Variant::kOptimized ? "; chaotic relaxation: inter-site rows every 3rd iteration, stale "
                                                        "between, the convergence test every 3rd"
                      : variant_ == Variant::kExactHalo ? "; exact halo: inter-site rows every 3rd iteration, 6 deep, the "
                                                          "halo updated locally between, the convergence test every 3rd"
                                                        : "");
        return b;
    }

private:
    struct Header {
        uint32_t side;  // at the receiver: 0 from the rank above, 1 from the rank below
        uint32_t rows;  // rows that follow (1, or 2k on a deep side)
        uint64_t seq;   // the exchange's number on this link
    };
    struct Thread {
        uint32_t r0 = 0, r1 = 0;     // global rows [r0, r1)
        std::vector<double> local;   // rows + 2 rows: ghost above, own rows, ghost below
        std::vector<double> in[2][2];  // [side][seq & 1]: rows received, not yet taken
        uint32_t got[2][2] = {{0, 0}, {0, 0}};  // rows in in[side][slot]
        uint64_t stamp[2][2] = {{0, 0}, {0, 0}};  // seq + 1 of what in[side][slot] holds
        uint64_t seq[2] = {0, 0};
        uint64_t skipped = 0;
        uint32_t iterations = 0;
        double last_change = 0;
    };
    double* row(Thread& t, uint32_t r) { return t.local.data() + size_t{r} * p_.n; }
    static bool col_exchanged_deep(const bool deep[2], bool wan_now) { return (deep[0] || deep[1]) && wan_now; }

    // Stated tolerances: the stopping rule bounds each iteration's change by eps; red/black SOR at
    // the optimal omega converges by a factor of about 1 - 2 pi / n per iteration, so a solution
    // stopped at change eps is within about eps * n / (2 pi) of the fixed point: two such solutions
    // agree within about eps * n / pi; we allow eps * n. The residual after an update is
    // (omega - 1) / omega of its change; we allow 2 eps.
    double agree_tolerance() const { return p_.eps * p_.n; }
    double residual_tolerance() const { return 2 * p_.eps; }

    static void on_row(RtEndpoint& self, const AmMsg& m, void* ctx) {
        Sor* s = static_cast<Sor*>(ctx);
        Header h;
        if (m.data.size() < sizeof h) return;
        std::memcpy(&h, m.data.data(), sizeof h);
        const size_t rowb = size_t{h.rows} * s->p_.n * sizeof(double);
        if (h.rows == 0 || h.rows > 2 * s->p_.k || m.data.size() != sizeof h + rowb) return;
        const uint16_t t = self.self().thread;
        if (t >= s->ts_.size() || h.side > 1) return;
        Thread& me = s->ts_[t];
        const int slot = int(h.seq & 1);
        std::memcpy(me.in[h.side][slot].data(), m.data.data() + sizeof h, rowb);
        me.got[h.side][slot] = h.rows;
        me.stamp[h.side][slot] = h.seq + 1;
    }

    Runtime& rt_;
    const group::Topology& topo_;
    const Options& opt_;
    Variant variant_;
    std::shared_ptr<void>& shared_;
    SorParams p_;
    uint16_t h_;
    double omega_;
    group::World world_;
    std::vector<double> init_;
    std::vector<Thread> ts_;
    std::shared_ptr<Reference> ref_;
};

}  // namespace

std::unique_ptr<Instance> make_sor(const Setup& s) { return std::make_unique<Sor>(s); }

}  // namespace iccs::widearea
