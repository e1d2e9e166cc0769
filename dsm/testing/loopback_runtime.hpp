// loopback_runtime.hpp: test support, not part of the library users link. C simulated clusters
// of T compute threads inside one process, behind the `Runtime` / `RtEndpoint` interfaces of
// compute/runtime.hpp, so the DSM protocol runs across "clusters" in a unit test.
//
// One idea: every endpoint (T compute + 1 service per cluster) is a mailbox; send() appends to the
// destination's mailbox, the owner runs the handlers inside poll()/wait_until()/request()/barrier(),
// and each cluster's service endpoint is drained by its own thread (as the real runtime does), so
// requests to a cluster are answered while its compute threads compute.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime.hpp"

namespace iccs::testing {

class LoopbackWorld {
public:
    // `clusters` simulated clusters of `threads` compute threads each; service threads start now.
    // `max_message`: the largest message (bytes) its endpoints take, like a transport's limit
    // (tests lower it to force the DSM to split diffs and write notices).
    LoopbackWorld(uint16_t clusters, uint16_t threads, uint32_t max_message = 16u << 20);
    ~LoopbackWorld();  // stops the service threads (stop() first if handlers' contexts die earlier)
    LoopbackWorld(const LoopbackWorld&) = delete;
    LoopbackWorld& operator=(const LoopbackWorld&) = delete;

    Runtime& runtime(uint16_t cluster);
    // Join the service threads: no handler runs afterwards. Idempotent.
    void stop();

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace iccs::testing
