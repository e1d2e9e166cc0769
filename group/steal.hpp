// steal.hpp: divide-and-conquer with work stealing on the cluster runtime (Satin, Albatross):
// spawn/sync jobs, a work deque per compute thread, and three stealing policies chosen per run.
//
// A job is a registered function (its kind) and its argument bytes; it may spawn children and
// sync on them, and leaves result bytes. Its thread pushes each spawned child on the bottom of its
// deque; sync runs its own children from the bottom (last spawned first), and when the bottom holds
// no child of the syncing job (they were stolen) the thread steals elsewhere until they are back.
// Thieves take from the top (the oldest, largest jobs). A job stolen by a thread of the same
// cluster process is taken through shared memory; from another cluster through a steal request
// answered by the victim cluster's service endpoint (so a busy victim need not poll). A stolen
// job's result goes back to its owner (shared memory, or a message to the owner cluster's service
// endpoint), which wakes the owner.
//
// Policies (an idle thread: no job of its own to run):
//   RS   random stealing: a synchronous steal from a thread chosen at random among all threads of
//        the run, again until it gets work; with C equal sites (C-1)/C of the attempts cross the WAN.
//   CHS  cluster-hierarchical stealing: the threads of a cluster steal from each other; when the
//        whole cluster is idle (every thread idle, every deque empty), its thread 0 steals from the
//        clusters next to it in a binary tree over the clusters (children first, then the parent),
//        synchronously, one at a time. Idle clusters wait a WAN round trip for work.
//   CRS  cluster-aware random stealing: an idle thread keeps at most one asynchronous steal request
//        to a random thread of another site outstanding, and meanwhile steals synchronously from
//        random threads of its own site. A job that comes back is run next.
// "Local" means the same site ([wan] sites), "WAN" another site.
//
// Termination: thread 0 of cluster 0 runs the root job; every job syncs its children before it
// returns (an implicit sync), so when the root returns no job exists anywhere; only then does
// cluster 0 tell every cluster's service endpoint that the run is over, and only then does a thread
// leave its stealing loop (after its outstanding asynchronous request was answered). A failure
// (a bad message, a peer down, a time-out) is sent to every other cluster as an abort, so every
// thread of the run returns false instead of waiting for a result that will not come.
//
// Runtime handler ids: handler_base .. handler_base + 4 (default 120..124: between the DSM's
// 100-115 and group/'s 130-191).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "group.hpp"
#include "runtime.hpp"

namespace iccs::group {

enum class StealPolicy : uint8_t { kRs, kChs, kCrs };
const char* to_string(StealPolicy p);                    // "rs", "chs", "crs"
bool parse_steal_policy(std::string_view s, StealPolicy& out);

// Per thread; add() sums them over threads and clusters (max_outstanding_wan: the maximum).
struct StealCounters {
    uint64_t jobs_spawned = 0, jobs_run = 0;
    uint64_t local_attempts = 0, local_successes = 0;  // steals inside the site (own cluster included)
    uint64_t wan_attempts = 0, wan_successes = 0;      // steals from another site
    uint64_t idle_ns = 0;                              // time without a job to run (stealing, waiting)
    uint64_t max_outstanding_wan = 0;                  // most WAN steal requests outstanding at once
    uint64_t wan_steals_cluster_busy = 0;              // CHS trace: WAN steals sent while the cluster had work
    uint64_t wan_steals_traced = 0;                    // CHS trace: WAN steals whose cluster state was recorded
    uint64_t result_msgs = 0, result_bytes = 0;        // results sent back to another cluster
    uint64_t stolen_job_bytes = 0;                     // argument bytes of jobs that came from another cluster
    uint64_t failed_threads = 0;                       // gather_steal_counters: threads whose run failed
    static constexpr size_t kWords = 14;
    void add(const StealCounters& o);
    void to_words(uint64_t* w) const;
    void from_words(const uint64_t* w);
};

struct StealOptions {
    StealPolicy policy = StealPolicy::kCrs;
    uint16_t handler_base = 120;
    uint64_t timeout_ms = 600'000;  // a steal request unanswered this long, or a run this long, fails
    uint64_t seed = 1;
};

class Worker;
// A job: read `args`, spawn/sync through `w`, write the result into `result` (empty on entry).
using JobFn = void (*)(Worker& w, std::span<const uint8_t> args, std::vector<uint8_t>& result);

class Stealer;

// The per-thread face of the layer, handed to every job. Only its own thread uses it.
class Worker {
public:
    using Handle = uint32_t;
    // A child job of the running job; its arguments are `a` then `b` (copied now).
    Handle spawn(uint16_t kind, std::span<const uint8_t> a, std::span<const uint8_t> b = {});
    // Wait until every child spawned so far by the running job has finished (running or stealing
    // meanwhile). False when the run failed (Stealer::error says why).
    bool sync();
    // A finished child's result (valid until the running job returns).
    const std::vector<uint8_t>& result(Handle h) const;
    uint16_t cluster() const;
    uint16_t thread() const { return t_; }

private:
    friend class Stealer;
    Worker(Stealer& s, uint16_t t) : s_(s), t_(t) {}
    Stealer& s_;
    uint16_t t_;
};

class Stealer {
public:
    // One per cluster process, built by every cluster with the same kinds before the threads run
    // (registers the handlers; the first barrier of run() makes them safe to use).
    Stealer(Runtime& rt, const Topology& topo, const StealOptions& o, std::vector<JobFn> kinds);
    ~Stealer();
    Stealer(const Stealer&) = delete;
    Stealer& operator=(const Stealer&) = delete;

    // Every compute thread t of every cluster calls it once. Thread 0 of cluster 0 runs job
    // (root_kind, root_args) and gets its result in *root_result and the time from the start
    // barrier to the end of the root job in *elapsed_ns; the others steal until it has finished.
    // False (every thread, at its time-out at the latest) with error() when the run failed.
    bool run(uint16_t t, uint16_t root_kind, std::span<const uint8_t> root_args, std::vector<uint8_t>* root_result,
             uint64_t* elapsed_ns);

    const StealCounters& counters(uint16_t t) const;
    StealCounters cluster_counters() const;  // this cluster's threads summed
    std::string error() const;
    const Topology& topology() const { return topo_; }
    StealPolicy policy() const { return o_.policy; }
    uint64_t timeout_ms() const { return o_.timeout_ms; }

    struct Impl;

private:
    friend class Worker;
    Topology topo_;
    StealOptions o_;
    std::unique_ptr<Impl> impl_;
};

// Every thread calls it after run(), also when run() failed: the counters of every cluster summed
// (a barrier_gather, within the run's time-out); failed_threads > 0 when any thread's run failed.
bool gather_steal_counters(RtEndpoint& ep, const Stealer& s, StealCounters& sum, std::string& err);

}  // namespace iccs::group
