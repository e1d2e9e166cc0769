// cluster.hpp: one cluster process (DESIGN.md §1, §5): its DPDK EAL, pools, rings, proxies on
// pinned lcores, the fabric links to the other clusters, and its compute threads.
//
// On one host `launch_clusters()` forks one such process per cluster (fork before any DPDK
// call, so each child has its own EAL) and cleans up after them: EAL runtime dirs and memif
// sockets, also when a child crashes or the user presses Ctrl-C.
#pragma once

#include <sys/types.h>

#include <cstdio>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cluster_stop.hpp"  // cluster_stopping(): the built-in programs' loops look at it
#include "config.hpp"
#include "convergence.hpp"
#include "proxy.hpp"

namespace iccs {

struct ClusterPlan;

// Pingpong runs that take turns (`iccs bench rtt --key`): two runs of the pingpong workload, plain
// and authenticated, each its own pair of cluster processes, run their round trips in alternating
// blocks, so both meet the same state of a shared host (the virtual CPUs' placement and speed
// change for seconds at a time, perf/README.md: a ratio of two runs measures the host). Block b of
// run `slot` runs while turn == runs * b + slot; the other run's processes sleep on the futex
// meanwhile and run nothing. In memory shared by every process of both runs (mapped by the
// launcher before it forks them).
struct PingpongTurns {
    std::atomic<uint32_t> turn{0};   // which run's which block runs now (above); moved by the pingers
    std::atomic<uint32_t> ready{0};  // pingers connected: block 0 starts when every run's is
    std::atomic<uint32_t> abort{0};  // a run failed: the others stop waiting
};

// What a compute thread's program reports; the cluster sums it into its report.
struct ComputeResult {
    uint64_t sent = 0, received = 0, corrupt = 0, duplicates = 0;
    std::string error;  // why it failed (empty: it did not)
};

// What a program running on a compute thread gets: its place, and its own convergence module.
struct ComputeEnv {
    const ClusterPlan& plan;
    uint16_t thread;
    Convergence& conv;
    ComputeResult& result;
    ClusterRings* rings = nullptr;  // the cluster's rings and wakers (the runtime's iccs transport sleeps on them)
};
// A program for every compute thread of every cluster; false (with result.error) on failure.
using ComputeProgram = std::function<bool(ComputeEnv&)>;

// Everything one cluster process needs, resolved from the machine configuration.
struct ClusterPlan {
    uint16_t cluster_id = 0;
    uint16_t clusters = 2;
    uint16_t threads = 2;                       // compute threads per cluster
    bool last_is_service = false;               // the runtime's: the last of `threads` is its service endpoint
    std::vector<uint16_t> proxies_per_cluster;  // by cluster id
    std::vector<unsigned> proxy_cores;          // by proxy index of this cluster
    std::vector<unsigned> compute_cores;        // by (cluster * threads + thread) mod its size; empty: not pinned
    Polling polling = Polling::kAdaptive;
    ConvConfig conv;                            // the convergence modules' settings (dispatch, ordering, windows, ...)
    uint32_t peer_timeout_ms = 5000;            // a cluster silent this long is reported down (0: never)
    uint32_t combine_max_bytes = 256;           // message combining (ProxyConfig); 0 = off
    bool assist = true;                         // adaptive: waiting compute threads poll their proxies
    std::string fabric = "memif";               // memif (full mesh of links) | af_packet (veths on a bridge) | pci
                                                // | udp (kernel UDP sockets via io_uring: no DPDK port)
    std::vector<std::string> pci_addresses;     // fabric pci: per proxy of one cluster, or per proxy of all
    uint32_t mtu_bytes = 1500;
    uint32_t base_ip = 0x0a000000;              // proxy p of cluster c: base + c*256 + p + 1
    uint16_t udp_port = 9410;                   // fabric udp: proxy p of cluster c binds udp_port + 64*c + p
    bool udp_sqpoll = false;                    // fabric udp: SQPOLL rings ([machine] udp_sqpoll)
    bool memif_zero_copy = false;               // fabric memif: client ends lend their buffers ([machine] memif_zero_copy)
    bool udp_checksum_off = false;              // fabric memif and [machine] udp_checksum = "off-on-memif":
                                                // datagrams go with UDP checksum 0 (StackConfig::udp_checksum_off)
    std::vector<Ipv4Addr> udp_addresses;        // fabric udp: [] (127.0.0.1), per cluster, or per proxy
    SlidwinConfig slidwin;
    ReassemblyConfig reass;
    RxImpairment impair;
    std::shared_ptr<const WanConfig> wan;       // WAN emulation ([wan], to_wan_config); null = off
    std::shared_ptr<const SlidwinAuthKey> auth;  // [security] key ([security], ICCS_KEY_FILE); null = off
    uint32_t ring_entries = 1024;
    uint32_t pool_segments = 16384;             // message buffers (2 KiB each) of the cluster
    std::string run_id;                         // names EAL file prefixes and sockets of this run
    std::string sock_dir;                       // where memif sockets live
    uint32_t link_timeout_ms = 20'000;
    // --pcap: every proxy records the frames of its ports to pcap_dir/cluster<C>-proxy<P>.pcapng
    // ("" = off), at most pcap_max_bytes per file. DPDK fabrics only (not udp).
    std::string pcap_dir;
    uint64_t pcap_max_bytes = 64ull << 20;
    // The workload: every compute thread sends `messages` messages to every compute thread of
    // every other cluster, sizes uniform in [min_size, max_size], and checks what it receives.
    uint64_t messages = 1000;
    uint32_t min_size = 1, max_size = 9000;
    uint64_t seed = 1;
    bool quiet = false;
    // "alltoall" (above), or "pingpong": thread 0 of cluster 0 sends `messages` messages of
    // min_size bytes to thread 0 of cluster 1, which sends each straight back; round-trip times
    // (after `warmup` untimed rounds) go to result_file as one line: "rtt_ns MEDIAN P99 MIN MAX N";
    // "stream" (for `iccs bench compare`): thread 0 of cluster 0 sends `messages` messages of
    // min_size bytes to thread 0 of cluster 1, which answers the last; result_file gets
    // "stream_ns ELAPSED MESSAGES" (first send to the answer);
    // or "errors": the failure cases of connections (refused, end-of-stream, a cluster that dies:
    // cluster 1 kills itself, and the launcher expects that).
    std::string workload = "alltoall";
    // Or any program (the examples): runs on every compute thread instead of the workload.
    ComputeProgram program;
    uint64_t warmup = 1000;
    // pingpong: the pinger pauses this long before each round [us] (outside the timed round trip),
    // so every message finds the other side idle, as across a slow WAN link. alltoall: every
    // compute thread pauses this long once its connections are open, before it sends (idle
    // proxies, then a burst).
    uint32_t gap_us = 0;
    // pingpong or stream taking turns with other runs (PingpongTurns; null: one run, `warmup` +
    // `messages` rounds): `turn_blocks` blocks, this run's at turn_runs * b + turn_slot. pingpong:
    // each of `turn_block_warmup` untimed and `turn_block_rounds` timed rounds, the result file
    // gets a line of the blocks' medians too, "rtt_block_ns M0 M1 ..."; stream: each of
    // `turn_block_rounds` messages and the answer, timed, "stream_block_ns T0 T1 ...".
    PingpongTurns* turns = nullptr;
    uint32_t turn_slot = 0, turn_runs = 1, turn_blocks = 0;
    uint64_t turn_block_rounds = 0, turn_block_warmup = 0;
    // alltoall for this many seconds instead of `messages` per pair (`iccs soak`): each sender
    // stops at the end and writes how many it sent (sock_dir/soak-C.T-DC.DT); each receiver takes
    // messages, every one checked and in order, until what it got from each cluster equals what
    // that cluster's threads sent it. 0 = off.
    uint32_t soak_s = 0;
    bool inject_error = false;  // alltoall's test hook: one message leaves with a byte wrong (FAIL)
    std::string result_file;
    // The process exits right after run_cluster(): skip DPDK teardown (ports, pools, EAL) and only
    // remove the runtime dir. Set by launch_clusters() for its forked cluster processes.
    bool exit_without_teardown = false;
    // launch_clusters(): when set, each forked cluster process runs this instead of run_cluster()
    // and exits with its return value (the runtime's programs, compute/runtime_launch.hpp).
    std::function<int(const ClusterPlan&)> process_main;
    // launch_clusters(): no proxies run on the fabric (transports direct/delay): skip its set-up
    // and checks (io_uring probe, capture directory, af_packet bridge).
    bool no_fabric = false;
    // launch_clusters(): process_main execs a program of the user's (`iccs run PATH`), which runs
    // its own main before it starts the runtime: its page says "starting" until then.
    bool user_program = false;
};

struct ClusterReport {
    bool ok = false;
    std::string error;
    uint64_t sent = 0, received = 0, corrupt = 0, duplicates = 0, missing = 0;
    double seconds = 0;
    std::vector<ProxySnapshot> proxies;
    std::vector<ConvCounters> threads;  // each compute thread's convergence counters
    std::vector<WanView> wan;           // each proxy's WAN stage at the end (on = false: off)
    // The end of the run (end_together, cluster.cpp): how long it lingered for the others' last
    // retransmissions, and whether every other cluster's idle status (or its being down) ended
    // that before the limit. Not set by a run that never reached its end.
    bool ended = false;
    bool linger_cut = false;
    double linger_ms = 0;
};

// The address plan every cluster agrees on.
Ipv4Addr proxy_ip(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy);
MacAddr proxy_mac(uint16_t cluster, uint16_t proxy);
std::string eal_prefix(const ClusterPlan& plan, uint16_t cluster);
// --pcap: the capture file of a proxy, pcap_dir/cluster<C>-proxy<P>.pcapng.
std::string pcap_path(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy);
// --pcap: create pcap_dir if missing and check it is writable; false with err naming it and why.
bool pcap_dir_ready(const std::string& dir, std::string& err);
// fabric af_packet: the interface a proxy's port opens; afp_fabric_up/down create and remove the
// run's bridge and veth pairs (root needed).
std::string afp_ifname(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy);
bool afp_fabric_up(const ClusterPlan& plan);
void afp_fabric_down(const ClusterPlan& plan);
// fabric pci: the NIC port (PCI address) of a proxy.
std::string pci_address(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy);
// fabric udp: the address and port of a proxy's socket (config.hpp: udp_socket_ip/_port).
Ipv4Addr udp_ip(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy);
// Without a key on a fabric that other hosts can be on (not memif, not udp on loopback only):
// one line saying what a host on the path can do (issue 37); "" otherwise.
std::string unauthenticated_fabric_warning(const ClusterPlan& plan);
uint16_t udp_port(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy);
// fabric memif: the socket of the link between two proxies (the lower cluster id serves it).
std::string link_socket(const ClusterPlan& plan, uint16_t c1, uint16_t p1, uint16_t c2, uint16_t p2);

// Run this process as cluster plan.cluster_id: EAL up, links up, workload, report, EAL down.
ClusterReport run_cluster(const ClusterPlan& plan);
// Print a report as the end-of-run table (per proxy counters).
void print_report(const ClusterPlan& plan, const ClusterReport& r, FILE* out = stdout);

// What launch_clusters calls while the clusters run (the soak): about once a second, from the
// launcher's own thread, with each cluster's pid (0 once it ended).
using LaunchTick = std::function<void(const std::vector<pid_t>& pids)>;
// Fork one process per cluster, wait for all, clean up. Returns 0 when every cluster succeeded.
// A cluster that ends with a failure before the run's end stops the others at once (SIGTERM; they
// end within kStopBudgetMs, cluster_stop.hpp), with one line naming it, its signal or status and
// what it was doing (activity.hpp). SIGINT/SIGTERM to the launcher stop every cluster the same way
// and the run exits 128 + the signal; a second one kills them at once.
int launch_clusters(ClusterPlan plan, uint32_t timeout_s, const LaunchTick& tick = {});

}  // namespace iccs
