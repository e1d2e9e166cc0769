// rt_iccs.cpp: the `iccs` transport: active messages over the convergence library and the
// cluster's proxies (the system itself).
//
// The one idea: the cluster comes up exactly as in `iccs run alltoall` (run_cluster(), on a thread
// of the runtime), with threads + 1 "compute threads": one per endpoint, the last the service
// endpoint's. Each of them only connects its Convergence module to every endpoint of every other
// cluster (ordered parallel connections, port kRtPortBase + endpoint index), hands the module to
// the runtime, and waits for runtime_finish(); from then on the endpoint's owner (the program's
// thread, or the service thread) uses the module. Messages between endpoints of one cluster do
// not touch the proxies: a locked inbox per endpoint.
#include <rte_ring.h>
#include <rte_telemetry.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "rt_core.hpp"
#include "runtime_launch.hpp"

namespace iccs {

namespace {

constexpr uint16_t kRtPortBase = 3000;  // endpoint l listens on 3000 + l (alltoall: 1000 + t)
constexpr uint32_t kMaxSleepUs = 2'000;  // a safety net: deliveries wake us

struct Held {
    RtHdr h;
    std::vector<uint8_t> bytes;
};

class IccsCore;

class IccsEp final : public RtEp {
   public:
    IccsEp(IccsCore& core, uint16_t local);
    // Runs on the compute thread run_cluster() starts for this endpoint (it sets up the endpoint's
    // convergence module, listens and connects to every other endpoint, then parks until the
    // runtime is released; the program's own threads use the module meanwhile).
    bool attach(ComputeEnv& env, std::string& err);
    void detach() { conv_ = nullptr; }
    // Another endpoint of this cluster sends to this one.
    void post_local(const RtHdr& h, RtBytes a, RtBytes b);

   protected:
    RtStatus xmit(RtAddr dst, const RtHdr& h, RtBytes a, RtBytes b) override;
    int pump(int max) override;
    void block(uint64_t deadline_ns) override;
    void wake() override;

