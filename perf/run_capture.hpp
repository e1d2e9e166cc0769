// run_capture.hpp: run a command of a benchmark (mpirun, `iccs run`, a compiler) as a child process
// and capture its standard output, for the benchmarks that read their figures from another
// program's result lines.
#pragma once

#include <string>
#include <vector>

namespace iccs {

struct CaptureOptions {
    std::vector<std::string> env;  // "NAME=value" added to the child's environment
    std::string err_file;          // the child's stderr goes here ("" = passes through)
    unsigned timeout_s = 0;        // SIGTERM to the child after this long (0 = never)
};

// Runs argv (argv[0] searched in PATH) with its stdout captured into `out`; returns its exit status
// (128 + signal when killed; 127 when it could not be started; -1 when no pipe or fork).
// `timed_out` (if given) says whether the timeout stopped it.
int run_capture(const std::vector<std::string>& argv, std::string& out, const CaptureOptions& o = {},
                bool* timed_out = nullptr);

// The last non-empty line of a file ("" when none): what a failed child said last.
std::string last_line_of(const std::string& path);

}  // namespace iccs
