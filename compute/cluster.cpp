// cluster.cpp: see cluster.hpp.
#include "cluster.hpp"

#include <pthread.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <rte_telemetry.h>
#include <sched.h>
#include <signal.h>
#include <execinfo.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "conv_hdr.hpp"
#include "slidwin_hdr.hpp"
#include "dpdk_env.hpp"

namespace iccs {

namespace {

std::atomic<bool> g_stop{false};  // SIGTERM/SIGINT in a cluster process: stop cleanly
std::atomic<uint32_t> g_dones{0};  // end-of-run messages received from other clusters

constexpr uint32_t kDoneMsg = 0xffffffffu;  // msg_id of the end-of-run message between clusters

void pin_self(unsigned cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// The message (src cluster, src thread) -> (dst cluster, dst thread) number i: its size and bytes
// follow from these numbers, so the receiver can check it without any table.
uint32_t msg_size(const ClusterPlan& p, uint32_t src_c, uint32_t src_t, uint32_t dst_c, uint32_t dst_t, uint64_t i) {
    std::mt19937_64 g(p.seed ^ (uint64_t{src_c} << 48) ^ (uint64_t{src_t} << 40) ^ (uint64_t{dst_c} << 32) ^
                      (uint64_t{dst_t} << 24) ^ (i * 0x9e3779b97f4a7c15ull));
    return p.min_size + static_cast<uint32_t>(g() % (uint64_t{p.max_size} - p.min_size + 1));
}
inline uint8_t msg_byte(uint32_t src_c, uint32_t src_t, uint64_t i, uint32_t k) {
    return static_cast<uint8_t>(k * 31 + i * 7 + src_c * 13 + src_t * 5);
}

PktBuf* make_msg(PktPool& pool, uint16_t src_c, uint16_t src_t, uint16_t dst_c, uint16_t dst_t, uint32_t msg_id,
                 uint32_t size, const uint8_t* pattern_src) {
    PktBuf* m = pkt_alloc(pool);
    if (m == nullptr) return nullptr;
    uint8_t* h = pkt_append(m, kConvHdrLen);
    store_u64(h, wire16(src_c) | wire16(dst_c) << 16 | wire16(src_t) << 32 | wire16(dst_t) << 48);
    store_u64(h + 8, wire32(msg_id) | wire32(msg_id) << 32);  // conn_seq = msg_id for this workload
    store_u64(h + 16, wire16(0) | wire16(1) << 16 | wire32(size) << 32);
    store_u64(h + 24, __builtin_bswap64(monotonic_ns()));  // enq_ns: the message time starts here
    if (size > 0 && !pkt_write(m, pool, pattern_src, size)) {
        pkt_free(m);
        return nullptr;
    }
    return m;
}

struct ThreadResult {
    uint64_t sent = 0, received = 0, corrupt = 0, duplicates = 0, missing = 0;
};

// The state a compute thread of the workload works on.
struct ComputeCtx {
    const ClusterPlan* plan;
    MempoolPktPool* pool;
    ClusterRings* rings;
    std::vector<std::unique_ptr<Proxy>>* proxies;
    uint16_t thread;
    ThreadResult result;
};

void poll_inline(ComputeCtx& c) {
    if (c.plan->polling != Polling::kInline) return;
    const uint64_t now = monotonic_ns();
    for (auto& p : *c.proxies) p->try_poll_inline(now);
}

// Receive what is waiting; returns messages taken. Checks each against the workload's rule.
uint32_t receive_some(ComputeCtx& c, std::vector<std::vector<uint8_t>>& seen) {
    void* in[32];
    const unsigned n = rte_ring_sc_dequeue_burst(c.rings->to_thread(c.thread), in, 32, nullptr);
    std::vector<uint8_t> buf;
    for (unsigned i = 0; i < n; ++i) {
        PktBuf* m = static_cast<PktBuf*>(in[i]);
        uint8_t hb[kConvHdrLen];
        const uint8_t* h = pkt_contig(m, 0, kConvHdrLen, hb);
        const uint16_t src_c = load_be16(h + offsetof(ConvHdr, src_cluster));
        const uint16_t src_t = load_be16(h + offsetof(ConvHdr, src_port));
        const uint32_t id = load_be32(h + offsetof(ConvHdr, msg_id));
        const uint32_t len = load_be32(h + offsetof(ConvHdr, msg_len));
        if (id == kDoneMsg) {  // a cluster that finished early may say so while we still work
            g_dones.fetch_add(1);
            pkt_free(m);
            continue;
        }
        const ClusterPlan& p = *c.plan;
        bool ok = src_c < p.clusters && src_c != p.cluster_id && src_t < p.threads && id < p.messages &&
                  len == msg_size(p, src_c, src_t, p.cluster_id, c.thread, id) && m->pkt_len == kConvHdrLen + len;
        if (ok) {
            buf.resize(len);
            pkt_read(m, kConvHdrLen, len, buf.data());
            for (uint32_t k = 0; k < len && ok; ++k) ok = buf[k] == msg_byte(src_c, src_t, id, k);
        }
        if (!ok) {
            ++c.result.corrupt;
        } else {
            uint8_t& flag = seen[src_c * p.threads + src_t][id];
            if (flag) {
                ++c.result.duplicates;
            } else {
                flag = 1;
                ++c.result.received;
            }
        }
        pkt_free(m);
    }
    return n;
}

void compute_thread(ComputeCtx& c) {
    const ClusterPlan& p = *c.plan;
    if (!p.compute_cores.empty())
        pin_self(p.compute_cores[(p.cluster_id * p.threads + c.thread) % p.compute_cores.size()]);
    const uint16_t nprox = p.proxies_per_cluster[p.cluster_id];
    // Dispatch (DESIGN.md §1): fixed = proxy t mod P; round-robin = the next proxy each message;
    // least-loaded = the proxy whose ring from this thread is shortest. Without the convergence
    // layer nothing restores order across proxies; alltoall checks exactly-once, not order.
    uint16_t rr = static_cast<uint16_t>(c.thread % nprox);
    auto pick_proxy = [&]() -> uint16_t {
        switch (p.dispatch) {
            case Dispatch::kFixed:
                return static_cast<uint16_t>(c.thread % nprox);
            case Dispatch::kRoundRobin:
                rr = static_cast<uint16_t>((rr + 1) % nprox);
                return rr;
            case Dispatch::kLeastLoaded: {
                uint16_t best = 0;
                unsigned best_n = UINT32_MAX;
                for (uint16_t q = 0; q < nprox; ++q) {
                    const unsigned n = rte_ring_count(c.rings->to_proxy(c.thread, q));
                    if (n < best_n) {
                        best_n = n;
                        best = q;
                    }
                }
                return best;
            }
        }
        return 0;
    };
    uint16_t target = pick_proxy();
    Waker& my_waker = c.rings->thread_waker(c.thread);
    std::vector<std::vector<uint8_t>> seen(static_cast<size_t>(p.clusters) * p.threads,
                                           std::vector<uint8_t>(p.messages, 0));
    const uint64_t expected = uint64_t{p.clusters - 1u} * p.threads * p.messages;
    // destinations: every thread of every other cluster, round-robin
    std::vector<std::pair<uint16_t, uint16_t>> dsts;
    for (uint16_t dc = 0; dc < p.clusters; ++dc)
        if (dc != p.cluster_id)
            for (uint16_t dt = 0; dt < p.threads; ++dt) dsts.emplace_back(dc, dt);
    const uint64_t to_send = dsts.size() * p.messages;
    std::vector<uint8_t> pattern(p.max_size);
    uint64_t next = 0;
    PktBuf* pending = nullptr;
    uint64_t idle_since = monotonic_ns();
    while (!g_stop.load(std::memory_order_relaxed) && (next < to_send || pending != nullptr ||
                                                       c.result.received + c.result.corrupt < expected)) {
        bool progress = false;
        // send a burst
        for (int k = 0; k < 32 && (next < to_send || pending != nullptr); ++k) {
            if (pending == nullptr) {
                const auto [dc, dt] = dsts[next % dsts.size()];
                const uint64_t id = next / dsts.size();
                const uint32_t size = msg_size(p, p.cluster_id, c.thread, dc, dt, id);
                for (uint32_t b = 0; b < size; ++b) pattern[b] = msg_byte(p.cluster_id, c.thread, id, b);
                pending = make_msg(*c.pool, p.cluster_id, c.thread, dc, dt, static_cast<uint32_t>(id), size,
                                   pattern.data());
                if (pending == nullptr) break;  // pool empty: receive and let acks free buffers
            }
            if (rte_ring_sp_enqueue(c.rings->to_proxy(c.thread, target), pending) != 0) break;  // full: backpressure
            c.rings->proxy_waker(target).wake();
            pending = nullptr;
            ++next;
            ++c.result.sent;
            progress = true;
            target = pick_proxy();
        }
        if (receive_some(c, seen) > 0) progress = true;
        poll_inline(c);
        const uint64_t now = monotonic_ns();
        if (progress) {
            idle_since = now;
        } else if (p.polling != Polling::kInline && now - idle_since > 50'000) {
            my_waker.prepare_sleep();
            if (rte_ring_count(c.rings->to_thread(c.thread)) == 0) my_waker.sleep(500);
            else my_waker.cancel_sleep();
        } else if (p.polling == Polling::kInline && now - idle_since > 50'000) {
            std::this_thread::yield();
        }
    }
    if (pending != nullptr) pkt_free(pending);
    c.result.missing = expected - std::min(expected, c.result.received);
}

// The ping-pong of `iccs bench rtt`: one message in flight, timed by the sender.
void pingpong_thread(ComputeCtx& c) {
    const ClusterPlan& p = *c.plan;
    if (c.thread != 0 || p.cluster_id > 1) return;
    if (!p.compute_cores.empty()) pin_self(p.compute_cores[(p.cluster_id * p.threads) % p.compute_cores.size()]);
    const bool pinger = p.cluster_id == 0;
    const uint16_t peer = pinger ? 1 : 0;
    rte_ring* out = c.rings->to_proxy(0, 0);
    rte_ring* in = c.rings->to_thread(0);
    std::vector<uint8_t> pattern(std::max<uint32_t>(p.min_size, 1), 0x5a);
    std::vector<uint64_t> rtt;
    rtt.reserve(p.messages);
    const uint64_t rounds = p.warmup + p.messages;
    for (uint64_t i = 0; i < rounds && !g_stop.load(std::memory_order_relaxed); ++i) {
        const uint64_t t0 = monotonic_ns();
        if (pinger) {
            PktBuf* m = nullptr;
            while (m == nullptr && !g_stop) m = make_msg(*c.pool, 0, 0, peer, 0, static_cast<uint32_t>(i), p.min_size,
                                                          pattern.data());
            while (rte_ring_sp_enqueue(out, m) != 0 && !g_stop) poll_inline(c);
            c.rings->proxy_waker(0).wake();
            ++c.result.sent;
        }
        void* got = nullptr;
        // Wait for the answer: an inline run drives the stack here and spins; with proxy threads,
        // spin a little, then sleep until the proxy wakes us (spinning would starve the proxies
        // of a host with fewer cores than spinning threads).
        const uint64_t wait_start = monotonic_ns();
        while (rte_ring_sc_dequeue(in, &got) != 0 && !g_stop) {
            if (p.polling == Polling::kInline) {
                poll_inline(c);
            } else if (monotonic_ns() - wait_start <= 20'000) {
                sched_yield();  // a proxy woken on this core runs now, not after our time slice
            } else {
                Waker& w = c.rings->thread_waker(0);
                w.prepare_sleep();
                if (rte_ring_count(in) == 0) w.sleep(200); else w.cancel_sleep();
            }
        }
        if (got == nullptr) break;
        PktBuf* r = static_cast<PktBuf*>(got);
        ++c.result.received;
        if (pinger) {
            pkt_free(r);
            if (i >= p.warmup) rtt.push_back(monotonic_ns() - t0);
        } else {
            // answer with the same buffer's payload: a fresh message of the same size
            const uint32_t len = r->pkt_len - kConvHdrLen;
            pkt_free(r);
            PktBuf* m = nullptr;
            while (m == nullptr && !g_stop) m = make_msg(*c.pool, 1, 0, peer, 0, static_cast<uint32_t>(i), len,
                                                          pattern.data());
            while (rte_ring_sp_enqueue(out, m) != 0 && !g_stop) poll_inline(c);
            c.rings->proxy_waker(0).wake();
            ++c.result.sent;
        }
    }
    if (pinger && !p.result_file.empty() && !rtt.empty()) {
        std::sort(rtt.begin(), rtt.end());
        if (FILE* f = std::fopen(p.result_file.c_str(), "w")) {
            std::fprintf(f, "rtt_ns %llu %llu %llu %llu %zu\n", static_cast<unsigned long long>(rtt[rtt.size() / 2]),
                         static_cast<unsigned long long>(rtt[std::min(rtt.size() - 1, rtt.size() * 99 / 100)]),
                         static_cast<unsigned long long>(rtt.front()), static_cast<unsigned long long>(rtt.back()),
                         rtt.size());
            std::fclose(f);
        }
    }
    if (c.result.received < rounds) c.result.missing = rounds - c.result.received;
}

// The one-way stream of `iccs bench compare`: thread 0 of cluster 0 sends `messages` messages of
// min_size bytes to thread 0 of cluster 1 as fast as rings and window take them; cluster 1 answers
// the last one. The sender times its first send to that answer (one one-way trip over the whole
// stream) and writes "stream_ns ELAPSED MESSAGES" to result_file.
void stream_thread(ComputeCtx& c) {
    const ClusterPlan& p = *c.plan;
    if (c.thread != 0 || p.cluster_id > 1) return;
    if (!p.compute_cores.empty()) pin_self(p.compute_cores[(p.cluster_id * p.threads) % p.compute_cores.size()]);
    const bool sender = p.cluster_id == 0;
    rte_ring* out = c.rings->to_proxy(0, 0);
    rte_ring* in = c.rings->to_thread(0);
    std::vector<uint8_t> pattern(std::max<uint32_t>(p.min_size, 1), 0x5a);
    // Nothing to do: an inline run drives the stack here; with proxy threads, let them run.
    auto stalled = [&] {
        if (p.polling == Polling::kInline) poll_inline(c);
        else sched_yield();
    };
    auto send = [&](uint16_t src_c, uint16_t dst_c, uint64_t id) {
        PktBuf* m = nullptr;
        while (m == nullptr && !g_stop) {
            m = make_msg(*c.pool, src_c, 0, dst_c, 0, static_cast<uint32_t>(id), p.min_size, pattern.data());
            if (m == nullptr) stalled();  // pool empty: acks free buffers
        }
        while (m != nullptr && rte_ring_sp_enqueue(out, m) != 0 && !g_stop) stalled();
        c.rings->proxy_waker(0).wake();
        ++c.result.sent;
    };
    auto receive = [&]() -> bool {
        void* got = nullptr;
        const uint64_t wait_start = monotonic_ns();
        while (rte_ring_sc_dequeue(in, &got) != 0) {
            if (g_stop) return false;
            if (p.polling == Polling::kInline) {
                poll_inline(c);
            } else if (monotonic_ns() - wait_start <= 20'000) {
                sched_yield();
            } else {
                Waker& w = c.rings->thread_waker(0);
                w.prepare_sleep();
                if (rte_ring_count(in) == 0) w.sleep(200); else w.cancel_sleep();
            }
        }
        pkt_free(static_cast<PktBuf*>(got));
        ++c.result.received;
        return true;
    };
    if (sender) {
        const uint64_t t0 = monotonic_ns();
        for (uint64_t i = 0; i < p.messages && !g_stop; ++i) send(0, 1, i);
        const bool answered = receive();
        const uint64_t elapsed = monotonic_ns() - t0;
        if (answered && !p.result_file.empty())
            if (FILE* f = std::fopen(p.result_file.c_str(), "w")) {
                std::fprintf(f, "stream_ns %llu %llu\n", static_cast<unsigned long long>(elapsed),
                             static_cast<unsigned long long>(p.messages));
                std::fclose(f);
            }
        if (c.result.received < 1) c.result.missing = 1;
    } else {
        while (c.result.received < p.messages && receive()) {
        }
        if (c.result.received == p.messages) send(1, 0, 0);
        c.result.missing = p.messages - c.result.received;
    }
}

int proxy_lcore_main(void* arg) {
    static_cast<Proxy*>(arg)->run();
    return 0;
}

// ---- telemetry: /iccs/proxies and /iccs/proxy/stats,<n> (DESIGN.md §6)
std::vector<std::unique_ptr<Proxy>>* g_proxies = nullptr;
std::mutex g_proxies_mu;  // telemetry callbacks run on DPDK's control thread, teardown on main

int tel_proxies(const char*, const char*, rte_tel_data* d) {
    std::lock_guard<std::mutex> lock(g_proxies_mu);
    rte_tel_data_start_array(d, RTE_TEL_INT_VAL);
    if (g_proxies != nullptr)
        for (size_t i = 0; i < g_proxies->size(); ++i) rte_tel_data_add_array_int(d, static_cast<int>(i));
    return 0;
}

int tel_proxy_stats(const char*, const char* params, rte_tel_data* d) {
    std::lock_guard<std::mutex> lock(g_proxies_mu);
    if (g_proxies == nullptr || params == nullptr) return -1;
    char* end = nullptr;
    const long n = std::strtol(params, &end, 10);
    if (end == params || n < 0 || static_cast<size_t>(n) >= g_proxies->size()) return -1;
    const Proxy& px = *(*g_proxies)[static_cast<size_t>(n)];
    const ProxySnapshot s = px.snapshot();
    rte_tel_data_start_dict(d);
    rte_tel_data_add_dict_u64(d, "cluster", px.config().cluster);
    rte_tel_data_add_dict_u64(d, "proxy", px.config().index);
    auto add = [d](const char* name, const char*, uint64_t v) { rte_tel_data_add_dict_u64(d, name, v); };
    s.proxy.for_each(add);
    s.slidwin.for_each(add);
    s.stack.for_each(add);
    // message time (DESIGN.md §6): mean, quantile bounds, and the log2 histogram's non-empty buckets
    rte_tel_data_add_dict_u64(d, "msg_time_mean_ns",
                              s.proxy.msg_time_count ? s.proxy.msg_time_sum_ns / s.proxy.msg_time_count : 0);
    rte_tel_data_add_dict_u64(d, "msg_time_p50_below_ns", msg_time_quantile_ns(s.proxy, 0.50));
    rte_tel_data_add_dict_u64(d, "msg_time_p99_below_ns", msg_time_quantile_ns(s.proxy, 0.99));
    for (uint32_t b = 0; b < kMsgTimeBuckets; ++b)
        if (s.proxy.msg_time_hist[b] != 0)
            rte_tel_data_add_dict_u64(d, ("msg_time_hist_lt_" + std::to_string(uint64_t{2} << b) + "_ns").c_str(),
                                      s.proxy.msg_time_hist[b]);
    rte_tel_data_add_dict_u64(d, "port_rx_frames", s.port_rx);
    rte_tel_data_add_dict_u64(d, "port_tx_frames", s.port_tx);
    rte_tel_data_add_dict_u64(d, "port_tx_ring_full", s.port_tx_ring_full);
    if (s.kernel_udp) {  // fabric udp: the io_uring socket's own counters
        s.uring.for_each([d](const char* name, const char*, uint64_t v) {
            rte_tel_data_add_dict_u64(d, ("uring_" + std::string(name)).c_str(), v);
        });
    }
    return 0;
}

}  // namespace

Ipv4Addr proxy_ip(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy) {
    return Ipv4Addr{plan.base_ip + uint32_t{cluster} * 256 + proxy + 1};
}

MacAddr proxy_mac(uint16_t cluster, uint16_t proxy) {
    return MacAddr{{0x02, 0x00, 0x0a, 0x00, static_cast<uint8_t>(cluster), static_cast<uint8_t>(proxy)}};
}

std::string pci_address(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy) {
    // One entry per proxy of every cluster (all clusters on this host), or per proxy of one
    // cluster (one cluster per host): the configuration checks the count.
    const size_t all = size_t{plan.clusters} * plan.proxies_per_cluster[cluster];
    const size_t i = plan.pci_addresses.size() >= all ? size_t{cluster} * plan.proxies_per_cluster[cluster] + proxy : proxy;
    return i < plan.pci_addresses.size() ? plan.pci_addresses[i] : std::string();
}

Ipv4Addr udp_ip(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy) {
    return udp_socket_ip(plan.udp_addresses, plan.clusters, plan.proxies_per_cluster[cluster], cluster, proxy);
}

uint16_t udp_port(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy) {
    return udp_socket_port(plan.udp_port, cluster, proxy);
}

std::string afp_ifname(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy) {
    // IFNAMSIZ is 16: "ic" + run + "c" + cluster + "p" + proxy stays within it for pids < 10^7
    return "ic" + plan.run_id + "c" + std::to_string(cluster) + "p" + std::to_string(proxy);
}

std::string eal_prefix(const ClusterPlan& plan, uint16_t cluster) {
    return "iccs-" + plan.run_id + "-c" + std::to_string(cluster);
}

static std::string link_socket(const ClusterPlan& plan, uint16_t c1, uint16_t p1, uint16_t c2, uint16_t p2) {
    if (c2 < c1 || (c2 == c1 && p2 < p1)) {
        std::swap(c1, c2);
        std::swap(p1, p2);
    }
    return plan.sock_dir + "/memif-" + std::to_string(c1) + "." + std::to_string(p1) + "-" + std::to_string(c2) +
           "." + std::to_string(p2) + ".sock";
}

ClusterReport run_cluster(const ClusterPlan& plan) {
    ClusterReport rep;
    const uint16_t me = plan.cluster_id;
    const uint16_t nprox = plan.proxies_per_cluster[me];
    const std::string prefix = eal_prefix(plan, me);
    signal(SIGTERM, [](int) { g_stop.store(true); });
    signal(SIGINT, [](int) { g_stop.store(true); });

    EalOptions eo;
    eo.file_prefix = prefix;
    // lcore 0: the main thread; lcores 1..P: the proxies, each on its configured core.
    eo.lcore_cpus.push_back(plan.compute_cores.empty()
                                ? 0
                                : plan.compute_cores[(me * plan.threads) % plan.compute_cores.size()]);
    if (plan.polling != Polling::kInline)
        for (uint16_t p = 0; p < nprox; ++p) eo.lcore_cpus.push_back(plan.proxy_cores[p]);
    const uint32_t links_per_proxy = [&] {
        uint32_t n = 0;
        for (uint16_t c = 0; c < plan.clusters; ++c) n += c == me ? 0 : plan.proxies_per_cluster[c];
        return n;
    }();
    // RX mbufs a proxy can have outstanding at once, each frame one mbuf: every sub-connection's
    // receive buffer full of the largest datagrams, the reassembly cap, the compute threads'
    // rings full, and a burst per port. Fewer and the receive buffers can starve the port of
    // mbufs, so the missing datagram that would drain them can never arrive.
    // Fabric udp: the same, counted in the 2 KiB segments a received datagram is copied into (the
    // kernel reassembles: no fragments, no reassembly cap).
    const bool kernel_udp = plan.fabric == "udp";
    const uint32_t frags_per_msg =
        kernel_udp ? (plan.max_size + kConvHdrLen + kSlidwinHdrLen + kDgramAddrLen) / 2048 + 1
                   : (plan.max_size + kConvHdrLen + kSlidwinHdrLen + 8) / (plan.mtu_bytes - 28) + 1;
    const uint32_t rx_mbufs = links_per_proxy * plan.slidwin.rcv_buf_datagrams * frags_per_msg +
                              (kernel_udp ? 0 : plan.reass.max_bytes / 2048) +
                              plan.threads * plan.ring_entries * frags_per_msg + 1024 * (links_per_proxy + 1);
    constexpr uint32_t kStackSegs = 16384, kStackSegBytes = 512;  // acks, fragment headers, copies
    // -m: the pools above plus a quarter for DPDK's own overhead (mempool headers, caches, rings).
    const uint64_t pools_mb = 64 + uint64_t{plan.pool_segments} * 2432 / (1 << 20) +
                              nprox * (uint64_t{rx_mbufs} * 2560 / (1 << 20) +
                                       uint64_t{kStackSegs} * (kStackSegBytes + 384) / (1 << 20) + 16);
    eo.memory_mb = static_cast<uint32_t>(pools_mb + pools_mb / 4);
    if (plan.fabric == "pci")
        for (uint16_t p = 0; p < nprox; ++p) eo.pci_allow.push_back(pci_address(plan, me, p));
    std::string err;
    if (!eal_start(eo, err)) {
        rep.error = err;
        return rep;
    }
    const auto t_start = std::chrono::steady_clock::now();
    {
        auto pool = MempoolPktPool::create(prefix + "-msg", plan.pool_segments, 2048 + kPktHeadroom, err);
        ClusterRings rings;
        std::vector<std::unique_ptr<MempoolPktPool>> stack_pools;  // one per proxy: never starved by compute threads
        std::vector<std::unique_ptr<Proxy>> proxies;
        std::vector<rte_mempool*> mempools;
        auto fail = [&](const std::string& e) {
            rep.error = e;
            return false;
        };
        auto setup = [&]() -> bool {
            if (!pool) return fail(err);
            if (!rings.create("c" + std::to_string(me), plan.threads, nprox, plan.ring_entries, err)) return fail(err);
            for (uint16_t p = 0; p < nprox; ++p) {
                ProxyConfig pc;
                pc.cluster = me;
                pc.index = p;
                pc.threads = plan.threads;
                pc.stack.mac = proxy_mac(me, p);
                pc.stack.ip = proxy_ip(plan, me, p);
                pc.stack.mtu_bytes = plan.mtu_bytes;
                pc.stack.reass = plan.reass;
                pc.slidwin = plan.slidwin;
                pc.udp_port = plan.udp_port;
                pc.polling = plan.polling;
                pc.impair = plan.impair;
                pc.proxies_per_cluster = plan.proxies_per_cluster;
                for (uint16_t c = 0; c < plan.clusters; ++c)
                    if (c != me)
                        for (uint16_t q = 0; q < plan.proxies_per_cluster[c]; ++q)
                            pc.peers.push_back(kernel_udp ? ProxyAddr{c, q, udp_ip(plan, c, q), proxy_mac(c, q),
                                                                      udp_port(plan, c, q)}
                                                          : ProxyAddr{c, q, proxy_ip(plan, c, q), proxy_mac(c, q)});
                const std::string pn = "c" + std::to_string(me) + "p" + std::to_string(p);
                // The proxy's own buffers (acks, fragment headers): if it drew from the pool the
                // compute threads fill, two clusters could each wait for the other's acks forever.
                stack_pools.push_back(MempoolPktPool::create(prefix + "-" + pn + "stk", kStackSegs,
                                                             kStackSegBytes + kPktHeadroom, err));
                if (!stack_pools.back()) return fail(err);
                auto px = std::make_unique<Proxy>(pc, *stack_pools.back(), rings);
                if (kernel_udp) {
                    // The kernel does IP and UDP: no port, no mbufs. Received datagrams are copied
                    // into a pool of the proxy's own, sized as the RX mbufs would be.
                    stack_pools.push_back(MempoolPktPool::create(prefix + "-" + pn + "urx", rx_mbufs,
                                                                 2048 + kPktHeadroom, err));
                    if (!stack_pools.back()) return fail(err);
                    UringUdpConfig uc;
                    uc.ip = udp_ip(plan, me, p);
                    uc.port = udp_port(plan, me, p);
                    if (!px->add_udp_socket(uc, *stack_pools.back(), err))
                        return fail("proxy " + std::to_string(me) + "." + std::to_string(p) + ": " + err);
                    proxies.push_back(std::move(px));
                    continue;
                }
                rte_mempool* rx = rte_pktmbuf_pool_create((pn + "rx").c_str(), rx_mbufs, 256, rx_priv_size(),
                                                          RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
                rte_mempool* desc = rte_pktmbuf_pool_create((pn + "txd").c_str(), 8192, 256, 0, 0, SOCKET_ID_ANY);
                if (rx == nullptr || desc == nullptr) return fail("cannot create the mbuf pools of proxy " + pn);
                mempools.push_back(rx);
                mempools.push_back(desc);
                if (plan.fabric == "memif") {
                    // A full mesh: one memif link per pair of proxies in different clusters; the
                    // lower cluster id serves the socket.
                    for (const ProxyAddr& peer : pc.peers) {
                        const std::string name = "net_memif_" + std::to_string(p) + "_" + std::to_string(peer.cluster) +
                                                 "_" + std::to_string(peer.index);
                        const std::string args = name + ",role=" + (me < peer.cluster ? "server" : "client") +
                                                 ",socket=" + link_socket(plan, me, p, peer.cluster, peer.index) +
                                                 ",socket-abstract=no";
                        if (!px->add_port(args, rx, desc, {peer.mac}, plan.link_timeout_ms, err)) return fail(err);
                    }
                } else if (plan.fabric == "pci") {
                    // The proxy's NI is one NIC port; a switch joins it to every remote proxy.
                    std::vector<MacAddr> reaches;
                    for (const ProxyAddr& peer : pc.peers) reaches.push_back(peer.mac);
                    if (!px->add_port(pci_address(plan, me, p), rx, desc, reaches, plan.link_timeout_ms, err))
                        return fail(err);
                } else if (plan.fabric == "af_packet") {
                    // The proxy's NI is a veth end on the run's Linux bridge (set up by the
                    // launcher): real kernel Ethernet between the clusters, visible to tcpdump.
                    std::vector<MacAddr> reaches;
                    for (const ProxyAddr& peer : pc.peers) reaches.push_back(peer.mac);
                    const std::string ifname = afp_ifname(plan, me, p);
                    const std::string args = "net_af_packet" + std::to_string(p) + ",iface=" + ifname +
                                             ",blocksz=4096,framesz=2048,framecnt=512";
                    if (!px->add_port(args, rx, desc, reaches, plan.link_timeout_ms, err)) return fail(err);
                } else {
                    return fail("fabric \"" + plan.fabric +
                                "\" is not available in cluster runs (memif, af_packet, pci and udp are)");
                }
                proxies.push_back(std::move(px));
            }
            for (auto& px : proxies)
                if (!px->wait_links(plan.link_timeout_ms, err)) return fail(err);
            const uint64_t now = monotonic_ns();
            for (auto& px : proxies) px->open_subconnections(now);
            return true;
        };
        bool ok = setup();
        if (ok) {
            {
                std::lock_guard<std::mutex> lock(g_proxies_mu);
                g_proxies = &proxies;
            }
            rte_telemetry_register_cmd("/iccs/proxies", tel_proxies, "Proxies of this cluster. No parameters");
            rte_telemetry_register_cmd("/iccs/proxy/stats", tel_proxy_stats,
                                       "Counters of one proxy. Parameter: proxy index");
            if (!plan.quiet) {
                // Which fabric and which I/O path (the kernel's, or DPDK's), in one line.
                std::string io = proxies.empty() ? std::string("-") : proxies[0]->io_path();
                if (plan.fabric == "udp")
                    io += "; sockets " + to_string(udp_ip(plan, me, 0)) + ":" + std::to_string(udp_port(plan, me, 0)) +
                          (nprox > 1 ? ".." + std::to_string(udp_port(plan, me, static_cast<uint16_t>(nprox - 1)))
                                     : std::string());
                std::fprintf(stderr, "cluster %u: %u proxies, %u compute threads, fabric %s (%s), polling %s, EAL %s\n",
                             me, nprox, plan.threads, plan.fabric.c_str(), io.c_str(),
                             plan.polling == Polling::kBusy ? "busy"
                             : plan.polling == Polling::kInline ? "inline" : "adaptive",
                             prefix.c_str());
            }
            if (plan.polling != Polling::kInline) {
                unsigned lcore = 0;
                uint16_t p = 0;
                RTE_LCORE_FOREACH_WORKER(lcore) {
                    if (p < proxies.size()) rte_eal_remote_launch(proxy_lcore_main, proxies[p++].get(), lcore);
                }
            }
            std::vector<ComputeCtx> ctx(plan.threads);
            std::vector<std::thread> threads;
            for (uint16_t t = 0; t < plan.threads; ++t) {
                ctx[t] = ComputeCtx{&plan, pool.get(), &rings, &proxies, t, {}};
                threads.emplace_back(plan.workload == "pingpong" ? pingpong_thread
                                     : plan.workload == "stream" ? stream_thread
                                                                 : compute_thread,
                                     std::ref(ctx[t]));
            }
            for (auto& th : threads) th.join();
            for (auto& c : ctx) {
                rep.sent += c.result.sent;
                rep.received += c.result.received;
                rep.corrupt += c.result.corrupt;
                rep.duplicates += c.result.duplicates;
                rep.missing += c.result.missing;
            }
            // End of run: tell every other cluster we have all we expected, then keep the
            // proxies running until every other cluster said the same and nothing is unacked.
            ComputeCtx main_ctx{&plan, pool.get(), &rings, &proxies, 0, {}};
            for (uint16_t c = 0; c < plan.clusters; ++c) {
                if (c == me) continue;
                PktBuf* m = nullptr;
                while (m == nullptr && !g_stop) {
                    m = make_msg(*pool, me, 0, c, 0, kDoneMsg, 0, nullptr);
                    if (m != nullptr && rte_ring_sp_enqueue(rings.to_proxy(0, 0), m) != 0) {
                        pkt_free(m);
                        m = nullptr;
                    }
                    poll_inline(main_ctx);
                }
                rings.proxy_waker(0).wake();
            }
            std::vector<std::vector<uint8_t>> seen(static_cast<size_t>(plan.clusters) * plan.threads,
                                                   std::vector<uint8_t>(plan.messages, 0));
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
            auto all_idle = [&] {
                for (auto& px : proxies)
                    if (!px->idle()) return false;
                return true;
            };
            while (!g_stop && (g_dones.load() < plan.clusters - 1u || !all_idle()) &&
                   std::chrono::steady_clock::now() < deadline) {
                receive_some(main_ctx, seen);
                poll_inline(main_ctx);
                std::this_thread::sleep_for(std::chrono::microseconds(100));
            }
            // linger: answer the last retransmissions and acks of the others
            const auto linger = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
            while (!g_stop && std::chrono::steady_clock::now() < linger) {
                poll_inline(main_ctx);
                std::this_thread::sleep_for(std::chrono::microseconds(100));
            }
            const uint32_t dones = g_dones.load();
            if (g_stop && rep.error.empty()) rep.error = "stopped by a signal";
            if (dones < plan.clusters - 1u && rep.error.empty())
                rep.error = "not every other cluster finished (" + std::to_string(dones) + " of " +
                            std::to_string(plan.clusters - 1) + " said done)";
            for (auto& px : proxies) px->stop();
            rte_eal_mp_wait_lcore();
            for (auto& px : proxies) {
                if (plan.polling == Polling::kInline) px->poll_once(monotonic_ns());  // publish
                rep.proxies.push_back(px->snapshot());
            }
            std::lock_guard<std::mutex> lock(g_proxies_mu);
            g_proxies = nullptr;
        }
        rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
        rep.ok = ok && rep.error.empty() && rep.corrupt == 0 && rep.duplicates == 0 && rep.missing == 0 && !g_stop;
        if (ok && !rep.ok && rep.error.empty())
            rep.error = g_stop ? "stopped by a signal" : "messages missing, duplicated or corrupt";
        if (plan.exit_without_teardown) {
            // A process about to _exit() leaves its memory to the kernel. Closing memif ports here
            // raced the PMD's socket handler on the EAL interrupt thread when a peer cluster hung
            // up at the same moment (a crash in librte_net_memif, about 1 run in 20 of 3x2):
            // nothing of DPDK is torn down, only the files another process could trip over.
            for (auto& px : proxies) (void)px.release();
            for (auto& sp : stack_pools) (void)sp.release();
            (void)pool.release();
            eal_remove_runtime_dir(prefix);
            return rep;
        }
        proxies.clear();  // before the pools they draw from
        stack_pools.clear();
        for (rte_mempool* mp : mempools) rte_mempool_free(mp);
    }
    eal_stop(prefix);
    return rep;
}

void print_report(const ClusterPlan& plan, const ClusterReport& r) {
    std::printf("cluster %u: %s  sent %llu, received %llu, missing %llu, duplicated %llu, corrupt %llu, %.2f s%s%s\n",
                plan.cluster_id, r.ok ? "PASS" : "FAIL", static_cast<unsigned long long>(r.sent),
                static_cast<unsigned long long>(r.received), static_cast<unsigned long long>(r.missing),
                static_cast<unsigned long long>(r.duplicates), static_cast<unsigned long long>(r.corrupt), r.seconds,
                r.error.empty() ? "" : "  error: ", r.error.c_str());
    for (size_t i = 0; i < r.proxies.size(); ++i) {
        const ProxySnapshot& s = r.proxies[i];
        const double util = s.proxy.total_ns ? static_cast<double>(s.proxy.busy_ns) / s.proxy.total_ns : 0.0;
        const double qlen = s.proxy.total_ns ? static_cast<double>(s.proxy.queue_ns_sum) / s.proxy.total_ns : 0.0;
        std::printf("  proxy %u.%zu: msgs tx %llu rx %llu, frames tx %llu rx %llu (tx ring full %llu), retx %llu, dup %llu, "
                    "csum drops %llu, reass drops %llu, window stalls %llu, ring full %llu, util %.2f, queue %.2f, "
                    "msg time mean %.1f us (p50 < %.1f, p99 < %.1f)\n",
                    plan.cluster_id, i, static_cast<unsigned long long>(s.proxy.msgs_tx),
                    static_cast<unsigned long long>(s.proxy.msgs_rx), static_cast<unsigned long long>(s.port_tx),
                    static_cast<unsigned long long>(s.port_rx), static_cast<unsigned long long>(s.port_tx_ring_full),
                    static_cast<unsigned long long>(s.slidwin.tx_retx),
                    static_cast<unsigned long long>(s.slidwin.rx_dup),
                    static_cast<unsigned long long>(s.stack.drop_ip_csum + s.stack.drop_udp_csum),
                    static_cast<unsigned long long>(s.stack.drop_reass_overlap + s.stack.drop_reass_timeout +
                                                    s.stack.drop_reass_cap + s.stack.drop_reass_oversize),
                    static_cast<unsigned long long>(s.slidwin.window_stalls),
                    static_cast<unsigned long long>(s.proxy.ring_full), util, qlen,
                    s.proxy.msg_time_count ? static_cast<double>(s.proxy.msg_time_sum_ns) / s.proxy.msg_time_count / 1000.0
                                           : 0.0,
                    static_cast<double>(msg_time_quantile_ns(s.proxy, 0.50)) / 1000.0,
                    static_cast<double>(msg_time_quantile_ns(s.proxy, 0.99)) / 1000.0);
    }
    std::fflush(stdout);
}

// ---- the launcher

static std::vector<pid_t> g_children;
static void forward_signal(int sig) {
    for (pid_t c : g_children) kill(c, sig == SIGINT ? SIGTERM : sig);
}

// fabric af_packet: a Linux bridge "icbr<run>" and, per proxy, a veth pair whose "ic..." end the
// proxy's af_packet port opens and whose "ib..." end is on the bridge. No IP address is given
// to the kernel side (the stacks are in the proxies); IPv6 is off so the kernel stays quiet.
static bool sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

static std::string afp_bridge(const ClusterPlan& plan) { return "icbr" + plan.run_id; }

bool afp_fabric_up(const ClusterPlan& plan) {
    const std::string br = afp_bridge(plan);
    if (!sh("ip link add " + br + " type bridge") || !sh("ip link set " + br + " up")) {
        std::fprintf(stderr, "iccs: fabric af_packet needs root and iproute2 to create bridge %s and veth pairs\n",
                     br.c_str());
        return false;
    }
    sh("sysctl -w net.ipv6.conf." + br + ".disable_ipv6=1");
    for (uint16_t c = 0; c < plan.clusters; ++c)
        for (uint16_t p = 0; p < plan.proxies_per_cluster[c]; ++p) {
            const std::string a = afp_ifname(plan, c, p);
            std::string b = a;
            b[1] = 'b';
            const std::string mtu = std::to_string(plan.mtu_bytes);
            if (!sh("ip link add " + a + " mtu " + mtu + " type veth peer name " + b + " mtu " + mtu) ||
                !sh("ip link set " + b + " master " + br) || !sh("ip link set " + b + " up") ||
                !sh("ip link set " + a + " up")) {
                std::fprintf(stderr, "iccs: cannot create veth pair %s/%s on bridge %s\n", a.c_str(), b.c_str(),
                             br.c_str());
                return false;
            }
            sh("sysctl -w net.ipv6.conf." + a + ".disable_ipv6=1");
            sh("sysctl -w net.ipv6.conf." + b + ".disable_ipv6=1");
        }
    return true;
}

void afp_fabric_down(const ClusterPlan& plan) {
    for (uint16_t c = 0; c < plan.clusters; ++c)
        for (uint16_t p = 0; p < plan.proxies_per_cluster[c]; ++p) sh("ip link del " + afp_ifname(plan, c, p));
    sh("ip link del " + afp_bridge(plan));
}

// Runtime dirs and socket dirs of runs whose launcher is gone (killed with SIGKILL, or the
// machine rebooted mid-run): iccs-<pid>-c<id> and /tmp/iccs-<pid> with no process <pid>.
static void remove_stale_runs() {
    std::error_code ec;
    auto stale = [](const std::string& name, const char* prefix) -> bool {
        if (name.rfind(prefix, 0) != 0) return false;
        const std::string rest = name.substr(std::strlen(prefix));
        char* end = nullptr;
        const long pid = std::strtol(rest.c_str(), &end, 10);
        if (end == rest.c_str() || pid <= 0 || (*end != '\0' && *end != '-')) return false;
        return kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
    };
    const std::string rundir = std::filesystem::path(eal_runtime_dir("x")).parent_path();
    for (const auto& e : std::filesystem::directory_iterator(rundir, ec))
        if (stale(e.path().filename().string(), "iccs-")) std::filesystem::remove_all(e.path(), ec);
    for (const auto& e : std::filesystem::directory_iterator("/tmp", ec))
        if (e.is_directory(ec) && stale(e.path().filename().string(), "iccs-")) std::filesystem::remove_all(e.path(), ec);
}

int launch_clusters(ClusterPlan plan, uint32_t timeout_s) {
    if (plan.run_id.empty()) plan.run_id = std::to_string(getpid());
    signal(SIGPIPE, SIG_IGN);  // a closed stdout (`| head`) must not kill a run before it cleans up
    remove_stale_runs();
    plan.sock_dir = "/tmp/iccs-" + plan.run_id;
    std::error_code ec;
    std::filesystem::remove_all(plan.sock_dir, ec);  // a stale socket says "Address already in use"
    std::filesystem::create_directories(plan.sock_dir, ec);
    if (plan.fabric == "udp") {
        // Refused io_uring (old kernel, seccomp, io_uring_disabled) stops the run here, with the
        // alternative named, not later inside every cluster.
        UringCaps caps;
        std::string err;
        if (!uring_probe(caps, err)) {
            std::fprintf(stderr, "iccs: %s\n", err.c_str());
            std::filesystem::remove_all(plan.sock_dir, ec);
            return 2;
        }
    }
    const bool afp = plan.fabric == "af_packet";
    if (afp && !afp_fabric_up(plan)) {
        afp_fabric_down(plan);
        std::filesystem::remove_all(plan.sock_dir, ec);
        return 1;
    }
    std::fflush(stdout);
    std::fflush(stderr);
    g_children.clear();
    for (uint16_t c = 0; c < plan.clusters; ++c) {
        const pid_t pid = fork();
        if (pid < 0) {
            std::perror("fork");
            forward_signal(SIGTERM);
            return 1;
        }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive the launcher
            // A crash says where, on stderr, before the launcher reports the signal.
            signal(SIGSEGV, [](int sig) {
                void* frames[48];
                const int n = backtrace(frames, 48);
                const char msg[] = "iccs: cluster process crashed; backtrace:\n";
                (void)!write(2, msg, sizeof msg - 1);
                backtrace_symbols_fd(frames, n, 2);
                signal(sig, SIG_DFL);
                raise(sig);
            });
            // A quiet run (a benchmark) keeps stdout for its own result (`bench --json`): the
            // cluster's report goes to stderr.
            if (plan.quiet) dup2(2, 1);
            ClusterPlan mine = plan;
            mine.cluster_id = c;
            mine.exit_without_teardown = true;  // this process _exit()s right after the report
            const ClusterReport r = run_cluster(mine);
            print_report(mine, r);
            std::fflush(stdout);
            _exit(r.ok ? 0 : 1);
        }
        g_children.push_back(pid);
    }
    struct sigaction sa {};
    sa.sa_handler = forward_signal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    int failures = 0;
    size_t left = g_children.size();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    bool timed_out = false, stopping = false;
    std::chrono::steady_clock::time_point kill_at{};
    std::vector<bool> reaped(g_children.size(), false);
    // SIGTERM to every cluster still running, SIGKILL to those still there 5 s later.
    auto stop_all = [&] {
        if (stopping) return;
        stopping = true;
        kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        for (size_t i = 0; i < g_children.size(); ++i)
            if (!reaped[i]) kill(g_children[i], SIGTERM);
    };
    while (left > 0) {
        int status = 0;
        const pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid > 0) {
            for (size_t i = 0; i < g_children.size(); ++i) {
                if (g_children[i] != pid) continue;
                reaped[i] = true;
                --left;
                if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
                ++failures;
                if (WIFSIGNALED(status))
                    std::fprintf(stderr, "iccs: cluster %zu died of signal %d\n", i, WTERMSIG(status));
                stop_all();  // the others would wait for it until their own timeouts
            }
            continue;
        }
        const auto now = std::chrono::steady_clock::now();
        if (!timed_out && now > deadline) {
            std::fprintf(stderr, "iccs: run timed out after %u s: stopping the clusters\n", timeout_s);
            timed_out = true;
            stop_all();
        }
        if (stopping && now > kill_at) {
            for (size_t i = 0; i < g_children.size(); ++i)
                if (!reaped[i]) kill(g_children[i], SIGKILL);
            kill_at = now + std::chrono::hours(1);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    // Whatever a crashed cluster left behind.
    for (uint16_t c = 0; c < plan.clusters; ++c) eal_remove_runtime_dir(eal_prefix(plan, c));
    std::filesystem::remove_all(plan.sock_dir, ec);
    if (afp) afp_fabric_down(plan);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    return failures == 0 && !timed_out ? 0 : 1;
}

}  // namespace iccs
