/* parmacs.h: the PARMACS macros of SPLASH-2 / SPLASH-3 programs, mapped onto the iccs DSM and the
 * cluster runtime (dsm/README.md, "PARMACS"). C and C++. A program written with these macros runs
 * across clusters with no change to its source:
 *
 *     #include "parmacs.h"    (or, the SPLASH way: m4 -Ulen -Uindex parmacs.m4 prog.C > prog.c)
 *
 * Rules (release consistency across clusters): data shared between threads comes from G_MALLOC
 * (globals may hold pointers to it, set before CREATE); a read of data another thread wrote is
 * ordered by LOCK/UNLOCK, BARRIER, PAUSE or a fence; sync objects are initialised before CREATE
 * (or by one thread, which then publishes them under a lock); the sequential prefix of main
 * (before CREATE) is deterministic, because every cluster process replays it.
 */
#ifndef ICCS_PARMACS_H
#define ICCS_PARMACS_H

/* A superset of what the suite's MAIN_ENV / EXTERN_ENV bring in, so a program that relies on them
 * (assert, semaphores, C11 atomics, fixed-width integers) builds unchanged. */
#include <assert.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <unistd.h>
#if !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__STDC_NO_ATOMICS__)
#include <stdatomic.h>
#endif

/* The suite's macro file defines the page size programs pad and align shared data to. It is the
 * DSM's default page (ICCS_DSM_PAGE may make the DSM's larger; padding to 4096 stays correct). */
#ifndef PAGE_SIZE
#define PAGE_SIZE 4096
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Sync objects hold a DSM sync id (they live in shared memory or in globals). */
typedef struct { unsigned int id; } iccs_pm_lock_t;
typedef struct { unsigned int id; } iccs_pm_barrier_t;
typedef struct { unsigned int id; } iccs_pm_gs_t;
typedef struct { unsigned int id; } iccs_pm_pause_t;
typedef struct { unsigned int id; } iccs_pm_cond_t;

/* Start: the process becomes its cluster (runtime, shared region). End: waits for every cluster,
 * prints the counters, exits with the run's status. */
void iccs_pm_init(void);
void iccs_pm_end(void);
void* iccs_pm_malloc(size_t bytes, const char* file, int line);
void iccs_pm_free(void* p);
void iccs_pm_create(void (*fn)(void), long n);
void iccs_pm_wait_for_end(long n);
long iccs_pm_pid(void);
unsigned long iccs_pm_clock_us(void);
void iccs_pm_lock_init(iccs_pm_lock_t* l);
void iccs_pm_alock_init(iccs_pm_lock_t* a, long n);
void iccs_pm_lock(iccs_pm_lock_t* l);
void iccs_pm_unlock(iccs_pm_lock_t* l);
void iccs_pm_bar_init(iccs_pm_barrier_t* b, long n);
void iccs_pm_barrier(iccs_pm_barrier_t* b, long n);
void iccs_pm_gs_init(iccs_pm_gs_t* g);
long iccs_pm_getsub(iccs_pm_gs_t* g, long last, long nproc);
void iccs_pm_pause_init(iccs_pm_pause_t* p);
void iccs_pm_pause_set(iccs_pm_pause_t* p);
void iccs_pm_pause_clear(iccs_pm_pause_t* p);
void iccs_pm_pause_wait(iccs_pm_pause_t* p);
void iccs_pm_cond_init(iccs_pm_cond_t* c);
void iccs_pm_cond_wait(iccs_pm_cond_t* c, iccs_pm_lock_t* l);
void iccs_pm_cond_signal(iccs_pm_cond_t* c, int all);
/* Fences: release (publish this cluster's writes), acquire (see every published write), both */
void iccs_pm_release_fence(void);
void iccs_pm_acquire_fence(void);
void iccs_pm_fence(void);
void iccs_pm_roi(int begin);
/* For macros a program writes either as `M;` or as `M();` (SPLASH-3 writes `RELEASE_FENCE();` and
 * `SPLASH3_ROI_BEGIN();`): the macro is a call that does the work and returns a function that
 * does nothing, so a following `()` calls that. */
