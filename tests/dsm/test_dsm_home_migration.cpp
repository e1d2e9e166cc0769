// Home migration (dsm/PROTOCOL.md, "Homes move to their only writer"): at a barrier every bound
// thread of every cluster is in, a page that one cluster alone wrote since the last such barrier
// becomes that cluster's home page, so its later writes send no diff; every read still sees every
// write, a page several clusters write stays where it is, and a barrier some bound thread is not
// in moves nothing.
#include <string>

#include "dsm_machine.hpp"

using namespace dsmtest;

TEST_CASE("dsm: a page one cluster alone writes between barriers moves home to it; its later writes send no diff",
          "[dsm-homes]") {
    const uint16_t C = GENERATE(2, 3);
    const uint16_t T = GENERATE(1, 2);
    const HomePolicy home = GENERATE(HomePolicy::kAllocBlock, HomePolicy::kRoundRobin);
    DsmConfig cfg = test_config();
    cfg.home = home;
    Machine m(C, T, cfg);
    // C * 4 pages (under alloc-block, 4 homed at each cluster), then one page every cluster writes
    // (its own words of it) every round.
    constexpr uint32_t kWordsPerPage = 4096 / 4, kRounds = 8, kHalf = kRounds / 2;
    const uint32_t pages = C * 4u;
    const uint64_t off = alloc_everywhere(m, pages * 4096ull);
    const uint64_t shared_off = alloc_everywhere(m, 4096);
    // Rounds 0..3: the last cluster writes every page; rounds 4..7: cluster 0 does (the homes move back).
    auto writer = [&](uint32_t r) { return r < kHalf ? uint16_t(C - 1) : uint16_t(0); };
    auto value = [](uint32_t r, uint32_t p, uint32_t w) { return r * 1000003u + p * 4099u + w; };
    Failures f;
    uint64_t diffs_at[kRounds + 1][3] = {};  // each cluster's diffs_sent before round r (and at the end)
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        auto* d = m.at<uint32_t>(c, off);
        auto* s = m.at<uint32_t>(c, shared_off);
        for (uint32_t r = 0; r < kRounds; r++) {
            if (t == 0) diffs_at[r][c] = n.counters().diffs_sent.load();
            if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
            if (t == 0 && c == writer(r))
                for (uint32_t p = 0; p < pages; p++)
                    for (uint32_t w = r % 3; w < kWordsPerPage; w += 97) d[p * kWordsPerPage + w] = value(r, p, w);
            if (t == 0) s[c * 8 + r % 8] = value(r, 999, c);
            if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
            for (uint32_t p = 0; p < pages; p++)
                for (uint32_t w = r % 3; w < kWordsPerPage; w += 97)
                    if (d[p * kWordsPerPage + w] != value(r, p, w)) {
                        f.fail("round " + std::to_string(r) + ": cluster " + std::to_string(c) + " read " +
                               std::to_string(d[p * kWordsPerPage + w]) + " on page " + std::to_string(p) +
                               ", cluster " + std::to_string(writer(r)) + " wrote " + std::to_string(value(r, p, w)));
                        p = pages;
                        break;
                    }
            for (uint16_t k = 0; k < C; k++)
                if (s[k * 8 + r % 8] != value(r, 999, k))
                    f.fail("round " + std::to_string(r) + ": cluster " + std::to_string(c) + " lost cluster " +
                           std::to_string(k) + "'s word of the page every cluster writes");
        }
        if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        if (t == 0) diffs_at[kRounds][c] = n.counters().diffs_sent.load();
    });
    f.check();
    const uint64_t moved = m.nodes[0]->counters().homes_moved.load();
    for (auto& n : m.nodes) CHECK(n->counters().homes_moved.load() == moved);  // one list, applied everywhere
    // Round 0 moves the pages the last cluster wrote and was not home of; round 5 moves them all to 0.
    CHECK(moved >= pages);
    for (uint16_t c = 0; c < C; c++) {
        INFO("cluster " << c << ", C " << C << ", T " << T << ", diffs sent before each round: " << diffs_at[1][c] << " "
                        << diffs_at[2][c] << " " << diffs_at[3][c] << " " << diffs_at[4][c] << " " << diffs_at[5][c]
                        << " " << diffs_at[6][c] << " " << diffs_at[7][c] << " " << diffs_at[8][c]);
        // From the second round of the first writer on, and the third of the second (a page moves
        // once one cluster alone wrote it in the last three epochs: the second writer's second
        // round still sees the first's writes of round 3), its pages are its home pages: the only
        // diffs are of the page every cluster writes (one a round, none from the page's home).
        CHECK(diffs_at[kHalf][c] - diffs_at[1][c] <= kHalf - 1);
        CHECK(diffs_at[kRounds][c] - diffs_at[kHalf + 2][c] <= kHalf - 2);
    }
    // Without moves the writer sends a diff of every page homed elsewhere every round.
    CHECK(diffs_at[1][C - 1] >= pages - 4);
}

