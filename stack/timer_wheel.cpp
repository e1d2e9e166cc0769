// timer_wheel.cpp: see timer_wheel.hpp.
#include "timer_wheel.hpp"

namespace iccs {

TimerWheel::TimerWheel(uint64_t tick_ns, uint32_t nslots, uint64_t now_ns)
    : tick_ns_(tick_ns == 0 ? 1 : tick_ns) {
    uint32_t n = 1;
    while (n < nslots) n <<= 1;
    mask_ = n - 1;
    slots_.reset(new Timer*[n]());
    cur_tick_ = now_ns / tick_ns_;
    tick_end_ns_ = (cur_tick_ + 1) * tick_ns_;
}

void TimerWheel::arm(Timer& t, uint64_t expires_ns) {
    if (t.armed) cancel(t);
    t.expires_ns = expires_ns;
    uint64_t tick = expires_ns / tick_ns_;
    if (tick < cur_tick_) tick = cur_tick_;  // overdue: the next advance() sees it
    t.slot = static_cast<uint32_t>(tick & mask_);
    Timer*& head = slots_[t.slot];
    t.prev = nullptr;
    t.next = head;
    if (head != nullptr) head->prev = &t;
    head = &t;
    t.armed = true;
    ++armed_;
    if (expires_ns < due_ns_) due_ns_ = expires_ns;
}

void TimerWheel::cancel(Timer& t) {
    if (!t.armed) return;
    if (t.prev != nullptr) {
        t.prev->next = t.next;
    } else {
        slots_[t.slot] = t.next;
    }
    if (t.next != nullptr) t.next->prev = t.prev;
    t.next = t.prev = nullptr;
    t.armed = false;
    if (--armed_ == 0) due_ns_ = UINT64_MAX;
}

uint32_t TimerWheel::advance(uint64_t now_ns) {
    // Most calls (a poller's every iteration) fall in the current tick: no division then.
    const bool same_tick = now_ns < tick_end_ns_;
    if (now_ns < due_ns_) {
        // Nothing can be due: no slot is looked at. The wheel moves on all the same: every armed
        // timer expires after now_ns, so the ticks passed over hold only a later turn's timers
        // (a timer of now_tick sits in the current slot, looked at when due_ns_ comes).
        if (!same_tick) {
            const uint64_t now_tick = now_ns / tick_ns_;
            if (now_tick > cur_tick_) {
                cur_tick_ = now_tick;
                tick_end_ns_ = (cur_tick_ + 1) * tick_ns_;
            }
        }
        return 0;
    }
    if (same_tick && slots_[cur_tick_ & mask_] == nullptr) {
        due_ns_ = next_expiry();  // the timer that set due_ns_ was cancelled
        return 0;
    }
    const uint64_t now_tick = same_tick ? cur_tick_ : now_ns / tick_ns_;
    if (now_tick < cur_tick_) return 0;
    uint32_t fired = 0;
    // Visit each elapsed slot once (at most one full turn), including the current one.
    uint64_t last = now_tick;
    if (last - cur_tick_ > mask_) last = cur_tick_ + mask_;
    for (uint64_t tick = cur_tick_; tick <= last; ++tick) {
        Timer** link = &slots_[tick & mask_];
        while (*link != nullptr) {
            Timer* t = *link;
            if (t->expires_ns <= now_ns) {
                cancel(*t);  // unlinks t; *link now holds its successor
                ++fired;
                t->fn(*t, now_ns);
                link = &slots_[tick & mask_];  // fn may have armed timers into this slot: rescan
            } else {
                link = &t->next;
            }
        }
    }
    cur_tick_ = now_tick;
    tick_end_ns_ = (cur_tick_ + 1) * tick_ns_;
    due_ns_ = next_expiry();  // exact again (a walk of the slots up to the earliest)
    return fired;
}

uint64_t TimerWheel::next_expiry() const {
    uint64_t best = UINT64_MAX;
    if (armed_ == 0) return best;
    // Walk forward from the current tick: a slot's timers expire no earlier than the slot's
    // tick (overdue ones sit in cur_tick_'s slot), so stop once the next slot starts after the
    // best found. An adaptive proxy asks before every sleep: this is usually one or two slots.
    for (uint64_t tick = cur_tick_; tick <= cur_tick_ + mask_; ++tick) {
        if (tick > cur_tick_ && tick * tick_ns_ > best) break;
        for (Timer* t = slots_[tick & mask_]; t != nullptr; t = t->next)
            if (t->expires_ns < best) best = t->expires_ns;
    }
    return best;
}

}  // namespace iccs
