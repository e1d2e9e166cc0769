// Runs of pages change protection in one mprotect (dsm/PROTOCOL.md, "Untracked home pages" and
// "Page state per cluster"): a fetch of kFetchPages pages protects the home's untracked copies of
// them in one call, and installs them at the requester in one call, not one a page each (every
// call splits or merges mappings and flushes the TLB of each core running a thread of the process).
#include <string>

#include "dsm_machine.hpp"

using namespace dsmtest;

namespace {
constexpr uint32_t kPages = 8, kWords = 4096 / 8;
uint64_t value(uint32_t round, uint32_t page) { return (uint64_t(round + 1) << 32) | page; }
}  // namespace

TEST_CASE("dsm: a fetch of 8 pages the home left writable protects them there in one mprotect and "
          "installs them in one, and the home's later writes are still seen", "[dsm-protection]") {
    DsmConfig cfg = test_config();
    cfg.migrate_homes = false;
    Machine m(2, 1, cfg);
    // 2 x kPages pages, alloc-block: the first kPages are homed at cluster 0.
    uint64_t off = 0;
    for (auto& n : m.nodes)
        off = uint64_t(static_cast<uint8_t*>(n->alloc(2 * kPages * 4096ull, 4096)) - static_cast<uint8_t*>(n->base()));
    constexpr uint32_t kRounds = 3;
    uint64_t served[kRounds] = {}, installed[kRounds] = {}, fetches[kRounds] = {}, home_faults[kRounds] = {};
    Failures f;
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        auto* d = m.at<uint64_t>(c, off);
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
            }
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
        CHECK(served[r] == 1);     // one mprotect a page before (8)
        // The fetch protected every page at the home: each later write faults and is noticed (what
        // keeps cluster 1's next read current; checked above).
        CHECK(home_faults[r] == kPages);
    }
}
