// rt_ping.cpp: the smallest program on the cluster runtime (compute/runtime.hpp), started as one
// process per cluster by `iccs run PATH`, or by mpirun / srun (see compute/README.md):
//
//   ./iccs run build/compute/examples/iccs-rt-ping --clusters 2 --transport direct -- --rounds 100
//
// Every compute thread pings the same thread of the next cluster (request/reply, bytes checked)
// and sends one active message to every thread of every other cluster; then all meet in a barrier.
// If standard input is not a terminal, each cluster prints its size and checksum (the launcher
// gives every cluster the same bytes).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "runtime.hpp"

namespace {
std::atomic<int> g_hellos[256];  // active messages received, per compute thread

void on_echo(iccs::RtEndpoint& self, const iccs::AmMsg& m, void*) {
    self.reply(m.token(), iccs::RtBytes{m.data.data(), static_cast<uint32_t>(m.data.size())});
}
void on_hello(iccs::RtEndpoint& self, const iccs::AmMsg&, void*) { g_hellos[self.self().thread]++; }
}  // namespace

int main(int argc, char** argv) {
    int rounds = 100, die = -1;  // --die C: cluster C kills itself after the first barrier (a test)
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
        if (std::strcmp(argv[i], "--die") == 0) die = std::atoi(argv[i + 1]);
    }
    std::string err;
    std::unique_ptr<iccs::Runtime> rt = iccs::runtime_from_env(err);
    if (!rt) {
        std::fprintf(stderr, "rt_ping: %s\n", err.c_str());
        return 2;
    }
    const uint16_t me = rt->cluster(), C = rt->clusters(), T = rt->threads();
    if (!isatty(0)) {
        std::vector<char> in;
        char buf[4096];
        ssize_t n;
        while ((n = read(0, buf, sizeof buf)) > 0) in.insert(in.end(), buf, buf + n);
        unsigned sum = 0;
        for (char c : in) sum = sum * 31 + static_cast<unsigned char>(c);
        std::printf("cluster %u: stdin %zu bytes, checksum %08x\n", me, in.size(), sum);
    }
    rt->set_handler(1, on_echo, nullptr);
    rt->set_handler(2, on_hello, nullptr);
    std::atomic<bool> ok{true};
    std::vector<std::thread> threads;
    for (uint16_t t = 0; t < T; ++t)
        threads.emplace_back([&, t] {
            iccs::RtEndpoint& ep = rt->endpoint(t);
            auto check = [&](iccs::RtStatus s, const char* what) {
                if (s == iccs::RtStatus::kOk) return true;
                std::fprintf(stderr, "rt_ping: cluster %u thread %u: %s: %s (%s)\n", me, t, what, iccs::to_string(s),
                             ep.last_error().c_str());
                ok = false;
                return false;
            };
            if (!check(ep.barrier(), "barrier")) return;  // every cluster registered its handlers
            if (die == me) raise(SIGKILL);
            const iccs::RtAddr peer{static_cast<uint16_t>((me + 1) % C), t};
            std::vector<uint8_t> reply;
            for (int r = 0; r < rounds; ++r) {
                const uint32_t v = me * 1000000u + t * 1000u + static_cast<uint32_t>(r);
                if (!check(ep.request(peer, 1, iccs::RtBytes{&v, sizeof v}, {}, reply, 10'000'000), "request")) return;
                if (reply.size() != sizeof v || std::memcmp(reply.data(), &v, sizeof v) != 0) {
                    std::fprintf(stderr, "rt_ping: cluster %u thread %u: wrong reply in round %d\n", me, t, r);
                    ok = false;
                    return;
                }
            }
            for (uint16_t c = 0; c < C; ++c)
                for (uint16_t u = 0; c != me && u < T; ++u)
                    if (!check(ep.send(iccs::RtAddr{c, u}, 2, iccs::RtBytes{"hi", 2}), "send")) return;
            const int want = (C - 1) * T;
            if (!check(ep.wait_until([&] { return g_hellos[t].load() >= want; }, 30'000'000), "waiting for hellos")) return;
            check(ep.barrier(), "last barrier");
        });
    for (auto& th : threads) th.join();
    std::printf("cluster %u of %u: rt_ping %s: %d round trips per thread over %s\n", me, C, ok ? "ok" : "FAILED",
                rounds, rt->transport() == iccs::RtTransport::kIccs ? "iccs"
                        : rt->transport() == iccs::RtTransport::kDirect ? "direct" : "delay");
    std::fflush(stdout);
    return iccs::runtime_finish(std::move(rt), ok);
}
