// steal_wire.hpp: the messages of the work-stealing layer (steal.hpp), host byte order (every
// cluster process of a run is the same binary on hosts of one byte order).
//   steal request    StealReq                     -> victim cluster's service endpoint
//   steal reply      JobHdr [+ argument bytes]    (has_job = 0: nothing to steal)
//   result           ResultHdr + result bytes     -> owner cluster's service endpoint
//   done             (empty)                      -> every cluster's service endpoint
#pragma once

#include <cstdint>
#include <string>

namespace iccs::group::wire {

inline constexpr uint16_t kAnyThread = 0xFFFF;  // CHS: whichever thread of the cluster has work

struct StealReq {
    uint16_t victim = kAnyThread;  // thread of the victim cluster, or kAnyThread
    uint16_t thief = 0;            // asynchronous requests: the thread the reply goes to
    uint32_t pad = 0;
};
static_assert(sizeof(StealReq) == 8);

struct JobHdr {
    uint8_t has_job = 0;
    uint8_t pad = 0;
    uint16_t kind = 0;
    uint16_t owner_cluster = 0, owner_thread = 0;
    uint64_t child_id = 0;  // the owner's number of the job, echoed in the result
};
static_assert(sizeof(JobHdr) == 16);

struct ResultHdr {
    uint16_t owner_thread = 0;
    uint16_t pad[3] = {0, 0, 0};
    uint64_t child_id = 0;
};
static_assert(sizeof(ResultHdr) == 16);

inline std::string to_string(const JobHdr& h) {
    return h.has_job ? "job kind " + std::to_string(h.kind) + " of " + std::to_string(h.owner_cluster) + "." +
                           std::to_string(h.owner_thread) + " #" + std::to_string(h.child_id)
                     : "no job";
}

}  // namespace iccs::group::wire
