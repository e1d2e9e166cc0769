// slidwin.hpp: the sliding-window reliability protocol of one sub-connection (DESIGN.md §3).
//
// The one idea: every datagram gets a sequence number; the receiver answers with a cumulative
// ack, a 64-bit selective-ack bitmap of what it holds beyond the ack, and the window it can still
// take. The sender keeps each unacked datagram as the very buffer it transmitted (zero copy; the
// lower layers' headers are re-prepended on a retransmission) and retransmits on a timeout (RTO
// from Jacobson/Karels on echoed timestamps, with exponential backoff) or as soon as three later
// datagrams are selectively acked (fast retransmit). Acks ride on data when there is data to
// send (piggy-backing); otherwise they are delayed until every `ack_every` datagrams, a timer, or
// the end of the input burst if something is out of order. A zero window is probed. Consecutive
// timeouts never send the same frames (one datagram fewer, or one pure ack more, every second
// time), so a periodic loss pattern cannot take the hole at every timeout (README: periodic loss).
//
// Flow control is by datagrams: the receiver's buffer holds `rcv_buf_datagrams` messages between
// the first one its user has not taken and the highest one it accepts, so a slow user shrinks
// the window and the sender stops. Congestion control is out of scope here (one fabric, known
// peers); the window bounds what is in flight.
//
// Who may speak (issues 17, 37): each end has a token (per sub-connection, derived from its
// cluster's run token), a random initial sequence number (ISN) and a fresh 64-bit nonce. A new
// sub-connection sends SYN (token, ISN, nonce) until the handshake is done. The peer's token is
// only tentative when its SYN arrives (a replayed or forged SYN can be that SYN): it is believed
// (confirmed) when a SYN|ACK under it acks our ISN and echoes our nonce, which only someone who
// received our SYN of this run can send (with a key, the SYN|ACK is under the data key of both
// tokens as well). A later SYN with another token replaces a tentative one, so a replay cannot
// wedge the set-up. Data waits until the peer's first ack after it confirmed us (its window is
// closed until then). Every received datagram is checked before it touches any state: the token
// must be the confirmed peer's (`drop_token`), every datagram but a plain SYN must carry an ack,
// seq within [rcv_nxt - buffer, rcv_user + buffer) and ack within [snd_una - buffer, snd_sent]
// (`drop_out_of_window`); nothing but a SYN is taken before the peer is confirmed
// (`drop_unsynced`). A SYN with a new token on an established sub-connection may be a restarted
// peer, or a replay: it is answered with a challenge (a SYN|ACK whose nonce is a fresh 64-bit
// random number, at most one per `challenge_interval_ns`) and the restart is believed only when
// the new token echoes it in its SYN|ACK; any other answer clears the challenge. Then the link
// hears slidwin_peer_restarted() once and the sub-connection takes nothing more. Answers to SYNs
// (and the endpoint's key set-ups for unknown tokens) draw on a small budget per sub-connection
// (`handshake_burst`, one more per `handshake_refill_ns`): a flood of SYNs costs a bounded CPU.

// Threading: a SubConnection belongs to one thread (_st), like the Stack it runs on.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "pktbuf.hpp"
#include "slidwin_auth.hpp"
#include "slidwin_hdr.hpp"
#include "timer_wheel.hpp"

