// Lock ownership (dsm/PROTOCOL.md, "Locks"): a lock's token stays at the cluster that acquired it
// last. Re-acquires there and hand-offs between its threads send nothing; a token that moves
// between clusters carries the writes made under it; a cluster waiting for a lock while another
// waits for a token it released (not yet flushed) does not deadlock.
#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "dsm_machine.hpp"

using namespace dsmtest;

namespace {
uint64_t offset_of(DsmNode& n, void* p) { return uint64_t(static_cast<uint8_t*>(p) - static_cast<uint8_t*>(n.base())); }

uint64_t msgs_sent(Machine& m, uint16_t c) { return compute_endpoints_sum(m, c, &RtEndpointCounters::msgs_sent); }

// Grants ahead are off unless asked for (DsmConfig::grants_ahead): these tests ask for all 16.
DsmConfig with_grants_ahead() {
    DsmConfig cfg = test_config();
    cfg.grants_ahead = 16;  // kGrantsAhead (dsm_impl.hpp)
    return cfg;
}
}  // namespace

TEST_CASE("dsm locks: a lock re-acquired by the cluster that holds its token sends no message", "[dsm-locks]") {
    Machine m(2, 2);
    uint64_t off = 0;
    for (auto& n : m.nodes) off = offset_of(*n, n->alloc(3 * 4096, 4096));
    constexpr uint32_t kLock = 5;  // homed at cluster 1: the first acquire by cluster 0 is remote
    constexpr int kRounds = 200;
    Failures f;
    std::atomic<int> ready{0};
    std::atomic<uint64_t> sent_before{0}, sent_after{0};
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        auto* d = m.at<uint32_t>(c, off);
        if (c == 0) {
            // The token comes to cluster 0 once; then both of its threads take the lock 2 x 200
            // times, handing it to each other, writing 3 pages under it.
            if (t == 0) {
                if (n.lock(kLock) != DsmStatus::kOk || n.unlock(kLock) != DsmStatus::kOk) f.fail(DsmNode::error());
                sent_before = msgs_sent(m, 0);
            }
            ready++;
            while (ready.load() < 2) std::this_thread::yield();
            for (int r = 0; r < kRounds; r++) {
                if (n.lock(kLock) != DsmStatus::kOk) f.fail("lock: " + DsmNode::error());
                const uint32_t v = d[0];
                for (uint32_t i = 0; i < 3 * 1024; i += 512) {
                    if (d[i] != v) f.fail("d[" + std::to_string(i) + "] = " + std::to_string(d[i]) + ", d[0] = " + std::to_string(v));
                    d[i] = v + 1;
                }
                if (n.unlock(kLock) != DsmStatus::kOk) f.fail("unlock: " + DsmNode::error());
            }
            ready++;
            while (ready.load() < 4) std::this_thread::yield();
            if (t == 0) sent_after = msgs_sent(m, 0);
        }
        if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        // Cluster 1 acquires it once: the token leaves cluster 0 with the writes.
        if (c == 1 && t == 0) {
            if (n.lock(kLock) != DsmStatus::kOk) f.fail("lock at cluster 1: " + DsmNode::error());
            for (uint32_t i = 0; i < 3 * 1024; i += 512)
                if (d[i] != 2 * kRounds) f.fail("cluster 1 saw d[" + std::to_string(i) + "] = " + std::to_string(d[i]));
            if (n.unlock(kLock) != DsmStatus::kOk) f.fail("unlock at cluster 1: " + DsmNode::error());
        }
    });
    f.check();
    const DsmCounters& k0 = m.nodes[0]->counters();
    INFO(m.nodes[0]->format_counters());
    CHECK(k0.lock_acquires.load() == 1 + 2 * kRounds);
    CHECK(k0.lock_requests.load() == 1);  // the first acquire only
    CHECK(sent_after.load() == sent_before.load());  // 400 acquires and releases: not one message
    CHECK(k0.intervals.load() <= 1);                 // nor a flush (the barrier's at most)
    CHECK(m.nodes[1]->counters().lock_requests.load() == 1);
}

