// mailbox.cpp: mailbox endpoints (see mailbox.hpp).
#include "mailbox.hpp"

#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "clock.hpp"

namespace iccs::testing {

namespace {
std::vector<uint8_t> join(RtBytes a, RtBytes b) {
    std::vector<uint8_t> v(size_t(a.len) + b.len);
    if (a.len) std::memcpy(v.data(), a.data, a.len);
    if (b.len) std::memcpy(v.data() + a.len, b.data, b.len);
    return v;
}
}  // namespace

void MbEndpoint::deliver(Msg&& m) {
    {
        std::lock_guard<std::mutex> g(mu_);
        box_.push_back(std::move(m));
    }
    cv_.notify_all();
}

RtStatus MbEndpoint::check_dst(RtAddr dst, uint16_t handler) {
    if (dst.cluster >= r_.clusters() || (dst.thread != kRtService && dst.thread >= r_.threads()) ||
        handler >= kRtMaxHandlers) {
        err_ = "mailbox runtime: no such destination " + std::to_string(dst.cluster) + "." + std::to_string(dst.thread) +
               " / handler " + std::to_string(handler);
        return RtStatus::kBadAddr;
    }
    return RtStatus::kOk;
}

// The real runtime's words, so a test that lowers the limit sees what a run would.
RtStatus MbEndpoint::check_size(size_t bytes) {
    if (bytes <= r_.max_message()) return RtStatus::kOk;
    err_ = "send of " + std::to_string(bytes) + " bytes: max_message() is " + std::to_string(r_.max_message());
    return RtStatus::kTooBig;
}

RtStatus MbEndpoint::send(RtAddr dst, uint16_t handler, RtBytes a, RtBytes b) {
    if (RtStatus s = check_dst(dst, handler); s != RtStatus::kOk) return s;
    if (RtStatus s = check_size(size_t(a.len) + b.len); s != RtStatus::kOk) return s;
    Msg m{self_, dst, handler, 0, false, join(a, b)};
    ctr_.msgs_sent++;
    ctr_.bytes_sent += m.bytes.size();
    r_.route(std::move(m));
    return RtStatus::kOk;
}

RtStatus MbEndpoint::request(RtAddr dst, uint16_t handler, RtBytes a, RtBytes b, std::vector<uint8_t>& reply,
                             uint64_t timeout_us) {
    if (RtStatus s = check_dst(dst, handler); s != RtStatus::kOk) return s;
    if (RtStatus s = check_size(size_t(a.len) + b.len); s != RtStatus::kOk) return s;
    const uint32_t id = ++next_req_;
    Msg m{self_, dst, handler, id, false, join(a, b)};
    ctr_.msgs_sent++;
    ctr_.requests++;
    ctr_.bytes_sent += m.bytes.size();
    want_req_ = id;
    r_.route(std::move(m));
    bool got = false;
    RtStatus s = wait_until([&] {
        if (!got_reply_) return false;
        got_reply_ = false;
        reply.swap(reply_bytes_);
        got = true;
        return true;
    }, timeout_us);
    want_req_ = 0;
    if (got) return RtStatus::kOk;
    err_ = "mailbox runtime: request timed out";
    return s;
}

RtStatus MbEndpoint::reply(const ReplyToken& to, RtBytes a, RtBytes b) {
    if (RtStatus s = check_dst(to.to, 0); s != RtStatus::kOk) return s;
    if (check_size(size_t(a.len) + b.len) != RtStatus::kOk) {
        // The requester would wait for it until its timeout: stop the test loudly instead.
        fprintf(stderr, "mailbox runtime: reply from %u: %s\n", unsigned(self_.cluster), err_.c_str());
        abort();
    }
    Msg m{self_, to.to, 0, to.req_id, true, join(a, b)};
    ctr_.replies++;
    r_.route(std::move(m));
    return RtStatus::kOk;
}

int MbEndpoint::poll() {
    int ran = 0;
    for (;;) {
        Msg m;
        {
            std::lock_guard<std::mutex> g(mu_);
            if (box_.empty()) break;
            m = std::move(box_.front());
            box_.pop_front();
        }
        ctr_.msgs_received++;
        ctr_.bytes_received += m.bytes.size();
        if (m.is_reply) {
            // A reply nobody waits for any more (timed out) is dropped.
            if (m.req_id == want_req_ && want_req_ != 0) {
                reply_bytes_ = std::move(m.bytes);
                got_reply_ = true;
            }
            continue;
        }
        auto [h, ctx] = c_.handler(m.handler);
        if (!h) {
            fprintf(stderr, "mailbox runtime: cluster %u has no handler %u (message from %u.%u dropped)\n",
                    unsigned(self_.cluster), unsigned(m.handler), unsigned(m.src.cluster), unsigned(m.src.thread));
            continue;
        }
        const uint64_t t0 = now_ns();
        AmMsg am{m.src, m.handler, m.req_id, std::span<const uint8_t>(m.bytes.data(), m.bytes.size())};
        h(*this, am, ctx);
        ctr_.handler_ns += now_ns() - t0;
        ran++;
    }
    return ran;
}

RtStatus MbEndpoint::wait_until(const std::function<bool()>& done, uint64_t timeout_us) {
    const uint64_t t0 = now_ns();
    for (;;) {
        poll();
        if (done()) return RtStatus::kOk;
        if (timeout_us != kRtForever && now_ns() - t0 >= timeout_us * 1000ull) return RtStatus::kTimeout;
        std::unique_lock<std::mutex> g(mu_);
        if (box_.empty() && !notified_) cv_.wait_for(g, std::chrono::microseconds(200));
        notified_ = false;
    }
}

void MbEndpoint::notify() {
    {
        std::lock_guard<std::mutex> g(mu_);
        notified_ = true;
    }
    cv_.notify_all();
}

RtStatus MbEndpoint::barrier(uint64_t timeout_us) {
    std::vector<std::vector<uint8_t>> ignore;
    return barrier_gather({}, ignore, timeout_us);
}

RtStatus MbEndpoint::barrier_gather(std::span<const uint8_t> mine, std::vector<std::vector<uint8_t>>& by_cluster,
                                    uint64_t timeout_us) {
    if (self_.thread == kRtService) {
        err_ = "mailbox runtime: barrier on the service endpoint";
        return RtStatus::kError;
    }
    const uint64_t t0 = now_ns();
    RtStatus s = r_.barrier_gather(*this, mine, by_cluster, timeout_us);
    if (s == RtStatus::kOk) {
        ctr_.barrier_waits++;
        ctr_.barrier_wait_ns += now_ns() - t0;
    }
    return s;
}

void MbEndpoint::serve(std::atomic<bool>& stop) {
    while (!stop.load()) {
        poll();
        std::unique_lock<std::mutex> g(mu_);
        if (box_.empty()) cv_.wait_for(g, std::chrono::milliseconds(2));
    }
}

MbCluster::MbCluster(Router& r, uint16_t id) : r_(r), id_(id) {
    for (uint16_t t = 0; t < r.threads(); t++) eps_.push_back(std::make_unique<MbEndpoint>(r, *this, RtAddr{id, t}));
    service_ = std::make_unique<MbEndpoint>(r, *this, RtAddr{id, kRtService});
    for (auto& h : handlers_) h = {nullptr, nullptr};
}

void MbCluster::start() {
    thr_ = std::thread([this] { service_->serve(stop_); });
}

void MbCluster::stop() {
    stop_.store(true);
    if (thr_.joinable()) thr_.join();
}

void MbCluster::set_handler(uint16_t id, AmHandler h, void* ctx) {
    std::lock_guard<std::mutex> g(hmu_);
    if (id < kRtMaxHandlers) handlers_[id] = {h, ctx};
}

std::pair<AmHandler, void*> MbCluster::handler(uint16_t id) {
    std::lock_guard<std::mutex> g(hmu_);
    return handlers_[id];
}

}  // namespace iccs::testing