namespace iccs {

struct SlidwinConfig {
    uint32_t snd_buf_datagrams = 1024;     // accepted but unacked datagrams (power of two)
    uint32_t rcv_buf_datagrams = 1024;     // receive buffer = largest window (power of two, <= 32768)
    uint64_t rto_initial_ns = 10'000'000;  // before the first RTT sample [ns]
    uint64_t rto_min_ns = 1'000'000;       // [ns]
    uint64_t rto_max_ns = 1'000'000'000;   // backoff stops doubling here [ns]
    uint64_t delack_ns = 50'000;           // longest an ack waits for data to ride on [ns]
    uint32_t ack_every = 2;                // ack at once after this many unacked in-order datagrams
    uint32_t dupthresh = 3;                // later datagrams sacked before a hole is retransmitted
    uint64_t persist_ns = 10'000'000;      // zero-window probe interval [ns]
    uint32_t max_retx_burst = 32;          // datagrams one timeout may retransmit
    uint64_t run_token = 0;                // this end's run token (0: the sub-connection draws one)
    bool random_isn = true;                // draw the initial sequence number (getrandom) ...
    uint32_t initial_seq = 0;              // ... or start here (tests: wrap-around, golden bytes)
    uint64_t nonce = 0;                    // the handshake nonce: 0 draws one (tests: golden bytes)
    uint64_t syn_max_interval_ns = 100'000'000;  // SYN retransmissions back off up to this [ns]
    uint64_t challenge_interval_ns = 10'000'000;  // restart challenges: at most one this often [ns]
    uint32_t handshake_burst = 8;                  // SYN answers and key set-ups in a burst ...
    uint64_t handshake_refill_ns = 500'000;        // ... and one more this often [ns]
    // Authentication: 2^auth_epoch_shift datagrams under one key, then the next epoch's keys.
    uint32_t auth_epoch_shift = 32;
    // Per-datagram authentication (and encryption): null = off. Every datagram then carries the
    // kSlidwinAuthLen-byte auth block after the header; the endpoint seals and opens it. Not
    // owned: whoever fills it in keeps the key alive as long as the sub-connections.
    const SlidwinAuthKey* auth = nullptr;
};

// A 64-bit random number from the kernel (getrandom): run tokens, initial sequence numbers,
// nonces, restart challenges (rate-limited). A system call; aborts with the reason if the kernel
// has none to give.
uint64_t random_u64();

#define ICCS_SLIDWIN_COUNTERS(X)                                                        \
    X(tx_data, "data datagrams sent for the first time")                                \
    X(tx_retx, "data datagrams retransmitted (all causes)")                             \
    X(tx_fast_retx, "retransmissions caused by selective acks (fast retransmit)")       \
    X(tx_rto_retx, "retransmissions caused by the retransmission timer")                \
    X(tx_ack, "pure acks sent")                                                         \
    X(tx_probe, "zero-window probes sent")                                              \
    X(rto_expired, "retransmission timer expirations")                                  \
    X(window_stalls, "sends refused because the send buffer was full")                  \
    X(rx_data, "data datagrams accepted for the first time")                            \
    X(rx_dup, "duplicate data datagrams (already received)")                            \
    X(rx_out_of_order, "data datagrams accepted beyond a gap")                          \
    X(rx_ack, "datagrams carrying an ack")                                              \
    X(rx_bad, "malformed slidwin datagrams (dropped)")                                  \
    X(delivered, "messages handed to the user in order")                                \
    X(tx_syn, "handshake datagrams sent (SYN, SYN|ACK, restart challenges)")            \
    X(rx_syn, "handshake datagrams accepted")                                           \
    X(drop_token, "datagrams with a run token not the peer's (dropped)")                \
    X(drop_out_of_window, "datagrams with seq or ack outside the window (dropped)")     \
    X(drop_unsynced, "datagrams other than SYN before the handshake (dropped)")        \
    X(drop_unknown_subconn, "datagrams for no open sub-connection or from another address") \
    X(restart_challenges, "SYNs with a new token answered with a challenge")            \
    X(peer_restarted, "peers that came back with a new run token")                      \
    X(drop_auth, "datagrams whose authentication tag did not verify (dropped)")          \
    X(drop_replay, "authenticated datagrams whose counter was seen or is too old (dropped)") \
    X(drop_handshake_rate, "handshake datagrams beyond the answer and key set-up budget")  \
    X(tentative_replaced, "tentative peers replaced by a SYN with another token")         \
    X(challenge_failed, "restart challenges answered wrongly (cleared)")                   \
    X(key_setups, "authentication keys derived (handshake, new epoch)")                    \
    X(drop_tx_nobuf, "transmissions dropped for want of a buffer (sealing a copy)")

struct SlidwinCounters {
#define X(name, doc) uint64_t name = 0;
    ICCS_SLIDWIN_COUNTERS(X)
#undef X
    template <typename Fn>
    void for_each(Fn&& fn) const {
#define X(name, doc) fn(#name, doc, name);
        ICCS_SLIDWIN_COUNTERS(X)
#undef X
    }
};

class SubConnection;

// The acknowledgement fields of a received header, in host order.
struct SlidwinAck {
    uint8_t flags;
    uint32_t ack;
    uint16_t wnd;
    uint64_t sack;
    uint32_t tsecr;
};

// What a sub-connection needs from its owner (the endpoint that binds it to UDP).
struct SlidwinLink {
    virtual ~SlidwinLink() = default;
    // Transmit one datagram (data() at the slidwin header). Consumes one reference.
    virtual void slidwin_transmit(SubConnection& sc, PktBuf* dgram) = 0;
    // Transmit a handshake datagram (SYN, SYN|ACK, restart challenge). to_token: the token its
    // receiver is believed to have (0 for a plain SYN); the keys depend on it.
    virtual void slidwin_transmit_handshake(SubConnection& sc, PktBuf* dgram, uint64_t to_token) = 0;
    // Hand one in-order message to the user (data() at the first payload byte). Return false to
    // refuse it for now (user queue full): slidwin keeps it, shrinks the window, and offers it
    // again from slidwin_deliver_pending(). On true, ownership passes to the user.
    virtual bool slidwin_deliver(SubConnection& sc, PktBuf* msg) = 0;
    // The peer answered a restart challenge with its new run token: it is another incarnation
    // (its old state is gone). Called once; the sub-connection drops everything from then on.
    virtual void slidwin_peer_restarted(SubConnection& sc, uint64_t new_token) { (void)sc, (void)new_token; }
};

enum class SlidwinSendResult { kOk, kWouldBlock, kTooBig };

class SubConnection {
   public:
    // local_id: how the peer names this sub-connection in the datagrams it sends us;
    // remote_id: how we name the peer's end in the datagrams we send.
    SubConnection(const SlidwinConfig& cfg, PktPool& pool, TimerWheel& wheel, SlidwinLink& link,
                  uint16_t local_id, uint16_t remote_id, uint64_t now_ns);
    ~SubConnection();
    SubConnection(const SubConnection&) = delete;
    SubConnection& operator=(const SubConnection&) = delete;

