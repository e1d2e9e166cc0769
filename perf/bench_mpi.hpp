// bench_mpi.hpp: `iccs bench mpi`: MPI programs of our own (perf/mpi/mpi_bench.c, built with
// mpicc) under Debian's mpirun over every path side by side, interleaved run by run:
//   iccs-memif, iccs-udp   pml cm, mtl ofi, the provider iccs (mpi/provider/), 2 clusters
//   tcp                    Open MPI's own TCP path (pml ob1, btl tcp,self): the baseline
//   ofi-tcp-rxm            libfabric's tcp;ofi_rxm under the same mtl
//   ofi-udp-rxd            libfabric's udp;ofi_rxd under the same mtl
//   vader                  Open MPI's shared memory (pml ob1, btl vader,self): the floor
// Ranks 0 .. S-1 form one cluster and S .. 2S-1 the other for every path (the others do not care),
// every rank bound to a core the same way (mpirun --bind-to core, --map-by core). Figures are
// medians over the runs; ratios are against tcp measured in the same runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace iccs {

struct BenchMpiOptions {
    uint32_t runs = 3;              // interleaved runs of every path
    uint32_t ranks_per_cluster = 1;
    uint32_t reps = 5;              // repetitions inside one run (the program's own median)
    bool quick = false;             // sizes 8 B, 64 KiB, 1 MiB only
    uint64_t max_size = 4u << 20;
    std::vector<std::string> paths;  // empty: every path
    bool json = false;
    uint64_t rtt_samples = 5000;    // iccs's own runtime round trip (bench rtt), for the goal
    uint32_t run_timeout_s = 300;   // one mpirun longer than this is stopped and its path FAILED
    // The iccs paths' [cluster] polling, and the runtime round trip's. "inline" with one rank a
    // cluster: each cluster runs in its rank's process (mpi/provider/README.md, "Why an agent process").
    std::string polling = "adaptive";
};

int bench_mpi(const BenchMpiOptions& o);

// The paths bench mpi knows, in the order it runs them.
const std::vector<std::string>& bench_mpi_paths();

}  // namespace iccs
