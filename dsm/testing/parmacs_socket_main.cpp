// parmacs_socket_main.cpp: test support. MAIN_INITENV / MAIN_END over the socket runtime
// (socket_runtime.hpp): each process started by tests/dsm/run_parmacs_clusters.py becomes one
// cluster, as `./iccs run PATH` will make it with the real runtime.
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "parmacs.h"
#include "parmacs_attach.hpp"
#include "socket_runtime.hpp"

namespace {
std::unique_ptr<iccs::Runtime> g_rt;
}

extern "C" void iccs_pm_init(void) {
    std::string err;
    g_rt = iccs::testing::socket_runtime_from_env(err);
    if (!g_rt) {
        fprintf(stderr, "iccs parmacs (socket test runtime): %s\n", err.c_str());
        exit(1);
    }
    if (!iccs::parmacs::attach(*g_rt, err)) {
        fprintf(stderr, "iccs parmacs (cluster %u): %s\n", unsigned(g_rt->cluster()), err.c_str());
        exit(1);
    }
}

extern "C" void iccs_pm_end(void) {
    iccs::parmacs::finish_report();
    iccs::testing::socket_runtime_finish(*g_rt);
    exit(0);
}
