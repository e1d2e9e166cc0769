// cluster_telemetry.hpp: a cluster's proxies over DPDK telemetry while it runs (DESIGN.md §6):
// /iccs/proxies, /iccs/proxy/stats,<n> (each proxy's counters), and the WAN stage's
// /iccs/wan/links,<n>, /iccs/wan/set, /iccs/wan/loss and /iccs/wan/mode (proxy/wan_emu.hpp).
// The callbacks run on DPDK's control thread and read the proxies under a lock that
// unserve_proxy_telemetry() takes before the proxies go away.
#pragma once

#include <memory>
#include <vector>

#include "proxy.hpp"

namespace iccs {

// Serve these proxies (the EAL is up) until unserve_proxy_telemetry().
void serve_proxy_telemetry(std::vector<std::unique_ptr<Proxy>>* proxies);
void unserve_proxy_telemetry();

}  // namespace iccs
