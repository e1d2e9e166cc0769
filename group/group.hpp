// group.hpp: wide-area group communication on the cluster runtime (compute/runtime.hpp), issue 18.
//
// Collectives among every compute thread of a run (rank = cluster * threads + thread), in two
// algorithm families:
//
//   hierarchical (MagPIe, Kielmann et al.): the threads of a cluster meet through shared memory
//     (they are one process), the clusters of a site through one LAN message per cluster leader
//     (thread 0), and the sites through one coordinator each over the WAN. Every sender-receiver
//     path holds at most one WAN link and every data item crosses to each receiving site at most
//     once; long messages are cut into segments (Options::segment_bytes) that the transport
//     spreads over the proxies.
//   flat (grid-unaware): binomial trees (bcast, reduce, gather, scatter), recursive doubling
//     (allreduce, scan, dissemination barrier), rings (allgather, reduce_scatter) and pairwise
//     exchange (alltoall) over all ranks, as if every link cost the same.
//
// The topology (thread -> cluster -> site) comes from the machine file's `[wan] sites`
// (topology_from_config). Counters per collective and per WAN link (site pair) record calls,
// messages, bytes, the data bytes that crossed a WAN link against the minimum (each item once to
// each receiving site: MagPIe's rule holds iff they are equal) and the most WAN links any message
// had behind it (MagPIe: 1).
//
// Use: one World per cluster process, made before the run's first barrier (it registers handler
// ids Options::handler_base .. +1 on the runtime); thread t calls collectives on world.group(t),
// every thread of every cluster the same collectives in the same order with matching arguments
// (roots, sizes, counts, operation). A mismatch or a thread that never comes ends the call with
// false and last_error() naming the call and the threads (after at most Options::timeout_ms); the
// error is sticky: every later call on that Group fails with it.
// Reductions must be commutative and associative (the hierarchical family combines in cluster and
// site order, not rank order); scan combines in rank order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "group_counters.hpp"
#include "group_setup.hpp"
#include "runtime.hpp"

namespace iccs::group {

// A user reduction: inout[i] = inout[i] (op) in[i] for i < count.
using UserOpFn = void (*)(void* inout, const void* in, size_t count, void* ctx);

struct Reduction {  // internal form of an operation: elementwise over elem-byte elements
    size_t elem = 0;
    uint8_t op_id = 0;  // Op value, or 100 for a user function (compared between callers)
    UserOpFn fn = nullptr;
    void* ctx = nullptr;
};
template <class T>
Reduction reduction_of(Op op);  // for int32/uint32/int64/uint64/float/double

class World;
struct GroupImpl;

// Thread t's handle: only the thread that owns endpoint(t) calls it.
class Group {
public:
    uint32_t rank() const;
    uint32_t ranks() const;
    const Topology& topology() const;
    const std::string& last_error() const;
    const Counters& counters() const;  // this thread's

    bool barrier(Family f = Family::kDefault);
    template <class T>
    bool bcast(std::span<T> buf, uint32_t root, Family f = Family::kDefault) {
        return bcast_bytes(buf.data(), buf.size_bytes(), root, f);
    }
    template <class T>
    bool reduce(std::span<const T> in, std::span<T> out, Op op, uint32_t root, Family f = Family::kDefault) {
        return reduce_bytes(Coll::kReduce, in.data(), out.data(), in.size(), out.size(), reduction_of<T>(op), root, f);
    }
    template <class T>
    bool reduce(std::span<const T> in, std::span<T> out, UserOpFn fn, void* ctx, uint32_t root,
                Family f = Family::kDefault) {
        return reduce_bytes(Coll::kReduce, in.data(), out.data(), in.size(), out.size(), user<T>(fn, ctx), root, f);
    }
    template <class T>
    bool allreduce(std::span<const T> in, std::span<T> out, Op op, Family f = Family::kDefault) {
        return reduce_bytes(Coll::kAllreduce, in.data(), out.data(), in.size(), out.size(), reduction_of<T>(op), 0, f);
    }
    template <class T>
    bool allreduce(std::span<const T> in, std::span<T> out, UserOpFn fn, void* ctx, Family f = Family::kDefault) {
        return reduce_bytes(Coll::kAllreduce, in.data(), out.data(), in.size(), out.size(), user<T>(fn, ctx), 0, f);
    }
    // Inclusive prefix over ranks: out on rank r = in(0) op ... op in(r).
    template <class T>
    bool scan(std::span<const T> in, std::span<T> out, Op op, Family f = Family::kDefault) {
        return reduce_bytes(Coll::kScan, in.data(), out.data(), in.size(), out.size(), reduction_of<T>(op), 0, f);
    }
    // in: the whole vector (sum of counts elements); out: this rank's block (counts[rank]).
    template <class T>
    bool reduce_scatter(std::span<const T> in, std::span<T> out, std::span<const uint32_t> counts, Op op,
                        Family f = Family::kDefault) {
        return reduce_scatter_bytes(in.data(), in.size(), out.data(), out.size(), counts, reduction_of<T>(op), f);
    }
    // gather: every rank in.size() elements, out (root only) ranks * that; gatherv: counts on every rank.
    template <class T>
    bool gather(std::span<const T> in, std::span<T> out, uint32_t root, Family f = Family::kDefault) {
        return move_bytes(Coll::kGather, in.data(), in.size_bytes(), out.data(), out.size_bytes(), {}, {}, sizeof(T),
                          root, f);
    }
    template <class T>
    bool gatherv(std::span<const T> in, std::span<T> out, std::span<const uint32_t> counts, uint32_t root,
                 Family f = Family::kDefault) {
        return move_bytes(Coll::kGather, in.data(), in.size_bytes(), out.data(), out.size_bytes(), counts, counts,
                          sizeof(T), root, f);
    }
    template <class T>
    bool scatter(std::span<const T> in, std::span<T> out, uint32_t root, Family f = Family::kDefault) {
        return move_bytes(Coll::kScatter, in.data(), in.size_bytes(), out.data(), out.size_bytes(), {}, {}, sizeof(T),
                          root, f);
    }
    template <class T>
    bool scatterv(std::span<const T> in, std::span<const uint32_t> counts, std::span<T> out, uint32_t root,
                  Family f = Family::kDefault) {
        return move_bytes(Coll::kScatter, in.data(), in.size_bytes(), out.data(), out.size_bytes(), counts, counts,
                          sizeof(T), root, f);
    }
    template <class T>
    bool allgather(std::span<const T> in, std::span<T> out, Family f = Family::kDefault) {
        return move_bytes(Coll::kAllgather, in.data(), in.size_bytes(), out.data(), out.size_bytes(), {}, {},
                          sizeof(T), 0, f);
    }
    template <class T>
    bool allgatherv(std::span<const T> in, std::span<T> out, std::span<const uint32_t> counts,
                    Family f = Family::kDefault) {
        return move_bytes(Coll::kAllgather, in.data(), in.size_bytes(), out.data(), out.size_bytes(), counts, counts,
                          sizeof(T), 0, f);
    }
    // alltoall: in and out hold ranks() blocks of in.size() / ranks() elements, block d for rank d.
    template <class T>
    bool alltoall(std::span<const T> in, std::span<T> out, Family f = Family::kDefault) {
        return move_bytes(Coll::kAlltoall, in.data(), in.size_bytes(), out.data(), out.size_bytes(), {}, {},
                          sizeof(T), 0, f);
    }
    // sendcounts[d]: elements for rank d (blocks in rank order in `in`); recvcounts[s]: from rank s.
    template <class T>
    bool alltoallv(std::span<const T> in, std::span<const uint32_t> sendcounts, std::span<T> out,
                   std::span<const uint32_t> recvcounts, Family f = Family::kDefault) {
        return move_bytes(Coll::kAlltoall, in.data(), in.size_bytes(), out.data(), out.size_bytes(), sendcounts,
                          recvcounts, sizeof(T), 0, f);
    }

