// eth.cpp: Ethernet II input and output of the Stack.
#include <cstddef>
#include <cstring>

#include "stack.hpp"

namespace iccs {

void Stack::eth_input(PktBuf* p, uint64_t now_ns) {
    ++ctr_.rx_frames;
    ctr_.rx_bytes += p->pkt_len;
    uint8_t scratch[kEthHdrLen];
    const uint8_t* raw = pkt_contig(p, 0, kEthHdrLen, scratch);
    if (raw == nullptr) {
        ++ctr_.drop_eth_short;
        pkt_free(p);
        return;
    }
    // Compare and read fields in place: copying the 14-byte header out first costs a
    // store-forwarding stall per frame (6-byte MACs straddle the copy's stores).
    static constexpr uint8_t kBroadcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    if (std::memcmp(raw, cfg_.mac.b.data(), 6) != 0 && std::memcmp(raw, kBroadcast, 6) != 0) {
        ++ctr_.drop_eth_dst;
        pkt_free(p);
        return;
    }
    uint16_t type_be;
    std::memcpy(&type_be, raw + offsetof(EthHdr, ethertype), 2);
    const uint16_t type = __builtin_bswap16(type_be);
    if (type != kEtherTypeIpv4 && type != kEtherTypeArp) {
        ++ctr_.drop_eth_type;
        pkt_free(p);
        return;
    }
    if (p->data_len < kEthHdrLen) {  // header split across segments: nothing we send does that
        ++ctr_.drop_eth_short;
        pkt_free(p);
        return;
    }
    pkt_adj(p, kEthHdrLen);
    if (type == kEtherTypeIpv4)
        ipv4_input(p, now_ns);
    else
        arp_input(p, now_ns);
}

void Stack::eth_output(PktBuf* p, const MacAddr& dst, uint16_t ethertype) {
    uint8_t* raw = pkt_prepend(p, kEthHdrLen);
    if (raw == nullptr) {  // every buffer the stack makes has headroom; a foreign one may not
        ++ctr_.drop_ip_nobuf;
        pkt_free(p);
        return;
    }
    write_eth_hdr(raw, dst, ethertype);
    // IEEE 802.3 minimum frame: pad short frames with zeros (the receiver trims by IP length).
    if (p->pkt_len < kEthMinFrame) {
        const uint32_t pad = kEthMinFrame - p->pkt_len;
        uint8_t* tail = pkt_append(p, pad);
        if (tail != nullptr) {
            for (uint32_t i = 0; i < pad; ++i) tail[i] = 0;
        } else {
            static const uint8_t zeros[kEthMinFrame] = {};
            if (!pkt_write(p, pool_, zeros, pad)) {
                ++ctr_.drop_ip_nobuf;
                pkt_free(p);
                return;
            }
        }
    }
    tx_push(p);
}

}  // namespace iccs
