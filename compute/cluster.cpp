// cluster.cpp: one cluster process (cluster.hpp): run_cluster() brings up its EAL, pools, rings
// and proxies on their links, runs the program on every compute thread, ends together with the
// other clusters, and print_report() prints what it counted.
#include "cluster.hpp"

#include <net/if.h>
#include <pthread.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "activity.hpp"
#include "af_packet.hpp"
#include "cluster_memory.hpp"
#include "cluster_programs.hpp"
#include "cluster_telemetry.hpp"
#include "dpdk_env.hpp"
#include "dpdk_pool.hpp"
#include "fault_inject.hpp"
#include "memif_guard.hpp"
#include "wan_script.hpp"

namespace iccs {

namespace {

void pin_self(unsigned cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

int proxy_lcore_main(void* arg) {
    static_cast<Proxy*>(arg)->run();
    return 0;
}

// How the cluster's memory is cut (cluster_memory.hpp), and whether its compute threads run proxy
// iterations.
struct PoolPlan {
    ClusterMemory memory;
    bool assisting = false;        // adaptive polling with the assist: compute threads run proxy iterations
    bool threads_register = false; // compute threads register with the EAL (their own mempool caches)
};

PoolPlan plan_pools(const ClusterPlan& plan) {
    PoolPlan pp;
    pp.memory = cluster_memory(plan, plan.cluster_id);
    pp.assisting = plan.polling == Polling::kAdaptive && plan.assist;
    pp.threads_register = plan.polling == Polling::kInline || pp.assisting;
    return pp;
}

EalOptions eal_options(const ClusterPlan& plan, const PoolPlan& pools) {
    const uint16_t me = plan.cluster_id;
    const uint16_t nprox = plan.proxies_per_cluster[me];
    EalOptions eo;
    eo.file_prefix = eal_prefix(plan, me);
    // lcore 0: the main thread; lcores 1..P: the proxies, each on its configured core.
    eo.lcore_cpus.push_back(plan.compute_cores.empty()
                                ? 0
                                : plan.compute_cores[(me * plan.threads) % plan.compute_cores.size()]);
    if (plan.polling != Polling::kInline)
        for (uint16_t p = 0; p < nprox; ++p) eo.lcore_cpus.push_back(plan.proxy_cores[p]);
    eo.memory_mb = pools.memory.dpdk_mb;
    eo.single_file_segments = memif_lends_buffers(plan, me);  // memif's zero-copy client: its memory in a file
    if (plan.fabric == "pci")
        for (uint16_t p = 0; p < nprox; ++p) eo.pci_allow.push_back(pci_address(plan, me, p));
    return eo;
}

// What one cluster process holds while it runs; destroyed proxies first (they draw on the pools).
struct ClusterParts {
    std::unique_ptr<MempoolPktPool> pool;  // message buffers of the compute threads
    std::unique_ptr<MempoolPktPool> bulk_pool;  // and their large ones (ClusterMemory::bulk), or none
    ClusterRings rings;
    std::vector<std::unique_ptr<MempoolPktPool>> stack_pools;  // one per proxy: never starved by compute threads
    std::vector<std::unique_ptr<Proxy>> proxies;
    std::vector<rte_mempool*> mempools;
    std::unique_ptr<MemifHangupGuard> guard;  // fabric memif, once the links are up
};

ProxyConfig proxy_config(const ClusterPlan& plan, uint16_t p, uint64_t run_token) {
    const uint16_t me = plan.cluster_id;
    const bool kernel_udp = plan.fabric == "udp";
    ProxyConfig pc;
    pc.cluster = me;
    pc.index = p;
    pc.threads = plan.threads;
    pc.stack.mac = proxy_mac(me, p);
    pc.stack.ip = proxy_ip(plan, me, p);
    pc.stack.mtu_bytes = plan.mtu_bytes;
    pc.stack.reass = plan.reass;
    pc.stack.udp_checksum_off = plan.udp_checksum_off;
    pc.slidwin = plan.slidwin;
    pc.slidwin.run_token = run_token;
    pc.auth = plan.auth;
    pc.udp_port = plan.udp_port;
    pc.polling = plan.polling;
    pc.combine_max_bytes = plan.combine_max_bytes;
    pc.impair = plan.impair;
    if (plan.wan) {
        auto wan = std::make_shared<WanConfig>(*plan.wan);
        wan->proxies_per_cluster = plan.proxies_per_cluster;
        wan->loss_seed = plan.wan->loss_seed * 1000003u + p;  // each proxy its own loss draws
        pc.wan = std::move(wan);
    }
    pc.peer_timeout_ms = plan.peer_timeout_ms;
    pc.start_grace_ms = plan.link_timeout_ms;  // a peer not started yet: as long as memif waits for its link
    pc.proxies_per_cluster = plan.proxies_per_cluster;
    // Only the proxies this one exchanges traffic with (cluster_memory.hpp: with equal proxy
    // counts, those of its own index): a sub-connection, and over memif a link, to each.
    for (uint16_t c = 0; c < plan.clusters; ++c)
        for (uint16_t q = 0; q < plan.proxies_per_cluster[c]; ++q)
            if (proxies_exchange(plan, me, p, c, q))
                pc.peers.push_back(kernel_udp ? ProxyAddr{c, q, udp_ip(plan, c, q), proxy_mac(c, q),
                                                          udp_port(plan, c, q)}
                                              : ProxyAddr{c, q, proxy_ip(plan, c, q), proxy_mac(c, q)});
    return pc;
}

// A memif client's port starts once its server's socket is there (the server creates it as it
// adds its port). The server cluster may still be in its EAL start-up: 16 clusters starting at
// once on 2 cores took longer than link_timeout_ms, and every client gave up ("cannot start port
// ... Operation not permitted"). A slow server is not a broken link, so this waits up to 10 x
// link_timeout_ms for the socket, then link_timeout_ms for the link itself (Port::open). A
// server that died ends the run anyway (the launcher stops us).
bool wait_for_memif_server(const ClusterPlan& plan, const std::string& socket, uint16_t server, std::string& err) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(uint64_t{plan.link_timeout_ms} * 10);
    while (access(socket.c_str(), F_OK) != 0) {
        if (cluster_stopping()) {
            err = "stopped while waiting for cluster " + std::to_string(server) + "'s memif socket " + socket;
            return false;
        }
        if (std::chrono::steady_clock::now() > until) {
            err = "cluster " + std::to_string(server) + " did not create its memif socket " + socket + " within " +
                  std::to_string(uint64_t{plan.link_timeout_ms} * 10 / 1000) + " s (10 x [cluster] link_timeout_ms)";
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));  // (an access() a millisecond costs nothing)
    }
    return true;
}

// The ports of proxy p on a DPDK fabric (memif, pci, af_packet), drawing on the pools rx and desc.
bool add_fabric_ports(const ClusterPlan& plan, Proxy& px, uint16_t p, rte_mempool* rx, rte_mempool* desc,
                      std::string& err) {
    const uint16_t me = plan.cluster_id;
    const std::vector<ProxyAddr>& peers = px.config().peers;
    if (plan.fabric == "memif") {
        // One memif link per pair of proxies that exchange traffic (proxy_config's peers); the
        // lower cluster id serves the socket. Every frame in one memif buffer: frames
        // chained over several buffers (MTU above 2034 with the default 2048) came out
        // of DPDK 22.11's memif many times over (millions of duplicates, then a crash).
        // [machine] memif_zero_copy (memif_zero_copy_link: clusters of one proxy each): the client
        // end (the higher cluster id) lends its RX mbufs and
        // its frames to the link, which the server copies into and out of: one copy a frame, not
        // two. Its RX mbufs then hold a frame each (rx_mbuf_room), for the same reason: a frame
        // the server wrote over several lent buffers came out with stale descriptor flags.
        const uint32_t memif_bsize = std::max<uint32_t>(2048, std::bit_ceil(plan.mtu_bytes + 14));
        for (const ProxyAddr& peer : peers) {
            const std::string name = "net_memif_" + std::to_string(p) + "_" + std::to_string(peer.cluster) +
                                     "_" + std::to_string(peer.index);
            const std::string socket = link_socket(plan, me, p, peer.cluster, peer.index);
            const std::string args = name + ",role=" + (me < peer.cluster ? "server" : "client") + ",socket=" + socket +
                                     ",socket-abstract=no,bsize=" + std::to_string(memif_bsize) +
                                     (me > peer.cluster && memif_zero_copy_link(plan, me, peer.cluster) ? ",zero-copy=yes" : "");
            if (me > peer.cluster && !wait_for_memif_server(plan, socket, peer.cluster, err)) return false;
            if (!px.add_port(args, rx, desc, {peer.mac}, plan.link_timeout_ms, err)) return false;
            // Adaptive polling: wake the peer proxy after a burst to it (doorbell.hpp;
            // 22.11's memif has no RX interrupts).
            if (plan.polling == Polling::kAdaptive &&
                !px.ring_on_tx(px.port_count() - 1, doorbell_path(plan.sock_dir, peer.cluster, peer.index), err))
                return false;
        }
        return plan.polling != Polling::kAdaptive || px.sleep_on_doorbell(doorbell_path(plan.sock_dir, me, p), err);
    }
    if (plan.fabric == "pci") {
        // The proxy's NI is one NIC port; a switch joins it to every remote proxy.
        std::vector<MacAddr> reaches;
        for (const ProxyAddr& peer : peers) reaches.push_back(peer.mac);
        return px.add_port(pci_address(plan, me, p), rx, desc, reaches, plan.link_timeout_ms, err);
    }
    if (plan.fabric == "af_packet") {
        // The proxy's NI is a veth end on the run's Linux bridge (set up by the
        // launcher): real kernel Ethernet between the clusters, visible to tcpdump.
        std::vector<MacAddr> reaches;
        for (const ProxyAddr& peer : peers) reaches.push_back(peer.mac);
        const std::string ifname = afp_ifname(plan, me, p);
        if (if_nametoindex(ifname.c_str()) == 0) {  // DPDK would say only "rte_vdev_init failed"
            err = "fabric af_packet: no interface " + ifname + " for proxy " + std::to_string(p) +
                  ": the launcher makes the run's bridge and veth pairs (iccs run, iccs run --mpi); "
                  "a run started otherwise (mpirun by hand) needs fabric memif or udp";
            return false;
        }
        // 2048 frames in the kernel's receive ring (4 MiB each way): with 512, a proxy kept from
        // its core for ~5 ms under a stream of small messages let the ring overflow, and frames
        // were lost below slidwin (retransmitted if they were ours; inject-afpacket's forged ones
        // went uncounted: drop_token 191 and 220 where >= 251, 2 runs in 10; 0 in 10 since).
        const std::string args = "net_af_packet" + std::to_string(p) + ",iface=" + ifname +
                                 ",blocksz=4096,framesz=2048,framecnt=2048";  // (kAfPacketMaxMtuBytes)
        if (!px.add_port(args, rx, desc, reaches, plan.link_timeout_ms, err)) return false;
        // Adaptive polling: no RX interrupts in 22.11's af_packet, but its socket
        // polls readable when the kernel puts a frame in the ring.
        return plan.polling != Polling::kAdaptive || px.sleep_in_poll(err) || err.empty();
    }
    err = "fabric \"" + plan.fabric + "\" is not available in cluster runs (memif, af_packet, pci and udp are)";
    return false;
}

// Every proxy of this cluster with its pools and its ports (or its UDP socket).
bool make_proxies(const ClusterPlan& plan, const PoolPlan& pools, ClusterParts& parts, std::string& err) {
    const uint16_t me = plan.cluster_id;
    const uint16_t nprox = plan.proxies_per_cluster[me];
    const std::string prefix = eal_prefix(plan, me);
    // Issue 17: this incarnation of the cluster is known to its peers by a token drawn now
    // (every slidwin header carries it; each sub-connection also draws a random ISN).
    const uint64_t run_token = random_u64();
    for (uint16_t p = 0; p < nprox; ++p) {
        const ProxyConfig pc = proxy_config(plan, p, run_token);
        std::string pn = "c";  // not "c" + to_string(): GCC 12 warns -Wrestrict on it (GCC bug 105329)
        pn += std::to_string(me) + "p" + std::to_string(p);
        // The proxy's own buffers (acks, fragment headers): if it drew from the pool the
        // compute threads fill, two clusters could each wait for the other's acks forever.
        parts.stack_pools.push_back(MempoolPktPool::create(prefix + "-" + pn + "stk", pools.memory.stack.objects,
                                                           kStackSegBytes + kPktHeadroom, err));
        if (!parts.stack_pools.back()) return false;
        auto px = std::make_unique<Proxy>(pc, *parts.stack_pools.back(), parts.rings);
        if (plan.fabric == "udp") {
            // The kernel does IP and UDP: no port, no mbufs. Received datagrams are copied
            // into a pool of the proxy's own, sized as the RX mbufs would be.
            parts.stack_pools.push_back(MempoolPktPool::create(prefix + "-" + pn + "urx", pools.memory.rx.objects,
                                                               2048 + kPktHeadroom, err));
            if (!parts.stack_pools.back()) return false;
            UringUdpConfig uc;
            uc.ip = udp_ip(plan, me, p);
            uc.port = udp_port(plan, me, p);
            uc.sqpoll = plan.udp_sqpoll;
            if (!px->add_udp_socket(uc, *parts.stack_pools.back(), err)) {
                err = "proxy " + std::to_string(me) + "." + std::to_string(p) + ": " + err;
                return false;
            }
            parts.proxies.push_back(std::move(px));
            continue;
        }
        rte_mempool* rx = mbuf_pool_create(pn + "rx", pools.memory.rx.objects, kPoolCache, rx_priv_size(),
                                           rx_mbuf_room(plan, plan.cluster_id), err);
        rte_mempool* desc = rx != nullptr ? mbuf_pool_create(pn + "txd", pools.memory.tx_desc.objects, kPoolCache, 0, 0, err)
                                          : nullptr;
        if (rx == nullptr || desc == nullptr) {
            // (the run's memory was checked at start: cluster_memory.hpp; this is DPDK's own refusal)
            err = "proxy " + pn + ": " + err + " (-m " + std::to_string(pools.memory.dpdk_mb) + ")";
            return false;
        }
        parts.mempools.push_back(rx);
        parts.mempools.push_back(desc);
        if (!add_fabric_ports(plan, *px, p, rx, desc, err)) return false;
        parts.proxies.push_back(std::move(px));
    }
    return true;
}

// --pcap and ICCS_TRACE: every proxy records its frames, or the messages it passes.
bool start_recording(const ClusterPlan& plan, ClusterParts& parts, std::string& err) {
    const uint16_t me = plan.cluster_id;
    if (!plan.pcap_dir.empty())
        for (uint16_t p = 0; p < parts.proxies.size(); ++p)
            if (!parts.proxies[p]->start_capture(pcap_path(plan, me, p), plan.pcap_max_bytes, err)) {
                err = "proxy " + std::to_string(me) + "." + std::to_string(p) + ": " + err;
                return false;
            }
    if (const char* tr = std::getenv("ICCS_TRACE"); tr != nullptr && *tr != '\0') {
        // `iccs run APP --trace FILE` (cli/run_app.cpp merges the parts): a record per message
        // each way, ICCS_TRACE_RECORDS per proxy at most (default 262144; more are counted).
        constexpr unsigned long long kMaxRecords = 1ull << 24;  // 640 MiB a proxy
        const char* cap = std::getenv("ICCS_TRACE_RECORDS");
        unsigned long long n = 262144;
        if (cap != nullptr) {
            char* end = nullptr;
            n = std::strtoull(cap, &end, 10);
            if (*cap == '\0' || *end != '\0' || n < 1 || n > kMaxRecords) {
                err = std::string("ICCS_TRACE_RECORDS=") + cap + ": expected 1.." + std::to_string(kMaxRecords) +
                      " records per proxy";
                return false;
            }
        }
        for (auto& px : parts.proxies) px->start_trace(static_cast<size_t>(n));
    }
    return true;
}

// Fabric memif: a peer's hang-up is ours to handle, not the PMD's (memif_guard.hpp): once every
// link is up, before anything polls a port.
bool guard_memif_links(const ClusterPlan& plan, ClusterParts& parts, std::string& err) {
    std::vector<MemifGuardLink> links;
    for (auto& px : parts.proxies) {
        const std::vector<ProxyAddr>& peers = px->config().peers;
        for (size_t i = 0; i < peers.size(); ++i) {  // add_fabric_ports: port i reaches peers[i]
            Proxy* proxy = px.get();
            links.push_back(MemifGuardLink{link_socket(plan, plan.cluster_id, px->config().index, peers[i].cluster,
                                                       peers[i].index),
                                           [proxy, i] { proxy->port_hung_up(i); }});
        }
    }
    parts.guard = std::make_unique<MemifHangupGuard>();
    return parts.guard->start(std::move(links), err);
}

// Rings, proxies, links up, recording started, sub-connections opening: ready for the program.
bool bring_up(const ClusterPlan& plan, const PoolPlan& pools, ClusterParts& parts, std::string& err) {
    const uint16_t me = plan.cluster_id;
    if (!parts.pool) return false;
    if (!parts.rings.create("c" + std::to_string(me), plan.threads, plan.proxies_per_cluster[me], plan.ring_entries,
                            plan.clusters, err))
        return false;
    if (!make_proxies(plan, pools, parts, err)) return false;
    activity_phase(ClusterPhase::kLinks, "starting: waiting for its links");
    for (auto& px : parts.proxies)
        if (!px->wait_links(plan.link_timeout_ms, err)) return false;
    if (plan.fabric == "memif" && !guard_memif_links(plan, parts, err)) return false;
    // Every buffer and ring slot mapped now, not at its first use (proxy/dpdk_pool.hpp);
    // ICCS_NO_POPULATE=1 leaves them to their first touch (for an A/B of it).
    if (const char* np = std::getenv("ICCS_NO_POPULATE"); np == nullptr || std::strcmp(np, "1") != 0) {
        activity_phase(ClusterPhase::kLinks, "starting: mapping its pools");
        const PopulateResult pr = populate_dpdk_memory();
        if (!plan.quiet)
            std::fprintf(stderr, "cluster %u: pools and memif regions mapped: %.0f MiB in %.0f ms%s%s\n", me,
                         pr.bytes / 1048576.0, pr.ns / 1e6, pr.fallback.empty() ? "" : "; ", pr.fallback.c_str());
    }
    if (!start_recording(plan, parts, err)) return false;
    const uint64_t now = now_ns();
    for (auto& px : parts.proxies) px->open_subconnections(now);
    return true;
}

// The start-up line: which fabric and which I/O path (the kernel's, or DPDK's).
void print_cluster_line(const ClusterPlan& plan, const std::vector<std::unique_ptr<Proxy>>& proxies) {
    const uint16_t me = plan.cluster_id;
    const uint16_t nprox = plan.proxies_per_cluster[me];
    if (plan.quiet && !proxies.empty() && proxies[0]->wake_path().rfind("NOT", 0) == 0)
        std::fprintf(stderr, "cluster %u: proxies %s\n", me, proxies[0]->wake_path().c_str());
    if (plan.quiet) return;
    std::string io = proxies.empty() ? std::string("-") : proxies[0]->io_path();
    if (plan.fabric == "udp")
        io += "; sockets " + to_string(udp_ip(plan, me, 0)) + ":" + std::to_string(udp_port(plan, me, 0)) +
              (nprox > 1 ? ".." + std::to_string(udp_port(plan, me, static_cast<uint16_t>(nprox - 1)))
                         : std::string());
    const std::string wake = proxies.empty() ? std::string() : proxies[0]->wake_path();
    std::fprintf(stderr, "cluster %u: %u proxies, %u compute threads%s, fabric %s (%s), polling %s%s%s, EAL %s%s\n",
                 me, nprox, plan.last_is_service ? plan.threads - 1u : plan.threads,
                 plan.last_is_service ? " and the runtime's service endpoint" : "", plan.fabric.c_str(), io.c_str(),
                 plan.polling == Polling::kBusy ? "busy"
                 : plan.polling == Polling::kInline ? "inline" : "adaptive",
                 wake.empty() ? "" : ": ", wake.c_str(), eal_prefix(plan, me).c_str(),
                 !plan.auth ? ""
                 : plan.auth->encrypt ? ", datagrams authenticated and encrypted (AES-128-GCM)"
                                      : ", datagrams authenticated (AES-128-GCM)");
}

// The start-up line of what the cluster costs (cluster_memory.hpp).
void print_memory_line(const ClusterPlan& plan, const ClusterMemory& m) {
    if (!plan.quiet) std::fprintf(stderr, "cluster %u: %s\n", plan.cluster_id, m.line().c_str());
}

// Each proxy on its own lcore (not with inline polling: the compute threads run them); the lcores.
std::vector<unsigned> launch_proxies(const ClusterPlan& plan, const std::vector<std::unique_ptr<Proxy>>& proxies) {
    std::vector<unsigned> lcores;
    if (plan.polling == Polling::kInline) return lcores;
    unsigned lcore = 0;
    uint16_t p = 0;
    RTE_LCORE_FOREACH_WORKER(lcore) {
        if (p < proxies.size() && rte_eal_remote_launch(proxy_lcore_main, proxies[p++].get(), lcore) == 0)
            lcores.push_back(lcore);
    }
    return lcores;
}

// "Its host's proxies stopping" (issue 34): a proxy thread that returns while the run goes on
// leaves the cluster deaf and dumb, and its peers would only find out after peer_timeout_ms of
// silence. The cluster ends at once instead (exit status 1, the launcher stops the others).
class ProxyWatch {
   public:
    ProxyWatch(uint16_t cluster, std::vector<unsigned> lcores) : lcores_(std::move(lcores)) {
        if (lcores_.empty()) return;
        th_ = std::thread([this, cluster] {
            std::unique_lock lk(mu_);
            while (!stop_.load(std::memory_order_acquire)) {
                for (size_t p = 0; p < lcores_.size(); ++p)
                    if (rte_eal_get_lcore_state(lcores_[p]) != RUNNING && !stop_.load(std::memory_order_acquire))
                        cluster_stop_now(1, "proxy " + std::to_string(cluster) + "." + std::to_string(p) +
                                                " stopped (its thread ended) while the run goes on: ending the cluster");
                // Woken by end() at once: a plain sleep made every run's end wait up to 10 ms here.
                cv_.wait_for(lk, std::chrono::milliseconds(10), [this] { return stop_.load(std::memory_order_acquire); });
            }
        });
    }
    ~ProxyWatch() { end(); }
    void end() {  // before the proxies are stopped on purpose
        {
            std::lock_guard lk(mu_);
            stop_.store(true, std::memory_order_release);
        }
        cv_.notify_all();
        if (th_.joinable()) th_.join();
    }

