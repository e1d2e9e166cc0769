// runtime.hpp: the cluster runtime's messaging interface (issue 6): active messages between
// compute threads of a run, request/reply, and a barrier across clusters, over one of the three
// transports of the 1997 study's methodology (DESIGN.md §7):
//
//   iccs    through the convergence library and the proxies (the system itself)
//   direct  "no delay": straight from cluster to cluster through shared memory, no proxy, no stack
//   delay   "no contention": like direct, but every message is held a fixed time before delivery
//
// The DSM (dsm/) and the applications are written against this header only, so switching the
// transport never touches them. `Runtime` and `RtEndpoint` are interfaces (virtual calls cost
// nothing next to a message) so the DSM's own tests can drive the protocol in one process with a
// loopback implementation, and the real ones live in runtime.cpp.
//
// Threading: one `Runtime` per cluster process. Every compute thread t owns `endpoint(t)`; an
// endpoint is used by one OS thread at a time, never concurrently. Each cluster also has one
// service endpoint (thread index kRtService), run by a thread of the runtime itself, so that
// requests addressed to a cluster (page fetches, lock requests) are answered while its compute
// threads compute. Handlers run on the thread that owns the receiving endpoint, inside poll(),
// wait_until(), request() or barrier(); they must not block (no request() from a handler), but
// may send, and may keep a ReplyToken to reply later from any endpoint of the same cluster.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace iccs {

enum class RtTransport : uint8_t { kIccs, kDirect, kDelay };

inline constexpr uint16_t kRtService = 0xFFFF;       // thread index of a cluster's service endpoint
inline constexpr uint64_t kRtForever = UINT64_MAX;   // timeout: wait as long as it takes
inline constexpr uint16_t kRtMaxHandlers = 256;      // handler ids are 0 .. 255
inline constexpr uint16_t kRtUserHandlers = 200;     // 0 .. 199 for users (dsm, programs); the
                                                     // runtime keeps 200 .. 255 (replies, barrier)

struct RtAddr {
    uint16_t cluster = 0;
    uint16_t thread = 0;  // 0 .. threads()-1, or kRtService
    friend bool operator==(const RtAddr&, const RtAddr&) = default;
};

// Where a reply goes; copyable, so a handler may keep it and reply later (a queued lock request).
struct ReplyToken {
    RtAddr to;
    uint32_t req_id = 0;
};

// An incoming active message. `data` is valid only during the handler call.
struct AmMsg {
    RtAddr src;
    uint16_t handler = 0;
    uint32_t req_id = 0;  // non-zero: a request; answer with reply(token())
    std::span<const uint8_t> data;
    ReplyToken token() const { return ReplyToken{src, req_id}; }
};

enum class RtStatus : uint8_t {
    kOk,
    kTimeout,    // the wait ended before the condition held
    kTooBig,     // larger than max_message()
    kBadAddr,    // no such cluster, thread or handler
    kPeerDown,   // the destination cluster is down (iccs: its proxies stopped answering)
    kError,      // anything else; last_error() says what
};
const char* to_string(RtStatus s);

class RtEndpoint;
// A handler; `ctx` is the pointer given to set_handler.
using AmHandler = void (*)(RtEndpoint& self, const AmMsg& msg, void* ctx);

// A message's bytes in up to two parts (a header and a body, e.g. a page), sent without joining.
struct RtBytes {
    const void* data = nullptr;
    uint32_t len = 0;
};

struct RtEndpointCounters {
    uint64_t msgs_sent = 0, bytes_sent = 0;
    uint64_t msgs_received = 0, bytes_received = 0;
    uint64_t requests = 0, replies = 0;
    uint64_t barrier_waits = 0, barrier_wait_ns = 0;
    uint64_t handler_ns = 0;  // time spent in handlers
    // Where waiting goes (issue 21: direct slower than iccs?): sleeps of wait_until (after its
    // 20 us spin) and their time; sends that found their ring full (direct) and the time waited.
    uint64_t sleeps = 0, sleep_ns = 0;
    uint64_t send_full_waits = 0, send_full_ns = 0;
    // A compute thread serving its cluster's service endpoint (serve_service, direct and delay):
    // the service endpoint's messages this thread ran; awaited sends (send_awaited, request) whose
    // doorbell was left unrung because the destination cluster's compute thread said it serves,
    // and of those the ones this endpoint rang itself once they sat unserved for the bound;
    // bells_rung: sends that found the destination's thread asleep and woke it (a futex wake) at
    // once. A send that finds the thread awake counts in neither (nothing to ring).
    uint64_t service_msgs_served = 0;
    uint64_t bells_skipped = 0, bells_rung_late = 0, bells_rung = 0;
};

class RtEndpoint {
public:
    virtual ~RtEndpoint() = default;
    virtual RtAddr self() const = 0;

