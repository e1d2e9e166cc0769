// Packet-buffer view: headroom, strip, chains, slices (indirect views) and reference counts.
#include <catch2/catch.hpp>
#include <cstring>
#include <numeric>
#include <vector>

#include "pktbuf.hpp"

using namespace iccs;

static std::vector<uint8_t> bytes_of(const PktBuf* p) {
    std::vector<uint8_t> v(p->pkt_len);
    REQUIRE(pkt_read(p, 0, p->pkt_len, v.data()) == p->pkt_len);
    return v;
}

TEST_CASE("prepend and strip move the window, not the bytes", "[pktbuf]") {
    HeapPktPool pool(8, 256);
    PktBuf* p = pkt_alloc(pool, 64);
    REQUIRE(p != nullptr);
    std::memcpy(pkt_append(p, 4), "data", 4);
    uint8_t* payload = p->data();
    uint8_t* h = pkt_prepend(p, 8);
    REQUIRE(h == payload - 8);
    REQUIRE(p->pkt_len == 12);
    REQUIRE(p->headroom() == 56);
    REQUIRE(pkt_prepend(p, 57) == nullptr);  // no more headroom than there is
    REQUIRE(pkt_adj(p, 8) == payload);
    REQUIRE(pkt_adj(p, 5) == nullptr);
    REQUIRE(std::memcmp(p->data(), "data", 4) == 0);
    pkt_free(p);
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("pkt_write chains segments and pkt_read/contig see one byte string", "[pktbuf]") {
    HeapPktPool pool(64, 128);
    std::vector<uint8_t> src(1000);
    std::iota(src.begin(), src.end(), uint8_t{0});
    PktBuf* p = pkt_alloc(pool, 32);
    REQUIRE(pkt_write(p, pool, src.data(), 1000));
    REQUIRE(p->pkt_len == 1000);
    REQUIRE(p->nb_segs == 1 + (1000 - 96 + 127) / 128);
    REQUIRE(bytes_of(p) == src);
    uint8_t scratch[64];
    const uint8_t* c = pkt_contig(p, 90, 20, scratch);  // spans the first two segments
    REQUIRE(c == scratch);
    REQUIRE(std::memcmp(c, src.data() + 90, 20) == 0);
    REQUIRE(pkt_contig(p, 10, 20, scratch) == p->data() + 10);
    REQUIRE(pkt_contig(p, 990, 20, scratch) == nullptr);
    REQUIRE(pkt_trim_to(p, 100));
    REQUIRE(p->nb_segs == 2);
    REQUIRE(bytes_of(p) == std::vector<uint8_t>(src.begin(), src.begin() + 100));
    pkt_free(p);
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("slices view the original storage and keep it alive", "[pktbuf]") {
    HeapPktPool pool(64, 128);
    std::vector<uint8_t> src(600);
    std::iota(src.begin(), src.end(), uint8_t{7});
    PktBuf* p = pkt_alloc(pool, 0);
    REQUIRE(pkt_write(p, pool, src.data(), 600));
    const uint32_t segs_before = pool.in_use();
    PktBuf* s = pkt_slice(pool, p, 100, 300, 64);  // header segment + views
    REQUIRE(s != nullptr);
    REQUIRE(s->pkt_len == 300);
    REQUIRE(s->headroom() == 64);
    REQUIRE(bytes_of(s) == std::vector<uint8_t>(src.begin() + 100, src.begin() + 400));
    REQUIRE(pkt_shared(p));
    pkt_free(p);  // the slice still pins the segments it views
    REQUIRE(pool.in_use() > s->nb_segs);
    REQUIRE(bytes_of(s) == std::vector<uint8_t>(src.begin() + 100, src.begin() + 400));
    PktBuf* s2 = pkt_slice(pool, s, 10, 50, 0);  // a slice of a slice views the root storage
    REQUIRE(bytes_of(s2) == std::vector<uint8_t>(src.begin() + 110, src.begin() + 160));
    pkt_free(s);
    pkt_free(s2);
    REQUIRE(pool.in_use() == 0);
    (void)segs_before;
}

TEST_CASE("references: pkt_ref keeps a packet past one free", "[pktbuf]") {
    HeapPktPool pool(8, 64);
    PktBuf* p = pkt_alloc(pool, 0);
    REQUIRE(pkt_write(p, pool, "0123456789abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ", 72));
    pkt_ref(p);
    pkt_free(p);
    REQUIRE(pool.in_use() == 2);
    PktBuf* c = pkt_copy(pool, p, 16);
    REQUIRE(bytes_of(c) == bytes_of(p));
    pkt_free(p);
    pkt_free(c);
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("an empty pool fails cleanly", "[pktbuf]") {
    HeapPktPool pool(2, 64);
    PktBuf* a = pkt_alloc(pool, 0);
    PktBuf* b = pkt_alloc(pool, 0);
    REQUIRE(pkt_alloc(pool, 0) == nullptr);
    REQUIRE(pool.alloc_failures() == 1);
    std::vector<uint8_t> big(200, 1);
    REQUIRE_FALSE(pkt_write(a, pool, big.data(), 200));
    pkt_free(a);
    pkt_free(b);
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("a fallback pool chains large segments while it has them, then small ones", "[pktbuf]") {
    // A copying send's payload on a jumbo-frame fabric (convergence, ConvNet::bulk_pool).
    HeapPktPool small(64, 128);
    HeapPktPool large(2, 1024);
    FallbackPktPool chain(large, small);
    REQUIRE(chain.seg_size() == 1024);
    std::vector<uint8_t> src(3000);
    std::iota(src.begin(), src.end(), uint8_t{7});
    PktBuf* p = pkt_alloc(small, 32);  // the head: headers and the first bytes, a small buffer
    REQUIRE(pkt_write(p, chain, src.data(), 3000));
    // 96 bytes in the head, 2 x 1024 in the large segments, the 856 left in 7 small ones
    REQUIRE(p->nb_segs == 10);
    REQUIRE(p->next->pool == &large);
    REQUIRE(p->next->next->pool == &large);
    REQUIRE(p->next->next->next->pool == &small);
    REQUIRE(chain.fallbacks() == 7);
    REQUIRE(bytes_of(p) == src);
    REQUIRE(large.in_use() == 2);
    pkt_free(p);  // each segment back to the pool it came from
    REQUIRE(large.in_use() == 0);
    REQUIRE(small.in_use() == 0);
    PktBuf* q = pkt_alloc(small, 0);
    REQUIRE(pkt_write(q, chain, src.data(), 1200));  // large ones again once freed
    REQUIRE(q->next->pool == &large);
    REQUIRE(q->nb_segs == 3);
    pkt_free(q);
    REQUIRE(large.in_use() == 0);
    REQUIRE(small.in_use() == 0);
}
