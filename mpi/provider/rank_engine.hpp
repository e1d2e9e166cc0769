// rank_engine.hpp: one rank's messaging over its domain's shared region (mpi/provider/README.md,
// "The rank's engine"): tag matching, chunking, progress. The libfabric objects (prov_*.cpp) are thin
// over it; it knows libfabric only by its constants, so it is unit-tested without the library.
//
// The one idea: every message is a run of records (mpi_wire.hpp) in one outbound ring, and every
// incoming record is matched or stored in one pass over the inbound rings. Sends go out in the
// order they were posted per ring (MPI's non-overtaking between a pair of ranks, FI_ORDER_SAS):
// to a rank of this domain through the pair ring, to a rank of another cluster through the
// rank's ring to the agent (bridged). A send completes when its last chunk is in the ring (the
// buffer may be reused); a message that does not fit waits in the ring's queue, chunk by chunk,
// and manual progress (every CQ read) moves it on. A receive matches the first message in arrival
// order from the unexpected queue, else waits in posting order; a message that finds no receive is
// kept (its bytes copied) until one comes. Completions go to the CQs the endpoint is bound to; a
// CQ without room stops progress (nothing is lost: records wait in the rings, sends in their
// queue) and makes a post that would complete at once return -FI_EAGAIN.
//
// Threading: single-threaded (`_st`): the domain's lock serializes callers under FI_THREAD_SAFE.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <deque>
#include <list>
#include <string>
#include <vector>

#include "mpi_wire.hpp"
#include "shm_region.hpp"

namespace iccs::mpi {

inline constexpr uint32_t kAnyRank = UINT32_MAX;
inline constexpr uint32_t kMaxIov = 4;

// Our error codes in a completion's prov_errno (fi_cq_strerror says them in words).
enum ProvErrno : int {
    kErrNone = 0,
    kErrPeerDead = 1,   // the peer rank died (its process ended without closing)
    kErrAgentGone = 2,  // this rank's agent is gone: ranks of other clusters are unreachable
    kErrNoMatch = 3,    // FI_PEEK found nothing (FI_ENOMSG)
    kErrCanceled = 4,
    kErrTruncated = 5,
};
const char* prov_errno_text(int prov_errno);
// fi_cq_strerror's and fi_eq_strerror's answer: the text, copied into buf when the caller gave one.
const char* prov_errno_text(int prov_errno, char* buf, size_t len);

// One entry of a CQ, before the CQ writes it in the format it was opened with.
struct Completion {
    void* context = nullptr;
    uint64_t flags = 0;     // FI_SEND / FI_RECV, FI_TAGGED / FI_MSG, FI_REMOTE_CQ_DATA
    uint64_t len = 0;       // receives: bytes placed in the buffer
    void* buf = nullptr;    // receives: where they start
    uint64_t data = 0;      // remote CQ data
    uint64_t tag = 0;
    uint32_t src_rank = kAnyRank;  // receives: the sender (fi_cq_readfrom)
    int err = 0;            // 0: success; else a positive FI_E* (an error entry)
    uint64_t olen = 0;      // FI_ETRUNC: the bytes that did not fit
    int prov_errno = kErrNone;
    uint32_t peer = kAnyRank;  // errors about a peer: which rank
};

// Where completions go (a CQ).
class CompletionSink {
   public:
    virtual ~CompletionSink() = default;
    virtual bool has_room() const = 0;              // a success entry fits now
    virtual void push(const Completion& c) = 0;     // error entries are taken even when full
};

// What an operation carries (from the fi_* call).
struct SendArgs {
    uint32_t dst = 0;
    const iovec* iov = nullptr;
    uint32_t iov_count = 0;
    uint64_t tag = 0, data = 0;
    bool tagged = true, has_data = false;
    bool completion = true;  // a completion entry when done
    bool inject = false;     // the buffer is free at return: copied when it cannot go at once (fi_inject*, FI_INJECT); at most inject_size
    void* context = nullptr;
};
struct RecvArgs {
    uint32_t src = kAnyRank;  // kAnyRank: any source (or directed receive off)
    const iovec* iov = nullptr;
    uint32_t iov_count = 0;
    uint64_t tag = 0, ignore = 0;
    bool tagged = true;
    bool completion = true;
    bool peek = false, claim = false, discard = false;  // FI_PEEK, FI_CLAIM, FI_DISCARD (tagged only)
    void* context = nullptr;
};

struct EngineConfig {
    uint32_t my_rank = 0;
    uint32_t world = 0;
    uint32_t cluster_size = 1;
    bool bridged = false;        // ranks of other clusters through the agent
    uint64_t delay_ns = 0;       // transport delay: hold records from other clusters this long
    uint64_t inject_size = 8192;
    uint64_t max_msg_size = 1ull << 30;
    uint64_t tx_size = 65536, rx_size = 65536;   // outstanding sends / posted receives before -FI_EAGAIN
    uint64_t inject_queue_bytes = 8u << 20;      // injected bytes that may wait in queues
    uint64_t local_chunk = 256u << 10;           // largest payload of a record in a pair ring
    uint64_t remote_chunk = kMpiRemoteChunkMax;  // ... in the ring to the agent (one datagram on the fabric)
};

// In a rank whose thread runs its cluster's bridge (InRankLink, prov.hpp): a record for another
// cluster handed to that bridge at once, no ring between (mpi/provider/README.md, "Why an agent
// process"). send gives the bridge the record to rank dst as `pieces` pieces of memory (its
// header, then the part of the user's buffer it carries), len bytes in all; the bridge copies
// them straight into the packet buffers the record leaves in. of_several: the record is one of a
// message of several. Returns 1 when it went onto its connection, -1 when it cannot go now (the
// window is full or no packet buffer is free: the send waits in its queue and progress tries
// again), 0 when the ring must carry it (the bridge is not up, the peer is lost: the bridge's
// reading of the ring handles each as before).
struct DirectOut {
    void* ctx = nullptr;
    int (*send)(void* ctx, uint32_t dst, const iovec* rec, uint32_t pieces, uint32_t len, bool of_several) = nullptr;
};

class RankEngine {
   public:
    // The engine of cfg.my_rank over a region the caller mapped (and keeps mapped).
    RankEngine(const Region& region, const EngineConfig& cfg);
    RankEngine(const RankEngine&) = delete;
    RankEngine& operator=(const RankEngine&) = delete;

