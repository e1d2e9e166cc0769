// floor_check.hpp: is the `direct` ("no delay") baseline slower than a run it is meant to bound?
//
// The study divides by the direct run (DESIGN.md §7), so direct must be a floor: never slower than
// iccs beyond noise. `bench dsm` asks this per operation; `experiment apps` asks the same rule in
// Python (perf/experiments/floors.py, kept identical). The rule, on the per-run figures of each side
// (interleaved runs, lower is better): direct's median exceeds the other's median by more than
// `tolerance` (default 10%) AND direct's best run is slower than the other's best run, so one
// noisy run on either side does not raise the flag.
#pragma once

#include <algorithm>
#include <vector>

namespace iccs {

inline constexpr double kFloorTolerance = 0.10;

inline double floor_median(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// True when `direct` (the floor) is slower than `other` beyond noise. Either side empty: false.
inline bool floor_broken(const std::vector<double>& direct, const std::vector<double>& other,
                         double tolerance = kFloorTolerance) {
    if (direct.empty() || other.empty()) return false;
    const double best_d = *std::min_element(direct.begin(), direct.end());
    const double best_o = *std::min_element(other.begin(), other.end());
    return floor_median(direct) > (1.0 + tolerance) * floor_median(other) && best_d > best_o;
}

}  // namespace iccs
