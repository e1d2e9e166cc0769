// rt_core.hpp: inside the runtime (runtime.hpp): what every transport shares. Not for users.
//
// The one idea: an endpoint's logic (handlers, request/reply, barrier, waiting) is written once in
// RtEp; a transport supplies four hooks: xmit (hand one framed message to the destination
// endpoint), pump (run the handlers of what arrived, in per-source order), block (sleep until
// something may have arrived, notify() or a deadline) and wake. Every message on every transport
// is an RtHdr followed by its bytes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "clock.hpp"
#include "runtime.hpp"

namespace iccs {

// The frame of one active message (host byte order: both ends run the same build; over iccs it is
// payload of the convergence layer, which has its own big-endian header).
struct RtHdr {
    uint16_t src_cluster = 0;
    uint16_t src_thread = 0;  // or kRtService
    uint16_t handler = 0;
    uint16_t flags = 0;
    uint32_t req_id = 0;
    uint32_t len = 0;      // bytes after this header
    uint64_t send_ns = 0;  // CLOCK_MONOTONIC at send (delay: held until send_ns + delay)
};
static_assert(sizeof(RtHdr) == 24);

// The runtime's own handlers (runtime.hpp keeps 200..255).
inline constexpr uint16_t kRtReplyHandler = 200;    // a reply: completes the request req_id
inline constexpr uint16_t kRtBarrierHandler = 201;  // a cluster's barrier contribution (to service endpoints)
inline constexpr uint16_t kRtDoneHandler = 202;     // a cluster finished its program (runtime_finish)
inline constexpr uint32_t kRtMaxMessage = 1u << 20;  // max_message() on every transport
// RtHdr::flags: the sender waits for what this message causes (send_awaited, request): a transport
// may leave the destination's doorbell unrung while its cluster's compute thread serves the service
// endpoint (direct and delay; iccs ignores it).
inline constexpr uint16_t kRtAwaitedFlag = 0x0001;

class RtCore;

class RtEp : public RtEndpoint {
    friend class RtCore;  // the service thread's own sends take pumping_

   public:
    RtEp(RtCore& core, uint16_t local);
    ~RtEp() override = default;
    RtAddr self() const override { return self_; }
    RtStatus send(RtAddr dst, uint16_t handler, RtBytes a, RtBytes b = {}) override;
    RtStatus request(RtAddr dst, uint16_t handler, RtBytes a, RtBytes b, std::vector<uint8_t>& reply,
                     uint64_t timeout_us = kRtForever) override;
    RtStatus reply(const ReplyToken& to, RtBytes a, RtBytes b = {}) override;
    RtStatus send_awaited(RtAddr dst, uint16_t handler, RtBytes a, RtBytes b = {}) override;
    int serve_service() override;
    int poll() override;
    RtStatus wait_until(const std::function<bool()>& done, uint64_t timeout_us = kRtForever) override;
    void notify() override;
    RtStatus barrier(uint64_t timeout_us = kRtForever) override;
    RtStatus barrier_gather(std::span<const uint8_t> mine, std::vector<std::vector<uint8_t>>& by_cluster,
                            uint64_t timeout_us = kRtForever) override;
    const RtEndpointCounters& counters() const override { return ctr_; }
    const std::string& last_error() const override { return err_; }
    bool cluster_down(uint16_t c) override;

    // The runtime's own sends (handler ids >= kRtUserHandlers allowed).
    RtStatus send_internal(RtAddr dst, uint16_t handler, uint32_t req_id, RtBytes a, RtBytes b, uint16_t flags = 0);
    // A transport hands one arrived message here: runs its handler (or completes a request).
    void deliver(const RtHdr& h, const uint8_t* data);
    uint16_t local() const { return local_; }
    uint64_t unknown_handler_drops() const { return unknown_handler_; }

   protected:
    // Hand the framed message (h, then a, then b) to dst; kOk once the bytes are taken.
    virtual RtStatus xmit(RtAddr dst, const RtHdr& h, RtBytes a, RtBytes b) = 0;
    // Run the handlers of what arrived (deliver()), at most `max`; returns how many ran.
    virtual int pump(int max) = 0;
    // Sleep until something may have arrived, notify(), or deadline_ns (never past it). The
    // transport's own prepare / re-check / sleep, so no wake-up is lost.
    virtual void block(uint64_t deadline_ns) = 0;
    virtual void wake() = 0;
    // Awaited sends whose doorbell the transport left unrung (unrung_ of them): ring each one still
    // unserved past its bound; returns the earliest bound of those left (UINT64_MAX: none).
    // ring_unrung_now() rings every one still unserved (a wait that ends before its bound).
    virtual uint64_t ring_overdue(uint64_t now) {
        (void)now;
        return UINT64_MAX;
    }
    virtual void ring_unrung_now() {}
    // The service endpoint's pump, by whichever thread takes `pumping_` (the service thread, or a
    // compute thread in serve_service()); 0 when another thread has it. Other endpoints: pump().
    int pump_exclusive(int max);
    RtStatus fail(RtStatus s, std::string why);

    RtCore& core_;
    RtAddr self_;
    uint16_t local_;  // 0..threads-1, or threads for the service endpoint
    RtEndpointCounters ctr_;
    std::string err_;
    std::atomic<uint32_t> notified_{0};  // notify() since the last block(): block() must not sleep
    std::atomic<bool> pumping_{false};   // the service endpoint: a thread runs its messages
    uint32_t unrung_ = 0;                // awaited sends left unrung, not yet seen served or rung

