// cluster_memory.cpp: the memory a cluster costs (cluster_memory.hpp).
#include "cluster_memory.hpp"

#include <rte_build_config.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include <algorithm>
#include <bit>
#include <cstdio>

#include "conv_hdr.hpp"
#include "dpdk_env.hpp"
#include "dpdk_pool.hpp"
#include "slidwin_hdr.hpp"
#include "uring_udp.hpp"

namespace iccs {

namespace {

constexpr uint64_t kMiB = 1ull << 20;
// What a pool costs besides its objects: the header with a cache for every possible lcore
// (RTE_MAX_LCORE x ~8 KiB, when the pool has a cache) and the ring of its free objects.
uint64_t pool_overhead(uint32_t objects, bool cached) {
    const uint64_t header = sizeof(rte_mempool) + (cached ? uint64_t{RTE_MAX_LCORE} * sizeof(rte_mempool_cache) : 0);
    return header + static_cast<uint64_t>(rte_ring_get_memsize(static_cast<unsigned>(std::bit_ceil(objects + 1u))));
}

std::string mib(uint64_t bytes) {
    char b[32];
    std::snprintf(b, sizeof b, bytes >= 100 * kMiB ? "%.0f MiB" : "%.1f MiB", double(bytes) / double(kMiB));
    return b;
}
std::string kib(uint32_t bytes) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f KiB", bytes / 1024.0);
    return b;
}
std::string gib(uint64_t bytes) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f GiB", double(bytes) / double(1ull << 30));
    return b;
}

// The rest of a cluster process besides its DPDK memory and links: code and libraries, the
// heap (slidwin's and convergence's state, the report), thread stacks touched. Measured here
// (VmRSS minus the pools, 2x2 alltoall over memif and udp: 30-45 MiB), rounded up.
constexpr uint64_t kProcessBytes = 64 * kMiB;
// DPDK's own use of -m besides our pools (ethdev data, the PMDs' queues, telemetry): measured
// ~3 MiB with 8 memif ports; the heap keeps some room beyond that.
constexpr uint64_t kDpdkOwnBytes = 32 * kMiB;

}  // namespace

bool proxies_exchange(const ClusterPlan& plan, uint16_t c, uint16_t p, uint16_t d, uint16_t q) {
    if (c == d) return false;
    return q == p % plan.proxies_per_cluster[d] || p == q % plan.proxies_per_cluster[c];
}

