// DSM litmus tests over 2 and 3 simulated clusters of 2 threads: lock release -> acquire, barrier,
// false sharing, flags, condition variables, get-next-index, page sizes, and the counters.
#include <chrono>
#include <cstring>
#include <string>

#include "dsm_machine.hpp"

using namespace dsmtest;

TEST_CASE("dsm: data written before a lock release is seen after the matching acquire", "[dsm-litmus]") {
    const uint16_t C = GENERATE(2, 3);
    Machine m(C, 2);
    // Shared: a counter and 3 pages of data that must always equal it (any stale page shows).
    constexpr uint64_t kData = 3 * 4096 / 4;
    uint64_t off_x = 0, off_d = 0;
    for (auto& n : m.nodes) {  // the sequential prefix, replayed identically by every cluster
        off_x = uint64_t(static_cast<uint8_t*>(n->alloc(sizeof(uint32_t))) - static_cast<uint8_t*>(n->base()));
        off_d = uint64_t(static_cast<uint8_t*>(n->alloc(kData * 4, 4096)) - static_cast<uint8_t*>(n->base()));
    }
    constexpr int kRounds = 40;
    Failures f;
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        auto* x = m.at<uint32_t>(c, off_x);
        auto* d = m.at<uint32_t>(c, off_d);
        for (int r = 0; r < kRounds; r++) {
            if (n.lock(7) != DsmStatus::kOk) f.fail("lock: " + DsmNode::error());
            const uint32_t v = *x;
            for (uint64_t i = 0; i < kData; i += 97)
                if (d[i] != v) f.fail("cluster " + std::to_string(c) + " saw d[" + std::to_string(i) + "] = " +
                                      std::to_string(d[i]) + " after acquiring, counter " + std::to_string(v));
            for (uint64_t i = 0; i < kData; i++) d[i] = v + 1;
            *x = v + 1;
            if (n.unlock(7) != DsmStatus::kOk) f.fail("unlock: " + DsmNode::error());
        }
        n.barrier(1);
        const uint32_t total = uint32_t(kRounds) * C * 2;
        if (*x != total) f.fail("final counter " + std::to_string(*x));
        // Every cluster reads every data page after the barrier: pages written last by another
        // cluster were invalidated here and are fetched (so the counters below hold whatever the
        // interleaving was).
        for (uint64_t i = 0; i < kData; i++)
            if (d[i] != total) {
                f.fail("after the barrier d[" + std::to_string(i) + "] = " + std::to_string(d[i]));
                break;
            }
    });
    f.check();
    // The traffic was real: clusters other than a page's home fetched, diffed and invalidated.
    for (uint16_t c = 0; c < C; c++) {
        INFO(m.nodes[c]->format_counters());
        CHECK(m.nodes[c]->counters().page_fetches.load() > 0);
        CHECK(m.nodes[c]->counters().diffs_sent.load() > 0);
        CHECK(m.nodes[c]->counters().invalidations.load() > 0);
        CHECK(m.nodes[c]->counters().lock_acquires.load() == 2 * kRounds);
        CHECK(m.nodes[c]->format_counters().find("page_fetches") != std::string::npos);
    }
}

