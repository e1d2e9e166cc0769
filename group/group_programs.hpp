// group_programs.hpp: the built-in runtime programs of group/ (`iccs run collectives`), started
// in every cluster process by the runtime's launcher (compute/runtime_launch.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "group.hpp"
#include "ordered.hpp"

namespace iccs::group {

struct CollectivesRunOptions {
    std::vector<Family> families{Family::kHier, Family::kFlat};
    std::vector<uint32_t> elements{0, 1, 1000, 20000};  // int64 elements per rank and collective
    uint32_t rounds = 1;
    uint32_t segment_bytes = 64u << 10;
    uint64_t timeout_ms = 120'000;
    // Bad use on purpose (for the tests), instead of the checks: "root" (the last rank broadcasts
    // from another root), "size" (the last rank's allreduce is one element longer), "missing" (the
    // last rank skips the allreduce). Every thread's error is printed; the run fails.
    std::string bad;
    bool inject_error = false;  // test hook: rank 0 adds 1 to one element of its input to an allreduce
};
// Every collective of every family against its sequential reference on every compute thread,
// each thread printing a digest of its results per collective ("results C.T FAMILY: bcast CRC
// ..."; group/testing/coll_check.hpp); then the counters of every cluster summed (cluster 0
// prints them) and, for the hierarchical family, MagPIe's rule checked from them. Returns
// runtime_finish's status.
int program_collectives(std::unique_ptr<Runtime> rt, const Topology& topo, const CollectivesRunOptions& o);

struct OrderedRunOptions {
    std::vector<Sequencer> policies{Sequencer::kCentral, Sequencer::kRotating, Sequencer::kMigrating};
    uint32_t messages = 100;       // per thread, all threads sending at once (throughput, order check)
    uint32_t size = 64;            // bytes per message
    uint32_t latency_rounds = 60;  // one message at a time, the sender changing every `phase` rounds
    uint32_t phase = 10;
    uint32_t writes = 20;          // replicated object: writes per thread
    std::string result_file;       // cluster 0: "ordered POLICY LATENCY_MEDIAN_US LATENCY_MEAN_US MSGS_PER_S" per policy
    bool inject_error = false;     // test hook: rank 0 sends its messages 0 and 1 in the wrong order
};
// Per policy: every thread sends `messages` at once and delivers everyone's; every thread's
// sequence must be the same (hashes compared across clusters) with each sender's messages in
// order; then the latency of one message at a time from phased senders; then a replicated object
// written by every thread must end identical on every cluster. Every thread prints its sequence's
// hash and its replica ("sequence C.T POLICY: ...", "replica C.T POLICY: ..."), and thread 0.0
// the senders in delivery order of both (one character per message: the sender's rank in base
// 62), so that a test recomputes the hashes and replays the writes itself. Returns
// runtime_finish's status.
int program_ordered(std::unique_ptr<Runtime> rt, const Topology& topo, const OrderedRunOptions& o);

// Runs body(t, failed) on one thread per compute thread (0..threads-1) and joins them; failed(why)
// keeps the first failure, which is returned ("" when none).
using FailFn = std::function<void(const std::string&)>;
std::string on_every_thread(uint16_t threads, const std::function<void(uint16_t t, const FailFn& failed)>& body);

// The counters of every cluster summed: every compute thread calls it (it holds a runtime
// barrier_gather); thread 0's World counters are this cluster's part.
bool gather_counters(RtEndpoint& ep, const World& w, Counters& sum, std::string& err);
// The counters as a table (one line per collective that was called, then the WAN links).
std::string format_counters(const Counters& c, const Topology& topo);

}  // namespace iccs::group
