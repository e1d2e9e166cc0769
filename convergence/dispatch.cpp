// dispatch.cpp: the dispatch policies' names (dispatch.hpp), apart from the module so that a
// configuration reader links without the rings and DPDK.
#include "dispatch.hpp"

namespace iccs {

std::string_view to_string(Dispatch d) {
    switch (d) {
        case Dispatch::kFixed: return "fixed";
        case Dispatch::kRoundRobin: return "round-robin";
        case Dispatch::kLeastLoaded: return "least-loaded";
    }
    return "?";
}

}  // namespace iccs
