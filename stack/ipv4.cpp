// ipv4.cpp: IPv4 input (validation, then reassembly) and output (fragmentation) of the Stack.
// All destinations are on-link: a cluster's proxies and its peers share one L2 segment, so the
// next hop is the destination (there is no router in the fabric).
#include <cstring>

#include "checksum.hpp"
#include "ipv4_frag.hpp"
#include "stack.hpp"
#include "stamps.hpp"

namespace iccs {

// flatten: udp_input (udp.cpp) and what it calls are compiled into this function (the unity
// build sees them; a separate compile, as the fuzz targets', just calls them), down to the
// handler where GCC can guess it (the endpoint, the one UdpHandler of the library: a compare and
// a direct call). What is rare is kept out by noinline on its declaration (reassembly, trimming,
// chained sums, the handshake, authentication). -4.6% instructions per message in bench stack.
[[gnu::flatten]] void Stack::ipv4_input(PktBuf* p, uint64_t now_ns) {
    stamps::stamp(stamps::kIpReceive);
    ++ctr_.ip_rx;
    uint8_t scratch[60];
    const uint8_t* raw = pkt_contig(p, 0, kIpv4HdrLen, scratch);
    if (raw == nullptr) {
        ++ctr_.drop_ip_short;
        pkt_free(p);
        return;
    }
    // The 20 fixed bytes as three words in registers: fields and checksum come from them (no
    // copy of the header to the stack, no loop for the usual header without options).
    uint64_t w0, w1;
    uint32_t w2;
    std::memcpy(&w0, raw, 8);
    std::memcpy(&w1, raw + 8, 8);
    std::memcpy(&w2, raw + 16, 4);
    const uint8_t ver_ihl = static_cast<uint8_t>(w0);
    const uint32_t hlen = (ver_ihl & 0x0fu) * 4u;
    if ((ver_ihl >> 4) != 4) {
        ++ctr_.drop_ip_version;
        pkt_free(p);
        return;
    }
    // The header must sit in the head segment so layers above can strip it in place.
    if (hlen < kIpv4HdrLen || hlen > p->data_len) {
        ++ctr_.drop_ip_hdrlen;
        pkt_free(p);
        return;
    }
    // Native-order 32-bit words (checksum.hpp): a sum that folds to all ones does so in either byte order.
    uint64_t sum = (w0 & 0xffffffffu) + (w0 >> 32) + (w1 & 0xffffffffu) + (w1 >> 32) + w2;
    if (hlen > kIpv4HdrLen) sum += csum_native(p->data() + kIpv4HdrLen, hlen - kIpv4HdrLen);
    if (csum_fold(sum) != 0xffff) {
        ++ctr_.drop_ip_csum;
        pkt_free(p);
        return;
    }
    const uint32_t total = __builtin_bswap16(static_cast<uint16_t>(w0 >> 16));
    if (total < hlen || total > p->pkt_len) {
        ++ctr_.drop_ip_len;
        pkt_free(p);
        return;
    }
    if (total < p->pkt_len) pkt_trim_to(p, total);  // Ethernet padding
    const Ipv4Addr dst{__builtin_bswap32(w2)};
    if (!(dst == cfg_.ip) && dst.v != 0xffffffffu) {
        ++ctr_.drop_ip_dst;
        pkt_free(p);
        return;
    }
    if (static_cast<uint8_t>(w1 >> 8) != kIpProtoUdp) {
        ++ctr_.drop_ip_proto;
        pkt_free(p);
        return;
    }
    uint32_t whole_hlen = hlen;
    const uint16_t frag = __builtin_bswap16(static_cast<uint16_t>(w0 >> 48));
    if ((frag & (kIpFlagMF | kIpFragOffMask)) != 0) {
        ++ctr_.ip_frag_rx;
        // Quotas per configured peer (its static ARP entry), a small shared one for strangers.
        const Ipv4Addr src{__builtin_bswap32(static_cast<uint32_t>(w1 >> 32))};
        p = reass_.ipv4_reassemble(p, now_ns, ctr_, arp_.static_index(src), arp_.static_count());
        if (p == nullptr) return;  // held, or dropped and counted
        // the datagram carries the first fragment's header (maybe with options)
        whole_hlen = (p->data()[0] & 0x0fu) * 4u;
    }
    pkt_adj(p, whole_hlen);
    udp_input(p, Ipv4Addr{__builtin_bswap32(static_cast<uint32_t>(w1 >> 32))}, dst, now_ns);
}

bool Stack::ipv4_output(PktBuf* p, Ipv4Addr dst, uint8_t proto) {
    stamps::stamp(stamps::kIpSend);
    if (p->pkt_len + kIpv4HdrLen > kIpv4MaxDatagram) {
        ++ctr_.drop_ip_too_big;
        pkt_free(p);
        return false;
    }
    // The next hop is resolved once per datagram, not per fragment. An unresolved one holds the
    // datagram whole: held as fragments, one large datagram could fill the ARP queue by itself.
    MacAddr next_mac = MacAddr::broadcast();
    if (dst.v != 0xffffffffu) {
        const MacAddr* m = arp_.lookup(dst);
        if (m == nullptr) return arp_hold(p, dst, proto);
        next_mac = *m;
    }
    const uint16_t id = next_ip_id_++;
    if (p->pkt_len + kIpv4HdrLen <= cfg_.mtu_bytes) {
        ipv4_emit(p, dst, next_mac, proto, id, 0);
        return true;
    }
    Ipv4Fragment frags[kIpv4MaxFragments];
    const uint32_t n = ipv4_fragment(pool_, p, cfg_.mtu_bytes, frags);
    pkt_free(p);  // the fragments hold their own references on the payload storage
    if (n == 0) {
        ++ctr_.drop_ip_nobuf;
        return false;
    }
    for (uint32_t i = 0; i < n; ++i) {
        const uint16_t field =
            static_cast<uint16_t>((frags[i].offset / 8) | (frags[i].more ? kIpFlagMF : 0));
        ++ctr_.ip_frag_tx;
        ipv4_emit(frags[i].p, dst, next_mac, proto, id, field);
    }
    return true;
}

void Stack::ipv4_emit(PktBuf* p, Ipv4Addr dst, const MacAddr& next_mac, uint8_t proto, uint16_t id,
                      uint16_t frag_field) {
    const uint32_t total = p->pkt_len + kIpv4HdrLen;
    uint8_t* raw = pkt_prepend(p, kIpv4HdrLen);
    if (raw == nullptr) {
        ++ctr_.drop_ip_nobuf;
        pkt_free(p);
        return;
    }
    write_ipv4_hdr(raw, total, dst, proto, id, frag_field);
    eth_output(p, next_mac, kEtherTypeIpv4);
}

bool Stack::arp_hold(PktBuf* p, Ipv4Addr next_hop, uint8_t proto) {
    if (arp_pending_.size() >= cfg_.arp_pending_max) {
        ++ctr_.drop_arp_pending_full;
        pkt_free(p);
        return false;
    }
    arp_pending_.push_back(Pending{p, next_hop, proto});
    for (const ArpAsk& q : arp_asked_)
        if (q.ip == next_hop) return true;  // already asked; timers() resends
    arp_request(next_hop, last_now_ns_);
    return true;
}

}  // namespace iccs
