dnl parmacs.m4: the PARMACS macros for SPLASH-2 / SPLASH-3 programs over the iccs DSM, for the
dnl SPLASH build route:  m4 -Ulen -Uindex parmacs.m4 prog.C > prog.c
dnl Each macro expands to what the macro of the same name in parmacs.h expands to (calls of the
dnl iccs_pm_* functions); MAIN_ENV, ENV and EXTERN_ENV bring in parmacs.h for their declarations,
dnl found through the compiler's include path (pkg-config --cflags iccs). As in SPLASH's own macro
dnl files, `#' starts an m4 comment, so preprocessor lines are copied unexpanded.
divert(-1)

define(MAIN_ENV, `#include "parmacs.h"
')
define(ENV, `#include "parmacs.h"
')
define(EXTERN_ENV, `#include "parmacs.h"
')
define(INCLUDES, `')
define(MAIN_INITENV, `iccs_pm_init();')
define(MAIN_END, `iccs_pm_end();')

define(G_MALLOC, `iccs_pm_malloc((size_t)($1), __FILE__, __LINE__)')
define(G_FREE, `iccs_pm_free($1);')
define(CREATE, `iccs_pm_create(($1), (long)($2));')
define(WAIT_FOR_END, `iccs_pm_wait_for_end((long)($1));')
define(GET_PID, `($1) = iccs_pm_pid();')
define(CLOCK, `($1) = iccs_pm_clock_us();')

define(LOCKDEC, `iccs_pm_lock_t $1;')
define(LOCKINIT, `iccs_pm_lock_init(&($1));')
define(LOCK, `iccs_pm_lock(&($1));')
define(UNLOCK, `iccs_pm_unlock(&($1));')
define(ALOCKDEC, `iccs_pm_lock_t $1[$2];')
define(ALOCKINIT, `iccs_pm_alock_init(($1), (long)($2));')
define(ALOCK, `iccs_pm_lock(&($1)[$2]);')
define(AULOCK, `iccs_pm_unlock(&($1)[$2]);')
define(AGETL, `(($1)[$2])')

define(BARDEC, `iccs_pm_barrier_t $1;')
define(BARINIT, `iccs_pm_bar_init(&($1), (long)($2));')
define(BARRIER, `iccs_pm_barrier(&($1), (long)($2));')

define(GSDEC, `iccs_pm_gs_t $1;')
define(GSINIT, `iccs_pm_gs_init(&($1));')
define(GETSUB, `($2) = iccs_pm_getsub(&($1), (long)($3), (long)($4));')

define(PAUSEDEC, `iccs_pm_pause_t $1;')
define(PAUSEINIT, `iccs_pm_pause_init(&($1));')
define(SETPAUSE, `iccs_pm_pause_set(&($1));')
define(CLEARPAUSE, `iccs_pm_pause_clear(&($1));')
define(WAITPAUSE, `iccs_pm_pause_wait(&($1));')

define(CONDVARDEC, `iccs_pm_cond_t $1;')
define(CONDVARINIT, `iccs_pm_cond_init(&($1));')
define(CONDVARWAIT, `iccs_pm_cond_wait(&($1), &($2));')
define(CONDVARSIGNAL, `iccs_pm_cond_signal(&($1), 0);')
define(CONDVARBCAST, `iccs_pm_cond_signal(&($1), 1);')

define(RELEASE_FENCE, `iccs_pm_fence();')
define(ACQUIRE_FENCE, `iccs_pm_fence();')
define(FULL_FENCE, `iccs_pm_fence();')

define(SPLASH3_ROI_BEGIN, `iccs_pm_roi(1);')
define(SPLASH3_ROI_END, `iccs_pm_roi(0);')

dnl SPLASH-2's NUMA-placement variants: the same objects (placement is the DSM's homes).
define(NU_MALLOC, `G_MALLOC($1)')
define(NU_GSDEC, `GSDEC($1)')
define(NU_GSINIT, `GSINIT($1)')
define(NU_GETSUB, `GETSUB($1, $2, $3, $4)')
define(NLOCKDEC, `LOCKDEC($1)')
define(NLOCKINIT, `LOCKINIT($1)')
define(NLOCK, `LOCK($1)')
define(NUNLOCK, `UNLOCK($1)')

dnl Tracing and simulator hooks: nothing.
define(MONMINIT, `')
define(MONMEXIT, `')
define(NEWPROC, `')
define(AUG_ON, `')
define(AUG_OFF, `')
define(TRACE_ON, `')
define(TRACE_OFF, `')
define(REF_TRACE_ON, `')
define(REF_TRACE_OFF, `')
define(DYN_TRACE_ON, `')
define(DYN_TRACE_OFF, `')
define(DYN_REF_TRACE_ON, `')
define(DYN_REF_TRACE_OFF, `')
define(DYN_SIM_ON, `')
define(DYN_SIM_OFF, `')
define(DYN_SCHED_ON, `')
define(DYN_SCHED_OFF, `')
define(AUG_SET_LOLIMIT, `')
define(AUG_SET_HILIMIT, `')
define(BAREXCLUDE, `')
define(BARINCLUDE, `')
define(PROBEND, `')
define(AINIT, `')
divert(0)dnl
