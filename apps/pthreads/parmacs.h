// apps/pthreads/parmacs.h: the PARMACS contract (DESIGN.md §9, issue 8) on POSIX threads in one
// address space. It is the test backend of the applications ("the same program on one
// shared-memory host") and their sequential-consistency reference: the DSM's dsm/parmacs.h
// defines the same macros with the same meaning, so a program that is correct here and follows
// the contract's rules (apps/README.md) runs unchanged on the DSM.
//
// Forms follow SPLASH-3's pthread macros. Every statement macro is a complete statement wrapped
// in do { } while (0): write it with a semicolon, `LOCK(l);`, which is also valid with headers
// whose macros expand to a bare { } block. The declaration macros (LOCKDEC, BARDEC, ...) include
// their semicolon as in SPLASH; the applications still write one after them (`BARDEC(b);`), which
// is valid whichever way a header defines them.
#ifndef ICCS_APPS_PTHREADS_PARMACS_H
#define ICCS_APPS_PTHREADS_PARMACS_H

#include <pthread.h>
#include <time.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace parmacs_pthreads {

// At most this many threads in one CREATE (SPLASH-3's MAX_THREADS).
inline constexpr int kMaxThreads = 1024;

struct ThreadStart {
    void (*fn)(void);
    int pid;
};

inline pthread_t g_threads[kMaxThreads];
inline ThreadStart g_starts[kMaxThreads];
inline int g_created = 0;  // threads started by the last CREATE (n - 1)
inline thread_local int t_pid = 0;  // GET_PID; the main thread (the caller of CREATE) is 0

[[noreturn]] inline void die(const char* what, int err) {
    std::fprintf(stderr, "parmacs (pthreads): %s: %s\n", what, std::strerror(err));
    std::exit(3);
}

inline void check(int err, const char* what) {
    if (err != 0) die(what, err);
}

inline void* trampoline(void* arg) {
    auto* s = static_cast<ThreadStart*>(arg);
    t_pid = s->pid;
    s->fn();
    return nullptr;
}

inline void create(void (*fn)(void), long n) {
    if (n < 1 || n > kMaxThreads) {
        std::fprintf(stderr, "parmacs (pthreads): CREATE: %ld threads, allowed 1..%d\n", n, kMaxThreads);
        std::exit(3);
    }
    if (g_created != 0) {
        std::fprintf(stderr, "parmacs (pthreads): CREATE called again before WAIT_FOR_END\n");
        std::exit(3);
    }
    for (long i = 1; i < n; ++i) {
        g_starts[i - 1] = ThreadStart{fn, static_cast<int>(i)};
        check(pthread_create(&g_threads[i - 1], nullptr, trampoline, &g_starts[i - 1]), "CREATE: pthread_create");
    }
    g_created = static_cast<int>(n - 1);
    t_pid = 0;
    fn();
}

inline void wait_for_end(long n) {
    if (n - 1 != g_created) {
        std::fprintf(stderr, "parmacs (pthreads): WAIT_FOR_END(%ld) after CREATE of %d threads\n", n, g_created + 1);
        std::exit(3);
    }
    for (int i = 0; i < g_created; ++i) check(pthread_join(g_threads[i], nullptr), "WAIT_FOR_END: pthread_join");
    g_created = 0;
}

inline void* g_malloc(std::size_t size) {
    // 64 rather than the contract's minimum of 16: a cache line, so per-thread data in separate
    // allocations never shares a line.
    std::size_t rounded = (size + 63) & ~std::size_t{63};
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (p == nullptr) {
        std::fprintf(stderr, "parmacs (pthreads): G_MALLOC(%zu): out of memory\n", size);
        std::exit(3);
    }
    return p;
}

inline unsigned long clock_us() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<unsigned long>(ts.tv_sec) * 1000000ul + static_cast<unsigned long>(ts.tv_nsec) / 1000ul;
}

// GETSUB's counter: next index under the lock; -1 once past `last`; when all nproc threads have
// seen -1 the counter is reset so the same object can hand out the next round (SPLASH-2).
struct GetSub {
    pthread_mutex_t lock;
    long next;
    long done;
};

inline long getsub(GetSub& g, long last, long nproc) {
    long s;
    pthread_mutex_lock(&g.lock);
    if (g.next <= last) {
        s = g.next++;
    } else {
        s = -1;
        if (++g.done == nproc) {
            g.next = 0;
            g.done = 0;
        }
    }
    pthread_mutex_unlock(&g.lock);
    return s;
}

struct Pause {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int flag;
};

inline void pause_init(Pause& p) {
    check(pthread_mutex_init(&p.lock, nullptr), "PAUSEINIT");
    check(pthread_cond_init(&p.cond, nullptr), "PAUSEINIT");
    p.flag = 0;
}

inline void pause_set(Pause& p) {
    pthread_mutex_lock(&p.lock);
    p.flag = 1;
    pthread_cond_broadcast(&p.cond);
    pthread_mutex_unlock(&p.lock);
}

inline void pause_clear(Pause& p) {
    pthread_mutex_lock(&p.lock);
    p.flag = 0;
    pthread_mutex_unlock(&p.lock);
}