TEST_CASE("dsm locks: a lock passed around every thread of every cluster carries the writes made under it",
          "[dsm-locks]") {
    const uint16_t C = GENERATE(2, 3);
    const uint16_t T = 2;
    Machine m(C, T);
    // A turn counter and 4 pages (homed at different clusters) that must equal it.
    constexpr uint32_t kWords = 4 * 1024;
    uint64_t off_turn = 0, off_d = 0;
    for (auto& n : m.nodes) {
        off_turn = offset_of(*n, n->alloc(sizeof(uint32_t)));
        off_d = offset_of(*n, n->alloc(kWords * 4, 4096));
    }
    constexpr uint32_t kRounds = 25, kLock = 3;
    const uint32_t players = uint32_t(C) * T;
    Failures f;
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        auto* turn = m.at<uint32_t>(c, off_turn);
        auto* d = m.at<uint32_t>(c, off_d);
        const uint32_t me = uint32_t(c) * T + t;
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        for (uint32_t r = 0; r < kRounds && f.n.load() == 0; r++) {
            const uint32_t mine = r * players + me;  // the turn this thread waits for
            for (bool done = false; !done;) {
                if (n.lock(kLock) != DsmStatus::kOk) f.fail("lock: " + DsmNode::error());
                if (*turn == mine) {
                    for (uint32_t i = 0; i < kWords; i += 256)
                        if (d[i] != mine) {
                            f.fail("thread " + std::to_string(me) + " at turn " + std::to_string(mine) + " saw d[" +
                                   std::to_string(i) + "] = " + std::to_string(d[i]));
                            break;
                        }
                    for (uint32_t i = 0; i < kWords; i += 256) d[i] = mine + 1;
                    *turn = mine + 1;
                    done = true;
                }
                if (n.unlock(kLock) != DsmStatus::kOk) f.fail("unlock: " + DsmNode::error());
                if (std::chrono::steady_clock::now() > until) {
                    f.fail("thread " + std::to_string(me) + " never got turn " + std::to_string(mine));
                    return;
                }
            }
        }
        if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        if (*turn != kRounds * players) f.fail("final turn " + std::to_string(*turn));
    });
    f.check();
    for (uint16_t c = 0; c < C; c++) {
        INFO(m.nodes[c]->format_counters());
        const DsmCounters& k = m.nodes[c]->counters();
        // The token went to every cluster and was recalled from each (a round passes through all).
        CHECK(k.lock_requests.load() >= kRounds);
        CHECK(k.lock_returns.load() >= kRounds - 1);
        CHECK(k.lock_acquires.load() > k.lock_requests.load());  // its two threads also passed it locally
        CHECK(k.invalidations.load() > 0);
    }
}

TEST_CASE("dsm locks: a cluster waiting for a lock gives back a token it released before (no deadlock), with "
          "its writes",
          "[dsm-locks]") {
    // Cluster 1 holds M and waits for L; cluster 0 released L (its token still there, its write not
    // flushed) and waits for M. Cluster 0 must give L back while it waits.
    Machine m(2, 1);
    uint64_t off = 0;
    for (auto& n : m.nodes) off = offset_of(*n, n->alloc(2 * 4096, 4096));
    constexpr uint32_t kL = 4, kM = 7;  // homes: cluster 0 and cluster 1
    Failures f;
    std::atomic<int> step{0};
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        auto* x = m.at<uint32_t>(c, off);
        auto* y = m.at<uint32_t>(c, off + 4096);
        if (c == 1) {
            if (n.lock(kM) != DsmStatus::kOk) f.fail("cluster 1 lock M: " + DsmNode::error());
            step = 1;
            while (step.load() < 2) std::this_thread::yield();
            if (n.lock(kL) != DsmStatus::kOk) f.fail("cluster 1 lock L: " + DsmNode::error());
            if (*x != 41) f.fail("cluster 1 got L and saw x = " + std::to_string(*x) + ", not 41");
            if (n.unlock(kL) != DsmStatus::kOk) f.fail("cluster 1 unlock L: " + DsmNode::error());
            *y = 42;
            if (n.unlock(kM) != DsmStatus::kOk) f.fail("cluster 1 unlock M: " + DsmNode::error());
        } else {
            while (step.load() < 1) std::this_thread::yield();
            if (n.lock(kL) != DsmStatus::kOk) f.fail("cluster 0 lock L: " + DsmNode::error());
            *x = 41;
            if (n.unlock(kL) != DsmStatus::kOk) f.fail("cluster 0 unlock L: " + DsmNode::error());
            step = 2;
            if (n.lock(kM) != DsmStatus::kOk) f.fail("cluster 0 lock M: " + DsmNode::error());
            if (*y != 42) f.fail("cluster 0 got M and saw y = " + std::to_string(*y) + ", not 42");
            if (n.unlock(kM) != DsmStatus::kOk) f.fail("cluster 0 unlock M: " + DsmNode::error());
        }
        if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
    });
    f.check();
    CHECK(m.nodes[0]->counters().lock_returns.load() == 1);  // L went back; M stayed at cluster 0
    CHECK(m.nodes[1]->counters().lock_returns.load() == 1);  // M went back
}

