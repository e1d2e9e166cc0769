// bench_mpi_collectives.hpp: `iccs bench mpi-collectives` (issue 36's benchmark). An MPI program of
// ours (perf/mpi_collectives.c, linked with libiccs-magpie.so) started by real mpirun on S sites of
// C clusters of R ranks, over the iccs provider (Open MPI's cm PML, ofi MTL, provider iccs; the
// proxies emulate the WAN: 10 ms one way, 1 MB/s per link by default) times every collective two
// ways in the same run, interleaved rep by rep: MagPIe (the library's MPI_X) and Open MPI's own
// (PMPI_X: `tuned`; a second run with `han` preferred, where it runs). Medians and spread per
// collective and size; the library's WAN bytes per call against the minimum.
#pragma once

#include <cstdint>
#include <string>

namespace iccs {

struct BenchMpiCollectivesOptions {
    uint32_t sites = 4;
    uint32_t clusters = 2;      // per site
    uint32_t cluster_size = 2;  // ranks per cluster
    uint32_t proxies = 1;       // per cluster
    double wan_latency_ms = 10;
    uint64_t wan_bandwidth = 1'000'000;  // bytes/s per inter-site link
    uint32_t size = 0;          // 0: 8 B, 1 KiB, 64 KiB for every collective, 1 MiB for bcast and allreduce
    uint32_t reps = 5;          // measured reps (after one warm-up)
    std::string colls = "all";  // or a list: bcast,allreduce
    bool han = true;            // a second run with coll han preferred
    std::string transport = "iccs";  // or "tcp": Open MPI's own TCP, no WAN emulation (a functional run)
    bool json = false;
};

int bench_mpi_collectives(const BenchMpiCollectivesOptions& o);

}  // namespace iccs
