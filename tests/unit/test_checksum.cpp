// The Internet checksum: RFC 1071's worked example, odd lengths, and chains split anywhere.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "checksum.hpp"

using namespace iccs;

static uint16_t reference_csum(const std::vector<uint8_t>& b) {
    uint64_t s = 0;  // 64 bits: the wide sums' tests go past 2^17 words
    for (size_t i = 0; i < b.size(); i += 2) s += (uint32_t{b[i]} << 8) | (i + 1 < b.size() ? b[i + 1] : 0);
    while (s >> 16) s = (s & 0xffff) + (s >> 16);
    return static_cast<uint16_t>(~s);
}

TEST_CASE("RFC 1071 section 3 example", "[checksum]") {
    const uint8_t b[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
    REQUIRE(csum_fold(csum_add(0, b, sizeof b)) == 0xddf2);
    REQUIRE(csum_finish(csum_add(0, b, sizeof b)) == 0x220d);
}

TEST_CASE("IPv4 header checksum of the classic example header is 0xb861", "[checksum]") {
    const uint8_t h[] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                         0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
    REQUIRE(csum_finish(csum_add(0, h, sizeof h)) == 0xb861);
}

TEST_CASE("flat and chained sums agree with a byte-wise reference at every length and split", "[checksum]") {
    std::mt19937 rng(42);
    HeapPktPool pool(256, 64);
    for (uint32_t len = 0; len < 300; len += (len < 40 ? 1 : 7)) {
        std::vector<uint8_t> b(len);
        for (auto& x : b) x = static_cast<uint8_t>(rng());
        REQUIRE(csum_finish(csum_add(0, b.data(), b.size())) == reference_csum(b));
        // A chain of odd-sized segments: build it by hand.
        PktBuf* head = nullptr;
        PktBuf* tail = nullptr;
        size_t off = 0;
        while (off < len || head == nullptr) {
            PktBuf* s = pkt_alloc(pool, 0);
            const uint32_t k = std::min<uint32_t>(static_cast<uint32_t>(len - off), 1 + rng() % 13);
            std::copy(b.begin() + static_cast<long>(off), b.begin() + static_cast<long>(off + k), pkt_append(s, k));
            off += k;
            if (head == nullptr) head = s; else tail->next = s;
            tail = s;
        }
        pkt_recount(head);
        REQUIRE(csum_finish(csum_chain(head, 0, len)) == reference_csum(b));
        if (len > 3) {
            std::vector<uint8_t> mid(b.begin() + 3, b.end());
            REQUIRE(csum_finish(csum_chain(head, 3, len - 3)) == reference_csum(mid));
        }
        pkt_free(head);
    }
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("sums that carry out of every 64-bit word agree with the reference", "[checksum]") {
    // All-ones words carry on every add (the add-with-carry counts of csum_native); 65535 bytes is
    // the longest IPv4 datagram. Every start offset mod 8 and tail length 0..7.
    for (uint32_t len : {7u, 8u, 15u, 31u, 32u, 33u, 63u, 64u, 65u, 1480u, 65535u}) {
        for (uint8_t fill : {uint8_t{0xff}, uint8_t{0xfe}, uint8_t{0x80}}) {
            std::vector<uint8_t> b(len + 8, fill);
            for (uint32_t off = 0; off < 8; ++off) {
                const std::vector<uint8_t> part(b.begin() + off, b.begin() + off + len);
                REQUIRE(csum_finish(csum_add(0, b.data() + off, len)) == reference_csum(part));
            }
        }
    }
}

namespace {

// The wide sum's paths this CPU can run (csum_native_by, csum_copy_by).
std::vector<CsumPath> supported_paths() {
    std::vector<CsumPath> v;
    for (CsumPath path : {CsumPath::kWords, CsumPath::kAvx2, CsumPath::kAvx512})
        if (csum_path_supported(path)) v.push_back(path);
    return v;
}

std::vector<uint8_t> flat_bytes(const PktBuf* p, uint32_t off = 0) {
    std::vector<uint8_t> v(p->pkt_len - off);
    REQUIRE(pkt_read(p, off, p->pkt_len - off, v.data()) == v.size());
    return v;
}

}  // namespace

TEST_CASE("a payload written with its sums kept checksums as its bytes, headers before it and bytes after it",
          "[checksum]") {
    // What convergence does on a DPDK fabric (issue 35): a header appended, the payload written
    // with PktSum::kKeep (segments chained as they fill), then lower layers' headers prepended
    // and, at times, bytes appended (an Ethernet pad). Every offset and odd length: the kept
    // sums land in either byte lane of the range the checksum covers.
    std::mt19937 rng(7);
    HeapPktPool pool(512, 700);
    for (uint32_t len : {256u, 257u, 699u, 700u, 1401u, 5000u, 9011u})
        for (uint32_t hdr : {0u, 1u, 40u, 41u})
            for (uint32_t pre : {0u, 13u, 28u}) {
                INFO("payload " << len << " header " << hdr << " prepended " << pre);
                std::vector<uint8_t> payload(len);
                for (auto& x : payload) x = static_cast<uint8_t>(rng());
                PktBuf* p = pkt_alloc(pool, 64);
                for (uint32_t i = 0; i < hdr; ++i) *pkt_append(p, 1) = static_cast<uint8_t>(0x80 + i);
                REQUIRE(pkt_write(p, pool, payload.data(), len, PktSum::kKeep));
                REQUIRE(p->sum_len != 0);  // kept, so the checksum below takes it
                const uint8_t tail[3] = {0xff, 0x01, 0xfe};
                REQUIRE(pkt_write(p, pool, tail, 1 + len % 3));
                uint8_t* front = pkt_prepend(p, pre);
                for (uint32_t i = 0; i < pre; ++i) front[i] = static_cast<uint8_t>(0x31 * i);
                for (uint32_t off : {0u, 1u, pre + 3}) {
                    if (off > p->pkt_len) continue;
                    REQUIRE(csum_finish(csum_chain(p, off, p->pkt_len - off)) == reference_csum(flat_bytes(p, off)));
                }
                pkt_free(p);
            }
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("the checksum takes a segment's kept sum instead of its bytes, until the segment forgets it",
          "[checksum]") {
    // A byte changed in place behind pkt_write's back shows that the bytes were not read again;
    // pkt_sum_forget (what sealing with encryption does) makes the checksum read them.
    HeapPktPool pool(64, 2048);
    std::vector<uint8_t> payload(1500);
    for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7 + 3);
    PktBuf* p = pkt_alloc(pool, 64);
    std::memset(pkt_append(p, 40), 0x5a, 40);
    REQUIRE(pkt_write(p, pool, payload.data(), static_cast<uint32_t>(payload.size()), PktSum::kKeep));
    const std::vector<uint8_t> written = flat_bytes(p);
    p->data()[40 + 700] ^= 0x40;
    REQUIRE(csum_finish(csum_chain(p, 0, p->pkt_len)) == reference_csum(written));
    pkt_sum_forget(p);
    REQUIRE(csum_finish(csum_chain(p, 0, p->pkt_len)) == reference_csum(flat_bytes(p)));
    REQUIRE(csum_finish(csum_chain(p, 0, p->pkt_len)) != reference_csum(written));
    // Few bytes are not kept (the one-segment checksum reads them as fast).
    PktBuf* small = pkt_alloc(pool, 64);
    REQUIRE(pkt_write(small, pool, payload.data(), kPktSumMinBytes - 1, PktSum::kKeep));
    REQUIRE(small->sum_len == 0);
    pkt_free(small);
    pkt_free(p);
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("every vector path of the wide sum agrees with the reference, lanes full and blocks crossed",
          "[checksum]") {
    // csum_native_wide takes 64 or 32 bytes a step (issue 35): each path this CPU has, at lengths
    // around its step and its tail, every start offset mod 8, random bytes and all-ones bytes (the
    // largest words: 32-bit lanes at their fullest), and past a block of 2^14 steps (512 KiB for
    // AVX2, 1 MiB for AVX-512), where the lanes are summed and restarted.
    std::mt19937 rng(35);
    const std::vector<uint32_t> lens = {256, 257, 319, 320, 383, 1472, 2048, 2049, 8976, 9011, 65535,
                                        (1u << 19) + 63, (1u << 20) + 127, (1u << 21) + 1};
    const std::vector<CsumPath> paths = supported_paths();
    REQUIRE(!paths.empty());
    for (CsumPath path : paths) {
        for (uint32_t len : lens)
            for (bool ones : {false, true}) {
                std::vector<uint8_t> b(len + 8);
                for (auto& x : b) x = ones ? 0xff : static_cast<uint8_t>(rng());
                for (uint32_t off : {0u, 1u, 3u, 7u}) {
                    INFO("path " << static_cast<int>(path) << " length " << len << " offset " << off);
                    const std::vector<uint8_t> part(b.begin() + off, b.begin() + off + len);
                    const uint64_t sum = csum_native_by(path, b.data() + off, len);
                    REQUIRE(sum < (uint64_t{1} << 33));  // callers add words before folding
                    REQUIRE(static_cast<uint16_t>(~__builtin_bswap16(csum_fold(sum))) == reference_csum(part));
                }
            }
    }
    // What csum_add uses for long runs is the one csum_wide_path names.
    std::vector<uint8_t> b(9000);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    REQUIRE(csum_finish(csum_add(0, b.data(), b.size())) == reference_csum(b));
    REQUIRE(csum_fold(csum_native_wide(b.data(), b.size())) ==
            csum_fold(csum_native_by(csum_wide_path(), b.data(), b.size())));
}

TEST_CASE("the copy with its sum writes the source's bytes and gives the separate pass's sum to the bit",
          "[checksum]") {
    // csum_copy_native (pkt_write's PktSum::kKeep, issue 35) replaces memcpy + csum_native: each
    // path this CPU has, odd lengths and tails, source and destination at every offset mod 8 (one
    // unaligned against the other), and past a block of 2^14 steps. The bytes on the wire and the
    // checksum must be exactly those of the two passes.
    std::mt19937 rng(135);
    const std::vector<uint32_t> lens = {0, 1, 7, 255, 256, 257, 319, 383, 1473, 8976, 9011, (1u << 19) + 63,
                                        (1u << 20) + 127};
    const std::vector<CsumPath> paths = supported_paths();
    REQUIRE(!paths.empty());
    for (CsumPath path : paths) {
        for (uint32_t len : lens)
            for (bool ones : {false, true}) {
                std::vector<uint8_t> src(len + 8);
                for (auto& x : src) x = ones ? 0xff : static_cast<uint8_t>(rng());
                for (uint32_t so : {0u, 3u})
                    for (uint32_t d_off : {0u, 1u, 7u}) {
                        INFO("path " << static_cast<int>(path) << " length " << len << " offsets " << so << "/" << d_off);
                        std::vector<uint8_t> dst(len + 16, 0xa5);
                        const uint64_t sum = csum_copy_by(path, dst.data() + d_off, src.data() + so, len);
                        REQUIRE(std::equal(src.begin() + so, src.begin() + so + len, dst.begin() + d_off));
                        REQUIRE(dst[d_off + len] == 0xa5);  // nothing written past the end
                        if (d_off > 0) REQUIRE(dst[d_off - 1] == 0xa5);
                        REQUIRE(sum == csum_native_by(path, src.data() + so, len));
                        if (len >= kCsumWideMinBytes && path == csum_wide_path()) {
                            std::vector<uint8_t> again(len);
                            REQUIRE(csum_copy_native(again.data(), src.data() + so, len) == sum);
                        }
                    }
            }
    }
}

TEST_CASE("pkt_write with kept sums copies every byte and keeps the sum of each chained segment's bytes",
          "[checksum]") {
    // Segments of 700 bytes: a write of odd length fills and chains several, the first of them
    // after a header of odd length; each kept sum must be that of the bytes its segment holds.
    std::mt19937 rng(11);
    HeapPktPool pool(512, 700);
    for (uint32_t len : {257u, 1401u, 5001u, 9011u})
        for (uint32_t hdr : {0u, 41u}) {
            INFO("payload " << len << " header " << hdr);
            std::vector<uint8_t> payload(len);
            for (auto& x : payload) x = static_cast<uint8_t>(rng());
            PktBuf* p = pkt_alloc(pool, 64);
            for (uint32_t i = 0; i < hdr; ++i) *pkt_append(p, 1) = static_cast<uint8_t>(i);
            REQUIRE(pkt_write(p, pool, payload.data(), len, PktSum::kKeep));
            REQUIRE(flat_bytes(p, hdr) == payload);
            uint32_t segs_kept = 0;
            for (const PktBuf* s = p; s != nullptr; s = s->next) {
                if (s->sum_len == 0) continue;
                ++segs_kept;
                const uint8_t* kept = s->buf + s->sum_at;
                REQUIRE(s->sum == csum_fold(csum_add(0, kept, s->sum_len)));
            }
            REQUIRE(segs_kept >= (len + hdr) / 700);
            pkt_free(p);
        }
    REQUIRE(pool.in_use() == 0);
}