TEST_CASE("dsm locks: a LOCK that asks another cluster does not flush the writes of locks released before it; "
          "they leave with those locks' tokens",
          "[dsm-locks]") {
    // Cluster 0 writes two pages under A (its token stays there: nothing flushed), then takes B,
    // whose token is at its home, cluster 1. The request waits for nothing but the grant: no flush,
    // no diff (before, every such LOCK flushed first, a round trip for the acks ahead of the
    // request). Then cluster 1 takes A: the writes come with its token.
    const uint16_t home_of_b = GENERATE(0, 1);  // B asked on the home itself, and of the other cluster
    Machine m(2, 1);
    uint64_t off = 0;
    for (auto& n : m.nodes) off = offset_of(*n, n->alloc(2 * 4096, 4096));
    constexpr uint32_t kA = 5;  // homed at cluster 1
    const uint32_t kB = home_of_b == 0 ? 8 : 7;
    Failures f;
    std::atomic<int> step{0};
    uint64_t intervals_before = 0, intervals_after = 0, diffs_before = 0, diffs_after = 0;
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        auto* x = m.at<uint32_t>(c, off);
        if (c == 0) {
            if (n.lock(kA) != DsmStatus::kOk) f.fail("lock A: " + DsmNode::error());
            x[0] = 41;
            x[1024] = 41;
            if (n.unlock(kA) != DsmStatus::kOk) f.fail("unlock A: " + DsmNode::error());
            intervals_before = n.counters().intervals.load();
            diffs_before = n.counters().diffs_sent.load();
            if (n.lock(kB) != DsmStatus::kOk) f.fail("lock B: " + DsmNode::error());
            intervals_after = n.counters().intervals.load();
            diffs_after = n.counters().diffs_sent.load();
            if (n.unlock(kB) != DsmStatus::kOk) f.fail("unlock B: " + DsmNode::error());
            step = 1;
        } else {
            while (step.load() < 1) std::this_thread::yield();
            // Cluster 0's thread goes on to the barrier (which flushes): A's token waits for it.
            if (n.lock(kA) != DsmStatus::kOk) f.fail("cluster 1 lock A: " + DsmNode::error());
            if (x[0] != 41 || x[1024] != 41)
                f.fail("cluster 1 got A and saw " + std::to_string(x[0]) + ", " + std::to_string(x[1024]) + ", not 41");
            if (n.unlock(kA) != DsmStatus::kOk) f.fail("cluster 1 unlock A: " + DsmNode::error());
        }
        if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
    });
    f.check();
    INFO(m.nodes[0]->format_counters());
    CHECK(intervals_after == intervals_before);  // no flush before or while B was asked for
    CHECK(diffs_after == diffs_before);
    CHECK(m.nodes[0]->counters().lock_returns.load() >= 1);  // A went to cluster 1, with the writes
}

