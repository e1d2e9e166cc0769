// stack.hpp: one instance of the protocol stack (eth + arp + ipv4 + udp), as a proxy runs it.
//
// The input path is lwIP's: eth_input -> (arp_input | ipv4_input -> ipv4_reassemble ->
// udp_input -> the handler bound to the destination port), each layer checking its header,
// stripping it from the same buffer and handing the buffer up, or dropping it with a named
// counter. The output path prepends into headroom: udp_output -> ipv4_output (fragmenting to
// the MTU without copying payload) -> eth_output -> the TX queue, which the device owner
// (proxy port, in-memory wire) drains in bursts with tx_take(). A datagram that fits one frame to
// a resolved next hop takes a shortcut: udp_output writes all three headers at once (same bytes).
//
// The Stack is one DatagramService (datagram_service.hpp): slidwin sits on it, or on the kernel's
// UDP socket when the fabric is "udp". It is final, so calls through a Stack& stay direct.
//
// Threading: one Stack per proxy core; every method is _st (the owning thread only).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "arp_hdr.hpp"
#include "be.hpp"
#include "checksum.hpp"
#include "counters.hpp"
#include "datagram_service.hpp"
#include "eth_hdr.hpp"
#include "ipv4_hdr.hpp"
#include "ipv4_reassemble.hpp"
#include "pktbuf.hpp"
#include "udp_hdr.hpp"

namespace iccs {

struct StackConfig {
    MacAddr mac{};
    Ipv4Addr ip{};
    uint32_t mtu_bytes = 1500;           // IPv4 MTU (576..9000): largest IP packet on the link
    uint8_t ttl = 64;
    ReassemblyConfig reass{};
    uint32_t arp_entries = 64;           // dynamic ARP cache size
    uint32_t arp_pending_max = 64;       // packets held while their next hop is resolved
    uint64_t arp_retry_ns = 100'000'000; // resend an unanswered ARP request after this
    uint32_t tx_queue_frames = 4096;     // frames the device has not taken yet (rounded up to 2^n)
    // The link cannot corrupt a frame (memif: shared memory of one host; [machine] udp_checksum):
    // UDP datagrams go with checksum 0 (RFC 768: no checksum) and such datagrams are accepted
    // unchecked; a nonzero checksum is still checked. Off: 0 is dropped as missing (DESIGN.md §3).
    bool udp_checksum_off = false;
};

// UdpMeta and UdpHandler: in datagram_service.hpp.

// IPv4 -> MAC: static entries (from config) that never expire, and a small dynamic cache.
class ArpTable {
   public:
    explicit ArpTable(uint32_t dynamic_entries) : cap_(dynamic_entries) {}
    void add_static(Ipv4Addr ip, const MacAddr& mac);
    void learn(Ipv4Addr ip, const MacAddr& mac);  // replaces the oldest dynamic entry when full
    const MacAddr* lookup(Ipv4Addr ip) const;
    uint32_t size() const { return static_cast<uint32_t>(entries_.size()); }
    // The configured peers are the static entries (the proxy adds one per peer proxy): how many,
    // and which of them ip is (UINT32_MAX: none). For reassembly's quotas.
    uint32_t static_count() const { return statics_; }
    uint32_t static_index(Ipv4Addr ip) const;

   private:
    struct Entry {
        Ipv4Addr ip;
        MacAddr mac;
        bool is_static;
        uint64_t age;
    };
    std::vector<Entry> entries_;
    uint32_t cap_;
    uint32_t statics_ = 0;
    uint64_t clock_ = 0;
};

class Stack final : public DatagramService {
   public:
    Stack(const StackConfig& cfg, PktPool& pool);
    ~Stack() override;
    Stack(const Stack&) = delete;
    Stack& operator=(const Stack&) = delete;

    // --- input: frames from the device; ownership passes in ---
    void input_burst(PktBuf* const* frames, uint32_t n, uint64_t now_ns);
    void eth_input(PktBuf* frame, uint64_t now_ns);

    // --- output: each consumes `p` whatever happens (dropped ones are counted) ---
    // p: data() at the UDP payload, with headroom for udp+ipv4+eth. False if dropped.
    bool udp_output(PktBuf* p, uint16_t src_port, Ipv4Addr dst, uint16_t dst_port) override;
    // p: data() at the IPv4 payload. Fragments when p is longer than mtu - 20.
    bool ipv4_output(PktBuf* p, Ipv4Addr dst, uint8_t proto);
    void eth_output(PktBuf* p, const MacAddr& dst, uint16_t ethertype);

    // --- the device side ---
    // Move up to max queued frames to out (the caller transmits and frees them).
    uint32_t tx_take(PktBuf** out, uint32_t max);
    uint32_t tx_queued() const { return tx_count_; }

    // --- control ---
    void bind(uint16_t port, UdpHandler* h) override;  // h == nullptr unbinds
    // Reassembly timeouts and ARP retries. Call periodically (e.g. from the proxy's timer pass).
    void timers(uint64_t now_ns);
    // Send an ARP request for ip now (also done automatically when output needs it).
    void arp_request(Ipv4Addr ip, uint64_t now_ns);