TEST_CASE("dsm: a home page written again after its release, without a fault, is seen by a cluster that read it "
          "before",
          "[dsm-litmus]") {
    // A home page stays writable after the release that published its write notice, and its
    // later writes are not tracked until another cluster fetches it (dsm.cpp, h_fetch). Page D
    // (home: cluster 0) is written twice per round by cluster 0, each time in its own critical
    // section, then a turn counter (page T, home 0) tells cluster 1, which reads D with the copy
    // of the last round in hand; an ack (page A, home 1) lets the next round start. Without the
    // fetch making D tracked again both writes of a round would go unnoticed, and cluster 1 would
    // read the round before.
    const HomePolicy home = GENERATE(HomePolicy::kAllocBlock, HomePolicy::kBlock);
    DsmConfig cfg = test_config();
    cfg.home = home;  // block homes: where home pages stay writable after their release
    Machine m(2, 1, cfg);
    uint64_t base_off = 0;
    for (auto& n : m.nodes)
        base_off = uint64_t(static_cast<uint8_t*>(n->alloc(8 * 4096, 4096)) - static_cast<uint8_t*>(n->base()));
    REQUIRE(base_off == 0);
    // Both policies: the 8 pages' first 4 live at cluster 0, the last 4 at cluster 1.
    const uint64_t off_d = 0, off_t = 4096, off_a = 4 * 4096;
    constexpr uint32_t kRounds = 30;
    Failures f;
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        auto* d = m.at<uint32_t>(c, off_d);
        auto* turn = m.at<uint32_t>(c, off_t);
        auto* ack = m.at<uint32_t>(c, off_a);
        auto locked = [&](uint32_t l, auto&& fn) {
            if (n.lock(l) != DsmStatus::kOk) f.fail("lock: " + DsmNode::error());
            fn();
            if (n.unlock(l) != DsmStatus::kOk) f.fail("unlock: " + DsmNode::error());
        };
        // A lost notice shows as a value that never comes: each wait gives up after 5 s.
        auto wait_for = [&](uint32_t l, const uint32_t* v, uint32_t want, const char* what) {
            const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
            for (uint32_t seen = 0; seen != want;) {
                locked(l, [&] { seen = *v; });
                if (seen != want && std::chrono::steady_clock::now() > until) {
                    f.fail("cluster " + std::to_string(c) + " never saw " + what + " " + std::to_string(want) +
                           " (still " + std::to_string(seen) + ")");
                    return false;
                }
            }
            return true;
        };
        for (uint32_t r = 1; r <= kRounds; r++) {
            if (c == 0) {
                locked(4, [&] { d[0] = 10 * r + 1, d[1000] = 10 * r + 1; });
                locked(4, [&] { d[0] = 10 * r + 2, d[1000] = 10 * r + 2; });
                locked(5, [&] { *turn = r; });
                if (!wait_for(6, ack, r, "ack")) break;
            } else {
                if (!wait_for(5, turn, r, "turn")) break;
                locked(4, [&] {
                    if (d[0] != 10 * r + 2 || d[1000] != 10 * r + 2)
                        f.fail("round " + std::to_string(r) + ": cluster 1 read " + std::to_string(d[0]) + " / " +
                               std::to_string(d[1000]) + ", expected " + std::to_string(10 * r + 2));
                });
                locked(6, [&] { *ack = r; });
            }
        }
    });
    f.check();
    // The second write of each round went untracked: fewer write faults at cluster 0 than writes.
    INFO(m.nodes[0]->format_counters());
    CHECK(m.nodes[0]->counters().write_faults.load() < 3 * kRounds);  // 3 writes a round: 2 of D, 1 of T
    CHECK(m.nodes[1]->counters().page_fetches.load() >= kRounds);
}

TEST_CASE("dsm: message passing through a lock (writer on one cluster, readers on the others)", "[dsm-litmus]") {
    const uint16_t C = GENERATE(2, 3);
    Machine m(C, 2);
    uint64_t off = 0;
    for (auto& n : m.nodes) off = uint64_t(static_cast<uint8_t*>(n->alloc(5 * 4096, 4096)) - static_cast<uint8_t*>(n->base()));
    Failures f;
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        auto* data = m.at<uint64_t>(c, off);          // 4 pages of data
        auto* flag = m.at<uint64_t>(c, off + 4 * 4096);  // its own page
        if (c == C - 1 && t == 1) {
            for (uint64_t i = 0; i < 4 * 512; i++) data[i] = i * 2654435761u;
            n.lock(3);
            *flag = 1;
            n.unlock(3);
            return;
        }
        for (;;) {
            n.lock(3);
            const uint64_t fl = *flag;
            if (fl) {
                for (uint64_t i = 0; i < 4 * 512; i++)
                    if (data[i] != i * 2654435761u) {
                        f.fail("cluster " + std::to_string(c) + " read data[" + std::to_string(i) + "] stale after the flag");
                        break;
                    }
            }
            n.unlock(3);
            if (fl) break;
        }
    });
    f.check();
}

