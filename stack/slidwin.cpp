// slidwin.cpp: see slidwin.hpp. Sequence numbers wrap: compare them only through seq_lt.
#include "slidwin.hpp"
#include "stamps.hpp"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>
#include <cstdio>

namespace iccs {

static inline bool seq_lt(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }
static inline bool seq_le(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) <= 0; }

SubConnection::SubConnection(const SlidwinConfig& cfg, PktPool& pool, TimerWheel& wheel, SlidwinLink& link,
                             uint16_t local_id, uint16_t remote_id, uint64_t now_ns)
    : cfg_(cfg), pool_(pool), wheel_(wheel), link_(link), local_id_(local_id), remote_id_(remote_id) {
    cfg_.snd_buf_datagrams = std::bit_ceil(std::max<uint32_t>(cfg.snd_buf_datagrams, 1));
    cfg_.rcv_buf_datagrams = std::bit_ceil(std::clamp<uint32_t>(cfg.rcv_buf_datagrams, 1, 32768));
    if (cfg_.ack_every == 0) cfg_.ack_every = 1;
    snd_.reset(new SendSlot[cfg_.snd_buf_datagrams]);
    snd_mask_ = cfg_.snd_buf_datagrams - 1;
    rcv_.reset(new RecvSlot[cfg_.rcv_buf_datagrams]);
    rcv_mask_ = cfg_.rcv_buf_datagrams - 1;
    // A token per sub-connection: a peer that sees one learns nothing of the others.
    local_token_ = cfg_.run_token != 0 ? slidwin_subconn_token(cfg_.run_token, local_id, remote_id) : random_u64();
    iss_ = cfg_.random_isn ? static_cast<uint32_t>(random_u64()) : cfg_.initial_seq;
    nonce_ = cfg_.nonce != 0 ? cfg_.nonce : random_u64() | 1;  // never 0: an echo of 0 means none
    snd_una_ = snd_sent_ = snd_nxt_ = iss_;
    highest_sacked_ = iss_;
    // The peer's window stays closed (right edge = ISN) until it acks our SYN: data waits.
    peer_right_ = iss_;
    last_adv_right_ = rcv_nxt_ + rcv_window();
    hdr_len_ = kSlidwinHdrLen + (cfg_.auth ? kSlidwinAuthLen : 0);
    rto_ns_ = cfg_.rto_initial_ns;
    syn_interval_ns_ = cfg_.rto_initial_ns;
    budget_ = cfg_.handshake_burst;
    rto_timer_.fn = &SubConnection::on_rto;
    delack_timer_.fn = &SubConnection::on_delack;
    persist_timer_.fn = &SubConnection::on_persist;
    syn_timer_.fn = &SubConnection::on_syn;
    rto_timer_.ctx = delack_timer_.ctx = persist_timer_.ctx = syn_timer_.ctx = this;
    (void)now_ns;
}

SubConnection::~SubConnection() {
    wheel_.cancel(rto_timer_);
    wheel_.cancel(delack_timer_);
    wheel_.cancel(persist_timer_);
    wheel_.cancel(syn_timer_);
    for (uint32_t s = snd_una_; s != snd_nxt_; ++s) {
        SendSlot& slot = snd_[s & snd_mask_];
        if (slot.p != nullptr) pkt_free(slot.p);
        slot.p = nullptr;
    }
    for (uint32_t i = 0; i <= rcv_mask_; ++i)
        if (rcv_[i].p != nullptr) pkt_free(rcv_[i].p);
}

std::string SubConnection::to_string() const {
    char s[300];
    std::snprintf(s, sizeof s,
                  "subconn %u->%u %s snd[una %u sent %u nxt %u right %u] rcv[user %u nxt %u wnd %u] rto %lluus%s",
                  local_id_, remote_id_,
                  restarted_                             ? "restarted"
                  : established()                        ? "established"
                  : peer_state_ == PeerState::kConfirmed ? "confirmed"
                  : peer_state_ == PeerState::kTentative ? "syn-received"
                                                         : "syn-sent",
                  snd_una_, snd_sent_, snd_nxt_, peer_right_, rcv_user_, rcv_nxt_,
                  rcv_window(), static_cast<unsigned long long>(rto_ns_ / 1000),
                  rto_timer_.armed ? (" (timer armed, expires " + std::to_string(rto_timer_.expires_ns) + ")").c_str() : "");
    return s;
}

