// apps/dsm/dsm_report.cpp: the DSM counters of one cluster as one JSON object in
// ICCS_REPORT.dsm.c<cluster> for `iccs run <app>` (cli/run_app.cpp merges every cluster's), also
// when a failed check exits before MAIN_END; and the exit barrier of such an exit. Keys are those
// of the run's JSON contract (apps/README.md); times in seconds.
#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "parmacs_attach.hpp"

namespace {

bool g_after_wait = false;  // main's thread passed WAIT_FOR_END
bool g_main_end = false;    // MAIN_END was reached
pthread_t g_main_thread;

// The counters file itself is the PARMACS layer's (dsm/parmacs.cpp, the same for any program
// under `iccs run --report`); written once.
void write_now() { iccs::parmacs::write_report_file(); }

// exit() before MAIN_END: every cluster replays the same deterministic epilogue, so a failed
// check exits every cluster's main, each still reading results whose pages may live at another
// cluster. A cluster that left at once would take its pages with it (the others' fetches would
// find it down), so each main first meets the others in the barrier WAIT_FOR_END used (sync id 1,
// dsm/parmacs.cpp: the layer's own), by which point every cluster's epilogue has read what it
// needs. MAIN_END does not need this: runtime_finish waits for every cluster.
void at_exit() {
    write_now();
    iccs::dsm::DsmNode* node = iccs::parmacs::node();
    if (g_main_end || !g_after_wait || node == nullptr || node->clusters() < 2 ||
        !pthread_equal(pthread_self(), g_main_thread))
        return;
    std::fflush(nullptr);
    if (node->barrier(1, 1, node->clusters()) != iccs::dsm::DsmStatus::kOk)
        std::fprintf(stderr, "iccs app (cluster %u): the exit barrier failed: %s\n", unsigned(node->cluster()),
                     iccs::dsm::DsmNode::error().c_str());
}

}  // namespace

extern "C" void iccs_app_report_write(void) {
    g_main_end = true;
    write_now();
}

extern "C" void iccs_app_after_wait(void) {
    g_after_wait = true;
    g_main_thread = pthread_self();
}

extern "C" void iccs_app_report_init(void) { std::atexit(at_exit); }
