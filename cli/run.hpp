// run.hpp: the convergence-level programs of `iccs run` (alltoall, errors, pingpong: rows of
// run_table.cpp) and `iccs demo --alltoall`.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "options.hpp"

namespace iccs {

// `iccs demo --alltoall`: alltoall with the demo's message count (2000), options as parsed.
int run_alltoall_demo(const cli::Args& p);

// `iccs soak` (soak.cpp): alltoall for `seconds` on ordered connections (ClusterPlan::soak_s),
// with `defaults` as configuration keys before the user's own, and `tick` about once a second
// with each cluster's pid (0 once it ended) and the run's directory (its activity pages).
struct SoakHooks {
    uint32_t seconds = 0;
    std::vector<std::pair<std::string, std::string>> defaults;
    std::function<void(const std::vector<pid_t>& pids, const std::string& run_dir)> tick;
};
// The run's exit status; the soak prints its own verdict.
int run_alltoall_soak(const cli::Args& p, const SoakHooks& h);

}  // namespace iccs
