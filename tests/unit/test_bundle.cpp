// Message combining's wire work (proxy/bundle.hpp) on heap pools: messages packed into a bundle
// come out byte for byte, in order, each once; a delivery refused half-way goes on from where it
// stopped; malformed records end the bundle; and a message taken out of a bundle shares nothing
// with the bundle's buffer (it goes to a compute thread while the proxy still holds the bundle,
// and reference counts are not atomic: the cause of the combining stall of issue 21).
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstring>
#include <vector>

#include "be.hpp"
#include "bundle.hpp"
#include "conv_hdr.hpp"
#include "slidwin_auth.hpp"

using namespace iccs;

namespace {

constexpr uint32_t kLimit = 1500 - 20 - 8 - 32;
constexpr uint32_t kBelow = 14 + 20 + 8 + 32;

std::vector<uint8_t> message_bytes(uint32_t payload, uint32_t seq, uint8_t type = static_cast<uint8_t>(ConvType::kData)) {
    std::vector<uint8_t> v(kConvHdrLen + payload);
    ConvHdr h{};
    h.src_cluster.set(1);
    h.dst_cluster.set(0);
    h.dst_port.set(7);
    h.type = type;
    h.conn_seq.set(seq);
    h.piece_cnt.set(1);
    h.msg_len.set(payload);
    std::memcpy(v.data(), &h, sizeof h);
    for (uint32_t i = 0; i < payload; ++i) v[kConvHdrLen + i] = static_cast<uint8_t>(seq * 31 + i);
    return v;
}

PktBuf* make(HeapPktPool& pool, const std::vector<uint8_t>& bytes) {
    PktBuf* p = pkt_alloc(pool);
    REQUIRE(p != nullptr);
    std::memcpy(pkt_append(p, static_cast<uint32_t>(bytes.size())), bytes.data(), bytes.size());
    return p;
}

std::vector<uint8_t> bytes_of(const PktBuf* p) {
    std::vector<uint8_t> v(p->pkt_len);
    REQUIRE(pkt_read(p, 0, p->pkt_len, v.data()) == p->pkt_len);
    return v;
}

// Pack messages of the given payload sizes into one bundle (all must join); their bytes in want.
PktBuf* pack(HeapPktPool& pool, const std::vector<uint32_t>& sizes, std::vector<std::vector<uint8_t>>& want) {
    OpenBundle o;
    for (uint32_t i = 0; i < sizes.size(); ++i) {
        want.push_back(message_bytes(sizes[i], i));
        REQUIRE(bundle_add(o, make(pool, want.back()), kLimit, kBelow));
    }
    REQUIRE(o.n == sizes.size());
    return o.b;
}

}  // namespace

