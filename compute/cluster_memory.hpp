// cluster_memory.hpp: what a cluster costs in memory (issue 34), worked out from its plan before
// anything is allocated: the pools of the cluster process and of each of its proxies, the rings,
// the memif links' shared regions, and the DPDK memory size (-m) that holds the pools.
//
// One function, used three ways: run_cluster sizes its pools and -m from it; every cluster prints
// it at start-up in one line; and the launcher adds up every cluster's before it starts any, and
// refuses a run this host cannot hold with the figure it needs and what the host has, instead of
// the run failing inside DPDK ("cannot create the mbuf pools of proxy c0p1").
// proxy/README.md ("What a cluster costs") has the figures and where each count comes from.
#pragma once

#include <cstdint>
#include <string>

#include "cluster.hpp"

namespace iccs {

// The pools' fixed shapes (run_cluster creates them so).
inline constexpr uint32_t kPoolCache = 256;                    // lcore cache of each pool [objects]
inline constexpr uint32_t kLcoreCacheMax = kPoolCache * 3 / 2;  // what one lcore cache can park (DPDK's flush threshold)
inline constexpr uint32_t kStackSegs = 16384;                   // a proxy's own buffers: acks, fragment headers, copies
inline constexpr uint32_t kStackSegBytes = 512;
inline constexpr uint32_t kTxDescs = 8192;                      // a proxy's TX descriptor mbufs (tx_lend)
inline constexpr uint32_t kBulkSegBytes = 16384;                // a large message buffer (ClusterMemory::bulk)
// ... whose pool's lcore caches hold as many bytes as a cache of message buffers: with 256 of
// them, the caches of the sending thread and of the proxy that frees them could hold 768 of 1024.
inline constexpr uint32_t kBulkPoolCache = 32;

// One pool: its objects and what each costs in DPDK memory (mempool header, trailer, alignment).
struct PoolCost {
    uint32_t objects = 0;
    uint32_t obj_bytes = 0;
    uint64_t bytes() const { return uint64_t{objects} * obj_bytes; }
};

struct ClusterMemory {
    uint32_t proxies = 0;
    uint32_t peers_per_proxy = 0;  // sub-connections (and memif links) of each proxy
    PoolCost messages;             // the compute threads' message buffers (2 KiB), one pool
    // ... and their large buffers (kBulkSegBytes), one pool, on a DPDK fabric with frames larger
    // than a message buffer (MTU above 2 KiB: MPI runs on memif have 9000): a copying send chains
    // a message's payload from it while it has any (ConvNet::bulk_pool). Every segment of a frame
    // costs the sending proxy a view, a TX descriptor and their cache misses: a 9,000-byte frame
    // spans 5-6 buffers of 2 KiB, 1-2 of 16 KiB (issue 35). pool_segments / 8 of them: as many
    // bytes as the message buffers. None otherwise (objects 0).
    PoolCost bulk;
    // Per proxy: RX mbufs (every sub-connection's receive window full of the largest datagrams,
    // the reassembly cap, the compute threads' rings full, a burst per port, what registered
    // threads may park in lcore caches, the WAN stage's hold limit), its own buffers for acks and
    // fragment headers, and TX descriptors.
    PoolCost rx, stack, tx_desc;
    uint64_t pool_overhead_bytes = 0;  // every pool's header with its lcore caches, and its ring
    uint64_t rings_bytes = 0;          // compute thread <-> proxy rings
    uint64_t per_proxy_bytes = 0;      // rx + stack + tx_desc + their overheads
    uint64_t dpdk_bytes = 0;           // everything above, the cluster's DPDK memory
    uint32_t dpdk_mb = 0;              // -m: dpdk_bytes and room for DPDK's own (ethdev data, PMD state)
    // fabric memif: the links this cluster serves (the lower cluster id of a pair creates the
    // link's shared regions; both map them) and what one costs (rings and buffers, both ways).
    uint32_t memif_links_served = 0;
    uint64_t memif_link_bytes = 0;
    uint32_t memif_ports = 0;          // DPDK ports of the process (at most RTE_MAX_ETHPORTS)
    uint64_t process_bytes = 0;        // the rest of a cluster process (code, heap, thread stacks): measured
    uint64_t total_bytes = 0;          // what the host gives this cluster: -m, its links, the rest

    // "memory 412 MiB: DPDK -m 368 (messages 16384 x 2.3 KiB = 37 MiB; per proxy 160 MiB: RX 54272 x
    // 2.4 KiB, ...), memif 15 links x 4.0 MiB served, the process ~40 MiB"
    std::string line() const;
};

// The cost of cluster `cluster` of the plan (its own proxies, threads, peers and fabric).
ClusterMemory cluster_memory(const ClusterPlan& plan, uint16_t cluster);
// The data room of cluster `cluster`'s RX mbufs: DPDK's default (2 KiB after the headroom), or a
// whole frame when the cluster is the client end of a zero-copy memif link (memif_lends_buffers):
// it lends these mbufs to the link, and a frame the server writes over several of them is chained
// by descriptor flags that DPDK 22.11's memif does not clear when it reuses a slot (cluster.cpp,
// add_fabric_ports).
uint16_t rx_mbuf_room(const ClusterPlan& plan, uint16_t cluster);
// Whether the memif link between clusters `client` (the higher id) and `server` runs zero-copy:
// [machine] memif_zero_copy, two clusters of one proxy each (one link). With two proxies a cluster
// (two links between the same two processes) the second link did not come up in zero-copy (DPDK
// 22.11, test mpi-p2p-2x2-memif-jumbo-zc), and with three clusters of one the process that served
// one link and lent its buffers to another died once of SIGBUS in memif's transmit (1 run of 2):
// such links copy as before.
bool memif_zero_copy_link(const ClusterPlan& plan, uint16_t client, uint16_t server);
// Whether cluster `cluster` is the client end of a zero-copy memif link (it lends its buffers;
// its EAL then keeps its memory in one file per segment list: --single-file-segments).
bool memif_lends_buffers(const ClusterPlan& plan, uint16_t cluster);

// The run as a whole against this host, before any cluster starts: true when it fits. Else false
// with err: what it needs (clusters x each, links), what the host has (MemAvailable), and what to
// change. Also false when a cluster would need more DPDK ports than DPDK allows a process.
bool run_memory_fits(const ClusterPlan& plan, std::string& err);
// MemAvailable of /proc/meminfo [bytes] (0 when unreadable).
uint64_t host_mem_available();

// Do proxy p of cluster c and proxy q of cluster d exchange traffic? A proxy sends to remote proxy
// (its index mod the remote cluster's proxy count) (DESIGN.md §2), so with equal proxy counts only
// proxies of the same index talk. The memif fabric links only such pairs, and a proxy opens
// sub-connections only to them: with a full mesh 16 clusters x 2 proxies needed 60 DPDK ports a
// process (RTE_MAX_ETHPORTS is 32) and twice the receive windows.
bool proxies_exchange(const ClusterPlan& plan, uint16_t c, uint16_t p, uint16_t d, uint16_t q);

}  // namespace iccs