TEST_CASE("dsm: data written before a barrier is seen by every thread after it", "[dsm-litmus]") {
    const uint16_t C = GENERATE(2, 3);
    const uint32_t page = GENERATE(4096u, 16384u);
    const HomePolicy home = GENERATE(HomePolicy::kRoundRobin, HomePolicy::kBlock, HomePolicy::kAllocBlock);
    DsmConfig cfg = test_config(page);
    cfg.home = home;
    Machine m(C, 2, cfg);
    const int P = C * 2;
    // One slot per thread, 1000 words each, so slots straddle pages.
    constexpr int kWords = 1000;
    uint64_t off = 0;
    for (auto& n : m.nodes) off = uint64_t(static_cast<uint8_t*>(n->alloc(uint64_t(P) * kWords * 4)) - static_cast<uint8_t*>(n->base()));
    Failures f;
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        auto* a = m.at<uint32_t>(c, off);
        const int me = c * 2 + t;
        for (uint32_t phase = 1; phase <= 6; phase++) {
            for (int i = 0; i < kWords; i++) a[me * kWords + i] = phase * 100000 + uint32_t(me) * 1000 + uint32_t(i);
            if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
            for (int j = 0; j < P; j++)
                for (int i = 0; i < kWords; i += 7)
                    if (a[j * kWords + i] != phase * 100000 + uint32_t(j) * 1000 + uint32_t(i)) {
                        f.fail("phase " + std::to_string(phase) + ": thread " + std::to_string(me) + " saw slot " +
                               std::to_string(j) + " word " + std::to_string(i) + " = " + std::to_string(a[j * kWords + i]));
                        j = P;
                        break;
                    }
            n.barrier(2);  // nobody overwrites a slot while another thread still checks it
        }
    });
    f.check();
    for (auto& n : m.nodes) CHECK(n->counters().barriers.load() == 2 * 6 * 2);
    // With 4 KiB pages round-robin spreads the slots' 4+ pages over every cluster: each fetched some.
    if (home == HomePolicy::kRoundRobin && page == 4096)
        for (auto& n : m.nodes) CHECK(n->counters().page_fetches.load() > 0);
}

TEST_CASE("dsm: alloc-block homes each cluster's block of an array at that cluster (owner computes: no diff)",
          "[dsm-litmus]") {
    const uint16_t C = GENERATE(2, 3);
    const HomePolicy home = GENERATE(HomePolicy::kRoundRobin, HomePolicy::kAllocBlock);
    DsmConfig cfg = test_config();
    cfg.home = home;
    Machine m(C, 2, cfg);
    constexpr uint64_t kPagesPerCluster = 6;
    const uint64_t words = C * kPagesPerCluster * 1024;  // 4-byte words, C blocks of 6 pages
    uint64_t off_small = 0, off = 0;
    for (auto& n : m.nodes) {
        // A small allocation first (under one page: round-robin), so the array does not start
        // at page 0 and its blocks are found from the allocation, not from the region.
        off_small = uint64_t(static_cast<uint8_t*>(n->alloc(100)) - static_cast<uint8_t*>(n->base()));
        off = uint64_t(static_cast<uint8_t*>(n->alloc(words * 4, 4096)) - static_cast<uint8_t*>(n->base()));
    }
    CHECK(off_small == 0);
    CHECK(off == 4096);
    Failures f;
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        auto* a = m.at<uint32_t>(c, off);
        const uint64_t per = words / C, first = c * per + t * (per / 2);  // this thread's half of its cluster's block
        for (uint32_t round = 1; round <= 3; round++) {
            for (uint64_t i = first; i < first + per / 2; i++) a[i] = uint32_t(round * 1000003u + i);
            if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
            for (uint64_t i = 0; i < words; i += 97)
                if (a[i] != uint32_t(round * 1000003u + i)) {
                    f.fail("round " + std::to_string(round) + ": cluster " + std::to_string(c) + " read word " +
                           std::to_string(i) + " = " + std::to_string(a[i]));
                    break;
                }
            n.barrier(2);
        }
    });
    f.check();
    uint64_t diffs = 0;
    for (auto& n : m.nodes) diffs += n->counters().diffs_sent.load();
    if (home == HomePolicy::kAllocBlock) CHECK(diffs == 0);  // every write was to a page homed at its writer
    else CHECK(diffs > 0);  // round-robin: every other page of a block is homed elsewhere
}

TEST_CASE("dsm: false sharing (clusters write different words of one page between barriers) loses no write",
          "[dsm-litmus]") {
    const uint16_t C = GENERATE(2, 3);
    Machine m(C, 2);
    const uint32_t P = C * 2;
    uint64_t off = 0;
    for (auto& n : m.nodes) off = uint64_t(static_cast<uint8_t*>(n->alloc(4096, 4096)) - static_cast<uint8_t*>(n->base()));
    Failures f;
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        auto* w = m.at<uint32_t>(c, off);  // 1024 words of one page, word i belongs to thread i mod P
        const uint32_t me = c * 2 + t;
        for (uint32_t round = 1; round <= 8; round++) {
            for (uint32_t i = me; i < 1024; i += P) w[i] = round * 10000 + i;
            n.barrier(4);
            for (uint32_t i = 0; i < 1024; i++)
                if (w[i] != round * 10000 + i) {
                    f.fail("round " + std::to_string(round) + ": word " + std::to_string(i) + " = " + std::to_string(w[i]) +
                           " at cluster " + std::to_string(c));
                    break;
                }
            n.barrier(4);
        }
    });
    f.check();
    // Every non-home cluster sent diffs of that page.
    uint64_t diffs = 0;
    for (auto& n : m.nodes) diffs += n->counters().diffs_sent.load();
    CHECK(diffs >= uint64_t(C - 1) * 8);
}