   private:
    bool in_handler_ = false;
    uint32_t next_req_ = 1;
    uint32_t pending_req_ = 0;  // the one request this endpoint waits for (0: none)
    bool pending_done_ = false;
    std::vector<uint8_t>* pending_out_ = nullptr;
    uint64_t unknown_handler_ = 0;
    uint64_t promised_until_ = 0;  // a compute endpoint: what its serve_service() last promised
};

// One cluster's runtime; the transports subclass it (they make the endpoints).
class RtCore : public Runtime {
   public:
    RtCore(uint16_t cluster, uint16_t clusters, uint16_t threads, RtTransport t);
    ~RtCore() override;
    uint16_t cluster() const override { return cluster_; }
    uint16_t clusters() const override { return clusters_; }
    uint16_t threads() const override { return threads_; }
    RtTransport transport() const override { return transport_; }
    uint32_t max_message() const override { return kRtMaxMessage; }
    void set_handler(uint16_t id, AmHandler h, void* ctx) override;
    RtEndpoint& endpoint(uint16_t t) override { return *eps_.at(t); }

    RtEp& ep(uint16_t local) { return *eps_[local]; }
    RtEp& service() { return *eps_[threads_]; }
    uint16_t local_of(uint16_t thread) const { return thread == kRtService ? threads_ : thread; }

    struct Slot {
        AmHandler fn = nullptr;
        void* ctx = nullptr;
    };
    Slot handler(uint16_t id) const { return handlers_[id]; }

    // The barrier (RtEp::barrier_gather and the service endpoint's handler use these).
    std::mutex bar_mu_;
    uint64_t bar_gen_ = 0;       // barriers this cluster completed locally
    uint16_t bar_arrived_ = 0;   // threads in the current local barrier
    std::vector<std::vector<uint8_t>> bar_mine_;  // contributions of the current local barrier
    struct Round {
        std::vector<std::vector<uint8_t>> by_cluster;
        std::vector<bool> have;
        uint16_t have_n = 0, readers = 0;
    };
    std::map<uint64_t, Round> bar_rounds_;
    Round& round(uint64_t gen);
    void notify_compute();  // wake every compute endpoint (barrier progress)

    // Finish: cluster c said it is done (kRtDoneHandler, on the service endpoint).
    void mark_done(uint16_t c);
    // Whether cluster c is known down (transport-specific); for runtime_finish.
    virtual bool peer_down(uint16_t c) = 0;
    // Start the service thread (after eps_ is filled). Stop it before the endpoints go.
    void start_service();
    void stop_service();
    // runtime_finish: tell every other cluster we are done (from the service thread), wait until
    // all said so or are down (or timeout), then stop the service thread. False on timeout.
    bool finish_exchange(uint64_t timeout_ms, std::string& why);
    // Transport-specific end of run (after the service thread stopped): release and report.
    // Returns false (with why) if the transport failed.
    virtual bool shutdown(bool ok, std::string& why) = 0;
    virtual std::string describe() const = 0;  // e.g. "direct (shared memory /iccs-123-rt)"
    // After shutdown(): this cluster's proxies' counters as a JSON array (iccs), or "null" (no
    // proxies: direct, delay). For runtime_finish's ICCS_REPORT file.
    virtual std::string proxies_json() const { return "null"; }
    // A compute thread serves the service endpoint (serve_service): how long its promise lasts
    // after each call (0: no compute thread serves, as before), and how long an awaited message
    // may sit unserved before its sender rings the doorbell itself. Direct and delay set them
    // (ICCS_RT_SERVE_WINDOW_US, ICCS_RT_SERVE_BOUND_US); tests may change them before any send.
    void set_service_serving(uint64_t window_ns, uint64_t bound_ns) {
        serve_window_ns_ = window_ns;
        serve_bound_ns_ = bound_ns;
    }
    uint64_t serve_window_ns() const { return serve_window_ns_; }
    uint64_t serve_bound_ns() const { return serve_bound_ns_; }
    // The transport's side of that promise: senders see it (promise) until until_ns or until it is
    // withdrawn (before the promising thread sleeps); a withdrawal wakes the service thread if a
    // message already waits for it.
    virtual void promise_service(uint64_t until_ns) { (void)until_ns; }
    virtual void withdraw_service_promise() {}
    // The counters of this cluster's endpoints as report lines.
    std::string format_counters() const;  // one line per endpoint, for runtime_finish

   protected:
    uint16_t cluster_, clusters_, threads_;
    RtTransport transport_;
    std::vector<Slot> handlers_;
    std::vector<std::unique_ptr<RtEp>> eps_;  // threads_ + 1: the last is the service endpoint
    std::thread service_;
    std::atomic<bool> service_stop_{false}, service_send_done_{false};
    std::atomic<bool> service_sent_done_{false};
    int service_core_ = -1;  // RtSpec::service_core, for start_service
    uint64_t serve_window_ns_ = 0, serve_bound_ns_ = 0;
    std::unique_ptr<std::atomic<bool>[]> done_by_;
};

// The transports' factories (rt_direct.cpp, rt_iccs.cpp). `spec` is in runtime_launch.hpp.
struct RtSpec;
std::unique_ptr<RtCore> make_direct_runtime(const RtSpec& spec, std::string& err);
std::unique_ptr<RtCore> make_iccs_runtime(const RtSpec& spec, std::string& err);

}  // namespace iccs
