// Message-size limits: the loopback runtime's max_message() lowered to a little over one page
// (4200 bytes: a page fetch still fits, two fully written pages' diffs do not, nor one page whose
// every other word pair changed), so a release must split its diffs, and grants and barriers must
// move write notices in chunks (pushed to a home ahead of the message, pulled from a home after
// its reply). The mailbox refuses any larger message with the real runtime's words, so a test
// passes only if nothing went over the limit.
#include <string>

#include "dsm_machine.hpp"

using namespace dsmtest;

namespace {

constexpr uint32_t kLimit = 4200;
constexpr uint32_t kPage = 4096;
constexpr uint32_t kWords = kPage / 4;

uint64_t offset_of(DsmNode& n, void* p) { return uint64_t(static_cast<uint8_t*>(p) - static_cast<uint8_t*>(n.base())); }

}  // namespace

TEST_CASE("dsm limits: a release's diffs larger than max_message() arrive whole, in many messages", "[dsm-limits]") {
    const uint16_t C = 2, T = 2;
    Machine m(C, T, test_config(kPage), kLimit);
    constexpr uint32_t kPages = 64;  // a release of 32 full pages to one home: ~130 KB of diffs
    uint64_t off = 0;
    for (auto& n : m.nodes) off = offset_of(*n, n->alloc(uint64_t(kPages) * kPage, kPage));
    Failures f;
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        auto* d = m.at<uint32_t>(c, off);
        const uint32_t me = c * T + t, P = C * T;
        // Phase 1: whole pages, page p written by pid p mod P (every word changed).
        for (uint32_t p = me; p < kPages; p += P)
            for (uint32_t w = 0; w < kWords; w++) d[p * kWords + w] = 0x10000000u + p * kWords + w;
        if (n.barrier(5) != DsmStatus::kOk) f.fail("barrier 5: " + DsmNode::error());
        for (uint32_t i = 0; i < kPages * kWords; i++)
            if (d[i] != 0x10000000u + i) {
                f.fail("phase 1: cluster " + std::to_string(c) + " word " + std::to_string(i) + " = " +
                       std::to_string(d[i]));
                break;
            }
        if (n.barrier(6) != DsmStatus::kOk) f.fail("barrier 6: " + DsmNode::error());
        // Phase 2: every page shared word by word: pid k writes the words w with w mod P == k, so a
        // cluster's diff of one page is 512 runs of 8 bytes (8 KB, more than one message).
        for (uint32_t p = 0; p < kPages; p++)
            for (uint32_t w = me; w < kWords; w += P) d[p * kWords + w] = 0x20000000u + p * 7919u + w;
        if (n.barrier(7) != DsmStatus::kOk) f.fail("barrier 7: " + DsmNode::error());
        for (uint32_t p = 0; p < kPages; p++)
            for (uint32_t w = 0; w < kWords; w++)
                if (d[p * kWords + w] != 0x20000000u + p * 7919u + w) {
                    f.fail("phase 2: cluster " + std::to_string(c) + " page " + std::to_string(p) + " word " +
                           std::to_string(w) + " = " + std::to_string(d[p * kWords + w]));
                    p = kPages;
                    break;
                }
    });
    f.check();
    for (auto& n : m.nodes) {
        // Phase 1: 32 pages of each cluster go to the other's home, phase 2: 32 more (at least).
        CHECK(n->counters().diffs_sent.load() >= 32);
        CHECK(n->counters().diff_bytes.load() > 30u * kLimit);
    }
}

