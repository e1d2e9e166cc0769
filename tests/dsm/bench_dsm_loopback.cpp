// bench_dsm_loopback.cpp: the DSM protocol's own costs between 2 simulated clusters of the
// in-process loopback runtime (mailboxes, no network): page fetch (fault + request + install),
// diff per fully written page (twin compare + message + apply + ack), lock acquire+release of a
// lock homed at the other cluster, and a 2-cluster barrier. Not a test; the transports' figures
// come with `./iccs bench dsm` once the runtime is merged. Usage: dsm-bench-loopback [rounds]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "dsm.hpp"
#include "loopback_runtime.hpp"

using namespace iccs;
using namespace iccs::dsm;

namespace {
double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}
double pct(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[size_t(p * double(v.size() - 1))];
}
}  // namespace

int main(int argc, char** argv) {
    const int rounds = argc > 1 ? atoi(argv[1]) : 200;
    testing::LoopbackWorld world(2, 1);
    std::vector<std::unique_ptr<DsmNode>> nodes;
    for (uint16_t c = 0; c < 2; c++) {
        DsmConfig cfg;
        cfg.base_addr = 0x300000000000ull + uint64_t(c) * (1ull << 40);
        cfg.region_bytes = 64ull << 20;
        std::string err;
        nodes.push_back(DsmNode::attach(world.runtime(c), cfg, err));
        if (!nodes.back()) {
            fprintf(stderr, "%s\n", err.c_str());
            return 1;
        }
    }
    const uint64_t pages = uint64_t(rounds) * 2;  // even pages homed at 0, odd at 1
    uint64_t off = 0;
    for (auto& n : nodes) off = uint64_t(static_cast<uint8_t*>(n->alloc(pages * 4096, 4096)) - static_cast<uint8_t*>(n->base()));
    std::vector<double> fetch_us, diff_us, lock_us, bar_us;
    std::vector<std::thread> th;
    for (uint16_t c = 0; c < 2; c++)
        th.emplace_back([&, c] {
            DsmNode& n = *nodes[c];
            n.bind_thread(0);
            n.start_parallel();
            auto* base = static_cast<uint8_t*>(n.base()) + off;
            auto now = [] { return std::chrono::steady_clock::now(); };
            auto us = [](auto a, auto b) { return std::chrono::duration<double, std::micro>(b - a).count(); };
            // Diff: cluster 1 fully rewrites one page homed at 0 and releases it (flush), per round.
            for (int r = 0; r < rounds; r++) {
                if (c == 1) {
                    uint8_t* p = base + uint64_t(2 * r) * 4096;
                    for (int i = 0; i < 4096; i += 4) *reinterpret_cast<uint32_t*>(p + i) = uint32_t(r * 4096 + i + 1);
                    auto t0 = now();
                    n.flush();
                    diff_us.push_back(us(t0, now()));
                }
            }
            n.barrier(1);
            n.barrier(2);
            // Cluster 1 writes every odd page (homed at 1), barrier: cluster 0 fetches each on read.
            if (c == 1)
                for (int r = 0; r < rounds; r++) base[uint64_t(2 * r + 1) * 4096] = uint8_t(r + 1);
            n.barrier(3);
            if (c == 0)
                for (int r = 0; r < rounds; r++) {
                    volatile uint8_t* p = base + uint64_t(2 * r + 1) * 4096;
                    auto t0 = now();
                    const uint8_t v = *p;
                    fetch_us.push_back(us(t0, now()));
                    if (v != uint8_t(r + 1)) fprintf(stderr, "bench: stale page %d\n", r);
                }
            n.barrier(4);
            // Lock homed at the other cluster: acquire + release, uncontended (one cluster at a time).
            for (uint16_t turn = 0; turn < 2; turn++) {
                if (c == turn)
                    for (int r = 0; r < rounds; r++) {
                        auto t0 = now();
                        n.lock(uint32_t(11 - turn));  // 11 % 2 = 1 for cluster 0, 10 % 2 = 0 for cluster 1
                        n.unlock(uint32_t(11 - turn));
                        if (c == 0) lock_us.push_back(us(t0, now()));
                    }
                n.barrier(5);
            }
            for (int r = 0; r < rounds; r++) {
                auto t0 = now();
                n.barrier(6);
                if (c == 0) bar_us.push_back(us(t0, now()));
            }
            n.unbind_thread();
        });
    for (auto& t : th) t.join();
    printf("dsm over the in-process loopback runtime, 2 clusters x 1 thread, %d rounds, 4 KiB pages (us)\n", rounds);
    printf("%-34s %9s %9s %9s\n", "operation", "median", "p10", "p90");
    auto row = [&](const char* name, const std::vector<double>& v) {
        printf("%-34s %9.2f %9.2f %9.2f\n", name, median(v), pct(v, 0.1), pct(v, 0.9));
    };
    row("page fetch (fault to data)", fetch_us);
    row("release of 1 fully written page", diff_us);
    row("lock acquire+release (remote)", lock_us);
    row("barrier (2 clusters)", bar_us);
    world.stop();
    for (auto& n : nodes) printf("%s", n->format_counters().c_str());
    return 0;
}