    void bind_tx(CompletionSink* s) { tx_sink_ = s; }
    // In-rank (DirectOut): records to other clusters skip the ring to the agent while nothing of
    // this rank waits in it (those of one message keep its order: the queue sends them in turn).
    void set_direct_out(const DirectOut& d) { direct_out_ = d; }
    // In-rank: a record from another cluster, straight from the bridge, as the pieces of memory it
    // arrived in (len bytes; the caller's thread runs this engine, and the ring from the agent is
    // empty: order holds). True when taken (matched, kept unexpected, or dropped as take_in
    // drops), false when the ring must carry it (a full CQ, or a record that transport delay holds).
    bool take_direct(const iovec* rec, uint32_t pieces, uint32_t len);
    void bind_rx(CompletionSink* s) { rx_sink_ = s; }

    // 0, or a negative FI_E*: -FI_EAGAIN (queues or CQ full: progress and retry), -FI_EMSGSIZE,
    // -FI_EINVAL, -FI_EIO (the peer is dead).
    long send(const SendArgs& a);
    long recv(const RecvArgs& a);
    // A posted receive with this context, not yet matched, is removed with an FI_ECANCELED entry.
    // -FI_ENOENT when there is none.
    long cancel(void* context);
    // Move sends on, take arrivals, look at the peers' states. Returns the work done (records).
    uint32_t progress();
    // Something is in an inbound ring or a send waits (a sleeper must not sleep).
    bool busy();
    // Sends still queued (a closing endpoint lets them go out first).
    bool sends_pending() const;
    // A wait may sleep while sends are queued only if all of them wait for room in the ring to
    // the agent: its bridge rings the doorbell after it takes records, so room wakes the sleeper.
    // A peer rank reading a pair ring rings nobody. True: such a wait; the agent ring's position
    // is noted, and sleep_until_work does not sleep once the bridge has taken from it since.
    bool sends_wait_only_for_agent();
    // The endpoint closes: its posted receives are forgotten (no completions; the rest of a
    // message one of them was taking is dropped) and claims are undone. Unexpected messages stay:
    // they are the rank's, for its next endpoint.
    void forget_receives();
    // Sleep until a ring of this rank may hold a record, a peer's state changed, or timeout_us
    // passed (fi_cq_sread). Safe beside progress() on another thread.
    void sleep_until_work(uint64_t timeout_us);
    // End such a sleep (fi_cq_signal).
    void wake_self();
    // The agent hung up: every rank outside this domain is unreachable from now on.
    void agent_lost();