TEST_CASE("dsm limits: write notices beyond max_message() move in chunks (grant, barrier arrival and reply)",
          "[dsm-limits]") {
    const uint16_t C = 2, T = 2;
    Machine m(C, T, test_config(kPage), kLimit);
    constexpr uint32_t kArea = 500;      // pages of each cluster's area
    constexpr uint32_t kIntervals = 120; // releases of one thread of each cluster
    constexpr uint32_t kPerInterval = 20;  // pages named by each release: 120 x 90 bytes of notices
    uint64_t area[2] = {0, 0}, ctl = 0;
    for (auto& n : m.nodes) {
        area[0] = offset_of(*n, n->alloc(uint64_t(kArea) * kPage, kPage));
        area[1] = offset_of(*n, n->alloc(uint64_t(kArea) * kPage, kPage));
        ctl = offset_of(*n, n->alloc(kPage, kPage));
    }
    // Word 0 of page q of cluster c's area after `rounds` rounds of releases (the last writer wins).
    auto expect = [](uint32_t round0, uint32_t rounds, uint32_t q) {
        uint32_t v = 0;
        for (uint32_t k = round0; k < round0 + rounds; k++)
            for (uint32_t j = 0; j < kPerInterval; j++)
                if ((k * kPerInterval + j) % kArea == q) v = k * 1000 + j + 1;
        return v;
    };
    auto releases = [&](uint16_t c, DsmNode& n, uint32_t round0, Failures& f) {
        auto* a = m.at<uint32_t>(c, area[c]);
        auto* cnt = m.at<uint32_t>(c, ctl);
        for (uint32_t k = round0; k < round0 + kIntervals; k++) {
            // lock 2 lives at cluster 0, lock 3 at cluster 1: each cluster releases one of each home.
            const uint32_t l = 2 + c;
            if (n.lock(l) != DsmStatus::kOk) f.fail("lock: " + DsmNode::error());
            for (uint32_t j = 0; j < kPerInterval; j++) a[((k * kPerInterval + j) % kArea) * kWords] = k * 1000 + j + 1;
            cnt[c * 16] = k + 1;
            if (n.unlock(l) != DsmStatus::kOk) f.fail("unlock: " + DsmNode::error());
            // The token stays here and the release sends nothing (LockToken): the flush closes
            // the interval a release used to close, so each release is one interval as before.
            if (n.flush() != DsmStatus::kOk) f.fail("flush: " + DsmNode::error());
        }
    };
    auto check_area = [&](uint16_t c, uint16_t owner, uint32_t round0, uint32_t rounds, const char* what, Failures& f) {
        auto* a = m.at<uint32_t>(c, area[owner]);
        for (uint32_t q = 0; q < kArea; q++)
            if (a[q * kWords] != expect(round0, rounds, q)) {
                f.fail(std::string(what) + ": cluster " + std::to_string(c) + " sees page " + std::to_string(q) +
                       " of cluster " + std::to_string(owner) + "'s area = " + std::to_string(a[q * kWords]) +
                       ", expected " + std::to_string(expect(round0, rounds, q)));
                return;
            }
    };
    Failures f;
    std::atomic<bool> c0_done{false};
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        // 1. Both clusters release 120 intervals; barrier 1 (home: cluster 1): cluster 0's arrival
        //    pushes its notices ahead, each reply names the other cluster's 120 intervals (pulled).
        if (t == 0) releases(c, n, 0, f);
        if (n.barrier(1) != DsmStatus::kOk) f.fail("barrier 1: " + DsmNode::error());
        for (uint16_t o = 0; o < C; o++) check_area(c, o, 0, kIntervals, "after barrier 1", f);
        if (n.barrier(9) != DsmStatus::kOk) f.fail("barrier 9: " + DsmNode::error());
        // 2. Cluster 0 releases lock 2 another 120 times; cluster 1 then acquires it: lock 2's
        //    token comes back from cluster 0 with 120 intervals (more than one message: sent
        //    ahead one-way by cluster 0's service thread), and the grant lacks them: cluster 1
        //    pulls them from lock 2's home.
        if (c == 0 && t == 0) {
            releases(0, n, kIntervals, f);
            c0_done.store(true);
        }
        if (c == 1 && t == 0) {
            // Outside the DSM (a test-side flag), so the one grant below carries all 120.
            while (!c0_done.load()) std::this_thread::yield();
            if (n.lock(2) != DsmStatus::kOk) f.fail("lock 2: " + DsmNode::error());
            if (m.at<uint32_t>(1, ctl)[0] != 2 * kIntervals) f.fail("the grant of lock 2 missed a release");
            check_area(1, 0, 0, 2 * kIntervals, "after the grant of lock 2", f);
            if (n.unlock(2) != DsmStatus::kOk) f.fail("unlock 2: " + DsmNode::error());
        }
        if (n.barrier(10) != DsmStatus::kOk) f.fail("barrier 10: " + DsmNode::error());
        check_area(c, 0, 0, 2 * kIntervals, "after barrier 10", f);
    });
    f.check();
    // Not every release names its 20 pages: under the default (alloc-block) homes a home page
    // written again before the other cluster fetched it is not tracked, so not named again
    // (dsm.cpp, h_fetch): ~1600 and ~2900 here, not 2400 each. What the test needs is that they
    // could not travel in one message (4 bytes a page named, plus each interval's header), and
    // the mailbox refused none.
    for (auto& n : m.nodes) CHECK(uint64_t(n->counters().write_notices_received.load()) * 4 > kLimit);
}
