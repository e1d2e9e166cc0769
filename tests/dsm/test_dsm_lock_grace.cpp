// Lock grace (dsm/PROTOCOL.md, "Lock grace" and after): a token recalled while its cluster uses the
// lock stays there a while, so its cluster's re-acquires send nothing; it grows for a lock both
// clusters keep asking for, never delays a cluster that waits for another, and ends early once its
// cluster stops taking the lock (a few of the lock's own reuse gaps there).
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "dsm_machine.hpp"

using namespace dsmtest;

namespace {
uint64_t offset_of(DsmNode& n, void* p) { return uint64_t(static_cast<uint8_t*>(p) - static_cast<uint8_t*>(n.base())); }

uint64_t msgs_sent(Machine& m, uint16_t c) { return compute_endpoints_sum(m, c, &RtEndpointCounters::msgs_sent); }

DsmConfig with_grace(uint32_t lock_grace_us) {
    DsmConfig cfg = test_config();
    cfg.lock_grace_us = lock_grace_us;
    return cfg;
}
}  // namespace

TEST_CASE("dsm locks: a token recalled while its cluster uses it stays there for the grace (its re-acquires send "
          "nothing), then leaves with every write made under it",
          "[dsm-locks]") {
    // Cluster 1 holds L, taken twice in a row, when cluster 0 asks for it (the home recalls the
    // token while it is held).
    // Its release and 50 re-acquires within the grace ask nobody (before the grace, the release
    // gave the token back and every re-acquire asked the home). Then it goes on taking L, as a
    // loop of inserts takes a cell lock: the token leaves once the grace is over.
    // burst false: cluster 1 takes L once only before the recall, so it is not in a burst of use:
    // its release gives the token back at once, as with no grace.
    const bool burst = GENERATE(true, false);
    Machine m(2, 1, with_grace(1'000'000));
    uint64_t off = 0;
    for (auto& n : m.nodes) off = offset_of(*n, n->alloc(4096, 4096));
    constexpr uint32_t kL = 4;  // homed at cluster 0: cluster 1's first acquire asks it
    constexpr uint32_t kAgain = 50;
    Failures f;
    std::atomic<int> step{0};
    std::atomic<bool> got{false};
    uint64_t req_before = 0, req_after = 0, sent_before = 0, sent_after = 0;
    double waited_s = 0;
    uint32_t seen = 0;
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        auto* x = m.at<uint32_t>(c, off);
        if (c == 1) {
            // Taken twice in a row: a lock in a burst of use here (a lock taken now and then gets
            // no grace).
            if (burst && (n.lock(kL) != DsmStatus::kOk || n.unlock(kL) != DsmStatus::kOk))
                f.fail("cluster 1 lock: " + DsmNode::error());
            if (n.lock(kL) != DsmStatus::kOk) f.fail("cluster 1 lock: " + DsmNode::error());
            *x = 1;
            step = 1;
            while (step.load() < 2) std::this_thread::yield();
            std::this_thread::sleep_for(std::chrono::milliseconds(200));  // cluster 0's request recalls it
            req_before = n.counters().lock_requests.load();
            sent_before = msgs_sent(m, 1);
            if (n.unlock(kL) != DsmStatus::kOk) f.fail("cluster 1 unlock: " + DsmNode::error());
            for (uint32_t k = 0; k < kAgain; k++) {
                if (n.lock(kL) != DsmStatus::kOk) f.fail("cluster 1 lock again: " + DsmNode::error());
                (*x)++;
                if (n.unlock(kL) != DsmStatus::kOk) f.fail("cluster 1 unlock again: " + DsmNode::error());
            }
            req_after = n.counters().lock_requests.load();
            sent_after = msgs_sent(m, 1);
            const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
            while (!got.load() && f.n.load() == 0) {
                if (n.lock(kL) != DsmStatus::kOk || n.unlock(kL) != DsmStatus::kOk)
                    f.fail("cluster 1: " + DsmNode::error());
                if (std::chrono::steady_clock::now() > until) {
                    f.fail("cluster 1 kept taking L for 30 s and cluster 0 never got it");
                    break;
                }
            }
        } else {
            while (step.load() < 1) std::this_thread::yield();
            step = 2;
            const auto t0 = std::chrono::steady_clock::now();
            if (n.lock(kL) != DsmStatus::kOk) f.fail("cluster 0 lock: " + DsmNode::error());
            waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            got = true;
            seen = *x;
            if (n.unlock(kL) != DsmStatus::kOk) f.fail("cluster 0 unlock: " + DsmNode::error());
        }
        if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
    });
    f.check();
    INFO(m.nodes[1]->format_counters());
    INFO("cluster 0 waited " << waited_s << " s");
    if (burst) {
        CHECK(req_after == req_before);    // 50 re-acquires in the grace: no request
        CHECK(m.nodes[1]->counters().lock_grace_reuses.load() >= kAgain);  // counted as taken in the grace
        CHECK(sent_after == sent_before);  // nor any message
        CHECK(seen == 1 + kAgain);         // cluster 0 got L after all of them, with their writes
        CHECK(waited_s < 10);              // the grace (1 s) bounds the wait, not cluster 1's loop
    } else {
        CHECK(req_after == req_before + 1);  // the token left at the release; asked for once again
        CHECK(seen == 1);                    // cluster 0 got L at that release, with its write
    }
}

