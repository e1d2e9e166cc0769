// apps/dsm/dsm_report.cpp: the DSM counters of one cluster as one JSON object in
// ICCS_REPORT.dsm.c<cluster> for `iccs run <app>` (cli/run_app.cpp merges every cluster's), also
// when a failed check exits before MAIN_END. Keys are those of the run's JSON contract
// (apps/README.md); times in seconds.
#include <cstdlib>

#include "parmacs_attach.hpp"

namespace {

// The counters file itself is the PARMACS layer's (dsm/parmacs.cpp, the same for any program
// under `iccs run --report`); written once. An exit() before MAIN_END (a failed check) needs no
// meeting of the clusters here: main's epilogue runs on cluster 0 only, and the other clusters
// serve its page fetches until its exit ends the run (dsm/parmacs.cpp, end_servants).
void at_exit() { iccs::parmacs::write_report_file(); }

}  // namespace

extern "C" void iccs_app_report_write(void) { iccs::parmacs::write_report_file(); }

extern "C" void iccs_app_report_init(void) { std::atexit(at_exit); }