TEST_CASE("dsm locks: a recalled token goes first to a thread of its cluster already waiting for it, then leaves",
          "[dsm-locks]") {
    // Cluster 0's thread A holds L, its thread B waits for L, then cluster 1 asks for L (the home
    // recalls the token from cluster 0). A's release passes L to B with no message (kMaxLocalPasses);
    // B's release, with no thread of cluster 0 waiting, gives it back, and cluster 1 sees both writes.
    Machine m(2, 2);
    uint64_t off = 0;
    for (auto& n : m.nodes) off = offset_of(*n, n->alloc(4096, 4096));
    constexpr uint32_t kL = 5;  // home: cluster 1
    Failures f;
    std::atomic<int> step{0};
    const auto settle = std::chrono::milliseconds(200);  // for a waiter to block, a recall to arrive
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        auto* x = m.at<uint32_t>(c, off);
        if (c == 0 && t == 0) {  // A
            if (n.lock(kL) != DsmStatus::kOk) f.fail("A lock: " + DsmNode::error());
            step = 1;
            while (step.load() < 3) std::this_thread::yield();
            std::this_thread::sleep_for(settle);
            *x = 1;
            if (n.unlock(kL) != DsmStatus::kOk) f.fail("A unlock: " + DsmNode::error());
        } else if (c == 0) {  // B
            while (step.load() < 1) std::this_thread::yield();
            step = 2;
            if (n.lock(kL) != DsmStatus::kOk) f.fail("B lock: " + DsmNode::error());
            if (*x != 1) f.fail("B got L and saw x = " + std::to_string(*x) + ", not A's 1");
            *x = 2;
            if (n.unlock(kL) != DsmStatus::kOk) f.fail("B unlock: " + DsmNode::error());
        } else if (t == 0) {  // cluster 1
            while (step.load() < 2) std::this_thread::yield();
            std::this_thread::sleep_for(settle);  // B waits in LOCK by now
            step = 3;
            if (n.lock(kL) != DsmStatus::kOk) f.fail("cluster 1 lock: " + DsmNode::error());
            if (*x != 2) f.fail("cluster 1 got L and saw x = " + std::to_string(*x) + ", not B's 2");
            if (n.unlock(kL) != DsmStatus::kOk) f.fail("cluster 1 unlock: " + DsmNode::error());
        }
        if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
    });
    f.check();
    INFO(m.nodes[0]->format_counters());
    CHECK(m.nodes[0]->counters().lock_requests.load() == 1);  // A's; B got it from A
    CHECK(m.nodes[0]->counters().lock_returns.load() == 1);   // once, after B
    CHECK(m.nodes[0]->counters().lock_acquires.load() == 2);
}

