// run.hpp: the convergence-level programs of `iccs run` (alltoall, errors, pingpong: rows of
// run_table.cpp) and `iccs demo --alltoall`.
#pragma once

#include "options.hpp"

namespace iccs {

// `iccs demo --alltoall`: alltoall with the demo's message count (2000), options as parsed.
int run_alltoall_demo(const cli::Args& p);

}  // namespace iccs
