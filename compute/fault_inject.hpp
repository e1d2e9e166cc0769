// fault_inject.hpp: a cluster that dies on purpose, for the tests of how a run ends when one does
// (issue 34, tests/integration/fault_kill.py): ICCS_FAULT=CLUSTER:HOW:WHEN[:MS] in the
// environment of a run (every cluster process inherits it; only cluster CLUSTER acts on it).
//   HOW   kill     raise SIGKILL
//         segv     write through a null pointer (SIGSEGV, the crash handler's backtrace)
//         exit     _exit(3), as a program that fails and exits does
//         proxies  stop this cluster's proxy threads while its program goes on (run, shutdown)
//   WHEN  setup    the EAL is up, the links are not
//         run      MS ms (default 300) after the program started
//         shutdown this cluster said it is done and waits for the others
// Just before it strikes, the cluster prints `iccs fault: cluster C: HOW at WHEN (t=NS)`, NS its
// CLOCK_MONOTONIC time [ns], so a test measures from the fault to the end of the run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace iccs {

struct FaultPlan {
    bool armed = false;    // this cluster faults
    std::string how;       // kill, segv, exit, proxies
    std::string when;      // setup, run, shutdown
    uint32_t after_ms = 300;
};

// This cluster's fault from ICCS_FAULT (not armed when unset or for another cluster). A malformed
// value is a start-up error naming it (false, err).
bool fault_plan_from_env(uint16_t cluster, FaultPlan& out, std::string& err);
// Strike now if the plan's moment is `when`: the line, then the fault. stop_proxies is what
// "proxies" does (the cluster's proxies stop; the function returns and the cluster goes on).
void fault_strike(const FaultPlan& f, uint16_t cluster, const char* when, const std::function<void()>& stop_proxies);

}  // namespace iccs
