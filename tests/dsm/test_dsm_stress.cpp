// Randomized stress: many threads on several clusters do lock-protected updates of a shared array
// and barrier phases with unsynchronized per-thread writes; the final state equals a sequential
// model's.
#include <cstring>
#include <random>
#include <string>

#include "dsm_machine.hpp"

using namespace dsmtest;

namespace {

struct Op {
    uint32_t idx;
    uint32_t add;
    uint32_t mul;  // the update a[idx] = a[idx] * mul + add under lock idx % kLocks: order matters
};

constexpr uint32_t kElems = 6000;   // ~6 pages of uint32
constexpr uint32_t kLocks = 13;
constexpr uint32_t kPhases = 5;
constexpr uint32_t kOpsPerPhase = 120;

// Operations of thread `me` in `phase`: deterministic, so the model can be computed.
std::vector<Op> ops_of(uint32_t seed, uint32_t me, uint32_t phase) {
    std::mt19937 rng(seed * 7919u + me * 104729u + phase);
    std::vector<Op> v;
    for (uint32_t k = 0; k < kOpsPerPhase; k++)
        v.push_back(Op{uint32_t(rng() % kElems), uint32_t(rng() % 1000) + 1, 1});
    return v;
}

}  // namespace

TEST_CASE("dsm: randomized lock and barrier stress equals the sequential model", "[dsm-stress]") {
    const uint16_t C = GENERATE(2, 3);
    const uint32_t seed = GENERATE(1u, 2u);
    const uint16_t T = 3;
    const HomePolicy home = GENERATE(HomePolicy::kAllocBlock, HomePolicy::kRoundRobin);  // the default first
    DsmConfig cfg = test_config();
    cfg.home = home;
    Machine m(C, T, cfg);
    const uint32_t P = C * T;
    // a: lock-protected accumulators; own: per-thread slots written between barriers (no lock);
    // log: per-lock append logs (order-sensitive: each entry records the previous entry's value).
    uint64_t off_a = 0, off_own = 0, off_log = 0;
    for (auto& n : m.nodes) {
        auto rel = [&](void* p) { return uint64_t(static_cast<uint8_t*>(p) - static_cast<uint8_t*>(n->base())); };
        off_a = rel(n->alloc(kElems * 4));
        off_own = rel(n->alloc(uint64_t(P) * 300 * 4));
        off_log = rel(n->alloc(uint64_t(kLocks) * 2 * 4096));
        // The prefix initializes (identically on every cluster).
        auto* a = static_cast<uint32_t*>(static_cast<void*>(static_cast<uint8_t*>(n->base()) + off_a));
        for (uint32_t i = 0; i < kElems; i++) a[i] = i;
    }
    Failures f;
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        auto* a = m.at<uint32_t>(c, off_a);
        auto* own = m.at<uint32_t>(c, off_own);
        auto* log = m.at<uint32_t>(c, off_log);
        const uint32_t me = c * T + t;
        for (uint32_t phase = 0; phase < kPhases; phase++) {
            for (const Op& op : ops_of(seed, me, phase)) {
                const uint32_t l = op.idx % kLocks;
                if (n.lock(100 + l) != DsmStatus::kOk) f.fail("lock: " + DsmNode::error());
                a[op.idx] += op.add;
                // Lock l's log: entry 0 is the length; an append must see the previous append.
                uint32_t* lg = log + l * 2048;
                const uint32_t len = lg[0];
                if (len > 0 && lg[len] != (len - 1) * 31 + 7) f.fail("log " + std::to_string(l) + " entry stale");
                if (len + 1 < 2048) {
                    lg[len + 1] = len * 31 + 7;
                    lg[0] = len + 1;
                }
                if (n.unlock(100 + l) != DsmStatus::kOk) f.fail("unlock: " + DsmNode::error());
            }
            for (uint32_t i = 0; i < 300; i++) own[me * 300 + i] = phase * 1000000 + me * 1000 + i;
            n.barrier(50);
            for (uint32_t p = 0; p < P; p++)
                if (own[p * 300 + 299] != phase * 1000000 + p * 1000 + 299 || own[p * 300] != phase * 1000000 + p * 1000)
                    f.fail("phase " + std::to_string(phase) + ": slot of thread " + std::to_string(p) + " stale");
            n.barrier(51);
        }
    });
    f.check();
    // The sequential model: every update applied once (additions commute).
    std::vector<uint32_t> model(kElems);
    for (uint32_t i = 0; i < kElems; i++) model[i] = i;
    uint32_t appends = 0;
    for (uint32_t me = 0; me < P; me++)
        for (uint32_t phase = 0; phase < kPhases; phase++)
            for (const Op& op : ops_of(seed, me, phase)) {
                model[op.idx] += op.add;
                appends++;
            }
    // Read the final state through a fresh lock acquire at every cluster (each must agree).
    Failures g;
    m.run([&](uint16_t c, uint16_t t, DsmNode& n) {
        if (t != 0) return;
        auto* a = m.at<uint32_t>(c, off_a);
        auto* log = m.at<uint32_t>(c, off_log);
        n.barrier(52, 1, C);
        uint32_t total = 0;
        for (uint32_t l = 0; l < kLocks; l++) total += log[l * 2048];
        if (total != appends) g.fail("cluster " + std::to_string(c) + ": " + std::to_string(total) + " log appends, model " +
                                     std::to_string(appends));
        for (uint32_t i = 0; i < kElems; i++)
            if (a[i] != model[i]) {
                g.fail("cluster " + std::to_string(c) + ": a[" + std::to_string(i) + "] = " + std::to_string(a[i]) +
                       ", model " + std::to_string(model[i]));
                break;
            }
    });
    g.check();
}