namespace {
// Every thread of every cluster appends in turn (entry k by player k mod players) to a counter
// and a log at `data` (in the region) under `lock`, kTurnRounds entries each, so the token crosses
// between clusters at every turn and each crossing follows writes made under the lock; after a
// barrier every cluster checks the whole log (a stale entry shows as a wrong running sum). C
// clusters x T threads; the data on the pages of allocation block `data_block` (4 pages a block,
// homed at that cluster); the lock's id 6 is homed at cluster 0 for 2 and 3 clusters. Then
// `counters` looks at the run's counters.
constexpr uint32_t kTurnRounds = 30;
void append_in_turn(uint16_t C, uint16_t T, uint16_t data_block, const std::function<void(Machine&)>& counters) {
    constexpr uint32_t lock = 6;
    Machine m(C, T);
    uint64_t off = 0;
    for (auto& n : m.nodes) off = offset_of(*n, n->alloc(uint64_t(C) * 4 * 4096, 4096));
    const uint64_t data = off + uint64_t(data_block) * 4 * 4096;
    Failures f;
    struct Entry {
        uint32_t who, sum;  // the appender, and the sum of every appender + 1 up to this entry
    };
    const uint32_t players = uint32_t(m.C) * m.T;
    REQUIRE(8 + players * kTurnRounds * sizeof(Entry) <= 4 * 4096);
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        auto* count = m.at<uint32_t>(c, data);
        auto* log = m.at<Entry>(c, data + 8);
        const uint32_t me = uint32_t(c) * m.T + t;
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        for (uint32_t r = 0; r < kTurnRounds && f.n.load() == 0;) {
            if (n.lock(lock) != DsmStatus::kOk) f.fail("lock: " + DsmNode::error());
            const uint32_t k = *count;
            if (k % players == me) {
                const uint32_t before = k == 0 ? 0 : log[k - 1].sum;
                if (k > 0 && log[k - 1].who != (k - 1) % players)
                    f.fail("entry " + std::to_string(k - 1) + " names appender " + std::to_string(log[k - 1].who));
                log[k] = Entry{me, before + me + 1};
                *count = k + 1;
                r++;
            }
            if (n.unlock(lock) != DsmStatus::kOk) f.fail("unlock: " + DsmNode::error());
            if (std::chrono::steady_clock::now() > until) {
                f.fail("player " + std::to_string(me) + " stuck at round " + std::to_string(r) + " (count " +
                       std::to_string(*count) + ")");
                return;
            }
        }
        if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        if (*count != players * kTurnRounds) {
            f.fail("cluster " + std::to_string(c) + " counted " + std::to_string(*count));
            return;
        }
        std::vector<uint32_t> per(players, 0);
        uint32_t sum = 0;
        for (uint32_t k = 0; k < players * kTurnRounds; k++) {
            if (log[k].who != k % players) {
                f.fail("entry " + std::to_string(k) + " names appender " + std::to_string(log[k].who));
                return;
            }
            sum += log[k].who + 1;
            per[log[k].who]++;
            if (log[k].sum != sum) {
                f.fail("cluster " + std::to_string(c) + ": entry " + std::to_string(k) + " sum " +
                       std::to_string(log[k].sum) + ", expected " + std::to_string(sum) + " (a stale entry before it)");
                return;
            }
        }
        for (uint32_t p = 0; p < players; p++)
            if (per[p] != kTurnRounds) f.fail("appender " + std::to_string(p) + ": " + std::to_string(per[p]) + " entries");
    });
    f.check();
    counters(m);
}
}  // namespace

TEST_CASE("dsm locks: a token given back behind its flush's diffs, before their acks, carries the writes made "
          "under it",
          "[dsm-locks]") {
    // Every page written under the lock is homed where the lock is (cluster 0), so the flush a
    // leaving token waits for sends its diffs there only, and the token follows them unacked
    // (lock_returns_early). The home's threads read those pages in place: a grant that overtook
    // the diffs would show them a stale counter or log.
    // Whether a token leaves before its diffs' acks is up to timing: on a loaded host a run may
    // have every ack back first (4 of 15 runs at load 6-13). The run is repeated, each one checked
    // whole, until one took the early path (at most 5 runs), so the path is proven without a flake.
    const uint16_t C = GENERATE(2, 3);
    const uint16_t T = GENERATE(1, 2);
    uint64_t early = 0;
    for (int run = 0; run < 5 && early == 0; run++)
        append_in_turn(C, T, 0, [&](Machine& m) {  // block 0: homed at cluster 0, the lock's home
            for (uint16_t c = 0; c < C; c++) {
                INFO(m.nodes[c]->format_counters());
                early += m.nodes[c]->counters().lock_returns_early.load();
                CHECK(m.nodes[c]->counters().lock_returns_early.load() <= m.nodes[c]->counters().lock_returns.load());
            }
            CHECK(m.nodes[0]->counters().lock_returns_early.load() == 0);  // the home's own writes need no diff
        });
    CHECK(early > 0);
}

