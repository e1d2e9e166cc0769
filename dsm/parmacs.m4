dnl parmacs.m4: the PARMACS macros for SPLASH-2 / SPLASH-3 programs over the iccs DSM, for the
dnl suite's build route:  m4 -Ulen -Uindex parmacs.m4 prog.C > prog.c  (make MACROS=this file).
dnl Each macro expands to what the macro of the same name in parmacs.h expands to: calls of the
dnl iccs_pm_* functions, in the shape of the same macro in SPLASH-3's pthread macro file (a
dnl statement macro is a braced block, G_MALLOC ends in a semicolon, G_MALLOC_F is an expression).
dnl Every file this processes starts with #include "parmacs.h" (the text after divert(0) below),
dnl so a header that declares locks or condition variables before MAIN_ENV / EXTERN_ENV compiles;
dnl parmacs.h is found through the compiler's include path (pkg-config --cflags iccs). As in the
dnl suite's own macro files, `#' starts an m4 comment, so preprocessor lines are copied unexpanded.
dnl m4 takes the argument list after any macro name, so SPLASH3_ROI_BEGIN() and SPLASH3_ROI_BEGIN,
dnl MAIN_END; and MAIN_END() all work here.
divert(-1)

define(MAIN_ENV, `')
define(ENV, `')
define(EXTERN_ENV, `')
define(INCLUDES, `')
define(MAIN_INITENV, `{ iccs_pm_init(); }')
define(MAIN_END, `{ iccs_pm_end(); }')

define(G_MALLOC, `iccs_pm_malloc((size_t)($1), __FILE__, __LINE__);')
define(G_MALLOC_F, `iccs_pm_malloc((size_t)($1), __FILE__, __LINE__)')
define(G_FREE, `iccs_pm_free($1);')
define(NU_MALLOC, `iccs_pm_malloc((size_t)($1), __FILE__, __LINE__);')
define(NU_MALLOC_F, `iccs_pm_malloc((size_t)($1), __FILE__, __LINE__)')
define(NU_FREE, `iccs_pm_free($1);')

define(CREATE, `{ iccs_pm_create(($1), (long)($2)); }')
define(WAIT_FOR_END, `{ iccs_pm_wait_for_end((long)($1)); }')
define(GET_PID, `{ ($1) = iccs_pm_pid(); }')
define(GET_HOME, `{ ($1) = 0; }')
define(SET_HOME, `{ ; }')
define(CLOCK, `{ ($1) = iccs_pm_clock_us(); }')
define(AUG_DELAY, `{ sleep($1); }')
define(ST_LOG, `{ ; }')

define(LOCKDEC, `iccs_pm_lock_t $1;')
define(LOCKINIT, `{ iccs_pm_lock_init(&($1)); }')
define(LOCK, `{ iccs_pm_lock(&($1)); }')
define(UNLOCK, `{ iccs_pm_unlock(&($1)); }')
define(ALOCKDEC, `iccs_pm_lock_t $1[$2];')
define(ALOCKINIT, `{ iccs_pm_alock_init(($1), (long)($2)); }')
define(ALOCK, `{ iccs_pm_lock(&($1)[$2]); }')
define(AULOCK, `{ iccs_pm_unlock(&($1)[$2]); }')
define(AGETL, `(($1)[$2])')
dnl SPLASH-2's NUMA-placement lock variants: real locks here (the suite's file makes them no-ops).
define(NLOCKDEC, `iccs_pm_lock_t $1;')
define(NLOCKINIT, `{ iccs_pm_lock_init(&($1)); }')
define(NLOCK, `{ iccs_pm_lock(&($1)); }')
define(NUNLOCK, `{ iccs_pm_unlock(&($1)); }')

define(BARDEC, `iccs_pm_barrier_t $1;')
dnl BARINIT's count is optional (BARINIT(b) also appears): a barrier's count is BARRIER's.
define(BARINIT, `{ iccs_pm_bar_init(&($1), 0); }')
define(BARRIER, `{ iccs_pm_barrier(&($1), (long)($2)); }')
define(BAREXCLUDE, `{ ; }')
define(BARINCLUDE, `{ ; }')

define(GSDEC, `iccs_pm_gs_t $1;')
define(GSINIT, `{ iccs_pm_gs_init(&($1)); }')
define(GETSUB, `{ ($2) = iccs_pm_getsub(&($1), (long)($3), (long)($4)); }')
define(NU_GSDEC, `GSDEC($1)')
define(NU_GSINIT, `GSINIT($1)')
define(NU_GETSUB, `GETSUB($1, $2, $3, $4)')

define(PAUSEDEC, `iccs_pm_pause_t $1;')
define(PAUSEINIT, `{ iccs_pm_pause_init(&($1)); }')
define(SETPAUSE, `{ iccs_pm_pause_set(&($1)); }')
define(CLEARPAUSE, `{ iccs_pm_pause_clear(&($1)); }')
define(WAITPAUSE, `{ iccs_pm_pause_wait(&($1)); }')
define(EVENT, `{ ; }')
define(PAUSE, `{ ; }')

define(CONDVARDEC, `iccs_pm_cond_t $1;')
define(CONDVARINIT, `{ iccs_pm_cond_init(&($1)); }')
define(CONDVARWAIT, `{ iccs_pm_cond_wait(&($1), &($2)); }')
define(CONDVARSIGNAL, `{ iccs_pm_cond_signal(&($1), 0); }')
define(CONDVARBCAST, `{ iccs_pm_cond_signal(&($1), 1); }')

define(RELEASE_FENCE, `{ iccs_pm_release_fence(); }')
define(ACQUIRE_FENCE, `{ iccs_pm_acquire_fence(); }')
define(FULL_FENCE, `{ iccs_pm_fence(); }')

define(SPLASH3_ROI_BEGIN, `iccs_pm_roi(1);')
define(SPLASH3_ROI_END, `iccs_pm_roi(0);')

dnl Address-space declarations and tracing/simulator hooks: nothing to do.
define(ADEC, `long $1;')
define(AINIT, `{ ; }')
define(PROBEND, `{ ; }')
define(NEWPROC, `')
define(MONINIT, `{ ; }')
define(MONMINIT, `')
define(MONMEXIT, `')
define(MENTER, `{ ; }')
define(MEXIT, `{ ; }')
define(DELAY, `{ ; }')
define(CONTINUE, `{ ; }')
define(AUG_ON, ` ')
define(AUG_OFF, ` ')
define(TRACE_ON, ` ')
define(TRACE_OFF, ` ')
define(REF_TRACE_ON, ` ')
define(REF_TRACE_OFF, ` ')
define(DYN_TRACE_ON, `;')
define(DYN_TRACE_OFF, `;')
define(DYN_REF_TRACE_ON, `;')
define(DYN_REF_TRACE_OFF, `;')
define(DYN_SIM_ON, `;')
define(DYN_SIM_OFF, `;')
define(DYN_SCHED_ON, `;')
define(DYN_SCHED_OFF, `;')
define(AUG_SET_LOLIMIT, `;')
define(AUG_SET_HILIMIT, `;')
divert(0)dnl
#include "parmacs.h"
