// Runs of pages change protection in one mprotect (dsm/PROTOCOL.md, "Untracked home pages" and
// "Page state per cluster"): a fetch of kFetchPages pages protects the home's untracked copies of
// them in one call, and installs them at the requester in one call, not one a page each (every
// call splits or merges mappings and flushes the TLB of each core running a thread of the process).
#include <atomic>
#include <string>

#include "dsm_machine.hpp"

using namespace dsmtest;

namespace {
constexpr uint32_t kPages = 8, kWords = 4096 / 8;
uint64_t value(uint32_t round, uint32_t page) { return (uint64_t(round + 1) << 32) | page; }
DsmConfig fixed_homes() {
    DsmConfig cfg = test_config();
    cfg.migrate_homes = false;  // the pages stay homed at cluster 0
    return cfg;
}
// Cluster 1's reads of a round, done (`read(r)`) before cluster 0 goes on (`wait(r)`): a served
// fetch twins cluster 0's untracked home pages, and what becomes of them depends on whether its
// next release comes before or after the serve.
class ReadTurns {
   public:
    void read(uint32_t round) { done_.store(round + 1); }
    void wait(uint32_t round) const {
        while (done_.load() != round + 1) std::this_thread::yield();
    }

   private:
    std::atomic<uint32_t> done_{0};
};
// 2 x kPages pages at the same offset in every cluster: under alloc-block the first kPages are
// homed at cluster 0.
uint64_t alloc_pages(Machine& m) {
    uint64_t off = 0;
    for (auto& n : m.nodes)
        off = uint64_t(static_cast<uint8_t*>(n->alloc(2 * kPages * 4096ull, 4096)) - static_cast<uint8_t*>(n->base()));
    return off;
}
}  // namespace

TEST_CASE("dsm: a fetch of 8 pages the home left writable protects them there in one mprotect and "
          "installs them in one, and the home's later writes are still seen", "[dsm-protection]") {
    Machine m(2, 1, fixed_homes());
    const uint64_t off = alloc_pages(m);
    constexpr uint32_t kRounds = 3;
    uint64_t served[kRounds] = {}, installed[kRounds] = {}, fetches[kRounds] = {}, home_faults[kRounds] = {};
    ReadTurns turns;
    Failures f;
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        volatile uint64_t* d = m.at<uint64_t>(c, off);  // the stores in page order (write-ahead runs forward)
        const DsmCounters& k = n.counters();
        for (uint32_t r = 0; r < kRounds; r++) {
            // Cluster 0 writes its home pages (left writable, untracked, after the barrier's release).
            const uint64_t faults0 = k.write_faults.load();
            if (c == 0)
                for (uint32_t p = 0; p < kPages; p++) d[p * kWords + r] = value(r, p);
            if (c == 0) home_faults[r] = k.write_faults.load() - faults0;
            const uint64_t changes0 = k.protection_changes.load();  // cluster 0: none in the barrier itself
            if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
            // Cluster 1 reads them: one request for all 8, served by cluster 0's service thread.
            const uint64_t changes1 = k.protection_changes.load(), fetches1 = k.page_fetches.load();
            if (c == 1) {
                for (uint32_t p = 0; p < kPages; p++)
                    if (d[p * kWords + r] != value(r, p))
                        f.fail("round " + std::to_string(r) + ": cluster 1 read a stale page " + std::to_string(p));
                installed[r] = k.protection_changes.load() - changes1;
                fetches[r] = k.page_fetches.load() - fetches1;
                turns.read(r);
            }
            // Cluster 0's flush at the barrier after the fetch was served: it finds the twinned
            // pages unchanged and protects them, one mprotect (not before: they stay twinned, and
            // its next round's writes are compared at the next release instead).
            if (c == 0) turns.wait(r);
            if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
            if (c == 0) served[r] = k.protection_changes.load() - changes0;
        }
    });
    f.check();
    for (uint32_t r = 0; r < kRounds; r++) {
        INFO("round " << r << ": cluster 0's write faults " << home_faults[r] << ", its mprotect calls serving the fetch "
                      << served[r] << "; cluster 1's fetches " << fetches[r] << ", its mprotect calls installing them "
                      << installed[r]);
        CHECK(fetches[r] == 1);
        CHECK(installed[r] == 1);  // one mprotect a page before (8)
        CHECK(served[r] == 1);     // the home's release; one mprotect a page before (8), at the serve
        // The release protected every page at the home: its next write faults and is noticed (what
        // keeps cluster 1's next read current; checked above), one fault a round after the first.
        CHECK(home_faults[r] == (r == 0 ? kPages : 1));
    }
}

