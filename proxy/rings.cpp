// rings.cpp: see rings.hpp.
#include "rings.hpp"

#include <linux/futex.h>
#include <rte_errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>

namespace iccs {

void Waker::sleep(uint32_t timeout_us) {
    timespec ts{static_cast<time_t>(timeout_us / 1'000'000), static_cast<long>(timeout_us % 1'000'000) * 1000};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(word_), shared_ ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE, 1, &ts, nullptr,
            0);
    word_->store(0, std::memory_order_relaxed);
}

void Waker::wake() {
    if (word_->load(std::memory_order_seq_cst) == 0) return;
    const uint32_t was = word_->exchange(0, std::memory_order_seq_cst);
    if (was == 0) return;
    if (was == kOnEventfd && efd_ >= 0) {
        const uint64_t one = 1;
        [[maybe_unused]] const ssize_t w = write(efd_, &one, sizeof one);
    } else {
        syscall(SYS_futex, reinterpret_cast<uint32_t*>(word_), shared_ ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, 1, nullptr,
                nullptr, 0);
    }
}

bool ClusterRings::port_bind(uint16_t port, uint16_t thread) {
    uint16_t expect = 0;
    if (ports_[port].compare_exchange_strong(expect, static_cast<uint16_t>(thread + 1), std::memory_order_acq_rel))
        return true;
    return expect == thread + 1;  // already ours
}

uint16_t ClusterRings::port_bind_ephemeral(uint16_t thread) {
    // Start where the last search ended, so a closed port is not reused at once.
    static std::atomic<uint32_t> next{0};
    constexpr uint32_t kRange = 65536 - kFirstEphemeralPort;
    for (uint32_t i = 0; i < kRange; ++i) {
        const auto port = static_cast<uint16_t>(kFirstEphemeralPort + next.fetch_add(1) % kRange);
        uint16_t expect = 0;
        if (ports_[port].compare_exchange_strong(expect, static_cast<uint16_t>(thread + 1)))
            return port;
    }
    return 0;
}

bool ClusterRings::create(const std::string& prefix, uint32_t threads, uint32_t proxies, uint32_t entries,
                          uint32_t clusters, std::string& err) {
    threads_ = threads;
    proxies_ = proxies;
    clusters_ = clusters;
    down_.reset(new std::atomic<uint8_t>[clusters]());
    done_.reset(new std::atomic<bool>[clusters]());
    idle_.reset(new std::atomic<bool>[clusters]());
    loads_.reset(new Load[proxies]);
    proxy_wakers_ = std::vector<Waker>(proxies);
    thread_wakers_ = std::vector<Waker>(threads);
    for (uint32_t t = 0; t < threads; ++t) {
        for (uint32_t p = 0; p < proxies; ++p) {
            const std::string name = prefix + "t" + std::to_string(t) + "p" + std::to_string(p);
            rte_ring* r = rte_ring_create(name.c_str(), entries, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
            if (r == nullptr) {
                err = "cannot create ring " + name + ": " + rte_strerror(rte_errno);
                return false;
            }
            to_proxy_.push_back(r);
        }
        const std::string name = prefix + "in" + std::to_string(t);
        rte_ring* r = rte_ring_create(name.c_str(), entries, SOCKET_ID_ANY, RING_F_SC_DEQ);
        if (r == nullptr) {
            err = "cannot create ring " + name + ": " + rte_strerror(rte_errno);
            return false;
        }
        to_thread_.push_back(r);
    }
    return true;
}

ClusterRings::~ClusterRings() {
    auto drain = [](rte_ring* r) {
        void* p;
        while (rte_ring_dequeue(r, &p) == 0) pkt_free(static_cast<PktBuf*>(p));
        rte_ring_free(r);
    };
    for (rte_ring* r : to_proxy_) drain(r);
    for (rte_ring* r : to_thread_) drain(r);
}

}  // namespace iccs
