// ipv4_frag.cpp: IPv4 fragmentation on send; see ipv4_frag.hpp.
//
// Each fragment is pkt_slice() of the payload: a fresh head segment whose headroom takes the
// eth + IPv4 headers, then indirect segments viewing the payload bytes. Nothing is copied.
#include "ipv4_frag.hpp"

#include "ipv4_hdr.hpp"

namespace iccs {

uint32_t ipv4_fragment(PktPool& pool, const PktBuf* payload, uint32_t mtu_bytes, Ipv4Fragment* out) {
    // Besides pool exhaustion, 0 also answers what cannot be sent: an MTU with no room for 8
    // payload bytes, a payload the 13-bit offset field cannot address (RFC 791 §3.1), or one that
    // needs more than kIpv4MaxFragments (an MTU below kMtuMin), which would overrun `out`.
    if (mtu_bytes < kIpv4HdrLen + 8) return 0;
    const uint32_t total = payload->pkt_len;
    if (total > kIpv4MaxDatagram - kIpv4HdrLen) return 0;
    // RFC 791 §3.2: every fragment but the last carries a multiple of 8 bytes.
    const uint32_t chunk = ipv4_fragment_chunk(mtu_bytes);
    const uint32_t n = ipv4_fragment_count(total, mtu_bytes);
    if (n > kIpv4MaxFragments) return 0;

    for (uint32_t i = 0; i < n; ++i) {
        const uint32_t off = i * chunk;
        const uint32_t len = total - off < chunk ? total - off : chunk;
        PktBuf* p = pkt_slice(pool, payload, off, len, kPktHeadroom);
        if (p == nullptr) {
            for (uint32_t j = 0; j < i; ++j) pkt_free(out[j].p);
            return 0;
        }
        out[i] = Ipv4Fragment{p, off, i + 1 < n};
    }
    return n;
}

}  // namespace iccs
