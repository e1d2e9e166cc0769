// run_rt.hpp: `iccs run exchange|ping|PATH` (programs on the cluster runtime, compute/runtime.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace iccs {

class Runtime;
namespace group {
struct Topology;
}

// Whether `iccs run NAME` is a runtime program: exchange, ping, or a path to a binary.
bool is_rt_program(const char* name);
// What a run was, as resolved from flags and configuration (for `iccs run <app>`, run_app.cpp).
struct RtRunInfo {
    bool app = false;  // in: an application run: no closing PASS/FAIL line (the caller prints its own)
    bool report_to_file = false;  // in: `--report FILE`: the launcher prints no lines of its own
    // in: a built-in program given by the caller (`iccs run <wide-area program>`): run in every
    // forked cluster process with the run's topology ([wan] sites); one cluster is allowed.
    std::function<int(std::unique_ptr<Runtime>, const group::Topology&)> builtin;
    bool resolved = false;  // out: the fields below are set (false: a usage error stopped it first)
    std::string transport, dispatch, polling, fabric;
    uint16_t clusters = 0, threads = 0;
    unsigned proxies = 0;       // per cluster, resolved (auto -> a number); transport iccs only
    bool proxies_auto = false;
    double delay_us = -1;       // transport delay: the hold time used; < 0 otherwise
};
// argv[0] is the program; the rest are run options (and, for a path, `-- ARGS`). `info` (may be
// null) is filled with the run's resolved configuration.
int cmd_run_rt(int argc, char** argv, RtRunInfo* info = nullptr);

}  // namespace iccs
