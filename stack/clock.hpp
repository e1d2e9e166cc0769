// clock.hpp: the one clock of iccs: CLOCK_MONOTONIC in ns. Timers, message-time stamps, the
// proxies' loops, the runtime's waits and the benchmarks all read it, so their times compare.
#pragma once

#include <time.h>

#include <cstdint>

namespace iccs {

inline uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace iccs
