// coll_check.cpp: every collective against a sequential reference (see the header).
#include "coll_check.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace iccs::group::testing {

void ResultDigests::add(Coll c, const void* p, size_t n) {
    uint32_t& crc = this->crc[static_cast<size_t>(c)];
    uint32_t x = ~crc;
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) {
        x ^= b[i];
        for (int k = 0; k < 8; ++k) x = (x >> 1) ^ (0xEDB88320u & (0u - (x & 1u)));
    }
    crc = ~x;
}

std::string ResultDigests::format() const {
    std::string s;
    char w[16];
    for (size_t k = 1; k < static_cast<size_t>(Coll::kCount); ++k) {  // barrier (0) has no result
        std::snprintf(w, sizeof w, "%08x", crc[k]);
        if (!s.empty()) s += ' ';
        s += to_string(static_cast<Coll>(k));
        s += ' ';
        s += w;
    }
    return s;
}

namespace {

int64_t gen(uint64_t rank, uint64_t i, uint64_t salt) {
    return static_cast<int64_t>((rank * 1000003u + i * 7919u + salt * 31u) % 2001u) - 1000;
}
void xor_op(void* inout, const void* in, size_t n, void*) {
    auto* a = static_cast<int64_t*>(inout);
    const auto* b = static_cast<const int64_t*>(in);
    for (size_t i = 0; i < n; ++i) a[i] ^= b[i];
}

struct Ck {
    Group& g;
    std::string& why;
    std::string what;
    bool call(bool ok) {
        if (!ok) why = what + ": " + g.last_error();
        return ok;
    }
    bool eq(const std::vector<int64_t>& got, const std::vector<int64_t>& want) {
        if (got.size() != want.size()) {
            why = what + ": " + std::to_string(got.size()) + " elements where " + std::to_string(want.size()) + " expected";
            return false;
        }
        for (size_t i = 0; i < got.size(); ++i)
            if (got[i] != want[i]) {
                why = what + " on rank " + std::to_string(g.rank()) + ": element " + std::to_string(i) + " is " +
                      std::to_string(got[i]) + ", the sequential reference says " + std::to_string(want[i]);
                return false;
            }
        return true;
    }
};

// The checks of one round at one size n: each collective against its sequential reference, in
// the order every rank calls them.
struct SizeRound {
    Group& g;
    const CheckPlan& plan;
    Ck& ck;
    uint32_t P, me;
    Family f;
    uint64_t salt;
    uint32_t n;
    std::string tag;                       // " (n elements, family)", after each check's name
    uint32_t root;                         // the rooted collectives' root
    std::vector<int64_t> in;               // this rank's contribution: gen(me, i, salt)
    std::vector<uint32_t> counts, displ;   // the v-variants' counts by rank (vary, some zero) and offsets

    SizeRound(Group& g_, const CheckPlan& plan_, Ck& ck_, uint64_t salt_, uint32_t n_)
        : g(g_), plan(plan_), ck(ck_), P(g_.ranks()), me(g_.rank()), f(plan_.family), salt(salt_), n(n_),
          tag(" (" + std::to_string(n_) + " elements, " + to_string(plan_.family) + ")"),
          root(static_cast<uint32_t>(salt_ * 7 % g_.ranks())), in(n_), counts(g_.ranks()), displ(g_.ranks() + 1, 0) {
        for (uint32_t i = 0; i < n; ++i) in[i] = gen(me, i, salt);
        for (uint32_t r = 0; r < P; ++r) counts[r] = n == 0 ? 0 : (r * 5 + salt) % (n + 1) + (r == 1 ? n : 0);
        for (uint32_t r = 0; r < P; ++r) displ[r + 1] = displ[r] + counts[r];
    }

    template <class V>
    void digest(Coll c, const V& v) {
        if (plan.digests) plan.digests->add(c, v.data(), v.size() * sizeof v[0]);
    }

    bool bcast() {
        ck.what = "bcast root " + std::to_string(root) + tag;
        std::vector<int64_t> b(n, -1), want(n);
        for (uint32_t i = 0; i < n; ++i) want[i] = gen(root, i, salt);
        if (me == root) b = want;
        if (!ck.call(g.bcast(std::span<int64_t>(b), root, f))) return false;
        digest(Coll::kBcast, b);
        return ck.eq(b, want);
    }

