// parmacs_loopback_main.cpp: test support. MAIN_INITENV / MAIN_END over a one-cluster loopback
// runtime (ICCS_TEST_THREADS compute threads, default 4), so a PARMACS program runs in a unit
// test before the real runtime is linked. One cluster only: the replay start-up of several
// clusters needs one process per cluster.
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "loopback_runtime.hpp"
#include "parmacs.h"
#include "parmacs_attach.hpp"

namespace {
iccs::testing::LoopbackWorld* g_world = nullptr;
}

void iccs::parmacs::start_backend() {
    long threads = 4;
    if (const char* s = getenv("ICCS_TEST_THREADS")) threads = strtol(s, nullptr, 10);
    if (threads < 1 || threads > 64) {
        fprintf(stderr, "ICCS_TEST_THREADS=%ld: allowed 1..64\n", threads);
        exit(1);
    }
    g_world = new iccs::testing::LoopbackWorld(1, uint16_t(threads));
    std::string err;
    if (!iccs::parmacs::attach(g_world->runtime(0), err)) {
        fprintf(stderr, "iccs parmacs: %s\n", err.c_str());
        exit(1);
    }
}

extern "C" void iccs_pm_end(void) {
    iccs::parmacs::finish_report();
    g_world->stop();
    exit(0);
}
