// dispatch.hpp: how a convergence module picks the local proxy for a message or a piece
// (DESIGN.md §1 "dispatch"). Pure functions of a small state, so they are unit-tested alone.
//
//  fixed         compute thread t always uses proxy t mod P: no state shared between threads,
//                but one proxy per thread however unequal the threads' traffic.
//  round-robin   the next proxy for every message (and every piece of a striped message).
//  least-loaded  the proxy that holds the least unsent work for us: this thread's ring to it
//                plus the proxy's published backlog (messages waiting for send window). A proxy
//                that falls behind (a slow core, a congested sub-connection) collects a backlog
//                and gets less; ties go round-robin so equal proxies share evenly.
#pragma once

#include <cstdint>
#include <string_view>

namespace iccs {

enum class Dispatch {
    kFixed,        // "fixed"
    kRoundRobin,   // "round-robin"
    kLeastLoaded,  // "least-loaded"
};
std::string_view to_string(Dispatch d);

struct DispatchState {
    uint16_t thread = 0;
    uint16_t proxies = 1;
    uint16_t rr = 0;  // round-robin cursor (also breaks least-loaded ties)
};

// load(p): the work proxy p holds for us; called only for least-loaded.
template <typename LoadFn>
inline uint16_t dispatch_pick(DispatchState& s, Dispatch d, LoadFn&& load) {
    switch (d) {
        case Dispatch::kFixed:
            return static_cast<uint16_t>(s.thread % s.proxies);
        case Dispatch::kRoundRobin:
            s.rr = static_cast<uint16_t>(s.rr + 1 == s.proxies ? 0 : s.rr + 1);
            return s.rr;
        case Dispatch::kLeastLoaded: {
            s.rr = static_cast<uint16_t>(s.rr + 1 == s.proxies ? 0 : s.rr + 1);
            uint16_t best = s.rr;
            uint32_t best_load = load(best);
            for (uint16_t k = 1; k < s.proxies && best_load > 0; ++k) {
                const uint16_t p = static_cast<uint16_t>((s.rr + k) % s.proxies);
                const uint32_t l = load(p);
                if (l < best_load) {
                    best_load = l;
                    best = p;
                }
            }
            return best;
        }
    }
    return 0;
}

}  // namespace iccs
