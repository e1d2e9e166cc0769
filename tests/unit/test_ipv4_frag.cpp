// IPv4 fragmentation and reassembly: every size boundary at three MTUs, in any arrival order and
// with duplicates, then each way a datagram is refused (overlap, oversize, bad length, caps,
// timeout). Every test ends with the pool's leak check.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "checksum.hpp"
#include "ipv4_frag.hpp"
#include "ipv4_hdr.hpp"
#include "ipv4_reassemble.hpp"

using namespace iccs;

namespace {

constexpr uint32_t kSrc = 0x0a000001;
constexpr uint32_t kDst = 0x0a000002;
constexpr uint64_t kT0 = 1'000'000'000;  // an arbitrary "now" [ns]

uint8_t pattern_at(uint32_t i) { return static_cast<uint8_t>(i * 131u + (i >> 8) * 7u + 1u); }

// A datagram payload of n pattern bytes; with small segments it is a chain.
PktBuf* make_payload(PktPool& pool, uint32_t n) {
    std::vector<uint8_t> v(n);
    for (uint32_t i = 0; i < n; ++i) v[i] = pattern_at(i);
    PktBuf* p = pkt_alloc(pool);
    REQUIRE(p != nullptr);
    REQUIRE(pkt_write(p, pool, v.data(), n));
    return p;
}

// Puts an IPv4 header in front of a fragment, as ipv4_emit does (hl > 20 adds NOP options).
void add_ip_hdr(PktBuf* p, uint16_t id, uint32_t off, bool more, uint32_t hl = kIpv4HdrLen) {
    const uint32_t payload = p->pkt_len;
    uint8_t* raw = pkt_prepend(p, hl);
    REQUIRE(raw != nullptr);
    Ipv4Hdr h{};
    h.ver_ihl = static_cast<uint8_t>(0x40 | (hl / 4));
    h.total_len.set(static_cast<uint16_t>(payload + hl));
    h.id.set(id);
    h.frag.set(static_cast<uint16_t>((off / 8) | (more ? kIpFlagMF : 0)));
    h.ttl = 64;
    h.proto = kIpProtoUdp;
    h.csum.set(0);
    h.src.set(kSrc);
    h.dst.set(kDst);
    store_hdr(raw, h);
    std::memset(raw + kIpv4HdrLen, 1, hl - kIpv4HdrLen);  // option NOP
    h.csum.set(csum_finish(csum_add(0, raw, hl)));
    store_hdr(raw, h);
}

// A hand-made fragment: len bytes of `payload` from src_off, claiming datagram offset `off`.
PktBuf* make_frag(PktPool& pool, const PktBuf* payload, uint32_t src_off, uint32_t len, uint32_t off,
                  bool more, uint16_t id, uint32_t hl = kIpv4HdrLen) {
    PktBuf* p = pkt_slice(pool, payload, src_off, len, kPktHeadroom);
    REQUIRE(p != nullptr);
    add_ip_hdr(p, id, off, more, hl);
    return p;
}

// A reassembled (or never fragmented) datagram: header right, checksum valid, chain consistent,
// payload equal to the pattern.
void check_datagram(const PktBuf* d, uint32_t n, uint32_t hl = kIpv4HdrLen) {
    REQUIRE(d != nullptr);
    REQUIRE(d->data_len >= hl);
    const Ipv4Hdr h = load_hdr<Ipv4Hdr>(d->data());
    CHECK(h.hdr_len() == hl);
    CHECK(h.total_len.get() == hl + n);
    CHECK(!h.is_fragment());
    CHECK(csum_fold(csum_add(0, d->data(), hl)) == 0xffff);
    REQUIRE(d->pkt_len == hl + n);
    uint32_t sum = 0;
    uint32_t segs = 0;
    for (const PktBuf* s = d; s != nullptr; s = s->next, ++segs) sum += s->data_len;
    CHECK(sum == d->pkt_len);
    CHECK(segs == d->nb_segs);
    std::vector<uint8_t> got(n);
    REQUIRE(pkt_read(d, hl, n, got.data()) == n);
    uint32_t bad = 0;
    for (uint32_t i = 0; i < n; ++i) bad += got[i] != pattern_at(i) ? 1u : 0u;
    CHECK(bad == 0);
}

enum class Order { kInOrder, kReversed, kShuffled, kDupInterleaved, kDupShuffled };
const char* order_name(Order o) {
    switch (o) {
        case Order::kInOrder: return "in order";
        case Order::kReversed: return "reversed";
        case Order::kShuffled: return "shuffled";
        case Order::kDupInterleaved: return "each duplicated, interleaved";
        case Order::kDupShuffled: return "each duplicated, shuffled";
    }
    return "?";
}

// Fragments n bytes at mtu, checks the fragments, delivers them in `order`, checks what comes out.
void round_trip(HeapPktPool& pool, uint32_t n, uint32_t mtu, Order order) {
    INFO("payload " << n << " mtu " << mtu << " order " << order_name(order));
    const uint32_t chunk = (mtu - kIpv4HdrLen) & ~7u;
    const uint32_t want = n == 0 ? 1 : (n + chunk - 1) / chunk;
    const uint16_t id = static_cast<uint16_t>(n * 7 + mtu);
    StackCounters ctr;
    ReassemblyConfig cfg;
    cfg.max_bytes = 64u << 20;  // 16 KiB segments at MTU 576 pin ~5 MiB; caps are tested apart
    {
        Ipv4Reassembler reass(cfg);
        PktBuf* payload = make_payload(pool, n);
        Ipv4Fragment fr[kIpv4MaxFragments];
        const uint32_t k = ipv4_fragment(pool, payload, mtu, fr);
        REQUIRE(k == want);
        pkt_free(payload);  // the fragments hold their own references on its storage

        uint32_t covered = 0;
        for (uint32_t i = 0; i < k; ++i) {
            CHECK(fr[i].offset == covered);
            CHECK(fr[i].more == (i + 1 < k));
            const uint32_t len = fr[i].p->pkt_len;
            if (fr[i].more) {
                CHECK(len % 8 == 0);
                CHECK(len == chunk);
            }
            CHECK(fr[i].p->headroom() == kPktHeadroom);  // room for eth + ipv4 in the head segment
            covered += len;
            add_ip_hdr(fr[i].p, id, fr[i].offset, fr[i].more);
            CHECK(fr[i].p->pkt_len <= mtu);
        }
        CHECK(covered == n);

        std::vector<PktBuf*> in;
        for (uint32_t i = 0; i < k; ++i) in.push_back(fr[i].p);
        std::mt19937 rng(n * 31 + mtu);
        switch (order) {
            case Order::kInOrder: break;
            case Order::kReversed: std::reverse(in.begin(), in.end()); break;
            case Order::kShuffled: std::shuffle(in.begin(), in.end(), rng); break;
            case Order::kDupInterleaved:
            case Order::kDupShuffled: {
                std::vector<PktBuf*> twice;
                for (PktBuf* p : in) {
                    twice.push_back(p);
                    twice.push_back(pkt_copy(pool, p));  // a second, independent copy
                    REQUIRE(twice.back() != nullptr);
                }
                in = twice;
                if (order == Order::kDupShuffled) std::shuffle(in.begin(), in.end(), rng);
                break;
            }
        }

        std::vector<PktBuf*> out;
        std::vector<size_t> out_at;  // delivery index that produced each datagram
        for (size_t i = 0; i < in.size(); ++i) {
            PktBuf* d = reass.ipv4_reassemble(in[i], kT0 + i, ctr);
            if (d != nullptr) {
                out.push_back(d);
                out_at.push_back(i);
            }
        }
        for (PktBuf* d : out) check_datagram(d, n);

        if (k == 1) {
            // Offset 0 without MF is no fragment: handed back as it came, once per copy.
            CHECK(out.size() == in.size());
            CHECK(ctr.ip_reass_ok == 0);
            CHECK(reass.datagrams_held() == 0);
        } else if (order == Order::kDupInterleaved) {
            // o0 c0 o1 c1 ...: completes at the last original; only its copy arrives too late.
            REQUIRE(out.size() == 1);
            CHECK(out_at[0] == in.size() - 2);
            CHECK(ctr.ip_reass_ok == 1);
            CHECK(ctr.ip_reass_dup == k - 1);
            CHECK(reass.datagrams_held() == 1);
        } else if (order == Order::kDupShuffled) {
            // Copies that come after completion start a new datagram, which may complete too.
            CHECK(!out.empty());
            CHECK(ctr.ip_reass_ok == out.size());
            CHECK(ctr.ip_reass_dup <= k);
        } else {
            REQUIRE(out.size() == 1);
            CHECK(out_at[0] == in.size() - 1);
            CHECK(ctr.ip_reass_ok == 1);
            CHECK(ctr.ip_reass_dup == 0);
            CHECK(reass.datagrams_held() == 0);
            CHECK(reass.bytes_held() == 0);
        }
        CHECK(ctr.drop_reass_overlap == 0);
        CHECK(ctr.drop_reass_oversize == 0);
        CHECK(ctr.drop_ip_frag_bad == 0);
        CHECK(ctr.drop_reass_cap == 0);

        // Leftover late copies time out.
        const uint32_t left = reass.datagrams_held();
        reass.expire(kT0 + in.size() + cfg.timeout_ns, ctr);
        CHECK(ctr.drop_reass_timeout == left);
        CHECK(reass.datagrams_held() == 0);
        CHECK(reass.bytes_held() == 0);
        for (PktBuf* d : out) pkt_free(d);
    }
    REQUIRE(pool.in_use() == 0);
}

const uint32_t kSizes[] = {0,    1,    1472, 1473, 1480, 1481,  2952,  2953,
                           2960, 2961, 8972, 8980, 8981, 65507, 65515};
const uint32_t kMtus[] = {576, 1500, 9000};
const Order kOrders[] = {Order::kInOrder, Order::kReversed, Order::kShuffled, Order::kDupInterleaved,
                         Order::kDupShuffled};

void round_trip_all(HeapPktPool& pool) {
    for (uint32_t mtu : kMtus)
        for (uint32_t n : kSizes)
            for (Order o : kOrders) round_trip(pool, n, mtu, o);
}

}  // namespace