TEST_CASE("dsm locks: a lock both clusters keep asking for in bursts stays longer at each crossing (its grace "
          "doubles up to 4x); after a quiet while it gets the configured grace again",
          "[dsm-locks]") {
    // Phase 1: both clusters take L in a loop (a counter, as SPLASH-3 raytrace's ray ids) for 1.2 s.
    // Each stay of the token at a cluster (a tenure: from its first acquire there to the other
    // cluster's first) lasted about the grace (50 ms) before; now the grace doubles at each
    // crossing after the first two at each cluster, up to 200 ms.
    // Phase 2, after a quiet 150 ms: cluster 1 takes L twice in a row and holds it when cluster 0
    // asks: a burst at one cluster only, so the recall gives the configured 50 ms, not 200 ms.
    Machine m(2, 1, with_grace(50'000));
    uint64_t off = 0;
    for (auto& n : m.nodes) off = offset_of(*n, n->alloc(4096, 4096));
    constexpr uint32_t kL = 4;  // homed at cluster 0
    using Clock = std::chrono::steady_clock;
    Failures f;
    std::vector<Clock::time_point> acquired[2];
    uint32_t counted[2] = {0, 0}, total = 0;
    std::atomic<int> step{0};
    std::atomic<bool> got{false};
    Clock::time_point asked{}, granted{};
    const auto start = Clock::now();
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        auto* x = m.at<uint32_t>(c, off);
        while (Clock::now() - start < std::chrono::milliseconds(1200) && f.n.load() == 0) {
            if (n.lock(kL) != DsmStatus::kOk) f.fail("lock: " + DsmNode::error());
            acquired[c].push_back(Clock::now());
            (*x)++;
            counted[c]++;
            if (n.unlock(kL) != DsmStatus::kOk) f.fail("unlock: " + DsmNode::error());
        }
        if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        if (c == 0) {
            if (n.lock(kL) != DsmStatus::kOk) f.fail("lock: " + DsmNode::error());
            total = *x;
            if (n.unlock(kL) != DsmStatus::kOk) f.fail("unlock: " + DsmNode::error());
        }
        if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        std::this_thread::sleep_for(std::chrono::milliseconds(150));
        if (c == 1) {
            if (n.lock(kL) != DsmStatus::kOk || n.unlock(kL) != DsmStatus::kOk || n.lock(kL) != DsmStatus::kOk)
                f.fail("cluster 1 lock: " + DsmNode::error());
            step = 1;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));  // cluster 0's request recalls L
            if (n.unlock(kL) != DsmStatus::kOk) f.fail("cluster 1 unlock: " + DsmNode::error());
            const auto until = Clock::now() + std::chrono::seconds(30);
            while (!got.load() && f.n.load() == 0 && Clock::now() < until)
                if (n.lock(kL) != DsmStatus::kOk || n.unlock(kL) != DsmStatus::kOk) f.fail("cluster 1: " + DsmNode::error());
        } else {
            while (step.load() < 1) std::this_thread::yield();
            asked = Clock::now();
            if (n.lock(kL) != DsmStatus::kOk) f.fail("cluster 0 lock: " + DsmNode::error());
            granted = Clock::now();
            got = true;
            if (n.unlock(kL) != DsmStatus::kOk) f.fail("cluster 0 unlock: " + DsmNode::error());
        }
        if (n.barrier(3) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
    });
    f.check();
    // The tenures, in order: merge both clusters' acquire times.
    std::vector<std::pair<Clock::time_point, int>> all;
    for (int c = 0; c < 2; c++)
        for (const auto& at : acquired[c]) all.emplace_back(at, c);
    std::sort(all.begin(), all.end());
    std::vector<double> tenure_ms;
    for (size_t i = 1, first = 0; i < all.size(); i++)
        if (all[i].second != all[first].second) {
            tenure_ms.push_back(std::chrono::duration<double, std::milli>(all[i].first - all[first].first).count());
            first = i;
        }
    std::string seen;
    for (double t : tenure_ms) seen += std::to_string(int(t)) + " ";
    INFO("tenures (ms): " << seen);
    INFO(m.nodes[0]->format_counters() << m.nodes[1]->format_counters());
    CHECK(total == counted[0] + counted[1]);  // every increment under the lock, none lost
    REQUIRE(tenure_ms.size() >= 6);           // the lock crossed in bursts both ways
    std::vector<double> later(tenure_ms.begin() + 4, tenure_ms.end());
    std::sort(later.begin(), later.end());
    CHECK(later[later.size() / 2] > 125);  // grown past 2.5x the grace (before: about 1x, 50-60 ms)
    CHECK(later[later.size() / 2] < 1000);  // bounded: at most 4x (200 ms) plus the host's noise
    const double waited_ms = std::chrono::duration<double, std::milli>(granted - asked).count();
    INFO("phase 2: cluster 0 waited " << waited_ms << " ms");
    CHECK(waited_ms < 125);  // the configured 50 ms grace, not the grown 200 ms
}

