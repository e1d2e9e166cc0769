// coll_check.hpp: test support (not in the library users link): one compute thread's round of
// every collective, each result checked against a sequential reference computed from the same
// generator. Used by the unit test over the loopback runtime and by `iccs run collectives`
// (real cluster processes), so both check the same thing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "group.hpp"

namespace iccs::group::testing {

// Per collective, a CRC-32 (IEEE, as zlib's) chained over the bytes of every result this rank got,
// in call order (roots only where only the root gets one): printed by `iccs run collectives` so that
// the test compares them across clusters and with its own reference (tests/integration/coll_reference.py).
struct ResultDigests {
    uint32_t crc[static_cast<size_t>(Coll::kCount)] = {};
    void add(Coll c, const void* p, size_t n);
    std::string format() const;  // "bcast 1a2b3c4d reduce ..." (every collective but barrier)
};

struct CheckPlan {
    std::vector<uint32_t> sizes{0, 1, 1000};  // elements (int64) per rank and collective
    uint32_t rounds = 1;                      // every size this many times (roots and counts vary)
    Family family = Family::kHier;
    ResultDigests* digests = nullptr;         // when set: every result this rank got, digested
    bool inject_error = false;                // test hook: rank 0 gives the first allreduce sum of the
                                              // largest size a wrong element (every rank must fail)
};

// Runs every collective of the plan on this thread's Group; false with `why` at the first wrong
// element or failed call (the Group's error).
bool check_all_collectives(Group& g, const CheckPlan& plan, std::string& why);

// MagPIe's rule from counters summed over every cluster: for each collective, the WAN data bytes
// equal the minimum (each item once to each receiving site), no item came into a site twice in
// one call (the coordinators' audit), and no message had two WAN links behind it. False with `why` naming the collective and the figures.
bool check_magpie_rule(const Counters& c, std::string& why);

}  // namespace iccs::group::testing
