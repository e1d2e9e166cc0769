// proxy.hpp: one proxy (DESIGN.md §2): a stack instance on its own core, its NI ports, its
// sub-connections to every proxy of the other clusters, and the loop that ties them together.
//
// One iteration of the loop: drain the rings of the cluster's compute threads (bursts of 32),
// poll the ports (bursts of 32) into the stack, run timers, flush the stack's TX queue onto the
// ports. Messages arriving for this cluster go straight to the destination thread's ring.
// Polling: `busy` spins, `adaptive` spins a while then sleeps until a compute thread wakes it
// (or a short timeout, to poll the ports), `inline` has no thread: compute threads call
// poll_once() themselves. Under adaptive, a compute thread that waits for a message or has just
// sent runs the iteration itself when no other thread does (the assist), so a round trip does
// not wait for the proxy thread to be scheduled. One thread at a time runs an iteration: an
// atomic flag the proxy thread also takes around each of its iterations (try_poll_inline).
// With fabric "udp" the proxy has no ports and its Stack stays idle: its sub-connections sit on a
// UDP socket of the kernel driven by io_uring (uring_udp.hpp), polled in the same places.
#pragma once

#include <poll.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "bundle.hpp"
#include "clock.hpp"
#include "msg_trace.hpp"
#include "doorbell.hpp"
#include "pcapng.hpp"
#include "polling.hpp"
#include "port.hpp"
#include "rings.hpp"
#include "slidwin_endpoint.hpp"
#include "stack.hpp"
#include "timer_wheel.hpp"
#include "uring_udp.hpp"
#include "wan_emu.hpp"