TEST_CASE("dsm locks: a cluster keeping a token in its grace gives it back at once when it waits for another "
          "cluster (no deadlock, no wait for the grace)",
          "[dsm-locks]") {
    // Cluster 0 holds M and waits for L; cluster 1 released L in its grace (10 s) and asks for M.
    // Cluster 1 must give L back while it waits, not after the grace.
    Machine m(2, 1, with_grace(10'000'000));
    uint64_t off = 0;
    for (auto& n : m.nodes) off = offset_of(*n, n->alloc(2 * 4096, 4096));
    constexpr uint32_t kL = 4, kM = 7;  // homes: cluster 0 and cluster 1
    Failures f;
    std::atomic<int> step{0};
    const auto t0 = std::chrono::steady_clock::now();
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        auto* x = m.at<uint32_t>(c, off);
        auto* y = m.at<uint32_t>(c, off + 4096);
        if (c == 0) {
            if (n.lock(kM) != DsmStatus::kOk) f.fail("cluster 0 lock M: " + DsmNode::error());
            step = 1;
            while (step.load() < 2) std::this_thread::yield();
            if (n.lock(kL) != DsmStatus::kOk) f.fail("cluster 0 lock L: " + DsmNode::error());
            if (*x != 41) f.fail("cluster 0 got L and saw x = " + std::to_string(*x) + ", not 41");
            if (n.unlock(kL) != DsmStatus::kOk) f.fail("cluster 0 unlock L: " + DsmNode::error());
            *y = 42;
            if (n.unlock(kM) != DsmStatus::kOk) f.fail("cluster 0 unlock M: " + DsmNode::error());
        } else {
            while (step.load() < 1) std::this_thread::yield();
            if (n.lock(kL) != DsmStatus::kOk || n.unlock(kL) != DsmStatus::kOk || n.lock(kL) != DsmStatus::kOk)
                f.fail("cluster 1 lock L: " + DsmNode::error());  // twice in a row: in a burst, so in the grace
            *x = 41;
            step = 2;
            std::this_thread::sleep_for(std::chrono::milliseconds(200));  // cluster 0's request recalls L
            if (n.unlock(kL) != DsmStatus::kOk) f.fail("cluster 1 unlock L: " + DsmNode::error());
            if (n.lock(kM) != DsmStatus::kOk) f.fail("cluster 1 lock M: " + DsmNode::error());
            if (*y != 42) f.fail("cluster 1 got M and saw y = " + std::to_string(*y) + ", not 42");
            if (n.unlock(kM) != DsmStatus::kOk) f.fail("cluster 1 unlock M: " + DsmNode::error());
        }
        if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
    });
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    f.check();
    INFO("took " << took << " s");
    CHECK(took < 5);  // not the 10 s grace
    CHECK(m.nodes[1]->counters().lock_returns.load() >= 1);
}

