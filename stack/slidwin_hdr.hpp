// slidwin_hdr.hpp: the sliding-window header that follows UDP on every sub-connection datagram.
//
// One datagram carries at most one data unit (seq) and always an acknowledgement (ack, sack,
// wnd), so acks ride on data for free (piggy-backing). Pure acks have no DATA flag and no payload.
// Timestamps (tsval/tsecr) time the round trip of every ack, retransmissions included: a sample
// taken from send times alone is wrong whenever a datagram is acked late (a hole before it, or
// beyond the reach of the sack bitmap), which inflates the RTO.
//
// Who may speak on a sub-connection (issue 17): every header carries the sender's run token, a
// 64-bit random number its cluster drew at start-up, and sequence numbers start at a random
// initial value per direction. The two ends learn each other's token and initial sequence number
// in a handshake (SYN, slidwin.hpp); a datagram whose token is not the peer's, or whose seq or ack
// lies outside the window, is dropped before it touches any state. A frame from another run, or
// forged by someone who cannot see the traffic, has the wrong token. Tokens are per
// sub-connection (issue 37: derived from the cluster's run token and the ids), and a SYN carries
// a handshake block (SlidwinSynBlk: a fresh nonce of its sender and the echo of the peer's), so
// a SYN replayed from an earlier run can never echo this run's nonce.
#pragma once

#include <cstdint>
#include <string>

#include "be.hpp"

namespace iccs {

// 3: SYNs carry the handshake block (2 had none; 1 had 32-byte headers without a token)
inline constexpr uint8_t kSlidwinVersion = 3;

enum SlidwinFlag : uint8_t {
    kSwData = 0x01,    // seq is valid and a payload follows
    kSwAck = 0x02,     // ack/sack/wnd are valid (required on every datagram but a plain SYN)
    kSwAckReq = 0x04,  // please answer with an ack now (window probe)
    kSwRetx = 0x08,    // this data datagram is a retransmission (for captures and counters)
    kSwTsEcr = 0x10,   // tsecr echoes a tsval of the peer (RTT measurement, as RFC 7323)
    kSwSyn = 0x20,     // handshake: seq is the sender's initial sequence number, token its
                       // sub-connection token, a SlidwinSynBlk follows; with kSwAck, ack is the
                       // receiver's initial sequence number and the block's echo its nonce
    kSwAuth = 0x40,    // an auth block (counter, GCM tag: slidwin_auth.hpp) follows the header
    kSwEnc = 0x80,     // with kSwAuth: the payload is encrypted (for captures; authenticated too)
};

struct SlidwinHdr {
    uint8_t version;   // kSlidwinVersion
    uint8_t flags;     // SlidwinFlag bits
    be16 subconn;      // sub-connection id chosen by the receiver of this datagram's peer pairing
    be32 seq;          // data sequence number (DATA only), one per datagram
    be32 ack;          // cumulative: every seq < ack has been received
    be16 wnd;          // receive window in datagrams beyond ack that the sender of this may send
    be16 reserved;     // zero
    be64 sack;         // bit i set: seq ack + 1 + i has been received (selective ack)
    be32 tsval;        // sender's clock when this datagram left [us, wraps]
    be32 tsecr;        // the tsval of the peer's latest data datagram (valid with kSwTsEcr)
    be64 token;        // the sender's sub-connection token (from its cluster's run token)
};
static_assert(sizeof(SlidwinHdr) == 40);
inline constexpr uint32_t kSlidwinHdrLen = sizeof(SlidwinHdr);

// The payload of every SYN (after the header, and the auth block when there is one).
struct SlidwinSynBlk {
    be64 nonce;  // the sender's fresh random number (a restart challenge: the challenge)
    be64 echo;   // with kSwAck: the nonce of the receiver's SYN being answered; else 0
};
static_assert(sizeof(SlidwinSynBlk) == 16);
inline constexpr uint32_t kSlidwinSynBlkLen = sizeof(SlidwinSynBlk);

std::string to_string(const SlidwinHdr& h);
std::string to_string(const SlidwinSynBlk& b);

}  // namespace iccs
