// checksum.hpp: the Internet checksum (RFC 1071) over bytes and over packet chains.
//
// Sums are kept unfolded in 64 bits and folded once at the end; a segment of odd length shifts
// the byte lanes of everything after it, which csum_chain handles by swapping (RFC 1071 §2(B)).
// The byte loop is inline: it runs two to four times per packet on the hot path (IPv4 header,
// UDP pseudo-header + datagram), mostly over 20 to a few hundred bytes, where a call and a
// generic loop cost as much as the sum itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "pktbuf.hpp"

namespace iccs {

// Fold a 64-bit partial sum to 16 bits (not complemented).
inline uint16_t csum_fold(uint64_t sum) {
    sum = (sum & 0xffffffffu) + (sum >> 32);
    sum = (sum & 0xffffffffu) + (sum >> 32);
    sum = (sum & 0xffffu) + (sum >> 16);
    sum = (sum & 0xffffu) + (sum >> 16);
    return static_cast<uint16_t>(sum);
}

// Sums native-order 32-bit words into 64-bit sums (one's-complement addition commutes with byte
// order, RFC 1071 §2(B)): the caller byte-swaps the folded result once. No carry is lost below
// 2^32 words, and four independent sums let the loads and adds run in parallel: an add-with-carry
// chain (or the 128-bit accumulator of an earlier version, which GCC spilled to the stack where
// the sum was inlined) does one word per cycle at best.
inline uint64_t csum_native(const uint8_t* p, size_t len) {
    auto word = [](const uint8_t* q) {
        uint32_t w;
        std::memcpy(&w, q, 4);
        return uint64_t{w};
    };
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    while (len >= 32) {
        s0 += word(p);
        s1 += word(p + 4);
        s2 += word(p + 8);
        s3 += word(p + 12);
        s0 += word(p + 16);
        s1 += word(p + 20);
        s2 += word(p + 24);
        s3 += word(p + 28);
        p += 32;
        len -= 32;
    }
    while (len >= 4) {
        s0 += word(p);
        p += 4;
        len -= 4;
    }
    // 0..3 bytes left: little-endian, so each keeps its lane in the low bytes of the word
    if (len & 2) {
        uint16_t w;
        std::memcpy(&w, p, 2);
        s1 += w;
        p += 2;
    }
    if (len & 1) s2 += uint64_t{*p} << ((len & 2) * 8);
    return (s0 + s1) + (s2 + s3);
}

// Add the 16-bit big-endian words of [p, p+len) to sum (an odd tail byte counts as its high byte).
inline uint64_t csum_add(uint64_t sum, const void* p, size_t len) {
    const uint16_t native = csum_fold(csum_native(static_cast<const uint8_t*>(p), len));
    return sum + __builtin_bswap16(native);  // to big-endian word order
}

// One's-complement checksum as it goes on the wire: ~fold(sum), in host order.
inline uint16_t csum_finish(uint64_t sum) { return static_cast<uint16_t>(~csum_fold(sum)); }

// Partial sum of len bytes of a chain from offset off (the one-segment case inline: every frame
// the stack sends or receives below the MTU).
uint64_t csum_chain_slow(const PktBuf* head, uint32_t off, uint32_t len, uint64_t sum);
inline uint64_t csum_chain(const PktBuf* head, uint32_t off, uint32_t len, uint64_t sum = 0) {
    if (head->next == nullptr && off + len <= head->data_len) return csum_add(sum, head->data() + off, len);
    return csum_chain_slow(head, off, len, sum);
}

}  // namespace iccs
