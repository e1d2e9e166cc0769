// parmacs_main.cpp: MAIN_INITENV and MAIN_END of a real run: the process becomes the cluster the
// launcher (`./iccs run PATH --clusters C -- ARGS`, mpirun, srun) says it is. The one translation
// unit of the PARMACS layer that needs the runtime's implementation (runtime_from_env).
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "parmacs.h"
#include "parmacs_attach.hpp"

namespace {
std::unique_ptr<iccs::Runtime> g_rt;
}

extern "C" void iccs_pm_init(void) {
    std::string err;
    g_rt = iccs::runtime_from_env(err);
    if (!g_rt) {
        fprintf(stderr, "iccs parmacs: %s (start the program with ./iccs run PATH --clusters C -- ARGS)\n", err.c_str());
        exit(1);
    }
    if (!iccs::parmacs::attach(*g_rt, err)) {
        fprintf(stderr, "iccs parmacs (cluster %u): %s\n", unsigned(g_rt->cluster()), err.c_str());
        exit(1);
    }
}

extern "C" void iccs_pm_end(void) {
    iccs::parmacs::finish_report();
    exit(iccs::runtime_finish(std::move(g_rt), true));
}
