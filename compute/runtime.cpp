// runtime.cpp: the transport-independent part of the runtime (runtime.hpp, rt_core.hpp):
// endpoints' handlers, request/reply, waiting, the barrier, the service thread, runtime_finish.
#include "activity.hpp"
#include "rt_core.hpp"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "config.hpp"

namespace iccs {

namespace {
constexpr uint64_t kSpinNs = 20'000;  // wait_until spins this long before it sleeps
// A request's wait looks whether its peer is down after this long, then this often.
constexpr uint64_t kFirstDownCheckNs = 1'000'000;
constexpr uint64_t kDownCheckNs = 10'000'000;
}


const char* to_string(RtStatus s) {
    switch (s) {
        case RtStatus::kOk: return "ok";
        case RtStatus::kTimeout: return "timeout";
        case RtStatus::kTooBig: return "too big";
        case RtStatus::kBadAddr: return "bad address";
        case RtStatus::kPeerDown: return "peer down";
        case RtStatus::kError: return "error";
    }
    return "?";
}

// ---- RtEp

RtEp::RtEp(RtCore& core, uint16_t local)
    : core_(core), self_{core.cluster(), local == core.threads() ? kRtService : local}, local_(local) {}

RtStatus RtEp::fail(RtStatus s, std::string why) {
    err_ = std::move(why);
    return s;
}

RtStatus RtEp::send(RtAddr dst, uint16_t handler, RtBytes a, RtBytes b) {
    if (handler >= kRtUserHandlers)
        return fail(RtStatus::kBadAddr, "send: handler " + std::to_string(handler) + " is reserved for the runtime (users have 0.." +
                                            std::to_string(kRtUserHandlers - 1) + ")");
    return send_internal(dst, handler, 0, a, b);
}

RtStatus RtEp::send_awaited(RtAddr dst, uint16_t handler, RtBytes a, RtBytes b) {
    if (handler >= kRtUserHandlers) return send(dst, handler, a, b);  // refused there, with the reason
    return send_internal(dst, handler, 0, a, b, kRtAwaitedFlag);
}

RtStatus RtEp::send_internal(RtAddr dst, uint16_t handler, uint32_t req_id, RtBytes a, RtBytes b, uint16_t flags) {
    if (dst.cluster >= core_.clusters() || (dst.thread != kRtService && dst.thread >= core_.threads()) ||
        handler >= kRtMaxHandlers)
        return fail(RtStatus::kBadAddr, "send to cluster " + std::to_string(dst.cluster) + " thread " +
                                            std::to_string(dst.thread) + " handler " + std::to_string(handler) +
                                            ": the run has " + std::to_string(core_.clusters()) + " clusters of " +
                                            std::to_string(core_.threads()) + " threads (service: kRtService)");
    const uint64_t len = uint64_t{a.len} + b.len;
    if (len > core_.max_message())
        return fail(RtStatus::kTooBig, "send of " + std::to_string(len) + " bytes: max_message() is " +
                                           std::to_string(core_.max_message()));
    RtHdr h;
    h.src_cluster = self_.cluster;
    h.src_thread = self_.thread;
    h.handler = handler;
    h.req_id = req_id;
    h.flags = flags;
    h.len = static_cast<uint32_t>(len);
    h.send_ns = now_ns();
    const RtStatus s = xmit(dst, h, a, b);
    if (s != RtStatus::kOk) return s;
    ++ctr_.msgs_sent;
    ctr_.bytes_sent += len;
    return RtStatus::kOk;
}

RtStatus RtEp::request(RtAddr dst, uint16_t handler, RtBytes a, RtBytes b, std::vector<uint8_t>& reply,
                       uint64_t timeout_us) {
    if (in_handler_) return fail(RtStatus::kError, "request() from inside a handler (handlers must not block)");
    if (handler >= kRtUserHandlers)
        return fail(RtStatus::kBadAddr, "request: handler " + std::to_string(handler) + " is reserved for the runtime");
    uint32_t id = next_req_++;
    if (id == 0) id = next_req_++;
    pending_req_ = id;
    pending_done_ = false;
    pending_out_ = &reply;
    const ActivityScope doing("request to cluster", dst.cluster);
    RtStatus s = send_internal(dst, handler, id, a, b, kRtAwaitedFlag);  // it waits for the reply
    if (s == RtStatus::kOk) {
        ++ctr_.requests;
        // Whether the peer is down is a system call on direct and delay (kill(pid, 0)): looked at
        // once the request has waited kFirstDownCheckNs, then every kDownCheckNs, not at every turn
        // of the wait's spin (SPLASH-3 ocean, 2 x 1 over direct: 1.9 % of a run's CPU samples).
        bool down = false;
        uint64_t next_down_check = now_ns() + kFirstDownCheckNs;
        s = wait_until(
            [&] {
                if (pending_done_) return true;
                if (const uint64_t now = now_ns(); now >= next_down_check) {
                    next_down_check = now + kDownCheckNs;
                    down = core_.peer_down(dst.cluster);
                }
                return down;
            },
            timeout_us);
        if (s == RtStatus::kOk && !pending_done_)
            s = fail(RtStatus::kPeerDown, "request to cluster " + std::to_string(dst.cluster) + ": the cluster is down");
    }
    pending_req_ = 0;
    pending_out_ = nullptr;
    return s;
}

bool RtEp::cluster_down(uint16_t c) { return c != core_.cluster() && c < core_.clusters() && core_.peer_down(c); }

RtStatus RtEp::reply(const ReplyToken& to, RtBytes a, RtBytes b) {
    if (to.req_id == 0) return fail(RtStatus::kBadAddr, "reply to a message that was not a request (req_id 0)");
    const RtStatus s = send_internal(to.to, kRtReplyHandler, to.req_id, a, b);
    if (s == RtStatus::kOk) ++ctr_.replies;
    return s;
}

void RtEp::deliver(const RtHdr& h, const uint8_t* data) {
    ++ctr_.msgs_received;
    ctr_.bytes_received += h.len;
    if (h.handler == kRtReplyHandler) {
        if (pending_req_ != 0 && h.req_id == pending_req_ && !pending_done_) {
            pending_out_->assign(data, data + h.len);
            pending_done_ = true;
        }  // else: the answer to a request that timed out: dropped
        return;
    }
    const RtCore::Slot s = core_.handler(h.handler);
    if (s.fn == nullptr) {
        if (unknown_handler_++ == 0)  // once per endpoint: a program error, not a hot-path log
            std::fprintf(stderr, "runtime: cluster %u thread %u: message for handler %u, which nobody registered "
                                 "(dropped; set_handler() before the barrier that precedes the first send)\n",
                         self_.cluster, unsigned(self_.thread), h.handler);
        return;
    }
    const AmMsg m{RtAddr{h.src_cluster, h.src_thread}, h.handler, h.req_id, std::span<const uint8_t>(data, h.len)};
    const uint64_t t0 = now_ns();
    in_handler_ = true;
    s.fn(*this, m, s.ctx);
    in_handler_ = false;
    ctr_.handler_ns += now_ns() - t0;
}

int RtEp::poll() {
    if (in_handler_) return 0;  // no re-entry: a handler's poll() would reorder its own source
    if (unrung_) ring_overdue(now_ns());
    return pump_exclusive(64);
}

int RtEp::pump_exclusive(int max) {
    if (local_ != core_.threads()) return pump(max);
    // The service endpoint: one thread at a time runs its messages (per-source order is its rings'
    // order, as with one thread); the other one does nothing now. Whoever takes it drains.
    if (pumping_.exchange(true, std::memory_order_acquire)) return 0;
    const int ran = pump(max);
    pumping_.store(false, std::memory_order_release);
    return ran;
}

int RtEp::serve_service() {
    const uint64_t window = core_.serve_window_ns();
    if (window == 0 || in_handler_ || local_ == core_.threads()) return 0;
    const uint64_t now = now_ns();
    // The promise first, so that a request sent while this thread drains finds it. Renewed once a
    // quarter of it is used up: each renewal is a store to a line the other clusters' senders read.
    if (now + window - std::min(now + window, promised_until_) > window / 4) {
        core_.promise_service(now + window);
        promised_until_ = now + window;
    }
    const int ran = core_.service().pump_exclusive(64);
    ctr_.service_msgs_served += static_cast<uint64_t>(ran);
    return ran;
}

RtStatus RtEp::wait_until(const std::function<bool()>& done, uint64_t timeout_us) {
    const uint64_t start = now_ns();
    const uint64_t dl = timeout_us == kRtForever ? UINT64_MAX : start + timeout_us * 1000;
    while (true) {
        const int ran = in_handler_ ? 0 : pump_exclusive(64);
        if (done()) return RtStatus::kOk;
        const uint64_t now = now_ns();
        // An awaited send of ours whose doorbell was left unrung and that still sits unserved past
        // its bound (the promising compute thread went off computing): rung now.
        const uint64_t ring_at = unrung_ ? ring_overdue(now) : UINT64_MAX;
        if (now >= dl) {
            if (unrung_) ring_unrung_now();  // nobody may wait for it after this
            return fail(RtStatus::kTimeout, "wait_until: not done after " + std::to_string(timeout_us) + " us");
        }
        // Handlers ran: they may have sent, and a send may have taken arrivals off the transport's
        // doorbell (into its own buffers), so look again before any sleep.
        if (ran > 0) continue;
        if (now - start < kSpinNs) {
            sched_yield();  // a 2-core host: let the sender run
            continue;
        }
        // A thread that promised to serve the service endpoint takes the promise back before it
        // sleeps (a sender rings again; what came meanwhile wakes the service thread).
        if (promised_until_) {
            core_.withdraw_service_promise();
            promised_until_ = 0;
        }
        const uint64_t t0 = now_ns();
        block(std::min(dl, ring_at));
        ++ctr_.sleeps;
        ctr_.sleep_ns += now_ns() - t0;
    }
}

void RtEp::notify() {
    notified_.store(1, std::memory_order_seq_cst);
    wake();
}

RtStatus RtEp::barrier(uint64_t timeout_us) {
    std::vector<std::vector<uint8_t>> ignore;
    return barrier_gather({}, ignore, timeout_us);
}

RtStatus RtEp::barrier_gather(std::span<const uint8_t> mine, std::vector<std::vector<uint8_t>>& by_cluster,
                              uint64_t timeout_us) {
    if (local_ == core_.threads()) return fail(RtStatus::kError, "barrier: not for the service endpoint");
    if (in_handler_) return fail(RtStatus::kError, "barrier() from inside a handler (handlers must not block)");
    const uint64_t t0 = now_ns();
    uint64_t gen = 0;
    bool last = false;
    std::vector<uint8_t> joined;
    const ActivityScope doing("runtime barrier");
    {
        std::lock_guard<std::mutex> lk(core_.bar_mu_);
        gen = core_.bar_gen_;
        core_.bar_mine_[local_].assign(mine.begin(), mine.end());
        if (++core_.bar_arrived_ == core_.threads()) {  // the cluster's threads met: its part is complete
            last = true;
            for (auto& m : core_.bar_mine_) joined.insert(joined.end(), m.begin(), m.end());
            core_.bar_arrived_ = 0;
            ++core_.bar_gen_;
            RtCore::Round& r = core_.round(gen);
            r.by_cluster[core_.cluster()] = joined;
            r.have[core_.cluster()] = true;
            ++r.have_n;
        }
    }
    if (last) {
        // One message to every other cluster (its service endpoint answers at once, whatever its
        // compute threads are doing), then wake this cluster's waiting threads.
        for (uint16_t c = 0; c < core_.clusters(); ++c) {
            if (c == core_.cluster()) continue;
            const RtStatus s = send_internal(RtAddr{c, kRtService}, kRtBarrierHandler, 0, RtBytes{&gen, sizeof gen},
                                             RtBytes{joined.data(), static_cast<uint32_t>(joined.size())});
            if (s != RtStatus::kOk) return s;
        }
        core_.notify_compute();
    }
    uint64_t next_down_check = now_ns() + kDownCheckNs;
    int down = -1;
    const RtStatus s = wait_until(
        [&] {
            {
                std::lock_guard<std::mutex> lk(core_.bar_mu_);
                if (core_.round(gen).have_n == core_.clusters()) return true;
            }
            // a cluster that died never arrives: look every 10 ms (a syscall on direct/delay)
            if (const uint64_t now = now_ns(); now >= next_down_check) {
                next_down_check = now + kDownCheckNs;
                for (uint16_t c = 0; c < core_.clusters() && down < 0; ++c)
                    if (c != core_.cluster() && core_.peer_down(c)) down = c;
            }
            return down >= 0;
        },
        timeout_us);
    if (s != RtStatus::kOk) return fail(s, "barrier " + std::to_string(gen) + ": " + err_);
    if (down >= 0)
        return fail(RtStatus::kPeerDown, "barrier " + std::to_string(gen) + ": cluster " + std::to_string(down) +
                                             " is down");
    {
        std::lock_guard<std::mutex> lk(core_.bar_mu_);
        RtCore::Round& r = core_.round(gen);
        by_cluster = r.by_cluster;
        if (++r.readers == core_.threads()) core_.bar_rounds_.erase(gen);
    }
    ++ctr_.barrier_waits;
    ctr_.barrier_wait_ns += now_ns() - t0;
    return RtStatus::kOk;
}

// ---- RtCore

namespace {
void on_barrier(RtEndpoint&, const AmMsg& m, void* ctx) {
    auto* core = static_cast<RtCore*>(ctx);
    uint64_t gen = 0;
    if (m.data.size() < sizeof gen || m.src.cluster >= core->clusters()) return;
    std::memcpy(&gen, m.data.data(), sizeof gen);
    {
        std::lock_guard<std::mutex> lk(core->bar_mu_);
        RtCore::Round& r = core->round(gen);
        if (!r.have[m.src.cluster]) {
            r.by_cluster[m.src.cluster].assign(m.data.begin() + sizeof gen, m.data.end());
            r.have[m.src.cluster] = true;
            ++r.have_n;
        }
    }
    core->notify_compute();
}
void on_done(RtEndpoint&, const AmMsg& m, void* ctx) {
    auto* core = static_cast<RtCore*>(ctx);
    if (m.src.cluster < core->clusters()) core->mark_done(m.src.cluster);
}
}  // namespace

RtCore::RtCore(uint16_t cluster, uint16_t clusters, uint16_t threads, RtTransport t)
    : cluster_(cluster), clusters_(clusters), threads_(threads), transport_(t), handlers_(kRtMaxHandlers),
      done_by_(new std::atomic<bool>[clusters]) {
    bar_mine_.resize(threads);
    for (uint16_t c = 0; c < clusters; ++c) done_by_[c].store(false);
    handlers_[kRtBarrierHandler] = Slot{on_barrier, this};
    handlers_[kRtDoneHandler] = Slot{on_done, this};
}

RtCore::~RtCore() { stop_service(); }

void RtCore::set_handler(uint16_t id, AmHandler h, void* ctx) {
    if (id >= kRtUserHandlers) {
        // A program error that would otherwise break replies or barriers in silence.
        std::fprintf(stderr, "runtime: set_handler(%u): handler ids %u..%u are the runtime's; users have 0..%u\n", id,
                     kRtUserHandlers, kRtMaxHandlers - 1, kRtUserHandlers - 1);
        std::abort();
    }
    handlers_[id] = Slot{h, ctx};
}

RtCore::Round& RtCore::round(uint64_t gen) {
    Round& r = bar_rounds_[gen];
    if (r.have.empty()) {
        r.have.assign(clusters_, false);
        r.by_cluster.resize(clusters_);
    }
    return r;
}

void RtCore::notify_compute() {
    for (uint16_t t = 0; t < threads_; ++t) eps_[t]->notify();
}

void RtCore::mark_done(uint16_t c) { done_by_[c].store(true, std::memory_order_release); }

void RtCore::start_service() {
    service_ = std::thread([this] {
        RtEp& s = service();
        if (service_core_ >= 0) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(service_core_, &set);
            pthread_setaffinity_np(pthread_self(), sizeof set, &set);  // refused: it runs where it may
        }
        while (!service_stop_.load()) {
            if (service_send_done_.load() && !service_sent_done_.load()) {
                // The endpoint is this thread's alone while it sends (a compute thread serving it
                // would send from its rings too).
                while (s.pumping_.exchange(true, std::memory_order_acquire)) sched_yield();
                for (uint16_t c = 0; c < clusters_; ++c)
                    if (c != cluster_ && !peer_down(c))
                        s.send_internal(RtAddr{c, kRtService}, kRtDoneHandler, 0, {}, {});
                s.pumping_.store(false, std::memory_order_release);
                service_sent_done_.store(true);
            }
            s.wait_until([this] { return service_stop_.load() || (service_send_done_.load() && !service_sent_done_.load()); },
                         200'000);
        }
    });
}

void RtCore::stop_service() {
    if (!service_.joinable()) return;
    service_stop_.store(true);
    service().notify();
    service_.join();
}

// How long finish_exchange waits for a down peer's "done" that may still be held in flight.
constexpr uint64_t kDoneGraceNs = 2'000'000'000;

bool RtCore::finish_exchange(uint64_t timeout_ms, std::string& why) {
    service_send_done_.store(true);
    service().notify();
    const uint64_t dl = now_ns() + timeout_ms * 1'000'000;
    // The other clusters' "done" usually follows ours within tens of microseconds (they left the
    // program's last barrier with us): look again after 50 us, doubling up to 2 ms. A flat 2 ms
    // sleep added about 2 ms to every run's end (a 10 ms SPLASH-3 fft takes 50 ms here).
    uint64_t nap_us = 50;
    while (true) {
        uint16_t ended = 0;
        std::string missing;
        for (uint16_t c = 0; c < clusters_; ++c) {
            if (c == cluster_) continue;
            if (done_by_[c].load(std::memory_order_acquire) || peer_down(c)) ++ended;
            else {
                if (!missing.empty()) missing += ',';
                missing += std::to_string(c);
            }
        }
        if (ended + 1u >= clusters_ && service_sent_done_.load()) break;
        if (now_ns() > dl) {
            why = "clusters " + missing + " did not finish within " + std::to_string(timeout_ms / 1000) + " s";
            return false;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(nap_us));
        nap_us = std::min<uint64_t>(nap_us * 2, 2000);
    }
    // A peer that finished and exited is seen down at once, but its last message (the "done")
    // may still be on its way: over the delay transport it is held D after it was sent, and a
    // peer that finished after us exits before that (a fresh-clone CI run failed
    // runtime-delay-hold so). Its message stays readable after it exited, so wait for it a while
    // before calling the peer lost; only a run with a peer down pays this.
    const uint64_t grace = now_ns() + kDoneGraceNs;
    for (uint16_t c = 0; c < clusters_; ++c) {
        if (c == cluster_) continue;
        while (!done_by_[c].load(std::memory_order_acquire) && peer_down(c) && now_ns() < grace)
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        if (!done_by_[c].load() && peer_down(c)) {
            why = "cluster " + std::to_string(c) + " went down before it finished";
            return false;
        }
    }
    return true;
}

std::string RtCore::format_counters() const {
    std::string out;
    char line[512];
    for (size_t i = 0; i < eps_.size(); ++i) {
        const RtEndpointCounters& c = eps_[i]->counters();
        const std::string who = i == threads_ ? std::string("service") : std::to_string(i);
        std::snprintf(line, sizeof line,
                      "  rt %u.%s: msgs sent %" PRIu64 " (%" PRIu64 " bytes) received %" PRIu64 " (%" PRIu64
                      " bytes), requests %" PRIu64 ", replies %" PRIu64 ", barriers %" PRIu64 " (%.3f ms waiting), "
                      "handlers %.3f ms, sleeps %" PRIu64 " (%.3f ms), full-ring sends %" PRIu64 " (%.3f ms), "
                      "service msgs served here %" PRIu64 ", doorbells rung %" PRIu64 ", skipped %" PRIu64 " (rung late %" PRIu64
                      ")%s\n",
                      cluster_, who.c_str(), c.msgs_sent, c.bytes_sent, c.msgs_received, c.bytes_received, c.requests,
                      c.replies, c.barrier_waits, c.barrier_wait_ns / 1e6, c.handler_ns / 1e6, c.sleeps,
                      c.sleep_ns / 1e6, c.send_full_waits, c.send_full_ns / 1e6, c.service_msgs_served,
                      c.bells_rung, c.bells_skipped, c.bells_rung_late,
                      eps_[i]->unknown_handler_drops()
                          ? (", dropped for unregistered handlers " + std::to_string(eps_[i]->unknown_handler_drops())).c_str()
                          : "");
        out += line;
    }
    return out;
}

namespace {
// ICCS_REPORT (runtime_launch.hpp): this cluster's counters as one JSON object. Every endpoint
// counts, the service endpoint too (it sends the DSM's page and lock replies).
void write_report(const RtCore& core, const std::string& file, bool ok) {
    FILE* out = std::fopen(file.c_str(), "w");
    if (out == nullptr) return;  // the launcher reports the cluster's counters as missing (null)
    uint64_t msgs = 0, bytes = 0, cmsgs = 0, cbytes = 0;
    for (uint16_t l = 0; l <= core.threads(); ++l) {
        const RtEndpointCounters& c = const_cast<RtCore&>(core).ep(l).counters();
        msgs += c.msgs_sent;
        bytes += c.bytes_sent;
        if (l < core.threads()) {
            cmsgs += c.msgs_sent;
            cbytes += c.bytes_sent;
        }
    }
    std::fprintf(out,
                 "{\"cluster\":%u,\"ok\":%s,\"transport\":\"%s\",\"msgs\":%" PRIu64 ",\"bytes\":%" PRIu64
                 ",\"compute_msgs\":%" PRIu64 ",\"compute_bytes\":%" PRIu64 ",\"proxies\":%s}\n",
                 core.cluster(), ok ? "true" : "false", to_string(core.transport()), msgs, bytes, cmsgs, cbytes,
                 core.proxies_json().c_str());
    std::fclose(out);
}
}  // namespace

int runtime_finish(std::unique_ptr<Runtime> rt, bool ok) {
    if (!rt) return 1;
    auto* core = dynamic_cast<RtCore*>(rt.get());
    if (core == nullptr) return ok ? 0 : 1;  // a test's own Runtime: nothing of ours to end
    std::string why;
    activity_phase(ClusterPhase::kEnding, "ending: waiting for every cluster to finish");
    const bool fin = core->finish_exchange(120'000, why);
    core->stop_service();
    uint64_t msgs = 0, bytes = 0;  // the application's: compute endpoints only
    for (uint16_t t = 0; t < core->threads(); ++t) {
        const RtEndpointCounters& c = core->ep(t).counters();
        msgs += c.msgs_sent;
        bytes += c.bytes_sent;
    }
    if (const char* f = std::getenv("ICCS_COUNTERS_FILE"); f != nullptr && *f != '\0')
        if (FILE* out = std::fopen((std::string(f) + ".c" + std::to_string(core->cluster())).c_str(), "w")) {
            std::fprintf(out, "msgs %" PRIu64 " bytes %" PRIu64 "\n", msgs, bytes);
            std::fclose(out);
        }
    std::string twhy;
    std::fflush(stdout);
    const bool tok = core->shutdown(ok && fin, twhy);
    activity_phase(ClusterPhase::kFinished, "finished: reporting");
    const bool all = ok && fin && tok;
    if (const char* f = std::getenv("ICCS_REPORT"); f != nullptr && *f != '\0')
        write_report(*core, std::string(f) + ".rt.c" + std::to_string(core->cluster()), all);
    std::string err = !ok ? "the program failed" : !fin ? why : !tok ? twhy : "";
    // The run's report, not the program's output: on standard error, one write per cluster so the
    // clusters' blocks stay whole; with ICCS_REPORT_ONLY=1 (`iccs run --report FILE`) only in the
    // report file (and a failure's reason still on standard error).
    const char* only = std::getenv("ICCS_REPORT_ONLY");
    const bool to_file_only = only != nullptr && *only == '1';
    if (!to_file_only || !all) {
        char head[1024];
        std::snprintf(head, sizeof head,
                      "cluster %u: %s  runtime over %s: %" PRIu64 " messages sent, %" PRIu64
                      " bytes (mean %.1f bytes)%s%s\n",
                      core->cluster(), all ? "PASS" : "FAIL", core->describe().c_str(), msgs, bytes,
                      msgs ? double(bytes) / double(msgs) : 0.0, err.empty() ? "" : "  error: ", err.c_str());
        std::string block = head;
        if (!to_file_only) block += core->format_counters();
        std::fflush(stderr);
        (void)!write(STDERR_FILENO, block.data(), block.size());
    }
    rt.reset();
    return all ? 0 : 1;
}

}  // namespace iccs