namespace iccs {

// A proxy anywhere in the machine, as every proxy knows it (from the configuration).
struct ProxyAddr {
    uint16_t cluster;
    uint16_t index;   // proxy index within its cluster
    Ipv4Addr ip;
    MacAddr mac;
    uint16_t udp_port = 0;  // the port its sub-connections listen on (0: ProxyConfig::udp_port)
};

// Fault injection on the receive path, for tests (DESIGN.md: a drop/duplicate/reorder option).
struct RxImpairment {
    double drop = 0, duplicate = 0;
    uint32_t reorder_window = 0;
    uint64_t seed = 1;
    // A proxy slowed on purpose (tests of least-loaded dispatch): proxy `slow_proxy` of every
    // cluster pauses slow_us after each iteration that did work.
    int32_t slow_proxy = -1;
    uint32_t slow_us = 0;
};

struct ProxyConfig {
    uint16_t cluster = 0;
    uint16_t index = 0;
    uint16_t threads = 1;               // compute threads of this cluster (ports 0..threads-1)
    StackConfig stack;                  // our MAC, IP, MTU, reassembly
    SlidwinConfig slidwin;
    uint16_t udp_port = 9410;
    Polling polling = Polling::kAdaptive;
    uint32_t spin_before_sleep_us = 50; // adaptive: idle time before sleeping [us]
    uint32_t sleep_us = 50;             // adaptive: longest sleep before polling the ports again [us]
                                        // when nothing wakes the proxy on arrival (the fallback:
                                        // this bounds the latency it adds)
    uint32_t woken_sleep_us = 10'000;   // adaptive with wake on arrival (doorbells, io_uring wait):
                                        // longest sleep [us] (timers due earlier end it sooner)
    // Message combining (issue 21): messages of at most this many bytes (convergence header
    // included) that meet in one ring burst for the same remote cluster travel in one datagram
    // (a kBundle message, conv_hdr.hpp) up to the MTU, sent at the end of the burst; 0 = off.
    uint32_t combine_max_bytes = 0;
    RxImpairment impair;
    // Liveness: a status message goes to every other cluster each keepalive period (and at once
    // when this cluster says it is done); a cluster heard of by no message for peer_timeout is
    // marked down (ClusterRings::cluster_down) and the compute threads are woken. 0: never.
    uint32_t peer_timeout_ms = 5000;
    // A cluster never heard from yet is not silent: it may not have started (an MPI rank that
    // enters MPI_Init seconds after the others starts its cluster's agent that much later). Until
    // the first datagram of it, the time-out is this (never less than peer_timeout_ms), counted
    // from open_subconnections; then it is reported down as never came (DownReason::kNeverCame).
    // memif waits as long for its links: the runtime passes ClusterPlan::link_timeout_ms (20 s).
    uint32_t start_grace_ms = 20'000;
    uint32_t keepalive_ms = 100;
    std::vector<ProxyAddr> peers;       // every proxy of every other cluster
    std::vector<uint16_t> proxies_per_cluster;  // by cluster id
    // WAN emulation (wan_emu.hpp): null = off, and then it costs one branch per message.
    std::shared_ptr<const WanConfig> wan;
    // Per-datagram authentication ([security], stack/slidwin_auth.hpp): null = off. The proxy
    // keeps it alive for its sub-connections (SlidwinConfig::auth points at it).
    std::shared_ptr<const SlidwinAuthKey> auth;
};

// A change of the WAN emulation's parameters from another thread (telemetry, `iccs wan`).
struct WanCommand {
    // kSet: bandwidth, latency (the link keeps its loss); kLoss: params.loss only; kMode: mode.
    enum Kind : uint8_t { kSet, kLoss, kMode } kind = kSet;
    uint32_t a = 0, b = 0;
    WanLinkParams params;
    WanMode mode = WanMode::kLive;
};

// The WAN stage as telemetry shows it (published every 10 ms by the proxy thread).
struct WanView {
    bool on = false;
    WanMode mode = WanMode::kConstant;
    uint32_t sites = 0, my_site = 0;
    uint64_t held_msgs = 0, held_bytes = 0, held_max_msgs = 0, hold_full = 0, released = 0;
    struct Link {
        uint32_t a, b;
        WanLinkParams params;
        WanLinkCounters counters;
    };
    std::vector<Link> links;         // the links this proxy emulates
    std::vector<WanChange> changes;  // the most recent parameter changes, oldest first
};

// Per-proxy counters (DESIGN.md §6), written only by the proxy's thread.
#define ICCS_PROXY_COUNTERS(X)                                                  \
    X(msgs_tx, "messages taken from compute threads (sent, or waiting for window)") \
    X(bytes_tx, "their bytes (convergence header + payload)")                   \
    X(msgs_rx, "messages delivered to compute threads")                         \
    X(bytes_rx, "their bytes")                                                  \
    X(ring_full, "times a full compute-thread ring stopped a sub-connection's delivery") \
    X(backlog_max, "most messages waiting for send window at once")             \
    X(bad_dst, "messages for an unknown cluster or port (dropped)")             \
    X(refused, "connects for a port nobody bound, answered with a refusal")    \
    X(status_tx, "status (keepalive) messages sent to other clusters' proxies") \
    X(status_rx, "status messages received")                                   \
    X(keepalive_acks, "keepalive frames (a bare ack) sent where a route's status message waits for its window") \
    X(peers_down, "clusters this proxy found silent for the peer timeout")      \
    X(own_stalls, "times this proxy found it had not run for over 0.5 s (not counted as peers' silence)") \
    X(peers_restarted, "clusters that came back with a new run token (handled as down)") \
    X(tx_queue_drops, "frames dropped: a port's TX ring stayed full too long")  \
    X(impair_dropped, "frames dropped by fault injection")                      \
    X(impair_duplicated, "frames duplicated by fault injection")                \
    X(capture_frames, "frames written to the capture file (--pcap)")               \
    X(capture_missed, "frames not captured: the file reached pcap_max_bytes")   \
    X(busy_ns, "time spent in iterations that did work [ns]")                   \
    X(total_ns, "time the loop ran [ns]")                                       \
    X(queue_ns_sum, "sum over iterations of ring occupancy x iteration time")   \
    X(sleeps, "adaptive sleeps")                                                \
    X(assists, "adaptive: iterations with work run by a compute thread (the assist)") \
    X(bell_rings, "doorbells rung: a peer proxy woken after a TX burst to it")  \
    X(combined_dgrams, "bundles sent: datagrams carrying several messages")     \
    X(combined_msgs, "messages sent in bundles (per bundle: combined_msgs / combined_dgrams)") \
    X(bundles_rx, "bundles received")                                           \
    X(bundle_msgs_rx, "messages unpacked from received bundles")                \
    X(bad_bundle, "bundles with a malformed record (the rest of the bundle dropped)") \
    X(bundle_nobuf, "bundle unpacking stopped for want of a buffer for a view (resumed later)") \
    X(msg_time_count, "messages timed from the sender's enqueue to delivery")   \
    X(msg_time_sum_ns, "their summed message time [ns]")

// Message time histogram: bucket i counts times in [2^i, 2^(i+1)) ns (bucket 0 also holds 0 and 1).
inline constexpr uint32_t kMsgTimeBuckets = 40;

struct ProxyCounters {
#define X(name, doc) uint64_t name = 0;
    ICCS_PROXY_COUNTERS(X)
#undef X
    uint64_t msg_time_hist[kMsgTimeBuckets] = {};
    template <typename Fn>
    void for_each(Fn&& fn) const {
#define X(name, doc) fn(#name, doc, name);
        ICCS_PROXY_COUNTERS(X)
#undef X
    }
};

// The upper bound [ns] of the histogram bucket holding quantile q (0..1) of the message times.
uint64_t msg_time_quantile_ns(const ProxyCounters& c, double q);

// Everything a proxy counts, gathered for printing and telemetry.
struct ProxySnapshot {
    ProxyCounters proxy;
    StackCounters stack;
    SlidwinCounters slidwin;  // summed over sub-connections
    // frames through the ports; with fabric udp, datagrams through the socket (and tx_waits)
    uint64_t port_rx = 0, port_tx = 0, port_tx_ring_full = 0;
    bool kernel_udp = false;  // fabric udp: `uring` holds the socket's counters
    UringUdpCounters uring;
};

class Proxy final : public SlidwinSink {
   public:
    Proxy(const ProxyConfig& cfg, MempoolPktPool& pool, ClusterRings& rings);
    ~Proxy() override;

