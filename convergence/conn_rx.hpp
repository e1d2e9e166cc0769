// conn_rx.hpp: the receive side of one parallel connection: pieces arrive over several
// sub-connections in any order and leave as whole messages, in connection order (ordered) or as
// soon as complete (unordered). No DPDK here: it works on PktBufs and is unit-tested alone.
//
// One idea: the sender never has a message outstanding whose conn_seq is `window_msgs` or more
// beyond the lowest one the application has not taken (credit()), so a slot array of that size
// indexed by conn_seq holds every message in flight, without a map or an allocation per message.
// A message of one piece stays in its PktBuf (zero copy up to the application); a striped one is
// assembled into one heap buffer as its pieces arrive, so the proxies' receive buffers go back at
// once (this copy is the receiver's one read of the payload).
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "conv_hdr.hpp"
#include "pktbuf.hpp"

namespace iccs {

// A whole message handed to the application: either a packet (one piece) or a heap buffer
// (striped). Move-only; frees what it holds.
class RecvMsg {
   public:
    RecvMsg() = default;
    RecvMsg(RecvMsg&& o) noexcept { *this = std::move(o); }
    RecvMsg& operator=(RecvMsg&& o) noexcept;
    ~RecvMsg() { reset(); }
    void reset();

    uint32_t size() const { return len_; }
    // Copy up to cap bytes to dst; returns bytes copied.
    uint32_t copy_to(void* dst, uint32_t cap) const;
    // The bytes, when they sit in one piece of memory (one segment, or a striped message's
    // buffer); nullptr when the packet is a chain of segments (use copy_to).
    const uint8_t* contiguous() const;
    // The bytes as the pieces of memory they sit in (a packet's segments, or the one buffer),
    // into out: how many there are, 0 when more than max or none (use copy_to). For a reader that copies
    // them straight to where they go (mpi/provider/'s in-rank bridge: a record into the user's
    // buffer) without first making them contiguous.
    uint32_t segments(iovec* out, uint32_t max) const;
    uint32_t conn_seq() const { return seq_; }

    // for ConnRx
    void set_packet(PktBuf* p, uint32_t len, uint32_t seq, uint32_t* budget);
    void set_heap(std::unique_ptr<uint8_t[]> b, uint32_t len, uint32_t seq);

   private:
    PktBuf* pkt_ = nullptr;  // data() at the first payload byte
    uint32_t* budget_ = nullptr;  // given back when pkt_ is freed
    std::unique_ptr<uint8_t[]> heap_;
    uint32_t len_ = 0, seq_ = 0;
};

struct ConnRxCounters {
    uint64_t pieces = 0;          // data pieces taken
    uint64_t dup_pieces = 0;      // pieces already held or delivered (dropped)
    uint64_t bad_pieces = 0;      // out of window, or inconsistent with their message (dropped)
    uint64_t reordered = 0;       // messages completed before an earlier one (ordered: held back)
    uint64_t alloc_failures = 0;  // messages dropped for want of memory
    uint64_t copied = 0;          // one-piece messages copied because the packet budget was spent
};

enum class PieceResult { kTaken, kDuplicate, kBad };

class ConnRx {
   public:
    // window_msgs, window_bytes: what this receiver promised to hold at most (window_msgs is
    // rounded up to a power of two inside). A piece that would take it beyond either (a sender
    // that ignored its credit, or a forged piece) is dropped as bad: memory stays bounded.
    // packet_budget: packets (proxy receive buffers) the receivers of one thread may keep for
    // zero-copy hand-out, shared by its connections; beyond it a one-piece message is copied
    // to the heap and its packet freed, so messages the application has not taken never starve
    // a proxy's port of receive buffers. nullptr: no limit.
    ConnRx(bool ordered, uint32_t window_msgs, uint32_t window_bytes = 64u << 20, uint32_t* packet_budget = nullptr);
    ~ConnRx();
    ConnRx(const ConnRx&) = delete;
    ConnRx& operator=(const ConnRx&) = delete;

    // A kData piece: p->data() at the convergence header h (already loaded). Consumes p.
    PieceResult on_piece(PktBuf* p, const ConvHdr& h);
    // A message can be taken.
    bool readable() const;
    // Take the next message (ordered: the next conn_seq; unordered: the first completed).
    bool pop(RecvMsg& out);

    // Credit to report to the sender: messages below this conn_seq are all taken; bytes taken.
    uint32_t credit_msgs() const { return base_; }
    uint64_t bytes_taken() const { return bytes_taken_; }
    uint64_t msgs_taken() const { return msgs_taken_; }
    // Messages and bytes held (partial or complete, not taken).
    uint32_t held_msgs() const { return held_msgs_; }
    uint64_t held_bytes() const { return held_bytes_; }
    const ConnRxCounters& counters() const { return ctr_; }

   private:
    enum class SlotState : uint8_t { kEmpty, kPartial, kComplete, kTaken };
    struct Slot {
        SlotState state = SlotState::kEmpty;
        uint32_t seq = 0;
        uint32_t len = 0;
        uint16_t piece_cnt = 0, pieces_got = 0;
        PktBuf* pkt = nullptr;                  // one-piece message
        std::unique_ptr<uint8_t[]> buf;         // striped message
        std::unique_ptr<uint64_t[]> got;        // striped: bitmap of pieces received
    };
    Slot& slot(uint32_t seq) { return slots_[seq & mask_]; }
    void complete(Slot& s);
    void advance_base();

    bool ordered_;
    uint32_t mask_;
    uint32_t window_bytes_;
    uint32_t* packet_budget_;  // shared by the connections of one thread (see the constructor)
    std::vector<Slot> slots_;
    uint32_t base_ = 0;            // lowest conn_seq not yet taken
    std::deque<uint32_t> ready_;   // unordered: completed, not taken, in completion order
    uint32_t held_msgs_ = 0;
    uint64_t held_bytes_ = 0, bytes_taken_ = 0, msgs_taken_ = 0;
    ConnRxCounters ctr_;
};

// How a message of len bytes is cut into pieces of at most piece_max bytes: balanced pieces, so
// both ends derive each piece's offset from (len, count) alone.
inline uint32_t piece_count(uint32_t len, uint32_t piece_max) {
    return len <= piece_max ? 1 : (len + piece_max - 1) / piece_max;
}
inline uint32_t piece_size(uint32_t len, uint32_t count) { return count <= 1 ? len : (len + count - 1) / count; }

}  // namespace iccs
