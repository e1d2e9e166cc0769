// group_impl.hpp: inside group/ (not for users). The one idea: every algorithm is written against
// three primitives of a thread's GroupImpl:
//   send(dst rank, step, bytes)  a tagged message (call number, step, source) cut into segments;
//   recv(src rank, step)         waits (running the endpoint's handlers) until that message is whole;
//   local_sync()                 the threads of this cluster meet (shared memory, same process).
// The message header carries the collective, a hash of its arguments (mismatches are caught at
// the receiver) and how many WAN links the data already crossed.
#pragma once

#include <atomic>
#include <compare>
#include <mutex>

#include "group.hpp"

namespace iccs::group {

struct SegHdr {
    uint32_t call = 0;    // the sender's collective number (every thread counts its calls)
    uint16_t step = 0;    // algorithm step (tag)
    uint8_t kind = 0;     // Coll
    uint8_t hops = 0;     // WAN links crossed by the data behind this message, this one included
    uint32_t src = 0;     // sender's rank
    uint32_t total = 0;   // whole message bytes
    uint32_t offset = 0;  // of this segment
    uint32_t relay = 0;   // non-zero: the receiver passes this segment on to rank relay - 1 (spreading)
    uint64_t check = 0;   // hash of the call's arguments
};
static_assert(sizeof(SegHdr) == 32);

inline constexpr uint32_t kAllRanks = 0xFFFFFFFFu;
inline constexpr uint32_t kNoRoot = 0xFFFFFFFFu;

// What a thread publishes to its cluster for one hierarchical call (valid until the last local_sync).
struct Slot {
    std::atomic<uint32_t> call{0};  // calls entered (for naming who did not come)
    uint8_t kind = 0;
    uint64_t check = 0;
    const void* in = nullptr;
    void* out = nullptr;
    size_t in_bytes = 0, out_bytes = 0;
    const void* extra = nullptr;  // per call: e.g. the thread's records
};

// One record of the hierarchical data engine: `len` bytes from rank src for rank dst (or all).
struct Rec {
    uint32_t src = 0, dst = 0, len = 0;
    const uint8_t* data = nullptr;
};

struct ClusterLocal {
    explicit ClusterLocal(uint16_t threads) : slot(threads) {}
    std::mutex mu;
    uint16_t arrived = 0;
    std::atomic<uint64_t> gen{0};
    std::vector<Slot> slot;
    // published by the leader (thread 0) between syncs
    const uint8_t* data = nullptr;
    size_t len = 0;
    std::vector<Rec> recs;
};

struct GroupImpl {
    World::Impl* w = nullptr;
    RtEndpoint* ep = nullptr;
    Group api;
    uint16_t cluster = 0, thread = 0;
    uint32_t me = 0;  // rank
    Counters ctr;
    std::string err;

    // the current call
    uint32_t call = 0;
    Coll kind = Coll::kBarrier;
    uint64_t check = 0;
    uint8_t hops_in = 0;
    uint64_t deadline_ns = 0;
    uint32_t seg_now = 0;  // segment payload of this call: hierarchical segments, flat sends whole messages

    struct Key {
        uint32_t call;
        uint16_t step;
        uint32_t src;
        auto operator<=>(const Key&) const = default;
    };
    struct Entry {
        std::vector<uint8_t> data;
        uint32_t got = 0;
        uint8_t kind = 0, hops = 0;
        uint64_t check = 0;
        bool complete() const { return got == data.size(); }
    };
    // Messages of this and later calls, being assembled or waiting for recv(); a flat vector (a
    // handful at a time), its buffers from `spare`: no allocation per message once warm.
    struct Mail {
        Key key;
        Entry e;
    };
    std::vector<Mail> mailbox;
    size_t find_mail(const Key& k) const {
        for (size_t i = 0; i < mailbox.size(); ++i)
            if (mailbox[i].key == k) return i;
        return SIZE_MAX;
    }
    void drop_mail(size_t i) {
        if (i + 1 != mailbox.size()) mailbox[i] = std::move(mailbox.back());
        mailbox.pop_back();
    }
    std::vector<std::vector<uint8_t>> spare;  // message buffers for reuse
    uint64_t bad_segments = 0;

