// slidwin_handshake.cpp: a sub-connection's SYN handshake and restart challenge (slidwin.hpp, below
// the tables): the first SYN and its timer, the budget of answers, a SYN received (tentative,
// confirmed, or a new token that must answer a challenge), a peer that restarted, and the random
// numbers they draw. Rare on the data path: all of it is noinline and cold (slidwin.hpp).
#include "slidwin.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <sys/random.h>

namespace iccs {

uint64_t random_u64() {
    uint64_t v = 0;
    size_t got = 0;
    while (got < sizeof v) {
        const ssize_t n = getrandom(reinterpret_cast<uint8_t*>(&v) + got, sizeof v - got, 0);
        if (n < 0) {
            std::perror("getrandom (run token / initial sequence number)");
            std::abort();
        }
        got += static_cast<size_t>(n);
    }
    return v;
}

void slidwin_start(SubConnection& sc, uint64_t now_ns) {
    sc.send_syn(now_ns, false, 0, sc.nonce_, 0, 0);
    sc.wheel_.arm(sc.syn_timer_, now_ns + sc.syn_interval_ns_);
}

bool SubConnection::handshake_budget(uint64_t now_ns) {
    const uint64_t step = cfg_.handshake_refill_ns;
    if (step == 0) return true;
    if (budget_ >= cfg_.handshake_burst) {
        budget_ns_ = now_ns;  // full: the refill counts from the first spend
    } else if (now_ns > budget_ns_ && now_ns - budget_ns_ >= step) {
        const uint64_t add = (now_ns - budget_ns_) / step;
        budget_ = static_cast<uint32_t>(std::min<uint64_t>(cfg_.handshake_burst, budget_ + add));
        budget_ns_ = budget_ >= cfg_.handshake_burst ? now_ns : budget_ns_ + add * step;
    }
    if (budget_ == 0) return false;
    --budget_;
    return true;
}

void SubConnection::on_syn(Timer& t, uint64_t now_ns) {
    SubConnection& sc = *static_cast<SubConnection*>(t.ctx);
    if (sc.established() || sc.restarted_) return;
    if (sc.peer_state_ == PeerState::kNone) {
        sc.send_syn(now_ns, false, 0, sc.nonce_, 0, 0);
    } else {  // the peer is known: our SYN|ACK gives it our ISN and nonce and echoes its nonce
        sc.send_syn(now_ns, true, sc.rcv_nxt_, sc.nonce_, sc.peer_nonce_, sc.peer_token_);
        sc.echo_sent_ = true;
    }
    sc.syn_interval_ns_ = std::min(sc.syn_interval_ns_ * 2, sc.cfg_.syn_max_interval_ns);
    sc.wheel_.arm(sc.syn_timer_, now_ns + sc.syn_interval_ns_);
}

void SubConnection::peer_restarted(uint64_t token) {
    restarted_ = true;
    ++ctr_.peer_restarted;
    wheel_.cancel(rto_timer_);
    wheel_.cancel(delack_timer_);
    wheel_.cancel(persist_timer_);
    wheel_.cancel(syn_timer_);
    link_.slidwin_peer_restarted(*this, token);
}

void SubConnection::on_syn_rx(uint64_t token, uint32_t seq, const SlidwinAck& a, uint64_t nonce, uint64_t echo,
                              uint64_t now_ns) {
    if (peer_state_ == PeerState::kConfirmed && token != peer_token_) {
        on_new_token_syn(token, seq, a, nonce, echo, now_ns);
        return;
    }
    // It acks our ISN and echoes our nonce: it received our SYN of this run (no replay can).
    const bool proves = (a.flags & kSwAck) && a.ack == iss_ && echo == nonce_;
    bool replaced = false;
    if (peer_state_ == PeerState::kConfirmed) {
        if (seq != peer_iss_ || nonce != peer_nonce_) {  // our peer's token, not our peer's SYN
            ++ctr_.rx_bad;
            return;
        }
    } else if (peer_state_ == PeerState::kNone || token != peer_token_ || seq != peer_iss_ || nonce != peer_nonce_) {
        // Tentative until it proves itself; a later SYN of another sender takes its place.
        if (peer_state_ == PeerState::kTentative) ++ctr_.tentative_replaced;
        peer_state_ = PeerState::kTentative;
        peer_token_ = token;
        peer_iss_ = seq;
        peer_nonce_ = nonce;
        echo_sent_ = false;
        replaced = true;
        rcv_user_ = rcv_nxt_ = last_ack_sent_ = seq;
        last_adv_right_ = rcv_nxt_ + rcv_window();
        ts_recent_valid_ = false;
    }
    ++ctr_.rx_syn;
    if (proves) peer_state_ = PeerState::kConfirmed;
    // It still lacks our echo (or never proved it has our nonce): a SYN|ACK gives both. The SYN
    // answered last, again, is answered at most once per rto_min (its sender retries far less
    // often; a replay may not), so repeats do not spend the budget the next sender needs.
    if (!proves || !echo_sent_) {
        if (!replaced && echo_sent_ && now_ns - last_answer_ns_ < cfg_.rto_min_ns) {
            ++ctr_.drop_handshake_rate;
        } else if (!handshake_budget(now_ns)) {
            ++ctr_.drop_handshake_rate;
        } else {
            send_syn(now_ns, true, rcv_nxt_, nonce_, peer_nonce_, peer_token_);
            echo_sent_ = true;
            last_answer_ns_ = now_ns;
        }
    }
    // Confirmed: an ack without SYN tells the peer so (it opens its window to us).
    if (proves) ack_now_ = true;
}

void SubConnection::on_new_token_syn(uint64_t token, uint32_t seq, const SlidwinAck& a, uint64_t nonce,
                                     uint64_t echo, uint64_t now_ns) {
    // A new token on a confirmed sub-connection: a restarted peer, or a replayed or forged SYN.
    // Believe it only when it echoes a challenge that only the holder of the configured address
    // can have seen; one answer per challenge.
    if (token == pending_token_ && challenge_ != 0 && (a.flags & kSwAck)) {
        if (echo == challenge_ && a.ack == iss_) {
            peer_restarted(token);
        } else {
            ++ctr_.challenge_failed;
            pending_token_ = challenge_ = 0;
        }
        return;
    }
    if (challenged_ && now_ns - last_challenge_ns_ < cfg_.challenge_interval_ns) {
        ++ctr_.drop_handshake_rate;
        return;
    }
    // The same pending SYN again keeps its challenge (the answer may be on its way); any other
    // SYN gets a new one.
    if (token != pending_token_ || seq != pending_iss_ || nonce != pending_nonce_ || challenge_ == 0) {
        pending_token_ = token;
        pending_iss_ = seq;
        pending_nonce_ = nonce;
        challenge_ = random_u64() | 1;
    }
    challenged_ = true;
    last_challenge_ns_ = now_ns;
    ++ctr_.restart_challenges;
    send_syn(now_ns, true, pending_iss_, challenge_, pending_nonce_, pending_token_);
}

}  // namespace iccs