TEST_CASE("dsm locks: a thread of the lock's home cluster acquires and gives back the token on the home itself, "
          "and the grant still carries the notices",
          "[dsm-locks]") {
    // The lock is homed at cluster 0, the pages written under it at the last cluster: cluster 0's
    // threads request the lock and give its token back on the home's manager themselves (no
    // message to their service thread: lock_requests_here, lock_returns_here), so their grants
    // must still name the other clusters' intervals (else cluster 0 reads its stale copy of the
    // pages) and their returns must follow their own flushed writes (else the next player reads
    // a stale counter or log). The other clusters give the token back straight to the thread of
    // cluster 0 that waits for it (lock_returns_to_thread), which takes it back in its wait.
    const uint16_t C = GENERATE(2, 3);
    const uint16_t T = GENERATE(1, 2);
    append_in_turn(C, T, uint16_t(C - 1), [&](Machine& m) {  // the last cluster's block
        uint64_t to_thread = 0;
        for (uint16_t c = 0; c < C; c++) {
            INFO(m.nodes[c]->format_counters());
            const DsmCounters& k = m.nodes[c]->counters();
            if (c == 0) {
                CHECK(k.lock_requests_here.load() > 0);  // the new path was taken, both ways
                CHECK(k.lock_returns_here.load() > 0);
                CHECK(k.lock_requests_here.load() == k.lock_requests.load());
                CHECK(k.lock_returns_here.load() == k.lock_returns.load());
                CHECK(k.lock_returns_to_thread.load() == 0);  // its returns are taken back in place
            } else {
                CHECK(k.lock_requests_here.load() == 0);  // the lock is not homed there
                CHECK(k.lock_returns_here.load() == 0);
                to_thread += k.lock_returns_to_thread.load();
            }
        }
        CHECK(to_thread > 0);  // tokens went back straight to a waiting thread of cluster 0
    });
}

