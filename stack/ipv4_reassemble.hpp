// ipv4_reassemble.hpp: IPv4 reassembly (RFC 791 §3.2, RFC 815) with hard bounds.
//
// Fragments are kept as received (no copy), sorted by offset, one slot per (src, dst, proto, id).
// Bounds make a flood harmless: at most max_datagrams partial datagrams and max_bytes of buffered
// fragment storage (counted by segment size, what they really pin). With configured peers (the
// caller says which of them a fragment's source is) the caps are quotas (issue 37): a small
// shared one (an eighth of the datagrams, a sixteenth of the bytes) for every source that is not a
// peer, the rest split evenly among the peers. Over its quota a source class loses its own oldest
// partial datagram (drop_reass_cap), never another class's: spoofed first fragments from strangers
// evict each other, not a peer's half-received datagram. So memory stays bounded and new
// datagrams still complete under loss. A slot that does not complete within timeout is dropped.
// Overlapping fragments (RFC 5722's rule, applied to IPv4 as Linux does) drop the whole datagram;
// an exact duplicate is ignored and counted.
#pragma once

#include <cstdint>
#include <vector>

#include "counters.hpp"
#include "ipv4_hdr.hpp"
#include "pktbuf.hpp"

namespace iccs {

struct ReassemblyConfig {
    uint32_t max_datagrams = 64;          // concurrent partial datagrams
    uint32_t max_bytes = 4u << 20;        // fragment storage held [bytes]
    uint64_t timeout_ns = 1'000'000'000;  // a partial datagram lives this long [ns]
};

class Ipv4Reassembler {
   public:
    explicit Ipv4Reassembler(const ReassemblyConfig& cfg);
    ~Ipv4Reassembler();
    Ipv4Reassembler(const Ipv4Reassembler&) = delete;
    Ipv4Reassembler& operator=(const Ipv4Reassembler&) = delete;

    // Takes one validated fragment (data() at its IPv4 header; header checksum and total length
    // already checked; packet trimmed to total length). Returns the whole datagram when this
    // fragment completes it: one packet whose data() is an IPv4 header with total_len covering
    // the chained payload, MF and offset cleared, checksum recomputed. Otherwise nullptr: the
    // fragment is held or was dropped (counted in ctr). Ownership of `frag` passes in always.
    // source: which of `peers` configured peers sent it (0..peers-1), or anything else for a
    // stranger; peers 0: no quotas, one class with the whole caps.
    [[gnu::noinline]] PktBuf* ipv4_reassemble(PktBuf* frag, uint64_t now_ns, StackCounters& ctr,
                                              uint32_t source = UINT32_MAX, uint32_t peers = 0);

    // Drop partial datagrams older than the timeout. Call from the owner's timer path.
    void expire(uint64_t now_ns, StackCounters& ctr);

    uint32_t datagrams_held() const;
    uint64_t bytes_held() const { return bytes_held_; }

    // The quota of a source class (peers: as above; class peers is the strangers' shared one).
    struct Quota {
        uint32_t datagrams;
        uint64_t bytes;
    };
    Quota quota(uint32_t cls, uint32_t peers) const;

   private:
    struct Slot;
    void drop_slot(Slot& s);
    ReassemblyConfig cfg_;
    std::vector<Slot*> slots_;
    uint64_t bytes_held_ = 0;
};

}  // namespace iccs