inline void pause_wait(Pause& p) {
    pthread_mutex_lock(&p.lock);
    while (!p.flag) pthread_cond_wait(&p.cond, &p.lock);
    pthread_mutex_unlock(&p.lock);
}

}  // namespace parmacs_pthreads

// --- environment ---------------------------------------------------------------------------------
// The backend's state is in inline variables above, so the environment macros have nothing left
// to declare; they exist so SPLASH programs compile unchanged.
#define MAIN_ENV
#define ENV
#define EXTERN_ENV
#define INCLUDES
#define MAIN_INITENV(...) do { parmacs_pthreads::t_pid = 0; } while (0)
#define MAIN_END do { std::exit(0); } while (0)

// --- memory, threads, time -----------------------------------------------------------------------
// The suite's shapes: G_MALLOC is a statement (ends in a semicolon), G_MALLOC_F an expression.
#define G_MALLOC(size) parmacs_pthreads::g_malloc(size);
#define G_MALLOC_F(size) parmacs_pthreads::g_malloc(size)
#define G_FREE(p) std::free(p)
#define CREATE(fn, n) parmacs_pthreads::create((fn), (n))
#define WAIT_FOR_END(n) parmacs_pthreads::wait_for_end(n)
#define GET_PID(pid) do { (pid) = parmacs_pthreads::t_pid; } while (0)
#define CLOCK(t) do { (t) = parmacs_pthreads::clock_us(); } while (0)

// --- locks ---------------------------------------------------------------------------------------
#define LOCKDEC(l) pthread_mutex_t l;
#define LOCKINIT(l) parmacs_pthreads::check(pthread_mutex_init(&(l), nullptr), "LOCKINIT")
#define LOCK(l) pthread_mutex_lock(&(l))
#define UNLOCK(l) pthread_mutex_unlock(&(l))

#define ALOCKDEC(a, n) pthread_mutex_t a[n];
#define ALOCKINIT(a, n) \
    do { \
        for (long alock_i_ = 0; alock_i_ < (long)(n); ++alock_i_) \
            parmacs_pthreads::check(pthread_mutex_init(&(a)[alock_i_], nullptr), "ALOCKINIT"); \
    } while (0)
#define ALOCK(a, i) pthread_mutex_lock(&(a)[i])
#define AULOCK(a, i) pthread_mutex_unlock(&(a)[i])
#define AGETL(a, i) ((a)[i])

// --- barriers ------------------------------------------------------------------------------------
#define BARDEC(b) pthread_barrier_t b;
#define BARINIT(b, n) parmacs_pthreads::check(pthread_barrier_init(&(b), nullptr, (unsigned)(n)), "BARINIT")
#define BARRIER(b, n) pthread_barrier_wait(&(b))

// --- get-next-index ------------------------------------------------------------------------------
#define GSDEC(g) parmacs_pthreads::GetSub g;
#define GSINIT(g) \
    do { \
        parmacs_pthreads::check(pthread_mutex_init(&(g).lock, nullptr), "GSINIT"); \
        (g).next = 0; \
        (g).done = 0; \
    } while (0)
#define GETSUB(g, s, last, nproc) do { (s) = parmacs_pthreads::getsub((g), (last), (nproc)); } while (0)

// --- events and condition variables --------------------------------------------------------------
#define PAUSEDEC(p) parmacs_pthreads::Pause p;
#define PAUSEINIT(p) parmacs_pthreads::pause_init(p)
#define SETPAUSE(p) parmacs_pthreads::pause_set(p)
#define CLEARPAUSE(p) parmacs_pthreads::pause_clear(p)
#define WAITPAUSE(p) parmacs_pthreads::pause_wait(p)

#define CONDVARDEC(c) pthread_cond_t c;
#define CONDVARINIT(c) parmacs_pthreads::check(pthread_cond_init(&(c), nullptr), "CONDVARINIT")
#define CONDVARWAIT(c, l) pthread_cond_wait(&(c), &(l))
#define CONDVARSIGNAL(c) pthread_cond_signal(&(c))
#define CONDVARBCAST(c) pthread_cond_broadcast(&(c))

// --- ordering ------------------------------------------------------------------------------------
#define RELEASE_FENCE std::atomic_thread_fence(std::memory_order_release)
#define ACQUIRE_FENCE std::atomic_thread_fence(std::memory_order_acquire)
#define FULL_FENCE std::atomic_thread_fence(std::memory_order_seq_cst)

// --- region of interest and tracing (nothing to do in this backend) -------------------------------
#define SPLASH3_ROI_BEGIN(...) do { } while (0)
#define SPLASH3_ROI_END(...) do { } while (0)
#define MONMINIT(...)
#define MONMEXIT(...)
#define MONINIT(...)
#define MONEXIT(...)
#define MONMNOTE(...)
#define MENTER(...)
#define MEXIT(...)
#define DELAY(...)
#define SYNC_OP(...)
#define PROBEND(...)

#endif  // ICCS_APPS_PTHREADS_PARMACS_H
