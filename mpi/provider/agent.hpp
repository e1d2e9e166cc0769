// agent.hpp: iccs-mpi-agent, the process that serves one domain of an MPI run
// (mpi/provider/README.md, "The agent and its bridges"): it makes the domain's shared region,
// hands it to each rank that says hello, watches every rank's connection (a hang-up without
// goodbye is a dead rank), and under the `iccs` transport runs the cluster: its proxies on the
// fabric, and one bridge thread per rank (a compute thread with its own convergence module) that
// carries the rank's records to and from the ranks of other clusters.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "cluster.hpp"
#include "mpi_machine.hpp"
#include "shm_region.hpp"

namespace iccs::mpi {

// The first port of the bridges: the bridge of member t listens on kBridgePortBase + t.
inline constexpr uint16_t kBridgePortBase = 4000;

// Per-bridge counters (the bridge thread writes them, the report reads them after it ended).
struct BridgeCounters {
    uint64_t records_out = 0, bytes_out = 0;  // records carried from the rank to other clusters
    uint64_t records_in = 0, bytes_in = 0;    // ... from other clusters to the rank
    uint64_t window_waits = 0;                // a record waited for its connection's window
    uint64_t ring_full = 0;                   // an arrival waited for room in the rank's ring
    uint64_t dropped = 0;                     // records for dead ranks (dropped)
    uint64_t direct_out = 0, direct_in = 0;   // in-rank: records that skipped the rank's rings
    uint64_t direct_out_zero_copy = 0;        // ... of direct_out: in one packet buffer (convergence's zero-copy send)
    uint64_t direct_out_multi = 0;            // ... of direct_out: records of messages of several records
    uint64_t direct_in_chained = 0;           // ... of direct_in: in more than one packet segment
};

// A cluster of one rank under inline polling runs in the rank's process (mpi/provider/README.md,
// "Why an agent process"): its bridge is stepped by the rank's own thread from its provider calls
// (bridge_step_in_rank), and its compute thread only stands in while the rank computes.
struct InRankBridge {
    static constexpr uint32_t kStandInMs = 20;  // the rank did not step for this long: step for it
    std::atomic<uint32_t> up{0};              // 0 coming up, 1 stepped by the rank, 2 failed, 3 ended
    // Steps so far (the rank's and the stand-in's): the stand-in looks whether it moved since its
    // last look, kStandInMs ago. A count, not a time: a clock read a step was a sixth of the
    // rank's wait loop (perf, osu_latency 2 x 1 in-rank).
    std::atomic<uint64_t> steps{0};
    std::mutex mu;                            // up's changes, the stand-in's sleep
    std::condition_variable state_changed;
    std::mutex step_mu;                       // one step at a time (the rank's or the stand-in's)
    std::function<bool(uint32_t&)> step;      // the rank's step; set before up = 1
    // A record of the rank's straight onto its connection (RankEngine's DirectOut): its bytes
    // (header first) in pieces, len in all; of_several: one of a message of several records.
    // 1 it went, 0 the ring must carry it, -1 not now (window or buffers). Set before up = 1.
    std::function<int(uint32_t dst, std::span<const iovec> rec, uint32_t len, bool of_several)> send;
    // The rank's engine, for records from other clusters that its own steps hand over without
    // the ring (RankEngine::take_direct; the stand-in never does: it is another thread), as the
    // pieces of memory they arrived in. Set by the rank's thread before its steps use it
    // (nullptr: through the ring).
    void* engine = nullptr;
    int (*deliver)(void* engine, const iovec* rec, uint32_t pieces, uint32_t len) = nullptr;
};

// What the agent and its bridge threads share.
struct BridgeShared {
    const MpiMachine* machine = nullptr;
    Region* region = nullptr;
    uint32_t cluster = 0;
    std::atomic<bool> stop{false};     // every rank of the cluster is gone: flush and end
    std::atomic<uint32_t> ready{0};    // bridges whose connections are all open
    std::atomic<bool> failed{false};
    std::mutex mu;
    std::string error;                 // the first bridge's failure
    std::vector<BridgeCounters> counters;  // by member
    InRankBridge in_rank;              // the agent runs in its only rank's process
    void fail(const std::string& e);
};

// The compute-thread program of member env.thread (run_cluster starts one per rank).
bool bridge_program(ComputeEnv& env, BridgeShared& sh);
// The same for an agent in its rank's process (InRankBridge): set up, then stand in until the stop.
bool bridge_program_in_rank(ComputeEnv& env, BridgeShared& sh);
// One step of that bridge on the rank's thread; the records moved (0 before it is up).
uint32_t bridge_step_in_rank(BridgeShared& sh);
// A record of the rank onto its connection from the rank's thread (InRankBridge::send): 1 it
// went, 0 the ring must carry it, -1 not now.
int bridge_send_in_rank(BridgeShared& sh, uint32_t dst, std::span<const iovec> rec, uint32_t len, bool of_several);

class Agent {
   public:
    Agent(const MpiMachine& m, uint32_t domain) : m_(m), domain_(domain) {}
    ~Agent();
    // Region, cluster (iccs: proxies and bridges up, connections open), listening socket. False
    // with err (one line).
    bool start(std::string& err);
    // In the process of the domain's only rank (a cluster of one rank under inline polling: the
    // rank's thread steps its bridge): region and cluster, no socket; the rank is attached at
    // once (pid). The rank maps the region from region_fd().
    bool start_in_rank(uint32_t pid, std::string& err);
    int region_fd() const { return region_.fd(); }
    // One step of the bridge, and the agent's watch of its failure (serve()'s, said once).
    uint32_t step_in_rank();
    // The bridge is up and stepped by the rank (its cluster's EAL has finished its init).
    bool in_rank_up() const { return shared_.in_rank.up.load(std::memory_order_acquire) == 1; }
    // The lcore id the rank's thread registered as (its own mempool caches), for the report.
    void set_rank_lcore(int lcore) { rank_lcore_ = lcore; }
    // The rank's record onto its connection, no ring (bridge_send_in_rank).
    int send_in_rank(uint32_t dst, std::span<const iovec> rec, uint32_t len, bool of_several) {
        return bridge_send_in_rank(shared_, dst, rec, len, of_several);
    }
    // The rank's engine takes records from other clusters straight from the bridge's steps.
    void deliver_in_rank(void* engine, int (*deliver)(void*, const iovec*, uint32_t, uint32_t)) {
        shared_.in_rank.engine = engine;
        shared_.in_rank.deliver = deliver;
    }
    // The rank closed its domain (finished): as serve() ends. Exit status.
    int end_in_rank(bool finished);
    // Serve the ranks until each of them finished or died (or none came within the attach
    // time), and a second more (a process that closed its last domain may open one again: it
    // attaches anew, its slot and rings as it left them); then stop the bridges, end the cluster,
    // remove the run's files of this domain. Returns the exit status.
    int serve();
    // start() failed: remove what this domain made in the run directory.
    void abandon() { cleanup(); }

   private:
    struct Member {
        int sock = -1;
        bool ever = false;
    };
    void on_hello(int sock);
    void on_member_event(uint32_t member);
    void mark_dead(uint32_t member);
    void report(bool ok, bool with_proxies);
    bool may_leave_cluster() const;
    void cleanup();
    bool orphan_bell(const std::string& name) const;
    bool start_region(std::string& err);
    bool start_cluster(std::string& err);
    void say_bridge_failure();
    int finish();
    bool in_rank_ = false;
    int rank_lcore_ = -1;  // in-rank: the rank's thread's lcore id (-1: none)
    const MpiMachine& m_;
    uint32_t domain_;
    Region region_;
    int listen_ = -1;
    std::vector<Member> members_;
    std::vector<int> pending_;  // connections that have not said hello yet
    BridgeShared shared_;
    ClusterPlan plan_;
    std::thread cluster_;
    ClusterReport cluster_report_;
    std::atomic<bool> cluster_ended_{false};
};

// A process-wide stop (SIGTERM, SIGINT): serve() ends as if every rank were gone.
extern std::atomic<bool> g_agent_stop;

}  // namespace iccs::mpi
