// conv_setup.cpp: what conv_setup.hpp declares: the errors in words, an endpoint in words, and the
// default stripe threshold.
#include "conv_setup.hpp"

#include "conv_hdr.hpp"
#include "slidwin_hdr.hpp"
#include "udp_hdr.hpp"

namespace iccs {

const char* conv_strerror(ConvError e) {
    switch (e) {
        case ConvError::kOk: return "ok";
        case ConvError::kTimeout: return "timed out";
        case ConvError::kWouldBlock: return "would block";
        case ConvError::kRefused: return "connection refused";
        case ConvError::kPeerDown: return "peer cluster down";
        case ConvError::kEndOfStream: return "end of stream";
        case ConvError::kClosed: return "connection closed";
        case ConvError::kPortInUse: return "port in use";
        case ConvError::kBadArgument: return "bad argument";
        case ConvError::kNoMemory: return "no memory";
        case ConvError::kUnsupported: return "unsupported";
    }
    return "?";
}

uint32_t default_stripe_threshold(uint32_t mtu_bytes) {
    return mtu_bytes - kIpv4HdrLen - kUdpHdrLen - kSlidwinHdrLen - kConvHdrLen;
}

std::string to_string(Endpoint e) { return "cluster " + std::to_string(e.cluster) + " port " + std::to_string(e.port); }

}  // namespace iccs
