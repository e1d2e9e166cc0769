// rt_programs.cpp: the built-in programs of the runtime (`iccs run exchange|ping`), written only
// against runtime.hpp, so they run unchanged on every transport.
#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "rt_core.hpp"
#include "runtime_launch.hpp"

namespace iccs {

namespace {

constexpr uint16_t kHData = 1, kHEcho = 2, kHDefer = 3, kHDeferReply = 4, kHPing = 5;

uint32_t ex_size(const RtExchangeOptions& o, uint32_t sc, uint32_t st, uint32_t dc, uint32_t dt, uint64_t i) {
    if (i == 0) return o.min_size;
    if (i == 1) return o.max_size;
    std::mt19937_64 g(o.seed ^ (uint64_t{sc} << 48) ^ (uint64_t{st} << 40) ^ (uint64_t{dc} << 32) ^ (uint64_t{dt} << 24) ^
                      (i * 0x9e3779b97f4a7c15ull));
    return o.min_size + static_cast<uint32_t>(g() % (uint64_t{o.max_size} - o.min_size + 1));
}
inline uint8_t ex_byte(uint32_t sc, uint32_t st, uint64_t i, uint32_t k) {
    return static_cast<uint8_t>(k * 31 + i * 7 + sc * 13 + st * 5);
}
// thread t of cluster c's contribution to barrier_gather round r: its length varies with all three
std::vector<uint8_t> gather_part(uint16_t c, uint16_t t, uint32_t r) {
    std::vector<uint8_t> v((c * 7u + t * 3u + r) % 13u);
    for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<uint8_t>(c * 101 + t * 17 + r * 3 + k);
    return v;
}

struct ExThread {
    std::vector<uint64_t> next;  // by source endpoint (cluster * threads + thread): the next message number
    uint64_t received = 0, corrupt = 0, misordered = 0;
    std::string error;
};
struct ExState {
    const RtExchangeOptions* o = nullptr;
    Runtime* rt = nullptr;
    std::vector<ExThread> th;
};

void on_data(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto& S = *static_cast<ExState*>(ctx);
    ExThread& me = S.th[self.self().thread];
    const uint16_t T = S.rt->threads();
    uint64_t i = 0;
    if (m.data.size() < 8 || m.src.cluster >= S.rt->clusters() || m.src.thread >= T) {
        ++me.corrupt;
        return;
    }
    std::memcpy(&i, m.data.data(), 8);
    uint64_t& want = me.next[size_t{m.src.cluster} * T + m.src.thread];
    if (i != want) {  // a duplicate, a loss, or out of order: each breaks the runtime's promise
        ++me.misordered;
        if (me.error.empty())
            me.error = "from " + std::to_string(m.src.cluster) + "." + std::to_string(m.src.thread) + ": message " +
                       std::to_string(i) + " where " + std::to_string(want) + " was next";
        if (i < want) return;
        want = i;
    }
    ++want;
    const uint32_t size = ex_size(*S.o, m.src.cluster, m.src.thread, self.self().cluster, self.self().thread, i);
    bool ok = m.data.size() == 8u + size;
    for (uint32_t k = 0; ok && k < size; ++k) ok = m.data[8 + k] == ex_byte(m.src.cluster, m.src.thread, i, k);
    if (!ok) {
        ++me.corrupt;
        if (me.error.empty()) me.error = "message " + std::to_string(i) + " from " + std::to_string(m.src.cluster) + "." +
                                         std::to_string(m.src.thread) + " is corrupt";
        return;
    }
    ++me.received;
}
// A request answered at once (on the service endpoint): the bytes, each + 1.
void on_echo(RtEndpoint& self, const AmMsg& m, void*) {
    std::vector<uint8_t> r(m.data.begin(), m.data.end());
    for (uint8_t& b : r) ++b;
    self.reply(m.token(), RtBytes{r.data(), static_cast<uint32_t>(r.size())});
}
// A request answered later from another endpoint: the compute thread passes the token and the
// bytes to its cluster's service endpoint, which replies (each byte + 1).
void on_defer(RtEndpoint& self, const AmMsg& m, void*) {
    const ReplyToken tok = m.token();
    self.send(RtAddr{self.self().cluster, kRtService}, kHDeferReply, RtBytes{&tok, sizeof tok},
              RtBytes{m.data.data(), static_cast<uint32_t>(m.data.size())});
}
void on_defer_reply(RtEndpoint& self, const AmMsg& m, void*) {
    ReplyToken tok;
    if (m.data.size() < sizeof tok) return;
    std::memcpy(&tok, m.data.data(), sizeof tok);
    std::vector<uint8_t> r(m.data.begin() + sizeof tok, m.data.end());
    for (uint8_t& b : r) ++b;
    self.reply(tok, RtBytes{r.data(), static_cast<uint32_t>(r.size())});
}
void on_ping(RtEndpoint& self, const AmMsg& m, void*) {
    self.reply(m.token(), RtBytes{m.data.data(), static_cast<uint32_t>(m.data.size())});
}

}  // namespace

int rt_program_exchange(std::unique_ptr<Runtime> rt, const RtExchangeOptions& o) {
    const uint16_t C = rt->clusters(), T = rt->threads(), me = rt->cluster();
    ExState S;
    S.o = &o;
    S.rt = rt.get();
    S.th.resize(T);
    for (ExThread& t : S.th) t.next.assign(size_t{C} * T, 0);
    rt->set_handler(kHData, on_data, &S);
    rt->set_handler(kHEcho, on_echo, nullptr);
    rt->set_handler(kHDefer, on_defer, nullptr);
    rt->set_handler(kHDeferReply, on_defer_reply, nullptr);
    const uint64_t expect = uint64_t{C - 1u} * T * o.messages * T;  // into this cluster: every thread from every remote thread
    std::vector<std::string> errs(T);
    std::vector<uint64_t> sent(T), requests_ok(T), barriers_ok(T);
    std::vector<std::thread> threads;
    for (uint16_t t = 0; t < T; ++t)
        threads.emplace_back([&, t] {
            RtEndpoint& ep = rt->endpoint(t);
            auto failed = [&](const std::string& what, RtStatus s) {
                errs[t] = what + ": " + to_string(s) + " (" + ep.last_error() + ")";
            };
            // every cluster registered its handlers before anyone sends
            if (RtStatus s = ep.barrier(); s != RtStatus::kOk) return failed("first barrier", s);
            std::vector<uint8_t> body(o.max_size);
            for (uint64_t i = 0; i < o.messages; ++i)
                for (uint16_t dc = 0; dc < C; ++dc) {
                    if (dc == me) continue;
                    for (uint16_t dt = 0; dt < T; ++dt) {
                        const uint32_t size = ex_size(o, me, t, dc, dt, i);
                        for (uint32_t k = 0; k < size; ++k) body[k] = ex_byte(me, t, i, k);
                        // the test hook: message 1 (--max-size bytes) of thread 0.0 to the first
                        // remote thread arrives with one byte wrong; its receiver must count it corrupt
                        if (o.inject_error && me == 0 && t == 0 && i == 1 && dc == 1 && dt == 0 && size > 0)
                            body[size / 2] ^= 0x40;
                        if (RtStatus s = ep.send(RtAddr{dc, dt}, kHData, RtBytes{&i, 8}, RtBytes{body.data(), size});
                            s != RtStatus::kOk)
                            return failed("send", s);
                        ++sent[t];
                    }
                    if ((i & 15) == 0) ep.poll();
                }
            // requests: answered at once by the service endpoint of the next cluster, and deferred
            // by thread t of the next cluster (its service endpoint replies)
            const uint16_t nc = static_cast<uint16_t>((me + 1) % C);
            for (uint32_t r = 0; r < 20; ++r) {
                std::vector<uint8_t> q(1 + (r * 37 + t) % 300), ans;
                for (size_t k = 0; k < q.size(); ++k) q[k] = static_cast<uint8_t>(k + r + t);
                const bool defer = r % 2 == 1;
                const RtAddr to{nc, defer ? t : kRtService};
                if (RtStatus s = ep.request(to, defer ? kHDefer : kHEcho, RtBytes{q.data(), uint32_t(q.size())}, {}, ans,
                                            60'000'000);
                    s != RtStatus::kOk)
                    return failed(defer ? "deferred request" : "request", s);
                bool ok = ans.size() == q.size();
                for (size_t k = 0; ok && k < q.size(); ++k) ok = ans[k] == uint8_t(q[k] + 1);
                if (!ok) return failed("reply " + std::to_string(r) + " has the wrong bytes", RtStatus::kError);
                ++requests_ok[t];
            }
            ExThread& mine = S.th[t];
            const uint64_t want = uint64_t{C - 1u} * o.messages;
            if (RtStatus s = ep.wait_until([&] { return mine.received + mine.corrupt + mine.misordered >= want; }, 120'000'000);
                s != RtStatus::kOk)
                return failed("waiting for " + std::to_string(want) + " messages (got " + std::to_string(mine.received) + ")", s);
            for (uint32_t r = 0; r < o.barriers; ++r) {
                if (RtStatus s = ep.barrier(); s != RtStatus::kOk) return failed("barrier", s);
                std::vector<std::vector<uint8_t>> got;
                const std::vector<uint8_t> part = gather_part(me, t, r);
                if (RtStatus s = ep.barrier_gather(part, got); s != RtStatus::kOk) return failed("barrier_gather", s);
                bool ok = got.size() == C;
                for (uint16_t c = 0; ok && c < C; ++c) {
                    std::vector<uint8_t> want_c;
                    for (uint16_t tt = 0; tt < T; ++tt) {
                        const auto p = gather_part(c, tt, r);
                        want_c.insert(want_c.end(), p.begin(), p.end());
                    }
                    ok = got[c] == want_c;
                }
                if (!ok) return failed("barrier_gather round " + std::to_string(r) + ": wrong contents", RtStatus::kError);
                ++barriers_ok[t];
            }
        });
    for (auto& th : threads) th.join();
    bool ok = true;
    uint64_t received = 0, corrupt = 0, misordered = 0, total_sent = 0, reqs = 0;
    for (uint16_t t = 0; t < T; ++t) {
        received += S.th[t].received;
        corrupt += S.th[t].corrupt;
        misordered += S.th[t].misordered;
        total_sent += sent[t];
        reqs += requests_ok[t];
        if (!errs[t].empty()) {
            ok = false;
            std::printf("cluster %u thread %u: error: %s\n", me, t, errs[t].c_str());
        }
        if (!S.th[t].error.empty()) {
            ok = false;
            std::printf("cluster %u thread %u: error: %s\n", me, t, S.th[t].error.c_str());
        }
        if (barriers_ok[t] != o.barriers) ok = false;
    }
    ok = ok && received == expect && corrupt == 0 && misordered == 0;
    std::printf("cluster %u: exchange %s: sent %" PRIu64 ", received %" PRIu64 " of %" PRIu64
                " (corrupt %" PRIu64 ", duplicated/out of order %" PRIu64 "), requests answered %" PRIu64
                ", barrier + barrier_gather rounds checked %u\n",
                me, ok ? "ok" : "FAILED", total_sent, received, expect, corrupt, misordered, reqs, o.barriers);
    std::fflush(stdout);
    return runtime_finish(std::move(rt), ok);
}

int rt_program_ping(std::unique_ptr<Runtime> rt, const RtPingOptions& o) {
    const uint16_t me = rt->cluster(), T = rt->threads();
    rt->set_handler(kHPing, on_ping, nullptr);
    std::string err;
    std::vector<uint64_t> rtt;
    std::vector<std::thread> threads;
    std::mutex mu;
    for (uint16_t t = 0; t < T; ++t)
        threads.emplace_back([&, t] {
            RtEndpoint& ep = rt->endpoint(t);
            auto failed = [&](const std::string& what, RtStatus s) {
                std::lock_guard<std::mutex> lk(mu);
                if (err.empty()) err = what + ": " + to_string(s) + " (" + ep.last_error() + ")";
            };
            if (RtStatus s = ep.barrier(); s != RtStatus::kOk) return failed("barrier", s);
            if (me == 0 && t == 0 && rt->clusters() > 1) {
                std::vector<uint8_t> q(o.size, 0x5a), ans;
                for (uint64_t i = 0; i < o.warmup + o.rounds; ++i) {
                    const uint64_t t0 = now_ns();
                    if (RtStatus s = ep.request(RtAddr{1, 0}, kHPing, RtBytes{q.data(), o.size}, {}, ans, 10'000'000);
                        s != RtStatus::kOk)
                        return failed("request " + std::to_string(i), s);
                    const uint64_t dt = now_ns() - t0;
                    if (ans.size() != o.size) return failed("reply of the wrong size", RtStatus::kError);
                    if (i >= o.warmup) rtt.push_back(dt);
                }
            }
            if (RtStatus s = ep.barrier(); s != RtStatus::kOk) return failed("last barrier", s);
        });
    for (auto& th : threads) th.join();
    if (!rtt.empty()) {
        std::sort(rtt.begin(), rtt.end());
        const uint64_t med = rtt[rtt.size() / 2], p99 = rtt[std::min(rtt.size() - 1, rtt.size() * 99 / 100)];
        std::printf("ping: %zu round trips of %u bytes (request/reply, thread 0 of cluster 0 <-> thread 0 of cluster 1) "
                    "over %s: median %.1f us, p99 %.1f us, min %.1f us, max %.1f us\n",
                    rtt.size(), o.size, to_string(rt->transport()), med / 1e3, p99 / 1e3, rtt.front() / 1e3,
                    rtt.back() / 1e3);
        if (!o.result_file.empty())
            if (FILE* f = std::fopen(o.result_file.c_str(), "w")) {
                std::fprintf(f, "rtt_ns %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %zu\n", med, p99, rtt.front(),
                             rtt.back(), rtt.size());
                std::fclose(f);
            }
    }
    if (!err.empty()) std::printf("cluster %u: ping error: %s\n", me, err.c_str());
    std::fflush(stdout);
    return runtime_finish(std::move(rt), err.empty());
}

}  // namespace iccs