   private:
    // Take what the connections hold into the backlog (while our own send waits for window).
    void drain_to_backlog();
    void deliver_msg(RecvMsg& m);
    IccsCore& ic_;
    Convergence* conv_ = nullptr;
    ClusterRings* rings_ = nullptr;
    uint16_t ring_thread_ = 0;
    std::vector<Connection*> out_;  // by global endpoint index; nullptr for this cluster's
    std::vector<Connection*> in_;
    std::deque<Held> backlog_;
    std::vector<uint8_t> scratch_;
    std::mutex lmu_;
    std::deque<Held> linbox_;
    std::atomic<uint32_t> lcount_{0};
    bool delivering_ = false;
};

// Counters of the layers above (Runtime::serve_counters), by telemetry command.
std::mutex g_layer_mu;
std::map<std::string, std::function<Runtime::CounterPairs()>>* g_layers = nullptr;  // never freed: telemetry may ask late

int tel_layer_counters(const char* cmd, const char*, rte_tel_data* d) {
    std::function<Runtime::CounterPairs()> read;
    {
        std::lock_guard<std::mutex> lk(g_layer_mu);
        if (g_layers == nullptr) return -1;
        auto it = g_layers->find(cmd);
        if (it == g_layers->end()) return -1;
        read = it->second;
    }
    rte_tel_data_start_dict(d);
    for (const auto& [k, v] : read()) rte_tel_data_add_dict_u64(d, k.c_str(), v);
    return 0;
}

class IccsCore final : public RtCore {
   public:
    bool serve_counters(const std::string& name, std::function<Runtime::CounterPairs()> read) override {
        const std::string cmd = "/iccs/" + name;
        std::lock_guard<std::mutex> lk(g_layer_mu);
        if (g_layers == nullptr) g_layers = new std::map<std::string, std::function<Runtime::CounterPairs()>>();
        const bool fresh = g_layers->find(cmd) == g_layers->end();
        (*g_layers)[cmd] = std::move(read);
        // The EAL of this cluster is up (start() returned): its telemetry serves the command.
        return !fresh || rte_telemetry_register_cmd(cmd.c_str(), tel_layer_counters,
                                                    "Counters of a layer over the runtime (e.g. the DSM). No parameters") == 0;
    }
    IccsCore(const RtSpec& spec) : RtCore(spec.cluster, spec.clusters, spec.threads, RtTransport::kIccs), plan_(spec.plan) {
        quiet_ = spec.quiet;
        // `iccs run --report FILE`: the cluster's counters go to the report file only (runtime.cpp),
        // and its start-up line nowhere.
        const char* only = std::getenv("ICCS_REPORT_ONLY");
        report_only_ = only != nullptr && *only == '1';
        if (report_only_) plan_.quiet = true;
        for (uint16_t l = 0; l <= threads_; ++l) eps_.push_back(std::make_unique<IccsEp>(*this, l));
    }
    ~IccsCore() override {
        stop_service();
        release();
        if (cth_.joinable()) cth_.join();
    }
    bool start(std::string& err) {
        plan_.cluster_id = cluster_;
        plan_.threads = static_cast<uint16_t>(threads_ + 1);  // + the service endpoint's module
        plan_.last_is_service = true;
        plan_.program = [this](ComputeEnv& env) {
            auto& ep = static_cast<IccsEp&>(*eps_[env.thread]);
            std::string e;
            const bool ok = ep.attach(env, e);
            std::unique_lock<std::mutex> lk(mu_);
            if (!ok && attach_err_.empty()) attach_err_ = e;
            ++ready_;
            cv_.notify_all();
            cv_.wait(lk, [&] { return released_; });
            ep.detach();
            const RtEndpointCounters& c = ep.counters();
            env.result.sent = c.msgs_sent;
            env.result.received = c.msgs_received;
            if (!ok) env.result.error = e;
            return ok;
        };
        cth_ = std::thread([this] {
            ClusterReport r = run_cluster(plan_);
            std::lock_guard<std::mutex> lk(mu_);
            report_ = std::move(r);
            ended_ = true;
            cv_.notify_all();
        });
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return ended_ || ready_ == threads_ + 1u; });
        if (ended_ || !attach_err_.empty()) {
            err = !attach_err_.empty() ? attach_err_ : report_.error.empty() ? "the cluster did not come up" : report_.error;
            released_ = true;
            cv_.notify_all();
            lk.unlock();
            cth_.join();
            return false;
        }
        return true;
    }
    void release() {
        std::lock_guard<std::mutex> lk(mu_);
        released_ = true;
        cv_.notify_all();
    }
    bool peer_down(uint16_t c) override { return rings_ != nullptr && rings_->cluster_down(c); }
    bool shutdown(bool, std::string& why) override {
        release();
        if (cth_.joinable()) cth_.join();
        // The run's report, not the program's output: standard error (a failure's always).
        if ((!quiet_ && !report_only_) || !report_.ok) print_report(plan_, report_, stderr);
        if (!report_.ok) why = "cluster: " + report_.error;
        return report_.ok;
    }
    std::string proxies_json() const override {
        std::string out = "[";
        for (size_t i = 0; i < report_.proxies.size(); ++i) {
            const ProxyCounters& p = report_.proxies[i].proxy;
            const double util = p.total_ns ? double(p.busy_ns) / double(p.total_ns) : 0.0;
            const double qlen = p.total_ns ? double(p.queue_ns_sum) / double(p.total_ns) : 0.0;
            char buf[512];
            std::snprintf(buf, sizeof buf,
                          "%s{\"cluster\":%u,\"proxy\":%zu,\"msgs_tx\":%llu,\"msgs_rx\":%llu,\"bytes_tx\":%llu,"
                          "\"bytes_rx\":%llu,\"msg_time_count\":%llu,\"msg_time_us_mean\":%s,\"queue_len_mean\":%s,"
                          "\"utilization\":%s,\"retransmissions\":%llu,\"total_s\":%.6f}",
                          i ? "," : "", unsigned(cluster_), i, (unsigned long long)p.msgs_tx,
                          (unsigned long long)p.msgs_rx, (unsigned long long)p.bytes_tx, (unsigned long long)p.bytes_rx,
                          (unsigned long long)p.msg_time_count,
                          p.msg_time_count ? std::to_string(double(p.msg_time_sum_ns) / double(p.msg_time_count) / 1e3).c_str()
                                           : "null",
                          p.total_ns ? std::to_string(qlen).c_str() : "null",  // a proxy that never ran: unknown
                          p.total_ns ? std::to_string(util).c_str() : "null",
                          (unsigned long long)report_.proxies[i].slidwin.tx_retx, double(p.total_ns) / 1e9);
            out += buf;
        }
        return out + "]";
    }
    std::string describe() const override {
        return "iccs (" + std::to_string(plan_.proxies_per_cluster.empty() ? 0 : plan_.proxies_per_cluster[cluster_]) +
               " proxies, fabric " + plan_.fabric + ")";
    }
    uint32_t global(RtAddr a) const { return a.cluster * (threads_ + 1u) + local_of(a.thread); }
    IccsEp& iep(uint16_t local) { return static_cast<IccsEp&>(*eps_[local]); }
    const ClusterPlan& plan() const { return plan_; }
    ClusterRings* rings_ = nullptr;

