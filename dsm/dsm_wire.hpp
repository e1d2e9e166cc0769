// dsm_wire.hpp: the DSM's messages between clusters: the handler ids with the layout of each
// request and reply, vector clocks and the cursor of a chunked interval list, and the little byte
// writer/reader that builds and parses them (bounded: a short message sets `bad`). Shared by the
// parts through dsm_impl.hpp. Not installed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace iccs::dsm {

// Handler ids relative to DsmConfig::handler_base (dsm_impl.hpp checks they fit in kDsmHandlers).
enum : uint16_t {
    kHFetch = 0,    // req  u32 page [, u32 count 1..kFetchPagesWritten] -> reply the pages' bytes
    kHDiff,         // req  u32 count, {u32 page, u32 runs, {u32 off, u32 len, bytes}}  -> ack
    kHLockAcq,      // send u32 id, VC (from a compute thread; its grant: kHLockGrant to that thread, later)
                    //      or a fence: req u32 kFenceExchange, u8 kFence* bits, VC, intervals -> VC, intervals (acquire) or ack
    kHLockRel,      // send u32 id, VC, intervals: the lock's token back at its home (fence: req -> ack)
    kHBarrier,      // req  u32 id, u16 clusters, VC, intervals -> (deferred) VC, intervals
    kHGetsub,       // req  u32 id, i64 last, i64 nproc       -> i64
    kHFlag,         // req  u32 id, u8 op (0 clear, 1 set, 2 wait) -> ack (wait: deferred until set)
    kHCond,         // req  u32 id, u8 op (0 register, 1 block) -> ack (block: deferred); send: u8 op 2 signal, 3 broadcast
    kHAlloc,        // req  u64 bytes, u64 align               -> u8 ok, u64 offset, u64 used
    kHSyncIds,      // req  u32 n [, u64 object]               -> u32 first (an object's ids: the same at every init)
    kHStart,        // req  u64 hash, u64 used, u32 next_sync, u64 region, u64 globals, u64 page hash... -> (deferred) u8 ok, text or u32 n, u32 page...
    kHReplay,       // req  u64 k                              -> (deferred) u64 cluster 0's k-th prefix value
    kHNotices,      // req  intervals (pushed ahead of a release/barrier arrival) -> ack
    kHPull,         // req  VC from, VC to, u8 started, u16 c, u32 i -> intervals, u8 done, u16 c, u32 i
    kHPrivate,      // req  u32 n, {u32 page, u32 offset} (to cluster 0) -> (deferred) the union, the same form
    kHLockRecall,   // send u32 id, u16 to, u8 ahead (home -> the token's cluster): another cluster waits, give it back when free
    kHLockGrant,    // send VC, intervals (home -> the thread whose kHLockAcq it answers): the token is yours
    kHLockAhead,    // send u32 id, VC, intervals: a token back at its home unasked, with a recalled one (tokens_ahead)
    kHCount
};

using VC = std::vector<uint32_t>;  // per cluster: intervals of that cluster applied (or known)

// Where a chunked encoding of intervals (from, to] goes on: cluster c, interval i.
struct NoticeCursor {
    uint16_t c = 0;
    uint32_t i = 0;
    bool started = false;
};
// A fence (DsmNode::fence) is one exchange with the fence lock's home, sent as a kHLockAcq whose
// id is this (no lock id has it): the releaser's notices merged into the fence lock's knowledge
// (kFenceRelease), that knowledge and the notices the sender lacks in the reply (kFenceAcquire).
inline constexpr uint32_t kFenceExchange = 0xFFFFFFFFu;
inline constexpr uint8_t kFenceRelease = 1, kFenceAcquire = 2;
// An interval count that says "not here: pull them" (DsmNode::Impl::encode_intervals).
inline constexpr uint32_t kNoticesPull = 0xFFFFFFFFu;

// Little byte writer/reader for protocol messages (host byte order: every cluster runs the same
// binary on the same architecture; the runtime carries bytes).
struct Wr {
    std::vector<uint8_t> b;
    template <class T> void put(T v) {
        const size_t n = b.size();
        b.resize(n + sizeof(T));
        std::memcpy(b.data() + n, &v, sizeof(T));
    }
    void bytes(const void* p, size_t n) {
        const size_t o = b.size();
        b.resize(o + n);
        if (n) std::memcpy(b.data() + o, p, n);
    }
};
struct Rd {
    const uint8_t* p;
    size_t n, o = 0;
    bool bad = false;
    Rd(const uint8_t* d, size_t len) : p(d), n(len) {}
    template <class T> T get() {
        T v{};
        if (o + sizeof(T) > n) {
            bad = true;
            return v;
        }
        std::memcpy(&v, p + o, sizeof(T));
        o += sizeof(T);
        return v;
    }
    const uint8_t* take(size_t len) {
        if (o + len > n) {
            bad = true;
            return nullptr;
        }
        const uint8_t* r = p + o;
        o += len;
        return r;
    }
};

}  // namespace iccs::dsm
