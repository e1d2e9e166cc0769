// datagram_service.hpp: the seam between slidwin and whatever carries its UDP datagrams.
//
// One idea: a sliding-window endpoint needs only three things from below — send one datagram to
// (address, port), be handed every datagram for its port followed by an end-of-burst call, and
// packet buffers for its acks. Two services provide them:
//  - `Stack` (stack.hpp): our own eth + ipv4 + udp over a NIC or memif port (DPDK, kernel bypass);
//  - the proxy's `UringUdpPort` (proxy/uring_udp.hpp): the kernel's UDP socket driven by io_uring
//    (fabric "udp"): the kernel does IP and UDP, slidwin and convergence run unchanged above it.
// The cost of the seam is one virtual call per datagram sent (not per frame: fragmentation is
// below it) and the UdpHandler calls the stack always made on receive.
//
// Threading: a service belongs to one thread at a time (_st), like the endpoint above it.
#pragma once

#include <cstdint>

#include "ipv4_hdr.hpp"
#include "pktbuf.hpp"

namespace iccs {

// Where a received UDP datagram came from and went to.
struct UdpMeta {
    Ipv4Addr src;
    Ipv4Addr dst;
    uint16_t src_port;
    uint16_t dst_port;
};

// Whoever binds a UDP port (a slidwin endpoint, a plain UDP socket for interop tests).
struct UdpHandler {
    virtual ~UdpHandler() = default;
    // payload: data() at the first byte after the UDP header; ownership passes to the handler.
    virtual void udp_deliver(PktBuf* payload, const UdpMeta& meta, uint64_t now_ns) = 0;
    // Called once at the end of every input burst (send coalesced acks and the like).
    virtual void end_of_burst(uint64_t /*now_ns*/) {}
};

class DatagramService {
   public:
    virtual ~DatagramService() = default;
    // Send p (data() at the UDP payload; headroom for whatever the service prepends) from
    // src_port to (dst, dst_port). Consumes p whatever happens; false if it was dropped (the
    // service counts why). A true return means queued, not delivered: UDP promises nothing.
    virtual bool udp_output(PktBuf* p, uint16_t src_port, Ipv4Addr dst, uint16_t dst_port) = 0;
    // Hand every datagram for `port` to h, and call h->end_of_burst after each input burst;
    // h == nullptr unbinds.
    virtual void bind(uint16_t port, UdpHandler* h) = 0;
    // Buffers for what the endpoint sends on its own (acks, probes).
    virtual PktPool& pool() = 0;
};

}  // namespace iccs