    // allreduce and reduce with sum, min and max; `inject`: this rank's first allreduce gets a
    // wrong contribution (the test hook)
    bool sum_min_max(const bool inject) {
        if (inject) in[0] += 1;
        for (Op op : {Op::kSum, Op::kMin, Op::kMax}) {
            std::vector<int64_t> want(n);
            for (uint32_t i = 0; i < n; ++i)
                for (uint32_t r = 0; r < P; ++r) {
                    const int64_t x = gen(r, i, salt);
                    want[i] = r == 0 ? x : op == Op::kSum ? want[i] + x : op == Op::kMin ? std::min(want[i], x) : std::max(want[i], x);
                }
            ck.what = std::string("allreduce ") + to_string(op) + tag;
            std::vector<int64_t> out(n);
            if (!ck.call(g.allreduce(std::span<const int64_t>(in), std::span<int64_t>(out), op, f))) return false;
            digest(Coll::kAllreduce, out);
            if (!ck.eq(out, want)) return false;
            if (inject) in[0] -= 1;  // one wrong call is enough
            ck.what = std::string("reduce ") + to_string(op) + " root " + std::to_string(root) + tag;
            std::vector<int64_t> o2(n, 0);
            if (!ck.call(g.reduce(std::span<const int64_t>(in), std::span<int64_t>(o2), op, root, f))) return false;
            if (me == root) digest(Coll::kReduce, o2);
            if (me == root && !ck.eq(o2, want)) return false;
        }
        return true;
    }

    // prod over small values, a user function (xor), and a sum of doubles
    bool prod_user_doubles() {
        std::vector<int64_t> small(n), want(n, 1), wx(n, 0), out(n);
        for (uint32_t i = 0; i < n; ++i) {
            small[i] = (gen(me, i, salt) & 1) + 1;
            for (uint32_t r = 0; r < P; ++r) {
                want[i] *= (gen(r, i, salt) & 1) + 1;
                wx[i] ^= gen(r, i, salt);
            }
        }
        ck.what = "allreduce prod" + tag;
        if (!ck.call(g.allreduce(std::span<const int64_t>(small), std::span<int64_t>(out), Op::kProd, f))) return false;
        digest(Coll::kAllreduce, out);
        if (!ck.eq(out, want)) return false;
        ck.what = "allreduce user function (xor)" + tag;
        if (!ck.call(g.allreduce(std::span<const int64_t>(in), std::span<int64_t>(out), xor_op, nullptr, f)))
            return false;
        digest(Coll::kAllreduce, out);
        if (!ck.eq(out, wx)) return false;
        std::vector<double> din(n), dout(n), dwant(n, 0);
        for (uint32_t i = 0; i < n; ++i) {
            din[i] = static_cast<double>(in[i]);
            for (uint32_t r = 0; r < P; ++r) dwant[i] += static_cast<double>(gen(r, i, salt));
        }
        ck.what = "allreduce sum of doubles" + tag;
        if (!ck.call(g.allreduce(std::span<const double>(din), std::span<double>(dout), Op::kSum, f))) return false;
        digest(Coll::kAllreduce, dout);
        for (uint32_t i = 0; i < n; ++i)
            if (dout[i] != dwant[i]) return ck.eq({static_cast<int64_t>(dout[i])}, {static_cast<int64_t>(dwant[i])});
        return true;
    }

    bool scan() {
        ck.what = "scan sum" + tag;
        std::vector<int64_t> out(n), want(n, 0);
        for (uint32_t i = 0; i < n; ++i)
            for (uint32_t r = 0; r <= me; ++r) want[i] += gen(r, i, salt);
        if (!ck.call(g.scan(std::span<const int64_t>(in), std::span<int64_t>(out), Op::kSum, f))) return false;
        digest(Coll::kScan, out);
        return ck.eq(out, want);
    }

