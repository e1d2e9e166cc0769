// timer_wheel.hpp: a hashed timing wheel driven by a caller-supplied clock.
//
// The stack never reads a clock itself: every entry point takes `now_ns`, so tests run protocol
// time as fast as they like and a proxy passes its TSC-derived time. Timers are intrusive (no
// allocation), arm/cancel are O(1), and advance() touches only the slots of elapsed ticks.
#pragma once

#include <cstdint>
#include <memory>

namespace iccs {

struct Timer {
    using Fn = void (*)(Timer& t, uint64_t now_ns);
    Fn fn = nullptr;       // called once when the timer fires (it may re-arm itself)
    void* ctx = nullptr;   // for fn
    uint64_t expires_ns = 0;
    Timer* next = nullptr; // slot list links, owned by the wheel
    Timer* prev = nullptr;
    uint32_t slot = 0;     // which slot list holds it
    bool armed = false;
};

class TimerWheel {
   public:
    // tick_ns: slot width; nslots: rounded up to a power of two. Timers further out than one
    // turn stay in their slot and are skipped until their time comes.
    TimerWheel(uint64_t tick_ns, uint32_t nslots, uint64_t now_ns);
    TimerWheel(const TimerWheel&) = delete;
    TimerWheel& operator=(const TimerWheel&) = delete;

    // (Re)arm t to fire at expires_ns (a time in the past fires at the next advance()).
    void arm(Timer& t, uint64_t expires_ns);
    void cancel(Timer& t);
    // Fire every timer due at or before now_ns; returns how many fired.
    uint32_t advance(uint64_t now_ns);
    uint32_t armed_count() const { return armed_; }
    // The earliest expiry among armed timers, or UINT64_MAX: for pollers that sleep until then.
    uint64_t next_expiry() const;

   private:
    uint64_t tick_ns_;
    uint32_t mask_;
    uint64_t cur_tick_;  // every slot before this tick has been processed
    uint64_t tick_end_ns_;  // (cur_tick_ + 1) * tick_ns_: where the current tick ends
    uint32_t armed_ = 0;
    // No armed timer expires before this (UINT64_MAX: none armed). A lower bound: arm() lowers
    // it, a cancel leaves it (until none is armed), and an advance() that reaches it walks the
    // slots and sets it to next_expiry(). Until then advance() looks at no slot: a poller calls
    // it every iteration, and the slot's load was most of its cost (a miss in the in-rank MPI
    // rank's loop, whose iteration touches much else: mpi/provider/SPEED.md).
    uint64_t due_ns_ = UINT64_MAX;
    std::unique_ptr<Timer*[]> slots_;
};

}  // namespace iccs
