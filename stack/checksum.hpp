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

// Sums native-order (little-endian) 64-bit words, a carry out of bit 63 counted as one more
// (2^64 = 1 modulo 2^16 - 1: RFC 1071 §2(C), any word size with end-around carry); one's-complement
// addition commutes with byte order (§2(B)), so the caller byte-swaps the folded result once. GCC
// makes each word one add and one add-with-carry into a separate count, in two independent
// chains, and the 0..31 bytes after the loop at most four more words, without a loop. (The
// version before, 32-bit lanes that GCC vectorized with SSE2, took 145 instructions for 100
// bytes, most of them set-up and tail; and its 16-byte loads of a header just stored as 8-byte
// words cannot take the value from the store buffer.) The result is below 2^33, so callers may
// add a few more words before folding. csum_native below takes this loop for short runs only.
inline uint64_t csum_native_words(const uint8_t* p, size_t len) {
    auto word = [](const uint8_t* q) {
        uint64_t w;
        std::memcpy(&w, q, 8);
        return w;
    };
    uint64_t a = 0, b = 0, ca = 0, cb = 0;
    auto add_a = [&](uint64_t w) {
        a += w;
        ca += a < w;
    };
    auto add_b = [&](uint64_t w) {
        b += w;
        cb += b < w;
    };
    while (len >= 32) {
        add_a(word(p));
        add_b(word(p + 8));
        add_a(word(p + 16));
        add_b(word(p + 24));
        p += 32;
        len -= 32;
    }
    if (len & 16) {
        add_a(word(p));
        add_b(word(p + 8));
        p += 16;
    }
    if (len & 8) {
        add_a(word(p));
        p += 8;
    }
    // 0..7 bytes left: gathered into one word as a 64-bit little-endian load would see them
    uint64_t t = 0;
    if (len & 4) {
        uint32_t w;
        std::memcpy(&w, p, 4);
        t = w;
        p += 4;
    }
    if (len & 2) {
        uint16_t w;
        std::memcpy(&w, p, 2);
        t |= uint64_t{w} << ((len & 4) * 8);
        p += 2;
    }
    if (len & 1) t |= uint64_t{*p} << ((len & 6) * 8);
    add_b(t);
    uint64_t s = a + b;
    const uint64_t c = ca + cb + (s < a);
    s += c;
    s += s < c;  // end-around carry (c is small: s cannot wrap twice)
    return (s & 0xffffffffu) + (s >> 32);
}

// Runs this long and longer take csum_native_wide: a payload (a frame's, 1,400 to 9,000 bytes,
// or the run a segment takes in pkt_write) rather than a header. Around it the two cost the
// same (a nanosecond apart at 256 bytes, stack/README.md); below it the vector loop's set-up and
// reduction cost more than they save.
inline constexpr size_t kCsumWideMinBytes = 256;
// The same sum (congruent modulo 2^16 - 1, below 2^33) with vector loads: 64 bytes a step with
// AVX-512BW, else 32 with AVX2, else csum_native_words, as the CPU has them (looked up once).
// The receiving proxy checks every byte of every frame (a fifth of its time at 1 MiB MPI
// messages) and the sending bridge sums what it copies (pkt_write's PktSum::kKeep; issue 35).
[[gnu::noinline]] uint64_t csum_native_wide(const uint8_t* p, size_t len);
// The ways csum_native_wide can take, and the one it takes on this CPU; csum_native_by runs one
// of them (the CPU must have it: csum_path_supported), so tests hold each to the same sums.
enum class CsumPath : uint8_t { kWords, kAvx2, kAvx512 };
CsumPath csum_wide_path();
bool csum_path_supported(CsumPath path);
uint64_t csum_native_by(CsumPath path, const uint8_t* p, size_t len);

inline uint64_t csum_native(const uint8_t* p, size_t len) {
    return len >= kCsumWideMinBytes ? csum_native_wide(p, len) : csum_native_words(p, len);
}