TEST_CASE("dsm: clusters writing different bytes of one word between barriers both keep their writes",
          "[dsm-litmus]") {
    // Byte i of two pages belongs to thread i mod P: every 8-byte word is written by every thread,
    // so by every cluster. Each thread writes its bytes 3 times in an interval, the last time with
    // the value of the first; some values equal what the byte held before the phase (a write that
    // changes nothing). A diff of whole words would carry a neighbour's stale byte home.
    const uint16_t C = GENERATE(2, 3);
    const HomePolicy home = GENERATE(HomePolicy::kAllocBlock, HomePolicy::kRoundRobin);
    DsmConfig cfg = test_config();
    cfg.home = home;
    Machine m(C, 2, cfg);
    const uint32_t P = C * 2, kBytes = 2 * 4096;
    uint64_t off = 0;
    for (auto& n : m.nodes) off = uint64_t(static_cast<uint8_t*>(n->alloc(kBytes, 4096)) - static_cast<uint8_t*>(n->base()));
    auto value = [](uint32_t round, uint32_t write, uint32_t i) { return uint8_t((round / 2) * 29 + write * 5 + i * 3); };
    Failures f;
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        auto* b = m.at<uint8_t>(c, off);
        const uint32_t me = c * 2 + t;
        for (uint32_t round = 1; round <= 8; round++) {
            for (uint32_t w = 0; w < 3; w++)
                for (uint32_t i = me; i < kBytes; i += P) b[i] = value(round, w == 2 ? 0 : w, i);
            n.barrier(4);
            for (uint32_t i = 0; i < kBytes; i++)
                if (b[i] != value(round, 0, i)) {
                    f.fail("round " + std::to_string(round) + ": byte " + std::to_string(i) + " = " + std::to_string(b[i]) +
                           " at cluster " + std::to_string(c) + ", written by thread " + std::to_string(i % P));
                    break;
                }
            n.barrier(4);
        }
    });
    f.check();
}

TEST_CASE("dsm: flags (PAUSE) and condition variables order data across clusters", "[dsm-litmus]") {
    Machine m(3, 2);
    uint64_t off = 0;
    for (auto& n : m.nodes) off = uint64_t(static_cast<uint8_t*>(n->alloc(3 * 4096, 4096)) - static_cast<uint8_t*>(n->base()));
    Failures f;
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        auto* data = m.at<uint32_t>(c, off);
        auto* q = m.at<uint32_t>(c, off + 8192);  // q[0] items queued, q[1] items taken, q[2 + k] item k
        if (c == 2 && t == 0) {
            for (int i = 0; i < 2048; i++) data[i] = uint32_t(i) ^ 0x5a5a5a5au;
            if (n.flag_set(20) != DsmStatus::kOk) f.fail("flag_set: " + DsmNode::error());
        } else {
            if (n.flag_wait(20) != DsmStatus::kOk) f.fail("flag_wait: " + DsmNode::error());
            for (int i = 0; i < 2048; i++)
                if (data[i] != (uint32_t(i) ^ 0x5a5a5a5au)) {
                    f.fail("stale data after WAITPAUSE at cluster " + std::to_string(c));
                    break;
                }
        }
        n.barrier(21);
        // Producer/consumer: thread (0,0) produces 5 items per consumer, the 5 others consume.
        if (c == 0 && t == 0) {
            for (uint32_t k = 0; k < 25; k++) {
                n.lock(22);
                q[2 + q[0]] = 1000 + q[0];
                q[0]++;
                n.cond_signal(23, false);
                n.unlock(22);
            }
        } else {
            for (int k = 0; k < 5; k++) {
                n.lock(22);
                while (q[1] == q[0]) n.cond_wait(23, 22);
                const uint32_t item = q[2 + q[1]];
                if (item != 1000 + q[1]) f.fail("consumer at cluster " + std::to_string(c) + " took a stale item");
                q[1]++;
                n.unlock(22);
            }
        }
        n.barrier(21);
        if (q[0] != 25 || q[1] != 25) f.fail("queue ends at " + std::to_string(q[0]) + "/" + std::to_string(q[1]));
    });
    f.check();
}

