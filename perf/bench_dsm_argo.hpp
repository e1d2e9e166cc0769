// bench_dsm_argo.hpp: `iccs bench dsm --vs argo --argo DIR` (issue 33, item 7). The same programs
// (dsm_vs_argo/programs.hpp: matmul, jacobi, fft, taskq) on our DSM and on ArgoDSM, 2 processes x 2
// threads each: ours started by `iccs run` over the iccs transport and over direct, Argo's by
// mpirun after the bench compiles dsm_vs_argo/argo_programs.cpp with mpic++ against the Argo
// install in DIR (the project never fetches or builds Argo). Runs interleaved program by program
// (argo, iccs, direct, argo, ...), every run's result checked against the sequential reference;
// medians of each program's timed parallel section, ratios ours / Argo.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace iccs {

struct BenchDsmArgoOptions {
    std::string argo_dir;               // the install prefix of an Argo build (include/argo, lib)
    std::vector<std::string> programs;  // empty: all four
    uint32_t runs = 3;                  // runs of each program on each system, interleaved
    bool small = false;                 // small sizes (checks the setup in seconds; not the comparison)
    bool json = false;
};

// The check of DIR: "" when it holds an Argo install the bench can build against, else the
// sentence that says what is missing (the path named).
std::string argo_install_problem(const std::string& dir);

int bench_dsm_argo(const BenchDsmArgoOptions& o);

}  // namespace iccs