    // Attach a port; frames for `macs` leave through it (a memif link reaches one peer).
    bool add_port(const std::string& devargs, rte_mempool* rx_pool, rte_mempool* desc_pool,
                  const std::vector<MacAddr>& reaches, uint32_t start_timeout_ms, std::string& err);
    bool wait_links(uint32_t timeout_ms, std::string& err);
    // Wake on arrival for adaptive polling over a host-local fabric (doorbell.hpp): this proxy
    // sleeps on the doorbell at path (its compute threads' wakes go there too) ...
    bool sleep_on_doorbell(const std::string& path, std::string& err);
    // ... and after a TX burst on port `port` it rings the doorbell of the proxy that port reaches.
    bool ring_on_tx(size_t port, const std::string& peer_path, std::string& err);
    // Wake on arrival where every port has a descriptor the kernel makes readable when a frame
    // arrives (af_packet): sleep in ppoll() on them and on an eventfd the compute threads' Waker
    // writes. True when set up; false (and the bounded sleep stays) when some port has none.
    bool sleep_in_poll(std::string& err);
    size_t port_count() const { return ports_.size(); }
    // The memif hang-up guard (memif_guard.hpp) found the peer of port `port` gone; any thread
    // (the guard calls it on the EAL interrupt thread): a flag only. The poller reads what the
    // peer left in the link, then leaves the port (no more rx or tx on it) and reports the peer's
    // cluster down unless it said it was done (`proxy C.P: cluster N hung up its memif link`).
    void port_hung_up(size_t port);
    // Stop the proxy and make sure no thread runs its iteration again: the proxy thread (if any)
    // leaves its loop, and the caller takes the poller flag for good (waiting for a running
    // iteration to end, at most timeout_ms). True when it holds the flag: nothing else touches
    // the proxy any more, so its capture can be closed. For a process that ends now (cluster_stop).
    bool halt(uint32_t timeout_ms);
    // How a sleeping proxy is woken (adaptive polling), for the start-up line.
    std::string wake_path() const;
    // fabric udp: the sub-connections use a kernel UDP socket bound to uc.ip:uc.port, driven by
    // io_uring, instead of ports and the stack. Received datagrams are copied into rx_pool. Call
    // before open_subconnections(); false with err (io_uring refused, address taken, ...).
    bool add_udp_socket(const UringUdpConfig& uc, PktPool& rx_pool, std::string& err);
    // The I/O path, for the startup line: "DPDK ethdev (...)" or the io_uring socket's description.
    std::string io_path() const;
    // --pcap: record every frame the ports deliver and every frame their TX rings take into the
    // pcapng file at path (one interface per port, direction on each frame), at most max_bytes.
    // Call after the ports are added, before the first poll. false with err (fabric udp has no
    // frames; the file cannot be written).
    bool start_capture(const std::string& path, uint64_t max_bytes, std::string& err);
    // Flush and close the capture file (the end of a run: cluster processes _exit() without
    // destructors). Call when nothing polls the proxy any more.
    void finish_capture();
    // --trace: record every message taken from a compute thread and delivered to one (msg_trace.hpp),
    // at most `capacity` records. Call before the first poll.
    void start_trace(size_t capacity) { trace_ = std::make_unique<MsgTrace_st>(capacity); }
    // Write the trace to path (call when nothing polls the proxy any more); false with err.
    // Records and dropped through trace_counts (0 and 0 when tracing is off).
    bool finish_trace(const std::string& path, std::string& err);
    void trace_counts(uint64_t& records, uint64_t& dropped) const {
        records = trace_ ? trace_->size() : 0;
        dropped = trace_ ? trace_->dropped() : 0;
    }
    // Open the sub-connections to every peer proxy (static ARP entries from the configuration).
    void open_subconnections(uint64_t now_ns);

