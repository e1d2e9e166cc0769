// shm_region.hpp: the memory the ranks of one domain and their agent share
// (mpi/provider/README.md, "The shared region"): a header, a slot per member rank, and the rings.
//
// A domain is the set of ranks that reach each other through shared memory: the ranks of one
// cluster under the `iccs` transport (their messages to other clusters go through the cluster's
// agent and proxies), every rank of the machine under `direct` and `delay`. The agent creates the
// region (a memfd: nothing in /dev/shm, gone when the last process unmaps it), sizes and zeroes it,
// writes the header, and hands the file descriptor to each rank over its socket; all of it is
// offsets, so each process maps it wherever it likes.
//
// Rings: one from every member to every other member (pair rings), and under `iccs` two per
// member between it and the agent: rank-to-agent (records for other clusters) and agent-to-rank
// (records from other clusters). Each ring has one writer and one reader (shm_ring.hpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "shm_ring.hpp"

namespace iccs::mpi {

inline constexpr uint64_t kRegionMagic = 0x31'69'70'6d'73'63'63'69ull;  // "iccsmpi1"
inline constexpr uint32_t kRegionVersion = 1;

enum class RankState : uint32_t {
    kUnborn = 0,    // not attached yet
    kAlive = 1,     // attached
    kFinished = 2,  // said goodbye (fi_close of its domain): left normally
    kDead = 3,      // its process ended without a goodbye, or never came: the others fail what involves it
};

// Per-rank provider counters (ICCS_MPI_RANK_COUNTERS): written by the rank alone (relaxed
// load + store, no locked instruction), read by the agent for telemetry and the report.
#define ICCS_MPI_RANK_COUNTERS(X)                                                                          \
    X(sent_local_msgs)    /* messages sent to ranks of this cluster (shared memory) */                    \
    X(sent_local_bytes)                                                                                    \
    X(sent_remote_msgs)   /* messages sent to ranks of other clusters (through the agent and proxies) */ \
    X(sent_remote_bytes)                                                                                   \
    X(recv_local_msgs)    /* messages received from ranks of this cluster */                              \
    X(recv_local_bytes)                                                                                    \
    X(recv_remote_msgs)   /* messages received from ranks of other clusters */                            \
    X(recv_remote_bytes)                                                                                   \
    X(unexpected)         /* messages that arrived before a matching receive */                           \
    X(posted_recvs)       /* receives posted (fi_trecv*, fi_recv*; peeks not counted) */                  \
    X(peeks)              /* FI_PEEK receives */                                                          \
    X(peek_misses)        /* ... answered FI_ENOMSG */                                                    \
    X(claims)             /* FI_CLAIM receives */                                                         \
    X(discards)           /* FI_DISCARD receives */                                                       \
    X(cancels)            /* receives cancelled (fi_cancel) */                                            \
    X(truncations)        /* receives whose message was longer than the buffer (FI_ETRUNC) */             \
    X(injects)            /* fi_tinject*, fi_inject* */                                                   \
    X(send_ring_full)     /* sends that found their ring full and waited */                                     \
    X(room_blocks)        /* CQ waits that blocked while sends waited for room in the agent ring */       \
    X(cq_full)            /* progress stopped because a CQ had no room */                                 \
    X(errors)             /* operations ended with an error (a dead peer) */                              \
    X(idle_wakes)         /* CQ waits woken with no record, room or peer's change for them (or a post */ \
                          /* of another thread, FI_THREAD_SAFE) */

struct RankCounters {
#define ICCS_X(name) std::atomic<uint64_t> name;
    ICCS_MPI_RANK_COUNTERS(ICCS_X)
#undef ICCS_X
};

// A rank's doorbell (RankSlot::doorbell): 0 while it is awake. A rank that sleeps in a CQ wait sets
// kDoorbellSleeps, and kDoorbellRoom with it when a send of its waits for room in its ring to the
// agent. Every writer of its rings, the agent and a post of another thread wake it whenever it
// sleeps; its bridge, after taking its records, only when it waits for room: in a ping-pong the
// rank sleeps for the answer right after its send, and a wake for the take of that send woke it
// for nothing on the bridge's core, in the way of the send itself (mpi/provider/README.md, "Waiting").
inline constexpr uint32_t kDoorbellSleeps = 1;
inline constexpr uint32_t kDoorbellRoom = 2;

struct alignas(64) RankSlot {
    std::atomic<uint32_t> state;     // RankState
    std::atomic<uint32_t> pid;       // of the rank's process (0 before it attached)
    std::atomic<uint32_t> doorbell;  // kDoorbell* bits while the rank sleeps in a CQ wait: a writer wakes it (futex)
    alignas(64) std::atomic<uint32_t> bridge_word;   // the agent's bridge thread for this rank sleeps here
    std::atomic<uint32_t> bridge_watch;              // (its Waker, shared: proxy/rings.hpp Waker::share)
    alignas(64) RankCounters counters;
};

struct RegionHeader {
    std::atomic<uint64_t> magic;  // kRegionMagic, written last by the agent
    uint32_t version;
    uint32_t members;       // ranks of this domain: global ranks first_rank .. first_rank + members - 1
    uint32_t first_rank;
    uint32_t world;         // ranks of the machine
    uint32_t cluster_size;  // ranks per cluster: rank r is in cluster r / cluster_size
    uint32_t transport;     // iccs, direct, delay (RtTransport)
    uint64_t delay_ns;      // delay: a record from another cluster is held until send_ns + this
    uint64_t run_hash;      // of the run id: an address of another run is refused
    uint64_t region_bytes;
    uint64_t pair_ring_bytes, agent_ring_bytes;
    uint64_t slots_off, dead_off, rings_off;
    std::atomic<uint32_t> epoch;    // +1 after every change of a slot's state or a dead flag
    std::atomic<uint32_t> bridged;  // 1: the agent carries records to and from other clusters
    std::atomic<uint32_t> agent_pid;
    // The agent's first failure after start-up, in words, for the ranks to print (the agent's own
    // standard error is not the ranks': holding their launcher's pipes would keep it from seeing
    // a rank end). agent_error_set: 1 once the text is complete.
    std::atomic<uint32_t> agent_error_set;
    char agent_error[400];
};

// The geometry both sides compute from the same numbers.
struct RegionGeometry {
    uint32_t members = 0, first_rank = 0, world = 0, cluster_size = 1;
    bool bridged = false;
    uint64_t pair_ring_bytes = 1u << 20, agent_ring_bytes = 4u << 20;
    uint64_t slots_off = 0, dead_off = 0, rings_off = 0, total = 0;
};
// Fills the offsets and the total size from the counts and ring sizes.
void region_layout(RegionGeometry& g);

// A mapped region (either side). Views into it; the mapping is undone by unmap().
class Region {
   public:
    Region() = default;
    ~Region() { unmap(); }
    Region(const Region&) = delete;
    Region& operator=(const Region&) = delete;
    // The agent: a fresh memfd of g's size, mapped, its header written. False with err.
    bool create(const RegionGeometry& g, uint32_t transport, uint64_t delay_ns, uint64_t run_hash, std::string& err);
    // A rank: map the memfd the agent sent; false with err when it is not a region of this version.
    bool attach(int fd, std::string& err);
    void unmap();
    int fd() const { return fd_; }  // the memfd (the agent's; -1 in a rank after attach)
    RegionHeader& hdr() const { return *reinterpret_cast<RegionHeader*>(base_); }
    uint8_t* base() const { return base_; }
    RankSlot& slot(uint32_t member) const {
        return reinterpret_cast<RankSlot*>(base_ + hdr().slots_off)[member];
    }
    // A rank of the machine known dead by this domain's agent (ranks of other domains).
    std::atomic<uint8_t>& dead_flag(uint32_t rank) const {
        return reinterpret_cast<std::atomic<uint8_t>*>(base_ + hdr().dead_off)[rank];
    }
    bool is_member(uint32_t rank) const {
        return rank >= hdr().first_rank && rank - hdr().first_rank < hdr().members;
    }
    uint32_t member_of(uint32_t rank) const { return rank - hdr().first_rank; }
    ShmRingDesc pair_ring(uint32_t from_member, uint32_t to_member) const;
    ShmRingDesc to_agent_ring(uint32_t member) const;    // bridged only
    ShmRingDesc from_agent_ring(uint32_t member) const;  // bridged only
    void bump_epoch() const { hdr().epoch.fetch_add(1, std::memory_order_seq_cst); }
    // The agent: say why ranks outside this domain are lost (the first reason stays).
    void set_agent_error(const std::string& why) const;
    // The ranks: that reason, or "" while there is none.
    std::string agent_error() const;

   private:
    uint8_t* base_ = nullptr;
    uint64_t len_ = 0;
    int fd_ = -1;
};

// Wake a futex word of a region (process-shared: FUTEX_WAKE without the private flag). True when
// a sleeper had said it sleeps (the call woke it, or it was about to sleep and now will not).
// With `only`, the sleeper is woken only when its word has one of those bits (a rank's doorbell:
// kDoorbellRoom).
bool futex_wake_shared(std::atomic<uint32_t>* word, uint32_t only = ~0u);
// Sleep on it while it holds `expected`, at most timeout_us. True when woken (not the time-out,
// not a word that no longer held `expected`).
bool futex_wait_shared(std::atomic<uint32_t>* word, uint32_t expected, uint64_t timeout_us);

}  // namespace iccs::mpi
