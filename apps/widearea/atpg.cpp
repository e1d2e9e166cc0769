// atpg.cpp: ATPG, automatic test pattern generation for a generated combinational circuit. For
// every single stuck-at fault (each signal stuck at 0 and at 1) the program looks for input
// vectors that detect it by bit-parallel fault simulation (64 vectors a word): first a set of
// random blocks shared by all faults, all of them simulated (the fault's detection count, its
// first detecting vector), then, for a fault none detected, a bounded deterministic search of
// fault-specific biased blocks, stopped at the first detection. The faults are distributed
// statically (cyclically) over every compute thread; each thread keeps its faults' results.
//
// The statistics (faults detected, detections) are a counter on rank 0:
// original:  one RPC to rank 0 per detected fault (its count of detections), then one "done"
//            message per thread;
// optimized: each thread accumulates locally, the threads of a cluster send their sums to the
//            cluster's thread 0 (in the cluster), which sends one RPC with the cluster's sum.
// Check: every fault's result (detected, first detecting vector, detection count) equals the
// sequential search's, every detecting vector detects its fault in a scalar fault simulation,
// and rank 0's counter equals the sequential totals.
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "wb_common.hpp"

namespace iccs::widearea {

namespace {

enum GateType : uint8_t { kAnd, kNand, kOr, kNor, kXor, kXnor, kNot, kTypes };

struct Gate {
    uint8_t type;
    uint32_t a, b;
};

struct AtpgParams {
    uint32_t inputs, gates, window;  // inputs <= 64; a gate's inputs among the `window` signals before it
    uint32_t shared_blocks;          // random blocks of 64 vectors simulated for every fault
    uint32_t search_blocks;          // at most this many fault-specific blocks for a fault not yet detected
};
AtpgParams params_of(Size s) {
    return s == Size::kTest ? AtpgParams{32, 1500, 64, 48, 16} : AtpgParams{48, 3000, 96, 48, 48};
}

struct FaultResult {
    uint64_t vector = 0;   // the first detecting input vector (bit i = input i)
    int32_t first = -1;    // its index: block * 64 + bit (search blocks after the shared ones); -1: undetected
    uint32_t count = 0;    // detecting vectors among the shared blocks
    bool operator==(const FaultResult&) const = default;
};

struct Reference {
    std::vector<FaultResult> res;
    uint64_t detected = 0, detections = 0;
};

inline uint64_t eval(uint8_t t, uint64_t x, uint64_t y) {
    switch (t) {
        case kAnd: return x & y;
        case kNand: return ~(x & y);
        case kOr: return x | y;
        case kNor: return ~(x | y);
        case kXor: return x ^ y;
        case kXnor: return ~(x ^ y);
        default: return ~x;
    }
}

class Circuit {
public:
    Circuit(const AtpgParams& p, uint64_t seed) : p_(p) {
        Rng r(seed ^ 0xA7B6ull);
        const uint32_t n = p.inputs + p.gates;
        gates_.resize(p.gates);
        std::vector<uint8_t> used(n, 0);
        for (uint32_t k = 0; k < p.gates; ++k) {
            const uint32_t s = p.inputs + k;
            const uint32_t lo = s > p.window ? s - p.window : 0;
            Gate& g = gates_[k];
            g.type = uint8_t(r.below(kTypes));
            g.a = lo + r.below(s - lo);
            g.b = lo + r.below(s - lo);
            used[g.a] = 1;
            if (g.type != kNot) used[g.b] = 1;
        }
        for (uint32_t s = p.inputs; s < n; ++s)
            if (!used[s]) outs_.push_back(s);
    }
    uint32_t signals() const { return p_.inputs + p_.gates; }
    uint32_t faults() const { return 2 * signals(); }
    const std::vector<uint32_t>& outputs() const { return outs_; }