// Write-ahead at the home (dsm/PROTOCOL.md, "Write-ahead"): under block homes a home page that a
// fetch protected and that the home noticed at one of its last two flushes is made writable with
// the home's write fault on the page before it, with a twin; the release compares it with its
// twin: changed, it is named and stays writable (untracked, as any home page with a notice out);
// unchanged, it is named in no notice and protected again (copies of it are out).
// fft's transposes read the other cluster's rows and then rewrite their own: a fault a page each
// time, 774 of fft's 1,813 write faults a run.
TEST_CASE("dsm: home pages another cluster reads, written every round, fault once a round; one left "
          "unchanged is named in no notice, and its next write is seen", "[dsm-protection]") {
    Machine m(2, 1, fixed_homes());
    const uint64_t off = alloc_pages(m);
    constexpr uint32_t kRounds = 7, kOnlyFirst = 4;  // round 4: the home writes page 0 alone
    uint64_t faults[kRounds] = {}, invals[kRounds] = {};
    ReadTurns turns;
    Failures f;
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        volatile uint64_t* d = m.at<uint64_t>(c, off);  // the stores in page order (write-ahead runs forward)
        const DsmCounters& k = n.counters();
        for (uint32_t r = 0; r < kRounds; r++) {
            const uint64_t f0 = k.write_faults.load(), i0 = k.invalidations.load();
            if (c == 0)
                for (uint32_t p = 0; p < (r == kOnlyFirst ? 1 : kPages); p++) d[p * kWords + r] = value(r, p);
            if (c == 0) faults[r] = k.write_faults.load() - f0;
            if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
            if (c == 1) {
                invals[r] = k.invalidations.load() - i0;
                for (uint32_t p = 0; p < kPages; p++) {
                    const uint32_t last = r == kOnlyFirst && p > 0 ? r - 1 : r;  // the round that last wrote it
                    if (d[p * kWords + last] != value(last, p))
                        f.fail("round " + std::to_string(r) + ": cluster 1 read a stale page " + std::to_string(p));
                }
                turns.read(r);
            }
            // The home's release after the serve protects the pages it twinned and finds unchanged.
            if (c == 0) turns.wait(r);
            if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        }
    });
    f.check();
    for (uint32_t r = 0; r < kRounds; r++) {
        INFO("round " << r << ": cluster 0's write faults " << faults[r] << ", cluster 1's invalidations " << invals[r]);
        // Round 0: first writes since CREATE, not written ahead. Then one fault a round (before: 8).
        CHECK(faults[r] == (r == 0 ? kPages : 1));
        // Round 4: pages 1..7 made writable ahead and left unchanged are named in no notice.
        if (r > 0) CHECK(invals[r] == (r == kOnlyFirst ? 1 : kPages));
    }
}

