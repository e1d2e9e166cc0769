// apps/dsm/parmacs.h: the applications' DSM backend. It is the DSM's own PARMACS header
// (dsm/parmacs.h: page-grain DSM across cluster processes, started by `./iccs run <app>`) with one
// addition: when the launcher names a report (ICCS_REPORT), each cluster writes its DSM counters
// as JSON to ICCS_REPORT.dsm.c<cluster> at MAIN_END (or at exit, when a failed check exits first),
// so `iccs run <app> --json` can merge them (apps/dsm/dsm_report.cpp).
// The apps' sources are the same for every backend.
#ifndef ICCS_APPS_DSM_PARMACS_H
#define ICCS_APPS_DSM_PARMACS_H

#include "../../dsm/parmacs.h"

extern "C" {
// After MAIN_INITENV: registers the at-exit writer of the DSM counters (no-op without ICCS_REPORT).
void iccs_app_report_init(void);
// Writes the DSM counters now (once; later calls do nothing); MAIN_END calls it.
void iccs_app_report_write(void);
}

#undef MAIN_INITENV
#define MAIN_INITENV(...) \
    do {                  \
        iccs_pm_init();   \
        iccs_app_report_init(); \
    } while (0)
#undef MAIN_END
#define MAIN_END                 \
    do {                         \
        iccs_app_report_write(); \
        iccs_pm_end();           \
    } while (0)

#endif  // ICCS_APPS_DSM_PARMACS_H
