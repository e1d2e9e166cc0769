dnl pthreads_ref.m4: a PARMACS macro file over plain POSIX threads in one process, written for the
dnl tests: the reference a PARMACS program's output across clusters is compared with. It keeps
dnl the shapes of SPLASH-3's pthread macro file (a statement macro is a braced block, G_MALLOC
dnl ends in a semicolon, declarations end in one) and is our own text: the suite's files are not
dnl redistributable. Usage: m4 -Ulen -Uindex pthreads_ref.m4 prog.C > prog.c
divert(-1)
define(INCLUDES, `
#ifndef REF_PARMACS_DECLS
#define REF_PARMACS_DECLS
#include <assert.h>
#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <unistd.h>
#ifndef PAGE_SIZE
#define PAGE_SIZE 4096
#endif
typedef struct { pthread_mutex_t m; pthread_cond_t c; int set; } ref_pause_t;
typedef struct { pthread_mutex_t m; long next; } ref_gs_t;
typedef struct { pthread_mutex_t m; pthread_cond_t c; long count, gen; } ref_bar_t;
extern pthread_t ref_threads[];
extern long ref_nthreads;
void *ref_start(void *a);
extern __thread long ref_pid;
extern void (*ref_fn)(void);
#endif
')
define(MAIN_ENV, `INCLUDES
pthread_t ref_threads[1024];
long ref_nthreads;
__thread long ref_pid;
void (*ref_fn)(void);
void *ref_start(void *a) { ref_pid = (long)(intptr_t)a; ref_fn(); return NULL; }
')
define(ENV, `')
define(EXTERN_ENV, `INCLUDES')
define(MAIN_INITENV, `{ ref_pid = 0; }')
define(MAIN_END, `{ exit(0); }')

define(G_MALLOC, `malloc($1);')
define(G_MALLOC_F, `malloc($1)')
define(G_FREE, `;')
define(NU_MALLOC, `malloc($1);')
define(NU_MALLOC_F, `malloc($1)')
define(NU_FREE, `;')

define(CREATE, `{ long ref_i; ref_fn = ($1); ref_nthreads = ($2);
  for (ref_i = 1; ref_i < ref_nthreads; ref_i++)
    if (pthread_create(&ref_threads[ref_i], NULL, ref_start, (void *)(intptr_t)ref_i) != 0) { perror("pthread_create"); exit(1); }
  ref_pid = 0; ($1)(); }')
define(WAIT_FOR_END, `{ long ref_i; for (ref_i = 1; ref_i < ($1); ref_i++) pthread_join(ref_threads[ref_i], NULL); }')
define(GET_PID, `{ ($1) = ref_pid; }')
define(GET_HOME, `{ ($1) = 0; }')
define(SET_HOME, `{ ; }')
define(CLOCK, `{ struct timeval ref_tv; gettimeofday(&ref_tv, NULL); ($1) = (unsigned long)(ref_tv.tv_sec * 1000000 + ref_tv.tv_usec); }')
define(AUG_DELAY, `{ sleep($1); }')
define(ST_LOG, `{ ; }')

define(LOCKDEC, `pthread_mutex_t $1;')
define(LOCKINIT, `{ pthread_mutex_init(&($1), NULL); }')
define(LOCK, `{ pthread_mutex_lock(&($1)); }')
define(UNLOCK, `{ pthread_mutex_unlock(&($1)); }')
define(ALOCKDEC, `pthread_mutex_t $1[$2];')
define(ALOCKINIT, `{ long ref_i; for (ref_i = 0; ref_i < ($2); ref_i++) pthread_mutex_init(&($1)[ref_i], NULL); }')
define(ALOCK, `{ pthread_mutex_lock(&($1)[$2]); }')
define(AULOCK, `{ pthread_mutex_unlock(&($1)[$2]); }')
define(AGETL, `(($1)[$2])')
define(NLOCKDEC, `pthread_mutex_t $1;')
define(NLOCKINIT, `{ pthread_mutex_init(&($1), NULL); }')
define(NLOCK, `{ pthread_mutex_lock(&($1)); }')
define(NUNLOCK, `{ pthread_mutex_unlock(&($1)); }')

dnl A counting barrier: its count is BARRIER's argument, so BARINIT(b) with no count works too.
define(BARDEC, `ref_bar_t $1;')
define(BARINIT, `{ pthread_mutex_init(&($1).m, NULL); pthread_cond_init(&($1).c, NULL); ($1).count = 0; ($1).gen = 0; }')
define(BARRIER, `{ long ref_gen; pthread_mutex_lock(&($1).m); ref_gen = ($1).gen;
  if (++($1).count == ($2)) { ($1).count = 0; ($1).gen++; pthread_cond_broadcast(&($1).c); }
  else while (ref_gen == ($1).gen) pthread_cond_wait(&($1).c, &($1).m);
  pthread_mutex_unlock(&($1).m); }')
define(BAREXCLUDE, `{ ; }')
define(BARINCLUDE, `{ ; }')

define(GSDEC, `ref_gs_t $1;')
define(GSINIT, `{ pthread_mutex_init(&($1).m, NULL); ($1).next = 0; }')
define(GETSUB, `{ pthread_mutex_lock(&($1).m);
  if (($1).next <= ($3)) ($2) = ($1).next++; else { ($2) = -1; }
  pthread_mutex_unlock(&($1).m); }')
define(NU_GSDEC, `GSDEC($1)')
define(NU_GSINIT, `GSINIT($1)')
define(NU_GETSUB, `GETSUB($1, $2, $3, $4)')

define(PAUSEDEC, `ref_pause_t $1;')
define(PAUSEINIT, `{ pthread_mutex_init(&($1).m, NULL); pthread_cond_init(&($1).c, NULL); ($1).set = 0; }')
define(SETPAUSE, `{ pthread_mutex_lock(&($1).m); ($1).set = 1; pthread_cond_broadcast(&($1).c); pthread_mutex_unlock(&($1).m); }')
define(CLEARPAUSE, `{ pthread_mutex_lock(&($1).m); ($1).set = 0; pthread_mutex_unlock(&($1).m); }')
define(WAITPAUSE, `{ pthread_mutex_lock(&($1).m); while (!($1).set) pthread_cond_wait(&($1).c, &($1).m); pthread_mutex_unlock(&($1).m); }')
define(EVENT, `{ ; }')
define(PAUSE, `{ ; }')

define(CONDVARDEC, `pthread_cond_t $1;')
define(CONDVARINIT, `{ pthread_cond_init(&($1), NULL); }')
define(CONDVARWAIT, `{ pthread_cond_wait(&($1), &($2)); }')
define(CONDVARSIGNAL, `{ pthread_cond_signal(&($1)); }')
define(CONDVARBCAST, `{ pthread_cond_broadcast(&($1)); }')

define(RELEASE_FENCE, `{ __atomic_thread_fence(__ATOMIC_RELEASE); }')
define(ACQUIRE_FENCE, `{ __atomic_thread_fence(__ATOMIC_ACQUIRE); }')
define(FULL_FENCE, `{ __atomic_thread_fence(__ATOMIC_SEQ_CST); }')

define(SPLASH3_ROI_BEGIN, `')
define(SPLASH3_ROI_END, `')
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
divert(0)INCLUDES
