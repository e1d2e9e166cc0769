// mpi_wire.hpp: the header of one MPI message record (mpi/provider/README.md, "Records").
//
// A record is what the provider writes into a shared-memory ring (mpi/provider/shm_ring.hpp): this
// header, then up to one chunk of the message's bytes. The same bytes cross the fabric unchanged
// when the record goes to a rank of another cluster (the agent hands the whole record to a
// parallel connection as one message), so the header is big-endian as everything on the wire
// (DESIGN.md §3). A message longer than a chunk is a run of records of one source, contiguous in
// that source's ring and in order (offset 0 first): the receiver matches on the first record
// and appends the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "be.hpp"
#include "conv_hdr.hpp"
#include "slidwin.hpp"

namespace iccs::mpi {

inline constexpr uint8_t kMpiWireVersion = 1;

enum class RecType : uint8_t {
    kData = 1,      // a chunk of a message (tagged or not)
    kRankDown = 2,  // agent to agent (no payload): rank src_rank died; its peers fail what involves it
};

// flags
inline constexpr uint16_t kRecTagged = 1;   // fi_tsend* (else fi_send*: matched against untagged receives)
inline constexpr uint16_t kRecHasData = 2;  // cq_data is the sender's remote CQ data (FI_REMOTE_CQ_DATA)

struct __attribute__((packed)) MpiRecHdr {
    uint8_t version;   // kMpiWireVersion
    uint8_t type;      // RecType
    be16 flags;        // kRec*
    be32 src_rank;     // global rank of the sender (MPI_COMM_WORLD numbering of the machine)
    be32 dst_rank;     // global rank of the receiver
    be32 chunk_len;    // payload bytes after this header
    be64 tag;          // the tag as sent (tagged messages)
    be64 cq_data;      // remote CQ data (kRecHasData)
    be64 total_len;    // the whole message's length
    be64 offset;       // where this chunk's payload starts in the message
    be64 send_ns;      // CLOCK_MONOTONIC at the send (transport delay holds until send_ns + D)
};
static_assert(sizeof(MpiRecHdr) == 56, "the record header is 56 bytes on the wire");
inline constexpr uint32_t kMpiRecHdrLen = sizeof(MpiRecHdr);

// The largest record that crosses the fabric as one datagram: one piece of a parallel connection
// (convergence header), no more than slidwin carries (its limit leaves room for the auth block,
// so it holds with and without [security]). The agent's stripe threshold (agent.cpp) lets such a
// record go whole, and a rank's records to the agent are at most this long (rank_engine.hpp,
// remote_chunk): the receiving bridge then copies each record once, from the proxy's receive
// buffers into its rank's ring, instead of assembling the pieces into a heap buffer first.
inline constexpr uint32_t kMpiDatagramRecordMax = kSlidwinMaxMsg - kConvHdrLen;
inline constexpr uint32_t kMpiRemoteChunkMax = kMpiDatagramRecordMax - kMpiRecHdrLen;

// One line for logs and tests: "data tagged src 3 dst 5 tag 0x... len 100 off 0 chunk 100".
std::string to_string(const MpiRecHdr& h);

}  // namespace iccs::mpi