    // Good values of every signal for the 64 vectors of `in` (p.inputs words).
    void simulate(const uint64_t* in, uint64_t* v) const {
        std::memcpy(v, in, p_.inputs * sizeof(uint64_t));
        for (uint32_t k = 0; k < p_.gates; ++k) v[p_.inputs + k] = eval(gates_[k].type, v[gates_[k].a], v[gates_[k].b]);
    }
    // Which of the 64 vectors detect fault f (signal f / 2 stuck at f % 2), given their good values.
    uint64_t detect(uint32_t f, const uint64_t* good, uint64_t* scratch) const {
        const uint32_t s = f / 2;
        std::memcpy(scratch, good, s * sizeof(uint64_t));
        scratch[s] = (f & 1) ? ~0ull : 0ull;
        for (uint32_t sig = std::max(s + 1, p_.inputs); sig < signals(); ++sig) {
            const Gate& g = gates_[sig - p_.inputs];
            scratch[sig] = eval(g.type, scratch[g.a], scratch[g.b]);
        }
        uint64_t d = 0;
        for (uint32_t o : outs_) d |= good[o] ^ scratch[o];
        return d;
    }
    // Input words of a block: bias 0: p(1) = 1/2, 1: 1/4, 2: 3/4.
    void block(uint64_t key, uint32_t bias, uint64_t* in) const {
        Rng r(key);
        for (uint32_t i = 0; i < p_.inputs; ++i) {
            const uint64_t x = r.next(), y = r.next();
            in[i] = bias == 0 ? x : bias == 1 ? (x & y) : (x | y);
        }
    }
    uint64_t vector_of(const uint64_t* in, uint32_t bit) const {
        uint64_t v = 0;
        for (uint32_t i = 0; i < p_.inputs; ++i) v |= ((in[i] >> bit) & 1) << i;
        return v;
    }
    // A scalar fault simulation of one vector: does it detect fault f?
    bool detects(uint32_t f, uint64_t vec) const {
        std::vector<uint64_t> in(p_.inputs), good(signals()), bad(signals());
        for (uint32_t i = 0; i < p_.inputs; ++i) in[i] = ((vec >> i) & 1) ? ~0ull : 0ull;
        simulate(in.data(), good.data());
        return (detect(f, good.data(), bad.data()) & 1) != 0;
    }

private:
    AtpgParams p_;
    std::vector<Gate> gates_;
    std::vector<uint32_t> outs_;
};

class Atpg final : public Instance {
public:
    explicit Atpg(const Setup& s)
        : rt_(s.rt), opt_(s.opt), variant_(s.variant), shared_(s.shared), p_(params_of(s.opt.size)), h_(s.handler_base),
          circ_(p_, s.opt.seed) {
        const uint32_t n = circ_.signals();
        shared_in_.resize(size_t{p_.shared_blocks} * p_.inputs);
        shared_good_.resize(size_t{p_.shared_blocks} * n);
        for (uint32_t b = 0; b < p_.shared_blocks; ++b) {
            circ_.block(s.opt.seed * 1000003ull + b, 0, &shared_in_[size_t{b} * p_.inputs]);
            circ_.simulate(&shared_in_[size_t{b} * p_.inputs], &shared_good_[size_t{b} * n]);
        }
        res_.resize(circ_.faults());
        s.rt.set_handler(h_, &Atpg::on_update, this);
    }

    bool run(Ctx& c) override {
        std::vector<uint64_t> scratch(circ_.signals()), good(circ_.signals()), in(p_.inputs);
        uint64_t faults = 0, detections = 0;
        const RtAddr root{0, 0};
        for (uint32_t f = c.rank; f < circ_.faults(); f += c.ranks) {
            const FaultResult r = solve(f, scratch, good, in);
            res_[f] = r;
            if (c.thread == 0) c.ep.poll();  // rank 0's counter (and a cluster's sums) served as it goes
            if (r.first < 0) continue;
            if (!c.optimized()) {
                if (c.rank == 0) {
                    add(1, r.count);
                } else {
                    const Msg m{kUpdate, 1, r.count};
                    const RtStatus st = c.send(root, h_, RtBytes{&m, sizeof m});
                    if (st != RtStatus::kOk) return c.fail(std::string("atpg: counter update: ") + iccs::to_string(st));
                }
            } else {
                ++faults;
                detections += r.count;
            }
        }
        if (!c.optimized()) {
            if (c.rank != 0) return send_msg(c, root, Msg{kDone, 0, 0});
            return c.wait([&] { return done_ == c.ranks - 1; }, "every thread's last counter update");
        }
        // optimized: the threads' sums to the cluster's thread 0, the cluster's sum to rank 0.
        if (c.thread != 0) return send_msg(c, RtAddr{c.cluster, 0}, Msg{kPartial, uint32_t(faults), detections});
        if (!c.wait([&] { return partials_ == uint32_t{c.threads} - 1; }, "the cluster's partial sums")) return false;
        faults += part_faults_;
        detections += part_detections_;
        if (c.cluster != 0) return send_msg(c, root, Msg{kClusterSum, uint32_t(faults), detections});
        add(faults, detections);
        return c.wait([&] { return done_ == uint32_t{c.clusters} - 1; }, "every cluster's sum");
    }

