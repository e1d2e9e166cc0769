// The timer wheel under a test-controlled clock.
#include <catch2/catch.hpp>
#include <vector>

#include "timer_wheel.hpp"

using namespace iccs;

namespace {
std::vector<int> fired;
void record(Timer& t, uint64_t) { fired.push_back(static_cast<int>(reinterpret_cast<intptr_t>(t.ctx))); }
// Timers 0 .. N-1 that record their number in `fired` (cleared) when they fire.
template <size_t N>
void recording(Timer (&t)[N]) {
    fired.clear();
    for (size_t i = 0; i < N; ++i) {
        t[i].fn = record;
        t[i].ctx = reinterpret_cast<void*>(static_cast<intptr_t>(i));
    }
}
}  // namespace

TEST_CASE("timers fire once, in time, and not before", "[timer]") {
    TimerWheel w(1000, 16, 0);
    Timer t[4];
    recording(t);
    w.arm(t[0], 5'500);
    w.arm(t[1], 2'000);
    w.arm(t[2], 100'000);  // beyond one turn of the wheel (16 us)
    w.arm(t[3], 3'000);
    REQUIRE(w.next_expiry() == 2'000);
    w.cancel(t[3]);
    REQUIRE(w.advance(1'999) == 0);
    REQUIRE(w.advance(2'000) == 1);
    REQUIRE(w.advance(5'499) == 0);
    REQUIRE(w.advance(50'000) == 1);  // many ticks at once; t[2] stays
    REQUIRE(fired == std::vector<int>{1, 0});
    REQUIRE(w.armed_count() == 1);
    REQUIRE(w.advance(99'999) == 0);
    REQUIRE(w.advance(1'000'000) == 1);
    REQUIRE(fired == std::vector<int>{1, 0, 2});
    REQUIRE(w.armed_count() == 0);
    REQUIRE(w.next_expiry() == UINT64_MAX);
}

TEST_CASE("re-arming moves a timer and a callback may re-arm itself", "[timer]") {
    TimerWheel w(100, 8, 0);
    static int count = 0;
    count = 0;
    Timer t;
    t.ctx = &w;
    t.fn = [](Timer& self, uint64_t now) {
        ++count;
        if (count < 3) static_cast<TimerWheel*>(self.ctx)->arm(self, now + 250);
    };
    w.arm(t, 1000);
    w.arm(t, 200);  // moved earlier
    REQUIRE(w.armed_count() == 1);
    w.advance(200);
    REQUIRE(count == 1);
    w.advance(449);
    REQUIRE(count == 1);
    w.advance(450);
    REQUIRE(count == 2);
    w.advance(10'000);
    REQUIRE(count == 3);
    REQUIRE(w.armed_count() == 0);
}

TEST_CASE("an overdue arm fires at the next advance", "[timer]") {
    TimerWheel w(100, 8, 10'000);
    static int count = 0;
    count = 0;
    Timer t;
    t.fn = [](Timer&, uint64_t) { ++count; };
    w.arm(t, 5);
    w.advance(10'000);
    REQUIRE(count == 1);
}

TEST_CASE("advance within the current tick still fires what is due in it", "[timer]") {
    // advance() skips the division while now stays in the current tick (a poller's usual call):
    // a timer due in the middle of that tick must still fire on time, and one a whole turn later
    // in the same slot must not.
    TimerWheel w(1000, 8, 0);  // ticks of 1 us, one turn = 8 us
    Timer t[2];
    recording(t);
    REQUIRE(w.advance(100) == 0);  // empty slot: the fast return
    w.arm(t[0], 600);              // tick 0, the current one
    w.arm(t[1], 8'300);            // tick 8: the same slot, one turn later
    REQUIRE(w.advance(599) == 0);
    REQUIRE(w.advance(600) == 1);
    REQUIRE(fired == std::vector<int>{0});
    REQUIRE(w.advance(999) == 0);    // still tick 0: t[1] shares the slot and waits
    REQUIRE(w.advance(8'299) == 0);  // tick 8, the same slot, not yet due
    REQUIRE(w.advance(8'300) == 1);
    REQUIRE(fired == std::vector<int>{0, 1});
    w.arm(t[0], 8'100);  // overdue within the current tick: fires at the next call
    REQUIRE(w.advance(8'301) == 1);
    REQUIRE(w.armed_count() == 0);
}

TEST_CASE("advance skips the slots until the earliest expiry, losing no timer", "[timer]") {
    // advance() looks at no slot before the earliest armed expiry (a bound that a cancel leaves
    // stale) and moves the wheel over the ticks it skips: a timer of a later turn in a skipped
    // slot, and one armed after a skip, must still fire on time. (Guards that bound; main's
    // wheel, which looked at the current slot every call, passes it too.)
    TimerWheel w(1000, 8, 0);  // ticks of 1 us, one turn = 8 us
    Timer t[3];
    recording(t);
    w.arm(t[0], 3'000);
    w.arm(t[1], 20'500);  // tick 20: slot 4, two turns on
    w.cancel(t[0]);       // the bound stays at 3'000
    REQUIRE(w.advance(2'000) == 0);
    REQUIRE(w.advance(3'000) == 0);   // the stale bound: the slots are walked, nothing is due
    REQUIRE(w.next_expiry() == 20'500);
    REQUIRE(w.advance(4'500) == 0);   // tick 4, t[1]'s slot, a turn too early
    REQUIRE(w.advance(12'600) == 0);  // tick 12, the same slot again
    w.arm(t[2], 13'000);
    REQUIRE(w.advance(12'999) == 0);
    REQUIRE(w.advance(13'000) == 1);
    REQUIRE(fired == std::vector<int>{2});
    w.arm(t[0], 14'000);
    w.cancel(t[0]);
    REQUIRE(w.advance(20'499) == 0);
    REQUIRE(w.advance(20'500) == 1);
    REQUIRE(fired == std::vector<int>{2, 1});
    REQUIRE(w.armed_count() == 0);
    w.arm(t[0], 30'000);  // after none was armed: the bound comes down again
    REQUIRE(w.advance(29'999) == 0);
    REQUIRE(w.advance(30'000) == 1);
    REQUIRE(fired == std::vector<int>{2, 1, 0});
}
