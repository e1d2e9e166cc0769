// bench_stripe.cpp: see bench_stripe.hpp.
//
// Each measurement is a real two-cluster run (processes, proxies, fabric): thread 0 of cluster 0
// opens one parallel connection to thread 0 of cluster 1 and sends N messages as fast as the
// window lets it; the receiver times from its first message to its last and writes the figure
// to a file the benchmark reads. The kernel baseline is a TCP stream over loopback between two
// processes carrying the same messages (one write/read loop per message).
#include "bench_stripe.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

#include "bench_paths.hpp"
#include "bench_paths.hpp"
#include "cluster.hpp"

namespace iccs {

namespace {

double median(std::vector<double> v) { return spread_of(std::move(v)).median; }

// One run: seconds from the receiver's first message to its last (0 on failure). slow_us > 0:
// proxy 1 of each cluster pauses that long after each busy iteration; *share_p1 gets the
// fraction of the sender's messages that went to proxy 1.
double stream_run(const BenchStripeOptions& o, uint16_t proxies, Dispatch d, uint32_t size, uint32_t messages,
                  uint32_t slow_us = 0, double* share_p1 = nullptr) {
    ClusterPlan plan;
    plan.clusters = 2;
    plan.threads = 1;
    plan.proxies_per_cluster = {proxies, proxies};
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    for (uint16_t p = 0; p < proxies; ++p) plan.proxy_cores.push_back((p + 1) % cores);
    plan.compute_cores = {0, cores > 1 ? 1u : 0u};
    plan.polling = o.polling == "busy" ? Polling::kBusy : o.polling == "inline" ? Polling::kInline : Polling::kAdaptive;
    plan.fabric = o.fabric;
    plan.pcap_dir = bench_capture_dir(o.pcap_dir, "stripe-" + std::to_string(proxies) + "proxies", o.fabric);
    plan.udp_port = bench_udp_port();  // a range of the benchmarks' own (bench_paths.hpp)
    plan.conv.dispatch = d;
    plan.messages = messages;
    plan.min_size = plan.max_size = size;
    plan.pool_segments = 16384;
    plan.quiet = true;
    plan.workload = "stream";
    plan.impair.slow_proxy = 1;
    plan.impair.slow_us = slow_us;
    plan.result_file = "/tmp/iccs-stripe-" + std::to_string(getpid()) + ".txt";
    std::remove(plan.result_file.c_str());
    plan.program = [](ComputeEnv& env) -> bool {
        const ClusterPlan& p = env.plan;
        Convergence& conv = env.conv;
        if (env.thread != 0) return true;
        std::vector<uint8_t> buf(p.max_size, 0x5a);
        Connection* c = nullptr;
        if (p.cluster_id == 1) {
            conv.listen(1000);
            if (conv.accept(1000, c, 60'000'000) != ConvError::kOk) return false;
            RecvMsg m;
            uint64_t t0 = 0;
            for (uint64_t i = 0; i < p.messages; ++i) {
                if (conv.recv_msg(c, m, 60'000'000) != ConvError::kOk) return false;
                if (i == 0) t0 = now_ns();
                ++env.result.received;
            }
            const double s = static_cast<double>(now_ns() - t0) / 1e9;
            if (FILE* f = std::fopen(p.result_file.c_str(), "w")) {
                std::fprintf(f, "%.9f\n", s);
                std::fclose(f);
            }
            return conv.recv_msg(c, m, 60'000'000) == ConvError::kEndOfStream && conv.close(c, 0) == ConvError::kOk;
        }
        ConvError e;
        while ((e = conv.connect(Endpoint{1, 1000}, c)) == ConvError::kRefused)
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        if (e != ConvError::kOk) return false;
        for (uint64_t i = 0; i < p.messages; ++i) {
            if (conv.send(c, buf.data(), p.max_size) != ConvError::kOk) return false;
            ++env.result.sent;
        }
        const ConvCounters& k = conv.counters();
        if (FILE* f = std::fopen((p.result_file + ".share").c_str(), "w")) {
            std::fprintf(f, "%.6f\n", static_cast<double>(k.to_proxy[1]) /
                                          static_cast<double>(std::max<uint64_t>(1, k.to_proxy[0] + k.to_proxy[1])));
            std::fclose(f);
        }
        return conv.close(c, 60'000'000) == ConvError::kOk;
    };
    if (launch_clusters(plan, 600) != 0) return 0;
    std::ifstream f(plan.result_file);
    double s = 0;
    f >> s;
    std::remove(plan.result_file.c_str());
    std::ifstream fs(plan.result_file + ".share");
    double share = 0;
    fs >> share;
    if (share_p1 != nullptr) *share_p1 = share;
    std::remove((plan.result_file + ".share").c_str());
    return s;
}

// The kernel baseline: the same messages over one TCP connection on loopback (2 processes).
double tcp_run(uint32_t size, uint32_t messages) {
    const int ls = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    if (ls < 0 || bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(ls, 1) != 0 ||
        getsockname(ls, reinterpret_cast<sockaddr*>(&a), &alen) != 0)
        return 0;
    const pid_t pid = fork();
    if (pid == 0) {  // the sender
        const int s = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) _exit(1);
        const int one = 1;
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        std::vector<uint8_t> buf(size, 0x5a);
        for (uint32_t i = 0; i < messages; ++i)
            for (uint32_t off = 0; off < size;) {
                const ssize_t n = write(s, buf.data() + off, size - off);
                if (n <= 0) _exit(1);
                off += static_cast<uint32_t>(n);
            }
        close(s);
        _exit(0);
    }
    const int s = accept(ls, nullptr, nullptr);
    close(ls);
    std::vector<uint8_t> buf(size);
    uint64_t t0 = 0;
    bool ok = s >= 0;
    for (uint32_t i = 0; i < messages && ok; ++i) {
        for (uint32_t off = 0; off < size && ok;) {
            const ssize_t n = read(s, buf.data() + off, size - off);
            ok = n > 0;
            if (ok) off += static_cast<uint32_t>(n);
            if (i == 0 && t0 == 0) t0 = now_ns();
        }
    }
    const double secs = static_cast<double>(now_ns() - t0) / 1e9;
    if (s >= 0) close(s);
    int st = 0;
    waitpid(pid, &st, 0);
    return ok ? secs : 0;
}

}  // namespace

