// mailbox.hpp: test support. Endpoints as mailboxes and a cluster of them behind the Runtime
// interface; a Router says where a message goes (another mailbox of this process, or another
// process) and runs the barrier. Used by loopback_runtime (C clusters in one process); across
// processes the tests use the real runtime (`iccs run PATH`).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime.hpp"

namespace iccs::testing {

struct Msg {
    RtAddr src;
    RtAddr dst;
    uint16_t handler = 0;
    uint32_t req_id = 0;
    bool is_reply = false;
    std::vector<uint8_t> bytes;
};

class MbEndpoint;

class Router {
public:
    virtual ~Router() = default;
    virtual uint16_t clusters() const = 0;
    virtual uint16_t threads() const = 0;
    virtual void route(Msg&& m) = 0;  // m.dst says where
    // Largest message (payload bytes) send/request/reply accept, as the real transports' limit.
    virtual uint32_t max_message() const { return 16u << 20; }
    // Barrier of every compute thread of every cluster, gathering contributions per cluster.
    virtual RtStatus barrier_gather(MbEndpoint& ep, std::span<const uint8_t> mine,
                                    std::vector<std::vector<uint8_t>>& by_cluster, uint64_t timeout_us) = 0;
};

class MbCluster;

class MbEndpoint final : public RtEndpoint {
public:
    MbEndpoint(Router& r, MbCluster& c, RtAddr self) : r_(r), c_(c), self_(self) {}
    RtAddr self() const override { return self_; }
    void deliver(Msg&& m);
    RtStatus send(RtAddr dst, uint16_t handler, RtBytes a, RtBytes b) override;
    RtStatus request(RtAddr dst, uint16_t handler, RtBytes a, RtBytes b, std::vector<uint8_t>& reply,
                     uint64_t timeout_us) override;
    RtStatus reply(const ReplyToken& to, RtBytes a, RtBytes b) override;
    int poll() override;
    RtStatus wait_until(const std::function<bool()>& done, uint64_t timeout_us) override;
    void notify() override;
    RtStatus barrier(uint64_t timeout_us) override;
    RtStatus barrier_gather(std::span<const uint8_t> mine, std::vector<std::vector<uint8_t>>& by_cluster,
                            uint64_t timeout_us) override;
    const RtEndpointCounters& counters() const override { return ctr_; }
    const std::string& last_error() const override { return err_; }
    bool cluster_down(uint16_t) override { return false; }  // the loopback's clusters live as long as the test
    void set_error(const std::string& e) { err_ = e; }
    RtEndpointCounters& mutable_counters() { return ctr_; }
    void serve(std::atomic<bool>& stop);  // the service thread's loop

private:
    RtStatus check_dst(RtAddr dst, uint16_t handler);
    RtStatus check_size(size_t bytes);  // against the Router's max_message()
    Router& r_;
    MbCluster& c_;
    RtAddr self_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Msg> box_;
    bool notified_ = false;
    uint32_t next_req_ = 0;
    uint32_t want_req_ = 0;
    bool got_reply_ = false;
    std::vector<uint8_t> reply_bytes_;
    RtEndpointCounters ctr_;
    std::string err_;
};

class MbCluster final : public Runtime {
public:
    MbCluster(Router& r, uint16_t id);
    ~MbCluster() override { stop(); }
    void start();  // the service thread
    void stop();
    uint16_t cluster() const override { return id_; }
    uint16_t clusters() const override { return r_.clusters(); }
    uint16_t threads() const override { return r_.threads(); }
    RtTransport transport() const override { return RtTransport::kDirect; }
    uint32_t max_message() const override { return r_.max_message(); }
    void set_handler(uint16_t id, AmHandler h, void* ctx) override;
    RtEndpoint& endpoint(uint16_t t) override { return *eps_.at(t); }
    MbEndpoint& ep(uint16_t t) { return t == kRtService ? *service_ : *eps_.at(t); }
    std::pair<AmHandler, void*> handler(uint16_t id);

private:
    Router& r_;
    uint16_t id_;
    std::vector<std::unique_ptr<MbEndpoint>> eps_;
    std::unique_ptr<MbEndpoint> service_;
    std::mutex hmu_;
    std::pair<AmHandler, void*> handlers_[kRtMaxHandlers];
    std::atomic<bool> stop_{false};
    std::thread thr_;
};

}  // namespace iccs::testing