TEST_CASE("bundle: messages come out byte for byte, in order, each once", "[bundle]") {
    HeapPktPool pool(64, 2048);
    std::vector<std::vector<uint8_t>> want;
    PktBuf* b = pack(pool, {0, 1, 17, 64, 200, 3}, want);
    REQUIRE(is_bundle(b));
    REQUIRE(load_be32(b->data() + offsetof(ConvHdr, msg_len)) == 6);
    REQUIRE(load_be32(b->data() + offsetof(ConvHdr, conn_seq)) == 0);
    bool first = false;
    uint32_t off = bundle_resume(b, first);
    REQUIRE(first);
    std::vector<PktBuf*> got;
    for (;;) {
        PktBuf* m = nullptr;
        uint32_t next = 0;
        const BundleStep st = bundle_take(pool, b, off, m, next);
        if (st == BundleStep::kDone) break;
        REQUIRE(st == BundleStep::kMsg);
        got.push_back(m);
        off = next;
    }
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) REQUIRE(bytes_of(got[i]) == want[i]);
    pkt_free(b);
    for (PktBuf* m : got) pkt_free(m);
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("bundle: a message taken out shares no buffer or reference count with the bundle", "[bundle]") {
    // The proxy holds the bundle (slidwin offers it again after a refused delivery) while the
    // compute thread that got a message frees it: nothing of the bundle may change by that.
    HeapPktPool pool(64, 2048);
    std::vector<std::vector<uint8_t>> want;
    PktBuf* b = pack(pool, {10, 20, 30}, want);
    bool first = false;
    uint32_t off = bundle_resume(b, first);
    PktBuf* m = nullptr;
    uint32_t next = 0;
    REQUIRE(bundle_take(pool, b, off, m, next) == BundleStep::kMsg);
    for (const PktBuf* s = m; s != nullptr; s = s->next) {
        REQUIRE(s->direct == nullptr);
        REQUIRE(s->refcnt == 1);
        REQUIRE((s->buf < b->buf || s->buf >= b->buf + b->buf_len));
    }
    REQUIRE_FALSE(pkt_shared(m));
    REQUIRE(b->refcnt == 1);  // the proxy's reference alone
    // the message has headroom of its own, as a received one has
    REQUIRE(m->headroom() >= kPktHeadroom);
    // the bundle goes first: the message stays whole
    pkt_free(b);
    REQUIRE(bytes_of(m) == want[0]);
    pkt_free(m);
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("bundle: a delivery refused half-way goes on from where it stopped", "[bundle]") {
    HeapPktPool pool(64, 2048);
    std::vector<std::vector<uint8_t>> want;
    PktBuf* b = pack(pool, {5, 6, 7, 8, 9}, want);
    std::vector<std::vector<uint8_t>> got;
    int offers = 0;
    bool done = false;
    while (!done) {  // each offer delivers at most two records, then "the ring is full"
        ++offers;
        bool first = false;
        uint32_t off = bundle_resume(b, first);
        REQUIRE(first == (offers == 1));
        for (int taken = 0;; ++taken) {
            PktBuf* m = nullptr;
            uint32_t next = 0;
            const BundleStep st = bundle_take(pool, b, off, m, next);
            if (st == BundleStep::kDone) {
                done = true;
                break;
            }
            REQUIRE(st == BundleStep::kMsg);
            if (taken == 2) {  // refused: dropped here, kept in the bundle
                pkt_free(m);
                bundle_keep(b, off);
                break;
            }
            got.push_back(bytes_of(m));
            pkt_free(m);
            off = next;
        }
    }
    REQUIRE(offers == 3);
    REQUIRE(got == want);
    pkt_free(b);
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("bundle: no buffer for a record stops it; it is taken later from the same place", "[bundle]") {
    HeapPktPool pool(3, 2048);
    std::vector<std::vector<uint8_t>> want;
    PktBuf* b = pack(pool, {40, 50}, want);  // one buffer: the others were copied in and freed
    PktBuf* hold[2] = {pkt_alloc(pool), pkt_alloc(pool)};
    REQUIRE(pool.in_use() == 3);
    bool first = false;
    const uint32_t off = bundle_resume(b, first);
    PktBuf* m = nullptr;
    uint32_t next = 0;
    REQUIRE(bundle_take(pool, b, off, m, next) == BundleStep::kNoBuf);
    pkt_free(hold[0]);
    REQUIRE(bundle_take(pool, b, off, m, next) == BundleStep::kMsg);
    REQUIRE(bytes_of(m) == want[0]);
    pkt_free(m);
    pkt_free(hold[1]);
    pkt_free(b);
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("bundle: joining stops at the limit, at a shared or short-headroom first buffer", "[bundle]") {
    HeapPktPool pool(64, 2048);
    OpenBundle o;
    uint32_t joined = 0;
    for (;;) {
        PktBuf* m = make(pool, message_bytes(200, joined));
        if (!bundle_add(o, m, kLimit, kBelow)) {
            pkt_free(m);
            break;
        }
        ++joined;
    }
    REQUIRE(o.b->pkt_len <= kLimit);
    REQUIRE(o.b->pkt_len + kBundleRecLen + kConvHdrLen + 200 > kLimit);
    REQUIRE(joined == o.n);
    pkt_free(o.b);

    OpenBundle s;  // a first message someone else also holds is never written to
    PktBuf* f = make(pool, message_bytes(8, 0));
    pkt_ref(f);
    REQUIRE(bundle_add(s, f, kLimit, kBelow));
    PktBuf* g = make(pool, message_bytes(8, 1));
    REQUIRE_FALSE(bundle_add(s, g, kLimit, kBelow));
    REQUIRE(bytes_of(f) == message_bytes(8, 0));
    pkt_free(g);
    pkt_free(f);
    pkt_free(f);

    OpenBundle h;  // no room in front for the outer header and the layers below
    PktBuf* n = pkt_alloc(pool, kBelow);
    const auto nb = message_bytes(8, 0);
    std::memcpy(pkt_append(n, static_cast<uint32_t>(nb.size())), nb.data(), nb.size());
    REQUIRE(bundle_add(h, n, kLimit, kBelow));
    PktBuf* k = make(pool, message_bytes(8, 1));
    REQUIRE_FALSE(bundle_add(h, k, kLimit, kBelow));
    pkt_free(k);
    pkt_free(n);
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("bundle: a fresh buffer has room for a bundle under a key (the auth block below it)", "[bundle][security]") {
    // What the proxy's TX path asks with a [security] key: eth, IPv4, UDP, slidwin and its auth
    // block below the bundle's header (issue 37: with a 128-byte headroom no bundle formed).
    HeapPktPool pool(16, 2048);
    const uint32_t below = 14 + 20 + 8 + kSlidwinHdrLen + kSlidwinAuthLen;
    OpenBundle o;
    std::vector<std::vector<uint8_t>> want;
    for (uint32_t i = 0; i < 3; ++i) {
        want.push_back(message_bytes(60, i));
        REQUIRE(bundle_add(o, make(pool, want.back()), kLimit, below));
    }
    REQUIRE(o.n == 3);
    REQUIRE(is_bundle(o.b));
    REQUIRE(o.b->headroom() >= below);
    bool first = false;
    uint32_t off = bundle_resume(o.b, first), next = 0;
    for (uint32_t i = 0; i < 3; ++i, off = next) {
        PktBuf* one = nullptr;
        REQUIRE(bundle_take(pool, o.b, off, one, next) == BundleStep::kMsg);
        REQUIRE(bytes_of(one) == want[i]);
        pkt_free(one);
    }
    pkt_free(o.b);
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("bundle: malformed records end it", "[bundle]") {
    HeapPktPool pool(64, 2048);
    auto bad = [&](auto edit) {
        std::vector<std::vector<uint8_t>> want;
        PktBuf* b = pack(pool, {4, 4}, want);
        edit(b);
        bool first = false;
        uint32_t off = bundle_resume(b, first);
        PktBuf* m = nullptr;
        uint32_t next = 0;
        REQUIRE(bundle_take(pool, b, off, m, next) == BundleStep::kMsg);
        pkt_free(m);
        const BundleStep st = bundle_take(pool, b, next, m, off);
        pkt_free(b);
        return st;
    };
    const uint32_t second = kConvHdrLen + kBundleRecLen + kConvHdrLen + 4;  // its length prefix
    // runs past the end
    REQUIRE(bad([&](PktBuf* b) { b->data()[second] = 0x7f; }) == BundleStep::kBad);
    // shorter than a header
    REQUIRE(bad([&](PktBuf* b) { b->data()[second] = 0; b->data()[second + 1] = 3; }) == BundleStep::kBad);
    // a nested bundle
    REQUIRE(bad([&](PktBuf* b) {
        b->data()[second + kBundleRecLen + offsetof(ConvHdr, type)] = static_cast<uint8_t>(ConvType::kBundle);
    }) == BundleStep::kBad);
    // an unknown type
    REQUIRE(bad([&](PktBuf* b) { b->data()[second + kBundleRecLen + offsetof(ConvHdr, type)] = 0; }) == BundleStep::kBad);
    // the tail cut inside a record
    REQUIRE(bad([&](PktBuf* b) { REQUIRE(pkt_trim_to(b, b->pkt_len - 1)); }) == BundleStep::kBad);
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("bundle: a record longer than a buffer of the pool comes out as a chain, header first", "[bundle]") {
    HeapPktPool pool(8, 2048);
    HeapPktPool small(16, kPktHeadroom + 64);
    std::vector<std::vector<uint8_t>> want;
    PktBuf* b = pack(pool, {300, 2}, want);
    bool first = false;
    uint32_t off = bundle_resume(b, first);
    for (const auto& w : want) {
        PktBuf* m = nullptr;
        uint32_t next = 0;
        REQUIRE(bundle_take(small, b, off, m, next) == BundleStep::kMsg);
        REQUIRE(m->data_len >= kConvHdrLen);
        REQUIRE(bytes_of(m) == w);
        pkt_free(m);
        off = next;
    }
    pkt_free(b);
    REQUIRE(pool.in_use() == 0);
    REQUIRE(small.in_use() == 0);
}