int bench_stripe(const BenchStripeOptions& o) {
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    const uint16_t proxy_counts[] = {1, 2, 4};
    const Dispatch policies[] = {Dispatch::kFixed, Dispatch::kRoundRobin, Dispatch::kLeastLoaded};
    auto progress = [&](const std::string& what) {
        if (!o.json) std::fprintf(stderr, "bench stripe: %s ...\n", what.c_str());
    };
    // Throughput [MB/s] of big messages, median of runs.
    auto mbps = [&](double secs, uint32_t size, uint32_t n) {
        // first to last message: n - 1 messages' worth of time
        return secs > 0 ? static_cast<double>(size) * (n - 1) / secs / 1e6 : 0.0;
    };
    if (!o.pcap_dir.empty())
        std::fprintf(stderr, "bench stripe: capturing every run to %s/stripe-<P>proxies-%s-N/cluster<C>-proxy<P>.pcapng "
                             "(N counts the runs; decode with tshark -o iccs.udp_port:%u); the iccs figures include the capture's "
                             "cost\n",
                     o.pcap_dir.c_str(), o.fabric.c_str(), bench_udp_port());
    std::vector<double> tcp;
    for (uint32_t r = 0; r < o.runs; ++r) tcp.push_back(mbps(tcp_run(o.big_bytes, o.big_messages), o.big_bytes, o.big_messages));
    const double tcp_mbps = median(tcp);
    double big[3] = {};
    for (int k = 0; k < 3; ++k) {
        progress(std::to_string(proxy_counts[k]) + " proxies, " + std::to_string(o.big_bytes) + "-byte messages");
        std::vector<double> v;
        for (uint32_t r = 0; r < o.runs; ++r)
            v.push_back(mbps(stream_run(o, proxy_counts[k], Dispatch::kRoundRobin, o.big_bytes, o.big_messages),
                             o.big_bytes, o.big_messages));
        big[k] = median(v);
    }
    double rate[3] = {};
    for (int k = 0; k < 3; ++k) {
        progress(std::string(to_string(policies[k])) + " dispatch, " + std::to_string(o.small_bytes) + "-byte messages");
        std::vector<double> v;
        for (uint32_t r = 0; r < o.runs; ++r) {
            const double s = stream_run(o, 2, policies[k], o.small_bytes, o.small_messages);
            v.push_back(s > 0 ? (o.small_messages - 1) / s : 0.0);
        }
        rate[k] = median(v);
    }
    // A proxy slowed on purpose (500 us pause per busy iteration): what least-loaded buys.
    double slowed_rate[2] = {}, slowed_share[2] = {};
    const Dispatch slowed_policies[2] = {Dispatch::kRoundRobin, Dispatch::kLeastLoaded};
    for (int k = 0; k < 2; ++k) {
        progress(std::string(to_string(slowed_policies[k])) + " dispatch, proxy 1 slowed");
        std::vector<double> v, sh;
        for (uint32_t r = 0; r < o.runs; ++r) {
            double share = 0;
            const uint32_t n = o.small_messages / 4;
            const double s = stream_run(o, 2, slowed_policies[k], o.small_bytes, n, 500, &share);
            v.push_back(s > 0 ? (n - 1) / s : 0.0);
            sh.push_back(share);
        }
        slowed_rate[k] = median(v);
        slowed_share[k] = median(sh);
    }
    // Each cluster: 1 compute thread + P proxies; two clusters on this host.
    const unsigned threads_needed = 2 * (1 + 4);
    const bool functional_only = cores < threads_needed;
    bool failed = tcp_mbps == 0;
    for (double b : big) failed |= b == 0;
    for (double r : rate) failed |= r == 0;
    for (double r : slowed_rate) failed |= r == 0;
    if (o.json) {
        std::printf("{\"cores\": %u, \"fabric\": \"%s\", \"polling\": \"%s\", \"runs\": %u, \"big_bytes\": %u, "
                    "\"big_messages\": %u, \"kernel_tcp_mb_per_s\": %.1f, \"mb_per_s_1_proxy\": %.1f, "
                    "\"mb_per_s_2_proxies\": %.1f, \"mb_per_s_4_proxies\": %.1f, \"ratio_2_to_1\": %.3f, "
                    "\"ratio_4_to_1\": %.3f, \"ratio_1_proxy_to_kernel\": %.3f, \"small_bytes\": %u, "
                    "\"small_messages\": %u, \"msgs_per_s_fixed\": %.0f, \"msgs_per_s_round_robin\": %.0f, "
                    "\"msgs_per_s_least_loaded\": %.0f, \"slowed_msgs_per_s_round_robin\": %.0f, "
                    "\"slowed_msgs_per_s_least_loaded\": %.0f, \"slowed_share_round_robin\": %.3f, "
                    "\"slowed_share_least_loaded\": %.3f, \"functional_only\": %s}\n",
                    cores, o.fabric.c_str(), o.polling.c_str(), o.runs, o.big_bytes, o.big_messages, tcp_mbps, big[0],
                    big[1], big[2], big[0] > 0 ? big[1] / big[0] : 0, big[0] > 0 ? big[2] / big[0] : 0,
                    tcp_mbps > 0 ? big[0] / tcp_mbps : 0, o.small_bytes, o.small_messages, rate[0], rate[1], rate[2],
                    slowed_rate[0], slowed_rate[1], slowed_share[0], slowed_share[1], functional_only ? "true" : "false");
    } else {
        std::printf("bench stripe: fabric %s, polling %s, 2 clusters x 1 compute thread, one parallel connection, "
                    "median of %u runs; host has %u cores\n",
                    o.fabric.c_str(), o.polling.c_str(), o.runs, cores);
        std::printf("  %u x %u-byte messages          MB/s     vs 1 proxy   vs kernel TCP\n", o.big_messages, o.big_bytes);
        std::printf("    kernel TCP loopback      %9.1f         -           1.00\n", tcp_mbps);
        for (int k = 0; k < 3; ++k)
            std::printf("    iccs, %u prox%s/cluster   %9.1f      %6.2f        %6.2f\n", proxy_counts[k],
                        proxy_counts[k] == 1 ? "y  " : "ies", big[k], big[0] > 0 ? big[k] / big[0] : 0,
                        tcp_mbps > 0 ? big[k] / tcp_mbps : 0);
        std::printf("  %u x %u-byte messages, 2 proxies/cluster   messages/s\n", o.small_messages, o.small_bytes);
        for (int k = 0; k < 3; ++k)
            std::printf("    %-14s                      %10.0f\n", std::string(to_string(policies[k])).c_str(), rate[k]);
        std::printf("  %u x %u-byte messages, proxy 1 slowed (500 us per busy iteration)   messages/s   share to proxy 1\n",
                    o.small_messages / 4, o.small_bytes);
        for (int k = 0; k < 2; ++k)
            std::printf("    %-14s                      %10.0f       %5.1f%%\n",
                        std::string(to_string(slowed_policies[k])).c_str(), slowed_rate[k], 100 * slowed_share[k]);
        if (functional_only)
            std::printf("  note: these runs need up to %u threads (2 clusters x (1 compute thread + 4 proxies)) and "
                        "this host has %u cores: the proxies share cores, so the figures are functional, not a "
                        "measure of striping's speed-up\n",
                        threads_needed, cores);
    }
    if (failed) std::fprintf(stderr, "bench stripe: a run failed (a figure is 0)\n");
    return failed ? 1 : 0;
}

}  // namespace iccs
