// Write-ahead (dsm/PROTOCOL.md, "Writes"; kWriteAhead in dsm_impl.hpp): a write fault on a page homed
// elsewhere also makes writable, in the same mprotect, the following pages this cluster changed at
// one of its last two flushes. A program that writes the same run of pages every step (LU's
// columns) takes one fault per run, not one per page; a page made writable so and not written
// sends no diff and no notice, and one another cluster writes meanwhile is still invalidated and
// fetched with that write. Fetch for write (PROTOCOL.md): a fetch installs such pages writable, so a
// run read and then rewritten after another cluster's notice invalidated it takes no write fault.
#include <atomic>
#include <string>
#include <thread>

#include "dsm_machine.hpp"

using namespace dsmtest;

namespace {
constexpr uint32_t kPages = 16, kWords = 4096 / 8;

uint64_t value(uint32_t round, uint32_t page, uint32_t who) { return (uint64_t(round) << 32) | (page << 8) | who; }
}  // namespace

TEST_CASE("dsm: a run of pages homed elsewhere written every interval costs one write fault per run, "
          "and every write is seen", "[dsm-write-ahead]") {
    DsmConfig cfg = test_config();
    cfg.migrate_homes = false;  // the pages stay homed at cluster 0: cluster 1 twins and diffs them
    Machine m(3, 1, cfg);
    // 3 x kPages pages: under alloc-block the first kPages are homed at cluster 0. Cluster 1 writes
    // them, cluster 2 (not their home, so its copies are invalidated by notices) counts the notices.
    const uint64_t off = alloc_everywhere(m, 3 * kPages * 4096ull);
    constexpr uint32_t kRounds = 8;
    uint64_t faults_at[kRounds + 1] = {}, inval_at[kRounds + 1] = {}, diffs_at[kRounds + 1] = {};
    Failures f;
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        auto* d = m.at<uint64_t>(c, off);
        for (uint32_t r = 0; r < kRounds; r++) {
            if (c == 1) {
                faults_at[r] = n.counters().write_faults.load();
                diffs_at[r] = n.counters().diffs_sent.load();
            } else if (c == 2) {
                inval_at[r] = n.counters().invalidations.load();
            }
            // Round 5: cluster 1 writes page 0 only (pages 1..15 are made writable ahead and left
            // unchanged). Round 6: it skips page 5, which cluster 0 writes instead (page 5 is
            // writable ahead at cluster 1 while cluster 0's write makes its copy stale).
            if (c == 1)
                for (uint32_t p = 0; p < (r == 5 ? 1 : kPages); p++)
                    if (!(r == 6 && p == 5)) d[p * kWords + r % kWords] = value(r, p, 1);
            if (c == 0 && r == 6) d[5 * kWords + 100] = value(r, 5, 0);
            if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
            for (uint32_t p = 0; p < kPages; p++) {
                const bool written = (r != 5 || p == 0) && !(r == 6 && p == 5);
                if (written && d[p * kWords + r % kWords] != value(r, p, 1))
                    f.fail("round " + std::to_string(r) + ": cluster " + std::to_string(c) + " lost cluster 1's write of page " +
                           std::to_string(p));
            }
            if (r == 6 && d[5 * kWords + 100] != value(r, 5, 0))
                f.fail("round 6: cluster " + std::to_string(c) + " lost cluster 0's write of page 5 (writable ahead at cluster 1)");
            if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        }
        if (c == 1) {
            faults_at[kRounds] = n.counters().write_faults.load();
            diffs_at[kRounds] = n.counters().diffs_sent.load();
        } else if (c == 2) {
            inval_at[kRounds] = n.counters().invalidations.load();
        }
    });
    f.check();
    auto faults = [&](uint32_t r) { return faults_at[r + 1] - faults_at[r]; };
    auto diffs = [&](uint32_t r) { return diffs_at[r + 1] - diffs_at[r]; };
    auto invals = [&](uint32_t r) { return inval_at[r + 1] - inval_at[r]; };
    INFO("cluster 1's write faults per round: " << faults(0) << " " << faults(1) << " " << faults(2) << " " << faults(3)
                                               << " " << faults(4) << " " << faults(5) << " " << faults(6) << " " << faults(7)
                                               << "; diffs " << diffs(4) << " " << diffs(5) << " " << diffs(6)
                                               << "; cluster 2's invalidations " << invals(4) << " " << invals(5) << " "
                                               << invals(6));
    CHECK(faults(0) == kPages);  // no history yet: a fault per page
    // From round 1 on the run was changed at the last flush: its first page faults, the rest come
    // with it (before: kPages faults every round).
    for (uint32_t r : {1u, 2u, 3u, 4u}) CHECK(faults(r) == 1);
    CHECK(diffs(4) == kPages);
    CHECK(invals(4) == kPages);
    // Round 5: one page written, 15 made writable ahead and unchanged: one diff, one notice.
    CHECK(faults(5) == 1);
    CHECK(diffs(5) == 1);
    CHECK(invals(5) == 1);
    // Round 6: pages 1..15 still count as changed at one of the last two flushes; page 5 is left
    // unchanged by cluster 1 (no diff, no notice from it) and written by its home, cluster 0.
    CHECK(faults(6) == 1);
    CHECK(diffs(6) == kPages - 1);
    CHECK(invals(6) == kPages);
    // Round 7: the run breaks at page 5 (invalidated at cluster 1, fetched by its write fault),
    // whose fault brings pages 6..15.
    CHECK(faults(7) == 2);
}

