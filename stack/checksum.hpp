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

// Sums native-order 64-bit words (one's-complement addition commutes with byte order, RFC 1071
// §2(B)): the caller byte-swaps the folded result once. The carries collect in the high half of
// a 128-bit accumulator (add + adc per word, no dependency on a compare) and are folded back at
// the end; words are loaded one by one so no load waits on a wider store.
inline uint64_t csum_native(const uint8_t* p, size_t len) {
    unsigned __int128 acc = 0;
    auto word = [](const uint8_t* q) {
        uint64_t w;
        std::memcpy(&w, q, 8);
        return w;
    };
    while (len >= 32) {
        acc += word(p);
        acc += word(p + 8);
        acc += word(p + 16);
        acc += word(p + 24);
        p += 32;
        len -= 32;
    }
    while (len >= 8) {
        acc += word(p);
        p += 8;
        len -= 8;
    }
    // 0..7 bytes left: little-endian, so each keeps its lane in the low bytes of the word
    uint64_t tail = 0;
    if (len & 4) {
        uint32_t w;
        std::memcpy(&w, p, 4);
        tail = w;
        p += 4;
    }
    if (len & 2) {
        uint16_t w;
        std::memcpy(&w, p, 2);
        tail |= uint64_t{w} << ((len & 4) * 8);
        p += 2;
    }
    if (len & 1) tail |= uint64_t{*p} << ((len & 6) * 8);
    acc += tail;
    // end-around carry: fold the carries (high half) into the low 64 bits
    uint64_t lo = static_cast<uint64_t>(acc);
    const uint64_t hi = static_cast<uint64_t>(acc >> 64);
    lo += hi;
    lo += (lo < hi);
    return lo;
}

// Add the 16-bit big-endian words of [p, p+len) to sum (an odd tail byte counts as its high byte).
inline uint64_t csum_add(uint64_t sum, const void* p, size_t len) {
    const uint16_t native = csum_fold(csum_native(static_cast<const uint8_t*>(p), len));
    return sum + __builtin_bswap16(native);  // to big-endian word order
}

// One's-complement checksum as it goes on the wire: ~fold(sum), in host order.
inline uint16_t csum_finish(uint64_t sum) { return static_cast<uint16_t>(~csum_fold(sum)); }

// Partial sum of len bytes of a chain from offset off.
uint64_t csum_chain(const PktBuf* head, uint32_t off, uint32_t len, uint64_t sum = 0);

}  // namespace iccs
