// run_rt.hpp: the launcher of every `iccs run` program on the cluster runtime (compute/runtime.hpp):
// the runtime's built-in programs, group/'s, Satin's, the wide-area suite, the applications and
// any program given by path, over --transport iccs|direct|delay.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config.hpp"
#include "options.hpp"

namespace iccs {

class Runtime;
namespace group {
struct Topology;
}

// The options every program of `iccs run` shares, parsed once (cli/options.hpp) and configured
// once: the machine configuration with the flags' keys applied, the runtime's transport and hold
// time, the time limit.
struct RunSetup {
    std::string config_path;
    std::vector<std::pair<std::string, std::string>> overrides;  // in the order given
    MachineConfig cfg;        // configure(config_path, overrides)
    std::string transport;    // --transport ("": [runtime] transport)
    std::string delay_us;     // --delay-us ("": [runtime] delay_us; "auto")
    uint32_t timeout_s = 300;
    bool timeout_given = false;
};
// `defaults`: configuration keys set before the flags' (the demo's shape); a bad configuration
// stops with its message and exit status 2.
RunSetup run_setup(const cli::Args& p, uint32_t default_timeout_s,
                   const std::vector<std::pair<std::string, std::string>>& defaults = {});

// What a run was, as resolved from flags and configuration (for `iccs run <app>`, run_app.cpp).
struct RtRunInfo {
    bool app = false;  // in: an application run: no closing PASS/FAIL line (the caller prints its own)
    bool report_to_file = false;  // in: `--report FILE`: the launcher prints no lines of its own
    bool resolved = false;  // out: the fields below are set (false: a usage error stopped it first)
    std::string transport, dispatch, polling, fabric;
    uint16_t clusters = 0, threads = 0;
    unsigned proxies = 0;       // per cluster, resolved (auto -> a number); transport iccs only
    bool proxies_auto = false;
    double delay_us = -1;       // transport delay: the hold time used; < 0 otherwise
};

// One program on the runtime: a built-in one (run in every forked cluster process with the run's
// topology, [wan] sites) or a program given by path (exec'd with `args`).
struct RtRequest {
    std::string name;  // what the launcher's lines call it; the path of a program given by path
    std::function<int(std::unique_ptr<Runtime>, const group::Topology&)> builtin;  // null: exec name
    std::vector<std::string> args;
    bool one_cluster_ok = false;  // else at least 2 clusters ([machine] clusters)
    // group/ programs: group::topology_from_config (the topology from [wan] sites); null: the default.
    // A function, not a flag, so that the launcher (and the demo, which links it) needs no group/ code.
    std::function<bool(const MachineConfig&, group::Topology&, std::string&)> topology;
    bool lines_on_stdout = true;  // the launcher's lines on stdout (a built-in's report), else stderr
    // A line after the launcher's first (what the program does), from the run's topology; may be null.
    std::function<std::string(const group::Topology&)> announce;
    std::string pass_line;  // printed when every cluster succeeded ("": the caller prints the verdict)
};

// Defined by iccs-run alone (cli/run_path_main.cpp), which links neither the proxies nor DPDK:
// run_rt hands it a run that needs them (transport iccs, or --delay-us auto's idle-ICCS runs), and
// it execs iccs-cli with the same command line. Null (weak, undefined) in every other binary.
[[noreturn]] void hand_run_to_iccs_cli() __attribute__((weak));

// Launches `r` with `s` (delay auto: two preliminary runs first); the first failing cluster's
// status, or 2 on a usage error (its message printed). `info` (may be null) gets the resolved run.
int run_rt(const RunSetup& s, const RtRequest& r, RtRunInfo* info = nullptr);

}  // namespace iccs