   private:
    std::vector<unsigned> lcores_;
    std::atomic<bool> stop_{false};
    std::mutex mu_;
    std::condition_variable cv_;
    std::thread th_;
};

// What every compute thread's convergence module runs over: the shared proxies, rings and pool.
ConvNet conv_net(const ClusterPlan& plan, ClusterParts& parts, bool assisting) {
    ConvNet net;
    net.cluster = plan.cluster_id;
    net.clusters = plan.clusters;
    net.mtu_bytes = plan.mtu_bytes;
    net.rings = &parts.rings;
    net.pool = parts.pool.get();
    net.bulk_pool = parts.bulk_pool.get();
    // The payload's sum taken where it is copied in (the sending compute thread, or the MPI
    // agent's bridge) rather than read again by the proxy from another core's cache: the UDP
    // checksum was a quarter of the sending proxy's time at 1 MiB MPI messages (issue 35).
    // Not summed at all where the stack sends checksum 0 ([machine] udp_checksum).
    net.payload_sums = plan.fabric != "udp" && !plan.udp_checksum_off;
    for (uint16_t c = 0; c < plan.clusters; ++c) {
        net.ni_addrs.emplace_back();
        for (uint16_t q = 0; q < plan.proxies_per_cluster[c]; ++q) net.ni_addrs[c].push_back(proxy_ip(plan, c, q));
    }
    std::vector<std::unique_ptr<Proxy>>& proxies = parts.proxies;
    if (plan.polling == Polling::kInline)
        net.poll_inline = [&proxies](uint64_t now) {
            for (auto& px : proxies) px->try_poll_inline(now);
        };
    // The assist (proxy.hpp); over fabric udp a compute thread takes the socket's direct
    // path (recvmmsg/sendmmsg: proxy/uring_udp.hpp), the ring being the proxy thread's.
    if (assisting) {
        net.poll_assist = [&proxies](int32_t p, uint64_t now) -> uint32_t {
            if (p >= 0) return proxies[static_cast<size_t>(p)]->try_poll_inline(now);
            uint32_t work = 0;
            for (auto& px : proxies) work += px->try_poll_inline(now);
            return work;
        };
        net.poll_leaving = [&proxies](uint32_t p, bool to_sleep) -> uint32_t {
            return proxies[p]->poll_leaving(to_sleep);
        };
    }
    return net;
}

// The program on every compute thread, each with its own convergence module; their results
// summed into rep.
void run_compute_threads(const ClusterPlan& plan, const ConvNet& net, ClusterRings& rings, bool threads_register,
                         ClusterReport& rep) {
    const uint16_t me = plan.cluster_id;
    const ComputeProgram program = plan.program ? plan.program
                                   : plan.workload == "pingpong" ? program_pingpong
                                   : plan.workload == "errors"   ? program_errors
                                   : plan.workload == "stream"   ? program_stream
                                                                 : program_alltoall;
    std::vector<ComputeResult> results(plan.threads);
    std::vector<ConvCounters> conv_counters(plan.threads);
    std::vector<std::thread> threads;
    for (uint16_t t = 0; t < plan.threads; ++t) {
        threads.emplace_back([&, t] {
            if (!plan.compute_cores.empty())
                pin_self(plan.compute_cores[(me * plan.threads + t) % plan.compute_cores.size()]);
            // A thread that runs the proxies' iterations (inline polling, the assist)
            // gets mempool caches of its own (dpdk_env.hpp): every buffer it takes or
            // gives back was otherwise a compare-and-swap on the pool's shared ring (some
            // 16 a round trip). Under adaptive polling that took the memif round trip
            // from ~3.4 to ~1.8 us (perf/README.md, issue 21). What a registered thread
            // can park in its caches is in rx_mbufs (kLcoreCacheMax). Not for threads
            // that only free received frames (busy polling, the assist off): they would
            // park buffers where no rx_burst draws on them.
            const EalThreadScope eal_thread(threads_register);
            // The built-in programs say what their threads do (a runtime's program threads are its own).
            if (!plan.program) activity_bind_thread(uint32_t{t} + 1);
            Convergence conv(net, t, plan.conv);
            ComputeEnv env{plan, t, conv, results[t], &rings};
            if (!program(env) && results[t].error.empty()) results[t].error = "the program failed";
            activity_doing_str("");  // its program returned: the cluster's phase says the rest
            conv_counters[t] = conv.counters();
        });
    }
    for (auto& th : threads) th.join();
    for (uint16_t t = 0; t < plan.threads; ++t) {
        const ComputeResult& r = results[t];
        rep.sent += r.sent;
        rep.received += r.received;
        rep.corrupt += r.corrupt;
        rep.duplicates += r.duplicates;
        if (plan.workload == "alltoall" && !plan.program && plan.soak_s == 0) {  // (a soak checks its own counts)
            const uint64_t expected = uint64_t{plan.clusters - 1u} * plan.threads * plan.messages;
            rep.missing += expected - std::min(expected, r.received);
        }
        if (!r.error.empty() && rep.error.empty())
            rep.error = "thread " + std::to_string(t) + ": " + r.error;
        rep.threads.push_back(conv_counters[t]);
    }
}

// End of run: the proxies tell every other cluster we are done (status messages),
// and keep running until every other cluster said the same (or is down) and
// nothing is unacked, so the others' last messages and acks are answered. Then they say idle
// (kStatusIdle: we need nothing more) and linger for the others' last retransmissions, at most
// kLinger: no longer once our proxies said idle and every other cluster said idle (or is down),
// since then nobody waits for an answer of ours: an idle cluster has all its data acked. What
// we sent since our own idle is status messages only, so their acks are not waited for: with
// two proxies a cluster, over udp (no hang-up to see), the cluster that left second waited the
// whole linger for the ack of a status message the first no longer read. A lost idle costs the
// whole linger, never a message. Before the idle status every run lingered the whole 300 ms.
void end_together(const ClusterPlan& plan, ClusterParts& parts, const ConvNet& net, ClusterReport& rep,
                  const FaultPlan& fault) {
    const uint16_t me = plan.cluster_id;
    ClusterRings& rings = parts.rings;
    rings.set_local_done();
    activity_phase(ClusterPhase::kEnding, "ending: waiting for every cluster to finish");
    fault_strike(fault, me, "shutdown", [&] { for (auto& px : parts.proxies) px->stop(); });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    auto all_idle = [&] {
        for (auto& px : parts.proxies)
            if (!px->idle()) return false;
        return true;
    };
    auto others = [&](bool down_counts) {
        uint32_t n = 0;
        for (uint16_t c = 0; c < plan.clusters; ++c)
            if (c != me && (rings.cluster_done(c) || (down_counts && rings.cluster_down(c)))) ++n;
        return n;
    };
    while (!cluster_stopping() && (others(true) < plan.clusters - 1u || !all_idle()) &&
           std::chrono::steady_clock::now() < deadline) {
        if (net.poll_inline) net.poll_inline(now_ns());
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    // linger: answer the last retransmissions and acks of the others
    constexpr auto kLinger = std::chrono::milliseconds(300);
    if (others(true) == plan.clusters - 1u && all_idle()) rings.set_local_idle();
    auto others_idle = [&] {
        for (uint16_t c = 0; c < plan.clusters; ++c)
            if (c != me && !rings.cluster_idle(c) && !rings.cluster_down(c)) return false;
        return true;
    };
    const auto linger_from = std::chrono::steady_clock::now();
    const auto linger = linger_from + kLinger;
    while (!cluster_stopping() && std::chrono::steady_clock::now() < linger) {
        if (net.poll_inline) net.poll_inline(now_ns());
        bool said = rings.local_idle();
        for (auto& px : parts.proxies) said = said && px->said_idle();
        if (said && others_idle()) {
            rep.linger_cut = true;
            break;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    rep.ended = !cluster_stopping();
    rep.linger_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - linger_from).count();
    const uint32_t dones = others(false);
    if (cluster_stopping() && rep.error.empty()) rep.error = "stopped by a signal";
    if (dones < plan.clusters - 1u && rep.error.empty() && plan.workload != "errors")
        rep.error = "not every other cluster finished (" + std::to_string(dones) + " of " +
                    std::to_string(plan.clusters - 1) + " said done)";
}

// The proxies stopped; their counters, WAN views, captures and traces into rep and files.
void stop_proxies(const ClusterPlan& plan, const std::vector<std::unique_ptr<Proxy>>& proxies, ClusterReport& rep) {
    for (auto& px : proxies) px->stop();
    rte_eal_mp_wait_lcore();
    for (auto& px : proxies) {
        if (plan.polling == Polling::kInline) px->poll_once(now_ns());  // publish
        rep.proxies.push_back(px->snapshot());
        rep.wan.push_back(px->wan_view());
        px->finish_capture();  // nothing polls it any more: the file is complete
        if (const char* tr = std::getenv("ICCS_TRACE"); tr != nullptr && *tr != '\0') {
            std::string terr;
            const std::string path = std::string(tr) + ".c" + std::to_string(plan.cluster_id) + ".p" +
                                     std::to_string(px->config().index);
            if (!px->finish_trace(path, terr) && rep.error.empty()) rep.error = terr;
        }
    }
}

}  // namespace

ClusterReport run_cluster(const ClusterPlan& plan) {
    ClusterReport rep;
    const uint16_t me = plan.cluster_id;
    const std::string prefix = eal_prefix(plan, me);
    // SIGINT/SIGTERM end this process within kStopBudgetMs whatever its threads do (cluster_stop.hpp),
    // saying what it was doing (activity.hpp: also what its launcher reads if it dies).
    cluster_stop_install(me);
    activity_open(plan.sock_dir.empty() ? std::string() : activity_path(plan.sock_dir, me), me);
    if (!plan.program) activity_bind_thread(0);  // (a runtime's: its program's main thread has slot 0)
    activity_phase(ClusterPhase::kStarting, "starting: the EAL and the pools");
    FaultPlan fault;
    if (!fault_plan_from_env(me, fault, rep.error)) return rep;

    const PoolPlan pools = plan_pools(plan);
    // A cluster that cannot have its memory says so now, with the figures (cluster_memory.hpp);
    // under our launcher the run as a whole was checked before any cluster started.
    if (const uint64_t have = host_mem_available(); have != 0 && pools.memory.total_bytes > have) {
        rep.error = "cluster " + std::to_string(me) + " needs " + std::to_string(pools.memory.total_bytes >> 20) +
                    " MiB (" + pools.memory.line() + ") and this host has " + std::to_string(have >> 20) +
                    " MiB available (MemAvailable)";
        return rep;
    }
    std::string err;
    // The EAL pins the thread that starts it to lcore 0's core, and every thread it starts later
    // inherits that: with no compute_cores (the MPI agent's bridges) they were all on core 0,
    // beside the proxy pinned there, "unpinned" in name only (agent.cpp). Such a plan gets the
    // calling thread's own set back once the EAL is up.
    cpu_set_t own_cores;
    const bool keep_own_cores =
        plan.compute_cores.empty() && pthread_getaffinity_np(pthread_self(), sizeof own_cores, &own_cores) == 0;
    if (!eal_start(eal_options(plan, pools), err)) {
        rep.error = err;
        return rep;
    }
    if (keep_own_cores) pthread_setaffinity_np(pthread_self(), sizeof own_cores, &own_cores);
    // From here a stop (a signal, a proxy that ended) removes the EAL's files on its way out.
    const int files_hook = cluster_stop_add([prefix] { eal_remove_runtime_dir(prefix); });
    fault_strike(fault, me, "setup", nullptr);
    const auto t_start = std::chrono::steady_clock::now();
    {
        ClusterParts parts;
        parts.pool = MempoolPktPool::create(prefix + "-msg", pools.memory.messages.objects, 2048 + kPktHeadroom, err);
        if (parts.pool && pools.memory.bulk.objects > 0) {
            parts.bulk_pool =
                MempoolPktPool::create(prefix + "-bulk", pools.memory.bulk.objects, kBulkSegBytes, err, kBulkPoolCache);
            if (!parts.bulk_pool) parts.pool.reset();  // bring_up fails with err
        }
        const bool ok = bring_up(plan, pools, parts, err);
        if (!ok) rep.error = err;
        if (ok) {
            // A stop from here on: no thread runs a proxy iteration again, then the captures close
            // (whole, readable). Hooks run in order of registration, so the EAL's files (the hook
            // above) are already gone by then: harmless, the proxies' memory stays mapped.
            const int proxies_hook = cluster_stop_add([&parts, &plan] {
                for (auto& px : parts.proxies)
                    if (px->halt(200)) px->finish_capture();
                // Then the packet sockets all at once: the kernel would close them one grace
                // period after another on the way out (af_packet.hpp), which made a stopped
                // survivor's exit the larger part of a fault's end over af_packet.
                if (plan.fabric == "af_packet") af_packet_close_all_at_once();
            });
            serve_proxy_telemetry(&parts.proxies);
            print_cluster_line(plan, parts.proxies);
            print_memory_line(plan, pools.memory);
            ProxyWatch watch(me, launch_proxies(plan, parts.proxies));
            activity_phase(ClusterPhase::kRunning, plan.program ? "running" : ("running " + plan.workload).c_str());
            std::thread fault_timer;
            if (fault.armed && fault.when == "run")
                fault_timer = std::thread([&] {
                    std::this_thread::sleep_for(std::chrono::milliseconds(fault.after_ms));
                    fault_strike(fault, me, "run", [&] { for (auto& px : parts.proxies) px->stop(); });
                });
            const ConvNet net = conv_net(plan, parts, pools.assisting);
            run_compute_threads(plan, net, parts.rings, pools.threads_register, rep);
            if (fault_timer.joinable()) fault_timer.join();
            end_together(plan, parts, net, rep, fault);
            watch.end();
            cluster_stop_remove(proxies_hook);
            stop_proxies(plan, parts.proxies, rep);
            unserve_proxy_telemetry();
            activity_phase(ClusterPhase::kFinished, "finished: reporting");
        }
        rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
        rep.ok = ok && rep.error.empty() && rep.corrupt == 0 && rep.duplicates == 0 && rep.missing == 0 &&
                 !cluster_stopping();
        if (ok && !rep.ok && rep.error.empty())
            rep.error = cluster_stopping() ? "stopped by a signal" : "messages missing, duplicated or corrupt";
        for (auto& px : parts.proxies) px->finish_capture();  // also when the run failed: keep what was seen
        if (plan.exit_without_teardown) {
            // A process about to _exit() leaves its memory to the kernel: nothing of DPDK is torn
            // down, only the files another process could trip over. The memif guard keeps the
            // EAL's interrupt thread to the end, so no link is unmapped under anyone.
            for (auto& px : parts.proxies) (void)px.release();
            for (auto& sp : parts.stack_pools) (void)sp.release();
            (void)parts.pool.release();
            (void)parts.bulk_pool.release();
            (void)parts.guard.release();
            eal_remove_runtime_dir(prefix);
            cluster_stop_remove(files_hook);
            return rep;
        }
        if (parts.guard) parts.guard->stop();  // the PMD's own handling again, the proxies stopped
        parts.proxies.clear();  // before the pools they draw from
        parts.stack_pools.clear();
        for (rte_mempool* mp : parts.mempools) rte_mempool_free(mp);
    }
    cluster_stop_remove(files_hook);
    eal_stop(prefix);
    return rep;
}

}  // namespace iccs