    // The byte-level calls the templates above use (sizes in bytes, counts in elements of `elem`).
    bool bcast_bytes(void* buf, size_t n, uint32_t root, Family f);
    bool reduce_bytes(Coll kind, const void* in, void* out, size_t count, size_t out_count, const Reduction& r,
                      uint32_t root, Family f);
    bool reduce_scatter_bytes(const void* in, size_t in_count, void* out, size_t out_count,
                              std::span<const uint32_t> counts, const Reduction& r, Family f);
    bool move_bytes(Coll kind, const void* in, size_t in_bytes, void* out, size_t out_bytes,
                    std::span<const uint32_t> sendcounts, std::span<const uint32_t> recvcounts, size_t elem,
                    uint32_t root, Family f);

private:
    friend class World;
    template <class T>
    static Reduction user(UserOpFn fn, void* ctx) {
        return Reduction{sizeof(T), 100, fn, ctx};
    }
    GroupImpl* impl_ = nullptr;
};

// One per cluster process.
class World {
public:
    // Registers handlers handler_base and handler_base + 1 (both < kRtUserHandlers) on rt: make it
    // before the run's first barrier, on every cluster, with the same topology and options.
    World(Runtime& rt, const Topology& topo, const Options& o = {});
    ~World();
    World(const World&) = delete;
    World& operator=(const World&) = delete;
    Group& group(uint16_t thread);
    const Topology& topology() const;
    const Options& options() const;
    // The sum of this process's threads' counters (read when they are between calls).
    Counters counters() const;
    // Messages received but not (yet) taken by a call, and segments dropped as malformed: both 0
    // after a run whose threads all made the same calls (the tests' leak check; read when idle).
    size_t pending_messages() const;
    uint64_t bad_segments() const;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

// --- reductions of the built-in types -------------------------------------------------------------
namespace detail {
template <class T, Op O>
void apply(void* inout, const void* in, size_t n, void*) {
    T* a = static_cast<T*>(inout);
    const T* b = static_cast<const T*>(in);
    for (size_t i = 0; i < n; ++i) {
        if constexpr (O == Op::kSum) a[i] = static_cast<T>(a[i] + b[i]);
        else if constexpr (O == Op::kProd) a[i] = static_cast<T>(a[i] * b[i]);
        else if constexpr (O == Op::kMin) a[i] = b[i] < a[i] ? b[i] : a[i];
        else a[i] = a[i] < b[i] ? b[i] : a[i];
    }
}
}  // namespace detail
template <class T>
Reduction reduction_of(Op op) {
    static_assert(std::is_arithmetic_v<T>, "built-in reductions are over arithmetic types");
    UserOpFn fn = op == Op::kSum    ? &detail::apply<T, Op::kSum>
                  : op == Op::kProd ? &detail::apply<T, Op::kProd>
                  : op == Op::kMin  ? &detail::apply<T, Op::kMin>
                                    : &detail::apply<T, Op::kMax>;
    return Reduction{sizeof(T), static_cast<uint8_t>(op), fn, nullptr};
}

}  // namespace iccs::group