    // Some peer was found dead (its operations failed).
    bool peers_lost() const { return peers_lost_; }
    uint64_t tx_left() const { return cfg_.tx_size - sends_outstanding_; }
    uint64_t rx_left() const { return cfg_.rx_size - recvs_posted_; }
    const EngineConfig& config() const { return cfg_; }
    RankCounters& counters() const { return slot_->counters; }
    // For tests: messages kept unexpected, receives posted.
    size_t unexpected_count() const { return unexpected_.size(); }
    size_t posted_count() const { return posted_tagged_.size() + posted_msg_.size(); }

   private:
    struct SendOp {
        uint32_t dst = 0;
        bool tagged = true, has_data = false, completion = true, failed = false;
        uint64_t tag = 0, data = 0;
        void* context = nullptr;
        iovec iov[kMaxIov] = {};
        uint32_t iov_count = 0;
        uint64_t total = 0, sent = 0;
        bool started = false;           // its first record is in the ring
        bool waited = false;            // it found its ring full once (counted once)
        std::vector<uint8_t> copy;      // an injected message's bytes
    };
    struct OutPath {
        ShmRingProducer ring;
        std::deque<SendOp> queue;
        std::atomic<uint32_t>* wake = nullptr;  // the reader sleeps here (futex word)
        uint64_t chunk = 0;
        bool remote = false;
    };
    struct RecvOp {
        void* context = nullptr;
        uint32_t src = kAnyRank;
        uint64_t tag = 0, ignore = 0;
        bool tagged = true, completion = true;
        iovec iov[kMaxIov] = {};
        uint32_t iov_count = 0;
        uint64_t cap = 0;
        // the message it took
        uint32_t msg_src = kAnyRank;
        uint64_t msg_tag = 0, msg_data = 0, msg_len = 0, got = 0;
        bool msg_has_data = false;
    };
    struct Unexpected {
        uint32_t src = 0;
        bool tagged = true, has_data = false;
        uint64_t tag = 0, data = 0, total = 0, got = 0;
        std::vector<uint8_t> bytes;
        void* claimed_by = nullptr;  // FI_PEEK|FI_CLAIM: held for the receive with this context
        bool claimed = false;
    };
    // A message of a source whose first record arrived and whose last has not.
    struct Incoming {
        enum Kind : uint8_t { kNone, kPosted, kUnexpected, kDiscard } kind = kNone;
        std::list<RecvOp>::iterator recv;
        std::list<Unexpected>::iterator unx;
        uint64_t total = 0, got = 0;
        bool remote = false;
    };
    struct InPath {
        ShmRingConsumer ring;
        uint32_t from_rank = kAnyRank;  // a pair ring's writer (kAnyRank: the agent's ring)
        bool held = false;              // delay: its first record is not due yet
    };