TEST_CASE("dsm: a barrier some bound thread is not in moves no home (its writes still reach the home)",
          "[dsm-homes]") {
    Machine m(2, 2);
    constexpr uint32_t kPages = 8, kWordsPerPage = 1024, kRounds = 4;
    const uint64_t off = alloc_everywhere(m, kPages * 4096ull);  // pages 0-3 homed at 0, 4-7 at 1
    std::atomic<int> done{0};
    Failures f;
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        if (t == 1) {  // bound, touching nothing, in no barrier
            while (done.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            return;
        }
        auto* d = m.at<uint32_t>(c, off);
        for (uint32_t r = 0; r < kRounds; r++) {
            if (c == 1)
                for (uint32_t p = 0; p < kPages; p++) d[p * kWordsPerPage + r] = r * 100 + p + 1;
            if (n.barrier(1, 1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
            for (uint32_t p = 0; p < kPages; p++)
                if (d[p * kWordsPerPage + r] != r * 100 + p + 1)
                    f.fail("round " + std::to_string(r) + ": cluster " + std::to_string(c) + " read " +
                           std::to_string(d[p * kWordsPerPage + r]) + " on page " + std::to_string(p));
            if (n.barrier(2, 1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        }
        done++;
    });
    f.check();
    for (auto& n : m.nodes) CHECK(n->counters().homes_moved.load() == 0);
    CHECK(m.nodes[1]->counters().diffs_sent.load() == kRounds * 4);  // pages 0-3 every round
}

TEST_CASE("dsm: ICCS_DSM_MIGRATE=off keeps every home where the policy put it", "[dsm-homes]") {
    DsmConfig cfg = test_config();
    cfg.migrate_homes = false;
    Machine m(2, 1, cfg);
    const uint64_t off = alloc_everywhere(m, 8 * 4096ull);
    Failures f;
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        auto* d = m.at<uint32_t>(c, off);
        for (uint32_t r = 0; r < 3; r++) {
            if (c == 1)
                for (uint32_t p = 0; p < 8; p++) d[p * 1024 + r] = r + p + 1;
            if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
            for (uint32_t p = 0; p < 8; p++)
                if (d[p * 1024 + r] != r + p + 1) f.fail("cluster " + std::to_string(c) + " read a stale value");
            if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        }
    });
    f.check();
    for (auto& n : m.nodes) CHECK(n->counters().homes_moved.load() == 0);
    CHECK(m.nodes[1]->counters().diffs_sent.load() == 3 * 4);
}

// A page that moves to its only writer under block homes leaves every other cluster's copy behind
// (dropped at the barrier), so its new home writes it with no fault until another cluster reads it
// ("Homes move to their only writer": the sole copy). Before, each moved page cost its new home a
// write fault at its next write (main: kPages faults in round 1, 0 after).
TEST_CASE("dsm: a page moved to its only writer takes no write fault there until another cluster reads it",
          "[dsm-homes]") {
    const uint16_t C = GENERATE(2, 3);
    const uint16_t T = GENERATE(1, 2);
    Machine m(C, T);  // alloc-block: the first C * kPages / C pages are homed at cluster 0
    constexpr uint32_t kPages = 8, kWordsPerPage = 1024, kRounds = 6;
    const uint64_t off = alloc_everywhere(m, uint64_t(C) * kPages * 4096);
    const uint16_t writer = uint16_t(C - 1);
    uint64_t faults_at[kRounds + 1] = {};
    Failures f;
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        auto* d = m.at<uint32_t>(c, off);
        for (uint32_t r = 0; r < kRounds; r++) {
            if (c == writer && t == 0) {
                faults_at[r] = n.counters().write_faults.load();
                for (uint32_t p = 0; p < kPages; p++) d[p * kWordsPerPage + r] = r * 1000 + p + 1;
            }
            if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        }
        if (c == writer && t == 0) faults_at[kRounds] = n.counters().write_faults.load();
        // Now every other cluster reads them (fetched from the writer, which protects them first),
        // the writer writes them once more, and every cluster sees that write.
        for (uint32_t p = 0; p < kPages; p++)
            for (uint32_t r = 0; r < kRounds; r++)
                if (d[p * kWordsPerPage + r] != r * 1000 + p + 1)
                    f.fail("cluster " + std::to_string(c) + " read " + std::to_string(d[p * kWordsPerPage + r]) +
                           " on page " + std::to_string(p) + ", round " + std::to_string(r));
        if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        if (c == writer && t == 0)
            for (uint32_t p = 0; p < kPages; p++) d[p * kWordsPerPage + 999] = 7000 + p;
        if (n.barrier(3) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        for (uint32_t p = 0; p < kPages; p++)
            if (d[p * kWordsPerPage + 999] != 7000 + p)
                f.fail("cluster " + std::to_string(c) + " did not see the new home's write of page " + std::to_string(p) +
                       " made after it read the page (read " + std::to_string(d[p * kWordsPerPage + 999]) + ")");
    });
    f.check();
    INFO("C " << C << ", T " << T << ", the writer's write faults in each round: " << faults_at[1] - faults_at[0] << " "
              << faults_at[2] - faults_at[1] << " " << faults_at[3] - faults_at[2] << " " << faults_at[4] - faults_at[3]
              << " " << faults_at[5] - faults_at[4] << " " << faults_at[6] - faults_at[5]);
    CHECK(m.nodes[0]->counters().homes_moved.load() >= kPages);
    CHECK(faults_at[1] - faults_at[0] >= 1);          // round 0: homed elsewhere, twinned
    CHECK(faults_at[kRounds] - faults_at[1] == 0);    // moved at round 0's barrier: no fault since
}

