// dsm_machine.hpp: a test machine of C simulated clusters x T threads (loopback runtime), one
// DsmNode per cluster, each region at its own base in this one process.
#pragma once

#include <catch2/catch.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "dsm.hpp"
#include "loopback_runtime.hpp"

namespace dsmtest {

using namespace iccs;
using namespace iccs::dsm;

inline DsmConfig test_config(uint32_t page = 4096) {
    DsmConfig cfg;
    cfg.base_addr = 0x300000000000ull;
    cfg.region_bytes = 16ull << 20;
    cfg.page_bytes = page;
    cfg.max_sync_ids = 1024;
    return cfg;
}

struct Machine {
    uint16_t C, T;
    testing::LoopbackWorld world;
    std::vector<std::unique_ptr<DsmNode>> nodes;

    // `max_message`: the loopback runtime's message limit (lowered to force split diffs/notices).
    Machine(uint16_t clusters, uint16_t threads, DsmConfig cfg = test_config(), uint32_t max_message = 16u << 20)
        : C(clusters), T(threads), world(clusters, threads, max_message) {
        for (uint16_t c = 0; c < C; c++) {
            DsmConfig k = cfg;
            k.base_addr = cfg.base_addr + uint64_t(c) * (1ull << 40);  // 1 TiB apart
            std::string err;
            nodes.push_back(DsmNode::attach(world.runtime(c), k, err));
            INFO(err);
            REQUIRE(nodes.back());
        }
    }
    ~Machine() {
        world.stop();  // no handler may run once the nodes are gone
        nodes.clear();
    }
    // The same address in cluster c's region as `off` bytes into it.
    template <class X> X* at(uint16_t c, uint64_t off) {
        return reinterpret_cast<X*>(static_cast<uint8_t*>(nodes[c]->base()) + off);
    }
    // Runs body(cluster, thread, node) on C*T threads, each bound to its cluster's node, after
    // every cluster's thread 0 turned the region coherent (start_parallel).
    void run(const std::function<void(uint16_t, uint16_t, DsmNode&)>& body) {
        std::vector<std::atomic<int>> started(C), bound(C);
        for (auto& s : started) s = 0;
        for (auto& b : bound) b = 0;
        std::atomic<int> failed_start{0};
        std::vector<std::thread> th;
        for (uint16_t c = 0; c < C; c++)
            for (uint16_t t = 0; t < T; t++)
                th.emplace_back([&, c, t] {
                    DsmNode& n = *nodes[c];
                    n.bind_thread(t);
                    bound[c]++;
                    if (t == 0) {
                        // Every thread of the cluster bound before the parallel section starts, as
                        // a program's threads are (CREATE): a thread the scheduler started late was
                        // not yet bound at the first barrier, which then counted it out (dsm-homes:
                        // "a barrier some bound thread is not in" moved homes, CI on 2 cores).
                        while (bound[c].load() < T) std::this_thread::yield();
                        if (n.start_parallel() != DsmStatus::kOk) failed_start++;
                        started[c] = 1;
                    } else {
                        while (!started[c].load()) std::this_thread::yield();
                    }
                    if (!failed_start.load()) body(c, t, n);
                    n.unbind_thread();
                });
        for (auto& x : th) x.join();
        REQUIRE(failed_start.load() == 0);
    }
};

// The same allocation at every cluster (the same offset in each region): its offset.
inline uint64_t alloc_everywhere(Machine& m, uint64_t bytes) {
    uint64_t off = 0;
    for (auto& n : m.nodes) off = uint64_t(static_cast<uint8_t*>(n->alloc(bytes, 4096)) - static_cast<uint8_t*>(n->base()));
    return off;
}

// A counter of cluster c's compute endpoints, summed (the loopback runtime counts per endpoint),
// e.g. &RtEndpointCounters::requests.
template <class Field> uint64_t compute_endpoints_sum(Machine& m, uint16_t c, Field field) {
    uint64_t s = 0;
    for (uint16_t t = 0; t < m.T; t++) s += m.world.runtime(c).endpoint(t).counters().*field;
    return s;
}

// Assertions from worker threads: Catch2 2.x is not thread-safe, so workers count failures and
// keep the first message; the test thread asserts after the join.
struct Failures {
    std::atomic<uint64_t> n{0};
    std::mutex mu;
    std::string first;
    void fail(const std::string& m) {
        if (n++ == 0) {
            std::lock_guard<std::mutex> g(mu);
            first = m;
        }
    }
    void check() {
        INFO(first);
        REQUIRE(n.load() == 0);
    }
};

}  // namespace dsmtest
