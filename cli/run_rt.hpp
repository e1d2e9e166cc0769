// run_rt.hpp: `iccs run exchange|ping|PATH` (programs on the cluster runtime, compute/runtime.hpp).
#pragma once

namespace iccs {

// Whether `iccs run NAME` is a runtime program: exchange, ping, or a path to a binary.
bool is_rt_program(const char* name);
// argv[0] is the program; the rest are run options (and, for a path, `-- ARGS`).
int cmd_run_rt(int argc, char** argv);

}  // namespace iccs
