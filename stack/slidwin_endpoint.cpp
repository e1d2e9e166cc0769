// slidwin_endpoint.cpp: see slidwin_endpoint.hpp.
#include "slidwin_endpoint.hpp"

#include <cstddef>

namespace iccs {

SlidwinEndpoint::SlidwinEndpoint(DatagramService& service, TimerWheel& wheel, uint16_t port, const SlidwinConfig& cfg,
                                 SlidwinSink& sink)
    : service_(service), wheel_(wheel), port_(port), cfg_(cfg), sink_(sink) {
    service_.bind(port_, this);
}

SlidwinEndpoint::~SlidwinEndpoint() { service_.bind(port_, nullptr); }

SubConnection* SlidwinEndpoint::open(uint16_t local_id, Ipv4Addr remote_ip, uint16_t remote_port,
                                     uint16_t remote_id, uint64_t now_ns) {
    if (local_id >= peers_.size()) peers_.resize(static_cast<size_t>(local_id) + 1);
    Peer& p = peers_[local_id];
    if (p.sc) return nullptr;
    p.sc = std::make_unique<SubConnection>(cfg_, service_.pool(), wheel_, *this, local_id, remote_id, now_ns);
    p.ip = remote_ip;
    p.port = remote_port;
    slidwin_start(*p.sc, now_ns);
    return p.sc.get();
}

SubConnection* SlidwinEndpoint::get(uint16_t local_id) const {
    return local_id < peers_.size() ? peers_[local_id].sc.get() : nullptr;
}

void SlidwinEndpoint::udp_deliver(PktBuf* payload, const UdpMeta& meta, uint64_t now_ns) {
    uint8_t scratch[kSlidwinHdrLen];
    const uint8_t* raw = pkt_contig(payload, 0, kSlidwinHdrLen, scratch);
    uint16_t id = 0xffff;
    if (raw != nullptr) id = load_be16(raw + offsetof(SlidwinHdr, subconn));
    if (id >= peers_.size() || !peers_[id].sc || !(peers_[id].ip == meta.src) || peers_[id].port != meta.src_port) {
        ++drop_unknown_;
        pkt_free(payload);
        return;
    }
    Peer& p = peers_[id];
    if (cfg_.auth && !authentic(p, payload)) return;
    if (!p.dirty) {
        p.dirty = true;
        dirty_.push_back(id);
    }
    slidwin_receive(*p.sc, payload, now_ns);
}

void SlidwinEndpoint::end_of_burst(uint64_t now_ns) {
    for (uint16_t id : dirty_) {
        peers_[id].dirty = false;
        slidwin_flush(*peers_[id].sc, now_ns);
    }
    dirty_.clear();
}

bool SlidwinEndpoint::authentic(Peer& p, PktBuf* dgram) {
    SubConnection& sc = *p.sc;
    SlidwinCounters& ctr = sc.counters_mut();
    uint8_t scratch[kSlidwinHdrLen];
    const uint8_t* h = pkt_contig(dgram, 0, kSlidwinHdrLen, scratch);
    const uint8_t flags = h != nullptr ? h[offsetof(SlidwinHdr, flags)] : 0;
    if (h == nullptr || (flags & kSwAuth) == 0 || dgram->pkt_len < sc.hdr_len()) {
        ++ctr.drop_auth;
        pkt_free(dgram);
        return false;
    }
    const uint64_t token = load_be64(h + offsetof(SlidwinHdr, token));
    SlidwinCipher* c = nullptr;
    std::unique_ptr<SlidwinCipher> once;  // SYNs and a restart's answer: keys of a token not (yet) our peer's
    if (flags & kSwSyn) {
        once = std::make_unique<SlidwinCipher>(*cfg_.auth, SlidwinKeyUse::kSyn, token, 0, sc.local_id(), sc.remote_id());
        c = once.get();
    } else if (token != 0 && token == sc.peer_token()) {
        if (!p.rx)
            p.rx = std::make_unique<SlidwinCipher>(*cfg_.auth, SlidwinKeyUse::kData, token, sc.local_token(),
                                                   sc.local_id(), sc.remote_id());
        c = p.rx.get();
    } else if (token != 0 && token == sc.pending_token()) {
        once = std::make_unique<SlidwinCipher>(*cfg_.auth, SlidwinKeyUse::kData, token, sc.local_token(),
                                               sc.local_id(), sc.remote_id());
        c = once.get();
    } else {
        ++(sc.peer_token() == 0 ? ctr.drop_unsynced : ctr.drop_token);
        pkt_free(dgram);
        return false;
    }
    if (!c->open(dgram)) {
        ++ctr.drop_auth;
        pkt_free(dgram);
        return false;
    }
    return true;
}

void SlidwinEndpoint::slidwin_transmit(SubConnection& sc, PktBuf* dgram) {
    Peer& p = peers_[sc.local_id()];
    if (cfg_.auth && !sealed(p, sc, dgram)) return;
    service_.udp_output(dgram, port_, p.ip, p.port);
}

bool SlidwinEndpoint::sealed(Peer& p, SubConnection& sc, PktBuf* dgram) {
    SlidwinCipher* c;
    if (dgram->data()[offsetof(SlidwinHdr, flags)] & kSwSyn) {
        if (!p.tx_syn)
            p.tx_syn = std::make_unique<SlidwinCipher>(*cfg_.auth, SlidwinKeyUse::kSyn, sc.local_token(), 0,
                                                       sc.remote_id(), sc.local_id());
        c = p.tx_syn.get();
    } else {
        if (!p.tx)  // nothing but SYNs goes out before the peer's token is known
            p.tx = std::make_unique<SlidwinCipher>(*cfg_.auth, SlidwinKeyUse::kData, sc.local_token(),
                                                   sc.peer_token(), sc.remote_id(), sc.local_id());
        c = p.tx.get();
    }
    if (!c->seal(dgram, ++p.tx_counter)) {
        pkt_free(dgram);
        return false;
    }
    return true;
}

bool SlidwinEndpoint::slidwin_deliver(SubConnection& sc, PktBuf* msg) { return sink_.on_message(sc, msg); }

void SlidwinEndpoint::slidwin_peer_restarted(SubConnection& sc, uint64_t new_token) {
    sink_.on_peer_restarted(sc, new_token);
}

}  // namespace iccs