TEST_CASE("dsm locks: condition variables and fences homed at the caller's cluster run there, with no message to "
          "its own service thread; waiters and readers of every cluster still see the signals and the writes",
          "[dsm-locks]") {
    // Condition variable 24 and the fence lock (id 0) are homed at cluster 0. Its thread 0
    // broadcasts and fences kRounds times with no other thread active: it sends nothing (before: a
    // one-way message a broadcast and a request a fence to its own service thread, each a wake-up
    // of that thread). Then a producer at cluster 0 signals consumers of both clusters (registered
    // on the home itself and from cluster 1), and cluster 1 publishes data by fences to a reader
    // at cluster 0, whose acquire fences run on the home itself.
    // The barriers are homed at cluster 1 (odd ids): their arrivals are no messages to cluster 0.
    Machine m(2, 2);
    const uint64_t off = alloc_everywhere(m, 3 * 4096);
    constexpr uint32_t kCv = 24, kLock = 21;  // the variable homed at cluster 0, its lock at cluster 1
    constexpr int kRounds = 100;
    Failures f;
    std::atomic<uint64_t> service_before{0}, service_after{0};
    std::atomic<int> spinning{0};
    // What cluster 0's threads sent (requests included): the loopback runtime counts per endpoint.
    auto sent = [&] {
        uint64_t s = 0;
        for (uint16_t k = 0; k < m.T; k++) {
            const RtEndpointCounters& e = m.world.runtime(0).endpoint(k).counters();
            s += e.msgs_sent + e.requests;
        }
        return s;
    };
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        auto* q = m.at<volatile uint32_t>(c, off);  // q[0] items queued, q[1] items taken, q[2 + k] item k
        auto* data = m.at<volatile uint32_t>(c, off + 4096);
        auto* flag = m.at<volatile uint32_t>(c, off + 8192);
        if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        if (c == 0 && t == 0) {
            service_before = sent();
            for (int r = 0; r < kRounds; r++) {
                if (n.cond_signal(kCv, true) != DsmStatus::kOk) f.fail("broadcast: " + DsmNode::error());
                if (n.fence(DsmNode::Fence::kFull) != DsmStatus::kOk) f.fail("fence: " + DsmNode::error());
            }
            service_after = sent();
        }
        if (n.barrier(3) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        // Producer (0, 0), consumers (0, 1), (1, 0), (1, 1): 4 items each.
        if (c == 0 && t == 0) {
            for (uint32_t k = 0; k < 12; k++) {
                if (n.lock(kLock) != DsmStatus::kOk) f.fail("producer lock: " + DsmNode::error());
                q[2 + q[0]] = 500 + q[0];
                q[0] = q[0] + 1;
                if (n.cond_signal(kCv, false) != DsmStatus::kOk) f.fail("signal: " + DsmNode::error());
                if (n.unlock(kLock) != DsmStatus::kOk) f.fail("producer unlock: " + DsmNode::error());
            }
        } else {
            for (int k = 0; k < 4; k++) {
                if (n.lock(kLock) != DsmStatus::kOk) f.fail("consumer lock: " + DsmNode::error());
                while (q[1] == q[0])
                    if (n.cond_wait(kCv, kLock) != DsmStatus::kOk) f.fail("wait: " + DsmNode::error());
                if (q[2 + q[1]] != 500 + q[1]) f.fail("consumer at cluster " + std::to_string(c) + " took a stale item");
                q[1] = q[1] + 1;
                if (n.unlock(kLock) != DsmStatus::kOk) f.fail("consumer unlock: " + DsmNode::error());
            }
        }
        if (n.barrier(5) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        if (q[0] != 12 || q[1] != 12) f.fail("queue ends at " + std::to_string(q[0]) + "/" + std::to_string(q[1]));
        // Cluster 1 publishes by fences; cluster 0's threads spin with acquire fences on the home.
        if (c == 1 && t == 0) {
            while (spinning.load() < 2) std::this_thread::yield();
            for (int i = 0; i < 1024; i++) data[i] = 900 + uint32_t(i);
            if (n.fence(DsmNode::Fence::kRelease) != DsmStatus::kOk) f.fail("release fence: " + DsmNode::error());
            *flag = 1;
            if (n.fence(DsmNode::Fence::kRelease) != DsmStatus::kOk) f.fail("release fence: " + DsmNode::error());
        } else if (c == 0) {
            for (int spins = 0; *flag == 0; spins++) {
                if (n.fence(DsmNode::Fence::kAcquire) != DsmStatus::kOk) f.fail("acquire fence: " + DsmNode::error());
                if (spins == 0) spinning++;
                if (spins > 200000) {
                    f.fail("flag never seen at cluster 0");
                    break;
                }
            }
            if (n.fence(DsmNode::Fence::kAcquire) != DsmStatus::kOk) f.fail("acquire fence: " + DsmNode::error());
            for (int i = 0; i < 1024; i++)
                if (data[i] != 900 + uint32_t(i)) {
                    f.fail("data stale at cluster 0 after the flag");
                    break;
                }
        }
        if (n.barrier(7) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
    });
    f.check();
    INFO(m.nodes[0]->format_counters());
    CHECK(service_after.load() == service_before.load());  // 100 broadcasts and 100 fences: not one message
    CHECK(m.nodes[0]->counters().fences.load() >= kRounds);
}

namespace {
// Locks kWalkFirst .. kWalkFirst + kWalkLocks - 1: a lock array walked down, as SPLASH-3 barnes's
// centre-of-mass pass walks its cell locks (PROTOCOL.md, "Grants ahead").
constexpr uint32_t kWalkFirst = 100, kWalkLocks = 64;
}  // namespace

TEST_CASE("dsm locks: a cluster walking down a lock array whose tokens the other cluster holds idle gets the next "
          "ids of their home with one grant (grants ahead), and each carries the writes made under it",
          "[dsm-locks]") {
    Machine m(2, 1, with_grants_ahead());
    uint64_t off = 0;
    for (auto& n : m.nodes) off = offset_of(*n, n->alloc(2 * 4096, 4096));
    Failures f;
    uint64_t remote_before = 0, remote_after = 0;
    auto remote = [&](DsmNode& n) { return n.counters().lock_requests.load() - n.counters().lock_requests_here.load(); };
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        auto* d = m.at<uint32_t>(c, off);
        auto locked = [&](uint32_t i, const std::function<void()>& body) {
            if (n.lock(kWalkFirst + i) != DsmStatus::kOk) f.fail("lock: " + DsmNode::error());
            body();
            if (n.unlock(kWalkFirst + i) != DsmStatus::kOk) f.fail("unlock: " + DsmNode::error());
        };
        // Cluster 0 takes every lock once, writing under it: every token is there, idle, flushed.
        if (c == 0)
            for (uint32_t i = 0; i < kWalkLocks; i++) locked(i, [&] { d[i * 32] = 1000 + i; });
        if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        // Cluster 1 walks them down: the even ids ask cluster 0's home, the odd ones its own.
        if (c == 1) {
            remote_before = remote(n);
            for (uint32_t i = kWalkLocks; i-- > 0;)
                locked(i, [&] {
                    if (d[i * 32] != 1000 + i)
                        f.fail("cluster 1 read " + std::to_string(d[i * 32]) + " under lock " + std::to_string(i));
                    d[i * 32] += 1;
                });
            remote_after = remote(n);
        }
        if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        // Back at cluster 0, every token with cluster 1's write.
        if (c == 0)
            for (uint32_t i = 0; i < kWalkLocks; i++)
                locked(i, [&] {
                    if (d[i * 32] != 1001 + i)
                        f.fail("cluster 0 read " + std::to_string(d[i * 32]) + " under lock " + std::to_string(i));
                });
    });
    f.check();
    const DsmCounters& k1 = m.nodes[1]->counters();
    INFO(m.nodes[0]->format_counters() << m.nodes[1]->format_counters());
    // 32 ids homed at cluster 0: the walk is seen at its third request, and each grant then brings
    // the next 16 (main: 32 requests, one an id).
    CHECK(remote_after - remote_before <= 6);
    CHECK(k1.lock_grants_ahead.load() >= 26);
    CHECK(k1.lock_grants_ahead_used.load() == k1.lock_grants_ahead.load());  // every one taken
}

