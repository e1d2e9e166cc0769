// stamps.hpp: time stamps of one message at every stage of the data path (DESIGN.md §2), for the
// breakdown experiment (`./iccs experiment breakdown`, the study's Figure 7). Header-only and
// DPDK-free, so the stack, the proxy and convergence all stamp through it.
//
// The one idea: a process-wide table of the latest time (CLOCK_MONOTONIC, ns: cluster processes
// on one host share it; the TSC is its clock source here) each point of the path was passed, with
// one global switch. Off (the default), a stamp is one relaxed load of `g_on` and a branch marked
// [[unlikely]]: nothing else runs (the cost is measured in perf/README.md). On, it is one clock
// read and one relaxed store.
//
// Which message a stamp belongs to, without marking packets: the experiment sends one message at
// a time (a ping-pong with a pause between rounds), and
//  - send points (kConvSend .. kFabricTx) record the FIRST pass after arm(), each only once the
//    point before it has recorded (so an ack sent before our message cannot take udp_send);
//  - receive points (kFabricRx .. kSlidwinReceive) record every pass into a pending row (acks and
//    keepalives pass them too), and the delivery of a DATA message into a compute thread's ring
//    (kRingDeliver) commits the pending row: the stack handles a frame from the port to that
//    delivery in one call chain, so the pending values are that message's;
//  - kConvTake and kDelivered are stamped by the receiving compute thread itself.
// Readers (the ping-pong program) copy the table after the round trip is over.
// Threading: any thread; slots are relaxed atomics (the rings between threads order them).
#pragma once

#include <atomic>
#include <cstdint>

#include "clock.hpp"

namespace iccs::stamps {

enum Point : uint32_t {
    kConvSend,        // the application called send (convergence)
    kRingEnq,         // convergence built the message and puts it on a proxy's ring
    kSlidwinSend,     // the proxy hands it to slidwin_send
    kUdpSend,         // udp_output
    kIpSend,          // ipv4_output (fragmentation, eth)
    kFabricTx,        // the proxy gives the frame to the port (tx_burst)
    kFabricRx,        // the receiving proxy's rx_burst returned it
    kIpReceive,       // ipv4_input (reassembly)
    kUdpReceive,      // udp_input (checksum, port)
    kSlidwinReceive,  // slidwin_receive (sequence, ack)
    kRingDeliver,     // the proxy puts the message on the destination thread's ring
    kConvTake,        // the compute thread takes it from its ring (convergence: reorder)
    kDelivered,       // recv returns it to the application
    kPoints
};

inline constexpr const char* kPointNames[kPoints] = {
    "conv_send", "ring_enq",        "slidwin_send", "udp_send", "ip_send",   "fabric_tx", "fabric_rx",
    "ip_receive", "udp_receive", "slidwin_receive", "ring_deliver", "conv_take", "delivered"};

inline std::atomic<bool> g_on{false};
inline std::atomic<uint64_t> g_t[kPoints];
inline std::atomic<uint64_t> g_pending[kPoints];

namespace detail {
// Out of line and cold: inlined, its clock call would make every stamped function save more
// registers and grow its frame even while stamps are off.
[[gnu::noinline, gnu::cold]] inline void stamp_slow(Point p) {
    if (p <= kFabricTx) {  // first pass after arm(), in path order
        if (g_t[p].load(std::memory_order_relaxed) != 0) return;
        if (p != kConvSend && g_t[p - 1].load(std::memory_order_relaxed) == 0) return;
        g_t[p].store(now_ns(), std::memory_order_relaxed);
    } else if (p <= kSlidwinReceive) {
        g_pending[p].store(now_ns(), std::memory_order_relaxed);
    } else if (p == kRingDeliver) {  // commit the pending receive row
        for (uint32_t q = kFabricRx; q <= kSlidwinReceive; ++q)
            g_t[q].store(g_pending[q].load(std::memory_order_relaxed), std::memory_order_relaxed);
        g_t[p].store(now_ns(), std::memory_order_relaxed);
    } else {
        g_t[p].store(now_ns(), std::memory_order_relaxed);
    }
}
}  // namespace detail

// The one call on the data path: free when off.
inline void stamp(Point p) {
    if (g_on.load(std::memory_order_relaxed)) [[unlikely]]
        detail::stamp_slow(p);
}

// Before sending the traced message: the send points record afresh.
inline void arm() {
    for (uint32_t q = kConvSend; q <= kFabricTx; ++q) g_t[q].store(0, std::memory_order_relaxed);
}

inline void set_on(bool on) { g_on.store(on, std::memory_order_relaxed); }

// The current table (after a round trip: the last message's stamps).
inline void read(uint64_t (&out)[kPoints]) {
    for (uint32_t q = 0; q < kPoints; ++q) out[q] = g_t[q].load(std::memory_order_relaxed);
}

}  // namespace iccs::stamps