    void sequential() override {
        if (shared_) {
            ref_ = std::static_pointer_cast<Reference>(shared_);
            return;
        }
        auto ref = std::make_shared<Reference>();
        std::vector<uint64_t> scratch(circ_.signals()), good(circ_.signals()), in(p_.inputs);
        ref->res.resize(circ_.faults());
        for (uint32_t f = 0; f < circ_.faults(); ++f) {
            ref->res[f] = solve(f, scratch, good, in);
            if (ref->res[f].first >= 0) {
                ++ref->detected;
                ref->detections += ref->res[f].count;
            }
        }
        ref_ = ref;
        shared_ = ref;
    }

    Check check() override {
        Check ck;
        const uint32_t ranks = uint32_t{rt_.clusters()} * rt_.threads();
        const uint32_t lo = uint32_t{rt_.cluster()} * rt_.threads(), hi = lo + rt_.threads();
        uint32_t mine = 0, bad = 0, unverified = 0;
        char b[512];
        for (uint32_t f = 0; f < circ_.faults(); ++f) {
            if (f % ranks < lo || f % ranks >= hi) continue;
            ++mine;
            const FaultResult& r = res_[f];
            const FaultResult& q = ref_->res[f];
            if (r.first >= 0 && !circ_.detects(f, r.vector)) ++unverified;
            if (r == q && (r.first < 0 || circ_.detects(f, r.vector))) continue;
            if (bad++ == 0) {
                std::snprintf(b, sizeof b,
                              "fault %u (signal %u stuck at %u): first detecting vector #%d = 0x%016" PRIx64
                              " with %u detections (detects it: %s), sequential #%d = 0x%016" PRIx64 " with %u",
                              f, f / 2, f & 1, r.first, r.vector, r.count,
                              r.first >= 0 && circ_.detects(f, r.vector) ? "yes" : "no", q.first, q.vector, q.count);
                ck.failure = b;
            }
        }
        std::snprintf(b, sizeof b,
                      "faults of this cluster: %u, differing from the sequential search: %u (tolerance 0), detecting "
                      "vectors that fail a scalar fault simulation: %u (tolerance 0)",
                      mine, bad, unverified);
        ck.what = b;
        ck.ok = bad == 0;
        ck.error = bad;
        if (rt_.cluster() == 0) {
            std::snprintf(b, sizeof b,
                          "; rank 0's counter: %" PRIu64 " faults detected, %" PRIu64 " detections (sequential %" PRIu64
                          ", %" PRIu64 ", must be equal)",
                          count_faults_, count_detections_, ref_->detected, ref_->detections);
            ck.what += b;
            if (ck.ok && (count_faults_ != ref_->detected || count_detections_ != ref_->detections)) {
                ck.ok = false;
                ck.error = 1;
                std::snprintf(b, sizeof b,
                              "rank 0's counter %" PRIu64 " faults / %" PRIu64 " detections, sequential %" PRIu64
                              " / %" PRIu64,
                              count_faults_, count_detections_, ref_->detected, ref_->detections);
                ck.failure = b;
            }
        }
        return ck;
    }

    void inject_error() override {
        // Fault 0 is owned by rank 0 (cluster 0): flip an input bit of its vector.
        res_[0].vector ^= 1;
        if (res_[0].first < 0) res_[0].first = 0;
    }

    std::string stats_json() const override {
        char b[256];
        std::snprintf(b, sizeof b,
                      "\"inputs\":%u,\"gates\":%u,\"outputs\":%zu,\"faults\":%u,\"shared_vectors\":%u,"
                      "\"search_vectors\":%u,\"detected\":%" PRIu64 ",\"detections\":%" PRIu64,
                      p_.inputs, p_.gates, circ_.outputs().size(), circ_.faults(), p_.shared_blocks * 64,
                      p_.search_blocks * 64, count_faults_, count_detections_);
        return b;
    }