    uint16_t local_id() const { return local_id_; }
    uint16_t remote_id() const { return remote_id_; }
    const SlidwinCounters& counters() const { return ctr_; }
    const SlidwinConfig& config() const { return cfg_; }
    // Datagrams accepted by slidwin_send and not yet acked.
    uint32_t unacked() const { return snd_nxt_ - snd_una_; }
    // Free send-buffer slots: how many more slidwin_send calls succeed now.
    uint32_t send_space() const { return cfg_.snd_buf_datagrams - (snd_nxt_ - snd_una_); }
    // The window this side advertises now (datagrams beyond rcv_nxt).
    uint32_t rcv_window() const { return cfg_.rcv_buf_datagrams - (rcv_nxt_ - rcv_user_); }
    // Highest seq the peer allowed us to send, exclusive (ack + wnd of its last ack).
    uint32_t peer_right_edge() const { return peer_right_; }
    uint32_t snd_nxt() const { return snd_nxt_; }
    uint32_t snd_sent() const { return snd_sent_; }
    uint32_t rcv_nxt() const { return rcv_nxt_; }
    uint64_t rto_ns() const { return rto_ns_; }
    uint64_t local_token() const { return local_token_; }
    // The peer's token: 0 until a SYN arrived, tentative until peer_confirmed().
    uint64_t peer_token() const { return peer_token_; }
    bool peer_confirmed() const { return peer_state_ == PeerState::kConfirmed; }
    uint64_t pending_token() const { return pending_token_; }  // a restart waiting for its answer
    uint64_t nonce() const { return nonce_; }
    // Bytes of slidwin header in front of each payload (with the auth block when authenticating).
    uint32_t hdr_len() const { return hdr_len_; }
    uint32_t iss() const { return iss_; }                 // our initial sequence number
    // The handshake is done both ways: we confirmed the peer, and it confirmed us.
    bool established() const { return peer_state_ == PeerState::kConfirmed && synced_; }
    bool restarted() const { return restarted_; }
    // When the peer last proved it is alive: the receive clock (now_ns of slidwin_receive) of the
    // latest datagram that passed every check of a confirmed peer (its token, the window; with a
    // key, authenticated by the endpoint before slidwin saw it). Acks, retransmissions, probes,
    // duplicates and data held beyond a hole count, delivered or not; a SYN, a frame of another
    // token or outside the window does not. 0: none yet. One store per such datagram.
    uint64_t last_valid_rx_ns() const { return last_valid_rx_ns_; }
    // One unit of the handshake budget (SYN answers, key set-ups for unknown tokens); false
    // when spent (the caller drops what needed it: drop_handshake_rate).
    bool handshake_budget(uint64_t now_ns);
    // Counters of the endpoint (datagrams no sub-connection took) are added here by it.
    SlidwinCounters& counters_mut() { return ctr_; }
    std::string to_string() const;

