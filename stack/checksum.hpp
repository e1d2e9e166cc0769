// checksum.hpp: the Internet checksum (RFC 1071) over bytes and over packet chains.
//
// Sums are kept unfolded in 64 bits and folded once at the end; a segment of odd length shifts
// the byte lanes of everything after it, which csum_chain handles by swapping (RFC 1071 §2(B)).
#pragma once

#include <cstddef>
#include <cstdint>

#include "pktbuf.hpp"

namespace iccs {

// Add the 16-bit big-endian words of [p, p+len) to sum (an odd tail byte counts as its high byte).
uint64_t csum_add(uint64_t sum, const void* p, size_t len);
// Fold a 64-bit partial sum to 16 bits (not complemented).
uint16_t csum_fold(uint64_t sum);
// One's-complement checksum as it goes on the wire: ~fold(sum), in host order.
inline uint16_t csum_finish(uint64_t sum) { return static_cast<uint16_t>(~csum_fold(sum)); }
// Partial sum of len bytes of a chain from offset off.
uint64_t csum_chain(const PktBuf* head, uint32_t off, uint32_t len, uint64_t sum = 0);

}  // namespace iccs
