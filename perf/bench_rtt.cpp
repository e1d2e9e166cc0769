// bench_rtt.cpp: `iccs bench rtt`. Three ping-pongs, one message in flight each, medians and p99:
//  - iccs: thread 0 of cluster 0 and thread 0 of cluster 1, each its own process with its own
//    EAL and proxy, over memif, with the chosen polling mode;
//  - kernel: two processes on loopback, blocking UDP sockets (the path iccs bypasses);
//  - floor: two processes pinned to different cores passing a value through one shared cache
//    line (the least any cross-process message can cost on this host).
#include "bench_rtt.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <thread>
#include <vector>

#include "cluster.hpp"

namespace iccs {

namespace {

void pin(unsigned cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu % std::max(1u, std::thread::hardware_concurrency()), &set);
    sched_setaffinity(0, sizeof set, &set);
}

struct Stats {
    double median_us = 0, p99_us = 0;
    size_t n = 0;
    std::string error;
};

Stats stats_of(std::vector<uint64_t>& v) {
    Stats s;
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    s.median_us = static_cast<double>(v[v.size() / 2]) / 1000.0;
    s.p99_us = static_cast<double>(v[std::min(v.size() - 1, v.size() * 99 / 100)]) / 1000.0;
    s.n = v.size();
    return s;
}

Stats kernel_rtt(uint32_t size, uint64_t samples) {
    Stats s;
    const int srv = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (srv < 0 || bind(srv, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        getsockname(srv, reinterpret_cast<sockaddr*>(&a), &al) != 0) {
        s.error = std::string("kernel UDP socket: ") + std::strerror(errno);
        return s;
    }
    const uint64_t rounds = samples + samples / 10;
    const pid_t pid = fork();
    if (pid == 0) {  // the echo process
        pin(1);
        std::vector<char> buf(65536);
        for (uint64_t i = 0; i < rounds; ++i) {
            sockaddr_in from{};
            socklen_t fl = sizeof from;
            const ssize_t n = recvfrom(srv, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&from), &fl);
            if (n < 0) _exit(1);
            sendto(srv, buf.data(), static_cast<size_t>(n), 0, reinterpret_cast<sockaddr*>(&from), fl);
        }
        _exit(0);
    }
    pin(0);
    const int cli = socket(AF_INET, SOCK_DGRAM, 0);
    connect(cli, reinterpret_cast<sockaddr*>(&a), sizeof a);
    std::vector<char> out(size, 'x'), in(65536);
    std::vector<uint64_t> rtt;
    for (uint64_t i = 0; i < rounds; ++i) {
        const uint64_t t0 = monotonic_ns();
        if (send(cli, out.data(), out.size(), 0) < 0 || recv(cli, in.data(), in.size(), 0) < 0) {
            s.error = std::string("kernel UDP ping-pong: ") + std::strerror(errno);
            break;
        }
        if (i >= samples / 10) rtt.push_back(monotonic_ns() - t0);
    }
    close(cli);
    close(srv);
    int st = 0;
    waitpid(pid, &st, 0);
    const std::string err = s.error;
    s = stats_of(rtt);
    s.error = err;
    return s;
}

Stats floor_rtt(uint64_t samples) {
    struct alignas(64) Line {
        std::atomic<uint64_t> v;
    };
    auto* lines = static_cast<Line*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    Stats s;
    if (lines == MAP_FAILED) {
        s.error = "mmap failed";
        return s;
    }
    new (&lines[0]) Line{};
    new (&lines[1]) Line{};
    const uint64_t rounds = samples + samples / 10;
    const pid_t pid = fork();
    if (pid == 0) {
        pin(1);
        for (uint64_t i = 1; i <= rounds; ++i) {
            while (lines[0].v.load(std::memory_order_acquire) != i) {
            }
            lines[1].v.store(i, std::memory_order_release);
        }
        _exit(0);
    }
    pin(0);
    std::vector<uint64_t> rtt;
    for (uint64_t i = 1; i <= rounds; ++i) {
        const uint64_t t0 = monotonic_ns();
        lines[0].v.store(i, std::memory_order_release);
        while (lines[1].v.load(std::memory_order_acquire) != i) {
        }
        if (i > samples / 10) rtt.push_back(monotonic_ns() - t0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    munmap(lines, 4096);
    return stats_of(rtt);
}

Stats iccs_rtt(const BenchRttOptions& o) {
    Stats s;
    ClusterPlan plan;
    plan.clusters = 2;
    plan.threads = 1;
    plan.proxies_per_cluster = {1, 1};
    plan.proxy_cores = {1};
    plan.compute_cores = {0, 1};  // cluster 0's thread on core 0, cluster 1's on core 1
    plan.polling = o.polling == "busy" ? Polling::kBusy : o.polling == "adaptive" ? Polling::kAdaptive : Polling::kInline;
    plan.workload = "pingpong";
    plan.messages = o.samples;
    plan.warmup = o.samples / 10;
    plan.min_size = plan.max_size = o.size_bytes;
    plan.pool_segments = 8192;
    plan.slidwin.rcv_buf_datagrams = 256;
    plan.slidwin.snd_buf_datagrams = 256;
    plan.quiet = true;
    plan.result_file = "/tmp/iccs-rtt-" + std::to_string(getpid()) + ".txt";
    std::remove(plan.result_file.c_str());
    if (launch_clusters(plan, 300) != 0) s.error = "the iccs ping-pong run failed (see above)";
    std::ifstream f(plan.result_file);
    std::string tag;
    unsigned long long med = 0, p99 = 0, mn = 0, mx = 0;
    size_t n = 0;
    if (f >> tag >> med >> p99 >> mn >> mx >> n && tag == "rtt_ns") {
        s.median_us = static_cast<double>(med) / 1000.0;
        s.p99_us = static_cast<double>(p99) / 1000.0;
        s.n = n;
    } else if (s.error.empty()) {
        s.error = "the iccs ping-pong wrote no result";
    }
    std::remove(plan.result_file.c_str());
    return s;
}

}  // namespace

int bench_rtt(const BenchRttOptions& o) {
    const unsigned cores = std::thread::hardware_concurrency();
    if (!o.json)
        std::fprintf(stderr, "bench rtt: %u-byte messages, %llu samples each, host has %u cores\n", o.size_bytes,
                     static_cast<unsigned long long>(o.samples), cores);
    std::fflush(stdout);
    const Stats ic = iccs_rtt(o);
    const Stats k = kernel_rtt(o.size_bytes, o.samples);
    const Stats fl = floor_rtt(o.samples);
    const double r_kernel = k.median_us > 0 ? ic.median_us / k.median_us : 0;
    const double r_floor = fl.median_us > 0 ? ic.median_us / fl.median_us : 0;
    // Threads that spin: iccs inline = 2 compute threads; adaptive/busy add a proxy per cluster.
    const unsigned spinning = o.polling == "inline" ? 2 : 4;
    const bool oversubscribed = spinning > cores;
    if (o.json) {
        std::printf("{\"size_bytes\": %u, \"samples\": %llu, \"cores\": %u, \"polling\": \"%s\", "
                    "\"oversubscribed\": %s, \"iccs_rtt_median_us\": %.3f, \"iccs_rtt_p99_us\": %.3f, "
                    "\"kernel_rtt_median_us\": %.3f, \"kernel_rtt_p99_us\": %.3f, \"floor_rtt_median_us\": %.3f, "
                    "\"ratio_to_kernel\": %.4f, \"ratio_to_floor\": %.2f%s%s%s}\n",
                    o.size_bytes, static_cast<unsigned long long>(o.samples), cores, o.polling.c_str(),
                    oversubscribed ? "true" : "false", ic.median_us, ic.p99_us, k.median_us, k.p99_us, fl.median_us,
                    r_kernel, r_floor, ic.error.empty() ? "" : ", \"error\": \"", ic.error.c_str(),
                    ic.error.empty() ? "" : "\"");
    } else {
        std::printf("bench rtt: %u-byte messages, one in flight, %llu samples each; host has %u cores\n",
                    o.size_bytes, static_cast<unsigned long long>(o.samples), cores);
        std::printf("  %-58s %10s %10s\n", "path", "median us", "p99 us");
        std::printf("  %-58s %10.2f %10.2f\n",
                    ("iccs: 2 clusters over memif, polling " + o.polling).c_str(), ic.median_us, ic.p99_us);
        std::printf("  %-58s %10.2f %10.2f\n", "kernel: UDP on loopback, 2 processes, blocking sockets", k.median_us,
                    k.p99_us);
        std::printf("  %-58s %10.2f %10.2f\n", "floor: one shared cache line, 2 pinned processes", fl.median_us,
                    fl.p99_us);
        std::printf("  ratio to kernel %.3f (target <= 0.05 with inline polling), ratio to floor %.1f\n", r_kernel,
                    r_floor);
        if (oversubscribed)
            std::printf("  note: %u spinning threads on %u cores: this is an oversubscribed figure, not a "
                        "dedicated-core one\n",
                        spinning, cores);
        if (!ic.error.empty()) std::printf("  iccs: %s\n", ic.error.c_str());
    }
    return ic.error.empty() ? 0 : 1;
}

}  // namespace iccs
