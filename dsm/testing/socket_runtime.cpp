// socket_runtime.cpp: mailbox endpoints (mailbox.hpp) whose messages to other clusters are framed
// onto Unix stream sockets; a receiver thread per process puts incoming frames into mailboxes.
// The barrier: threads of a cluster meet, the last one sends the cluster's contributions to
// cluster 0, which answers every cluster when all arrived.
#include "socket_runtime.hpp"

#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "mailbox.hpp"

namespace iccs::testing {

namespace {

enum : uint8_t { kAm = 0, kReply = 1, kBarArrive = 2, kBarDone = 3 };

struct __attribute__((packed)) Hdr {
    uint8_t kind;
    uint16_t src_c, src_t, dst_t, handler;
    uint32_t req_id;
    uint32_t len;
};
static_assert(sizeof(Hdr) == 17);

bool read_full(int fd, void* p, size_t n) {
    auto* b = static_cast<uint8_t*>(p);
    while (n) {
        ssize_t k = read(fd, b, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        b += k;
        n -= size_t(k);
    }
    return true;
}

bool write_full(int fd, const void* a, size_t an, const void* b, size_t bn) {
    iovec iov[2] = {{const_cast<void*>(a), an}, {const_cast<void*>(b), bn}};
    int cnt = bn ? 2 : 1;
    iovec* v = iov;
    while (cnt) {
        ssize_t k = writev(fd, v, cnt);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return false;
        size_t left = size_t(k);
        while (cnt && left >= v->iov_len) {
            left -= v->iov_len;
            v++;
            cnt--;
        }
        if (cnt) {
            v->iov_base = static_cast<uint8_t*>(v->iov_base) + left;
            v->iov_len -= left;
        }
    }
    return true;
}

class SocketRouter final : public Router {
public:
    SocketRouter(uint16_t me, uint16_t c, uint16_t t, std::vector<int> fds)
        : me_(me), C_(c), T_(t), fds_(std::move(fds)), parts_(t), coord_parts_(c) {
        for (size_t i = 0; i < fds_.size(); i++) wmu_.push_back(std::make_unique<std::mutex>());
        cl_ = std::make_unique<MbCluster>(*this, me);
        if (pipe(wake_) != 0) wake_[0] = wake_[1] = -1;
        cl_->start();
        rx_ = std::thread([this] { receive(); });
    }
    ~SocketRouter() override { stop(); }
    void stop() {
        if (stopped_.exchange(true)) return;
        cl_->stop();
        if (wake_[1] >= 0) {
            ssize_t w = write(wake_[1], "x", 1);
            (void)w;
        }
        if (rx_.joinable()) rx_.join();
        for (int fd : fds_)
            if (fd >= 0) close(fd);
    }
    MbCluster& cluster() { return *cl_; }
    uint16_t clusters() const override { return C_; }
    uint16_t threads() const override { return T_; }

    void route(Msg&& m) override {
        if (m.dst.cluster == me_) {
            cl_->ep(m.dst.thread).deliver(std::move(m));
            return;
        }
        Hdr h{m.is_reply ? kReply : kAm, m.src.cluster, m.src.thread, m.dst.thread, m.handler, m.req_id,
              uint32_t(m.bytes.size())};
        frame(m.dst.cluster, h, m.bytes.data(), m.bytes.size());
    }

    RtStatus barrier_gather(MbEndpoint& ep, std::span<const uint8_t> mine, std::vector<std::vector<uint8_t>>& by_cluster,
                            uint64_t timeout_us) override {
        uint64_t target;
        bool last = false;
        std::vector<uint8_t> all;
        {
            std::lock_guard<std::mutex> g(bar_mu_);
            target = completed_.load() + 1;
            parts_[ep.self().thread].assign(mine.begin(), mine.end());
            if (++arrived_ == T_) {
                arrived_ = 0;
                last = true;
                for (auto& p : parts_) all.insert(all.end(), p.begin(), p.end());
            }
        }
        // Outside bar_mu_: on cluster 0 the arrival may complete the barrier, and on_done takes it.
        if (last) {
            if (me_ == 0) {
                coord_arrive(0, std::move(all));
            } else {
                Hdr h{kBarArrive, me_, 0, 0, 0, 0, uint32_t(all.size())};
                frame(0, h, all.data(), all.size());
            }
        }
        RtStatus s = ep.wait_until([&] { return completed_.load() >= target; }, timeout_us);
        if (s != RtStatus::kOk) return s;
        std::lock_guard<std::mutex> g(bar_mu_);
        by_cluster = result_;
        return RtStatus::kOk;
    }

private:
    void frame(uint16_t c, const Hdr& h, const void* d, size_t n) {
        std::lock_guard<std::mutex> g(*wmu_[c]);
        if (!write_full(fds_[c], &h, sizeof h, d, n)) {
            fprintf(stderr, "socket runtime: cluster %u: writing to cluster %u: %s\n", unsigned(me_), unsigned(c),
                    strerror(errno));
            abort();
        }
    }

    // Cluster 0: cluster c's threads all arrived.
    void coord_arrive(uint16_t c, std::vector<uint8_t>&& bytes) {
        std::lock_guard<std::mutex> g(coord_mu_);
        coord_parts_[c] = std::move(bytes);
        if (++coord_arrived_ < C_) return;
        coord_arrived_ = 0;
        std::vector<uint8_t> done;
        for (auto& p : coord_parts_) {
            const uint32_t n = uint32_t(p.size());
            done.insert(done.end(), reinterpret_cast<const uint8_t*>(&n), reinterpret_cast<const uint8_t*>(&n) + 4);
            done.insert(done.end(), p.begin(), p.end());
        }
        for (uint16_t k = 1; k < C_; k++) {
            Hdr h{kBarDone, 0, 0, 0, 0, 0, uint32_t(done.size())};
            frame(k, h, done.data(), done.size());
        }
        on_done(done);
    }

    void on_done(const std::vector<uint8_t>& d) {
        std::vector<std::vector<uint8_t>> r(C_);
        size_t o = 0;
        for (uint16_t c = 0; c < C_ && o + 4 <= d.size(); c++) {
            uint32_t n;
            std::memcpy(&n, d.data() + o, 4);
            o += 4;
            r[c].assign(d.begin() + long(o), d.begin() + long(o + n));
            o += n;
        }
        std::lock_guard<std::mutex> g(bar_mu_);
        result_ = std::move(r);
        completed_.fetch_add(1);
    }

    void receive() {
        std::vector<int> live = fds_;
        for (;;) {
            std::vector<pollfd> p;
            std::vector<uint16_t> who;
            for (uint16_t c = 0; c < C_; c++)
                if (live[c] >= 0) {
                    p.push_back({live[c], POLLIN, 0});
                    who.push_back(c);
                }
            p.push_back({wake_[0], POLLIN, 0});
            if (::poll(p.data(), p.size(), -1) < 0) {
                if (errno == EINTR) continue;
                return;
            }
            if (p.back().revents) return;  // stop
            for (size_t i = 0; i + 1 < p.size(); i++) {
                if (!p[i].revents) continue;
                Hdr h;
                std::vector<uint8_t> body;
                if (!read_full(p[i].fd, &h, sizeof h) || (body.resize(h.len), !read_full(p[i].fd, body.data(), h.len))) {
                    live[who[i]] = -1;
                    // After the final barrier peers leave; before it, a peer that is gone (it
                    // crashed or stopped on an error) would leave this cluster waiting forever.
                    // Messages it sent before leaving are in the mailboxes: give this cluster a
                    // moment to act on them (e.g. print the error they carry) before stopping.
                    if (!finishing_.load()) {
                        const unsigned me = me_, peer = who[i];
                        std::thread([me, peer] {
                            sleep(2);
                            fprintf(stderr, "socket runtime: cluster %u: cluster %u is down, stopping\n", me, peer);
                            fflush(nullptr);
                            _exit(1);
                        }).detach();
                    }
                    continue;
                }
                if (h.kind == kAm || h.kind == kReply) {
                    Msg m{RtAddr{h.src_c, h.src_t}, RtAddr{me_, h.dst_t}, h.handler, h.req_id, h.kind == kReply,
                          std::move(body)};
                    cl_->ep(h.dst_t).deliver(std::move(m));
                } else if (h.kind == kBarArrive) {
                    coord_arrive(h.src_c, std::move(body));
                } else if (h.kind == kBarDone) {
                    on_done(body);
                }
            }
        }
    }

    uint16_t me_, C_, T_;
    std::vector<int> fds_;
    std::vector<std::unique_ptr<std::mutex>> wmu_;
    std::unique_ptr<MbCluster> cl_;
    std::thread rx_;
    int wake_[2] = {-1, -1};
    std::atomic<bool> stopped_{false};

public:
    std::atomic<bool> finishing_{false};  // in the final barrier: peers may leave

private:
    std::mutex bar_mu_;
    uint32_t arrived_ = 0;
    std::vector<std::vector<uint8_t>> parts_;
    std::atomic<uint64_t> completed_{0};
    std::vector<std::vector<uint8_t>> result_;
    std::mutex coord_mu_;
    uint32_t coord_arrived_ = 0;
    std::vector<std::vector<uint8_t>> coord_parts_;
};

// The Runtime handed out: the cluster, owning its router.
class SocketRuntime final : public Runtime {
public:
    explicit SocketRuntime(std::unique_ptr<SocketRouter> r) : r_(std::move(r)) {}
    ~SocketRuntime() override { r_->stop(); }
    uint16_t cluster() const override { return r_->cluster().cluster(); }
    uint16_t clusters() const override { return r_->clusters(); }
    uint16_t threads() const override { return r_->threads(); }
    RtTransport transport() const override { return RtTransport::kDirect; }
    uint32_t max_message() const override { return 16u << 20; }
    void set_handler(uint16_t id, AmHandler h, void* ctx) override { r_->cluster().set_handler(id, h, ctx); }
    RtEndpoint& endpoint(uint16_t t) override { return r_->cluster().endpoint(t); }
    void stop() { r_->stop(); }
    void finishing() { r_->finishing_.store(true); }

private:
    std::unique_ptr<SocketRouter> r_;
};

bool env_u16(const char* name, uint16_t lo, uint16_t hi, uint16_t& v, std::string& err) {
    const char* s = getenv(name);
    char* end = nullptr;
    const long x = s ? strtol(s, &end, 10) : -1;
    if (!s || *end || x < lo || x > hi) {
        err = std::string(name) + "=" + (s ? s : "(unset)") + ": expected " + std::to_string(lo) + ".." + std::to_string(hi);
        return false;
    }
    v = uint16_t(x);
    return true;
}

}  // namespace

std::unique_ptr<Runtime> socket_runtime_from_env(std::string& err) {
    uint16_t me, c, t;
    if (!env_u16("ICCS_TEST_CLUSTERS", 1, 64, c, err) || !env_u16("ICCS_TEST_CLUSTER", 0, uint16_t(c - 1), me, err) ||
        !env_u16("ICCS_TEST_THREADS", 1, 64, t, err))
        return nullptr;
    const char* s = getenv("ICCS_TEST_FDS");
    std::vector<int> fds;
    std::stringstream ss(s ? s : "");
    for (std::string item; std::getline(ss, item, ',');) fds.push_back(item == "-" ? -1 : atoi(item.c_str()));
    if (fds.size() != c || fds[me] != -1) {
        err = std::string("ICCS_TEST_FDS=") + (s ? s : "(unset)") + ": expected one fd per cluster, '-' for cluster " +
              std::to_string(me);
        return nullptr;
    }
    return std::make_unique<SocketRuntime>(std::make_unique<SocketRouter>(me, c, t, std::move(fds)));
}

void socket_runtime_finish(Runtime& rt) {
    static_cast<SocketRuntime&>(rt).finishing();
    // Peers may leave once this barrier is over, so a peer's end no longer stops this cluster;
    // a peer that died before arriving is caught by the time-out instead.
    constexpr uint64_t kFinalTimeoutUs = 60'000'000;
    std::atomic<int> late{0};
    std::vector<std::thread> helpers;
    for (uint16_t t = 1; t < rt.threads(); t++)
        helpers.emplace_back([&, t] { if (rt.endpoint(t).barrier(kFinalTimeoutUs) != RtStatus::kOk) late++; });
    if (rt.endpoint(0).barrier(kFinalTimeoutUs) != RtStatus::kOk) late++;
    for (auto& h : helpers) h.join();
    if (late.load()) {
        fprintf(stderr, "socket runtime: cluster %u: the other clusters did not finish within 60 s\n", unsigned(rt.cluster()));
        fflush(nullptr);
        _exit(1);
    }
    static_cast<SocketRuntime&>(rt).stop();
}

}  // namespace iccs::testing