    bool reduce_scatter() {
        ck.what = "reduce_scatter sum" + tag;
        const uint32_t total = displ[P];
        std::vector<int64_t> big(total), out(counts[me]), want(counts[me], 0);
        for (uint32_t i = 0; i < total; ++i) big[i] = gen(me, i, salt + 1);
        for (uint32_t i = 0; i < counts[me]; ++i)
            for (uint32_t r = 0; r < P; ++r) want[i] += gen(r, displ[me] + i, salt + 1);
        if (!ck.call(g.reduce_scatter(std::span<const int64_t>(big), std::span<int64_t>(out),
                                      std::span<const uint32_t>(counts), Op::kSum, f)))
            return false;
        digest(Coll::kReduceScatter, out);
        return ck.eq(out, want);
    }

    bool gather_allgather() {
        ck.what = "gather root " + std::to_string(root) + tag;
        std::vector<int64_t> out(me == root ? size_t{n} * P : 0), want;
        for (uint32_t r = 0; r < P; ++r)
            for (uint32_t i = 0; i < n; ++i) want.push_back(gen(r, i, salt));
        if (!ck.call(g.gather(std::span<const int64_t>(in), std::span<int64_t>(out), root, f))) return false;
        digest(Coll::kGather, out);  // empty but on the root
        if (me == root && !ck.eq(out, want)) return false;
        ck.what = "allgather" + tag;
        std::vector<int64_t> all(size_t{n} * P);
        if (!ck.call(g.allgather(std::span<const int64_t>(in), std::span<int64_t>(all), f))) return false;
        digest(Coll::kAllgather, all);
        return ck.eq(all, want);
    }

    bool gatherv_allgatherv() {
        ck.what = "gatherv root " + std::to_string(root) + tag;
        std::vector<int64_t> part(counts[me]), want, out(me == root ? displ[P] : 0);
        for (uint32_t i = 0; i < counts[me]; ++i) part[i] = gen(me, i, salt + 2);
        for (uint32_t r = 0; r < P; ++r)
            for (uint32_t i = 0; i < counts[r]; ++i) want.push_back(gen(r, i, salt + 2));
        if (!ck.call(g.gatherv(std::span<const int64_t>(part), std::span<int64_t>(out),
                               std::span<const uint32_t>(counts), root, f)))
            return false;
        digest(Coll::kGather, out);
        if (me == root && !ck.eq(out, want)) return false;
        ck.what = "allgatherv" + tag;
        std::vector<int64_t> all(displ[P]);
        if (!ck.call(g.allgatherv(std::span<const int64_t>(part), std::span<int64_t>(all),
                                  std::span<const uint32_t>(counts), f)))
            return false;
        digest(Coll::kAllgather, all);
        return ck.eq(all, want);
    }

    bool scatter_scatterv() {
        ck.what = "scatter root " + std::to_string(root) + tag;
        std::vector<int64_t> src, out(n), want(n);
        for (uint32_t r = 0; r < P; ++r)
            for (uint32_t i = 0; i < n; ++i) src.push_back(gen(r + 100, i, salt));
        for (uint32_t i = 0; i < n; ++i) want[i] = gen(me + 100, i, salt);
        if (me != root) src.clear();
        if (!ck.call(g.scatter(std::span<const int64_t>(src), std::span<int64_t>(out), root, f))) return false;
        digest(Coll::kScatter, out);
        if (!ck.eq(out, want)) return false;
        ck.what = "scatterv root " + std::to_string(root) + tag;
        std::vector<int64_t> vsrc, vout(counts[me]), vwant(counts[me]);
        for (uint32_t r = 0; r < P; ++r)
            for (uint32_t i = 0; i < counts[r]; ++i) vsrc.push_back(gen(r + 200, i, salt));
        for (uint32_t i = 0; i < counts[me]; ++i) vwant[i] = gen(me + 200, i, salt);
        if (me != root) vsrc.clear();
        if (!ck.call(g.scatterv(std::span<const int64_t>(vsrc), std::span<const uint32_t>(counts),
                                std::span<int64_t>(vout), root, f)))
            return false;
        digest(Coll::kScatter, vout);
        return ck.eq(vout, vwant);
    }

