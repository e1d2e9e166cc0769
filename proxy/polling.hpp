// polling.hpp: how a proxy waits for work (DESIGN.md §2 "Polling"); shared by config and proxy.
#pragma once

namespace iccs {

enum class Polling {
    kBusy,      // "busy": spin on a dedicated core (deployment)
    kAdaptive,  // "adaptive": spin a short while, then sleep until woken (shared hosts, CI)
    kInline,    // "inline": no proxy threads; compute threads run the stack (the baseline)
};

}  // namespace iccs
