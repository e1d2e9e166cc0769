// conv_hdr.hpp: the convergence header that follows the slidwin header (DESIGN.md §3).
//
// It names the two application endpoints (cluster, port) of a parallel connection, the message's
// place in that connection (conn_seq, for reordering across sub-connections), and its place in a
// striped message (msg_id, piece index and count, whole length). It lives with the other wire
// formats because the proxy reads dst_port to pick the compute thread's ring. enq_ns is the
// sender's clock when the message entered the ICCS, so the receiving proxy can measure the
// message time (enqueue to delivery, DESIGN.md §6); it means something between clusters that
// share a clock (one host) or synchronized clocks.
#pragma once

#include <cstdint>
#include <string>

#include "be.hpp"

namespace iccs {

struct ConvHdr {
    be16 src_cluster;
    be16 dst_cluster;
    be16 src_port;
    be16 dst_port;
    be32 conn_seq;    // position in the parallel connection (ordered delivery)
    be32 msg_id;      // the message this piece belongs to
    be16 piece_idx;   // 0 .. piece_cnt-1
    be16 piece_cnt;   // 1 for an unstriped message
    be32 msg_len;     // bytes of the whole message (all pieces)
    be64 enq_ns;      // sender's CLOCK_MONOTONIC when the message was handed to a proxy [ns]
};
static_assert(sizeof(ConvHdr) == 32);
inline constexpr uint32_t kConvHdrLen = sizeof(ConvHdr);

std::string to_string(const ConvHdr& h);

}  // namespace iccs