    // Send `a` followed by `b` as one message to handler `handler` at `dst`. Returns once the
    // transport took the bytes (the caller may reuse them); messages from one endpoint to one
    // destination endpoint run their handlers in the order sent.
    virtual RtStatus send(RtAddr dst, uint16_t handler, RtBytes a, RtBytes b = {}) = 0;
    // Send a request and wait for its reply (its bytes into `reply`), running this endpoint's
    // handlers meanwhile.
    virtual RtStatus request(RtAddr dst, uint16_t handler, RtBytes a, RtBytes b,
                             std::vector<uint8_t>& reply, uint64_t timeout_us = kRtForever) = 0;
    // Answer a request. Any endpoint of the cluster that received the request may reply.
    virtual RtStatus reply(const ReplyToken& to, RtBytes a, RtBytes b = {}) = 0;
    // As send(), for a one-way message after which this endpoint waits (wait_until, request) for
    // what the message causes (a lock request and its grant). Sent to a service endpoint whose
    // cluster's compute thread serves it (serve_service), the transport may leave the destination's
    // doorbell unrung (no wake-up of its service thread); this endpoint's waits then ring it
    // themselves if the message is still unserved a bound later (direct, delay: tens of us). So
    // the sender must wait next; a message followed by other work is sent with send(). request()
    // sends its request this way.
    virtual RtStatus send_awaited(RtAddr dst, uint16_t handler, RtBytes a, RtBytes b = {}) {
        return send(dst, handler, a, b);
    }
    // On a compute thread that holds none of the locks its cluster's handlers take: run the
    // messages waiting at this cluster's service endpoint here, unless another thread (the service
    // thread) is running them now (then nothing: an endpoint is used by one thread at a time), and
    // tell senders this cluster's service endpoint is served for a short while (send_awaited).
    // Returns how many ran. Never blocks; never from a handler or a signal handler. Direct and
    // delay only (0 elsewhere: iccs, the DSM's loopback tests).
    virtual int serve_service() { return 0; }

    // Run the handlers of messages that arrived; returns how many ran. Never blocks.
    virtual int poll() = 0;
    // Poll until done() is true (checked after every poll), spinning a short while and then
    // sleeping until a message arrives or notify() is called. kTimeout after timeout_us.
    virtual RtStatus wait_until(const std::function<bool()>& done, uint64_t timeout_us = kRtForever) = 0;
    // Wake this endpoint's thread from wait_until (from any thread), e.g. after changing state
    // that its done() reads.
    virtual void notify() = 0;

    // Barrier of every compute thread of every cluster (threads of a cluster first, then one
    // message exchange between the clusters). Not for the service endpoint.
    virtual RtStatus barrier(uint64_t timeout_us = kRtForever) = 0;
    // The same barrier, also gathering bytes: each thread contributes `mine`; on return every
    // thread has, per cluster id, the concatenation of that cluster's threads' contributions in
    // thread order.
    virtual RtStatus barrier_gather(std::span<const uint8_t> mine,
                                    std::vector<std::vector<uint8_t>>& by_cluster,
                                    uint64_t timeout_us = kRtForever) = 0;

    virtual const RtEndpointCounters& counters() const = 0;
    // Why the last call that did not return kOk failed (one line, for the user).
    virtual const std::string& last_error() const = 0;
    // Whether cluster c is known to be gone (iccs: its proxies stopped answering; direct/delay: its
    // process is gone, a syscall: look now and then). For a wait on a message that only c sends,
    // which request() and barrier() already watch this way.
    virtual bool cluster_down(uint16_t c) = 0;
};

class Runtime {
public:
    virtual ~Runtime() = default;
    virtual uint16_t cluster() const = 0;   // this process's cluster id
    virtual uint16_t clusters() const = 0;  // clusters of the run
    virtual uint16_t threads() const = 0;   // compute threads per cluster
    virtual RtTransport transport() const = 0;
    // The largest message send() and reply() take (at least 1 MiB on every transport).
    virtual uint32_t max_message() const = 0;

    // Handlers are per cluster (every endpoint of the cluster, the service endpoint included,
    // dispatches through one table). Register them before any thread of any cluster sends to
    // them: every cluster registers the same ids, then all meet in a barrier.
    virtual void set_handler(uint16_t id, AmHandler h, void* ctx) = 0;

    // Compute thread t's endpoint (0 <= t < threads()).
    virtual RtEndpoint& endpoint(uint16_t t) = 0;

    // Counters of a layer above the runtime (the DSM's), served while the program runs as the
    // proxies' are: over `iccs`, DPDK telemetry command /iccs/<name> answers a dict of the pairs
    // `read` returns (called on the telemetry control thread: read without tearing, e.g. relaxed
    // atomics; `read` must stay callable until the process ends). False where the transport has
    // no telemetry (direct, delay: no EAL): the caller publishes them another way.
    using CounterPairs = std::vector<std::pair<std::string, uint64_t>>;
    virtual bool serve_counters(const std::string& name, std::function<CounterPairs()> read) {
        (void)name;
        (void)read;
        return false;
    }
};

// A process started by `./iccs run PATH` (ICCS_* variables), or by mpirun / srun (rank and size
// from OMPI_COMM_WORLD_*, SLURM_*, PMI_*, PMIX_*, with the machine file named by ICCS_CONFIG),
// becomes the cluster of its rank: EAL, proxies and links up (transport iccs), or the shared
// memory of direct/delay mapped, and every cluster's runtime reachable. The compute threads are
// the caller's own (e.g. PARMACS CREATE): thread t uses endpoint(t). nullptr with `err` (one line
// naming the variable, key or value at fault) when the environment does not describe a run.
std::unique_ptr<Runtime> runtime_from_env(std::string& err);
// This cluster's part of the run is over (ok: its program succeeded; call it after the threads
// that use endpoints have ended): wait until every cluster
// finished (or is down), print this cluster's counters, release everything. Returns the exit
// status the process should end with.
int runtime_finish(std::unique_ptr<Runtime> rt, bool ok);

}  // namespace iccs
