// parmacs_attach.hpp: how the PARMACS layer (parmacs.h) binds to a cluster runtime. A real run's
// MAIN_INITENV calls runtime_from_env() and then attach() (parmacs_main.cpp, the one translation
// unit that needs the runtime's implementation); tests attach it to a loopback runtime instead
// (dsm/testing/parmacs_loopback_main.cpp).
#pragma once

#include <string>

#include "dsm.hpp"
#include "runtime.hpp"

namespace iccs::parmacs {

// The process becomes cluster rt.cluster() of the PARMACS program: the shared region is mapped
// (ICCS_DSM_* variables over the defaults), the DSM's handlers registered, every cluster met in a
// runtime barrier, and standard output of clusters other than 0 suppressed outside the parallel
// section. false with `err` (one line) on failure.
bool attach(Runtime& rt, std::string& err);
// End of this cluster's program: standard output restored, the DSM counters (and the region of
// interest's time) printed to standard error. The caller then ends the runtime.
void finish_report();
dsm::DsmNode* node();
// True when the calling thread is main, outside its own share of CREATE (the thread function it
// runs as the cluster's first pid), and no other thread of CREATE runs here: the program may end
// the run collectively from here (an exit() after WAIT_FOR_END or before CREATE, in every cluster).
// An exit() elsewhere would wait for threads that wait for the exiting one (issue 33: pid 0's
// exit() inside the parallel section of a 2 x 1 run waited in end_servants for ever).
bool quiescent_main();
// Cluster 0 ending the run (MAIN_END, or exit() from main): the other clusters' mains, serving
// since the first CREATE, end too, with `status`. Nothing elsewhere, or before CREATE.
void end_servants(int status);
// Where our own diagnostics go: the real standard error (a cluster other than 0 has the
// program's standard error on /dev/null outside the parallel section).
int diag_fd();
// With ICCS_REPORT=BASE (set by `iccs run`): this cluster's DSM counters as one JSON object in
// BASE.dsm.c<cluster>, once (later calls do nothing). finish_report calls it.
void write_report_file();
// ICCS_REPORT_ONLY=1 (`iccs run --report FILE`): the counters go to the report files only, not
// to standard error.
bool report_to_file_only();
// The backend's start of a cluster (the real runtime: parmacs_main.cpp; tests: the loopback):
// runtime, attach(). Called once, by iccs_pm_init (MAIN_INITENV, or the first macro that needs
// the environment).
void start_backend();

}  // namespace iccs::parmacs