   private:
    ClusterPlan plan_;
    bool quiet_ = false;
    bool report_only_ = false;
    std::thread cth_;
    std::mutex mu_;
    std::condition_variable cv_;
    uint32_t ready_ = 0;
    bool released_ = false, ended_ = false;
    std::string attach_err_;
    ClusterReport report_;
};

IccsEp::IccsEp(IccsCore& core, uint16_t local) : RtEp(core, local), ic_(core), ring_thread_(local) {}

bool IccsEp::attach(ComputeEnv& env, std::string& err) {
    conv_ = &env.conv;
    rings_ = env.rings;
    ic_.rings_ = env.rings;
    Convergence& conv = *conv_;
    const uint16_t port = static_cast<uint16_t>(kRtPortBase + local_);
    const uint16_t per = static_cast<uint16_t>(core_.threads() + 1);
    if (const ConvError e = conv.listen(port); e != ConvError::kOk) {
        err = "listen on port " + std::to_string(port) + ": " + conv.last_error();
        return false;
    }
    out_.assign(size_t{core_.clusters()} * per, nullptr);
    const size_t expect_in = size_t{core_.clusters() - 1u} * per;
    auto accept_some = [&] {
        Connection* c = nullptr;
        while (in_.size() < expect_in && conv.accept(port, c, 0) == ConvError::kOk) in_.push_back(c);
    };
    ConnOptions o;
    o.order = ConnOptions::Order::kOrdered;  // per-source order is the runtime's promise
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ic_.plan().link_timeout_ms);
    for (uint16_t c = 0; c < core_.clusters(); ++c) {
        if (c == core_.cluster()) continue;
        for (uint16_t l = 0; l < per; ++l) {
            Connection* conn = nullptr;
            while (true) {
                const ConvError e = conv.connect(Endpoint{c, static_cast<uint16_t>(kRtPortBase + l)}, conn, o);
                if (e == ConvError::kOk) break;
                // Not listening yet (it starts at its own pace), or busy connecting itself.
                if ((e != ConvError::kRefused && e != ConvError::kTimeout) || std::chrono::steady_clock::now() > until) {
                    err = "connect to cluster " + std::to_string(c) + " endpoint " + std::to_string(l) + ": " +
                          conv_strerror(e) + " (" + conv.last_error() + ")";
                    return false;
                }
                accept_some();
                std::this_thread::sleep_for(std::chrono::milliseconds(2));
            }
            out_[size_t{c} * per + l] = conn;
        }
    }
    while (in_.size() < expect_in) {
        Connection* c = nullptr;
        const ConvError e = conv.accept(port, c, int64_t{ic_.plan().link_timeout_ms} * 1000);
        if (e != ConvError::kOk) {
            err = "accept on port " + std::to_string(port) + " (" + std::to_string(in_.size()) + " of " +
                  std::to_string(expect_in) + " connections): " + conv_strerror(e);
            return false;
        }
        in_.push_back(c);
    }
    return true;
}