TEST_CASE("dsm locks: a token in its grace leaves once its cluster has not taken it for the idle end, not at the "
          "grace's end",
          "[dsm-locks]") {
    // Cluster 1 takes L twice (a burst of use) and releases it; cluster 0's request recalls it,
    // free and not yet flushed, into a 10 s grace. Cluster 1 then takes only M (its own), in a loop:
    // L must leave once cluster 1 has not taken it for the idle end (4 of its reuse gaps, here
    // microseconds, but at least the floor: 100 us set, or the default), with its write, not after
    // the 10 s grace (barnes: 44-66 % of graces saw no re-acquire; dsm/SPLASH3-LOCKS.md). With the
    // default configuration this failed on main (no idle end by default: 10.0 s).
    const bool floor_set = GENERATE(true, false);
    DsmConfig cfg = with_grace(10'000'000);
    if (floor_set) cfg.lock_grace_idle_us = 100;
    Machine m(2, 1, cfg);
    uint64_t off = 0;
    for (auto& n : m.nodes) off = offset_of(*n, n->alloc(4096, 4096));
    constexpr uint32_t kL = 4, kM = 7;  // homes: cluster 0 and cluster 1
    Failures f;
    std::atomic<int> step{0};
    std::atomic<bool> got{false};
    double waited_s = 0;
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        auto* x = m.at<uint32_t>(c, off);
        if (c == 1) {
            if (n.lock(kL) != DsmStatus::kOk || n.unlock(kL) != DsmStatus::kOk || n.lock(kL) != DsmStatus::kOk)
                f.fail("cluster 1 lock L: " + DsmNode::error());  // twice in a row: in a burst, so in the grace
            *x = 41;
            if (n.unlock(kL) != DsmStatus::kOk) f.fail("cluster 1 unlock L: " + DsmNode::error());
            step = 1;
            const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
            while (!got.load() && std::chrono::steady_clock::now() < until)
                if (n.lock(kM) != DsmStatus::kOk || n.unlock(kM) != DsmStatus::kOk)
                    f.fail("cluster 1 lock M: " + DsmNode::error());
        } else {
            while (step.load() < 1) std::this_thread::yield();
            const auto t0 = std::chrono::steady_clock::now();
            if (n.lock(kL) != DsmStatus::kOk) f.fail("cluster 0 lock L: " + DsmNode::error());
            waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            got = true;
            if (*x != 41) f.fail("cluster 0 got L and saw x = " + std::to_string(*x) + ", not 41");
            if (n.unlock(kL) != DsmStatus::kOk) f.fail("cluster 0 unlock L: " + DsmNode::error());
        }
        if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
    });
    f.check();
    INFO(m.nodes[1]->format_counters());
    INFO("cluster 0 waited " << waited_s << " s");
    CHECK(waited_s < 2);  // not the 10 s grace (a loaded host's scheduling aside: milliseconds)
    CHECK(m.nodes[1]->counters().lock_graces.load() == 1);  // the recall left L there in its grace
    CHECK(m.nodes[1]->counters().lock_grace_reuses.load() == 0);
    CHECK(m.nodes[1]->counters().lock_grace_hold_ns.load() > 0);
}