    // The protocol entry points are free functions (below) so they read as the layer names.
    friend SlidwinSendResult slidwin_send(SubConnection& sc, PktBuf* msg, uint64_t now_ns);
    friend void slidwin_receive(SubConnection& sc, PktBuf* dgram, uint64_t now_ns);
    friend void slidwin_flush(SubConnection& sc, uint64_t now_ns);
    friend uint32_t slidwin_deliver_pending(SubConnection& sc, uint64_t now_ns);
    friend void slidwin_start(SubConnection& sc, uint64_t now_ns);
    friend bool slidwin_keepalive(SubConnection& sc, uint64_t now_ns);

   private:
    struct SendSlot {
        PktBuf* p = nullptr;     // the datagram, data() at its slidwin header when stored
        uint32_t hdr_off = 0;    // data_off of the slidwin header (restored before a resend)
        uint64_t sent_ns = 0;    // last transmission
        uint16_t tx_count = 0;   // transmissions so far
        bool sacked = false;
    };
    struct RecvSlot {
        PktBuf* p = nullptr;     // message, data() at its payload
    };

    static void on_rto(Timer& t, uint64_t now_ns);
    static void on_delack(Timer& t, uint64_t now_ns);
    static void on_persist(Timer& t, uint64_t now_ns);
    static void on_syn(Timer& t, uint64_t now_ns);

    // seq (DATA) and ack (ACK) of a received datagram lie within the window.
    bool in_window(uint8_t flags, uint32_t seq, uint32_t ack) const;
    // The handshake and restarts: a few datagrams a sub-connection's life, out of the data path.
    [[gnu::noinline, gnu::cold]] void on_syn_rx(uint64_t token, uint32_t seq, const SlidwinAck& a, uint64_t nonce,
                                                uint64_t echo, uint64_t now_ns);
    [[gnu::noinline, gnu::cold]] void on_new_token_syn(uint64_t token, uint32_t seq, const SlidwinAck& a,
                                                       uint64_t nonce, uint64_t echo, uint64_t now_ns);
    // A SYN (plain: with_ack false) or SYN|ACK of ours; a challenge puts its number in nonce.
    [[gnu::noinline, gnu::cold]] void send_syn(uint64_t now_ns, bool with_ack, uint32_t ack, uint64_t nonce,
                                               uint64_t echo, uint64_t to_token);
    [[gnu::noinline, gnu::cold]] void become_synced(const SlidwinAck& a, uint64_t now_ns);
    [[gnu::noinline, gnu::cold]] void peer_restarted(uint64_t token);
    void write_words(uint8_t* raw, uint8_t flags, uint32_t seq, uint32_t ack, uint32_t wnd, uint64_t sack,
                     uint64_t now_ns) const;

    void transmit(uint32_t seq, uint64_t now_ns, bool retx);
    void push_new(uint64_t now_ns);
    void send_ack(uint64_t now_ns, uint8_t extra_flags);
    // Write the whole header of an outgoing datagram, with the ack state this side owes.
    void write_hdr(uint8_t* raw, uint8_t flags, uint32_t seq, uint64_t now_ns);
    // An ack that acknowledges nothing new (the usual one, on every data datagram of a one-way
    // stream) takes ack_edges alone; the rest process_ack_news.
    void process_ack(const SlidwinAck& h, uint64_t now_ns);
    [[gnu::noinline]] void process_ack_news(const SlidwinAck& h, uint64_t now_ns);
    // The peer's right edge, the timers, what the window lets go: after every ack.
    void ack_edges(const SlidwinAck& h, bool advanced, uint64_t now_ns);
    void rtt_sample(uint64_t rtt_ns);
    void arm_rto(uint64_t now_ns);
    void ack_due(uint64_t now_ns);
    uint32_t deliver_in_order();

    SlidwinConfig cfg_;
    PktPool& pool_;
    TimerWheel& wheel_;
    SlidwinLink& link_;
    uint16_t local_id_, remote_id_;
    SlidwinCounters ctr_;

    // sender: [snd_una_, snd_sent_) in flight, [snd_sent_, snd_nxt_) waiting for window
    std::unique_ptr<SendSlot[]> snd_;
    uint32_t snd_mask_;
    uint32_t snd_una_ = 0, snd_sent_ = 0, snd_nxt_ = 0;
    uint32_t peer_right_;        // peer's ack + wnd
    uint32_t highest_sacked_ = 0;  // 1 + highest seq sacked, or snd_una_
    uint64_t srtt_ns_ = 0, rttvar_ns_ = 0, rto_ns_;
    uint32_t backoff_ = 0;
    Timer rto_timer_, delack_timer_, persist_timer_;