    OutPath& route(uint32_t dst);
    // Every outbound path: the pair rings, then the ring to the agent (when bridged).
    const std::vector<OutPath*>& all_paths() { return paths_; }
    bool dead(uint32_t rank) const { return rank < dead_.size() && dead_[rank]; }
    // Why a receive from src (or kAnyRank) can never be matched by a new arrival: the ProvErrno
    // of src's death (any source: of the first death), kErrNone while it can.
    int lost_source(uint32_t src) const;
    // Ends a receive at once with an FI_EIO error completion (-FI_EAGAIN when the CQ is full).
    long fail_now(const RecvArgs& a, int prov_errno);
    bool rank_is_remote(uint32_t rank) const { return rank / cfg_.cluster_size != cfg_.my_rank / cfg_.cluster_size; }
    // Write what fits of the queue's front ops; true when it wrote something.
    bool push_out(OutPath& p);
    bool write_chunk(OutPath& p, SendOp& op);
    bool take_in(InPath& in, uint32_t& records);
    // One record (len bytes in `pieces` pieces of memory) from a ring or the bridge: false when it
    // is not due yet (delay).
    bool take_record(const iovec* rec, uint32_t pieces, uint32_t len);
    // The next record of op (to another cluster) through DirectOut.
    enum class Direct : uint8_t { kSent, kLater, kRing };
    Direct send_direct(SendOp& op);
    // The record header of op's next n bytes.
    MpiRecHdr record_header(const SendOp& op, uint64_t n) const;
    // The header and the payload of op's next n bytes at rec (a ring's frame).
    void write_record(const SendOp& op, uint64_t n, uint8_t* rec) const;
    // A record's payload: the bytes of `pieces` pieces of memory after the first `skip`.
    struct Payload {
        const iovec* piece;
        uint32_t pieces;
        uint64_t skip;
    };
    void on_record(const MpiRecHdr& h, const Payload& payload, bool remote);
    void place(RecvOp& r, uint64_t offset, const Payload& p, uint64_t n);
    void finish_recv(std::list<RecvOp>::iterator r);
    bool matches(const RecvOp& r, uint32_t src, bool tagged, uint64_t tag) const;
    std::list<Unexpected>::iterator find_unexpected(const RecvArgs& a);
    long recv_claimed(const RecvArgs& a);
    RecvOp make_recv(const RecvArgs& a) const;
    // Hand an unexpected message (complete or still arriving) to a receive.
    long take_unexpected(std::list<Unexpected>::iterator u, RecvOp r);
    void check_peers();
    void fail_peer(uint32_t rank, int prov_errno);
    void push_tx(const Completion& c);
    void push_rx(const Completion& c);
    bool rx_room() const { return rx_sink_ == nullptr || rx_sink_->has_room(); }
    bool tx_room() const { return tx_sink_ == nullptr || tx_sink_->has_room(); }
    static void add(std::atomic<uint64_t>& c, uint64_t n) { c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }

    const Region& region_;
    EngineConfig cfg_;
    RankSlot* slot_;
    uint32_t my_member_ = 0;
    std::vector<OutPath> out_;   // by member of this domain (its own: to itself)
    OutPath out_agent_;          // bridged: to the agent
    std::vector<OutPath*> paths_;  // all of the above
    std::vector<InPath> in_;     // pair rings from every member (itself too), then the agent's
    std::list<RecvOp> posted_tagged_, posted_msg_, active_;
    std::list<Unexpected> unexpected_;
    std::vector<Incoming> incoming_;  // by source rank
    std::vector<uint8_t> dead_;       // by rank: 0 alive, else the ProvErrno of its death
    uint32_t seen_epoch_ = 0;
    // sends_wait_only_for_agent: the agent ring's consumer position when a wait with queued sends
    // decided to sleep; kNoRoomWait while none did (read by sleep_until_work without the lock).
    static constexpr uint64_t kNoRoomWait = UINT64_MAX;
    std::atomic<uint64_t> room_wait_pos_{kNoRoomWait};
    bool peers_lost_ = false;
    int first_loss_ = kErrNone;       // the ProvErrno of the first peer found dead
    uint32_t first_lost_rank_ = kAnyRank;  // and which rank it was
    uint64_t sends_outstanding_ = 0, recvs_posted_ = 0, inject_queued_ = 0;
    uint32_t next_in_ = 0;  // round-robin start over the inbound rings
    CompletionSink* tx_sink_ = nullptr;
    CompletionSink* rx_sink_ = nullptr;
    DirectOut direct_out_;
};

}  // namespace iccs::mpi