TEST_CASE("dsm: GETSUB hands out 0..last once across clusters, then -1, and resets for reuse", "[dsm-litmus]") {
    Machine m(2, 2);
    uint64_t off = 0;
    for (auto& n : m.nodes) off = uint64_t(static_cast<uint8_t*>(n->alloc(4 * 200 * 4, 4096)) - static_cast<uint8_t*>(n->base()));
    Failures f;
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        auto* got = m.at<uint32_t>(c, off);  // [round][index] -> taken count (per thread slot)
        const int me = c * 2 + t;
        for (int round = 0; round < 2; round++) {
            for (;;) {
                int64_t s = 0;
                if (n.getsub(30, 99, 4, s) != DsmStatus::kOk) f.fail("getsub: " + DsmNode::error());
                if (s == -1) break;
                if (s < 0 || s > 99) f.fail("getsub gave " + std::to_string(s));
                else got[(round * 4 + me) * 100 + s] += 1;  // only this thread writes its slots
            }
            n.barrier(31);
            if (me == 0)
                for (int i = 0; i < 100; i++) {
                    uint32_t sum = 0;
                    for (int p = 0; p < 4; p++) sum += got[(round * 4 + p) * 100 + i];
                    if (sum != 1) f.fail("round " + std::to_string(round) + ": index " + std::to_string(i) + " handed out " +
                                         std::to_string(sum) + " times");
                }
            n.barrier(31);
        }
    });
    f.check();
}

TEST_CASE("dsm: fences make flag spinning across clusters work", "[dsm-litmus]") {
    Machine m(2, 2);
    uint64_t off = 0;
    for (auto& n : m.nodes) off = uint64_t(static_cast<uint8_t*>(n->alloc(8192, 4096)) - static_cast<uint8_t*>(n->base()));
    Failures f;
    // Cluster 1's threads in their spin loop before the writer sets the flag: the flag's page is
    // homed at cluster 1, so a thread that started after the write read 1 at once and made no
    // spin fence (the count below failed so under load: 3 fences).
    std::atomic<int> spinning{0};
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        auto* data = m.at<volatile uint32_t>(c, off);
        auto* flag = m.at<volatile uint32_t>(c, off + 4096);
        if (c == 0 && t == 0) {
            while (spinning.load() < 2) std::this_thread::yield();
            for (int i = 0; i < 512; i++) data[i] = 77 + uint32_t(i);
            n.fence(DsmNode::Fence::kRelease);
            *flag = 1;
            n.fence(DsmNode::Fence::kRelease);
        } else if (c == 1) {
            for (int spins = 0; *flag == 0; spins++) {
                // without it the stale copy of the flag's page would spin forever
                n.fence(DsmNode::Fence::kAcquire);
                if (spins == 0) spinning++;
                if (spins > 200000) {
                    f.fail("flag never seen");
                    break;
                }
            }
            // The flag's value can be seen (at its home, or fetched) before this thread acquired the
            // writer's notices of the data: one more acquire after seeing it.
            n.fence(DsmNode::Fence::kAcquire);
            for (int i = 0; i < 512; i++)
                if (data[i] != 77 + uint32_t(i)) {
                    f.fail("data stale after the flag");
                    break;
                }
        }
    });
    f.check();
    // A fence is one exchange with the fence lock's home: no lock request (each fence was two).
    for (auto& n : m.nodes) CHECK(n->counters().lock_requests.load() == 0);
    CHECK(m.nodes[0]->counters().fences.load() == 2);
    CHECK(m.nodes[1]->counters().fences.load() >= 4);  // both threads of cluster 1 spin
}

