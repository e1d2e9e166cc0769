// parmacs_main.cpp: MAIN_INITENV and MAIN_END of a real run: the process becomes the cluster the
// launcher (`./iccs run PATH --clusters C -- ARGS`, mpirun, srun) says it is. The one translation
// unit of the PARMACS layer that needs the runtime's implementation (runtime_from_env).
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "cluster_stop.hpp"
#include "parmacs.h"
#include "parmacs_attach.hpp"

namespace {
std::unique_ptr<iccs::Runtime> g_rt;

// A program that ends with exit(status) instead of MAIN_END (SPLASH applications exit(1) on a
// wrong answer, after WAIT_FOR_END, in every cluster): end the run as MAIN_END would (counters,
// the runtime's collective finish, so a cluster still reading results in its epilogue keeps its
// peers' services), then let exit() go on with the program's own status. exit() from a thread of
// CREATE (main's own share included), or while they run, cannot meet the other clusters: leave at
// once with the status (the others see this cluster down and fail).
void exit_without_main_end(int status, void*) {
    if (!g_rt) return;  // MAIN_END already ended the runtime
    if (!iccs::parmacs::quiescent_main()) {
        dprintf(iccs::parmacs::diag_fd(), "iccs parmacs (cluster %u): pid %ld called exit(%d) while the threads of "
                "CREATE run: the other clusters cannot be met; leaving now\n", unsigned(g_rt->cluster()), iccs_pm_pid(),
                status);
        fflush(nullptr);
        _exit(status);
    }
    iccs::parmacs::end_servants(status);
    iccs::parmacs::finish_report();
    iccs::runtime_finish(std::move(g_rt), status == 0);
    if (iccs::parmacs::node()) iccs::parmacs::node()->end_coherence();
    fflush(nullptr);
}
}  // namespace

void iccs::parmacs::start_backend() {
    std::string err;
    g_rt = iccs::runtime_from_env(err);
    // A signal's line (cluster_stop.hpp) goes where our own diagnostics go: clusters other than
    // 0 point fd 2 at /dev/null until CREATE.
    iccs::cluster_stop_report_fd(iccs::parmacs::diag_fd());
    if (!g_rt) {
        dprintf(iccs::parmacs::diag_fd(), "iccs parmacs: %s (start the program with ./iccs run PATH --clusters C -- ARGS)\n",
                err.c_str());
        exit(1);
    }
    if (!iccs::parmacs::attach(*g_rt, err)) {
        dprintf(iccs::parmacs::diag_fd(), "iccs parmacs (cluster %u): %s\n", unsigned(g_rt->cluster()), err.c_str());
        exit(1);
    }
    on_exit(exit_without_main_end, nullptr);  // glibc: the handler gets exit()'s status
}

extern "C" void iccs_pm_end(void) {
    iccs::parmacs::end_servants(0);
    iccs::parmacs::finish_report();
    const int status = iccs::runtime_finish(std::move(g_rt), true);
    if (iccs::parmacs::node()) iccs::parmacs::node()->end_coherence();
    exit(status);
}