void IccsEp::post_local(const RtHdr& h, RtBytes a, RtBytes b) {
    Held m{h, {}};
    m.bytes.resize(h.len);
    if (a.len) std::memcpy(m.bytes.data(), a.data, a.len);
    if (b.len) std::memcpy(m.bytes.data() + a.len, b.data, b.len);
    {
        std::lock_guard<std::mutex> lk(lmu_);
        linbox_.push_back(std::move(m));
        lcount_.fetch_add(1, std::memory_order_seq_cst);
    }
    if (rings_ != nullptr) rings_->thread_waker(ring_thread_).wake();
}

RtStatus IccsEp::xmit(RtAddr dst, const RtHdr& h, RtBytes a, RtBytes b) {
    if (conv_ == nullptr) return fail(RtStatus::kError, "the runtime has ended");
    if (dst.cluster == core_.cluster()) {
        ic_.iep(core_.local_of(dst.thread)).post_local(h, a, b);
        return RtStatus::kOk;
    }
    if (ic_.peer_down(dst.cluster))
        return fail(RtStatus::kPeerDown, "send to cluster " + std::to_string(dst.cluster) + ": its proxies stopped answering");
    Connection* c = out_[ic_.global(dst)];
    const uint32_t len = static_cast<uint32_t>(sizeof h + h.len);
    SendBuffer sb;
    auto wait = [&](ConvError e, const char* what) -> RtStatus {
        if (e == ConvError::kPeerDown || ic_.peer_down(dst.cluster))
            return fail(RtStatus::kPeerDown, "send to cluster " + std::to_string(dst.cluster) + ": peer down");
        if (e != ConvError::kWouldBlock)
            return fail(RtStatus::kError, std::string(what) + ": " + conv_strerror(e) + " (" + conv_->last_error() + ")");
        // No window or buffers: keep our own inbox moving (not from inside a handler, whose
        // message is still ours) so two endpoints sending to each other cannot wait forever.
        if (!delivering_) drain_to_backlog();
        PollItem it{c, 0, PollItem::kWritable, 0};
        conv_->poll(std::span<PollItem>(&it, 1), 200);
        return RtStatus::kOk;
    };
    while (true) {
        const ConvError e = conv_->alloc_send_buffer(c, len, sb, 0);
        if (e == ConvError::kOk) break;
        if (const RtStatus s = wait(e, "send buffer"); s != RtStatus::kOk) return s;
    }
    sb.write(0, &h, sizeof h);
    if (a.len) sb.write(sizeof h, a.data, a.len);
    if (b.len) sb.write(static_cast<uint32_t>(sizeof h + a.len), b.data, b.len);
    while (true) {
        const ConvError e = conv_->send_buffer(c, sb, 0);
        if (e == ConvError::kOk) break;
        if (const RtStatus s = wait(e, "send"); s != RtStatus::kOk) return s;
    }
    return RtStatus::kOk;
}

