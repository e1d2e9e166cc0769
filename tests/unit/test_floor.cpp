// The floor rule of `bench dsm` (perf/floor_check.hpp): direct is flagged as slower than iccs only
// beyond noise (median over 10% higher AND best run slower), on given numbers.
#include <catch2/catch.hpp>

#include "floor_check.hpp"

using namespace iccs;

TEST_CASE("floor rule: direct slower than iccs beyond noise is flagged", "[floor]") {
    // The Jacobi figures: 1.31-1.41 s over direct against 0.92-1.04 s over iccs.
    CHECK(floor_broken({1.31, 1.35, 1.41, 1.38, 1.33}, {0.92, 1.04, 0.98, 1.00, 0.95}));
    // direct faster, or equal: no flag
    CHECK_FALSE(floor_broken({29.0, 28.1, 30.0}, {73.4, 76.8, 85.1}));
    CHECK_FALSE(floor_broken({1.0, 1.0, 1.0}, {1.0, 1.0, 1.0}));
    // within the 10% tolerance: noise
    CHECK_FALSE(floor_broken({1.09, 1.08, 1.10}, {1.0, 1.0, 1.0}));
    CHECK(floor_broken({1.12, 1.15, 1.20}, {1.0, 1.0, 1.0}));
    // median far above, but direct's best run beats iccs's best: one side's noise, no flag
    CHECK_FALSE(floor_broken({0.90, 1.50, 1.60}, {1.0, 1.1, 1.2}));
    // a single run each: the median rule alone
    CHECK(floor_broken({1.5}, {1.0}));
    // a tolerance of its own
    CHECK(floor_broken({1.06, 1.06, 1.07}, {1.0, 1.0, 1.0}, 0.05));
    // nothing measured on one side: nothing to say
    CHECK_FALSE(floor_broken({}, {1.0}));
    CHECK_FALSE(floor_broken({1.0}, {}));
    CHECK(floor_median({3.0, 1.0, 2.0}) == 2.0);
}