    // begin a call: false when an earlier error is sticky
    bool begin(Coll k, uint64_t chk, uint64_t wan_min);
    bool fail(const std::string& why);
    // send `n` bytes to rank dst; `items`: the data-item bytes in it (WAN accounting)
    bool send(uint32_t dst, uint16_t step, const void* p, size_t n, size_t items) {
        return send_segments(dst, step, p, n, items, nullptr);
    }
    bool send(uint32_t dst, uint16_t step, const void* p, size_t n) { return send(dst, step, p, n, n); }
    // via_clusters: spread the segments over the leaders of these clusters (relaying to dst)
    bool send_segments(uint32_t dst, uint16_t step, const void* p, size_t n, size_t items,
                       const std::vector<uint16_t>* via_clusters);
    // The audit of MagPIe's rule at a coordinator: `item` (an id within this call) came in over
    // the WAN from site from_site; items_audit() (at the end of the call's coordinator part)
    // counts the most arrivals of one item.
    void item_arrived(uint16_t from_site, uint64_t item);
    void items_audit();
    std::vector<uint64_t> arrived;
    // false (naming src and both sizes) unless a message from src has the length expected
    bool want_len(uint32_t src, size_t got, size_t want);
    // A coordinator's WAN message to another site's coordinator `dst`: when the call allows it
    // (spread) and the message has several segments, they go round-robin to the leaders of that
    // site's clusters, which relay them to dst over the LAN: the emulated link's bandwidth is
    // shared by the receiving site's proxies, so this uses all of them.
    bool send_wan(uint32_t dst, uint16_t step, const void* p, size_t n, size_t items);
    bool send_wan(uint32_t dst, uint16_t step, const void* p, size_t n) { return send_wan(dst, step, p, n, n); }
    bool spread = false;  // this call's WAN messages may be spread (every leader of a receiving site waits in it)
    // the whole message from src at step (moved out; give it back with recycle)
    bool recv(uint32_t src, uint16_t step, std::vector<uint8_t>& out);
    void recycle(std::vector<uint8_t>&& v);
    std::vector<uint8_t> take(size_t n);
    bool local_sync();
    ClusterLocal& local();
    const Topology& topo() const;
    std::string who(uint32_t rank) const;  // "thread C.T"
    std::string call_name() const;         // "allreduce (call 7)"
    void on_segment(const SegHdr& h, const uint8_t* p, size_t n);
    CollCounters& cc() { return ctr.of(kind); }
    void count_shm(size_t bytes) {
        ++cc().shm_copies;
        cc().shm_bytes += bytes;
    }
};

struct World::Impl {
    Runtime* rt = nullptr;
    Topology topo;
    Options opt;
    std::vector<std::unique_ptr<GroupImpl>> th;
    ClusterLocal local;
    uint32_t seg_payload = 0;  // Options::segment_bytes within the runtime's limit
    uint32_t max_payload = 0;  // the runtime's limit less the segment header
    Impl(uint16_t threads) : local(threads) {}
};

// The algorithms (flat.cpp, hier.cpp). Sizes in bytes unless named count.
struct MoveArgs {
    Coll kind;
    const uint8_t* in;
    size_t in_bytes;
    uint8_t* out;
    size_t out_bytes;
    std::vector<size_t> send_bytes, recv_bytes;  // by rank: bytes this rank sends to / gets from each rank
    std::vector<size_t> all_bytes;               // gather/scatter/allgather: every rank's block
    uint32_t root;
};
struct RedArgs {
    Coll kind;
    const uint8_t* in;
    uint8_t* out;
    size_t bytes;                      // in (every rank the same)
    std::vector<size_t> block_bytes;   // reduce_scatter: by rank
    Reduction r;
    uint32_t root;
};
// The offset of every rank's block when blocks lie in rank order (one more entry: the total).
inline std::vector<size_t> offsets(const std::vector<size_t>& b) {
    std::vector<size_t> o(b.size() + 1, 0);
    for (size_t i = 0; i < b.size(); ++i) o[i + 1] = o[i] + b[i];
    return o;
}
inline void combine(const Reduction& r, void* inout, const void* in, size_t bytes) {
    if (r.elem != 0 && bytes != 0) r.fn(inout, in, bytes / r.elem, r.ctx);
}

bool flat_barrier(GroupImpl& g);
bool flat_bcast(GroupImpl& g, uint8_t* buf, size_t n, uint32_t root);
bool flat_move(GroupImpl& g, const MoveArgs& a);
bool flat_reduce(GroupImpl& g, const RedArgs& a);
bool hier_barrier(GroupImpl& g);
bool hier_bcast(GroupImpl& g, uint8_t* buf, size_t n, uint32_t root);
bool hier_move(GroupImpl& g, const MoveArgs& a);
bool hier_reduce(GroupImpl& g, const RedArgs& a);

}  // namespace iccs::group