// ---------------------------------------------------------------- sender

SlidwinSendResult slidwin_send(SubConnection& sc, PktBuf* msg, uint64_t now_ns) {
    stamps::stamp(stamps::kSlidwinSend);
    if (msg->pkt_len > kSlidwinMaxMsg) return SlidwinSendResult::kTooBig;
    if (sc.snd_nxt_ - sc.snd_una_ >= sc.cfg_.snd_buf_datagrams) {
        ++sc.ctr_.window_stalls;
        return SlidwinSendResult::kWouldBlock;
    }
    // The header is written whole by transmit(), every time the datagram goes out.
    uint8_t* h = pkt_prepend(msg, sc.hdr_len_);
    if (h == nullptr) return SlidwinSendResult::kTooBig;  // not our buffer
    if (sc.hdr_len_ > kSlidwinHdrLen) store_u64(h + kSlidwinHdrLen, 0);  // auth counter 0: plaintext
    SubConnection::SendSlot& slot = sc.snd_[sc.snd_nxt_ & sc.snd_mask_];
    slot.p = msg;
    slot.hdr_off = msg->data_off;
    slot.sent_ns = 0;
    slot.tx_count = 0;
    slot.sacked = false;
    ++sc.snd_nxt_;
    sc.push_new(now_ns);
    return SlidwinSendResult::kOk;
}

void SubConnection::push_new(uint64_t now_ns) {
    while (snd_sent_ != snd_nxt_ && seq_lt(snd_sent_, peer_right_)) {
        transmit(snd_sent_, now_ns, false);
        ++snd_sent_;
    }
    // Window closed with data waiting and nothing in flight: no ack will come to open it, so probe.
    // (Before the handshake the SYN timer does that job.)
    if (synced_ && snd_sent_ != snd_nxt_ && snd_una_ == snd_sent_ && !persist_timer_.armed)
        wheel_.arm(persist_timer_, now_ns + cfg_.persist_ns);
}

inline void SubConnection::write_hdr(uint8_t* raw, uint8_t flags, uint32_t seq, uint64_t now_ns) {
    const uint32_t wnd = rcv_window();
    uint64_t bits = 0;
    if (ooo_held_ > 0) {
        const uint32_t span = std::min<uint32_t>(64, cfg_.rcv_buf_datagrams);
        for (uint32_t i = 0; i < span; ++i)
            if (seq_lt(rcv_nxt_ + 1 + i, rcv_user_ + cfg_.rcv_buf_datagrams) &&
                rcv_[(rcv_nxt_ + 1 + i) & rcv_mask_].p != nullptr)
                bits |= uint64_t{1} << i;
    }
    if (ts_recent_valid_) flags = static_cast<uint8_t>(flags | kSwTsEcr);
    write_words(raw, flags, seq, rcv_nxt_, wnd, bits, now_ns);
    last_adv_right_ = rcv_nxt_ + wnd;
    last_ack_sent_ = rcv_nxt_;
    // Whatever ack was owed goes out with this datagram.
    unacked_in_order_ = 0;
    ack_now_ = false;
    if (delack_timer_.armed) wheel_.cancel(delack_timer_);
}

inline void SubConnection::write_words(uint8_t* raw, uint8_t flags, uint32_t seq, uint32_t ack, uint32_t wnd,
                                uint64_t sack, uint64_t now_ns) const {
    if (cfg_.auth) flags = static_cast<uint8_t>(flags | kSwAuth | (cfg_.auth->encrypt ? kSwEnc : 0));
    // Five whole words, no struct copy (see be.hpp): the UDP checksum reads them right back.
    store_u64(raw, uint64_t{kSlidwinVersion} | uint64_t{flags} << 8 | wire16(remote_id_) << 16 | wire32(seq) << 32);
    store_u64(raw + 8, wire32(ack) | wire16(static_cast<uint16_t>(wnd)) << 32);
    store_u64(raw + 16, __builtin_bswap64(sack));
    store_u64(raw + 24, wire32(static_cast<uint32_t>(now_ns / 1000)) | wire32(ts_recent_) << 32);
    store_u64(raw + 32, __builtin_bswap64(local_token_));
}