// The new home leaves a moved page writable only when no other cluster fetched it before the
// move took effect here: another cluster may apply the same barrier's moves first and fetch the
// page from its new home at once (here: the old home, reading right after the barrier, while the
// writer may still be applying it). Such a copy must see the new home's later writes.
TEST_CASE("dsm: a page fetched from its new home before that home applied the move still tracks its writes",
          "[dsm-homes]") {
    const uint16_t C = GENERATE(2, 3);
    Machine m(C, 1);
    constexpr uint32_t kPages = 16, kWordsPerPage = 1024, kSets = 8;
    // kSets sets of kPages pages homed at cluster 0 (alloc-block: the first part of the allocation),
    // each moved to the last cluster by one round of its writes.
    const uint64_t off = alloc_everywhere(m, uint64_t(C) * kSets * kPages * 4096);
    const uint16_t writer = uint16_t(C - 1);
    Failures f;
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        auto* d = m.at<uint32_t>(c, off);
        for (uint32_t s = 0; s < kSets; s++) {
            uint32_t* set = d + s * kPages * kWordsPerPage;
            if (c == writer)
                for (uint32_t p = 0; p < kPages; p++) set[p * kWordsPerPage] = s * 100 + p + 1;
            if (n.barrier(0) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());  // the set moves to the writer
            // Every other cluster reads the set at once (racing the writer's application of the move).
            uint32_t sum = 0;
            if (c != writer)
                for (uint32_t p = 0; p < kPages; p++) sum += set[p * kWordsPerPage];
            if (sum == 1) f.fail("unreachable");  // keeps the reads
            if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
            if (c == writer)
                for (uint32_t p = 0; p < kPages; p++) set[p * kWordsPerPage + 1] = s * 100 + p + 50;
            if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
            for (uint32_t p = 0; p < kPages; p++)
                if (set[p * kWordsPerPage + 1] != s * 100 + p + 50)
                    f.fail("set " + std::to_string(s) + ": cluster " + std::to_string(c) + " read a stale copy of page " +
                           std::to_string(p) + " (" + std::to_string(set[p * kWordsPerPage + 1]) + ")");
        }
    });
    f.check();
    CHECK(m.nodes[0]->counters().homes_moved.load() >= kSets * kPages);
}