    // One iteration of the loop; returns the work done (frames + messages).
    uint32_t poll_once(uint64_t now_ns);
    // The loop for a proxy thread, until stop() (busy or adaptive).
    void run();
    void stop() { stop_.store(true, std::memory_order_release); }
    // A compute thread runs one iteration if no other thread is (the proxy thread or another
    // compute thread): inline polling, and adaptive polling's assist (then only once the proxy
    // thread made its first iteration: with fabric udp that one takes the ring, arms the receive,
    // and a compute thread takes the port's direct path, uring_udp.hpp). Returns the work done
    // (0: not taken).
    uint32_t try_poll_inline(uint64_t now_ns);
    // adaptive: the last compute thread to stop watching a sleeping proxy (rings.hpp,
    // Waker::watch_leave) runs one iteration, waiting for a running one to end rather than
    // giving up: a frame whose doorbell was skipped may have come after that one looked.
    // to_sleep: the thread sleeps next, so nobody runs our timers (run() sleeps past them while
    // watched): wake the proxy thread if one is armed, and with fabric udp if it sleeps on its
    // futex (it went to sleep watched), where no datagram wakes it.
    uint32_t poll_leaving(bool to_sleep);

    // True when every sub-connection has nothing unacked and nothing waits to be sent.
    bool idle() const;
    // This proxy's status messages have said idle (ClusterRings::set_local_idle) to every other
    // cluster: read by the end of a run, on another thread.
    bool said_idle() const { return said_idle_.load(std::memory_order_acquire); }
    // Counters, torn-free for another thread (seqlock, published every millisecond).
    ProxySnapshot snapshot() const;
    const ProxyConfig& config() const { return cfg_; }
    Stack& stack() { return stack_; }

    // SlidwinSink: a message in order from a sub-connection -> the destination thread's ring
    // (held by the WAN stage first when it comes from another site).
    bool on_message(SubConnection& sc, PktBuf* msg) override;
    // A peer proxy's cluster came back with a new run token: reported, and marked down.
    void on_peer_restarted(SubConnection& sc, uint64_t new_token) override;

    // WAN emulation: a command for the proxy thread (any thread; applied in its next iteration),
    // and the published view. wan_post is false when the stage is off.
    bool wan_post(const WanCommand& c);
    WanView wan_view() const;

   private:
    struct Route {
        uint16_t cluster;
        SubConnection* sc;  // the sub-connection this proxy uses for that cluster
        std::deque<PktBuf*> backlog;  // accepted from rings, waiting for the send window
    };
    void drain_rings(uint64_t now_ns, uint32_t& work);
    // Combining: add m to the bundle open for `cluster` (or open one with m); false when m cannot
    // join (then send the open one first, and m alone).
    bool combine(uint16_t cluster, PktBuf* m);
    // Send the bundle open for `cluster` (a single message goes as it is).
    void flush_bundle(uint16_t cluster, uint64_t now_ns);
    // A message from a sub-connection: a bundle is unpacked into on_one() per record.
    bool on_one(SubConnection& sc, PktBuf* msg);
    // Send m on the route to `cluster`, behind its backlog. Consumes m.
    void route_send(uint16_t cluster, PktBuf* m, uint64_t now_ns);
    // Answer a kConnect for a port nobody bound with a kRefuse (consumes connect).
    void refuse(PktBuf* connect, uint64_t now_ns);
    // Keepalive/status to every other cluster, and the peer timeout check.
    void status_pass(uint64_t now_ns);
    // On a peer reported down: one stderr line with where this proxy's buffers are (mempool_state).
    void report_pools() const;
    void flush_tx();
    // A port's tx_burst; with a capture, the frames the device took are recorded (an extra
    // reference keeps them readable: a driver may release a frame inside tx_burst).
    uint32_t port_tx(size_t port, PktBuf** frames, uint32_t n);
    void capture_rx(size_t port, PktBuf** frames, uint32_t n);
    void publish();
    PktBuf* impair(PktBuf* f, uint32_t& extra_count, PktBuf** extra);
    // Fault injection over a received burst (frames has room for 2 * kBurst); returns the new count.
    uint32_t impair_burst(PktBuf** frames, uint32_t n);
    ProxySnapshot collect() const;
    // The destination thread's ring (or a refusal); false: its ring is full, try again later.
    // sc: the sub-connection to retry (nullptr: the WAN stage retries).
    bool deliver(SubConnection* sc, PktBuf* msg);
    // WAN stage, once per iteration: apply posted commands, run the driver, deliver what is due.
    uint32_t wan_poll(uint64_t now_ns);
    // WAN loss on a received burst (frames, or address-prefixed datagrams with fabric udp), before
    // the stack: frames from another site the emulator loses are freed; returns the new count.
    uint32_t wan_lose_burst(PktBuf** frames, uint32_t n, bool datagrams);
    void wan_publish();