void SubConnection::transmit(uint32_t seq, uint64_t now_ns, bool retx) {
    SendSlot& slot = snd_[seq & snd_mask_];
    PktBuf* p = slot.p;
    if (p == nullptr) return;  // sacked meanwhile
    if (retx && p->refcnt > 1) {
        // Still queued below us (TX queue or fragments not yet on the wire): the previous copy
        // has not even left, so a resend now would only duplicate it. Only the head counts: the
        // payload segments of striped pieces are shared by design (each piece a view of its
        // range), so their counts say nothing about this datagram. With encryption a resend
        // re-seals in place; a later fragment of the last copy still queued would then carry
        // re-encrypted bytes and fail its tag at the receiver: a lost copy, never a wrong byte.
        slot.sent_ns = now_ns;
        return;
    }
    // Undo the headers the lower layers prepended last time.
    if (p->data_off != slot.hdr_off) {
        const uint32_t grown = slot.hdr_off - p->data_off;
        p->data_off = slot.hdr_off;
        p->data_len -= grown;
        p->pkt_len -= grown;
    }
    write_hdr(p->data(), static_cast<uint8_t>(kSwData | kSwAck | (retx ? kSwRetx : 0)), seq, now_ns);
    slot.sent_ns = now_ns;
    ++slot.tx_count;
    if (retx)
        ++ctr_.tx_retx;
    else
        ++ctr_.tx_data;
    if (!rto_timer_.armed) arm_rto(now_ns);
    pkt_ref(p);
    link_.slidwin_transmit(*this, p);
}

void SubConnection::arm_rto(uint64_t now_ns) { wheel_.arm(rto_timer_, now_ns + rto_ns_); }

void SubConnection::rtt_sample(uint64_t rtt_ns) {
    // RFC 6298 §2 (alpha 1/8, beta 1/4, K 4).
    if (srtt_ns_ == 0) {
        srtt_ns_ = rtt_ns;
        rttvar_ns_ = rtt_ns / 2;
    } else {
        const uint64_t err = srtt_ns_ > rtt_ns ? srtt_ns_ - rtt_ns : rtt_ns - srtt_ns_;
        rttvar_ns_ = (3 * rttvar_ns_ + err) / 4;
        srtt_ns_ = (7 * srtt_ns_ + rtt_ns) / 8;
    }
    rto_ns_ = std::clamp<uint64_t>(srtt_ns_ + 4 * rttvar_ns_, cfg_.rto_min_ns, cfg_.rto_max_ns);
}

inline void SubConnection::process_ack(const SlidwinAck& h, uint64_t now_ns) {
    ++ctr_.rx_ack;
    // Nothing acked or sacked, no hole: what process_ack_news would find, without its loops.
    if (!seq_lt(snd_una_, h.ack) && h.sack == 0 && highest_sacked_ == snd_una_) {
        ack_edges(h, false, now_ns);
        return;
    }
    process_ack_news(h, now_ns);
}

