// udp.cpp: UDP input and output (RFC 768) of the Stack. The checksum is computed on send and
// required on receive (DESIGN.md §3: a zero checksum is dropped as missing), except on a link
// that cannot corrupt a frame (StackConfig::udp_checksum_off: memif with [machine] udp_checksum =
// "off-on-memif"), where datagrams go with checksum 0 and a 0 is taken unchecked.
#include "checksum.hpp"
#include "stack.hpp"
#include "stamps.hpp"

namespace iccs {

// The pseudo-header (RFC 768: source, destination, zero, protocol, UDP length) summed as the
// native-order words of its wire bytes (csum_chain_wire).
static uint64_t udp_pseudo_native(Ipv4Addr src, Ipv4Addr dst, uint32_t udp_len) {
    return uint64_t{__builtin_bswap32(src.v)} + __builtin_bswap32(dst.v) + (uint32_t{kIpProtoUdp} << 8) +
           (wire16(static_cast<uint16_t>(udp_len)) << 16);
}

void Stack::udp_input(PktBuf* p, Ipv4Addr src, Ipv4Addr dst, uint64_t now_ns) {
    stamps::stamp(stamps::kUdpReceive);
    ++ctr_.udp_rx;
    if (p->pkt_len < kUdpHdrLen || p->data_len < kUdpHdrLen) {
        ++ctr_.drop_udp_short;
        pkt_free(p);
        return;
    }
    const UdpHdr u = load_hdr<UdpHdr>(p->data());
    const uint32_t len = u.len.get();
    if (len < kUdpHdrLen || len > p->pkt_len) {
        ++ctr_.drop_udp_len;
        pkt_free(p);
        return;
    }
    if (len < p->pkt_len) pkt_trim_to(p, len);
    if (u.csum.raw == 0) {
        if (!cfg_.udp_checksum_off) [[unlikely]] {
            ++ctr_.drop_udp_csum;
            pkt_free(p);
            return;
        }
        ++ctr_.udp_rx_no_csum;
    } else if (csum_chain_wire(p, 0, len, udp_pseudo_native(src, dst, len)) != 0) {
        ++ctr_.drop_udp_csum;
        pkt_free(p);
        return;
    }
    const uint16_t port = u.dst_port.get();
    UdpHandler* h = nullptr;
    for (const Binding& b : bindings_)
        if (b.port == port) {
            h = b.h;
            break;
        }
    if (h == nullptr) {
        ++ctr_.drop_udp_port;
        pkt_free(p);
        return;
    }
    pkt_adj(p, kUdpHdrLen);
    h->udp_deliver(p, UdpMeta{src, dst, u.src_port.get(), port}, now_ns);
}

bool Stack::udp_output(PktBuf* p, uint16_t src_port, Ipv4Addr dst, uint16_t dst_port) {
    stamps::stamp(stamps::kUdpSend);
    const uint32_t len = p->pkt_len + kUdpHdrLen;
    if (len > kUdpMaxPayload + kUdpHdrLen) {
        ++ctr_.drop_ip_too_big;
        pkt_free(p);
        return false;
    }
    // The usual datagram: one frame (no fragments, no Ethernet padding) to a resolved next hop.
    // The three headers go in at once, the bytes ipv4_output -> ipv4_emit -> eth_output would
    // write, without their calls and checks per layer.
    constexpr uint32_t kL2L3 = kEthHdrLen + kIpv4HdrLen;
    const MacAddr* mac = nullptr;
    if (len + kIpv4HdrLen <= cfg_.mtu_bytes && len + kL2L3 >= kEthMinFrame && dst.v != 0xffffffffu &&
        p->data_off >= kL2L3 + kUdpHdrLen)
        mac = arp_.lookup(dst);
    uint8_t* raw = pkt_prepend(p, mac != nullptr ? kL2L3 + kUdpHdrLen : kUdpHdrLen);
    if (raw == nullptr) {
        ++ctr_.drop_ip_nobuf;
        pkt_free(p);
        return false;
    }
    uint8_t* udp = mac != nullptr ? raw + kL2L3 : raw;
    // Header words summed from their values; the payload summed from memory (see be.hpp).
    uint16_t c = 0;  // RFC 768: "no checksum"
    if (!cfg_.udp_checksum_off) [[likely]] {
        const uint64_t hdr_sum = udp_pseudo_native(cfg_.ip, dst, len) + wire16(src_port) + wire16(dst_port) +
                                 wire16(static_cast<uint16_t>(len));
        c = csum_chain_wire(p, static_cast<uint32_t>(udp - raw) + kUdpHdrLen, len - kUdpHdrLen, hdr_sum);
        if (c == 0) c = 0xffff;  // RFC 768: a computed zero is sent as all ones
    } else {
        ++ctr_.udp_tx_no_csum;
    }
    store_u64(udp, wire16(src_port) | wire16(dst_port) << 16 | wire16(static_cast<uint16_t>(len)) << 32 |
                       uint64_t{c} << 48);
    if (mac != nullptr) {
        stamps::stamp(stamps::kIpSend);
        write_ipv4_hdr(raw + kEthHdrLen, len + kIpv4HdrLen, dst, kIpProtoUdp, next_ip_id_++, 0);
        write_eth_hdr(raw, *mac, kEtherTypeIpv4);
        tx_push(p);
        return true;
    }
    return ipv4_output(p, dst, kIpProtoUdp);
}

}  // namespace iccs