    bool alltoall_alltoallv() {
        ck.what = "alltoall" + tag;
        const uint32_t b = n / 4 + 1;
        std::vector<int64_t> src(size_t{b} * P), out(size_t{b} * P), want(size_t{b} * P);
        for (uint32_t d = 0; d < P; ++d)
            for (uint32_t i = 0; i < b; ++i) {
                src[size_t{d} * b + i] = gen(uint64_t{me} * P + d, i, salt);
                want[size_t{d} * b + i] = gen(uint64_t{d} * P + me, i, salt);
            }
        if (!ck.call(g.alltoall(std::span<const int64_t>(src), std::span<int64_t>(out), f))) return false;
        digest(Coll::kAlltoall, out);
        if (!ck.eq(out, want)) return false;
        ck.what = "alltoallv" + tag;
        auto cnt = [&](uint32_t s, uint32_t d) { return n == 0 ? 0u : static_cast<uint32_t>((s * 3 + d * 5 + salt) % 7); };
        std::vector<uint32_t> sc(P), rc(P);
        std::vector<int64_t> vs, vw;
        for (uint32_t d = 0; d < P; ++d) {
            sc[d] = cnt(me, d);
            rc[d] = cnt(d, me);
            for (uint32_t i = 0; i < sc[d]; ++i) vs.push_back(gen(uint64_t{me} * P + d, i, salt + 3));
            for (uint32_t i = 0; i < rc[d]; ++i) vw.push_back(gen(uint64_t{d} * P + me, i, salt + 3));
        }
        std::vector<int64_t> vo(vw.size());
        if (!ck.call(g.alltoallv(std::span<const int64_t>(vs), std::span<const uint32_t>(sc), std::span<int64_t>(vo),
                                 std::span<const uint32_t>(rc), f)))
            return false;
        digest(Coll::kAlltoall, vo);
        return ck.eq(vo, vw);
    }
};

}  // namespace

bool check_all_collectives(Group& g, const CheckPlan& plan, std::string& why) {
    Ck ck{g, why, ""};
    uint64_t salt = 0;
    const uint32_t largest = plan.sizes.empty() ? 0 : *std::max_element(plan.sizes.begin(), plan.sizes.end());
    bool injected = false;
    for (uint32_t round = 0; round < plan.rounds; ++round)
        for (uint32_t n : plan.sizes) {
            ++salt;
            SizeRound r(g, plan, ck, salt, n);
            ck.what = "barrier" + r.tag;
            if (!ck.call(g.barrier(plan.family))) return false;
            if (!r.bcast()) return false;
            // the test hook: a wrong contribution of rank 0 to the first sum of the largest size
            const bool inject = plan.inject_error && g.rank() == 0 && n == largest && n > 0 && !injected;
            injected = injected || inject;
            if (!r.sum_min_max(inject) || !r.prod_user_doubles() || !r.scan() || !r.reduce_scatter() ||
                !r.gather_allgather() || !r.gatherv_allgatherv() || !r.scatter_scatterv() || !r.alltoall_alltoallv())
                return false;
        }
    ck.what = "last barrier";
    return ck.call(g.barrier(plan.family));
}

bool check_magpie_rule(const Counters& c, std::string& why) {
    for (size_t k = 0; k < static_cast<size_t>(Coll::kCount); ++k) {
        const CollCounters& x = c.coll[k];
        const char* name = to_string(static_cast<Coll>(k));
        if (x.wan_bytes != x.wan_bytes_min) {
            why = std::string(name) + ": " + std::to_string(x.wan_bytes) + " data bytes crossed WAN links, the minimum " +
                  "(each item once to each receiving site) is " + std::to_string(x.wan_bytes_min);
            return false;
        }
        if (x.item_crossings_max > 1) {
            why = std::string(name) + ": an item came into a site " + std::to_string(x.item_crossings_max) +
                  " times in one call";
            return false;
        }
        if (x.wan_hops_max > 1) {
            why = std::string(name) + ": a message had " + std::to_string(x.wan_hops_max) + " WAN links behind it";
            return false;
        }
    }
    return true;
}

}  // namespace iccs::group::testing