    // receiver: [rcv_user_, rcv_nxt_) in order, not yet taken by the user; beyond: out of order
    std::unique_ptr<RecvSlot[]> rcv_;
    uint32_t rcv_mask_;
    uint32_t rcv_user_ = 0, rcv_nxt_ = 0;
    uint32_t ooo_held_ = 0;          // datagrams held beyond a gap
    uint32_t unacked_in_order_ = 0;  // datagrams received since our last ack went out
    bool ack_now_ = false;           // an ack must go at the end of this burst
    uint32_t last_adv_right_ = 0;    // rcv_nxt + wnd as last advertised
    uint32_t last_ack_sent_ = 0;     // the ack field of our latest datagram (RFC 7323's Last.ACK.sent)
    // The tsval to echo (RFC 7323 §4.3): taken only from a datagram at or below Last.ACK.sent
    // (not one beyond a hole, nor an in-order one while an earlier one waits for its ack), and
    // never older than the one held (PAWS), so a duplicate or replay with an old timestamp cannot
    // change the round trip the peer measures.
    uint32_t ts_recent_ = 0;
    bool ts_recent_valid_ = false;
    uint64_t last_valid_rx_ns_ = 0;  // last_valid_rx_ns()

    // handshake and tokens
    enum class PeerState : uint8_t { kNone, kTentative, kConfirmed };
    uint64_t local_token_, peer_token_ = 0;
    uint32_t iss_, peer_iss_ = 0;
    uint64_t nonce_, peer_nonce_ = 0;
    PeerState peer_state_ = PeerState::kNone;
    bool echo_sent_ = false;    // a SYN|ACK echoing peer_nonce_ went out ...
    uint64_t last_answer_ns_ = 0;  // ... last in answer to a SYN at this time
    bool synced_ = false;       // the confirmed peer acked us without a SYN: it confirmed us
    bool restarted_ = false;    // the peer came back with a new token: take nothing more
    uint64_t syn_interval_ns_;
    Timer syn_timer_;
    // A new token seen in a SYN on a confirmed sub-connection, challenged with a 64-bit number
    // that its SYN|ACK must echo (once: a wrong answer clears it).
    uint64_t pending_token_ = 0, pending_nonce_ = 0, challenge_ = 0;
    uint32_t pending_iss_ = 0;
    uint64_t last_challenge_ns_ = 0;
    bool challenged_ = false;   // a challenge has gone out (last_challenge_ns_ is valid)
    // the handshake budget (token bucket)
    uint32_t budget_;
    uint64_t budget_ns_ = 0;
    uint32_t hdr_len_;
};

// Queue one message (data() at its first payload byte, kSlidwinHdrLen of headroom at least) and
// transmit it if the peer's window allows. kOk: slidwin owns msg. kWouldBlock: send buffer full,
// the caller keeps msg and retries after acks. kTooBig: longer than a datagram can carry.
SlidwinSendResult slidwin_send(SubConnection& sc, PktBuf* msg, uint64_t now_ns);
// One received datagram (data() at the slidwin header) for this sub-connection. Consumes it.
void slidwin_receive(SubConnection& sc, PktBuf* dgram, uint64_t now_ns);
// End of an input burst: send the ack that out-of-order data or an ack request asked for.
void slidwin_flush(SubConnection& sc, uint64_t now_ns);
// Offer held in-order messages to the user again (after it made room); returns how many it took.
// Sends the window update the room calls for.
uint32_t slidwin_deliver_pending(SubConnection& sc, uint64_t now_ns);

// A keepalive frame: a pure ack, now, on an established sub-connection (false, and nothing
// sent, before that). For a peer that would otherwise hear nothing of this end: our data and our
// status messages wait behind its closed window or a hole, and a retransmission's back-off may
// be longer than its peer time-out. The peer takes it as any ack (nothing new: no change).
bool slidwin_keepalive(SubConnection& sc, uint64_t now_ns);

// Largest message slidwin carries: a UDP payload minus the slidwin header and the auth block
// (whether authentication is on or not, so the limit is one number).
inline constexpr uint32_t kSlidwinMaxMsg = 65507 - kSlidwinHdrLen - kSlidwinAuthLen;

// Start the handshake of a sub-connection just opened (sends the first SYN and arms its timer).
void slidwin_start(SubConnection& sc, uint64_t now_ns);

}  // namespace iccs