    std::string problem() const override {
        char b[320];
        std::snprintf(b, sizeof b,
                      "ATPG: %u inputs, %u gates, %zu outputs, %u stuck-at faults cyclic over the ranks; %u shared random "
                      "vectors per fault, then up to %u fault-specific ones; counter on rank 0 %s",
                      p_.inputs, p_.gates, circ_.outputs().size(), circ_.faults(), p_.shared_blocks * 64,
                      p_.search_blocks * 64,
                      variant_ == Variant::kOptimized ? "summed per cluster, one RPC a cluster"
                                                      : "updated by one RPC per detected fault");
        return b;
    }

private:
    enum Kind : uint32_t { kUpdate, kDone, kPartial, kClusterSum };
    struct Msg {
        uint32_t kind;
        uint32_t faults;
        uint64_t detections;
    };

    FaultResult solve(uint32_t f, std::vector<uint64_t>& scratch, std::vector<uint64_t>& good,
                      std::vector<uint64_t>& in) const {
        FaultResult r;
        const uint32_t n = circ_.signals();
        for (uint32_t b = 0; b < p_.shared_blocks; ++b) {
            const uint64_t d = circ_.detect(f, &shared_good_[size_t{b} * n], scratch.data());
            if (d == 0) continue;
            if (r.first < 0) {
                const uint32_t bit = uint32_t(std::countr_zero(d));
                r.first = int32_t(b * 64 + bit);
                r.vector = circ_.vector_of(&shared_in_[size_t{b} * p_.inputs], bit);
            }
            r.count += uint32_t(std::popcount(d));
        }
        for (uint32_t b = 0; r.first < 0 && b < p_.search_blocks; ++b) {
            circ_.block(mix64(opt_.seed) ^ (uint64_t{f} << 20) ^ b, b % 3, in.data());
            circ_.simulate(in.data(), good.data());
            const uint64_t d = circ_.detect(f, good.data(), scratch.data());
            if (d == 0) continue;
            const uint32_t bit = uint32_t(std::countr_zero(d));
            r.first = int32_t((p_.shared_blocks + b) * 64 + bit);
            r.vector = circ_.vector_of(in.data(), bit);
        }
        return r;
    }

    bool send_msg(Ctx& c, RtAddr to, const Msg& m) {
        const RtStatus st = c.send(to, h_, RtBytes{&m, sizeof m});
        return st == RtStatus::kOk || c.fail(std::string("atpg: counter message: ") + iccs::to_string(st));
    }
    void add(uint64_t faults, uint64_t detections) {
        count_faults_ += faults;
        count_detections_ += detections;
    }

    // On thread 0 of a cluster (rank 0's counter; a cluster's partial sums).
    static void on_update(RtEndpoint&, const AmMsg& m, void* ctx) {
        Atpg* a = static_cast<Atpg*>(ctx);
        Msg msg;
        if (m.data.size() != sizeof msg) return;
        std::memcpy(&msg, m.data.data(), sizeof msg);
        switch (msg.kind) {
            case kUpdate: a->add(msg.faults, msg.detections); break;
            case kDone: ++a->done_; break;
            case kPartial:
                a->part_faults_ += msg.faults;
                a->part_detections_ += msg.detections;
                ++a->partials_;
                break;
            case kClusterSum:
                a->add(msg.faults, msg.detections);
                ++a->done_;
                break;
            default: break;
        }
    }

    Runtime& rt_;
    const Options& opt_;
    Variant variant_;
    std::shared_ptr<void>& shared_;
    AtpgParams p_;
    uint16_t h_;
    Circuit circ_;
    std::vector<uint64_t> shared_in_, shared_good_;
    std::vector<FaultResult> res_;  // by fault; each thread writes its own faults'
    // Thread 0's (handlers on thread 0): rank 0's counter and markers; a cluster's partial sums.
    uint64_t count_faults_ = 0, count_detections_ = 0;
    uint32_t done_ = 0, partials_ = 0;
    uint64_t part_faults_ = 0, part_detections_ = 0;
    std::shared_ptr<Reference> ref_;
};

}  // namespace

std::unique_ptr<Instance> make_atpg(const Setup& s) { return std::make_unique<Atpg>(s); }

}  // namespace iccs::widearea
