// cluster_stop.hpp: how a cluster process ends when it must end now (issue 34): on SIGINT or
// SIGTERM (the user's terminal, our launcher, mpirun, srun), or when it finds it cannot go on
// (its proxies stopped under it).
//
// The one idea: the threads that run the program are never asked to stop; whatever they do
// (spinning on a DSM flag, blocked in a lock, inside a proxy wait), the process ends without them.
// A signal handler only writes the signal's number to a pipe; a stopper thread, started at
// install, reads it and does the rest outside signal context: one line on standard error of what
// the process was doing (activity.hpp: "cluster 1: stopped by signal 15 (Terminated) while
// running; thread 0: DSM LOCK 3"), the hooks the cluster registered (stop the proxies, close the
// captures, remove its files), then _exit(128 + signal). A watchdog ends the process with the same
// status if that takes longer than kStopBudgetMs (a hook that hangs cannot keep it alive).
// A second signal ends the process at once, unless it comes within kSameStopMs of the first:
// a Ctrl-C on a terminal reaches every process of the run and the launcher forwards it too.
//
// The mechanism is the same under every launcher: ours stops the other clusters with SIGTERM when
// one dies, mpirun and srun do the same with a job whose rank died, and a cluster that finds a
// peer gone (proxy.hpp: the closed memif link, the fabric's silence) fails its program, which
// ends it. The MPI parts (mpi/) use it as it is.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace iccs {

inline constexpr uint32_t kStopBudgetMs = 700;  // install to _exit, at most
inline constexpr uint32_t kSameStopMs = 100;    // a second signal within this is the same stop

// SIGINT and SIGTERM stop this process from now on. Idempotent (the first cluster id stays);
// from the thread that sets the process up, before its other threads start (they inherit the
// mask). The line goes to the standard error this process has now (a program that later points
// its fd 2 elsewhere, a PARMACS cluster other than 0, does not hide it).
void cluster_stop_install(uint16_t cluster);
// Where the line goes from now on (a PARMACS program's clusters other than 0 point fd 2 at
// /dev/null before main and keep the real one: dsm/parmacs.cpp's diag_fd).
void cluster_stop_report_fd(int fd);
// Work to do before the process exits, run in order of registration by the stopping thread:
// each must be quick and must not wait for the program's threads. Returns an id.
int cluster_stop_add(std::function<void()> hook);
void cluster_stop_remove(int id);
// True once a stop began (a loop that can end cleanly looks at it; nothing has to).
bool cluster_stopping();
// End this process now from any thread (not a signal handler): the line "cluster C: WHY (while
// ...)", the hooks, _exit(status). A stop under way already: waits for it. Without install: the
// hooks run in this thread.
[[noreturn]] void cluster_stop_now(int status, const std::string& why);

}  // namespace iccs
