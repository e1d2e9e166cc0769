// The pthreads PARMACS backend of the applications (apps/pthreads/parmacs.h): every macro of the
// contract does what the contract says. Worker threads only record what they see; the checks run
// on the main thread after WAIT_FOR_END (Catch2 assertions are not thread-safe).
#include <catch2/catch.hpp>

#include <cstdint>
#include <thread>
#include <vector>

#include "parmacs.h"

MAIN_ENV

namespace {

constexpr int kThreads = 4;

struct Shared {
    LOCKDEC(lock)
    ALOCKDEC(locks, 8)
    BARDEC(barrier)
    GSDEC(gs)
    PAUSEDEC(pause)
    CONDVARDEC(cv)
    long counter;
    long slots[8];
    int pid_seen[kThreads];
    int phase[kThreads];
    int phase_ok[kThreads];
    long handed[2][64];  // GETSUB round -> how often each index was handed out
    int minus_one[2];
    int value;        // written before SETPAUSE
    int value_seen;   // read after WAITPAUSE
    int ready;        // condition-variable predicate
    int waiting;      // threads that took the lock to wait (each then sleeps in CONDVARWAIT)
    int woke;
    int woke_early;   // threads past the wait before the broadcast (must stay 0)
};

Shared* sh;
int nthreads;

void init_shared(int n) {
    nthreads = n;
    sh = static_cast<Shared*>(G_MALLOC_F(sizeof(Shared)));
    LOCKINIT(sh->lock);
    ALOCKINIT(sh->locks, 8);
    BARINIT(sh->barrier, n);
    GSINIT(sh->gs);
    PAUSEINIT(sh->pause);
    CONDVARINIT(sh->cv);
    sh->counter = 0;
    for (long& s : sh->slots) s = 0;
    for (int i = 0; i < kThreads; ++i) sh->pid_seen[i] = sh->phase[i] = sh->phase_ok[i] = 0;
    for (auto& round : sh->handed)
        for (long& h : round) h = 0;
    sh->minus_one[0] = sh->minus_one[1] = 0;
    sh->value = sh->value_seen = sh->ready = sh->woke = sh->waiting = sh->woke_early = 0;
}

void PidWorker(void) {
    int pid;
    GET_PID(pid);
    LOCK(sh->lock);
    sh->pid_seen[pid]++;
    UNLOCK(sh->lock);
}

void LockWorker(void) {
    for (int i = 0; i < 20000; ++i) {
        LOCK(sh->lock);
        sh->counter++;
        UNLOCK(sh->lock);
        ALOCK(sh->locks, i % 8);
        sh->slots[i % 8]++;
        AULOCK(sh->locks, i % 8);
        LOCK(AGETL(sh->locks, (i + 3) % 8));  // AGETL is a lock usable with LOCK/UNLOCK
        sh->slots[(i + 3) % 8]++;
        UNLOCK(AGETL(sh->locks, (i + 3) % 8));
    }
}

void BarrierWorker(void) {
    int pid;
    GET_PID(pid);
    int ok = 1;
    for (int round = 1; round <= 50; ++round) {
        sh->phase[pid] = round;
        BARRIER(sh->barrier, nthreads);
        for (int t = 0; t < nthreads; ++t) ok &= sh->phase[t] == round;  // nobody is ahead or behind
        BARRIER(sh->barrier, nthreads);
    }
    sh->phase_ok[pid] = ok;
}

void GetsubWorker(void) {
    for (int round = 0; round < 2; ++round) {
        for (;;) {
            long s;
            GETSUB(sh->gs, s, 39, nthreads);  // indices 0..39
            LOCK(sh->lock);
            if (s == -1)
                sh->minus_one[round]++;
            else
                sh->handed[round][s]++;
            UNLOCK(sh->lock);
            if (s == -1) break;
        }
        BARRIER(sh->barrier, nthreads);  // the reset happens when all nproc have seen -1
    }
}

void PauseWorker(void) {
    int pid;
    GET_PID(pid);
    if (pid == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        sh->value = 42;
        SETPAUSE(sh->pause);
    } else {
        WAITPAUSE(sh->pause);
        LOCK(sh->lock);
        sh->value_seen = sh->value;
        UNLOCK(sh->lock);
    }
}

// The broadcast comes only after every other thread is asleep in CONDVARWAIT: a waiter counts
// itself under the lock and gives the lock up only inside the wait, so once pid 0 holds the lock
// with all of them counted, each is waiting. (Broadcasting first, as pid 0 usually could, let a
// CONDVARWAIT that does not wait pass.)
void CondWorker(void) {
    int pid;
    GET_PID(pid);
    if (pid == 0) {
        for (;;) {
            LOCK(sh->lock);
            if (sh->waiting == kThreads - 1) break;  // the lock held: every waiter is in its wait
            UNLOCK(sh->lock);
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        sh->woke_early = sh->woke;
        sh->ready = 1;
        CONDVARBCAST(sh->cv);
        UNLOCK(sh->lock);
    } else {
        LOCK(sh->lock);
        sh->waiting++;
        while (!sh->ready) CONDVARWAIT(sh->cv, sh->lock);
        sh->woke++;
        UNLOCK(sh->lock);
    }
}

}  // namespace

TEST_CASE("CREATE starts n threads with ids 0..n-1, 0 being the caller", "[parmacs]") {
    init_shared(kThreads);
    int before;
    GET_PID(before);
    REQUIRE(before == 0);
    CREATE(PidWorker, kThreads);
    WAIT_FOR_END(kThreads);
    for (int i = 0; i < kThreads; ++i) REQUIRE(sh->pid_seen[i] == 1);
    // n = 1: only the caller runs the function.
    init_shared(1);
    CREATE(PidWorker, 1);
    WAIT_FOR_END(1);
    REQUIRE(sh->pid_seen[0] == 1);
    REQUIRE(sh->pid_seen[1] == 0);
}

TEST_CASE("LOCK, ALOCK and AGETL exclude each other's critical sections", "[parmacs]") {
    init_shared(kThreads);
    CREATE(LockWorker, kThreads);
    WAIT_FOR_END(kThreads);
    REQUIRE(sh->counter == 20000L * kThreads);
    long total = 0;
    for (long s : sh->slots) total += s;
    REQUIRE(total == 2 * 20000L * kThreads);
}

TEST_CASE("BARRIER holds every thread until all n arrive, and is reusable", "[parmacs]") {
    init_shared(kThreads);
    CREATE(BarrierWorker, kThreads);
    WAIT_FOR_END(kThreads);
    for (int i = 0; i < kThreads; ++i) REQUIRE(sh->phase_ok[i] == 1);
}

TEST_CASE("GETSUB hands out 0..last once each, then -1 to everyone, then resets", "[parmacs]") {
    init_shared(kThreads);
    CREATE(GetsubWorker, kThreads);
    WAIT_FOR_END(kThreads);
    for (int round = 0; round < 2; ++round) {
        for (int i = 0; i < 40; ++i) REQUIRE(sh->handed[round][i] == 1);
        REQUIRE(sh->handed[round][40] == 0);
        REQUIRE(sh->minus_one[round] == kThreads);
    }
}

TEST_CASE("WAITPAUSE returns after SETPAUSE and sees what was written before it", "[parmacs]") {
    init_shared(kThreads);
    CREATE(PauseWorker, kThreads);
    WAIT_FOR_END(kThreads);
    REQUIRE(sh->value_seen == 42);
    CLEARPAUSE(sh->pause);
    REQUIRE(sh->pause.flag == 0);
    SETPAUSE(sh->pause);
    WAITPAUSE(sh->pause);  // set: returns at once
}

TEST_CASE("CONDVARWAIT sleeps under the lock until CONDVARBCAST", "[parmacs]") {
    init_shared(kThreads);
    CREATE(CondWorker, kThreads);
    WAIT_FOR_END(kThreads);
    REQUIRE(sh->waiting == kThreads - 1);
    REQUIRE(sh->woke_early == 0);  // nobody left the wait before the broadcast
    REQUIRE(sh->woke == kThreads - 1);  // the broadcast woke every waiter
}

TEST_CASE("G_MALLOC is 16-byte aligned; CLOCK counts microseconds", "[parmacs]") {
    for (std::size_t size : {1u, 7u, 16u, 100u, 4096u, 100000u}) {
        void* p = G_MALLOC(size);
        REQUIRE(reinterpret_cast<std::uintptr_t>(p) % 16 == 0);
        G_FREE(p);
    }
    unsigned long t0, t1;
    CLOCK(t0);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    CLOCK(t1);
    REQUIRE(t1 - t0 >= 30000);
    REQUIRE(t1 - t0 < 30000000);  // generous upper bound: a loaded host, but not seconds-as-us
    RELEASE_FENCE;
    ACQUIRE_FENCE;
    FULL_FENCE;
}