void SubConnection::process_ack_news(const SlidwinAck& h, uint64_t now_ns) {
    const uint32_t ack = h.ack;  // within the window: checked by in_window() before any state changed
    const bool advanced = seq_lt(snd_una_, ack);
    if (advanced) {
        for (uint32_t s = snd_una_; s != ack; ++s) {
            SendSlot& slot = snd_[s & snd_mask_];
            if (slot.p != nullptr) pkt_free(slot.p);
            slot.p = nullptr;
            slot.sacked = false;
        }
        snd_una_ = ack;
        // Progress ends the backoff (as Linux does): the RTO returns to what the RTT says.
        if (backoff_ > 0 && srtt_ns_ > 0)
            rto_ns_ = std::clamp<uint64_t>(srtt_ns_ + 4 * rttvar_ns_, cfg_.rto_min_ns, cfg_.rto_max_ns);
        backoff_ = 0;
    }
    if (seq_lt(highest_sacked_, snd_una_)) highest_sacked_ = snd_una_;
    const uint64_t bits = h.sack;
    if (bits != 0) {
        for (uint32_t i = 0; i < 64; ++i) {
            if ((bits >> i & 1u) == 0) continue;
            const uint32_t s = ack + 1 + i;
            if (!seq_lt(s, snd_sent_)) break;
            // A late (reordered) ack names seqs below snd_una_ whose slots now hold newer data.
            if (seq_lt(s, snd_una_)) continue;
            SendSlot& slot = snd_[s & snd_mask_];
            if (slot.sacked) continue;
            // The receiver keeps what it sacked until delivery (it never reneges): free ours now.
            slot.sacked = true;
            if (slot.p != nullptr) pkt_free(slot.p);
            slot.p = nullptr;
            if (seq_le(highest_sacked_, s)) highest_sacked_ = s + 1;
        }
    }
    // The echoed timestamp times this ack's round trip, retransmission or not, when it moves the
    // left edge (RFC 7323 §4.1): the receiver echoes the datagram that last advanced its
    // cumulative ack (§4.3), so an ack that only sacks more echoes an older time.
    if (advanced && (h.flags & kSwTsEcr)) {
        const uint32_t rtt_us = static_cast<uint32_t>(now_ns / 1000) - h.tsecr;
        rtt_sample(uint64_t{rtt_us} * 1000);
    }

    // Fast retransmit: a hole with at least dupthresh sacked datagrams above it is lost. A hole
    // already resent is resent again only after a smoothed RTT (its resend may be lost too).
    if (seq_lt(snd_una_, highest_sacked_)) {
        uint32_t above = 0;
        const uint64_t again_ns = srtt_ns_ > 0 ? srtt_ns_ + rttvar_ns_ : rto_ns_;
        for (uint32_t s = highest_sacked_; s != snd_una_;) {
            --s;
            SendSlot& slot = snd_[s & snd_mask_];
            if (slot.sacked) {
                ++above;
            } else if (above >= cfg_.dupthresh && slot.p != nullptr &&
                       (slot.tx_count == 1 || now_ns - slot.sent_ns >= again_ns)) {
                ++ctr_.tx_fast_retx;
                transmit(s, now_ns, true);
            }
        }
    }

    ack_edges(h, advanced, now_ns);
}

inline void SubConnection::ack_edges(const SlidwinAck& h, bool advanced, uint64_t now_ns) {
    // The receiver's right edge (first seq its user has not freed + buffer) never moves back,
    // so a smaller one can only come from a late ack: keep the newest.
    const uint32_t right = h.ack + h.wnd;
    if (seq_lt(peer_right_, right)) peer_right_ = right;
    if (snd_una_ == snd_sent_) {
        if (rto_timer_.armed) wheel_.cancel(rto_timer_);
    } else if (advanced) {
        arm_rto(now_ns);
    }
    if (seq_lt(snd_sent_, peer_right_) && persist_timer_.armed) wheel_.cancel(persist_timer_);
    // Every data datagram carries an ack: on a one-way stream the receiver's side has nothing
    // waiting, and push_new would find nothing to do.
    if (snd_sent_ != snd_nxt_) push_new(now_ns);
}

void SubConnection::on_rto(Timer& t, uint64_t now_ns) {
    SubConnection& sc = *static_cast<SubConnection*>(t.ctx);
    ++sc.ctr_.rto_expired;
    const uint64_t stale_ns = sc.rto_ns_;
    sc.rto_ns_ = std::min(sc.rto_ns_ * 2, sc.cfg_.rto_max_ns);
    ++sc.backoff_;
    // Resend what has waited a whole RTO, oldest first: at the tail of a stream no later
    // datagram will come to trigger fast retransmit, so the timer must cover every hole.
    auto due = [&](const SendSlot& slot, uint32_t resent) {
        return slot.p != nullptr && !slot.sacked && (resent == 0 || now_ns - slot.sent_ns >= stale_ns);
    };
    uint32_t burst = 0;
    for (uint32_t s = sc.snd_una_; s != sc.snd_sent_ && burst < sc.cfg_.max_retx_burst; ++s)
        burst += due(sc.snd_[s & sc.snd_mask_], burst) ? 1 : 0;
    // While nothing moves, timeouts would repeat the same burst and the peer would answer each
    // alike: the frames on the wire would recur with a fixed period (burst + answers), and a loss
    // pattern of that period or a divisor that once took the hole, or the one ack answering the
    // burst, would take it every time, for ever (every 11th frame against 32 datagrams + 1 ack:
    // stack/README.md, "Periodic loss"). So every second timeout of a run sends one frame fewer
    // (the burst's last datagram waits for the next timeout) or, when the burst is the hole alone,
    // one more: a pure ack right after the hole, so that the peer's answer moves by one place too.
    const bool vary = (sc.backoff_ & 1) == 0, alone = burst == 1;
    if (vary && !alone && burst > 0) --burst;
    uint32_t resent = 0;
    for (uint32_t s = sc.snd_una_; s != sc.snd_sent_ && resent < burst; ++s) {
        if (!due(sc.snd_[s & sc.snd_mask_], resent)) continue;
        ++sc.ctr_.tx_rto_retx;
        sc.transmit(s, now_ns, true);
        ++resent;
    }
    if (vary && alone) sc.send_ack(now_ns, 0);
    if (sc.snd_una_ != sc.snd_sent_) sc.arm_rto(now_ns);
}