// A page its old home wrote keeps every copy when it moves (kMoveSoleCopy unset): the old home
// reads it after the move from its own copy, with no fetch (radix reads next the keys the other
// cluster's permutation wrote last: dropped, they were fetched back, 689 -> 818-915 fetches a
// run), and the new home's writes still reach it (its next write faults and is noticed).
TEST_CASE("dsm: a page its old home wrote moves with every copy kept, and the old home reads it without a fetch",
          "[dsm-homes]") {
    Machine m(2, 1);
    constexpr uint32_t kPages = 8, kWordsPerPage = 1024;
    const uint64_t off = alloc_everywhere(m, 2 * kPages * 4096ull);  // the first kPages homed at cluster 0
    uint64_t fetches_before = 0, fetches_after = 0, faults_before = 0, faults_after = 0;
    Failures f;
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        auto* d = m.at<uint32_t>(c, off);
        if (c == 0)
            for (uint32_t p = 0; p < kPages; p++) d[p * kWordsPerPage] = p + 1;  // the home writes them first
        if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        // Then cluster 1 alone, until cluster 0's write is out of the kMoveEpochs window: the
        // pages move to cluster 1.
        for (uint32_t r = 0; r < 3; r++) {  // kMoveEpochs (dsm_impl.hpp)
            if (c == 1)
                for (uint32_t p = 0; p < kPages; p++) d[p * kWordsPerPage + 1] = p + 100 + r;
            if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        }
        if (n.counters().homes_moved.load() != kPages)
            f.fail("cluster " + std::to_string(c) + ": " + std::to_string(n.counters().homes_moved.load()) + " pages moved");
        if (c == 0) fetches_before = n.counters().page_fetches.load();
        for (uint32_t p = 0; p < kPages; p++)
            if (d[p * kWordsPerPage] != p + 1 || d[p * kWordsPerPage + 1] != p + 102)
                f.fail("cluster " + std::to_string(c) + " read a stale page " + std::to_string(p));
        if (c == 0) fetches_after = n.counters().page_fetches.load();
        if (n.barrier(3) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        if (c == 1) {
            faults_before = n.counters().write_faults.load();
            for (uint32_t p = 0; p < kPages; p++) d[p * kWordsPerPage + 2] = p + 200;
            faults_after = n.counters().write_faults.load();
        }
        if (n.barrier(4) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        for (uint32_t p = 0; p < kPages; p++)
            if (d[p * kWordsPerPage + 2] != p + 200)
                f.fail("cluster " + std::to_string(c) + " missed the new home's write of page " + std::to_string(p));
    });
    f.check();
    CHECK(m.nodes[0]->counters().homes_moved.load() == kPages);
    CHECK(fetches_after == fetches_before);             // cluster 0 kept its copies
    // The new home's writes are tracked: its first write faults, and the 7 pages after it, home
    // pages now, read-only and written at its last flushes, are made writable with it, twinned
    // (Write-ahead): all 8 noticed, as cluster 0's reads after barrier 4 show (8 faults before
    // home pages were written ahead).
    CHECK(faults_after - faults_before == 1);
}