TEST_CASE("dsm: a fetched page this cluster changed lately is installed writable: read and then rewritten, "
          "it takes the read fault only, a run of 32 such pages comes in one fetch, and a page fetched so and "
          "left unchanged is named in no notice",
          "[dsm-write-ahead]") {
    DsmConfig cfg = test_config();
    cfg.migrate_homes = false;  // both write every page anyway; the pages stay homed at cluster 0
    Machine m(3, 1, cfg);
    // kRun pages homed at cluster 0 (the first of 3 x kRun under alloc-block): kFetchPagesWritten,
    // one fetch's run when this cluster changed them all lately.
    // Each round cluster 0 writes word 2r of every page and cluster 1 word 2r + 1, as LU's blocks
    // share its columns' pages: cluster 1's copies are invalidated by cluster 0's notice, and it
    // reads cluster 0's last words (a read fault, a fetch) before writing its own. Cluster 2 only
    // reads, and counts the pages named in the notices it receives.
    constexpr uint32_t kRun = 32, kRounds = 8, kReaderRound = 5;
    const uint64_t off = alloc_everywhere(m, 3 * kRun * 4096ull);
    uint64_t wf_at[kRounds + 1] = {}, rf_at[kRounds + 1] = {}, diffs_at[kRounds + 1] = {}, notices_at[kRounds + 1] = {};
    Failures f;
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        auto* d = m.at<uint64_t>(c, off);
        auto fail = [&](uint32_t r, const std::string& what) {
            f.fail("round " + std::to_string(r) + ": cluster " + std::to_string(c) + " " + what);
        };
        auto record = [&](uint32_t at) {  // the counters as round `at` begins
            if (c == 1) {
                wf_at[at] = n.counters().write_faults.load();
                rf_at[at] = n.counters().read_faults.load();
                diffs_at[at] = n.counters().diffs_sent.load();
            } else if (c == 2) {
                notices_at[at] = n.counters().write_notices_received.load();
            }
        };
        for (uint32_t r = 0; r < kRounds; r++) {
            record(r);
            for (uint32_t p = 0; p < kRun; p++) {
                if (c == 0) d[p * kWords + 2 * r] = value(r, p, 0);
                if (c != 1) continue;
                if (r > 0 && d[p * kWords + 2 * (r - 1)] != value(r - 1, p, 0))
                    fail(r, "lost cluster 0's write of page " + std::to_string(p) + " in the round before");
                if (r != kReaderRound) d[p * kWords + 2 * r + 1] = value(r, p, 1);
            }
            if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
            if (c != 1)
                for (uint32_t p = 0; p < kRun; p++) {
                    if (d[p * kWords + 2 * r] != value(r, p, 0)) fail(r, "lost cluster 0's write of page " + std::to_string(p));
                    const uint64_t want = r == kReaderRound ? 0 : value(r, p, 1);
                    if (d[p * kWords + 2 * r + 1] != want) fail(r, "read a wrong word of cluster 1 in page " + std::to_string(p));
                }
            if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        }
        record(kRounds);
    });
    f.check();
    auto per = [](const uint64_t* at, uint32_t r) { return at[r + 1] - at[r]; };
    std::string seen;
    for (uint32_t r = 0; r < kRounds; r++)
        seen += " [" + std::to_string(per(rf_at, r)) + " " + std::to_string(per(wf_at, r)) + " " +
                std::to_string(per(diffs_at, r)) + " " + std::to_string(per(notices_at, r)) + "]";
    INFO("per round: [cluster 1's read faults, write faults, diffs; pages named in cluster 2's notices]" << seen);
    // Round 0: the pages are valid since CREATE, with no history: a write fault per page.
    CHECK(per(rf_at, 0) == 0);
    CHECK(per(wf_at, 0) == kRun);
    for (uint32_t r = 1; r < kRounds; r++) {
        // One fetch for the run (before: 4 of 8 pages each) and no write fault (before: one after
        // each fetch, write-ahead making its 8 pages writable).
        CHECK(per(rf_at, r) == 1);
        CHECK(per(wf_at, r) == 0);
        // The reader round changes nothing: no diff, and its pages are named by cluster 0 only.
        CHECK(per(diffs_at, r) == (r == kReaderRound ? 0 : kRun));
        CHECK(per(notices_at, r) == (r == kReaderRound ? kRun : 2 * kRun));
    }
}

