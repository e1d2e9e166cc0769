// arp.cpp: ARP (RFC 826) for the Stack: answer requests for our address, learn from what we
// hear, resolve next hops for output (holding a bounded number of packets meanwhile).
// This is the slow path: a proxy's sub-connection peers are resolved once, then every datagram
// takes the table hit in ipv4_output().
#include "stack.hpp"

namespace iccs {

void ArpTable::add_static(Ipv4Addr ip, const MacAddr& mac) {
    for (Entry& e : entries_)
        if (e.ip == ip) {
            e.mac = mac;
            statics_ += e.is_static ? 0 : 1;
            e.is_static = true;
            return;
        }
    entries_.push_back(Entry{ip, mac, true, ++clock_});
    ++statics_;
}

uint32_t ArpTable::static_index(Ipv4Addr ip) const {
    uint32_t i = 0;
    for (const Entry& e : entries_) {
        if (!e.is_static) continue;
        if (e.ip == ip) return i;
        ++i;
    }
    return UINT32_MAX;
}

void ArpTable::learn(Ipv4Addr ip, const MacAddr& mac) {
    uint32_t dynamic = 0;
    Entry* oldest = nullptr;
    for (Entry& e : entries_) {
        if (e.ip == ip) {
            if (!e.is_static) {
                e.mac = mac;
                e.age = ++clock_;
            }
            return;
        }
        if (!e.is_static) {
            ++dynamic;
            if (oldest == nullptr || e.age < oldest->age) oldest = &e;
        }
    }
    if (dynamic >= cap_ && oldest != nullptr) {
        *oldest = Entry{ip, mac, false, ++clock_};
        return;
    }
    if (cap_ == 0) return;
    entries_.push_back(Entry{ip, mac, false, ++clock_});
}

const MacAddr* ArpTable::lookup(Ipv4Addr ip) const {
    for (const Entry& e : entries_)
        if (e.ip == ip) return &e.mac;
    return nullptr;
}

void Stack::arp_input(PktBuf* p, uint64_t now_ns) {
    (void)now_ns;
    uint8_t scratch[kArpHdrLen];
    const uint8_t* raw = pkt_contig(p, 0, kArpHdrLen, scratch);
    if (raw == nullptr) {
        ++ctr_.drop_arp_bad;
        pkt_free(p);
        return;
    }
    const ArpHdr a = load_hdr<ArpHdr>(raw);
    if (a.htype.get() != kArpHtypeEthernet || a.ptype.get() != kEtherTypeIpv4 || a.hlen != 6 || a.plen != 4 ||
        (a.op.get() != kArpOpRequest && a.op.get() != kArpOpReply)) {
        ++ctr_.drop_arp_bad;
        pkt_free(p);
        return;
    }
    const Ipv4Addr spa{a.spa.get()};
    const Ipv4Addr tpa{a.tpa.get()};
    const bool for_us = tpa == cfg_.ip;
    // RFC 826 merge: refresh a sender we know; add it if the packet is for us.
    if (spa.v != 0 && (for_us || arp_.lookup(spa) != nullptr)) {
        arp_.learn(spa, a.sha);
        arp_resolved(spa);
    }
    if (a.op.get() == kArpOpReply) {
        ++ctr_.arp_rx_reply;
        pkt_free(p);
        return;
    }
    if (!for_us) {
        ++ctr_.drop_arp_other;
        pkt_free(p);
        return;
    }
    ++ctr_.arp_rx_request;
    // Answer in the same buffer: the request is exactly as long as the reply.
    ArpHdr r = a;
    r.op.set(kArpOpReply);
    r.tha = a.sha;
    r.tpa = a.spa;
    r.sha = cfg_.mac;
    r.spa.set(cfg_.ip.v);
    if (pkt_shared(p) || p->data_len < kArpHdrLen) {
        PktBuf* fresh = pkt_alloc(pool_);
        pkt_free(p);
        if (fresh == nullptr) {
            ++ctr_.drop_ip_nobuf;
            return;
        }
        p = fresh;
        pkt_append(p, kArpHdrLen);
    } else {
        pkt_trim_to(p, kArpHdrLen);
    }
    store_hdr(p->data(), r);
    ++ctr_.arp_tx_reply;
    eth_output(p, a.sha, kEtherTypeArp);
}

void Stack::arp_request(Ipv4Addr ip, uint64_t now_ns) {
    PktBuf* p = pkt_alloc(pool_);
    if (p == nullptr) {
        ++ctr_.drop_ip_nobuf;
        return;
    }
    ArpHdr r{};
    r.htype.set(kArpHtypeEthernet);
    r.ptype.set(kEtherTypeIpv4);
    r.hlen = 6;
    r.plen = 4;
    r.op.set(kArpOpRequest);
    r.sha = cfg_.mac;
    r.spa.set(cfg_.ip.v);
    r.tha = MacAddr{};
    r.tpa.set(ip.v);
    store_hdr(pkt_append(p, kArpHdrLen), r);
    ++ctr_.arp_tx_request;
    eth_output(p, MacAddr::broadcast(), kEtherTypeArp);
    for (ArpAsk& q : arp_asked_)
        if (q.ip == ip) {
            q.sent_ns = now_ns;
            return;
        }
    arp_asked_.push_back(ArpAsk{ip, now_ns});
}

void Stack::arp_resolved(Ipv4Addr ip) {
    for (size_t i = 0; i < arp_asked_.size();) {
        if (arp_asked_[i].ip == ip) {
            arp_asked_[i] = arp_asked_.back();
            arp_asked_.pop_back();
        } else {
            ++i;
        }
    }
    // Release held datagrams in their original order (fragmented now that the MAC is known).
    std::vector<Pending> ready;
    size_t keep = 0;
    for (size_t i = 0; i < arp_pending_.size(); ++i) {
        if (arp_pending_[i].next_hop == ip)
            ready.push_back(arp_pending_[i]);
        else
            arp_pending_[keep++] = arp_pending_[i];
    }
    arp_pending_.resize(keep);
    // ipv4_output finds the MAC in the table: it was learned just before this call
    for (const Pending& q : ready) ipv4_output(q.p, q.next_hop, q.proto);
}

}  // namespace iccs