// Copies len bytes from src to dst (not overlapping) and returns csum_native of them, in one
// pass: each vector is loaded once, stored and summed (the kernel's csum_partial_copy). The
// sender's payload copy into packet buffers (pkt_write with PktSum::kKeep) read the bytes it had
// just written a second time to sum them; the fold below is the same sum (same lanes, same
// blocks), so the datagram's bytes and checksum are the ones the two passes gave (issue 35).
// Below kCsumWideMinBytes: memcpy, then csum_native_words over the copy.
[[gnu::noinline]] uint64_t csum_copy_wide(uint8_t* dst, const uint8_t* src, size_t len);
uint64_t csum_copy_by(CsumPath path, uint8_t* dst, const uint8_t* src, size_t len);
inline uint64_t csum_copy_native(uint8_t* dst, const uint8_t* src, size_t len) {
    if (len >= kCsumWideMinBytes) return csum_copy_wide(dst, src, len);
    std::memcpy(dst, src, len);
    return csum_native_words(dst, len);
}

// Add the 16-bit big-endian words of [p, p+len) to sum (an odd tail byte counts as its high byte).
inline uint64_t csum_add(uint64_t sum, const void* p, size_t len) {
    const uint16_t native = csum_fold(csum_native(static_cast<const uint8_t*>(p), len));
    return sum + __builtin_bswap16(native);  // to big-endian word order
}

// One's-complement checksum as it goes on the wire: ~fold(sum), in host order.
inline uint16_t csum_finish(uint64_t sum) { return static_cast<uint16_t>(~csum_fold(sum)); }

// A folded sum of bytes that start at an odd offset of the summed range: its bytes sit in the
// other lane of each 16-bit word (RFC 1071 §2(B)).
inline uint16_t csum_lane(uint16_t folded, bool odd) { return odd ? __builtin_bswap16(folded) : folded; }

// Keep the sum of the k bytes at p, which are [at, at + k) of s's buffer, in s (PktBuf::sum),
// extending what it keeps when they follow those bytes (pkt_write into the same segment again).
// part: their folded sum in csum_add's (big-endian) word order.
inline void csum_keep_part(PktBuf* s, uint32_t at, uint16_t part, uint32_t k) {
    if (s->sum_len != 0 && s->sum_at + s->sum_len == at) {
        s->sum = csum_fold(uint64_t{s->sum} + csum_lane(part, s->sum_len & 1u));
        s->sum_len += k;
    } else {
        s->sum_at = at;
        s->sum_len = k;
        s->sum = part;
    }
}
// Copy k bytes from src to dst = [at, at + k) of s's buffer and keep their sum, in one pass.
inline void csum_keep_copy(PktBuf* s, uint32_t at, uint8_t* dst, const uint8_t* src, uint32_t k) {
    const uint16_t native = csum_fold(csum_copy_native(dst, src, k));
    csum_keep_part(s, at, __builtin_bswap16(native), k);
}

// Partial sum of len bytes of a chain from offset off (the one-segment case inline: every frame
// the stack sends or receives below the MTU). Segments that keep the sum of some of those bytes
// (PktBuf::sum) give it instead of those bytes being read.
[[gnu::noinline]] uint64_t csum_chain_slow(const PktBuf* head, uint32_t off, uint32_t len, uint64_t sum);
inline uint64_t csum_chain(const PktBuf* head, uint32_t off, uint32_t len, uint64_t sum = 0) {
    if (head->next == nullptr && head->sum_len == 0 && off + len <= head->data_len)
        return csum_add(sum, head->data() + off, len);
    return csum_chain_slow(head, off, len, sum);
}

// The checksum of len bytes of a chain from off plus `native` (header words summed in native
// lane order, as csum_native sums bytes), as its two wire bytes read as a native uint16: stored
// as is, it is the checksum field; 0 over data that includes a correct checksum field. One
// segment stays in native order and folds once; a chain takes csum_chain's big-endian sums.
inline uint16_t csum_chain_wire(const PktBuf* head, uint32_t off, uint32_t len, uint64_t native) {
    if (head->next == nullptr && head->sum_len == 0 && off + len <= head->data_len)
        return static_cast<uint16_t>(~csum_fold(native + csum_native(head->data() + off, len)));
    return __builtin_bswap16(csum_finish(csum_chain_slow(head, off, len, __builtin_bswap16(csum_fold(native)))));
}

}  // namespace iccs