TEST_CASE("dsm locks: clusters walking the same lock array down at once, in long runs, keep mutual exclusion "
          "through grants ahead (a counter under each lock, read, held a while, written back)",
          "[dsm-locks]") {
    const uint16_t C = GENERATE(2, 3);
    const uint16_t T = GENERATE(1, 2);
    constexpr uint32_t kRounds = 12;
    Machine m(C, T, with_grants_ahead());
    uint64_t off = 0;
    for (auto& n : m.nodes) off = offset_of(*n, n->alloc(2 * 4096, 4096));
    Failures f;
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        auto* d = m.at<volatile uint32_t>(c, off);
        for (uint32_t r = 0; r < kRounds; r++) {
            // Each thread starts at its own place, so walks overlap and cross the ids others hold.
            const uint32_t start = (uint32_t(c) * 7 + t * 3 + r) % kWalkLocks;
            for (uint32_t k = 0; k < kWalkLocks; k++) {
                const uint32_t i = (start + kWalkLocks - k) % kWalkLocks;
                if (n.lock(kWalkFirst + i) != DsmStatus::kOk) f.fail("lock: " + DsmNode::error());
                const uint32_t v = d[i * 32];
                for (int spin = 0; spin < 50; spin++) std::this_thread::yield();  // another holder would write meanwhile
                d[i * 32] = v + 1;
                if (n.unlock(kWalkFirst + i) != DsmStatus::kOk) f.fail("unlock: " + DsmNode::error());
            }
        }
        if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        if (c == 0 && t == 0)
            for (uint32_t i = 0; i < kWalkLocks; i++) {
                if (n.lock(kWalkFirst + i) != DsmStatus::kOk) f.fail("lock: " + DsmNode::error());
                if (d[i * 32] != uint32_t(C) * T * kRounds)
                    f.fail("lock " + std::to_string(i) + ": counter " + std::to_string(d[i * 32]) + ", want " +
                           std::to_string(uint32_t(C) * T * kRounds));
                if (n.unlock(kWalkFirst + i) != DsmStatus::kOk) f.fail("unlock: " + DsmNode::error());
            }
    });
    f.check();
    uint64_t ahead = 0;
    for (auto& n : m.nodes) ahead += n->counters().lock_grants_ahead.load();
    INFO("grants ahead: " << ahead);
    SUCCEED();
}
