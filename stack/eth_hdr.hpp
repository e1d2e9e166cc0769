// eth_hdr.hpp: Ethernet II header (IEEE 802.3 framing with an EtherType).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "be.hpp"

namespace iccs {

struct MacAddr {
    std::array<uint8_t, 6> b{};
    bool is_broadcast() const { return b == std::array<uint8_t, 6>{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}; }
    static constexpr MacAddr broadcast() { return MacAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}; }
    friend bool operator==(const MacAddr&, const MacAddr&) = default;
};
static_assert(sizeof(MacAddr) == 6);

inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeArp = 0x0806;

struct EthHdr {
    MacAddr dst;
    MacAddr src;
    be16 ethertype;
};
static_assert(sizeof(EthHdr) == 14);
inline constexpr uint32_t kEthHdrLen = sizeof(EthHdr);
// Frames shorter than this (without FCS) are padded by the sender (IEEE 802.3 minimum of 64 with FCS).
inline constexpr uint32_t kEthMinFrame = 60;

std::string to_string(const MacAddr& m);
// Parses "aa:bb:cc:dd:ee:ff"; false on anything else.
bool parse_mac(const std::string& s, MacAddr& out);
std::string to_string(const EthHdr& h);

}  // namespace iccs
