// udp_hdr.hpp: the UDP header (RFC 768).
#pragma once

#include <cstdint>
#include <string>

#include "be.hpp"

namespace iccs {

struct UdpHdr {
    be16 src_port;
    be16 dst_port;
    be16 len;   // header + payload
    be16 csum;  // over pseudo-header + header + payload; 0 means "none" (never sent by us)
};
static_assert(sizeof(UdpHdr) == 8);
inline constexpr uint32_t kUdpHdrLen = sizeof(UdpHdr);
// The largest UDP payload an IPv4 datagram can carry: 65535 - 20 - 8.
inline constexpr uint32_t kUdpMaxPayload = 65507;

std::string to_string(const UdpHdr& h);

}  // namespace iccs
