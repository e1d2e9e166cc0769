// asp.cpp: ASP, all-pairs shortest paths (Floyd-Warshall) on a seeded directed graph, the rows of
// the distance matrix in contiguous blocks over the ranks. Iteration k needs row k everywhere: its
// owner broadcasts it through group/'s totally ordered broadcast (the study's Orca broadcast), and
// every rank relaxes its rows through it. The owners come in phases (rank 0's rows, then rank 1's,
// ...), so the broadcasts of one phase all come from one site.
//
// original:  the central sequencer (cluster 0): a row from another site crosses the WAN to the
//            sequencer and back.
// optimized: the migrating sequencer (Bal et al.): the right to number moves to the sending site
//            and stays there for the whole phase, so a row goes out once, with no WAN round trip.
// Both compute exactly the sequential Floyd (integer distances): the check is bit for bit.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "ordered.hpp"
#include "widearea.hpp"

namespace iccs::widearea {

namespace {

constexpr int32_t kInf = 1 << 29;  // no path; two of them still fit in an int32

uint32_t asp_n(Size s) { return s == Size::kTest ? 128 : 2048; }

// Edge i -> j with weight 1..1000 with probability 1/2; no edge otherwise; 0 on the diagonal.
std::vector<int32_t> asp_graph(uint32_t n, uint64_t seed) {
    std::vector<int32_t> d(size_t{n} * n);
    uint64_t x = seed * 0xD1B54A32D192ED03ull + 7;
    for (uint32_t i = 0; i < n; ++i)
        for (uint32_t j = 0; j < n; ++j) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            d[size_t{i} * n + j] = i == j ? 0 : (x & 1) ? int32_t(1 + (x >> 8) % 1000) : kInf;
        }
    return d;
}

inline void relax_row(int32_t* di, const int32_t* dk, uint32_t k, uint32_t n) {
    const int32_t dik = di[k];
    if (dik >= kInf) return;
    for (uint32_t j = 0; j < n; ++j) di[j] = std::min(di[j], dik + dk[j]);
}

class Asp final : public Instance {
public:
    explicit Asp(const Setup& s)
        : opt_(s.opt), variant_(s.variant), shared_(s.shared), n_(asp_n(s.opt.size)),
          ob_(s.rt, s.topo,
              s.variant == Variant::kOriginal ? group::Sequencer::kCentral : group::Sequencer::kMigrating,
              s.ordered_base) {
        init_ = asp_graph(n_, s.opt.seed);
        ts_.resize(s.rt.threads());
        if (s.topo.ranks() > n_)
            s.refuse = "asp: " + std::to_string(s.topo.ranks()) + " ranks for " + std::to_string(n_) + " rows";
    }

    bool run(Ctx& c) override {
        if (c.ranks > n_) return c.fail("asp: " + std::to_string(c.ranks) + " ranks for " + std::to_string(n_) + " rows");
        Thread& me = ts_[c.thread];
        auto first_row = [&](uint32_t r) { return uint32_t(uint64_t{n_} * r / c.ranks); };
        me.r0 = first_row(c.rank);
        me.r1 = first_row(c.rank + 1);
        me.d.assign(init_.begin() + ptrdiff_t{me.r0} * n_, init_.begin() + ptrdiff_t{me.r1} * n_);
        std::vector<uint8_t> msg(4 + size_t{n_} * 4), got;
        uint32_t owner = 0;
        for (uint32_t k = 0; k < n_; ++k) {
            while (first_row(owner + 1) <= k) ++owner;
            if (owner == c.rank) {
                std::memcpy(msg.data(), &k, 4);
                std::memcpy(msg.data() + 4, me.d.data() + size_t{k - me.r0} * n_, size_t{n_} * 4);
                if (!ob_.send(c.thread, msg.data(), msg.size())) return c.fail("asp: broadcast of row " + std::to_string(k) + ": " + ob_.last_error());
            }
            if (!ob_.deliver(c.thread, got, nullptr, nullptr, c.opt.timeout_ms * 1000))
                return c.fail("asp: waiting for row " + std::to_string(k) + ": " + ob_.last_error());
            uint32_t kk = 0;
            if (got.size() == msg.size()) std::memcpy(&kk, got.data(), 4);
            if (got.size() != msg.size() || kk != k)
                return c.fail("asp: expected row " + std::to_string(k) + ", the broadcast delivered " +
                              (got.size() == msg.size() ? "row " + std::to_string(kk) : std::to_string(got.size()) + " bytes"));
            const int32_t* dk = reinterpret_cast<const int32_t*>(got.data() + 4);
            for (uint32_t i = me.r0; i < me.r1; ++i) relax_row(me.d.data() + size_t{i - me.r0} * n_, dk, k, n_);
        }
        return true;
    }