// "A page written at every release stays writable" (PROTOCOL.md): a page of another home that this
// cluster changes at one release after another (fmm's particles, which both clusters write) is
// diffed from a copy at each release and stays writable, so its next write takes no fault. Cluster
// 1 writes page A (homed at cluster 0) under lock L each round and cluster 0 takes L to read it
// (a recall: cluster 1 releases, a flush, every round); a second thread of cluster 1 writes other
// words of A all the while, unsynchronised with the flushes (what a copy misses goes with the
// next flush). With keep_written off (every release protects A, as before session 21) cluster 1
// takes a write fault on A every round.
namespace {
// Rounds of the hand-off above; the write faults of cluster 1 over the last kCounted of them.
struct KeptRun {
    uint64_t faults = 0, kept = 0;
};
KeptRun kept_writable_run(bool keep, Failures& f) {
    DsmConfig cfg = test_config();
    cfg.migrate_homes = false;  // A stays homed at cluster 0
    cfg.keep_written = keep;
    Machine m(2, 2, cfg);
    // Two pages: under alloc-block page 0 (A) is homed at cluster 0, page 1 (the turn) at cluster 1.
    const uint64_t off = alloc_everywhere(m, 2 * 4096ull);
    constexpr uint32_t kRounds = 16, kCounted = 10, kL = 5, kSideWords = 64;
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> side_last{0};
    uint64_t faults_from = 0, faults_to = 0, kept_to = 0;
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        auto* a = m.at<uint64_t>(c, off);
        auto* turn = m.at<uint64_t>(c, off + 4096);
        if (t == 1) {
            // Cluster 1's second thread: words 256.. of A, racing with the flushes of thread 0.
            uint64_t i = 0;
            if (c == 1)
                for (; !stop.load(std::memory_order_relaxed); i++) a[256 + i % kSideWords] = i + 1;
            if (c == 1) side_last = i;
            if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
            return;
        }
        for (uint32_t r = 0; r < kRounds; r++) {
            if (c == 1 && r == kRounds - kCounted) faults_from = n.counters().write_faults.load();
            for (bool done = false; !done;) {
                if (n.lock(kL) != DsmStatus::kOk) f.fail("lock: " + DsmNode::error());
                if (c == 1 && *turn == 2 * r) {
                    a[0] = value(r, 0, 1);
                    a[1 + r] = r + 1;
                    *turn = 2 * r + 1;
                    done = true;
                } else if (c == 0 && *turn == 2 * r + 1) {
                    if (a[0] != value(r, 0, 1) || a[1 + r] != r + 1)
                        f.fail("round " + std::to_string(r) + ": cluster 0 did not see cluster 1's writes of A");
                    *turn = 2 * r + 2;
                    done = true;
                }
                if (n.unlock(kL) != DsmStatus::kOk) f.fail("unlock: " + DsmNode::error());
                if (!done) std::this_thread::yield();
            }
        }
        if (c == 1) {
            faults_to = n.counters().write_faults.load();
            kept_to = n.counters().pages_kept_writable.load();
        }
        if (c == 0) {  // the last round's read is done: the side writer stops
            while (*turn != 2 * kRounds) {
                if (n.lock(kL) != DsmStatus::kOk || n.unlock(kL) != DsmStatus::kOk) f.fail("lock: " + DsmNode::error());
            }
            stop = true;
        }
        if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        // Every cluster sees the side writer's last writes (words it wrote with no sync of its own).
        const uint64_t last = side_last.load();
        for (uint64_t i = last > kSideWords ? last - kSideWords : 0; i < last; i++)
            if (a[256 + i % kSideWords] != i + 1)
                f.fail("cluster " + std::to_string(c) + " lost the side writer's write " + std::to_string(i + 1));
    });
    return KeptRun{faults_to - faults_from, kept_to};
}
}  // namespace

TEST_CASE("dsm: a page of another home changed at release after release stays writable: no write fault "
          "at its next writes, and every write reaches the other cluster, a racing thread's too",
          "[dsm-write-ahead]") {
    Failures f;
    const KeptRun on = kept_writable_run(true, f);
    const KeptRun off = kept_writable_run(false, f);
    f.check();
    INFO("cluster 1's write faults in the last 10 rounds: kept " << on.faults << " (pages kept " << on.kept
                                                                 << "), not kept " << off.faults);
    CHECK(off.faults >= 10);  // a fault on A every round when each release protects it
    CHECK(on.faults <= 2);
    CHECK(on.kept >= 10);
}
