// Barriers (dsm/PROTOCOL.md, "Barriers"): an arrival at a barrier homed at the arriving cluster is
// made on that home's manager by the arriving thread, with no request to its own service thread;
// and a barrier every bound thread of the cluster is in leaves the pages its flush diffs writable
// until the reply is applied, so those that move to their only writer there take no mprotect.
#include <string>

#include "dsm_machine.hpp"

using namespace dsmtest;

namespace {
// Requests made by cluster c's compute threads.
uint64_t compute_requests(Machine& m, uint16_t c) { return compute_endpoints_sum(m, c, &RtEndpointCounters::requests); }
}  // namespace

TEST_CASE("dsm: an arrival at a barrier homed at its own cluster asks no service thread, and every cluster "
          "still sees the writes made before it",
          "[dsm-barriers]") {
    const uint16_t C = GENERATE(2, 3);
    const uint16_t T = GENERATE(1, 2);
    Machine m(C, T);
    constexpr uint32_t kRounds = 40;
    const uint64_t off = alloc_everywhere(m, uint64_t(C) * T * 4096);
    std::vector<uint64_t> requests(C), here(C);
    Failures f;
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        // Phase 1: barrier 0 (homed at cluster 0) with nothing to flush: cluster 0's arrivals are
        // made on its manager in place (before: one request to its own service thread each).
        if (n.barrier(C) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());  // homed at cluster 0 too
        const uint64_t req0 = compute_requests(m, c), here0 = n.counters().barriers_here.load();
        if (n.barrier(C) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        for (uint32_t r = 0; r < kRounds; r++)
            if (n.barrier(0) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        if (t == 0) {
            requests[c] = compute_requests(m, c) - req0;
            here[c] = n.counters().barriers_here.load() - here0;
        }
        if (n.barrier(C) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        // Phase 2: every thread writes its page, then a barrier homed at each cluster in turn, then
        // every thread reads every page.
        auto* d = m.at<volatile uint32_t>(c, off);
        const uint32_t me = uint32_t(c) * T + t;
        for (uint32_t r = 0; r < kRounds; r++) {
            d[me * 1024 + r % 1024] = r * 100 + me + 1;
            if (n.barrier(r % C) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
            for (uint32_t o = 0; o < uint32_t(C) * T; o++)
                if (d[o * 1024 + r % 1024] != r * 100 + o + 1)
                    f.fail("round " + std::to_string(r) + ": cluster " + std::to_string(c) + " read " +
                           std::to_string(d[o * 1024 + r % 1024]) + " from thread " + std::to_string(o) +
                           " after a barrier homed at cluster " + std::to_string(r % C));
            if (n.barrier(r % C + C) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        }
    });
    f.check();
    for (uint16_t c = 0; c < C; c++) {
        INFO("C " << C << ", T " << T << ": cluster " << c << "'s compute threads made " << requests[c]
                  << " requests in " << kRounds << " barriers homed at cluster 0, " << here[c] << " of them on the home here");
        CHECK(requests[c] == (c == 0 ? 0 : kRounds + 1));  // cluster 0: kRounds requests before
        CHECK(here[c] == (c == 0 ? kRounds + 1 : 0));
    }
    // All of cluster 0's barriers homed there: 3 barrier(C) and kRounds in phase 1, two a round of
    // phase 2 whose round is a multiple of C.
    CHECK(m.nodes[0]->counters().barriers_here.load() == 3 + kRounds + 2 * ((kRounds + C - 1) / C));
}

TEST_CASE("dsm: pages a barrier moves to their only writer take no mprotect at that barrier there, and "
          "every cluster reads their writes",
          "[dsm-barriers]") {
    const uint16_t C = GENERATE(2, 3);
    const uint16_t T = GENERATE(1, 2);
    Machine m(C, T);  // alloc-block: the first 16 pages of the allocation are homed at cluster 0
    constexpr uint32_t kPages = 8, kWords = 1024;
    const uint64_t off = alloc_everywhere(m, uint64_t(C) * 16 * 4096);
    const uint16_t writer = uint16_t(C - 1);
    uint64_t changes = 0, faults = 0;
    Failures f;
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        auto* d = m.at<volatile uint32_t>(c, off);
        const DsmCounters& k = n.counters();
        // Every other page of cluster 0's block (each a run of its own): the writer alone writes
        // them. Page 1 is written by the writer and by cluster 0 (different words): it stays, and
        // the barrier's notices invalidate the writer's copy, left writable by its flush.
        if (c == writer && t == 0) {
            for (uint32_t p = 0; p < kPages; p++) d[2 * p * kWords] = 100 + p;
            d[1 * kWords + 1] = 77;
        }
        if (c == 0 && t == 0) d[1 * kWords + 2] = 88;
        const uint64_t changes0 = k.protection_changes.load();
        if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());  // the kPages pages move
        if (c == writer && t == 0) {
            changes = k.protection_changes.load() - changes0;
            const uint64_t faults0 = k.write_faults.load();
            for (uint32_t p = 0; p < kPages; p++) d[2 * p * kWords + 1] = 200 + p;  // its own now, writable
            faults = k.write_faults.load() - faults0;
        }
        if (n.barrier(2) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        for (uint32_t p = 0; p < kPages; p++)
            if (d[2 * p * kWords] != 100 + p || d[2 * p * kWords + 1] != 200 + p)
                f.fail("cluster " + std::to_string(c) + " read " + std::to_string(d[2 * p * kWords]) + ", " +
                       std::to_string(d[2 * p * kWords + 1]) + " on page " + std::to_string(2 * p));
        if (d[1 * kWords + 1] != 77 || d[1 * kWords + 2] != 88)
            f.fail("cluster " + std::to_string(c) + " lost a write of the page both wrote: " +
                   std::to_string(d[1 * kWords + 1]) + ", " + std::to_string(d[1 * kWords + 2]));
        if (n.barrier(3) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        // Now read by every cluster (fetched, so protected at the new home): the writer's next write
        // faults and is noticed.
        if (c == writer && t == 0)
            for (uint32_t p = 0; p < kPages; p++) d[2 * p * kWords + 2] = 300 + p;
        if (n.barrier(4) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        for (uint32_t p = 0; p < kPages; p++)
            if (d[2 * p * kWords + 2] != 300 + p)
                f.fail("cluster " + std::to_string(c) + " missed the new home's write of page " + std::to_string(2 * p) +
                       " (read " + std::to_string(d[2 * p * kWords + 2]) + ")");
    });
    f.check();
    INFO("C " << C << ", T " << T << ": the writer's mprotect calls in the barrier that moved " << kPages
              << " pages to it " << changes << ", its write faults on them after " << faults);
    CHECK(m.nodes[0]->counters().homes_moved.load() >= kPages);
    CHECK(faults == 0);
    // Page 1 (stays homed at cluster 0): protected by its invalidation; the moved pages: none
    // (before: one mprotect each at the flush, read-only, and one at the move, writable again).
    CHECK(changes <= 1);
}

TEST_CASE("dsm: a release's diffs to one home go out as they are made and the release waits for one ack, "
          "and the home has every write after the barrier",
          "[dsm-barriers]") {
    DsmConfig cfg = test_config();
    cfg.migrate_homes = false;  // the pages stay at cluster 0: cluster 1 diffs them at every release
    Machine m(2, 1, cfg, 1u << 20);  // a transport's max_message()
    // 300 pages of cluster 0's block (alloc-block) that cluster 1 writes whole: ~1.2 MB of diffs,
    // more than one message. Before, each message was a request (2 round trips, the home applying
    // the whole release while the releaser waited); now all but the last go one-way as made.
    constexpr uint32_t kPages = 300, kWords = 512;
    const uint64_t off = alloc_everywhere(m, 2ull * kPages * 4096);
    auto value = [](uint32_t round, uint32_t i) { return 0x0101010101010101ull * ((i + round * 7) % 250 + 1); };
    uint64_t requests = 0, sent = 0;
    Failures f;
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        auto* d = m.at<volatile uint64_t>(c, off);
        for (uint32_t round = 0; round < 2; round++) {
            if (c == 1)
                for (uint32_t i = 0; i < kPages * kWords; i++) d[i] = value(round, i);
            const uint64_t req0 = compute_requests(m, c);
            const uint64_t sent0 = compute_endpoints_sum(m, c, &RtEndpointCounters::msgs_sent);
            if (n.barrier(0) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());  // homed at cluster 0
            if (c == 1 && round == 1) {
                requests = compute_requests(m, c) - req0;
                sent = compute_endpoints_sum(m, c, &RtEndpointCounters::msgs_sent) - sent0;
            }
            for (uint32_t i = 0; i < kPages * kWords; i++)
                if (d[i] != value(round, i)) {
                    f.fail("round " + std::to_string(round) + ": cluster " + std::to_string(c) + " read word " +
                           std::to_string(i) + " stale");
                    break;
                }
            if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier: " + DsmNode::error());
        }
    });
    f.check();
    INFO("cluster 1's requests in its barrier " << requests << ", messages " << sent);
    CHECK(requests == 2);  // one for the diffs' ack, one for the barrier (before: 3, the diffs in 2 requests)
    CHECK(sent >= 2 + (kPages * 4096) / (64u << 10));  // the diffs in messages of at most 64 KiB
}