ClusterMemory cluster_memory(const ClusterPlan& plan, uint16_t me) {
    ClusterMemory m;
    m.proxies = plan.proxies_per_cluster[me];
    const bool kernel_udp = plan.fabric == "udp";
    for (uint16_t p = 0; p < m.proxies; ++p) {
        uint32_t peers = 0;
        for (uint16_t d = 0; d < plan.clusters; ++d)
            for (uint16_t q = 0; q < plan.proxies_per_cluster[d]; ++q) peers += proxies_exchange(plan, me, p, d, q);
        m.peers_per_proxy = std::max(m.peers_per_proxy, peers);
        if (plan.fabric == "memif") {
            m.memif_ports += peers;
            for (uint16_t d = me + 1; d < plan.clusters; ++d)  // the lower cluster id serves the link
                for (uint16_t q = 0; q < plan.proxies_per_cluster[d]; ++q) m.memif_links_served += proxies_exchange(plan, me, p, d, q);
        }
    }
    // RX buffers a proxy can have outstanding at once, each frame one mbuf: every sub-connection's
    // receive window full of the largest datagrams, the reassembly cap, the compute threads' rings
    // full, and a burst per port. Fewer and the receive windows can starve the port of mbufs, so
    // the missing datagram that would drain them can never arrive. The largest datagram is one
    // piece: convergence cuts larger messages at the stripe threshold. Fabric udp: counted in the
    // 2 KiB segments a received datagram is copied into (the kernel reassembles).
    const uint32_t threshold = plan.conv.stripe_threshold_bytes ? plan.conv.stripe_threshold_bytes
                                                                : default_stripe_threshold(plan.mtu_bytes);
    const uint32_t largest = std::min(plan.max_size, threshold);
    // DPDK fabrics: frames of a datagram, each in ceil((mtu + 14) / 2048) mbufs (a 9000-byte frame
    // takes 5: counting frames alone starved the port at MTU 9000).
    const uint32_t mbufs_per_frame = (plan.mtu_bytes + 14 + rx_mbuf_room(plan, me) - RTE_PKTMBUF_HEADROOM - 1) /
                                     (rx_mbuf_room(plan, me) - RTE_PKTMBUF_HEADROOM);
    const uint32_t frags_per_msg =
        kernel_udp ? (largest + kConvHdrLen + kSlidwinHdrLen + kDgramAddrLen) / 2048 + 1
                   : ((largest + kConvHdrLen + kSlidwinHdrLen + 8) / (plan.mtu_bytes - 28) + 1) * mbufs_per_frame;
    // Compute threads that run the proxies' iterations (inline polling, the assist) register with
    // the EAL: each may then park up to 1.5 caches of every RX pool in its lcore cache.
    const bool threads_register = plan.polling == Polling::kInline || (plan.polling == Polling::kAdaptive && plan.assist);
    m.rx.objects = (threads_register ? uint32_t{plan.threads} * kLcoreCacheMax : 0) +
                   m.peers_per_proxy * plan.slidwin.rcv_buf_datagrams * frags_per_msg +
                   (kernel_udp ? 0 : plan.reass.max_bytes / 2048) +
                   uint32_t{plan.threads} * (plan.ring_entries + plan.conv.zero_copy_packets) * frags_per_msg +
                   1024 * (m.peers_per_proxy + 1) +
                   (plan.wan ? static_cast<uint32_t>(plan.wan->hold_limit_bytes / 2048) : 0);
    m.rx.obj_bytes = kernel_udp ? pool_obj_bytes(MempoolPktPool::elt_bytes(2048 + kPktHeadroom))
                                : pool_obj_bytes(mbuf_elt_bytes(rx_priv_size(), rx_mbuf_room(plan, me)));
    m.stack = {kStackSegs, pool_obj_bytes(MempoolPktPool::elt_bytes(kStackSegBytes + kPktHeadroom))};
    if (!kernel_udp) m.tx_desc = {kTxDescs, pool_obj_bytes(mbuf_elt_bytes(0, 0))};
    m.messages = {plan.pool_segments, pool_obj_bytes(MempoolPktPool::elt_bytes(2048 + kPktHeadroom))};
    if (!kernel_udp && plan.mtu_bytes + 14 > 2048)
        m.bulk = {std::max(plan.pool_segments / 8, 1u), pool_obj_bytes(MempoolPktPool::elt_bytes(kBulkSegBytes))};
    const uint64_t proxy_overhead = pool_overhead(m.rx.objects, true) + pool_overhead(m.stack.objects, true) +
                                    (kernel_udp ? 0 : pool_overhead(m.tx_desc.objects, true));
    m.per_proxy_bytes = m.rx.bytes() + m.stack.bytes() + m.tx_desc.bytes() + proxy_overhead;
    const uint64_t bulk_overhead = m.bulk.objects > 0 ? pool_overhead(m.bulk.objects, true) : 0;
    m.pool_overhead_bytes = pool_overhead(m.messages.objects, true) + bulk_overhead + uint64_t{m.proxies} * proxy_overhead;
    // A ring from each compute thread to each proxy and one into each compute thread.
    const uint64_t ring = static_cast<uint64_t>(rte_ring_get_memsize(std::bit_ceil(plan.ring_entries)));
    m.rings_bytes = ring * plan.threads * (m.proxies + 1u);
    m.dpdk_bytes = m.messages.bytes() + pool_overhead(m.messages.objects, true) + m.bulk.bytes() + bulk_overhead +
                   uint64_t{m.proxies} * m.per_proxy_bytes +
                   m.rings_bytes;
    m.dpdk_mb = static_cast<uint32_t>((m.dpdk_bytes + m.dpdk_bytes / 20 + kDpdkOwnBytes + kMiB - 1) / kMiB);
    // A memif link's regions (drivers/net/memif: one ring each way of 2^10 slots, a buffer of bsize
    // per slot, and the rings' descriptors), created by the serving side, mapped by both.
    const uint64_t bsize = std::max<uint64_t>(2048, std::bit_ceil(plan.mtu_bytes + 14ull));
    m.memif_link_bytes = 2 * 1024 * (bsize + 16) + 2 * 4096;
    m.process_bytes = kProcessBytes;
    m.total_bytes = uint64_t{m.dpdk_mb} * kMiB + m.memif_links_served * m.memif_link_bytes + m.process_bytes;
    return m;
}

