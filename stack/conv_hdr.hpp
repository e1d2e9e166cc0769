// conv_hdr.hpp: the convergence header that follows the slidwin header (DESIGN.md §3).
//
// It names the two application endpoints (cluster, port) of a parallel connection, the
// connection instance (conn_id, chosen by the client at connect, so pieces of an old connection on
// the same ports are never taken for a new one), the message's place in that connection
// (conn_seq, for reordering across sub-connections), and its place in a striped message (msg_id,
// piece index and count, whole length). It lives with the other wire formats because the proxy
// reads it too: dst_port picks the compute thread's ring, and a CONNECT for a port nobody bound is
// refused by the proxy. enq_ns is the sender's clock when the message entered the ICCS, so the
// receiving proxy can measure the message time (enqueue to delivery, DESIGN.md §6); it means
// something between clusters that share a clock (one host) or synchronized clocks.
//
//  0               2               4               6               8
//  | src_cluster   | dst_cluster   | src_port      | dst_port      |
//  | type  | flags | reserved (0)  | conn_id                       |
//  | conn_seq                      | msg_id                        |
//  | piece_idx     | piece_cnt     | msg_len                       |
//  | enq_ns                                                        |   40 bytes
#pragma once

#include <cstdint>
#include <string>

#include "be.hpp"

namespace iccs {

// What a convergence message is. Data and the connection's control travel between the
// convergence modules of two compute threads; kProxyStatus travels between two proxies.
enum class ConvType : uint8_t {
    kData = 1,         // a message, or one piece of a striped message
    kConnect = 2,      // client -> server port: open conn_id (payload: ConvConnectBody)
    kAccept = 3,       // server -> client: conn_id is open (payload: ConvConnectBody)
    kRefuse = 4,       // -> client: no listener (sent by the server's proxy) or backlog full (payload: be32 reason)
    kClose = 5,        // either side: I send and take no more; msg_len = messages I sent; payload ConvCreditBody
    kCredit = 6,       // receiver -> sender: payload be64 bytes consumed, be32 messages consumed
    kProxyStatus = 7,  // proxy -> proxy: keepalive and cluster state (flags kStatusDone, kStatusIdle)
    kBundle = 8,       // proxy -> proxy: combined messages (issue 21): records of be16 length + one
                       // whole convergence message each; msg_len = the record count, conn_seq = 0
                       // (the receiving proxy keeps its unpacking progress there)
};
inline constexpr uint8_t kConvTypeMax = 8;
// A bundle's record: this length prefix, then the message (ConvHdr + payload).
inline constexpr uint32_t kBundleRecLen = 2;

// flags
inline constexpr uint8_t kConvOrdered = 0x01;   // kConnect/kAccept/kData: the connection is ordered
inline constexpr uint8_t kCreditWanted = 0x02;  // kCredit: the sender of it waits for window: answer now
inline constexpr uint8_t kStatusDone = 0x01;    // kProxyStatus: the sender's cluster finished its work
// kProxyStatus: the sender's cluster finished, heard every other cluster finish, and has
// everything it sent acked: it needs nothing more from anyone (the end of a run, cluster.cpp).
inline constexpr uint8_t kStatusIdle = 0x02;

// kRefuse reasons
inline constexpr uint32_t kRefuseNoListener = 1;
inline constexpr uint32_t kRefuseBacklogFull = 2;

struct ConvHdr {
    be16 src_cluster;
    be16 dst_cluster;
    be16 src_port;
    be16 dst_port;
    uint8_t type;     // ConvType
    uint8_t flags;
    be16 reserved;    // 0
    be32 conn_id;     // the connection instance (client's choice at connect)
    be32 conn_seq;    // position of the message in the parallel connection (ordered delivery)
    be32 msg_id;      // sender module's message number (unique per sending thread; traces a message)
    be16 piece_idx;   // 0 .. piece_cnt-1
    be16 piece_cnt;   // 1 for an unstriped message
    be32 msg_len;     // bytes of the whole message (all pieces)
    be64 enq_ns;      // sender's CLOCK_MONOTONIC when the message was handed to a proxy [ns]
};
static_assert(sizeof(ConvHdr) == 40);
inline constexpr uint32_t kConvHdrLen = sizeof(ConvHdr);

// Payload of kConnect and kAccept: what the sender of it will hold for the connection.
struct ConvConnectBody {
    be32 window_bytes;   // bytes the receiver holds unconsumed at most
    be32 window_msgs;    // messages the receiver holds unconsumed at most
};
static_assert(sizeof(ConvConnectBody) == 8);

// Payload of kCredit: totals since the connection opened (monotonic, so the newest wins).
struct ConvCreditBody {
    be64 bytes_consumed;
    be32 msgs_consumed;
};
static_assert(sizeof(ConvCreditBody) == 12);

std::string to_string(const ConvHdr& h);
const char* to_string(ConvType t);

}  // namespace iccs
