// bench_collectives.hpp: `iccs bench collectives` (issue 18's benchmark). Cluster processes on
// sites joined by the proxies' WAN emulation (transport iccs): the completion time of each
// collective in the hierarchical (MagPIe) and the flat family, interleaved rep by rep, medians and
// spread; WAN data bytes per call against the minimum (each item once to each receiving site);
// then the ordered broadcast's latency and throughput per sequencer policy.
#pragma once

#include <cstdint>

namespace iccs {

struct BenchCollectivesOptions {
    uint32_t sites = 4;
    uint32_t clusters = 1;      // per site
    uint32_t cluster_size = 1;  // compute threads per cluster
    double wan_latency_ms = 10;
    uint64_t wan_bandwidth = 1'000'000;  // bytes/s per inter-site link
    uint32_t size = 65536;  // bytes: the vector of bcast/reduce/allreduce/scan/reduce_scatter; the total
                            // of gather/scatter/allgather; each rank's send buffer of alltoall
    uint32_t reps = 5;      // measured reps per collective and family (after one warm-up)
    uint32_t ordered_messages = 50;  // per thread, for the ordered broadcast's throughput
    bool cyclic = false;  // clusters numbered round-robin over the sites (site = c % sites), not site by site
    bool json = false;
};

int bench_collectives(const BenchCollectivesOptions& o);

}  // namespace iccs
