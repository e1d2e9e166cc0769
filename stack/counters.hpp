// counters.hpp: every drop and event of the stack has a named counter (STYLE: one exit per drop).
//
// The list is written once (X-macro) so printing, JSON and tests use the same names. Counters are
// plain integers: a stack instance belongs to one thread (_st); readers on other threads (telemetry)
// copy them with relaxed loads in the proxy, not here.
#pragma once

#include <cstdint>
#include <string>

namespace iccs {

#define ICCS_STACK_COUNTERS(X)                                                        \
    X(rx_frames, "frames handed to the stack")                                        \
    X(rx_bytes, "bytes of those frames")                                              \
    X(tx_frames, "frames the stack queued for the device")                            \
    X(tx_bytes, "bytes of those frames")                                              \
    X(drop_eth_short, "frame shorter than an Ethernet header")                        \
    X(drop_eth_dst, "frame for another MAC address")                                  \
    X(drop_eth_type, "EtherType neither IPv4 nor ARP")                                \
    X(arp_rx_request, "ARP requests received for our address")                        \
    X(arp_rx_reply, "ARP replies received")                                           \
    X(arp_tx_request, "ARP requests sent")                                            \
    X(arp_tx_reply, "ARP replies sent")                                               \
    X(drop_arp_bad, "ARP packet malformed or not Ethernet/IPv4")                      \
    X(drop_arp_other, "ARP request for another address")                              \
    X(drop_arp_pending_full, "packet dropped: no room to wait for ARP resolution")    \
    X(ip_rx, "IPv4 datagrams (or fragments) received")                                \
    X(drop_ip_short, "IPv4 packet shorter than its header")                           \
    X(drop_ip_version, "IP version not 4")                                            \
    X(drop_ip_hdrlen, "IPv4 header length field invalid")                             \
    X(drop_ip_csum, "IPv4 header checksum wrong")                                     \
    X(drop_ip_len, "IPv4 total length inconsistent with the frame")                   \
    X(drop_ip_dst, "IPv4 datagram for another address")                               \
    X(drop_ip_proto, "IPv4 protocol not UDP")                                         \
    X(drop_ip_frag_bad, "fragment with bad offset or length")                         \
    X(ip_frag_rx, "fragments received")                                               \
    X(ip_frag_tx, "fragments sent")                                                   \
    X(ip_reass_ok, "datagrams reassembled")                                           \
    X(ip_reass_dup, "duplicate fragments ignored")                                    \
    X(drop_reass_overlap, "datagrams dropped for overlapping fragments")              \
    X(drop_reass_oversize, "datagrams dropped for exceeding 65535 bytes")             \
    X(drop_reass_timeout, "partial datagrams dropped on timeout")                     \
    X(drop_reass_cap, "fragments dropped: reassembly memory or slot cap reached")     \
    X(drop_ip_nobuf, "datagram dropped: packet pool empty")                           \
    X(drop_ip_too_big, "datagram larger than IPv4 allows")                            \
    X(drop_tx_full, "frame dropped: the device has not drained the TX queue")         \
    X(udp_rx, "UDP datagrams received")                                               \
    X(drop_udp_short, "UDP datagram shorter than its header")                         \
    X(drop_udp_len, "UDP length field inconsistent with IPv4")                        \
    X(drop_udp_csum, "UDP checksum wrong or missing")                                 \
    X(udp_rx_no_csum, "UDP datagrams taken without a checksum (udp_checksum_off)")    \
    X(udp_tx_no_csum, "UDP datagrams sent without a checksum (udp_checksum_off)")     \
    X(drop_udp_port, "UDP datagram for a port nobody bound")

struct StackCounters {
#define X(name, doc) uint64_t name = 0;
    ICCS_STACK_COUNTERS(X)
#undef X
    // Calls fn(name, doc, value) for every counter, in declaration order.
    template <typename Fn>
    void for_each(Fn&& fn) const {
#define X(name, doc) fn(#name, doc, name);
        ICCS_STACK_COUNTERS(X)
#undef X
    }
};

}  // namespace iccs
