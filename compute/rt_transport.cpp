// rt_transport.cpp: the runtime's transport names (config.hpp, runtime_launch.hpp), on their own so
// that reading a machine file (config.cpp) links without the runtime and DPDK (mpi/provider/).
#include <string>

#include "config.hpp"
#include "runtime_launch.hpp"

namespace iccs {

const char* to_string(RtTransport t) {
    switch (t) {
        case RtTransport::kIccs: return "iccs";
        case RtTransport::kDirect: return "direct";
        case RtTransport::kDelay: return "delay";
    }
    return "?";
}

bool parse_transport(const std::string& s, RtTransport& out) {
    if (s == "iccs") out = RtTransport::kIccs;
    else if (s == "direct") out = RtTransport::kDirect;
    else if (s == "delay") out = RtTransport::kDelay;
    else return false;
    return true;
}

}  // namespace iccs