TEST_CASE("ipv4 fragment and reassemble round trip, 2 KiB segments", "[ipv4][frag]") {
    HeapPktPool pool(2048, 2048);  // a 65515-byte datagram is a chain of 33 segments
    round_trip_all(pool);
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("ipv4 fragment and reassemble round trip, 16 KiB segments", "[ipv4][frag]") {
    HeapPktPool pool(1024, 16384);
    round_trip_all(pool);
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("ipv4_fragment counts and limits", "[ipv4][frag]") {
    HeapPktPool pool(64, 2048);
    PktBuf* payload = make_payload(pool, 65515);
    const uint32_t payload_segs = pool.in_use();
    Ipv4Fragment fr[kIpv4MaxFragments];

    SECTION("pool exhaustion returns 0 and leaks nothing") {
        REQUIRE(ipv4_fragment(pool, payload, 1500, fr) == 0);  // 45 fragments need > 31 segments
        CHECK(pool.in_use() == payload_segs);
    }
    SECTION("the smallest MTU needs exactly kIpv4MaxFragments") {
        HeapPktPool big(1024, 2048);
        PktBuf* p = make_payload(big, 65515);
        REQUIRE(ipv4_fragment(big, p, kMtuMin, fr) == kIpv4MaxFragments);
        for (uint32_t i = 0; i < kIpv4MaxFragments; ++i) pkt_free(fr[i].p);
        pkt_free(p);
        CHECK(big.in_use() == 0);
    }
    SECTION("what cannot be sent returns 0") {
        CHECK(ipv4_fragment(pool, payload, 27, fr) == 0);   // no room for 8 payload bytes
        CHECK(ipv4_fragment(pool, payload, 300, fr) == 0);  // more than kIpv4MaxFragments
        CHECK(pool.in_use() == payload_segs);
        HeapPktPool big(64, 2048);
        PktBuf* huge = make_payload(big, kIpv4MaxDatagram - kIpv4HdrLen + 1);
        CHECK(ipv4_fragment(big, huge, 9000, fr) == 0);  // beyond what the offset field addresses
        pkt_free(huge);
        CHECK(big.in_use() == 0);
    }
    pkt_free(payload);
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("ipv4 reassembly: overlapping fragments drop the datagram", "[ipv4][reass]") {
    HeapPktPool pool(256, 2048);
    StackCounters ctr;
    {
        Ipv4Reassembler reass(ReassemblyConfig{});
        PktBuf* payload = make_payload(pool, 3000);
        const uint16_t id = 7;

        SECTION("later fragment overlaps the tail of an earlier one") {
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 0, 1480, 0, true, id), kT0, ctr) == nullptr);
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 1472, 16, 1472, false, id), kT0, ctr) ==
                  nullptr);
        }
        SECTION("earlier fragment overlaps the head of a later one") {
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 1472, 16, 1472, false, id), kT0, ctr) ==
                  nullptr);
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 0, 1480, 0, true, id), kT0, ctr) == nullptr);
        }
        SECTION("same offset, different length") {
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 0, 1480, 0, true, id), kT0, ctr) == nullptr);
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 0, 8, 0, true, id), kT0, ctr) == nullptr);
        }
        SECTION("a fragment that covers a held one") {
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 16, 8, 16, true, id), kT0, ctr) == nullptr);
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 0, 1480, 0, true, id), kT0, ctr) == nullptr);
        }
        CHECK(ctr.drop_reass_overlap == 1);
        CHECK(reass.datagrams_held() == 0);
        CHECK(reass.bytes_held() == 0);

        // Later fragments of the same id simply start over.
        CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 1480, 1520, 1480, false, id), kT0, ctr) ==
              nullptr);
        CHECK(reass.datagrams_held() == 1);
        PktBuf* d = reass.ipv4_reassemble(make_frag(pool, payload, 0, 1480, 0, true, id), kT0, ctr);
        check_datagram(d, 3000);
        pkt_free(d);
        CHECK(reass.bytes_held() == 0);
        pkt_free(payload);
    }
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("ipv4 reassembly: an exact duplicate is ignored and counted", "[ipv4][reass]") {
    HeapPktPool pool(256, 2048);
    StackCounters ctr;
    {
        Ipv4Reassembler reass(ReassemblyConfig{});
        PktBuf* payload = make_payload(pool, 2000);
        PktBuf* a = make_frag(pool, payload, 0, 1480, 0, true, 9);
        PktBuf* a2 = pkt_copy(pool, a);
        REQUIRE(a2 != nullptr);
        CHECK(reass.ipv4_reassemble(a, kT0, ctr) == nullptr);
        const uint64_t held = reass.bytes_held();
        CHECK(reass.ipv4_reassemble(a2, kT0, ctr) == nullptr);
        CHECK(ctr.ip_reass_dup == 1);
        CHECK(reass.bytes_held() == held);  // the copy was freed, not held
        PktBuf* d = reass.ipv4_reassemble(make_frag(pool, payload, 1480, 520, 1480, false, 9), kT0, ctr);
        check_datagram(d, 2000);
        CHECK(ctr.ip_reass_ok == 1);
        pkt_free(d);
        pkt_free(payload);
        CHECK(reass.bytes_held() == 0);
    }
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("ipv4 reassembly: a datagram beyond 65535 bytes is dropped", "[ipv4][reass]") {
    HeapPktPool pool(256, 2048);
    StackCounters ctr;
    {
        Ipv4Reassembler reass(ReassemblyConfig{});
        PktBuf* payload = make_payload(pool, 1480);

        SECTION("last fragment ends beyond 65515 with a datagram in progress") {
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 0, 1480, 0, true, 3), kT0, ctr) == nullptr);
            CHECK(reass.datagrams_held() == 1);
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 0, 16, 65512, false, 3), kT0, ctr) ==
                  nullptr);
        }
        SECTION("a lone fragment ending beyond 65515") {
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 0, 16, 65504, true, 3), kT0, ctr) == nullptr);
        }
        SECTION("ending at 65515 is too long behind a first header with options") {
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 0, 3, 65512, false, 3), kT0, ctr) == nullptr);
            CHECK(reass.datagrams_held() == 1);  // 65515 fits a 20-byte header
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 0, 1480, 0, true, 3, 24), kT0, ctr) ==
                  nullptr);
        }
        CHECK(ctr.drop_reass_oversize == 1);
        CHECK(reass.datagrams_held() == 0);
        CHECK(reass.bytes_held() == 0);
        pkt_free(payload);
    }
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("ipv4 reassembly: bad fragment lengths and totals", "[ipv4][reass]") {
    HeapPktPool pool(256, 2048);
    StackCounters ctr;
    {
        Ipv4Reassembler reass(ReassemblyConfig{});
        PktBuf* payload = make_payload(pool, 4000);

        SECTION("a non-last fragment not a multiple of 8") {
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 0, 1480, 0, true, 5), kT0, ctr) == nullptr);
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 1480, 13, 1480, true, 5), kT0, ctr) ==
                  nullptr);
        }
        SECTION("an empty non-last fragment") {
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 0, 0, 1480, true, 5), kT0, ctr) == nullptr);
        }
        SECTION("a second last fragment with another total") {
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 1480, 20, 1480, false, 5), kT0, ctr) ==
                  nullptr);
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 2960, 8, 2960, false, 5), kT0, ctr) ==
                  nullptr);
        }
        SECTION("a last fragment ending before data already held") {
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 2960, 8, 2960, true, 5), kT0, ctr) == nullptr);
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 1480, 20, 1480, false, 5), kT0, ctr) ==
                  nullptr);
        }
        SECTION("a fragment beyond the known total") {
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 1480, 20, 1480, false, 5), kT0, ctr) ==
                  nullptr);
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 2960, 8, 2960, true, 5), kT0, ctr) == nullptr);
        }
        CHECK(ctr.drop_ip_frag_bad == 1);
        CHECK(reass.datagrams_held() == 0);
        CHECK(reass.bytes_held() == 0);
        pkt_free(payload);
    }
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("ipv4 reassembly: edge shapes complete", "[ipv4][reass]") {
    HeapPktPool pool(256, 2048);
    StackCounters ctr;
    {
        Ipv4Reassembler reass(ReassemblyConfig{});
        PktBuf* payload = make_payload(pool, 3000);

        SECTION("an empty last fragment") {
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 0, 8, 0, true, 1), kT0, ctr) == nullptr);
            PktBuf* d = reass.ipv4_reassemble(make_frag(pool, payload, 8, 0, 8, false, 1), kT0, ctr);
            check_datagram(d, 8);
            pkt_free(d);
        }
        SECTION("the first fragment carries options, the others do not") {
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 1480, 1520, 1480, false, 2), kT0, ctr) ==
                  nullptr);
            PktBuf* d = reass.ipv4_reassemble(make_frag(pool, payload, 0, 1480, 0, true, 2, 24), kT0, ctr);
            check_datagram(d, 3000, 24);
            pkt_free(d);
        }
        SECTION("non-first fragments with options are stripped by their own length") {
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 1480, 1520, 1480, false, 2, 60), kT0, ctr) ==
                  nullptr);
            PktBuf* d = reass.ipv4_reassemble(make_frag(pool, payload, 0, 1480, 0, true, 2), kT0, ctr);
            check_datagram(d, 3000);
            pkt_free(d);
        }
        SECTION("datagrams with different ids do not mix") {
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 0, 1480, 0, true, 1), kT0, ctr) == nullptr);
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 1480, 1520, 1480, false, 2), kT0, ctr) ==
                  nullptr);
            CHECK(reass.datagrams_held() == 2);
            PktBuf* d = reass.ipv4_reassemble(make_frag(pool, payload, 1480, 1520, 1480, false, 1), kT0, ctr);
            check_datagram(d, 3000);
            pkt_free(d);
            CHECK(reass.datagrams_held() == 1);
        }
        CHECK(ctr.ip_reass_ok == 1);
        pkt_free(payload);
    }  // the destructor frees what is still held
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("ipv4 reassembly: a partial datagram times out", "[ipv4][reass]") {
    HeapPktPool pool(256, 2048);
    StackCounters ctr;
    ReassemblyConfig cfg;
    cfg.timeout_ns = 1000;
    {
        Ipv4Reassembler reass(cfg);
        PktBuf* payload = make_payload(pool, 3000);
        CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 0, 1480, 0, true, 4), kT0, ctr) == nullptr);

        SECTION("by expire(), not a nanosecond early") {
            reass.expire(kT0 + 999, ctr);
            CHECK(reass.datagrams_held() == 1);
            reass.expire(kT0 + 1000, ctr);
            CHECK(reass.datagrams_held() == 0);
            CHECK(ctr.drop_reass_timeout == 1);
        }
        SECTION("lazily, when its next fragment arrives too late") {
            // The late fragment starts a new datagram (deadline kT0 + 1000 + 1000) ...
            CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 1480, 1520, 1480, false, 4), kT0 + 1000,
                                        ctr) == nullptr);
            CHECK(ctr.drop_reass_timeout == 1);
            CHECK(reass.datagrams_held() == 1);
            // ... which a resent first fragment completes.
            PktBuf* d = reass.ipv4_reassemble(make_frag(pool, payload, 0, 1480, 0, true, 4), kT0 + 1999, ctr);
            check_datagram(d, 3000);
            pkt_free(d);
        }
        CHECK(reass.bytes_held() == 0);
        pkt_free(payload);
    }
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("ipv4 reassembly: a flood of partial datagrams stays within the caps", "[ipv4][reass]") {
    // mtu 1500: a first fragment pins 2 segments (4 KiB), so 64 datagrams fill 256 KiB exactly;
    // mtu 9000: it pins 6 (12 KiB), so the byte cap binds first, at 21 datagrams.
    const uint32_t mtu = GENERATE(1500u, 9000u);
    INFO("mtu " << mtu);
    HeapPktPool pool(1024, 2048);
    StackCounters ctr;
    ReassemblyConfig cfg;
    cfg.max_datagrams = 64;
    cfg.max_bytes = 256u << 10;
    {
        Ipv4Reassembler reass(cfg);
        PktBuf* payload = make_payload(pool, 9000);
        const uint32_t first_len = (mtu - kIpv4HdrLen) & ~7u;
        constexpr uint32_t kFlood = 10'000;
        uint64_t now = kT0;
        for (uint32_t i = 0; i < kFlood; ++i, ++now) {
            PktBuf* f = make_frag(pool, payload, 0, first_len, 0, true, static_cast<uint16_t>(i));
            REQUIRE(reass.ipv4_reassemble(f, now, ctr) == nullptr);
            REQUIRE(reass.datagrams_held() <= cfg.max_datagrams);
            REQUIRE(reass.bytes_held() <= cfg.max_bytes);
        }
        const uint32_t held = reass.datagrams_held();
        CHECK(held == (mtu == 1500 ? 64u : 21u));
        CHECK(ctr.drop_reass_cap == kFlood - held);
        CHECK(ctr.drop_reass_timeout == 0);
        reass.expire(now + cfg.timeout_ns, ctr);
        CHECK(reass.datagrams_held() == 0);
        CHECK(reass.bytes_held() == 0);
        CHECK(ctr.drop_reass_timeout == held);

        // Once drained, the reassembler works again.
        CHECK(reass.ipv4_reassemble(make_frag(pool, payload, 0, 1480, 0, true, 1), now, ctr) == nullptr);
        PktBuf* d = reass.ipv4_reassemble(make_frag(pool, payload, 1480, 1520, 1480, false, 1), now, ctr);
        check_datagram(d, 3000);
        pkt_free(d);
        pkt_free(payload);
    }
    REQUIRE(pool.in_use() == 0);
}