void SubConnection::on_persist(Timer& t, uint64_t now_ns) {
    SubConnection& sc = *static_cast<SubConnection*>(t.ctx);
    if (sc.snd_sent_ == sc.snd_nxt_ || seq_lt(sc.snd_sent_, sc.peer_right_)) return;
    ++sc.ctr_.tx_probe;
    sc.send_ack(now_ns, kSwAckReq);
    sc.wheel_.arm(sc.persist_timer_, now_ns + sc.cfg_.persist_ns);
}

// ---------------------------------------------------------------- handshake
// The SYN exchange and the restart challenge are in slidwin_handshake.cpp; these two stay beside
// the header writer and the ack processing they call.

void SubConnection::send_syn(uint64_t now_ns, bool with_ack, uint32_t ack, uint64_t nonce, uint64_t echo,
                             uint64_t to_token) {
    PktBuf* p = pkt_alloc(pool_);
    if (p == nullptr) return;  // the SYN timer (or the peer's next SYN) tries again
    uint8_t* h = pkt_append(p, hdr_len_ + kSlidwinSynBlkLen);
    if (h == nullptr) {
        pkt_free(p);
        return;
    }
    write_words(h, static_cast<uint8_t>(kSwSyn | (with_ack ? kSwAck : 0)), iss_, ack, with_ack ? rcv_window() : 0, 0,
                now_ns);
    if (hdr_len_ > kSlidwinHdrLen) store_u64(h + kSlidwinHdrLen, 0);
    store_u64(h + hdr_len_, __builtin_bswap64(nonce));
    store_u64(h + hdr_len_ + 8, __builtin_bswap64(echo));
    if (with_ack && to_token == peer_token_) last_ack_sent_ = ack;
    ++ctr_.tx_syn;
    link_.slidwin_transmit_handshake(*this, p, to_token);
}

void SubConnection::become_synced(const SlidwinAck& a, uint64_t now_ns) {
    synced_ = true;
    wheel_.cancel(syn_timer_);
    process_ack(a, now_ns);  // the peer's window opens: waiting data goes
}

inline bool SubConnection::in_window(uint8_t flags, uint32_t seq, uint32_t ack) const {
    if ((flags & kSwAck) && (seq_lt(snd_sent_, ack) || seq_lt(ack, snd_una_ - cfg_.snd_buf_datagrams))) return false;
    if ((flags & kSwData) &&
        (seq_lt(seq, rcv_nxt_ - cfg_.rcv_buf_datagrams) || !seq_lt(seq, rcv_user_ + cfg_.rcv_buf_datagrams)))
        return false;
    return true;
}

// ---------------------------------------------------------------- receiver

void SubConnection::send_ack(uint64_t now_ns, uint8_t extra_flags) {
    PktBuf* p = pkt_alloc(pool_);
    if (p == nullptr) {  // no buffer: try again shortly rather than lose the ack
        if (!delack_timer_.armed) wheel_.arm(delack_timer_, now_ns + cfg_.delack_ns);
        return;
    }
    uint8_t* h = pkt_append(p, hdr_len_);
    write_hdr(h, static_cast<uint8_t>(kSwAck | extra_flags), snd_sent_, now_ns);
    if (hdr_len_ > kSlidwinHdrLen) store_u64(h + kSlidwinHdrLen, 0);
    ++ctr_.tx_ack;
    link_.slidwin_transmit(*this, p);
}

