// ordered.hpp: totally ordered broadcast among every compute thread of a run, and Orca-style
// replicated objects on it (issue 18).
//
// A message goes from its sender to a sequencer, which gives it the next sequence number and
// sends it once to each site's coordinator (the first cluster of the site), which passes it to
// the other clusters of its site; every cluster keeps one log in sequence order, and every thread
// of the cluster reads the same log, so every thread of the run delivers the same sequence (and
// each sender's messages in the order it sent them). Three sequencer policies:
//
//   central    one sequencer (cluster 0's service endpoint) for the run: every message from
//              another site crosses the WAN twice (to the sequencer and back), the bottleneck.
//   rotating   one sequencer per site (Orca on wide-area: Bal et al.), taking turns: the right to
//              number messages is a token handed around the sites in ring order; a site with
//              messages asks every other site for it (one request each) and numbers its waiting
//              messages when the token comes.
//   migrating  the same token, but handed straight to the site that asked (the sequencer moves to
//              the sending site: Bal et al.'s ASP, whose senders come in phases); a site that
//              keeps sending keeps the token and numbers with no WAN round trip at all.
//
// The sequencers run in the runtime's service endpoints (handlers, so they answer while compute
// threads compute). Handler ids: handler_base .. handler_base + 3.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "group.hpp"

namespace iccs::group {

enum class Sequencer : uint8_t { kCentral, kRotating, kMigrating };
const char* to_string(Sequencer s);
bool parse_sequencer(const std::string& s, Sequencer& out);  // central | rotating | migrating

struct OrderedMsg {
    uint64_t seq = 0;
    RtAddr from;
    std::span<const uint8_t> data;
};

struct OrderedCounters {
    uint64_t sent = 0, delivered_to_cluster = 0;
    uint64_t wan_msgs = 0, wan_bytes = 0;      // sent from this cluster to another site
    uint64_t token_passes = 0, requests = 0;   // rotating / migrating
    uint64_t sequenced_here = 0;               // numbers given by this cluster's sequencer
    // Per destination site index (topology's): the WAN messages and bytes this cluster sent there,
    // and of those the sequenced messages (a broadcast's fan-out to that site's coordinator); the
    // rest are messages to a sequencer, requests and token passes.
    struct ToSite {
        uint64_t msgs = 0, bytes = 0, sequenced_msgs = 0, sequenced_bytes = 0;
    };
    std::vector<ToSite> to_site;
};

class OrderedBcast {
public:
    // One per cluster process, made before the run's first barrier (it registers handlers).
    // `apply` (optional) is called for every message in sequence order on the service thread,
    // before the message is in the log (replicated objects apply their writes there).
    OrderedBcast(Runtime& rt, const Topology& topo, Sequencer policy, uint16_t handler_base = 170,
                 std::function<void(const OrderedMsg&)> apply = nullptr);
    ~OrderedBcast();
    OrderedBcast(const OrderedBcast&) = delete;
    OrderedBcast& operator=(const OrderedBcast&) = delete;

    // Thread t broadcasts n bytes (at most runtime max_message() - 64). Returns once handed over.
    bool send(uint16_t t, const void* p, size_t n);
    // Thread t's next message in the total order (its bytes into `out`); false on time-out.
    bool deliver(uint16_t t, std::vector<uint8_t>& out, RtAddr* from = nullptr, uint64_t* seq = nullptr,
                 uint64_t timeout_us = 60'000'000);
    // Wait until this cluster has delivered (to its log / apply) at least `count` messages.
    bool wait_delivered(uint16_t t, uint64_t count, uint64_t timeout_us = 60'000'000);
    // Messages this thread sent that this cluster has applied (for a writer's read-your-writes).
    uint64_t applied_from(uint16_t t) const;
    // Wait (running thread t's handlers) until applied_from(t) >= want.
    bool wait_applied(uint16_t t, uint64_t want, uint64_t timeout_us = 60'000'000);
    Sequencer policy() const;
    OrderedCounters counters() const;
    std::string last_error() const;  // the first error of any thread

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

// An Orca-style replicated object: every cluster holds a replica of State; reads are local (a
// shared lock); a write is shipped as (operation, arguments) through the ordered broadcast and
// applied by every replica in the same order; write() returns once this cluster applied it.
template <class State>
class Replicated {
public:
    using WriteFn = void (*)(State& s, std::span<const uint8_t> args);
    Replicated(Runtime& rt, const Topology& topo, Sequencer policy, State init, std::vector<WriteFn> ops,
               uint16_t handler_base = 174)
        : state_(std::move(init)), ops_(std::move(ops)),
          ob_(rt, topo, policy, handler_base, [this](const OrderedMsg& m) { apply(m); }) {}

    template <class F>
    auto read(F&& f) const {
        std::shared_lock<std::shared_mutex> lk(mu_);
        return f(static_cast<const State&>(state_));
    }
    bool write(uint16_t thread, uint16_t op, std::span<const uint8_t> args) {
        std::vector<uint8_t> m(2 + args.size());
        m[0] = static_cast<uint8_t>(op);
        m[1] = static_cast<uint8_t>(op >> 8);
        if (!args.empty()) std::memcpy(m.data() + 2, args.data(), args.size());
        const uint64_t want = ob_.applied_from(thread) + 1;
        if (!ob_.send(thread, m.data(), m.size())) return false;
        return ob_.wait_applied(thread, want);
    }
    OrderedBcast& bcast() { return ob_; }

private:
    void apply(const OrderedMsg& m) {
        if (m.data.size() < 2) return;
        const uint16_t op = static_cast<uint16_t>(m.data[0] | (m.data[1] << 8));
        if (op >= ops_.size()) return;
        std::unique_lock<std::shared_mutex> lk(mu_);
        ops_[op](state_, m.data.subspan(2));
    }
    mutable std::shared_mutex mu_;
    State state_;
    std::vector<WriteFn> ops_;
    OrderedBcast ob_;
};

}  // namespace iccs::group