TEST_CASE("dsm locks: a lock its cluster takes at long intervals keeps its grace through a pause shorter than a "
          "few of those intervals",
          "[dsm-locks]") {
    // Cluster 1 takes L about every 40 ms (as raytrace's clusters take its ray-id lock every few
    // hundred microseconds), taking its own M in between, and holds L when cluster 0's request
    // recalls it into a 1 s grace. After its release cluster 1 takes only M for 10 ms, then L
    // again: L's idle end (4 of its ~40 ms reuse gaps) has not passed, so L is still there and the
    // LOCK asks nobody. A fixed idle end of 100 us (ICCS_DSM_LOCK_GRACE_IDLE_US=100 on main) lets
    // it leave during the 10 ms, and that LOCK asks the home again.
    Machine m(2, 1, with_grace(1'000'000));
    uint64_t off = 0;
    for (auto& n : m.nodes) off = offset_of(*n, n->alloc(4096, 4096));
    constexpr uint32_t kL = 4, kM = 7;  // homes: cluster 0 and cluster 1
    using Clock = std::chrono::steady_clock;
    Failures f;
    std::atomic<int> step{0};
    std::atomic<bool> got{false};
    uint64_t req_before = 0, req_after = 0;
    uint32_t seen = 0;
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        auto* x = m.at<uint32_t>(c, off);
        // Cluster 1 takes M (its own lock) for `ms`, pausing a little between takes: its LOCKs and
        // UNLOCKs are where a recalled token past its idle end leaves.
        auto only_m_for = [&](int ms) {
            const auto until = Clock::now() + std::chrono::milliseconds(ms);
            while (Clock::now() < until) {
                if (n.lock(kM) != DsmStatus::kOk || n.unlock(kM) != DsmStatus::kOk) f.fail("cluster 1 M: " + DsmNode::error());
                std::this_thread::sleep_for(std::chrono::microseconds(200));
            }
        };
        if (c == 1) {
            for (int k = 0; k < 5; k++) {
                if (n.lock(kL) != DsmStatus::kOk) f.fail("cluster 1 lock L: " + DsmNode::error());
                (*x)++;
                if (n.unlock(kL) != DsmStatus::kOk) f.fail("cluster 1 unlock L: " + DsmNode::error());
                only_m_for(40);
            }
            if (n.lock(kL) != DsmStatus::kOk) f.fail("cluster 1 lock L: " + DsmNode::error());
            (*x)++;
            step = 1;
            std::this_thread::sleep_for(std::chrono::milliseconds(200));  // cluster 0's request recalls it
            req_before = n.counters().lock_requests.load();
            if (n.unlock(kL) != DsmStatus::kOk) f.fail("cluster 1 unlock L: " + DsmNode::error());
            only_m_for(10);
            if (n.lock(kL) != DsmStatus::kOk) f.fail("cluster 1 lock L after the pause: " + DsmNode::error());
            (*x)++;
            if (n.unlock(kL) != DsmStatus::kOk) f.fail("cluster 1 unlock L: " + DsmNode::error());
            req_after = n.counters().lock_requests.load();
            while (!got.load() && f.n.load() == 0) only_m_for(1);  // L leaves after its 1 s grace
        } else {
            while (step.load() < 1) std::this_thread::yield();
            if (n.lock(kL) != DsmStatus::kOk) f.fail("cluster 0 lock L: " + DsmNode::error());
            got = true;
            seen = *x;
            if (n.unlock(kL) != DsmStatus::kOk) f.fail("cluster 0 unlock L: " + DsmNode::error());
        }
        if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
    });
    f.check();
    INFO(m.nodes[1]->format_counters());
    CHECK(req_after == req_before);  // the LOCK after the 10 ms pause took L in its grace: no request
    CHECK(m.nodes[1]->counters().lock_grace_reuses.load() == 1);
    CHECK(seen == 7);  // cluster 0 got L after it, with all of cluster 1's writes
}
