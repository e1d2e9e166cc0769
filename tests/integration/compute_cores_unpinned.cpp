// compute_cores_unpinned.cpp: a cluster whose plan pins no compute thread (compute_cores empty, as
// the MPI agent's bridges) runs its compute threads on every core the process may use, not on the
// core of the EAL's main lcore, which every thread started after the EAL inherited: the agents'
// bridges shared core 0 with the proxy pinned there, and that proxy went unrun for the 5 s peer
// time-out (CI's fi-conformance-memif, 5 of 12 runs at load 2-4; 0 of 27 with the fix).
// Exit 77 (skip) on a host that gives this process one core: nothing to tell apart there.
#include <sched.h>

#include <cstdio>

#include "cluster.hpp"

using namespace iccs;

namespace {
cpu_set_t g_start_cores;  // the process's set before any cluster starts (the clusters are forked)

bool threads_keep_cores(ComputeEnv& env) {
    cpu_set_t mine;
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) return std::printf("sched_getaffinity failed\n"), false;
    if (CPU_EQUAL(&mine, &g_start_cores)) return true;
    std::printf("FAIL: cluster %u thread %u may run on %d core(s), the process started with %d\n",
                unsigned{env.plan.cluster_id}, unsigned{env.thread}, CPU_COUNT(&mine), CPU_COUNT(&g_start_cores));
    return false;
}
}  // namespace

int main() {
    if (sched_getaffinity(0, sizeof g_start_cores, &g_start_cores) != 0) return 1;
    if (CPU_COUNT(&g_start_cores) < 2) {
        std::printf("SKIP: this process may use one core only\n");
        return 77;
    }
    ClusterPlan plan;  // 2 clusters x 2 threads, one proxy each, memif, adaptive polling
    plan.proxies_per_cluster = {1, 1};
    plan.proxy_cores = {0};
    plan.program = threads_keep_cores;
    plan.quiet = true;
    const int rc = launch_clusters(plan, 60);
    std::printf("%s\n", rc == 0 ? "PASS: every compute thread may run on every core the process had" : "FAIL");
    return rc;
}