    void sequential() override {
        if (!shared_) {
            auto ref = std::make_shared<std::vector<int32_t>>(init_);
            int32_t* d = ref->data();
            for (uint32_t k = 0; k < n_; ++k) {
                const std::vector<int32_t> dk(d + size_t{k} * n_, d + size_t{k + 1} * n_);  // row k as it is at step k
                for (uint32_t i = 0; i < n_; ++i) relax_row(d + size_t{i} * n_, dk.data(), k, n_);
            }
            shared_ = ref;
        }
        ref_ = std::static_pointer_cast<std::vector<int32_t>>(shared_);
    }

    Check check() override {
        Check ck;
        uint64_t wrong = 0, paths = 0, cells = 0;
        for (const Thread& me : ts_)
            for (uint32_t i = me.r0; i < me.r1; ++i)
                for (uint32_t j = 0; j < n_; ++j) {
                    const int32_t p = me.d[size_t{i - me.r0} * n_ + j], r = (*ref_)[size_t{i} * n_ + j];
                    ++cells;
                    paths += r < kInf;
                    if (p != r && wrong++ == 0) {
                        char b[160];
                        std::snprintf(b, sizeof b, "dist[%u][%u] = %d, sequential %d", i, j, p, r);
                        ck.failure = b;
                    }
                }
        ck.ok = wrong == 0;
        ck.error = double(wrong);
        ck.what = "distances: " + std::to_string(wrong) + " of " + std::to_string(cells) +
                  " differ from the sequential Floyd's (tolerance 0: integers, bit for bit); " + std::to_string(paths) +
                  " pairs connected";
        return ck;
    }

    void inject_error() override { ts_[0].d[ts_[0].d.size() / 2] += 1; }

    void account(Net& net) override { net.add_ordered(ob_.counters()); }

    std::string stats_json() const override {
        const group::OrderedCounters oc = ob_.counters();
        char b[256];
        std::snprintf(b, sizeof b,
                      "\"n\":%u,\"sequencer\":\"%s\",\"cluster0_sequenced\":%" PRIu64 ",\"cluster0_token_passes\":%" PRIu64
                      ",\"cluster0_requests\":%" PRIu64,
                      n_, group::to_string(ob_.policy()), oc.sequenced_here, oc.token_passes, oc.requests);
        return b;
    }

    std::string problem() const override {
        return "ASP (Floyd) on " + std::to_string(n_) + " nodes (edges with probability 1/2, weights 1..1000), row k " +
               "broadcast at step k through the totally ordered broadcast, " + group::to_string(ob_.policy()) + " sequencer";
    }

private:
    struct Thread {
        uint32_t r0 = 0, r1 = 0;
        std::vector<int32_t> d;  // rows r0 .. r1 - 1
    };
    const Options& opt_;
    Variant variant_;
    std::shared_ptr<void>& shared_;
    uint32_t n_;
    group::OrderedBcast ob_;
    std::vector<int32_t> init_;
    std::vector<Thread> ts_;
    std::shared_ptr<std::vector<int32_t>> ref_;
};

}  // namespace

std::unique_ptr<Instance> make_asp(const Setup& s) { return std::make_unique<Asp>(s); }

}  // namespace iccs::widearea