void SubConnection::on_delack(Timer& t, uint64_t now_ns) {
    SubConnection& sc = *static_cast<SubConnection*>(t.ctx);
    sc.ack_now_ = true;
    slidwin_flush(sc, now_ns);
}

void slidwin_flush(SubConnection& sc, uint64_t now_ns) {
    if (!sc.ack_now_) return;
    sc.push_new(now_ns);  // data that can go carries the ack
    if (sc.ack_now_) sc.send_ack(now_ns, 0);
}

inline void SubConnection::ack_due(uint64_t now_ns) {
    if (unacked_in_order_ >= cfg_.ack_every)
        ack_now_ = true;
    else if (unacked_in_order_ > 0 && !delack_timer_.armed)
        wheel_.arm(delack_timer_, now_ns + cfg_.delack_ns);
}

void slidwin_receive(SubConnection& sc, PktBuf* p, uint64_t now_ns) {
    stamps::stamp(stamps::kSlidwinReceive);
    if (p->pkt_len < sc.hdr_len_ || p->data_len < sc.hdr_len_) {
        ++sc.ctr_.rx_bad;
        pkt_free(p);
        return;
    }
    // Fields read in place (no 32-byte copy): see be.hpp.
    const uint8_t* raw = p->data();
    SlidwinAck a;
    const uint8_t version = raw[offsetof(SlidwinHdr, version)];
    const uint8_t flags = raw[offsetof(SlidwinHdr, flags)];
    a.flags = flags;
    a.ack = load_be32(raw + offsetof(SlidwinHdr, ack));
    a.wnd = load_be16(raw + offsetof(SlidwinHdr, wnd));
    uint64_t sack_be;
    std::memcpy(&sack_be, raw + offsetof(SlidwinHdr, sack), 8);
    a.sack = __builtin_bswap64(sack_be);
    a.tsecr = load_be32(raw + offsetof(SlidwinHdr, tsecr));
    const uint64_t token = load_be64(raw + offsetof(SlidwinHdr, token));
    const uint32_t seq = load_be32(raw + offsetof(SlidwinHdr, seq));
    // Every check comes before the first change of state (issue 17). Every datagram but a plain
    // SYN carries an ack (issue 37: a frame without one would skip the ack's window check); a
    // SYN carries its handshake block and nothing else.
    const bool syn = (flags & kSwSyn) != 0;
    if (version != kSlidwinVersion || load_be16(raw + offsetof(SlidwinHdr, reserved)) != 0 ||
        (syn ? ((flags & kSwData) || p->pkt_len != sc.hdr_len_ + kSlidwinSynBlkLen)
             : ((flags & kSwAck) == 0 || ((flags & kSwData) == 0 && p->pkt_len != sc.hdr_len_))) ||
        ((flags & kSwAuth) != 0) != (sc.cfg_.auth != nullptr) ||
        ((flags & kSwEnc) != 0) != (sc.cfg_.auth != nullptr && sc.cfg_.auth->encrypt)) {
        ++sc.ctr_.rx_bad;
        pkt_free(p);
        return;
    }
    if (sc.restarted_) {  // the peer we knew is gone; its successor is not merged into this
        ++sc.ctr_.drop_token;
        pkt_free(p);
        return;
    }
    if (syn) {
        uint8_t blk_scratch[kSlidwinSynBlkLen];
        const uint8_t* blk = pkt_contig(p, sc.hdr_len_, kSlidwinSynBlkLen, blk_scratch);
        sc.on_syn_rx(token, seq, a, load_be64(blk + offsetof(SlidwinSynBlk, nonce)),
                     load_be64(blk + offsetof(SlidwinSynBlk, echo)), now_ns);
        pkt_free(p);
        return;
    }
    if (sc.peer_state_ == SubConnection::PeerState::kNone) {
        ++sc.ctr_.drop_unsynced;
        pkt_free(p);
        return;
    }
    if (token != sc.peer_token_) {
        ++sc.ctr_.drop_token;
        pkt_free(p);
        return;
    }
    if (sc.peer_state_ != SubConnection::PeerState::kConfirmed) {  // a tentative token proves nothing
        ++sc.ctr_.drop_unsynced;
        pkt_free(p);
        return;
    }
    if (!sc.in_window(flags, seq, a.ack)) {
        ++sc.ctr_.drop_out_of_window;
        pkt_free(p);
        return;
    }
    sc.last_valid_rx_ns_ = now_ns;  // the confirmed peer, in the window: it is alive (what we deliver aside)
    // The peer sends without SYN only once it confirmed us: its first such ack ends our handshake.
    if (!sc.synced_)
        sc.become_synced(a, now_ns);
    else
        sc.process_ack(a, now_ns);
    if (flags & kSwAckReq) sc.ack_now_ = true;
    if ((flags & kSwData) == 0) {
        pkt_free(p);
        return;
    }
    // RFC 7323 §4.3: the timestamp to echo comes from a datagram at or below the ack we sent last
    // (the in-order one, or a retransmission of one we acked: never one beyond a hole) and never
    // goes back in time (PAWS): a duplicate or replay with an old timestamp changes nothing.
    const uint32_t tsval = load_be32(raw + offsetof(SlidwinHdr, tsval));
    if (seq_le(seq, sc.last_ack_sent_) && (!sc.ts_recent_valid_ || static_cast<int32_t>(tsval - sc.ts_recent_) >= 0)) {
        sc.ts_recent_ = tsval;
        sc.ts_recent_valid_ = true;
    }
    if (seq_lt(seq, sc.rcv_nxt_)) {
        ++sc.ctr_.rx_dup;
        sc.ack_now_ = true;  // our ack may have been lost: repeat it
        pkt_free(p);
        return;
    }
    SubConnection::RecvSlot& slot = sc.rcv_[seq & sc.rcv_mask_];
    if (slot.p != nullptr) {
        ++sc.ctr_.rx_dup;
        sc.ack_now_ = true;
        pkt_free(p);
        return;
    }
    pkt_adj(p, sc.hdr_len_);
    slot.p = p;
    ++sc.ctr_.rx_data;
    if (seq == sc.rcv_nxt_) {
        uint32_t advanced = 0;
        while (sc.rcv_[sc.rcv_nxt_ & sc.rcv_mask_].p != nullptr &&
               seq_lt(sc.rcv_nxt_, sc.rcv_user_ + sc.cfg_.rcv_buf_datagrams)) {
            ++sc.rcv_nxt_;
            ++advanced;
        }
        sc.ooo_held_ -= advanced - 1;
        sc.unacked_in_order_ += advanced;
        if (advanced > 1) sc.ack_now_ = true;  // a gap closed: tell the sender at once
    } else {
        ++sc.ctr_.rx_out_of_order;
        ++sc.ooo_held_;
        sc.ack_now_ = true;  // the sack bitmap tells the sender what is missing
    }
    sc.deliver_in_order();
    sc.ack_due(now_ns);
}

inline uint32_t SubConnection::deliver_in_order() {
    uint32_t n = 0;
    const bool was_closed = last_adv_right_ == rcv_nxt_;
    while (rcv_user_ != rcv_nxt_) {
        RecvSlot& slot = rcv_[rcv_user_ & rcv_mask_];
        if (!link_.slidwin_deliver(*this, slot.p)) break;
        slot.p = nullptr;
        ++rcv_user_;
        ++ctr_.delivered;
        ++n;
    }
    // Window update: the user made room the sender does not know about. Announce it when the
    // window was closed or has grown by half the buffer since the last advertisement.
    if (n > 0) {
        const uint32_t right = rcv_nxt_ + rcv_window();
        if (was_closed || right - last_adv_right_ >= cfg_.rcv_buf_datagrams / 2) ack_now_ = true;
    }
    return n;
}

bool slidwin_keepalive(SubConnection& sc, uint64_t now_ns) {
    if (!sc.established() || sc.restarted_) return false;
    sc.send_ack(now_ns, 0);
    return true;
}

uint32_t slidwin_deliver_pending(SubConnection& sc, uint64_t now_ns) {
    const uint32_t n = sc.deliver_in_order();
    slidwin_flush(sc, now_ns);
    return n;
}

}  // namespace iccs