typedef void (*iccs_pm_then_t)(void);
iccs_pm_then_t iccs_pm_fence_then(void (*fence)(void));
iccs_pm_then_t iccs_pm_roi_then(int begin);

#ifdef __cplusplus
}
#endif


/* ---- the macros --------------------------------------------------------------------------------
 * Each has the shape of the same macro in SPLASH-3's pthread macro file, so code written against
 * that file compiles here unchanged: a statement macro is a braced block (`LOCK(l)` needs no
 * semicolon; `LOCK(l);` adds an empty statement), G_MALLOC and NU_MALLOC end in a semicolon
 * (`p = G_MALLOC(n)` is a whole statement), G_MALLOC_F / NU_MALLOC_F are the expression forms,
 * a declaration macro declares one object and ends in a semicolon. dsm/README.md, "Conformance",
 * lists every macro, its expansion here and the test that covers it. */

/* Environment: the declarations are all in this header (the m4 route includes it at the top of
 * every file it processes, so a header using LOCKDEC before MAIN_ENV compiles). */
#define MAIN_ENV
#define ENV
#define EXTERN_ENV
#define INCLUDES
#define MAIN_INITENV(...) { iccs_pm_init(); }
#define MAIN_END { iccs_pm_end(); }

/* Shared memory. The environment starts on first use, so G_MALLOC may come before MAIN_INITENV.
 * A second argument (SPLASH-2's home node, as in `G_MALLOC(size, pid)`) is ignored, as the suite
 * ignores it. */
#define G_MALLOC(size, ...) iccs_pm_malloc((size_t)(size), __FILE__, __LINE__);
#define G_MALLOC_F(size, ...) iccs_pm_malloc((size_t)(size), __FILE__, __LINE__)
#define G_FREE(p) iccs_pm_free(p);
#define NU_MALLOC(size, ...) iccs_pm_malloc((size_t)(size), __FILE__, __LINE__);
#define NU_MALLOC_F(size, ...) iccs_pm_malloc((size_t)(size), __FILE__, __LINE__)
#define NU_FREE(p, ...) iccs_pm_free(p);

/* Threads and time. */
#define CREATE(fn, n) { iccs_pm_create((fn), (long)(n)); }
#define WAIT_FOR_END(n) { iccs_pm_wait_for_end((long)(n)); }
#define GET_PID(pid) { (pid) = iccs_pm_pid(); }
#define GET_HOME(home) { (home) = 0; }
#define SET_HOME(...) { ; }
#define CLOCK(t) { (t) = iccs_pm_clock_us(); }
#define AUG_DELAY(s) { sleep(s); }
#define ST_LOG(...) { ; }

/* Locks. */
#define LOCKDEC(l) iccs_pm_lock_t l;
#define LOCKINIT(l) { iccs_pm_lock_init(&(l)); }
#define LOCK(l) { iccs_pm_lock(&(l)); }
#define UNLOCK(l) { iccs_pm_unlock(&(l)); }
#define ALOCKDEC(a, n) iccs_pm_lock_t a[n];
#define ALOCKINIT(a, n) { iccs_pm_alock_init((a), (long)(n)); }
#define ALOCK(a, i) { iccs_pm_lock(&(a)[i]); }
#define AULOCK(a, i) { iccs_pm_unlock(&(a)[i]); }
#define AGETL(a, i) ((a)[i])
/* SPLASH-2's NUMA-placement lock variants: real locks here (the suite's file makes them no-ops). */
#define NLOCKDEC(l, ...) iccs_pm_lock_t l;
#define NLOCKINIT(l, ...) { iccs_pm_lock_init(&(l)); }
#define NLOCK(l) { iccs_pm_lock(&(l)); }
#define NUNLOCK(l) { iccs_pm_unlock(&(l)); }

