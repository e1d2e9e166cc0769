// slidwin_endpoint.cpp: see slidwin_endpoint.hpp.
#include "slidwin_endpoint.hpp"

#include <openssl/crypto.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>

namespace iccs {

namespace {
constexpr uint32_t kAuthHdrLen = kSlidwinHdrLen + kSlidwinAuthLen;
}

SlidwinEndpoint::SlidwinEndpoint(DatagramService& service, TimerWheel& wheel, uint16_t port, const SlidwinConfig& cfg,
                                 SlidwinSink& sink)
    : service_(service), wheel_(wheel), port_(port), cfg_(cfg), sink_(sink) {
    if (cfg_.auth != nullptr) {
        kdf_ = std::make_unique<SlidwinKdf>(*cfg_.auth);
        if (!kdf_->ok())  // every seal and open then fails, counted: the peers time out
            std::fprintf(stderr, "iccs: libcrypto gave no HKDF context (key file %s): port %u cannot authenticate\n",
                         cfg_.auth->path.c_str(), port_);
        // At least twice what a sender can have in flight (RFC 4303 asks for the window to cover
        // reordering; a counter moves with every datagram, retransmissions and acks included).
        const uint32_t bufs = std::max(cfg_.snd_buf_datagrams, cfg_.rcv_buf_datagrams);
        replay_bits_ = std::max<uint32_t>(4096, 2 * bufs) + 64;
    }
    service_.bind(port_, this);
}

SlidwinEndpoint::~SlidwinEndpoint() { service_.bind(port_, nullptr); }

SubConnection* SlidwinEndpoint::open(uint16_t local_id, Ipv4Addr remote_ip, uint16_t remote_port,
                                     uint16_t remote_id, uint64_t now_ns) {
    if (local_id >= peers_.size()) peers_.resize(static_cast<size_t>(local_id) + 1);
    Peer& p = peers_[local_id];
    if (p.sc) return nullptr;
    if (cfg_.auth != nullptr) {  // every context now: none is allocated on the datagram path
        p.keys = std::make_unique<PeerKeys>();
        for (SenderKeys& s : p.keys->from) {
            s.syn.window = SlidwinReplayWindow(replay_bits_);
            s.data.window = SlidwinReplayWindow(replay_bits_);
        }
    }
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
    if (cfg_.auth && !authentic(p, payload, now_ns)) return;
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

SlidwinEndpoint::SenderKeys* SlidwinEndpoint::sender_keys(Peer& p, uint64_t token, bool make) {
    PeerKeys& k = *p.keys;
    for (SenderKeys& s : k.from)
        if (s.token == token) return &s;
    if (!make) return nullptr;
    // The entry used longest ago, but never the peer's or a pending restart's.
    SenderKeys* victim = nullptr;
    for (SenderKeys& s : k.from) {
        if (s.token != 0 && (s.token == p.sc->peer_token() || s.token == p.sc->pending_token())) continue;
        if (victim == nullptr || s.used < victim->used) victim = &s;
    }
    victim->token = token;
    for (RxKey* r : {&victim->syn, &victim->data}) {
        r->has[0] = r->has[1] = false;
        r->committed = false;
    }
    return victim;
}

SlidwinCipher* SlidwinEndpoint::rx_cipher(Peer& p, RxKey& k, SlidwinKeyUse use, uint64_t token, uint32_t epoch,
                                          bool& spare) {
    spare = false;
    if (k.committed) {
        if (epoch == k.epoch[k.cur]) return &k.c[k.cur];
        if (epoch != k.epoch[k.cur] + 1) return nullptr;  // an epoch left behind (or not yet reachable)
    }
    // The next epoch's key, or a first key: made in the spare slot (once: kept for the next
    // datagram of that epoch), committed only when a tag verifies under it.
    const uint8_t s = k.committed ? static_cast<uint8_t>(1 - k.cur) : k.cur;
    spare = true;
    if (k.has[s] && k.epoch[s] == epoch) return &k.c[s];
    SubConnection& sc = *p.sc;
    uint8_t key[16];
    const bool ok = kdf_->ok() &&
                    kdf_->derive(key, use, epoch, token, use == SlidwinKeyUse::kSyn ? 0 : sc.local_token(),
                                 sc.local_id(), sc.remote_id()) &&
                    k.c[s].set_key(key);
    OPENSSL_cleanse(key, sizeof key);
    ++sc.counters_mut().key_setups;
    k.has[s] = ok;
    k.epoch[s] = epoch;
    return ok ? &k.c[s] : nullptr;
}

bool SlidwinEndpoint::authentic(Peer& p, PktBuf* dgram, uint64_t now_ns) {
    SubConnection& sc = *p.sc;
    SlidwinCounters& ctr = sc.counters_mut();
    auto drop = [&](uint64_t& counter) {
        ++counter;
        pkt_free(dgram);
        return false;
    };
    uint8_t scratch[kAuthHdrLen];
    const uint8_t* h = pkt_contig(dgram, 0, kAuthHdrLen, scratch);
    const uint8_t flags = h != nullptr ? h[offsetof(SlidwinHdr, flags)] : 0;
    if (h == nullptr || (flags & kSwAuth) == 0) return drop(ctr.drop_auth);
    const uint64_t token = load_be64(h + offsetof(SlidwinHdr, token));
    const uint64_t counter = load_be64(h + kSlidwinHdrLen);
    const bool syn = (flags & kSwSyn) != 0;
    SenderKeys* s = sender_keys(p, token, false);
    if (s == nullptr) {
        // Only a handshake datagram can bring a token worth a key: a SYN, a peer's SYN|ACK, a
        // restart's answer. The rest is counted as slidwin would count it.
        if (!syn) return drop(sc.peer_token() == 0 ? ctr.drop_unsynced : ctr.drop_token);
        if (token == 0 || !sc.handshake_budget(now_ns)) return drop(ctr.drop_handshake_rate);
        s = sender_keys(p, token, true);
    }
    s->used = ++p.keys->tick;
    const bool plain_syn = syn && (flags & kSwAck) == 0;
    RxKey& k = plain_syn ? s->syn : s->data;
    const uint32_t epoch = static_cast<uint32_t>(counter >> cfg_.auth_epoch_shift);
    // A key not yet verified was paid for when its token showed up; another epoch for it (the
    // epoch is the sender's word until a tag verifies) is paid for again.
    if (!k.committed && k.has[k.cur] && k.epoch[k.cur] != epoch && !sc.handshake_budget(now_ns))
        return drop(ctr.drop_handshake_rate);
    bool spare = false;
    SlidwinCipher* c = rx_cipher(p, k, plain_syn ? SlidwinKeyUse::kSyn : SlidwinKeyUse::kData, token, epoch, spare);
    if (c == nullptr) return drop(k.committed && epoch < k.epoch[k.cur] ? ctr.drop_replay : ctr.drop_auth);
    // RFC 4303 §3.4.3: a counter seen, or too old, is refused before the tag is checked; the
    // window moves only after it verified. A new key starts with an empty window.
    if (!spare && !k.window.fresh(counter)) return drop(ctr.drop_replay);
    if (counter == 0 || !c->open(dgram, counter, cfg_.auth->encrypt)) return drop(ctr.drop_auth);
    if (spare) {
        k.cur = k.committed ? static_cast<uint8_t>(1 - k.cur) : k.cur;
        k.committed = true;
        k.window.reset();
    }
    k.window.mark(counter);
    return true;
}

bool SlidwinEndpoint::tx_key(Peer& p, TxKey& k, SlidwinKeyUse use, uint64_t to_token, uint32_t epoch) {
    if (k.has && k.to_token == to_token && k.epoch == epoch) return true;
    SubConnection& sc = *p.sc;
    uint8_t key[16];
    k.has = kdf_->ok() &&
            kdf_->derive(key, use, epoch, sc.local_token(), to_token, sc.remote_id(), sc.local_id()) &&
            k.c.set_key(key);
    OPENSSL_cleanse(key, sizeof key);
    ++sc.counters_mut().key_setups;
    k.to_token = to_token;
    k.epoch = epoch;
    return k.has;
}

void SlidwinEndpoint::slidwin_transmit(SubConnection& sc, PktBuf* dgram) {
    Peer& p = peers_[sc.local_id()];
    if (cfg_.auth && (dgram = sealed(p, dgram, sc.peer_token())) == nullptr) return;
    service_.udp_output(dgram, port_, p.ip, p.port);
}

void SlidwinEndpoint::slidwin_transmit_handshake(SubConnection& sc, PktBuf* dgram, uint64_t to_token) {
    Peer& p = peers_[sc.local_id()];
    if (cfg_.auth && (dgram = sealed(p, dgram, to_token)) == nullptr) return;
    service_.udp_output(dgram, port_, p.ip, p.port);
}

PktBuf* SlidwinEndpoint::sealed(Peer& p, PktBuf* dgram, uint64_t to_token) {
    PeerKeys& k = *p.keys;
    SubConnection& sc = *p.sc;
    const uint8_t flags = dgram->data()[offsetof(SlidwinHdr, flags)];
    const uint64_t counter = ++k.tx_counter;
    const uint32_t epoch = static_cast<uint32_t>(counter >> cfg_.auth_epoch_shift);
    const bool plain_syn = (flags & kSwSyn) && (flags & kSwAck) == 0;
    TxKey& key = plain_syn ? k.syn : to_token == sc.peer_token() ? k.data : k.other;
    if (!tx_key(p, key, plain_syn ? SlidwinKeyUse::kSyn : SlidwinKeyUse::kData, plain_syn ? 0 : to_token, epoch)) {
        ++sc.counters_mut().drop_auth;
        pkt_free(dgram);
        return nullptr;
    }
    const bool encrypt = cfg_.auth->encrypt;
    // A data datagram sealed before (its block's counter is not 0) holds the ciphertext of that
    // transmission, which a queued fragment may still view: the new one is sealed into a copy.
    if (encrypt && (flags & kSwData) && load_be64(dgram->data() + kSlidwinHdrLen) != 0) {
        PktBuf* copy = key.c.seal_copy(dgram, counter, service_.pool(), dgram->headroom());
        pkt_free(dgram);
        if (copy == nullptr) ++sc.counters_mut().drop_tx_nobuf;
        return copy;
    }
    if (!key.c.seal(dgram, counter, encrypt)) {
        ++sc.counters_mut().drop_auth;
        pkt_free(dgram);
        return nullptr;
    }
    return dgram;
}

bool SlidwinEndpoint::slidwin_deliver(SubConnection& sc, PktBuf* msg) { return sink_.on_message(sc, msg); }

void SlidwinEndpoint::slidwin_peer_restarted(SubConnection& sc, uint64_t new_token) {
    sink_.on_peer_restarted(sc, new_token);
}

}  // namespace iccs
