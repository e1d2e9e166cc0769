// arp_hdr.hpp: ARP for IPv4 over Ethernet (RFC 826).
#pragma once

#include <cstdint>
#include <string>

#include "be.hpp"
#include "eth_hdr.hpp"

namespace iccs {

inline constexpr uint16_t kArpHtypeEthernet = 1;
inline constexpr uint16_t kArpOpRequest = 1;
inline constexpr uint16_t kArpOpReply = 2;

#pragma pack(push, 1)
struct ArpHdr {
    be16 htype;   // 1 = Ethernet
    be16 ptype;   // 0x0800 = IPv4
    uint8_t hlen; // 6
    uint8_t plen; // 4
    be16 op;      // 1 request, 2 reply
    MacAddr sha;  // sender hardware address
    be32 spa;     // sender protocol address
    MacAddr tha;  // target hardware address
    be32 tpa;     // target protocol address
};
#pragma pack(pop)
static_assert(sizeof(ArpHdr) == 28);
inline constexpr uint32_t kArpHdrLen = sizeof(ArpHdr);

std::string to_string(const ArpHdr& h);

}  // namespace iccs