    ProxyConfig cfg_;
    MempoolPktPool& pool_;
    ClusterRings& rings_;
    // Declared before the stack so they outlive it: frames the stack still holds (reassembly,
    // ARP) may be RX mbufs that return through their port.
    std::vector<std::unique_ptr<Port>> ports_;
    std::vector<rte_mempool*> mempools_;  // the ports' RX and descriptor pools, for report_pools()
    std::unique_ptr<Doorbell> bell_;                     // ours (null: no wake on arrival by doorbell)
    std::vector<std::unique_ptr<Doorbell>> port_bells_;  // by port: the peer's (null: none)
    std::unique_ptr<PcapngWriter> capture_;  // --pcap; null when off (the hot path's one branch)
    uint64_t capture_flush_ns_ = 0;
    std::unique_ptr<MsgTrace_st> trace_;  // --trace; null when off (the hot path's one branch)
    // A message's trace record (read while the proxy still owns it); out of line: cold.
    MsgTraceRecord trace_record(const PktBuf* m, uint16_t thread, bool rx, uint64_t now_ns) const;
    bool udp_wait_ = false;              // adaptive over udp: sleep in io_uring (UringUdpPort::wait), unwatched
    std::vector<pollfd> poll_fds_;       // sleep_in_poll: the ports' descriptors, then the eventfd
    std::unique_ptr<UringUdpPort> udp_;  // fabric udp (then ports_ is empty); outlives ep_
    Stack stack_;
    TimerWheel wheel_;
    std::unique_ptr<SlidwinEndpoint> ep_;
    std::vector<std::pair<MacAddr, uint16_t>> mac_to_port_;
    // Hang-ups (port_hung_up): set by the guard; the poller's own view of each port after it:
    // kLive, kDraining (flagged: read until the link is empty), kGone (left: no rx, no tx).
    static constexpr size_t kMaxPorts = 64;
    std::array<std::atomic<bool>, kMaxPorts> port_hangup_{};
    enum : uint8_t { kLive, kDraining, kGone };
    std::vector<uint8_t> port_state_;
    std::vector<int32_t> port_peer_cluster_;  // by port: the cluster it reaches (-1: several, a switch)
    void leave_port(size_t port);
    std::vector<std::deque<PktBuf*>> txq_;  // per port: frames its TX ring has not taken yet
    std::vector<Route> routes_;  // by cluster id
    std::vector<OpenBundle> open_;          // by cluster id: what this ring burst combines
    std::vector<uint16_t> open_list_;   // clusters with an open bundle
    uint32_t bundle_limit_ = 0;         // largest bundle [bytes]: one datagram within the MTU
    // By cluster id: when it last proved alive (a valid datagram of one of its sub-connections,
    // folded in from slidwin by status_pass; shifted by our own stalls); 0: reported, or none.
    std::vector<uint64_t> last_heard_ns_;
    std::vector<uint8_t> heard_once_;  // by cluster: anything of it came since open_subconnections (start_grace_ms)
    struct Heard {
        uint16_t cluster;
        const SubConnection* sc;
    };
    std::vector<Heard> heard_from_;  // every sub-connection to a peer proxy, with its cluster
    std::vector<std::pair<uint16_t, PktBuf*>> refusals_;  // (cluster, kRefuse) to send after input
    uint64_t last_status_ns_ = 0;
    uint64_t last_pass_ns_ = 0;  // the last status_pass: a long gap is our own stall, not the peers' silence
    bool sent_done_ = false;
    bool sent_idle_ = false;
    std::atomic<bool> said_idle_{false};
    std::vector<SubConnection*> blocked_;       // refused a delivery: offer again
    std::vector<SubConnection*> blocked_prev_;  // the same, one iteration ago (to count stops once)
    ProxyCounters ctr_;
    std::mt19937_64 rng_;
    std::vector<PktBuf*> held_;  // reorder window of the fault injection
    bool impair_on_ = false;     // some fault injection is configured (impair_burst runs)
    uint32_t queue_sample_ = 0;  // iterations, for sampling the rings' occupancy
    uint64_t queue_dt_ns_ = 0;   // time since the last occupancy sample
    std::atomic<bool> stop_{false};
    // Who runs poll_once: one thread at a time, so the ports' queues, the stack and everything
    // above (the members of this class that poll_once touches) belong to the holder. A flag, not
    // a mutex: the proxy thread takes it around each iteration, so it must cost one uncontended
    // exchange; nobody ever waits for it (a thread that cannot take it leaves the work to the
    // holder). The proxy thread does not hold it while it yields or sleeps.
    alignas(64) std::atomic<bool> poller_{false};
    std::atomic<bool> thread_polled_{false};  // adaptive: the proxy thread's first iteration is done
    bool take_poller() {
        return !poller_.load(std::memory_order_relaxed) && !poller_.exchange(true, std::memory_order_acquire);
    }
    void give_poller() { poller_.store(false, std::memory_order_release); }
    // One turn of waiting for the poller that another thread holds (or for it to end its
    // iteration): a few sched_yield()s, then a 50 us nap. Yielding alone is not enough: both
    // threads are pinned to one core, and on the 6.x kernels of these hosts (EEVDF) a thread
    // preempted while it held the flag was not run again for as long as the waiter yielded — a
    // proxy thread yielded for 59 s while the holder, a compute thread on its core, never ran
    // (the kernel reported its RCU thread starved on that core; the proxies printed "not run for
    // 59 s" and their peers reported the cluster down). A nap takes the waiter off the core.
    static void wait_for_poller(uint32_t& turns);
    // adaptive over memif, the flag held while a compute thread of this cluster watches us (it is
    // running our iteration): sleep as a watched proxy thread does after its own iteration (at
    // most kAssistSleepNs; the last watcher to leave polls once, doorbell.hpp) rather than
    // yield and nap until the flag is free. False (nothing done) when that does not apply.
    // Our thread sat on the core of the other cluster's bridge and rank (mpi/provider's agents
    // pin each cluster's proxies to another core), yielding to them, in the 8-byte round trip.
    bool sleep_while_watched();
    uint32_t owned_iteration(uint64_t now_ns, bool assist, bool* timers_armed = nullptr);  // poll_once by a taker, then give
    uint64_t last_assist_ns_ = 0;  // the last assist that did work (the poller's: read and written owned)
    uint64_t last_timers_ns_ = 0, last_publish_ns_ = 0, last_iter_ns_ = 0;
    uint32_t timers_deferred_ = 0;  // iterations in a row whose receive left frames in a port (poll_once)
    uint64_t iter_now_ns_ = 0;  // the clock of the current poll_once (message-time stamps)
    // seqlock-published copy for readers on other threads
    mutable std::atomic<uint32_t> seq_{0};
    ProxySnapshot published_;
    // WAN stage (wan_emu.hpp); null when off.
    std::unique_ptr<WanEmulator_st> wan_;
    std::mutex wan_cmd_mu_;
    std::vector<WanCommand> wan_cmds_;
    std::atomic<bool> wan_cmd_pending_{false};
    std::atomic<uint64_t> wan_held_{0};
    uint64_t wan_hold_full_ = 0, wan_released_ = 0, wan_held_max_ = 0, last_wan_publish_ns_ = 0;
    mutable std::mutex wan_view_mu_;
    WanView wan_view_;
};

// CLOCK_REALTIME in ns: the timestamps of captured frames (Wireshark shows wall-clock time).
uint64_t realtime_ns();

}  // namespace iccs
