// ipv4_hdr.hpp: the IPv4 header (RFC 791 §3.1), without options on output.
#pragma once

#include <cstdint>
#include <string>

#include "be.hpp"

namespace iccs {

// An IPv4 address in host order (1.2.3.4 is 0x01020304).
struct Ipv4Addr {
    uint32_t v = 0;
    friend bool operator==(Ipv4Addr, Ipv4Addr) = default;
};
std::string to_string(Ipv4Addr a);
// Parses dotted quad; false on anything else.
bool parse_ipv4(const std::string& s, Ipv4Addr& out);

inline constexpr uint8_t kIpProtoUdp = 17;
inline constexpr uint16_t kIpFlagDF = 0x4000;  // don't fragment
inline constexpr uint16_t kIpFlagMF = 0x2000;  // more fragments
inline constexpr uint16_t kIpFragOffMask = 0x1fff;  // in 8-byte units
inline constexpr uint32_t kIpv4MaxDatagram = 65535;

struct Ipv4Hdr {
    uint8_t ver_ihl;     // version 4, header length in 32-bit words
    uint8_t tos;
    be16 total_len;      // header + payload of this datagram or fragment
    be16 id;
    be16 frag;           // flags (DF, MF) and fragment offset in 8-byte units
    uint8_t ttl;
    uint8_t proto;
    be16 csum;
    be32 src;
    be32 dst;

    uint32_t hdr_len() const { return (ver_ihl & 0x0fu) * 4u; }
    uint32_t frag_off_bytes() const { return (frag.get() & kIpFragOffMask) * 8u; }
    bool more_frags() const { return (frag.get() & kIpFlagMF) != 0; }
    bool is_fragment() const { return (frag.get() & (kIpFlagMF | kIpFragOffMask)) != 0; }
};
static_assert(sizeof(Ipv4Hdr) == 20);
inline constexpr uint32_t kIpv4HdrLen = sizeof(Ipv4Hdr);
inline constexpr uint32_t kMtuMin = 576;   // RFC 791: every host must accept 576-byte datagrams
inline constexpr uint32_t kMtuMax = 9000;  // jumbo frames

std::string to_string(const Ipv4Hdr& h);

}  // namespace iccs
