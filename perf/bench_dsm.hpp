// bench_dsm.hpp: `iccs bench dsm` (issue 7's benchmark). The DSM's costs between 2 cluster
// processes started by the runtime's launcher (rt_launch, one compute thread each), over the
// `iccs` and `direct` transports side by side: page fetch round trip, release of one fully
// written page (twin compare, diff message, apply at the home, ack), lock acquire+release of a
// lock homed at the other cluster, and a 2-cluster barrier. Medians and p99, ratio iccs/direct;
// the transports' runs interleaved (iccs, direct, iccs, ...) so a change of the host's load
// between them does not pass for a difference of the transports.
#pragma once

#include <cstdint>

namespace iccs {

struct BenchDsmOptions {
    uint32_t rounds = 400;  // repetitions of each operation (each a fresh page for fetch and diff)
    uint32_t runs = 3;      // runs over each transport, interleaved iccs, direct, iccs, ...: medians of the runs
    bool json = false;
};

int bench_dsm(const BenchDsmOptions& o);

}  // namespace iccs