bool memif_lends_buffers(const ClusterPlan& plan, uint16_t cluster) {
    for (uint16_t d = 0; d < cluster; ++d)
        if (memif_zero_copy_link(plan, cluster, d)) return true;
    return false;
}

uint16_t rx_mbuf_room(const ClusterPlan& plan, uint16_t cluster) {
    if (!memif_lends_buffers(plan, cluster)) return RTE_MBUF_DEFAULT_BUF_SIZE;
    const uint32_t frame = (plan.mtu_bytes + 14 + 63) & ~63u;  // a cache line multiple
    return static_cast<uint16_t>(RTE_PKTMBUF_HEADROOM + std::max<uint32_t>(frame, 2048));
}

bool memif_zero_copy_link(const ClusterPlan& plan, uint16_t client, uint16_t server) {
    return plan.memif_zero_copy && plan.proxies_per_cluster.size() == 2 && client < 2 && server < 2 &&
           plan.proxies_per_cluster[client] == 1 && plan.proxies_per_cluster[server] == 1;
}

std::string ClusterMemory::line() const {
    std::string s = "memory " + mib(total_bytes) + ": DPDK -m " + std::to_string(dpdk_mb) + " (messages " +
                    std::to_string(messages.objects) + " x " + kib(messages.obj_bytes) + " = " + mib(messages.bytes()) +
                    (bulk.objects > 0 ? ", large " + std::to_string(bulk.objects) + " x " + kib(bulk.obj_bytes) + " = " +
                                            mib(bulk.bytes())
                                      : std::string()) +
                    "; per proxy " + mib(per_proxy_bytes) + ": RX " + std::to_string(rx.objects) + " x " +
                    kib(rx.obj_bytes) + " for " + std::to_string(peers_per_proxy) + " peers, own " +
                    std::to_string(stack.objects) + " x " + kib(stack.obj_bytes);
    if (tx_desc.objects > 0) s += ", TX descriptors " + std::to_string(tx_desc.objects);
    s += "; pool headers and caches " + mib(pool_overhead_bytes) + ")";
    if (memif_ports > 0)
        s += ", memif " + std::to_string(memif_ports) + " ports, " + std::to_string(memif_links_served) + " links x " +
             mib(memif_link_bytes) + " served";
    s += ", the process ~" + mib(process_bytes);
    return s;
}

uint64_t host_mem_available() { return meminfo_value("MemAvailable") * 1024; }

bool run_memory_fits(const ClusterPlan& plan, std::string& err) {
    uint64_t need = 0, dpdk = 0, links = 0;
    uint32_t links_n = 0;
    ClusterMemory largest;
    for (uint16_t c = 0; c < plan.clusters; ++c) {
        const ClusterMemory m = cluster_memory(plan, c);
        if (m.memif_ports > RTE_MAX_ETHPORTS) {
            err = "cluster " + std::to_string(c) + " would need " + std::to_string(m.memif_ports) +
                  " DPDK ports (fabric memif: a port per peer proxy) and DPDK allows " + std::to_string(RTE_MAX_ETHPORTS) +
                  " a process: use fewer clusters or proxies, or fabric udp";
            return false;
        }
        need += m.total_bytes;
        dpdk += uint64_t{m.dpdk_mb} * kMiB;
        links += uint64_t{m.memif_links_served} * m.memif_link_bytes;
        links_n += m.memif_links_served;
        if (m.total_bytes > largest.total_bytes) largest = m;
    }
    const uint64_t have = host_mem_available();
    if (have == 0 || need <= have) return true;
    err = "this run needs " + gib(need) + " of memory (" + std::to_string(plan.clusters) + " clusters: DPDK " + gib(dpdk) +
          (links_n > 0 ? ", memif links " + std::to_string(links_n) + " x " + mib(largest.memif_link_bytes) : std::string()) +
          ", the processes " + gib(uint64_t{plan.clusters} * largest.process_bytes) + "; the largest cluster: " +
          largest.line() + ") and this host has " + gib(have) +
          " available (MemAvailable): use fewer clusters or proxies, or lower [cluster] mempool_mbufs or "
          "[slidwin] rcv_buf_datagrams";
    return false;
}

}  // namespace iccs