    ArpTable& arp() { return arp_; }
    StackCounters& counters() { return ctr_; }
    const StackCounters& counters() const { return ctr_; }
    const StackConfig& config() const { return cfg_; }
    // A wire that corrupts frames (MemWire's bit flips) is no link for udp_checksum_off: it turns
    // the sums back on at both ends, so a flipped bit is still caught (drop_udp_csum).
    void sum_every_datagram() { cfg_.udp_checksum_off = false; }
    PktPool& pool() override { return pool_; }
    Ipv4Reassembler& reassembler() { return reass_; }

   private:
    [[gnu::noinline, gnu::cold]] void arp_input(PktBuf* p, uint64_t now_ns);
    void ipv4_input(PktBuf* p, uint64_t now_ns);
    void udp_input(PktBuf* p, Ipv4Addr src, Ipv4Addr dst, uint64_t now_ns);
    // Prepend an IPv4 header to p (data() at payload) and hand it to eth_output for next_mac.
    void ipv4_emit(PktBuf* p, Ipv4Addr dst, const MacAddr& next_mac, uint8_t proto, uint16_t id,
                   uint16_t frag_field);
    void tx_push(PktBuf* frame);
    // Header writers shared by the layered output path and udp_output's one-frame fast path.
    void write_ipv4_hdr(uint8_t* raw, uint32_t total, Ipv4Addr dst, uint8_t proto, uint16_t id,
                        uint16_t frag_field) const;
    void write_eth_hdr(uint8_t* raw, const MacAddr& dst, uint16_t ethertype) const;
    void arp_resolved(Ipv4Addr ip);  // ip's MAC was just learned: release what waits for it

    StackConfig cfg_;
    PktPool& pool_;
    StackCounters ctr_;
    ArpTable arp_;
    Ipv4Reassembler reass_;
    uint16_t next_ip_id_ = 1;
    struct Binding {
        uint16_t port;
        UdpHandler* h;
    };
    std::vector<Binding> bindings_;
    std::vector<UdpHandler*> burst_listeners_;
    struct Pending {
        PktBuf* p;          // a datagram's payload (no IPv4 header yet, not fragmented)
        Ipv4Addr next_hop;
        uint8_t proto;      // ipv4_output(p, next_hop, proto) once next_hop resolves
    };
    // Hold p for next_hop until ARP answers (asks if not asked yet); false if the queue is full.
    bool arp_hold(PktBuf* p, Ipv4Addr next_hop, uint8_t proto);
    std::vector<Pending> arp_pending_;
    struct ArpAsk {
        Ipv4Addr ip;
        uint64_t sent_ns;
    };
    std::vector<ArpAsk> arp_asked_;
    uint64_t last_now_ns_ = 0;
    std::unique_ptr<PktBuf*[]> txq_;
    uint32_t tx_head_ = 0, tx_count_ = 0, tx_mask_ = 0;
};

// The small per-frame steps every output path ends in, inline (they run once per frame sent;
// called from eth.cpp, ipv4.cpp and udp.cpp alike).
inline void Stack::write_ipv4_hdr(uint8_t* raw, uint32_t total, Ipv4Addr dst, uint8_t proto, uint16_t id,
                                  uint16_t frag_field) const {
    // The header checksum from the field values (the sum of its ten 16-bit words, RFC 1071),
    // then the header as two words and a half (see be.hpp on why not a struct copy).
    const uint32_t src = cfg_.ip.v;
    const uint64_t sum = 0x4500u + total + id + frag_field + ((uint32_t{cfg_.ttl} << 8) | proto) + (src >> 16) +
                         (src & 0xffffu) + (dst.v >> 16) + (dst.v & 0xffffu);
    const uint16_t csum = csum_finish(sum);
    store_u64(raw, 0x45u | wire16(static_cast<uint16_t>(total)) << 16 | wire16(id) << 32 | wire16(frag_field) << 48);
    store_u64(raw + 8, uint64_t{cfg_.ttl} | uint64_t{proto} << 8 | wire16(csum) << 16 | wire32(src) << 32);
    store_u32(raw + 16, __builtin_bswap32(dst.v));
}

inline void Stack::write_eth_hdr(uint8_t* raw, const MacAddr& dst, uint16_t ethertype) const {
    std::memcpy(raw, dst.b.data(), 6);
    std::memcpy(raw + 6, cfg_.mac.b.data(), 6);
    store_u16(raw + 12, __builtin_bswap16(ethertype));
}

inline void Stack::tx_push(PktBuf* frame) {
    if (tx_count_ == cfg_.tx_queue_frames) {
        ++ctr_.drop_tx_full;
        pkt_free(frame);
        return;
    }
    ++ctr_.tx_frames;
    ctr_.tx_bytes += frame->pkt_len;
    txq_[(tx_head_ + tx_count_) & tx_mask_] = frame;
    ++tx_count_;
}

}  // namespace iccs