// Another cluster's diff applied at the home to a page written ahead there goes into its twin too
// (h_diff): the home's release names only the pages it wrote itself. Before, a page that both
// clusters write parts of (lu-nc's columns) was named by the home for the other cluster's bytes,
// and that cluster dropped its copy and fetched it back.
TEST_CASE("dsm: another cluster's diff to a home page written ahead does not make the home name it",
          "[dsm-protection]") {
    Machine m(2, 1, fixed_homes());
    const uint64_t off = alloc_pages(m);
    constexpr uint32_t kRounds = 3, kLast = kRounds - 1;  // last round: the home writes page 0 alone
    std::atomic<int> home_wrote{0}, diffs_in{0};
    uint64_t invals = 0, unchanged = 0;
    Failures f;
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        volatile uint64_t* d = m.at<uint64_t>(c, off);
        const DsmCounters& k = n.counters();
        for (uint32_t r = 0; r < kRounds; r++) {
            const uint64_t i0 = k.invalidations.load(), u0 = k.written_ahead_unchanged.load();
            if (c == 0) {  // word 0 of each page (page 0 alone in the last round)
                for (uint32_t p = 0; p < (r == kLast ? 1 : kPages); p++) d[p * kWords] = value(r, p);
                home_wrote = int(r + 1);
                while (r == kLast && diffs_in.load() != int(r + 1)) std::this_thread::yield();
            } else {  // word 1 of each page, its diffs at the home before the home's release
                while (home_wrote.load() != int(r + 1)) std::this_thread::yield();
                for (uint32_t p = 0; p < kPages; p++) d[p * kWords + 1] = value(r, p) + 1;
                if (n.flush() != DsmStatus::kOk) f.fail("flush: " + DsmNode::error());
                diffs_in = int(r + 1);
            }
            if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
            if (r == kLast && c == 1) invals = k.invalidations.load() - i0;
            if (r == kLast && c == 0) unchanged = k.written_ahead_unchanged.load() - u0;
            for (uint32_t p = 0; p < kPages; p++) {
                const uint32_t w0 = r == kLast && p > 0 ? r - 1 : r;
                if (d[p * kWords] != value(w0, p) || d[p * kWords + 1] != value(r, p) + 1)
                    f.fail("round " + std::to_string(r) + ": cluster " + std::to_string(c) + " read a stale page " +
                           std::to_string(p));
            }
            if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        }
    });
    f.check();
    INFO("last round: cluster 1's invalidations " << invals << ", cluster 0's pages written ahead and unchanged " << unchanged);
    CHECK(unchanged == kPages - 1);  // pages 1..7: only cluster 1's bytes changed
    CHECK(invals == 1);              // page 0 alone (before: 8)
}

TEST_CASE("dsm: home pages written untracked for several intervals and then protected by a fetch are written "
          "ahead together at the home's next write, and every write is seen",
          "[dsm-protection]") {
    Machine m(2, 1, fixed_homes());
    const uint64_t off = alloc_pages(m);
    // Cluster 0 writes its kPages home pages every round: noticed once (round 0), then writable and
    // untracked, so no notice names them and their `wrote_at` ages as cluster 0 also writes page
    // kPages (homed at cluster 1: a diff, a flush, every round). Cluster 1 reads them in rounds 3
    // and 5; each fetch twins them at cluster 0, whose release then finds them unchanged and
    // protects them, and whose next write faults.
    constexpr uint32_t kRounds = 6;
    uint64_t faults_at[kRounds + 1] = {};
    ReadTurns turns;
    Failures f;
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        auto* d = m.at<uint64_t>(c, off);
        for (uint32_t r = 0; r < kRounds; r++) {
            if (c == 0) {
                faults_at[r] = n.counters().write_faults.load();
                for (uint32_t p = 0; p <= kPages; p++) {
                    d[p * kWords + r] = value(r, p);
                    std::atomic_signal_fence(std::memory_order_seq_cst);  // the stores in page order
                }
            }
            if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
            if (c == 1 && (r == 3 || r == 5))
                for (uint32_t p = 0; p <= kPages; p++)
                    for (uint32_t w = 0; w <= r; w++)
                        if (d[p * kWords + w] != value(w, p))
                            f.fail("round " + std::to_string(r) + ": cluster 1 read a stale word " + std::to_string(w) +
                                   " of page " + std::to_string(p));
            if (c == 1 && (r == 3 || r == 5)) turns.read(r);
            // The home's release after the serve protects the pages the serve twinned (unchanged).
            if (c == 0 && (r == 3 || r == 5)) turns.wait(r);
            if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        }
        if (c == 0) faults_at[kRounds] = n.counters().write_faults.load();
    });
    f.check();
    auto faults = [&](uint32_t r) { return faults_at[r + 1] - faults_at[r]; };
    INFO("cluster 0's write faults per round: " << faults(0) << " " << faults(1) << " " << faults(2) << " " << faults(3)
                                               << " " << faults(4) << " " << faults(5));
    CHECK(faults(0) == kPages + 1);  // no history: a fault a page
    for (uint32_t r : {1u, 2u, 3u, 5u}) CHECK(faults(r) == 1);  // page kPages only: the home pages are untracked
    // Round 4, after round 3's fetch protected them: one fault for the home pages and one for page
    // kPages (before: their last notice was 3 flushes back, so a fault each, kPages + 1).
    CHECK(faults(4) == 2);
}

