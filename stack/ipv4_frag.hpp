// ipv4_frag.hpp: IPv4 fragmentation on send (RFC 791 §3.2), without copying payload.
#pragma once

#include <cstdint>

#include "ipv4_hdr.hpp"
#include "pktbuf.hpp"

namespace iccs {

// The most fragments one datagram can need: 65515 payload bytes at the smallest MTU (576 -> 552).
inline constexpr uint32_t kIpv4MaxFragments = 119;

// The payload bytes of every fragment but the last at `mtu_bytes` (RFC 791 §3.2: a multiple of 8).
inline constexpr uint32_t ipv4_fragment_chunk(uint32_t mtu_bytes) { return (mtu_bytes - kIpv4HdrLen) & ~7u; }

// The fragments an IPv4 payload of `payload_bytes` needs at `mtu_bytes` (one for an empty payload).
inline constexpr uint32_t ipv4_fragment_count(uint32_t payload_bytes, uint32_t mtu_bytes) {
    const uint32_t chunk = ipv4_fragment_chunk(mtu_bytes);
    return payload_bytes == 0 ? 1 : (payload_bytes + chunk - 1) / chunk;
}

struct Ipv4Fragment {
    PktBuf* p;            // the fragment's payload: a chain viewing the datagram, headroom for headers
    uint32_t offset;      // byte offset of this fragment in the datagram's payload (multiple of 8)
    bool more;            // MF flag
};

// Cuts an IPv4 payload (data() at the first payload byte, e.g. the UDP header) into fragments
// that fit `mtu_bytes` with a 20-byte header: every fragment but the last carries a multiple of
// 8 bytes. The fragments view the payload's storage (indirect segments, no copy) and hold their
// own references, so the caller still owns `payload` and frees it when it likes. Returns the
// number of fragments written to out (at most kIpv4MaxFragments), or 0 when the pool ran dry
// (nothing is leaked then).
uint32_t ipv4_fragment(PktPool& pool, const PktBuf* payload, uint32_t mtu_bytes, Ipv4Fragment* out);

}  // namespace iccs
