// proxy.cpp: a proxy's set-up (ports, sockets, wake-up paths, capture, sub-connections) and its
// bookkeeping (counters, snapshots, idleness, the message trace). The loop is in proxy_loop.cpp,
// the transmit side in proxy_tx.cpp, the receive side in proxy_rx.cpp, the WAN stage in
// proxy_wan.cpp.
#include "proxy_impl.hpp"
#include "slidwin_auth.hpp"

#include <rte_ring.h>
#include <sched.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "conv_hdr.hpp"

namespace iccs {

uint64_t msg_time_quantile_ns(const ProxyCounters& c, double q) {
    if (c.msg_time_count == 0) return 0;
    const uint64_t want = static_cast<uint64_t>(q * static_cast<double>(c.msg_time_count) + 0.5);
    uint64_t seen = 0;
    for (uint32_t b = 0; b < kMsgTimeBuckets; ++b) {
        seen += c.msg_time_hist[b];
        if (seen >= want && seen > 0) return uint64_t{2} << b;
    }
    return uint64_t{2} << (kMsgTimeBuckets - 1);
}

uint64_t realtime_ns() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

Proxy::Proxy(const ProxyConfig& cfg, MempoolPktPool& pool, ClusterRings& rings)
    : cfg_(cfg),
      pool_(pool),
      rings_(rings),
      stack_(cfg.stack, pool),
      wheel_(10'000, 4096, now_ns()),
      rng_(cfg.impair.seed + cfg.cluster * 1000 + cfg.index) {
    cfg_.slidwin.auth = cfg_.auth.get();
    ep_ = std::make_unique<SlidwinEndpoint>(stack_, wheel_, cfg_.udp_port, cfg_.slidwin, *this);
    routes_.resize(cfg_.proxies_per_cluster.size());
    for (size_t c = 0; c < routes_.size(); ++c) routes_[c].cluster = static_cast<uint16_t>(c);
    last_heard_ns_.assign(routes_.size(), 0);
    heard_once_.assign(routes_.size(), 0);
    open_.resize(routes_.size());
    // A bundle is one datagram within the MTU: IPv4 and UDP headers, slidwin's header, then it.
    bundle_limit_ = cfg_.stack.mtu_bytes - 20 - 8 - kSlidwinHdrLen;
    impair_on_ = cfg_.impair.drop > 0 || cfg_.impair.duplicate > 0 || cfg_.impair.reorder_window > 0;
    if (cfg_.wan) wan_ = std::make_unique<WanEmulator_st>(*cfg_.wan, cfg_.cluster, now_ns());
}

Proxy::~Proxy() {
    for (PktBuf* p : held_) pkt_free(p);
    if (wan_) wan_->drain_all([](void* m) { pkt_free(static_cast<PktBuf*>(m)); });
    for (auto& r : refusals_) pkt_free(r.second);
    for (Route& r : routes_)
        for (PktBuf* p : r.backlog) pkt_free(p);
    for (auto& q : txq_)
        for (PktBuf* f : q) pkt_free(f);
    ep_.reset();  // sub-connections free what they hold; the stack, then the ports, go after
}

bool Proxy::add_port(const std::string& devargs, rte_mempool* rx_pool, rte_mempool* desc_pool,
                     const std::vector<MacAddr>& reaches, uint32_t start_timeout_ms, std::string& err) {
    auto port = std::make_unique<Port>();
    if (!port->open(devargs, rx_pool, desc_pool, start_timeout_ms, err)) return false;
    txq_.emplace_back();
    for (rte_mempool* mp : {rx_pool, desc_pool})
        if (std::find(mempools_.begin(), mempools_.end(), mp) == mempools_.end()) mempools_.push_back(mp);
    const uint16_t idx = static_cast<uint16_t>(ports_.size());
    if (idx >= kMaxPorts) {
        err = "proxy " + std::to_string(cfg_.cluster) + "." + std::to_string(cfg_.index) + ": more than " +
              std::to_string(kMaxPorts) + " ports";
        return false;
    }
    for (const MacAddr& m : reaches) mac_to_port_.emplace_back(m, idx);
    int32_t reached = -1;  // a point-to-point link (memif) reaches one peer, and with it its cluster
    for (const ProxyAddr& peer : cfg_.peers)
        if (reaches.size() == 1 && peer.mac == reaches[0]) reached = peer.cluster;
    port_peer_cluster_.push_back(reached);
    port_state_.push_back(kLive);
    ports_.push_back(std::move(port));
    return true;
}

void Proxy::port_hung_up(size_t port) {
    if (port < kMaxPorts) port_hangup_[port].store(true, std::memory_order_release);
}

void Proxy::leave_port(size_t port) {
    port_state_[port] = kGone;
    for (PktBuf* f : txq_[port]) pkt_free(f);
    txq_[port].clear();
    const int32_t c = port_peer_cluster_[port];
    if (c < 0) return;
    // The peer's process ended. After it said it was done, that is the end of a run; before, it
    // is down, now (not after peer_timeout_ms of silence).
    const bool done = rings_.cluster_done(static_cast<uint32_t>(c));
    if (rings_.mark_cluster_down(static_cast<uint32_t>(c), ClusterRings::DownReason::kHungUp)) {
        ++ctr_.peers_down;
        for (uint32_t t = 0; t < rings_.threads(); ++t) rings_.thread_waker(t).wake();
    }
    if (!done)
        std::fprintf(stderr, "proxy %u.%u: cluster %d hung up its memif link (its process ended): port left, "
                     "cluster reported down\n", cfg_.cluster, cfg_.index, c);
}

bool Proxy::halt(uint32_t timeout_ms) {
    stop_.store(true, std::memory_order_release);
    const uint64_t until = now_ns() + uint64_t{timeout_ms} * 1'000'000;
    for (uint32_t turns = 0; !take_poller();) {
        if (now_ns() > until) return false;
        wait_for_poller(turns);
    }
    return true;  // never given back: the process ends holding it
}

bool Proxy::add_udp_socket(const UringUdpConfig& uc, PktPool& rx_pool, std::string& err) {
    if (udp_ || !ports_.empty()) {
        err = "proxy " + std::to_string(cfg_.cluster) + "." + std::to_string(cfg_.index) +
              ": a UDP socket replaces the ports, it does not join them";
        return false;
    }
    UringUdpConfig c = uc;
    // Deferred task running needs one polling thread: the proxy's own, not inline polling's
    // compute threads, which take turns.
    c.single_issuer = cfg_.polling != Polling::kInline;
    udp_ = UringUdpPort::open(c, rx_pool, pool_, err);
    if (!udp_) return false;
    // The endpoint moves from the stack to the socket (no sub-connection is open yet).
    ep_ = std::make_unique<SlidwinEndpoint>(*udp_, wheel_, udp_->port(), cfg_.slidwin, *this);
    if (cfg_.polling == Polling::kAdaptive) {  // wake on arrival: sleep in the ring (issue 21)
        const int efd = udp_->wake_fd(err);
        if (efd < 0) return false;
        rings_.proxy_waker(cfg_.index).use_eventfd(efd);
        udp_wait_ = true;
    }
    return true;
}

std::string Proxy::io_path() const {
    if (udp_) return udp_->describe();
    return "DPDK ethdev rx/tx bursts, " + std::to_string(ports_.size()) + (ports_.size() == 1 ? " port" : " ports");
}

bool Proxy::sleep_on_doorbell(const std::string& path, std::string& err) {
    bell_ = Doorbell::open(path, err);
    if (!bell_) return false;
    rings_.proxy_waker(cfg_.index).share(bell_->word(), bell_->watch());
    return true;
}

bool Proxy::ring_on_tx(size_t port, const std::string& peer_path, std::string& err) {
    if (port >= ports_.size()) {
        err = "ring_on_tx: no port " + std::to_string(port);
        return false;
    }
    port_bells_.resize(ports_.size());
    port_bells_[port] = Doorbell::open(peer_path, err);
    return port_bells_[port] != nullptr;
}

bool Proxy::sleep_in_poll(std::string& err) {
    std::vector<pollfd> fds;
    for (const auto& p : ports_) {
        if (p->rx_wait_fd() < 0) return false;
        fds.push_back(pollfd{p->rx_wait_fd(), POLLIN, 0});
    }
    const int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (efd < 0) {
        err = std::string("eventfd: ") + std::strerror(errno);
        return false;
    }
    fds.push_back(pollfd{efd, POLLIN, 0});
    rings_.proxy_waker(cfg_.index).use_eventfd(efd);
    poll_fds_ = std::move(fds);
    return true;
}

std::string Proxy::wake_path() const {
    if (cfg_.polling != Polling::kAdaptive) return {};
    if (udp_wait_)
        return "woken on arrival: a blocking io_uring CQE wait with time-out (longest sleep " +
               std::to_string(cfg_.woken_sleep_us) + " us; compute threads end it through an eventfd)";
    if (!poll_fds_.empty())
        return "woken on arrival: ppoll() on the af_packet sockets (the kernel fills their RX rings) and an "
               "eventfd for compute threads (longest sleep " + std::to_string(cfg_.woken_sleep_us) + " us)";
    if (bell_)
        return "woken on arrival by the peers' doorbells (longest sleep " + std::to_string(cfg_.woken_sleep_us) +
               " us)";
    std::string why;
    for (const auto& p : ports_)
        if (!p->rx_intr_missing().empty()) {
            why = p->name() + " has no RX interrupts: " + p->rx_intr_missing();
            break;
        }
    return "NOT woken on arrival (" + (why.empty() ? std::string("no doorbell") : why) + "): fallback, a bounded sleep of " +
           std::to_string(cfg_.sleep_us) + " us";
}

bool Proxy::wait_links(uint32_t timeout_ms, std::string& err) {
    for (auto& p : ports_)
        if (!p->wait_link(timeout_ms)) {
            err = "link of port " + p->name() + " did not come up within " + std::to_string(timeout_ms) +
                  " ms (is the peer cluster running?)";
            return false;
        }
    return true;
}

bool Proxy::start_capture(const std::string& path, uint64_t max_bytes, std::string& err) {
    if (udp_) {
        err = "--pcap records the frames of DPDK ports (fabrics memif, af_packet, pci); fabric udp has "
              "kernel sockets and no frames (capture those with tcpdump -i lo)";
        return false;
    }
    auto w = std::make_unique<PcapngWriter>();
    if (!w->open(path, max_bytes, err)) return false;
    for (const auto& p : ports_) w->add_interface(p->name());  // interface id = port index
    w->flush();
    capture_ = std::move(w);
    capture_flush_ns_ = now_ns();
    return true;
}

void Proxy::finish_capture() {
    if (capture_) capture_->close();  // its counts stay readable (collect)
}

void Proxy::open_subconnections(uint64_t now_ns) {
    for (const ProxyAddr& peer : cfg_.peers) {
        stack_.arp().add_static(peer.ip, peer.mac);
        SubConnection* sc = ep_->open(global_id(peer.cluster, peer.index), peer.ip,
                                      peer.udp_port != 0 ? peer.udp_port : cfg_.udp_port,
                                      global_id(cfg_.cluster, cfg_.index), now_ns);
        // DESIGN.md §2: this proxy sends to remote proxy (our index mod their count), so the
        // proxies of a cluster spread their traffic over the other cluster's proxies.
        const uint16_t remote_count = cfg_.proxies_per_cluster[peer.cluster];
        if (sc != nullptr && peer.index == cfg_.index % remote_count) routes_[peer.cluster].sc = sc;
        if (sc != nullptr) heard_from_.push_back(Heard{peer.cluster, sc});
        last_heard_ns_[peer.cluster] = now_ns;
    }
    last_status_ns_ = now_ns;
    if (wan_) wan_->restart(now_ns);  // the script or series starts with the loop, not at construction
}

void Proxy::report_pools() const {
    // A peer that went quiet may be our own starved port (its frames wait in the link, unread,
    // for want of RX buffers): say where this proxy's buffers are.
    std::string line;
    for (const rte_mempool* mp : mempools_) line += "; " + mempool_state(mp);
    if (const auto* mpp = dynamic_cast<const MempoolPktPool*>(&pool_)) line += "; " + mempool_state(mpp->mempool());
    if (!line.empty()) std::fprintf(stderr, "proxy %u.%u: its buffer pools:%s\n", cfg_.cluster, cfg_.index, line.c_str() + 1);
}

MsgTraceRecord Proxy::trace_record(const PktBuf* m, uint16_t thread, bool rx, uint64_t now_ns) const {
    const uint8_t* h = m->data();  // the convergence header is in the first segment (checked by the callers)
    uint64_t enq_be;
    std::memcpy(&enq_be, h + offsetof(ConvHdr, enq_ns), 8);
    return MsgTraceRecord{now_ns, __builtin_bswap64(enq_be), m->pkt_len, load_be32(h + offsetof(ConvHdr, msg_id)),
                          load_be16(h + offsetof(ConvHdr, src_cluster)), load_be16(h + offsetof(ConvHdr, dst_cluster)),
                          load_be16(h + offsetof(ConvHdr, src_port)), load_be16(h + offsetof(ConvHdr, dst_port)),
                          thread, static_cast<uint8_t>(rx), h[offsetof(ConvHdr, type)]};
}

bool Proxy::finish_trace(const std::string& path, std::string& err) {
    return !trace_ || trace_->write(path, cfg_.cluster, cfg_.index, err);
}

bool Proxy::idle() const {
    if (wan_held_.load(std::memory_order_relaxed) > 0) return false;  // WAN stage still holds messages
    // A cluster that is down never acks: what waits for it does not count.
    for (const Route& r : routes_)
        if (!r.backlog.empty() && !rings_.cluster_down(r.cluster)) return false;
    bool any_down = false;
    for (const ProxyAddr& peer : cfg_.peers) {
        const SubConnection* sc = ep_->get(global_id(peer.cluster, peer.index));
        const bool down = rings_.cluster_down(peer.cluster);
        any_down |= down;
        if (sc != nullptr && sc->unacked() > 0 && !down) return false;
    }
    if (any_down) return true;  // its link's queues may never drain
    for (const auto& q : txq_)
        if (!q.empty()) return false;
    if (udp_ && !udp_->tx_idle()) return false;
    return stack_.tx_queued() == 0;
}

ProxySnapshot Proxy::collect() const {
    ProxySnapshot s;
    s.proxy = ctr_;
    if (capture_) {
        s.proxy.capture_frames = capture_->frames();
        s.proxy.capture_missed = capture_->missed();
    }
    s.stack = stack_.counters();
    for (const ProxyAddr& peer : cfg_.peers) {
        const SubConnection* sc = ep_->get(global_id(peer.cluster, peer.index));
        if (sc == nullptr) continue;
        const SlidwinCounters& c = sc->counters();
#define X(name, doc) s.slidwin.name += c.name;
        ICCS_SLIDWIN_COUNTERS(X)
#undef X
    }
    s.slidwin.drop_unknown_subconn += ep_->drop_unknown_subconn();
    for (const auto& p : ports_) {
        s.port_rx += p->counters().rx_frames;
        s.port_tx += p->counters().tx_frames;
        s.port_tx_ring_full += p->counters().tx_ring_full;
    }
    if (udp_) {
        s.kernel_udp = true;
        s.uring = udp_->counters();
        s.port_rx = s.uring.rx_datagrams;
        s.port_tx = s.uring.tx_datagrams;
        s.port_tx_ring_full = s.uring.tx_waits;
    }
    return s;
}

void Proxy::publish() {
    const ProxySnapshot s = collect();
    seq_.fetch_add(1, std::memory_order_acq_rel);  // odd: writing
    std::atomic_thread_fence(std::memory_order_release);
    std::memcpy(static_cast<void*>(&published_), &s, sizeof s);
    seq_.fetch_add(1, std::memory_order_release);  // even: stable
}

ProxySnapshot Proxy::snapshot() const {
    ProxySnapshot s;
    for (;;) {
        const uint32_t a = seq_.load(std::memory_order_acquire);
        if (a & 1u) continue;
        std::memcpy(static_cast<void*>(&s), &published_, sizeof s);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (seq_.load(std::memory_order_relaxed) == a) return s;
    }
}

}  // namespace iccs