// A served home page is twinned, not protected (dsm/PROTOCOL.md): a fetch of untracked home pages
// costs the home no mprotect, and its writes after the copy went out take no fault; its next
// release compares them with their twins and names them, so the reader's next acquire invalidates
// its copies and it reads the writes. SPLASH-3's ocean: the other cluster reads a step's boundary
// rows, then their home writes them (on main: a fault at the home for each run of up to 16 such
// pages, and an mprotect at each serve).
TEST_CASE("dsm: home pages another cluster fetched and the home then writes in the same interval cost the home no "
          "fault and no mprotect, and the reader sees the writes after the next barrier",
          "[dsm-protection]") {
    Machine m(2, 1, fixed_homes());
    const uint64_t off = alloc_pages(m);
    constexpr uint32_t kRounds = 4;
    struct {
        uint64_t faults, changes;  // cluster 0's, writing the pages cluster 1 has fetched
        uint64_t invals;           // cluster 1's, at the barrier after
    } at[kRounds] = {};
    ReadTurns turns;
    Failures f;
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        volatile uint64_t* d = m.at<uint64_t>(c, off);
        const DsmCounters& k = n.counters();
        for (uint32_t r = 0; r < kRounds; r++) {
            if (c == 1) {  // round r reads what the home wrote in round r - 1 (round 0: CREATE's zeros)
                for (uint32_t p = 0; p < kPages; p++)
                    if (d[p * kWords] != (r == 0 ? 0 : value(r - 1, p)))
                        f.fail("round " + std::to_string(r) + ": cluster 1 read a stale page " + std::to_string(p));
                turns.read(r);
            } else {  // the home writes its pages once the other cluster has fetched them
                turns.wait(r);
                const uint64_t f0 = k.write_faults.load(), c0 = k.protection_changes.load();
                for (uint32_t p = 0; p < kPages; p++) d[p * kWords] = value(r, p);
                at[r].faults = k.write_faults.load() - f0;
                at[r].changes = k.protection_changes.load() - c0;
            }
            const uint64_t i0 = k.invalidations.load();
            if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
            if (c == 1) at[r].invals = k.invalidations.load() - i0;
            if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        }
    });
    f.check();
    for (uint32_t r = 1; r < kRounds; r++) {
        INFO("round " << r << ": cluster 0's write faults " << at[r].faults << " and mprotect calls " << at[r].changes
                      << " writing the pages cluster 1 had fetched; cluster 1's invalidations at the barrier after "
                      << at[r].invals);
        // Round 0: first writes since CREATE (every copy is valid everywhere): a fault a page.
        CHECK(at[r].faults == 0);   // main: 1 (one fault, the other 7 pages written ahead with it)
        CHECK(at[r].changes == 0);  // main: 1
        CHECK(at[r].invals == kPages);
    }
}
