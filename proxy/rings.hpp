// rings.hpp: the one contract between compute threads (convergence) and proxies (DESIGN.md §4).
//
// A message travels as a PktBuf* (pointer only: the "DMA" of the paper): its data() starts at
// the convergence header (conv_hdr.hpp) with kPktHeadroom in front for the proxy's headers.
// Compute thread t owns one single-producer ring to each proxy p of its cluster, and one
// multi-producer ring that every proxy of the cluster delivers into. Rings are rte_rings in the
// cluster's DPDK memory, so neither side ever blocks the other; a full ring is counted.
//
// Beside the rings, the little state both sides share: the port table (which compute thread
// bound which port: the proxies deliver by it), what the proxies learned of the other clusters
// (down: stopped answering; done: finished their work), and each proxy's load (for
// least-loaded dispatch). All of it is atomics read on the hot path with relaxed loads.
#pragma once

#include <rte_ring.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pktbuf.hpp"

namespace iccs {

// Sleeps a thread until another wakes it (futex), for adaptive polling: a sleeper first says
// it is about to sleep, re-checks its work, then sleeps; a producer wakes it only when it said so.
class Waker {
   public:
    Waker() = default;
    Waker(const Waker&) = delete;
    Waker& operator=(const Waker&) = delete;
    // Sleep at most timeout_us unless woken; call after prepare_sleep() and a re-check.
    void sleep(uint32_t timeout_us);
    // Where the sleeper sleeps, which tells wake() how to wake it: on the futex word (sleep()),
    // or where a write to the eventfd ends the sleep (use_eventfd: an io_uring wait, a ppoll).
    enum SleepKind : uint32_t { kOnFutex = 1, kOnEventfd = 2 };
    void prepare_sleep(SleepKind k = kOnFutex) { word_->store(k, std::memory_order_seq_cst); }
    bool sleeping_on_futex() const { return word_->load(std::memory_order_seq_cst) == kOnFutex; }
    void cancel_sleep() { word_->store(0, std::memory_order_relaxed); }
    // Wake the sleeper if it is asleep (cheap when it is not: one load).
    void wake();
    // The sleeper sleeps or is about to (it said so): a wake would cost a system call.
    bool sleeping() const { return word_->load(std::memory_order_seq_cst) != 0; }
    // Watching (a proxy's waker; doorbell.hpp): threads that poll the sleeper's work themselves
    // while they wait, so arrivals need not wake it. leave() is true when the caller was the
    // last watcher and the sleeper sleeps: the caller must then poll once more itself.
    void watch_enter() { watch_->fetch_add(1, std::memory_order_seq_cst); }
    bool watch_leave() { return watch_->fetch_sub(1, std::memory_order_seq_cst) == 1 && sleeping(); }
    uint32_t watchers() const { return watch_->load(std::memory_order_relaxed); }
    // Sleep on a word in memory other processes share (a proxy's doorbell, doorbell.hpp), so
    // they can wake the sleeper too. Before the sleeper's first sleep.
    void share(std::atomic<uint32_t>* word, std::atomic<uint32_t>* watch) {
        word_ = word;
        watch_ = watch;
        shared_ = true;
    }
    // The sleeper may sleep elsewhere (an io_uring wait that a read of this eventfd ends): wake()
    // writes the eventfd when it said kOnEventfd. Before the sleeper's first sleep.
    void use_eventfd(int fd) { efd_ = fd; }

   private:
    alignas(64) std::atomic<uint32_t> sleeping_{0};
    std::atomic<uint32_t>* word_ = &sleeping_;
    std::atomic<uint32_t> watching_{0};
    std::atomic<uint32_t>* watch_ = &watching_;
    bool shared_ = false;  // word_ is process-shared: FUTEX_WAIT/WAKE, not the _PRIVATE ones
    int efd_ = -1;
};

class ClusterRings {
   public:
    // threads x proxies rings of `entries` (a power of two), state for `clusters` clusters;
    // false with err on failure.
    bool create(const std::string& prefix, uint32_t threads, uint32_t proxies, uint32_t entries, uint32_t clusters,
                std::string& err);
    ~ClusterRings();
    rte_ring* to_proxy(uint32_t thread, uint32_t proxy) const { return to_proxy_[thread * proxies_ + proxy]; }
    rte_ring* to_thread(uint32_t thread) const { return to_thread_[thread]; }
    Waker& proxy_waker(uint32_t proxy) { return proxy_wakers_[proxy]; }
    Waker& thread_waker(uint32_t thread) { return thread_wakers_[thread]; }
    uint32_t threads() const { return threads_; }
    uint32_t proxies() const { return proxies_; }
    uint32_t clusters() const { return clusters_; }