/* Barriers. BARINIT's count is optional (some programs write BARINIT(b)): a barrier's count is
 * BARRIER's second argument. */
#define BARDEC(b) iccs_pm_barrier_t b;
#define BARINIT(b, ...) { iccs_pm_bar_init(&(b), 0); }
#define BARRIER(b, n) { iccs_pm_barrier(&(b), (long)(n)); }
#define BAREXCLUDE(...) { ; }
#define BARINCLUDE(...) { ; }

/* Get-next-index counters. */
#define GSDEC(g) iccs_pm_gs_t g;
#define GSINIT(g) { iccs_pm_gs_init(&(g)); }
#define GETSUB(g, s, last, nproc) { (s) = iccs_pm_getsub(&(g), (long)(last), (long)(nproc)); }
#define NU_GSDEC(g) GSDEC(g)
#define NU_GSINIT(g) GSINIT(g)
#define NU_GETSUB(g, s, last, nproc) GETSUB(g, s, last, nproc)

/* Events (flags) and condition variables. */
#define PAUSEDEC(p) iccs_pm_pause_t p;
#define PAUSEINIT(p) { iccs_pm_pause_init(&(p)); }
#define SETPAUSE(p) { iccs_pm_pause_set(&(p)); }
#define CLEARPAUSE(p) { iccs_pm_pause_clear(&(p)); }
#define WAITPAUSE(p) { iccs_pm_pause_wait(&(p)); }
#define EVENT(...) { ; }
#define PAUSE(...) { ; }
#define CONDVARDEC(c) iccs_pm_cond_t c;
#define CONDVARINIT(c) { iccs_pm_cond_init(&(c)); }
#define CONDVARWAIT(c, l) { iccs_pm_cond_wait(&(c), &(l)); }
#define CONDVARSIGNAL(c) { iccs_pm_cond_signal(&(c), 0); }
#define CONDVARBCAST(c) { iccs_pm_cond_signal(&(c), 1); }

/* A fence is one exchange with the DSM's fence lock's home (no lock taken): a release fence
 * publishes this cluster's writes, an acquire fence brings every published write, a full fence
 * does both. `RELEASE_FENCE;` and `RELEASE_FENCE();` both work (see iccs_pm_then_t). */
#define RELEASE_FENCE iccs_pm_fence_then(iccs_pm_release_fence)
#define ACQUIRE_FENCE iccs_pm_fence_then(iccs_pm_acquire_fence)
#define FULL_FENCE iccs_pm_fence_then(iccs_pm_fence)

/* Region of interest (`SPLASH3_ROI_BEGIN();` or `SPLASH3_ROI_BEGIN;`): its time is printed with
 * the counters (roi_us). */
#define SPLASH3_ROI_BEGIN iccs_pm_roi_then(1)
#define SPLASH3_ROI_END iccs_pm_roi_then(0)

/* Address-space declarations and tracing/simulator hooks of SPLASH-2/3: nothing to do here. */
#define ADEC(a) long a;
#define AINIT(...) { ; }
#define PROBEND(...) { ; }
#define NEWPROC
#define MONINIT(...) { ; }
#define MONMINIT(...)
#define MONMEXIT(...)
#define MENTER(...) { ; }
#define MEXIT(...) { ; }
#define DELAY(...) { ; }
#define CONTINUE(...) { ; }
#define AUG_ON
#define AUG_OFF
#define TRACE_ON
#define TRACE_OFF
#define REF_TRACE_ON
#define REF_TRACE_OFF
#define DYN_TRACE_ON ;
#define DYN_TRACE_OFF ;
#define DYN_REF_TRACE_ON ;
#define DYN_REF_TRACE_OFF ;
#define DYN_SIM_ON ;
#define DYN_SIM_OFF ;
#define DYN_SCHED_ON ;
#define DYN_SCHED_OFF ;
#define AUG_SET_LOLIMIT(...) ;
#define AUG_SET_HILIMIT(...) ;

#endif /* ICCS_PARMACS_H */
