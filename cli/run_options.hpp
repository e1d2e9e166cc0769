// run_options.hpp: the options that several commands share: the option groups of the `iccs run`
// rows (run_table.cpp), `--timeout`, and the convergence-level programs' own options, which
// `iccs demo --alltoall` takes too. Apart from run_table.cpp so that the demo (cli/iccs-demo) is
// built without the rows of every program (and without the code they launch).
#pragma once

#include <cstdint>
#include <vector>

#include "options.hpp"

namespace iccs {

// The option groups the rows share.
const cli::OptionGroup& config_options();   // --config, --set
const cli::OptionGroup& machine_options();  // flags that set one configuration key each
const cli::OptionGroup& runtime_options();  // --transport, --delay-us
// --timeout S with this default [s].
cli::Option timeout_option(uint32_t default_s);

// The options of the convergence-level programs (alltoall, pingpong; run.cpp runs them).
struct ConvergenceOptions {
    cli::Option messages, min_size, max_size, gap;
};
const ConvergenceOptions& convergence_options();
// alltoall's own options: its row's, and `iccs demo --alltoall`'s.
const std::vector<cli::Option>& alltoall_options();

}  // namespace iccs