    // --- ports (bind is control plane; port_owner is read per delivered message) ---
    static constexpr uint16_t kFirstEphemeralPort = 49152;
    // Bind port to thread; false if another thread holds it.
    bool port_bind(uint16_t port, uint16_t thread);
    // Bind a free port >= kFirstEphemeralPort to thread; 0 if none is free.
    uint16_t port_bind_ephemeral(uint16_t thread);
    void port_unbind(uint16_t port) { ports_[port].store(0, std::memory_order_release); }
    // The thread that bound port, or -1.
    int32_t port_owner(uint16_t port) const {
        return static_cast<int32_t>(ports_[port].load(std::memory_order_acquire)) - 1;
    }

    // --- the other clusters, as the proxies see them ---
    // Down: a proxy heard nothing from it for the peer timeout, its memif link hung up (its
    // process ended), or it came back as a new incarnation. Sticky; the first reason stays (what
    // the compute side tells its users: a silence may be a host that gave the proxies no core,
    // not a cluster that is gone). True if newly marked.
    enum class DownReason : uint8_t { kUp = 0, kSilent, kHungUp, kRestarted, kNeverCame };
    bool mark_cluster_down(uint32_t c, DownReason why) {
        uint8_t up = 0;
        return c < clusters_ && down_[c].compare_exchange_strong(up, static_cast<uint8_t>(why));
    }
    bool cluster_down(uint32_t c) const { return c < clusters_ && down_[c].load(std::memory_order_relaxed) != 0; }
    DownReason down_reason(uint32_t c) const {
        return c < clusters_ ? static_cast<DownReason>(down_[c].load(std::memory_order_acquire)) : DownReason::kUp;
    }
    // Done: it said (through a proxy status message) that its work is finished.
    void mark_cluster_done(uint32_t c) { if (c < clusters_) done_[c].store(true, std::memory_order_release); }
    bool cluster_done(uint32_t c) const { return c < clusters_ && done_[c].load(std::memory_order_acquire); }
    // This cluster's own work is finished: the proxies tell every other cluster.
    void set_local_done() { local_done_.store(true, std::memory_order_release); }
    bool local_done() const { return local_done_.load(std::memory_order_relaxed); }
    // Idle: it said (kStatusIdle) that it finished, heard every other cluster finish and has all it
    // sent acked, so it needs no answer from anyone any more; this cluster says the same once it is.
    void mark_cluster_idle(uint32_t c) { if (c < clusters_) idle_[c].store(true, std::memory_order_release); }
    bool cluster_idle(uint32_t c) const { return c < clusters_ && idle_[c].load(std::memory_order_acquire); }
    void set_local_idle() { local_idle_.store(true, std::memory_order_release); }
    bool local_idle() const { return local_idle_.load(std::memory_order_relaxed); }

    // --- load: messages a proxy holds unsent (its backlog), published by the proxy ---
    void publish_proxy_load(uint32_t proxy, uint32_t n) { loads_[proxy].v.store(n, std::memory_order_relaxed); }
    uint32_t proxy_load(uint32_t proxy) const { return loads_[proxy].v.load(std::memory_order_relaxed); }

   private:
    struct alignas(64) Load {
        std::atomic<uint32_t> v{0};
    };
    uint32_t threads_ = 0, proxies_ = 0, clusters_ = 0;
    std::vector<rte_ring*> to_proxy_, to_thread_;
    std::vector<Waker> proxy_wakers_, thread_wakers_;
    std::unique_ptr<std::atomic<uint16_t>[]> ports_{new std::atomic<uint16_t>[65536]()};  // owner thread + 1
    std::unique_ptr<std::atomic<uint8_t>[]> down_;  // DownReason
    std::unique_ptr<std::atomic<bool>[]> done_;
    std::atomic<bool> local_done_{false};
    std::unique_ptr<std::atomic<bool>[]> idle_;
    std::atomic<bool> local_idle_{false};
    std::unique_ptr<Load[]> loads_;
};

}  // namespace iccs
