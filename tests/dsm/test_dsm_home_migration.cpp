// Home migration (dsm/README.md, "Homes move to their only writer"): at a barrier every bound
// thread of every cluster is in, a page that one cluster alone wrote since the last such barrier
// becomes that cluster's home page, so its later writes send no diff; every read still sees every
// write, a page several clusters write stays where it is, and a barrier some bound thread is not
// in moves nothing.
#include <string>

#include "dsm_machine.hpp"

using namespace dsmtest;

namespace {
uint64_t alloc_everywhere(Machine& m, uint64_t bytes) {
    uint64_t off = 0;
    for (auto& n : m.nodes) off = uint64_t(static_cast<uint8_t*>(n->alloc(bytes, 4096)) - static_cast<uint8_t*>(n->base()));
    return off;
}
}  // namespace

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
