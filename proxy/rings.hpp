// rings.hpp: the one contract between compute threads (convergence) and proxies (DESIGN.md §4).
//
// A message travels as a PktBuf* (pointer only: the "DMA" of the paper): its data() starts at
// the convergence header (conv_hdr.hpp) with kPktHeadroom in front for the proxy's headers.
// Compute thread t owns one single-producer ring to each proxy p of its cluster, and one
// multi-producer ring that every proxy of the cluster delivers into. Rings are rte_rings in the
// cluster's DPDK memory, so neither side ever blocks the other; a full ring is counted.
#pragma once

#include <rte_ring.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "pktbuf.hpp"

namespace iccs {

// Sleeps a thread until another wakes it (futex), for adaptive polling: a sleeper first says
// it is about to sleep, re-checks its work, then sleeps; a producer wakes it only when it said so.
class Waker {
   public:
    // Sleep at most timeout_us unless woken; call after prepare_sleep() and a re-check.
    void sleep(uint32_t timeout_us);
    void prepare_sleep() { sleeping_.store(1, std::memory_order_seq_cst); }
    void cancel_sleep() { sleeping_.store(0, std::memory_order_relaxed); }
    // Wake the sleeper if it is asleep (cheap when it is not: one load).
    void wake();

   private:
    alignas(64) std::atomic<uint32_t> sleeping_{0};
};

class ClusterRings {
   public:
    // threads x proxies rings of `entries` (a power of two); false with err on failure.
    bool create(const std::string& prefix, uint32_t threads, uint32_t proxies, uint32_t entries, std::string& err);
    ~ClusterRings();
    rte_ring* to_proxy(uint32_t thread, uint32_t proxy) const { return to_proxy_[thread * proxies_ + proxy]; }
    rte_ring* to_thread(uint32_t thread) const { return to_thread_[thread]; }
    Waker& proxy_waker(uint32_t proxy) { return proxy_wakers_[proxy]; }
    Waker& thread_waker(uint32_t thread) { return thread_wakers_[thread]; }
    uint32_t threads() const { return threads_; }
    uint32_t proxies() const { return proxies_; }

   private:
    uint32_t threads_ = 0, proxies_ = 0;
    std::vector<rte_ring*> to_proxy_, to_thread_;
    std::vector<Waker> proxy_wakers_, thread_wakers_;
};

}  // namespace iccs