TEST_CASE("dsm: a home page its home wrote untracked before another cluster fetched it keeps its home",
          "[dsm-homes]") {
    // lu-nc's pattern: the home writes a page for epochs after its notice is out (writable, no
    // fault, named in no notice), then the other cluster fetches it and writes it, alone, for
    // kMoveEpochs epochs. The fetch is what tells the home's writes: the page stays until the fetch
    // is out of the window, then moves (the other cluster alone wrote it in the last three epochs).
    Machine m(2, 1);
    constexpr uint32_t kPages = 8, kWordsPerPage = 1024;
    const uint64_t off = alloc_everywhere(m, 2 * kPages * 4096ull);  // the first kPages homed at cluster 0
    uint64_t moved_in_window = 0, moved_after = 0;
    Failures f;
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        auto* d = m.at<uint32_t>(c, off);
        if (c == 0)
            for (uint32_t p = 0; p < kPages; p++) d[p * kWordsPerPage] = p + 1;  // a fault each: noticed
        if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        if (c == 0)
            for (uint32_t p = 0; p < kPages; p++) d[p * kWordsPerPage + 1] = p + 10;  // untracked
        if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        // Epoch 2: the home writes untracked again, then (flag 5) cluster 1 reads the pages (a fetch,
        // which protects them at the home) and writes them.
        if (c == 0) {
            for (uint32_t p = 0; p < kPages; p++) d[p * kWordsPerPage + 2] = p + 20;
            if (n.flag_set(5) != DsmStatus::kOk) f.fail("flag: " + DsmNode::error());
        } else {
            if (n.flag_wait(5) != DsmStatus::kOk) f.fail("flag: " + DsmNode::error());
            for (uint32_t p = 0; p < kPages; p++) {
                if (d[p * kWordsPerPage + 1] != p + 10 || d[p * kWordsPerPage + 2] != p + 20)
                    f.fail("cluster 1 missed the home's untracked writes of page " + std::to_string(p));
                d[p * kWordsPerPage + 3] = p + 30;
            }
        }
        if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        // Epochs 3 and 4: cluster 1 alone. The window (epochs 2-4) holds the home's untracked writes.
        for (uint32_t r = 0; r < 2; r++) {
            if (c == 1)
                for (uint32_t p = 0; p < kPages; p++) d[p * kWordsPerPage + 4] = p + 40 + r;
            if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        }
        if (c == 0) moved_in_window = n.counters().homes_moved.load();
        // Epoch 5: cluster 1 alone again; now it alone wrote them in the last three epochs.
        if (c == 1)
            for (uint32_t p = 0; p < kPages; p++) d[p * kWordsPerPage + 5] = p + 50;
        if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        if (c == 0) moved_after = n.counters().homes_moved.load();
        for (uint32_t p = 0; p < kPages; p++)
            if (d[p * kWordsPerPage] != p + 1 || d[p * kWordsPerPage + 1] != p + 10 ||
                d[p * kWordsPerPage + 2] != p + 20 || d[p * kWordsPerPage + 3] != p + 30 ||
                d[p * kWordsPerPage + 4] != p + 41 || d[p * kWordsPerPage + 5] != p + 50)
                f.fail("cluster " + std::to_string(c) + " read a stale page " + std::to_string(p));
    });
    f.check();
    CHECK(moved_in_window == 0);  // main: 8 (cluster 1 looked like the pages' only writer)
    CHECK(moved_after == kPages);
    CHECK(m.nodes[1]->counters().homes_moved.load() == kPages);
}