TEST_CASE("dsm: pages fetched with a faulting neighbour are current, and a later write notice invalidates them",
          "[dsm-litmus]") {
    // alloc-block homes: the first 8 pages of a 16-page allocation are homed at cluster 0. Cluster 0
    // rewrites all 16 each round; after the barrier cluster 1's copies of pages 0-7 are invalid, its
    // read of page 0 brings pages 0-7 in one request (kFetchPages), and the reads of pages 1-7
    // fault no more. The next round's writes must reach every one of them: a prefetched copy is
    // invalidated like a fetched one.
    Machine m(2, 1);
    constexpr uint32_t kPages = 16, kWordsPerPage = 4096 / 4;
    uint64_t off = 0;
    for (auto& n : m.nodes) off = uint64_t(static_cast<uint8_t*>(n->alloc(kPages * 4096, 4096)) - static_cast<uint8_t*>(n->base()));
    constexpr uint32_t kRounds = 6;
    Failures f;
    uint64_t faults_in_run[kRounds] = {}, fetches_in_run[kRounds] = {};
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        auto* d = m.at<uint32_t>(c, off);
        for (uint32_t r = 0; r < kRounds; r++) {
            if (c == 0)
                for (uint32_t p = 0; p < kPages; p++) d[p * kWordsPerPage + (r * 7 + p) % kWordsPerPage] = r * 100 + p + 1;
            if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
            if (c == 1) {
                const uint64_t faults0 = n.counters().read_faults.load(), fetches0 = n.counters().page_fetches.load();
                for (uint32_t p = 0; p < 8; p++) {
                    const uint32_t got = d[p * kWordsPerPage + (r * 7 + p) % kWordsPerPage];
                    if (got != r * 100 + p + 1)
                        f.fail("round " + std::to_string(r) + ": cluster 1 read " + std::to_string(got) + " on page " +
                               std::to_string(p) + ", cluster 0 wrote " + std::to_string(r * 100 + p + 1));
                }
                faults_in_run[r] = n.counters().read_faults.load() - faults0;
                fetches_in_run[r] = n.counters().page_fetches.load() - fetches0;
            }
            if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        }
    });
    f.check();
    for (uint32_t r = 0; r < kRounds; r++) {
        INFO("round " << r << ": " << faults_in_run[r] << " read faults, " << fetches_in_run[r] << " fetch requests");
        CHECK(faults_in_run[r] == 1);
        CHECK(fetches_in_run[r] == 1);
    }
}

TEST_CASE("dsm: a thread reading another cluster's pages in order fetches them in runs that double, up to 32 "
          "pages, and every page read is current",
          "[dsm-litmus]") {
    // alloc-block homes: the first 64 pages of a 128-page allocation are homed at cluster 0, which
    // rewrites them every round. Even rounds, cluster 1 reads all 64 in order: a read fault on the
    // page right after its last fetched run doubles the run, 8 + 16 + 32 + 8 (the last 8 of that
    // home): 4 requests (before: 8 of 8 pages). Odd rounds, it reads every other run of 8 pages: no
    // fault follows a run, every fetch stays at 8 pages, and the pages skipped are not fetched.
    Machine m(2, 1);
    constexpr uint32_t kPages = 64, kWordsPerPage = 4096 / 4, kRounds = 6;
    const uint64_t off = alloc_everywhere(m, 2 * kPages * 4096);
    Failures f;
    uint64_t fetches_in_round[kRounds] = {}, faults_in_round[kRounds] = {};
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        auto* d = m.at<volatile uint32_t>(c, off);
        for (uint32_t r = 0; r < kRounds; r++) {
            if (c == 0)
                for (uint32_t p = 0; p < kPages; p++)
                    for (uint32_t w = 0; w < kWordsPerPage; w += 64) d[p * kWordsPerPage + w] = r * 1000 + p * 3 + w;
            if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
            if (c == 1) {
                const uint64_t fetches0 = n.counters().page_fetches.load(), faults0 = n.counters().read_faults.load();
                for (uint32_t p = 0; p < kPages; p++) {
                    if (r % 2 == 1 && (p / 8) % 2 == 1) continue;
                    for (uint32_t w = 0; w < kWordsPerPage; w += 64)
                        if (d[p * kWordsPerPage + w] != r * 1000 + p * 3 + w) {
                            f.fail("round " + std::to_string(r) + ": cluster 1 read " + std::to_string(d[p * kWordsPerPage + w]) +
                                   " on page " + std::to_string(p) + ", cluster 0 wrote " + std::to_string(r * 1000 + p * 3 + w));
                            break;
                        }
                }
                fetches_in_round[r] = n.counters().page_fetches.load() - fetches0;
                faults_in_round[r] = n.counters().read_faults.load() - faults0;
            }
            if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        }
    });
    f.check();
    for (uint32_t r = 0; r < kRounds; r++) {
        INFO("round " << r << (r % 2 ? " (every other run of 8 pages)" : " (all 64 pages in order)") << ": "
                      << fetches_in_round[r] << " fetch requests, " << faults_in_round[r] << " read faults");
        CHECK(fetches_in_round[r] == 4);
        CHECK(faults_in_round[r] == 4);
    }
}
