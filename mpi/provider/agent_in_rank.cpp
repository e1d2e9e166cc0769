// agent_in_rank.cpp: the entry of libiccs-mpi-inrank.so, a cluster's agent in the process of its
// only rank (mpi/provider/README.md, "Why an agent process"): a cluster of one rank under
// `[cluster] polling = "inline"` owns its EAL and proxies in that rank's process, and the rank's
// own thread steps its bridge (and so runs the proxies) from its provider calls. The provider loads
// this module only then (prov_in_rank.cpp), so a rank process links no DPDK otherwise.
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <memory>

#include <rte_lcore.h>

#include "agent.hpp"
#include "dpdk_env.hpp"
#include "owner_only.hpp"

namespace {

struct InRankAgent {
    iccs::mpi::MpiMachine machine;  // the agent refers to it: it lives as long
    std::unique_ptr<iccs::mpi::Agent> agent;
    // The rank's thread runs the proxies' iterations from its provider calls: the first thread
    // that steps once the bridge is up registers with the EAL (an lcore id, so a cache of its own in every mempool), as
    // the runtime's inline compute threads do (compute/cluster.cpp). Unregistered, each buffer it
    // took or gave back was a compare-and-swap on the pool's ring. One thread only: the receive
    // pools count one cache per compute thread (compute/cluster_memory.cpp), and the stand-in
    // (bridge.cpp) parks none between its steps.
    std::atomic<bool> eal_thread_claimed{false};
    std::unique_ptr<iccs::EalThreadScope> eal_thread;
    pthread_t eal_thread_id{};
};

void say(char* err, size_t cap, const std::string& what) {
    if (cap != 0) std::snprintf(err, cap, "%s", what.c_str());
}

}  // namespace

extern "C" {

// Bring up rank m's cluster in this process: region, EAL, proxies, the bridge's connections (those
// complete behind, as in the agent). Returns the handle and the region's descriptor, or nullptr
// with the reason in err.
void* iccs_mpi_in_rank_start(const iccs::mpi::MpiMachine* m, int* region_fd, char* err, size_t err_cap) {
    auto h = std::make_unique<InRankAgent>();
    h->machine = *m;
    std::string e;
    if (!iccs::make_private_dir(h->machine.run_dir, e)) {
        say(err, err_cap, e);
        return nullptr;
    }
    const uint32_t domain = h->machine.domain_of(h->machine.rank);
    h->agent = std::make_unique<iccs::mpi::Agent>(h->machine, domain);
    if (!h->agent->start_in_rank(static_cast<uint32_t>(getpid()), e)) {
        h->agent->abandon();
        say(err, err_cap,
            "cluster " + std::to_string(domain) + " in rank " + std::to_string(h->machine.rank) + "'s process: " + e);
        return nullptr;
    }
    *region_fd = h->agent->region_fd();
    return h.release();
}

// What rank m's cluster leaves in files while it runs, for the provider's reaper (prov_in_rank.cpp):
// its EAL's runtime directory and the run directory, one a line. 0 when they do not fit.
int iccs_mpi_in_rank_files(const iccs::mpi::MpiMachine* m, char* out, size_t cap) {
    iccs::ClusterPlan plan;
    plan.run_id = m->run_id;
    const auto cluster = static_cast<uint16_t>(m->domain_of(m->rank));
    const std::string files = iccs::eal_runtime_dir(iccs::eal_prefix(plan, cluster)) + "\n" + m->run_dir;
    if (files.size() + 1 > cap) return 0;
    std::snprintf(out, cap, "%s", files.c_str());
    return 1;
}

// One step of the bridge on the calling (the rank's) thread: the records it moved.
uint32_t iccs_mpi_in_rank_step(void* handle) {
    auto* h = static_cast<InRankAgent*>(handle);
    // Not before the bridge is up: the cluster comes up behind the rank's first calls, and a
    // registration before the EAL's init completes fails (rte_thread_register: EINVAL). Claimed at
    // the first step, as before 2 Dec 2026, it failed in every run: the rank never had an lcore.
    if (!h->eal_thread_claimed.load(std::memory_order_relaxed) && h->agent->in_rank_up() &&
        !h->eal_thread_claimed.exchange(true)) {
        h->eal_thread = std::make_unique<iccs::EalThreadScope>();
        h->eal_thread_id = pthread_self();
        if (h->eal_thread->registered()) h->agent->set_rank_lcore(static_cast<int>(rte_lcore_id()));
    }
    return h->agent->step_in_rank();
}

// The rank's record to rank dst onto its connection from the rank's thread, no ring (RankEngine's
// DirectOut): its len bytes (header first) as `pieces` pieces of memory (its header, the user's
// buffer), copied straight into the packet buffers it leaves in. of_several: one record of a
// message of several. 1 it went, 0 the rank's ring to the bridge must carry it, -1 not now (the
// connection's window is full or no buffer is free: the rank tries again after progress).
int iccs_mpi_in_rank_send(void* handle, uint32_t dst, const iovec* rec, uint32_t pieces, uint32_t len, int of_several) {
    return static_cast<InRankAgent*>(handle)->agent->send_in_rank(dst, {rec, pieces}, len, of_several != 0);
}

// The rank's engine: the rank's own steps hand it records from other clusters without the ring,
// as the pieces of memory they arrived in (RankEngine::take_direct through deliver: 1 taken, 0
// through the ring). Called by the rank's thread before its steps.
void iccs_mpi_in_rank_deliver_pieces_to(void* handle, void* engine,
                                        int (*deliver)(void*, const iovec*, uint32_t, uint32_t)) {
    static_cast<InRankAgent*>(handle)->agent->deliver_in_rank(engine, deliver);
}

// The rank closed its last domain (finished) or its process is going: flush, end the cluster,
// report, remove the run's files of this cluster. The exit status the agent would have had.
int iccs_mpi_in_rank_end(void* handle, int finished) {
    std::unique_ptr<InRankAgent> h(static_cast<InRankAgent*>(handle));
    const int rc = h->agent->end_in_rank(finished != 0);
    // Its caches go back and its lcore id is let go on the thread that holds them; ended from
    // another thread, they stay parked (the cluster has ended: nobody draws on them).
    if (h->eal_thread && !pthread_equal(h->eal_thread_id, pthread_self())) (void)h->eal_thread.release();
    h->eal_thread.reset();
    return rc;
}

}  // extern "C"