void IccsEp::drain_to_backlog() {
    conv_->progress();
    for (Connection*& c : in_) {
        if (c == nullptr) continue;
        RecvMsg m;
        while (conv_->recv_msg(c, m, 0) == ConvError::kOk) {
            Held x;
            if (m.size() < sizeof(RtHdr)) continue;
            std::vector<uint8_t> all(m.size());
            m.copy_to(all.data(), m.size());
            std::memcpy(&x.h, all.data(), sizeof x.h);
            x.bytes.assign(all.begin() + sizeof x.h, all.end());
            backlog_.push_back(std::move(x));
        }
    }
}

void IccsEp::deliver_msg(RecvMsg& m) {
    if (m.size() < sizeof(RtHdr)) return;
    const uint8_t* p = m.contiguous();
    if (p == nullptr) {
        if (scratch_.size() < m.size()) scratch_.resize(m.size());
        m.copy_to(scratch_.data(), m.size());
        p = scratch_.data();
    }
    RtHdr h;
    std::memcpy(&h, p, sizeof h);
    if (h.len != m.size() - sizeof h) return;
    delivering_ = true;
    deliver(h, p + sizeof h);
    delivering_ = false;
}

int IccsEp::pump(int max) {
    if (conv_ == nullptr) return 0;
    int ran = 0;
    while (!backlog_.empty() && ran < max) {
        Held x = std::move(backlog_.front());
        backlog_.pop_front();
        delivering_ = true;
        deliver(x.h, x.bytes.data());
        delivering_ = false;
        ++ran;
    }
    if (lcount_.load(std::memory_order_acquire) != 0) {
        std::deque<Held> mine;
        {
            std::lock_guard<std::mutex> lk(lmu_);
            mine.swap(linbox_);
            lcount_.store(0, std::memory_order_relaxed);
        }
        for (Held& x : mine) {
            delivering_ = true;
            deliver(x.h, x.bytes.data());
            delivering_ = false;
            ++ran;
        }
    }
    // Passes over the connections until one finds nothing: a handler's send may have taken
    // arrivals for a connection already passed into the module's buffers (off the ring, which
    // is all block() looks at).
    for (bool more = true; more && ran < max;) {
        more = false;
        conv_->progress();
        for (Connection*& c : in_) {
            if (c == nullptr) continue;
            RecvMsg m;
            while (ran < max) {
                const ConvError e = conv_->recv_msg(c, m, 0);
                if (e == ConvError::kOk) {
                    deliver_msg(m);
                    m.reset();
                    ++ran;
                    more = true;
                    continue;
                }
                if (e != ConvError::kWouldBlock) c = nullptr;  // peer down or closed: nothing more comes
                break;
            }
        }
    }
    return ran;
}

void IccsEp::block(uint64_t deadline_ns) {
    if (rings_ == nullptr) return;
    Waker& w = rings_->thread_waker(ring_thread_);
    w.prepare_sleep();
    if (notified_.exchange(0) != 0 || lcount_.load(std::memory_order_seq_cst) != 0 ||
        rte_ring_count(rings_->to_thread(ring_thread_)) != 0) {
        w.cancel_sleep();
        return;
    }
    const uint64_t now = now_ns();
    uint64_t us = kMaxSleepUs;
    if (deadline_ns != UINT64_MAX) us = deadline_ns > now ? std::min<uint64_t>(us, (deadline_ns - now) / 1000 + 1) : 1;
    w.sleep(static_cast<uint32_t>(us));
}

void IccsEp::wake() {
    if (rings_ != nullptr) rings_->thread_waker(ring_thread_).wake();
}

}  // namespace

std::unique_ptr<RtCore> make_iccs_runtime(const RtSpec& spec, std::string& err) {
    if (spec.plan.polling == Polling::kInline) {
        err = "transport iccs: [cluster] polling = \"inline\" is not supported by the runtime (no proxy thread would "
              "serve the service endpoint while the compute threads compute): use adaptive or busy";
        return nullptr;
    }
    auto core = std::make_unique<IccsCore>(spec);
    if (!core->start(err)) return nullptr;
    core->start_service();
    return core;
}

}  // namespace iccs
