// proxy.cpp: see proxy.hpp.
#include "proxy.hpp"
#include "slidwin_auth.hpp"

#include <rte_ring.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "conv_hdr.hpp"
#include "stamps.hpp"

namespace iccs {

namespace {
// Sub-connection ids: one per proxy of the machine (the receiver's index of its peer).
inline uint16_t global_id(uint16_t cluster, uint16_t index) { return static_cast<uint16_t>(cluster * 64 + index); }
constexpr uint32_t kBurst = 32;
constexpr size_t kBacklogLimit = 4096;  // beyond this, leave messages in the rings (backpressure)
constexpr size_t kTxQueueLimit = 8192;  // frames a port may have waiting for its TX ring
constexpr uint64_t kWanSpinNs = 100'000;  // adaptive: spin, not sleep, this close to a WAN event
constexpr uint64_t kAssistRecentNs = 10'000'000;  // adaptive: compute threads assisted this lately ...
constexpr uint64_t kAssistSleepNs = 1'000'000;    // ... then the proxy thread sleeps at most this long
constexpr uint64_t kOwnStallNs = 500'000'000;   // status passes further apart than this (+ the longest sleep): not run
}  // namespace

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
    for (const MacAddr& m : reaches) mac_to_port_.emplace_back(m, idx);
    ports_.push_back(std::move(port));
    return true;
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

void Proxy::capture_rx(size_t port, PktBuf** frames, uint32_t n) {
    if (n == 0) return;
    capture_->write_burst(static_cast<uint32_t>(port), frames, n, realtime_ns(), PcapngWriter::Dir::kIn);
}

uint32_t Proxy::port_tx(size_t port, PktBuf** frames, uint32_t n) {
    stamps::stamp(stamps::kFabricTx);
    if (!capture_) return ports_[port]->tx_burst(frames, n);
    for (uint32_t i = 0; i < n; ++i) pkt_ref(frames[i]);
    const uint32_t sent = ports_[port]->tx_burst(frames, n);
    capture_->write_burst(static_cast<uint32_t>(port), frames, sent, realtime_ns(), PcapngWriter::Dir::kOut);
    for (uint32_t i = 0; i < n; ++i) pkt_free(frames[i]);  // our reference only: the rest is as tx_burst left it
    return sent;
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
        last_heard_ns_[peer.cluster] = now_ns;
    }
    last_status_ns_ = now_ns;
    if (wan_) wan_->restart(now_ns);  // the script or series starts with the loop, not at construction
}

void Proxy::route_send(uint16_t cluster, PktBuf* m, uint64_t now_ns) {
    Route& r = routes_[cluster];
    if (!r.backlog.empty()) {
        r.backlog.push_back(m);
        return;
    }
    const SlidwinSendResult res = slidwin_send(*r.sc, m, now_ns);
    if (res == SlidwinSendResult::kWouldBlock) {
        r.backlog.push_back(m);
    } else if (res == SlidwinSendResult::kTooBig) {
        ++ctr_.bad_dst;
        pkt_free(m);
    }
}

void Proxy::refuse(PktBuf* connect, uint64_t now_ns) {
    const ConvHdr in = load_hdr<ConvHdr>(connect->data());
    pkt_free(connect);
    const uint16_t to = in.src_cluster.get();
    PktBuf* m = pkt_alloc(pool_);
    if (m == nullptr || to >= routes_.size() || routes_[to].sc == nullptr) {
        if (m != nullptr) pkt_free(m);
        ++ctr_.bad_dst;
        return;
    }
    ConvHdr h{};
    h.src_cluster = in.dst_cluster;
    h.dst_cluster = in.src_cluster;
    h.src_port = in.dst_port;
    h.dst_port = in.src_port;
    h.type = static_cast<uint8_t>(ConvType::kRefuse);
    h.conn_id = in.conn_id;
    h.piece_cnt = be16::of(1);
    h.msg_len = be32::of(4);
    store_hdr(pkt_append(m, kConvHdrLen), h);
    const be32 reason = be32::of(kRefuseNoListener);
    std::memcpy(pkt_append(m, 4), &reason, 4);
    ++ctr_.refused;
    (void)now_ns;
    // Not sent from here: we are inside a sub-connection's delivery; poll_once sends it after input.
    refusals_.emplace_back(to, m);
}

void Proxy::status_pass(uint64_t now_ns) {
    const bool done = rings_.local_done();
    const bool due = now_ns - last_status_ns_ >= uint64_t{cfg_.keepalive_ms} * 1'000'000;
    if (due || (done && !sent_done_)) {
        last_status_ns_ = now_ns;
        sent_done_ = done;
        for (Route& r : routes_) {
            if (r.sc == nullptr || rings_.cluster_down(r.cluster)) continue;
            if (r.backlog.size() > 64) continue;  // traffic is flowing there anyway
            PktBuf* m = pkt_alloc(pool_);
            if (m == nullptr) break;
            ConvHdr h{};
            h.src_cluster = be16::of(cfg_.cluster);
            h.dst_cluster = be16::of(r.cluster);
            h.type = static_cast<uint8_t>(ConvType::kProxyStatus);
            h.flags = done ? kStatusDone : 0;
            h.piece_cnt = be16::of(1);
            store_hdr(pkt_append(m, kConvHdrLen), h);
            ++ctr_.status_tx;
            route_send(r.cluster, m, now_ns);
        }
    }
    // A pass long after the last one: this proxy was not run meanwhile (a host that stopped the
    // process or gave it no core for seconds: perf/README.md, issue 21), so it did not listen;
    // that time does not count as the peers' silence. Else a run stopped as a whole (SIGSTOP, a
    // paused VM) reports every peer down the moment it resumes, before it reads their frames.
    const uint64_t longest_sleep_ns = uint64_t{std::max(cfg_.sleep_us, cfg_.woken_sleep_us)} * 1000;
    if (last_pass_ns_ != 0 && now_ns - last_pass_ns_ > kOwnStallNs + longest_sleep_ns) {
        const uint64_t gap = now_ns - last_pass_ns_;
        for (uint64_t& h : last_heard_ns_)  // (what this iteration heard is already at now_ns)
            if (h != 0) h = std::min(h + gap, now_ns);
        ++ctr_.own_stalls;
        // Inline polling runs the loop only when compute threads call in: long gaps are normal there.
        if (cfg_.polling != Polling::kInline)
            std::fprintf(stderr, "proxy %u.%u: this proxy was not run for %.1f s (its process stopped, or given no core); "
                         "that time is not counted as the other clusters' silence\n", cfg_.cluster, cfg_.index, gap * 1e-9);
    }
    last_pass_ns_ = now_ns;
    if (cfg_.peer_timeout_ms == 0) return;
    const uint64_t timeout_ns = uint64_t{cfg_.peer_timeout_ms} * 1'000'000;
    for (size_t c = 0; c < routes_.size(); ++c) {
        if (routes_[c].sc == nullptr || last_heard_ns_[c] == 0 || now_ns < last_heard_ns_[c] + timeout_ns) continue;
        if (rings_.mark_cluster_down(static_cast<uint32_t>(c))) {
            ++ctr_.peers_down;
            if (!rings_.cluster_done(static_cast<uint32_t>(c)))
                std::fprintf(stderr, "proxy %u.%u: cluster %zu stopped answering (nothing heard for %u ms): "
                             "reported to the compute threads\n", cfg_.cluster, cfg_.index, c, cfg_.peer_timeout_ms);
            for (uint32_t t = 0; t < rings_.threads(); ++t) rings_.thread_waker(t).wake();
            if (!rings_.cluster_done(static_cast<uint32_t>(c))) report_pools();
        }
        last_heard_ns_[c] = 0;  // reported once
    }
}

void Proxy::report_pools() const {
    // A peer that went quiet may be our own starved port (its frames wait in the link, unread,
    // for want of RX buffers): say where this proxy's buffers are.
    std::string line;
    for (const rte_mempool* mp : mempools_) line += "; " + mempool_state(mp);
    if (const auto* mpp = dynamic_cast<const MempoolPktPool*>(&pool_)) line += "; " + mempool_state(mpp->mempool());
    if (!line.empty()) std::fprintf(stderr, "proxy %u.%u: its buffer pools:%s\n", cfg_.cluster, cfg_.index, line.c_str() + 1);
}

uint32_t Proxy::impair_burst(PktBuf** frames, uint32_t n) {
    if (cfg_.impair.drop == 0 && cfg_.impair.duplicate == 0 && cfg_.impair.reorder_window == 0) return n;
    PktBuf* extra[kBurst];
    uint32_t extra_n = 0, kept = 0;
    for (uint32_t i = 0; i < n; ++i)
        if (PktBuf* f = impair(frames[i], extra_n, extra)) frames[kept++] = f;
    for (uint32_t i = 0; i < extra_n; ++i) frames[kept++] = extra[i];
    if (n == 0 && !held_.empty()) {  // a quiet port lets held frames out
        for (PktBuf* f : held_) {
            if (kept == kBurst * 2) break;
            frames[kept++] = f;
        }
        held_.erase(held_.begin(), held_.begin() + std::min<size_t>(held_.size(), kBurst * 2));
    }
    return kept;
}

PktBuf* Proxy::impair(PktBuf* f, uint32_t& extra_count, PktBuf** extra) {
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    if (cfg_.impair.drop > 0 && unit(rng_) < cfg_.impair.drop) {
        ++ctr_.impair_dropped;
        pkt_free(f);
        return nullptr;
    }
    if (cfg_.impair.duplicate > 0 && unit(rng_) < cfg_.impair.duplicate) {
        if (PktBuf* d = pkt_copy(pool_, f)) {
            ++ctr_.impair_duplicated;
            extra[extra_count++] = d;
        }
    }
    if (cfg_.impair.reorder_window > 0) {
        held_.push_back(f);
        if (held_.size() <= cfg_.impair.reorder_window) return nullptr;
        const size_t k = rng_() % held_.size();
        PktBuf* out = held_[k];
        held_[k] = held_.back();
        held_.pop_back();
        return out;
    }
    return f;
}

void Proxy::drain_rings(uint64_t now_ns, uint32_t& work) {
    // Messages that waited for window go first, in order.
    size_t backlog = 0;
    for (Route& r : routes_) {
        while (!r.backlog.empty() && r.sc != nullptr && r.sc->send_space() > 0) {
            if (slidwin_send(*r.sc, r.backlog.front(), now_ns) != SlidwinSendResult::kOk) break;
            r.backlog.pop_front();
            ++work;
        }
        backlog += r.backlog.size();
    }
    if (backlog >= kBacklogLimit) {
        rings_.publish_proxy_load(cfg_.index, static_cast<uint32_t>(backlog));
        return;
    }
    void* msgs[kBurst];
    for (uint32_t t = 0; t < rings_.threads(); ++t) {
        const unsigned n = rte_ring_sc_dequeue_burst(rings_.to_proxy(t, cfg_.index), msgs, kBurst, nullptr);
        for (unsigned i = 0; i < n; ++i) {
            PktBuf* m = static_cast<PktBuf*>(msgs[i]);
            const uint16_t dst = m->data_len >= kConvHdrLen ? load_be16(m->data() + offsetof(ConvHdr, dst_cluster))
                                                            : UINT16_MAX;
            if (dst >= routes_.size() || routes_[dst].sc == nullptr) {
                ++ctr_.bad_dst;
                pkt_free(m);
                continue;
            }
            ++ctr_.msgs_tx;
            ctr_.bytes_tx += m->pkt_len;
            if (trace_) [[unlikely]] trace_msg(m, static_cast<uint16_t>(t), false, now_ns);
            if (cfg_.combine_max_bytes > 0 && m->pkt_len <= cfg_.combine_max_bytes) {
                if (combine(dst, m)) continue;
                flush_bundle(dst, now_ns);  // m cannot join: what is open goes first (order)
                if (combine(dst, m)) continue;
            } else if (open_[dst].b != nullptr) {
                flush_bundle(dst, now_ns);
            }
            route_send(dst, m, now_ns);
        }
        // The end of the burst: every bundle goes now (never held for more).
        for (const uint16_t c : open_list_) flush_bundle(c, now_ns);
        open_list_.clear();
        work += n;
        if (n > 0) {
            backlog = 0;
            for (const Route& r : routes_) backlog += r.backlog.size();
            ctr_.backlog_max = std::max<uint64_t>(ctr_.backlog_max, backlog);
        }
    }
    rings_.publish_proxy_load(cfg_.index, static_cast<uint32_t>(backlog));
}

void Proxy::on_peer_restarted(SubConnection& sc, uint64_t new_token) {
    const uint32_t c = sc.local_id() / 64;  // global_id()
    ++ctr_.peers_restarted;
    std::fprintf(stderr, "proxy %u.%u: cluster %u restarted (new run token %016llx on sub-connection %u): "
                 "handled as down, its new incarnation is not merged\n", cfg_.cluster, cfg_.index, c,
                 static_cast<unsigned long long>(new_token), sc.local_id());
    if (c < last_heard_ns_.size()) last_heard_ns_[c] = 0;
    if (rings_.mark_cluster_down(c)) {
        ++ctr_.peers_down;
        for (uint32_t t = 0; t < rings_.threads(); ++t) rings_.thread_waker(t).wake();
    }
}

// Headroom the layers below need in front of a bundle: eth, IPv4, UDP, slidwin (and, with a
// [security] key, its auth block: see combine()).
constexpr uint32_t kBelowHeadroom = 14 + 20 + 8 + kSlidwinHdrLen;

bool Proxy::combine(uint16_t cluster, PktBuf* m) {
    OpenBundle& o = open_[cluster];
    const bool opens = o.b == nullptr;
    // With a key, slidwin also prepends its auth block: a buffer without room for it stays alone
    // (the headroom of a compute thread's buffer leaves none, so authenticated runs send one
    // message per datagram).
    if (!bundle_add(o, m, bundle_limit_, kBelowHeadroom + (cfg_.auth ? kSlidwinAuthLen : 0))) return false;
    if (opens) open_list_.push_back(cluster);
    return true;
}

void Proxy::flush_bundle(uint16_t cluster, uint64_t now_ns) {
    OpenBundle& o = open_[cluster];
    if (o.b == nullptr) return;
    if (o.n > 1) {
        ++ctr_.combined_dgrams;
        ctr_.combined_msgs += o.n;
    }
    PktBuf* b = o.b;
    o = OpenBundle{};
    route_send(cluster, b, now_ns);
}

bool Proxy::on_message(SubConnection& sc, PktBuf* msg) {
    if (msg->data_len < kConvHdrLen) {  // the header is in the first segment, or it is not ours
        ++ctr_.bad_dst;
        pkt_free(msg);
        return true;
    }
    if (!is_bundle(msg)) return on_one(sc, msg);
    // A bundle: each record becomes a message of its own (bundle.hpp). A full ring, or no buffer
    // for a record, stops it: its place is kept in the bundle, slidwin offers the bundle again
    // (the sub-connection is retried by the next iterations: blocked_, as deliver() does), and it
    // goes on from there.
    bool first = false;
    uint32_t off = bundle_resume(msg, first);
    if (first) ++ctr_.bundles_rx;
    for (;;) {
        PktBuf* one = nullptr;
        uint32_t next = 0;
        const BundleStep st = bundle_take(pool_, msg, off, one, next);
        if (st == BundleStep::kDone) break;
        if (st == BundleStep::kBad) {
            ++ctr_.bad_bundle;  // bounded parse: a bad record ends the bundle
            break;
        }
        if (st == BundleStep::kNoBuf) ++ctr_.bundle_nobuf;
        if (st == BundleStep::kNoBuf || !on_one(sc, one)) {
            if (one != nullptr) pkt_free(one);
            bundle_keep(msg, off);
            if (std::find(blocked_.begin(), blocked_.end(), &sc) == blocked_.end()) blocked_.push_back(&sc);
            return false;
        }
        ++ctr_.bundle_msgs_rx;
        off = next;
    }
    pkt_free(msg);
    return true;
}

bool Proxy::on_one(SubConnection& sc, PktBuf* msg) {
    if (msg->data_len < kConvHdrLen) {
        ++ctr_.bad_dst;
        pkt_free(msg);
        return true;
    }
    const uint8_t* h = msg->data();
    const uint16_t src_cluster = load_be16(h + offsetof(ConvHdr, src_cluster));
    if (src_cluster < last_heard_ns_.size() && last_heard_ns_[src_cluster] != 0)
        last_heard_ns_[src_cluster] = iter_now_ns_;
    const auto type = static_cast<ConvType>(h[offsetof(ConvHdr, type)]);
    if (type == ConvType::kProxyStatus) {
        ++ctr_.status_rx;
        if (h[offsetof(ConvHdr, flags)] & kStatusDone) rings_.mark_cluster_done(src_cluster);
        pkt_free(msg);
        return true;
    }
    if (wan_ && wan_->remote(src_cluster)) {  // WAN stage: held until its emulated arrival
        const uint32_t len = msg->pkt_len > kConvHdrLen ? msg->pkt_len - kConvHdrLen : 0;
        // A fresh clock, not the iteration's: under inline polling a compute thread may have been
        // descheduled between reading it and getting here (ms late), which would shorten the hold.
        const uint64_t now = std::max(iter_now_ns_, now_ns());
        if (!wan_->hold(wan_->site_of(src_cluster), msg, len, msg->nb_segs, now)) {
            ++wan_hold_full_;  // the hold limit: slidwin keeps it (and its window closes) until later
            if (std::find(blocked_.begin(), blocked_.end(), &sc) == blocked_.end()) blocked_.push_back(&sc);
            return false;
        }
        wan_held_max_ = std::max(wan_held_max_, wan_->held_msgs());
        return true;
    }
    return deliver(&sc, msg);
}

bool Proxy::deliver(SubConnection* sc, PktBuf* msg) {
    const uint8_t* h = msg->data();
    const auto type = static_cast<ConvType>(h[offsetof(ConvHdr, type)]);
    const int32_t owner = rings_.port_owner(load_be16(h + offsetof(ConvHdr, dst_port)));
    if (owner < 0 || owner >= cfg_.threads) {
        if (type == ConvType::kConnect) {
            refuse(msg, iter_now_ns_);
        } else {
            ++ctr_.bad_dst;
            pkt_free(msg);
        }
        return true;
    }
    const auto port = static_cast<uint32_t>(owner);
    if (type == ConvType::kData) stamps::stamp(stamps::kRingDeliver);
    if (rte_ring_mp_enqueue(rings_.to_thread(port), msg) != 0) {
        // Counted once per stop, not per retry: the retries run every loop until the ring drains.
        if (sc != nullptr && std::find(blocked_.begin(), blocked_.end(), sc) == blocked_.end()) {
            blocked_.push_back(sc);
            if (std::find(blocked_prev_.begin(), blocked_prev_.end(), sc) == blocked_prev_.end()) ++ctr_.ring_full;
        }
        rings_.thread_waker(port).wake();
        return false;
    }
    ++ctr_.msgs_rx;
    ctr_.bytes_rx += msg->pkt_len;
    if (trace_) [[unlikely]] trace_msg(msg, static_cast<uint16_t>(port), true, iter_now_ns_);
    // Message time: the sender's enqueue stamp to this delivery (same host: same clock).
    uint64_t enq_be;
    std::memcpy(&enq_be, msg->data() + offsetof(ConvHdr, enq_ns), 8);
    const uint64_t enq = __builtin_bswap64(enq_be);
    const uint64_t now = iter_now_ns_;  // this iteration's clock: no clock read per message
    if (enq != 0 && enq <= now) {
        const uint64_t t = now - enq;
        ++ctr_.msg_time_count;
        ctr_.msg_time_sum_ns += t;
        const uint32_t b = t < 2 ? 0 : 63u - static_cast<uint32_t>(__builtin_clzll(t));
        ++ctr_.msg_time_hist[std::min(b, kMsgTimeBuckets - 1)];
    }
    rings_.thread_waker(port).wake();
    return true;
}

void Proxy::trace_msg(const PktBuf* m, uint16_t thread, bool rx, uint64_t now_ns) {
    const uint8_t* h = m->data();  // the convergence header is in the first segment (checked by the callers)
    uint64_t enq_be;
    std::memcpy(&enq_be, h + offsetof(ConvHdr, enq_ns), 8);
    trace_->record(MsgTraceRecord{now_ns, __builtin_bswap64(enq_be), m->pkt_len, load_be32(h + offsetof(ConvHdr, msg_id)),
                                  load_be16(h + offsetof(ConvHdr, src_cluster)), load_be16(h + offsetof(ConvHdr, dst_cluster)),
                                  load_be16(h + offsetof(ConvHdr, src_port)), load_be16(h + offsetof(ConvHdr, dst_port)),
                                  thread, static_cast<uint8_t>(rx), h[offsetof(ConvHdr, type)]});
}

bool Proxy::finish_trace(const std::string& path, std::string& err) {
    return !trace_ || trace_->write(path, cfg_.cluster, cfg_.index, err);
}

void Proxy::flush_tx() {
    // Route what the stack queued onto the ports' queues ...
    PktBuf* frames[kBurst];
    const size_t nports = ports_.size();
    auto enqueue = [&](size_t port, PktBuf* f) {
        if (txq_[port].size() >= kTxQueueLimit) {  // the link stayed full that long: drop (retransmitted)
            ++ctr_.tx_queue_drops;
            pkt_free(f);
            return;
        }
        txq_[port].push_back(f);
    };
    for (uint32_t n; stack_.tx_queued() > 0 && (n = stack_.tx_take(frames, kBurst)) > 0;) {
        for (uint32_t i = 0; i < n; ++i) {
            PktBuf* f = frames[i];
            MacAddr dst;
            std::memcpy(dst.b.data(), f->data(), 6);
            if (dst.is_broadcast()) {  // ARP: every link gets a copy
                for (size_t p = 1; p < nports; ++p)
                    if (PktBuf* c = pkt_copy(pool_, f)) enqueue(p, c);
                enqueue(0, f);
                continue;
            }
            size_t port = nports == 1 ? 0 : nports;
            for (const auto& [mac, idx] : mac_to_port_)
                if (mac == dst) {
                    port = idx;
                    break;
                }
            if (port >= nports) {
                ++ctr_.bad_dst;  // no link reaches that MAC
                pkt_free(f);
                continue;
            }
            enqueue(port, f);
        }
    }
    // ... then give each port as much as its TX ring takes; the rest waits for the next round.
    for (size_t p = 0; p < nports; ++p) {
        std::deque<PktBuf*>& q = txq_[p];
        uint32_t sent_any = 0;
        while (!q.empty()) {
            PktBuf* burst[kBurst];
            const uint32_t k = static_cast<uint32_t>(std::min<size_t>(q.size(), kBurst));
            std::copy(q.begin(), q.begin() + k, burst);
            const uint32_t sent = port_tx(p, burst, k);
            sent_any += sent;
            q.erase(q.begin(), q.begin() + sent);
            if (sent < k) break;
        }
        // Wake the receiving proxy if it sleeps (doorbell.hpp): the frames are in the driver's
        // ring; the fence orders that before the look at its word. Once per port and flush.
        if (sent_any > 0 && p < port_bells_.size() && port_bells_[p]) {
            std::atomic_thread_fence(std::memory_order_seq_cst);
            const uint64_t before = port_bells_[p]->rings();
            port_bells_[p]->ring();
            ctr_.bell_rings += port_bells_[p]->rings() - before;
        }
    }
}

uint32_t Proxy::poll_once(uint64_t now_ns) {
    // inline polling: threads read the clock before they take the lock, so a later iteration can
    // bring an earlier time; never let the proxy's clock go back.
    now_ns = std::max(now_ns, last_iter_ns_);
    iter_now_ns_ = now_ns;
    uint32_t work = 0;
    drain_rings(now_ns, work);
    // What the threads handed over leaves now, not after the receive and the housekeeping below
    // (a ping-pong's send waited for an empty rx_burst and the timers: perf/README.md, issue 21).
    // Fabric udp flushes once, at the end: a flush there is a system call.
    if (!udp_ && stack_.tx_queued() > 0) flush_tx();
    // The housekeeping comes before the receive, so a frame delivered below reaches its thread
    // (under inline polling: the caller, right after this returns) without waiting for it.
    // What the receive leaves for it (refusals, a full thread ring) waits one iteration.
    for (auto [cluster, m] : refusals_) route_send(cluster, m, now_ns);
    refusals_.clear();
    if (!blocked_.empty()) {
        blocked_prev_.swap(blocked_);
        blocked_.clear();
        for (SubConnection* sc : blocked_prev_) slidwin_deliver_pending(*sc, now_ns);
    } else {
        blocked_prev_.clear();
    }
    if (wan_) work += wan_poll(now_ns);
    wheel_.advance(now_ns);
    if (now_ns - last_timers_ns_ >= 1'000'000) {
        stack_.timers(now_ns);
        status_pass(now_ns);
        last_timers_ns_ = now_ns;
        if (capture_ && now_ns - capture_flush_ns_ >= 100'000'000) {  // readable while the run goes on
            capture_->flush();
            capture_flush_ns_ = now_ns;
        }
    }
    PktBuf* frames[kBurst * 2];
    for (size_t p = 0; p < ports_.size(); ++p) {
        uint32_t n = ports_[p]->rx_burst(frames, kBurst);
        if (n > 0) stamps::stamp(stamps::kFabricRx);
        if (capture_) capture_rx(p, frames, n);  // what the port delivered, before fault injection
        work += n;
        if (impair_on_) n = impair_burst(frames, n);
        if (wan_ && wan_->lossy()) n = wan_lose_burst(frames, n, false);
        if (n > 0) stack_.input_burst(frames, n, now_ns);
    }
    if (udp_) {  // fabric udp: datagrams, fault injection as for frames, straight to the endpoint
        uint32_t n = udp_->rx_burst(frames, kBurst);
        work += n;
        if (impair_on_) n = impair_burst(frames, n);
        if (wan_ && wan_->lossy()) n = wan_lose_burst(frames, n, true);
        if (n > 0) udp_->input_burst(frames, n, now_ns);
        udp_->sample_kernel_drops(now_ns);
    }
    if (udp_)
        work += udp_->flush();  // one system call at most; completions it produced keep us awake
    else
        flush_tx();
    // accounting: utilization and time-weighted ring occupancy (the rings' occupancy sampled
    // every 16th iteration, weighted by the time since the last sample: reading every ring's
    // head and tail was a tenth of an idle iteration)
    if (last_iter_ns_ != 0) {
        const uint64_t dt = now_ns - last_iter_ns_;
        ctr_.total_ns += dt;
        if (work > 0) ctr_.busy_ns += dt;
        queue_dt_ns_ += dt;
        if (++queue_sample_ % 16 == 0) {
            uint64_t q = 0;
            for (uint32_t t = 0; t < rings_.threads(); ++t) q += rte_ring_count(rings_.to_proxy(t, cfg_.index));
            ctr_.queue_ns_sum += q * queue_dt_ns_;
            queue_dt_ns_ = 0;
        }
    }
    last_iter_ns_ = now_ns;
    if (work > 0 && cfg_.impair.slow_us > 0 && cfg_.impair.slow_proxy == cfg_.index) {
        const timespec ts{0, static_cast<long>(cfg_.impair.slow_us) * 1000};
        nanosleep(&ts, nullptr);
    }
    if (now_ns - last_publish_ns_ >= 1'000'000) {
        publish();
        last_publish_ns_ = now_ns;
    }
    return work;
}

uint32_t Proxy::try_poll_inline(uint64_t now_ns) {
    // One poller at a time. A test-and-set flag: a std::mutex's try-lock and unlock were 13% of
    // the inline spin (perf/README.md, issue 21).
    const bool assist = cfg_.polling != Polling::kInline;
    if (assist && !thread_polled_.load(std::memory_order_acquire)) return 0;
    if (!take_poller()) return 0;
    return owned_iteration(now_ns, assist);
}

uint32_t Proxy::poll_leaving(bool to_sleep) {
    const Waker& w = rings_.proxy_waker(cfg_.index);
    while (!take_poller()) {
        if (!w.sleeping()) return 0;  // the proxy thread is up: it polls
        sched_yield();                // the holder's iteration may have looked before the frame came
    }
    bool timers = false;
    const uint32_t work = owned_iteration(now_ns(), true, &timers);
    // The proxy thread slept past its timers while watched (run()): the last watcher, about to
    // sleep, hands them back; a wake only when one is armed, once per wait that ended in a
    // sleep. A wait that ended with its message does not wake: its thread comes back to wait or
    // send soon, and the proxy thread's sleep, begun while watched, lasts at most 1 ms.
    // Fabric udp: a proxy thread that went to sleep watched sleeps on its futex (run()), where no
    // datagram wakes it: the last watcher about to sleep sends it to its ring.
    if (to_sleep && (timers || (udp_wait_ && w.sleeping_on_futex())) && w.sleeping())
        rings_.proxy_waker(cfg_.index).wake();
    return work;
}

uint32_t Proxy::owned_iteration(uint64_t now_ns, bool assist, bool* timers_armed) {
    const uint32_t work = poll_once(now_ns);
    if (timers_armed != nullptr) *timers_armed = wheel_.next_expiry() != UINT64_MAX;  // still the poller
    if (assist && work > 0) {
        ++ctr_.assists;
        last_assist_ns_ = iter_now_ns_;
    }
    // Fabric udp: what only the proxy thread can do waits (a receive the kernel ended, sends
    // the socket refused), or datagrams are left for the next burst: a sleeping proxy thread
    // must come (its ring wakes it for none of these).
    const bool owner_needed = assist && udp_ && udp_->owner_needed();
    give_poller();
    if (owner_needed) rings_.proxy_waker(cfg_.index).wake();
    return work;
}

void Proxy::run() {
    // Sleeps of tens of microseconds: the default 50 us timer slack would double them.
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    Waker& waker = rings_.proxy_waker(cfg_.index);
    const uint64_t spin_ns = uint64_t{cfg_.spin_before_sleep_us} * 1000;
    uint64_t last_work = now_ns();
    while (!stop_.load(std::memory_order_acquire)) {
        const uint64_t now = now_ns();
        // A compute thread runs the iteration now (the assist): leave it the core.
        if (!take_poller()) {
            sched_yield();
            continue;
        }
        if (poll_once(now) > 0) {
            give_poller();
            thread_polled_.store(true, std::memory_order_release);
            last_work = now;
            continue;
        }
        thread_polled_.store(true, std::memory_order_release);
        if (cfg_.polling == Polling::kBusy) {
            give_poller();
            continue;
        }
        // Spin while our own iterations found work lately, unless a compute thread watches: it
        // polls our work itself, so we sleep and leave it the core (a spinning proxy thread on
        // the waiting thread's core is what a round trip waited for).
        const bool watched = waker.watchers() > 0;
        if (!watched && now - last_work < spin_ns) {
            give_poller();
            // Adaptive spin: let a thread that was just woken on this core run now, instead of
            // after our time slice (CFS would not preempt us for it).
            sched_yield();
            continue;
        }
        // A held WAN message (or a script step) due soon: spin for it, since a futex sleep here
        // wakes some 50 us late, which the emulated latency would gain.
        const uint64_t wan_next = wan_ ? wan_->next_event_ns() : UINT64_MAX;
        if (wan_next <= now + kWanSpinNs) {
            give_poller();
            sched_yield();
            continue;
        }
        // Fabric udp, watched: sleep on the futex, not in the ring, whose every datagram would
        // wake us (its receive's completion work is ours) while the watcher takes it itself.
        const bool in_ring = udp_wait_ && !watched;
        // Adaptive: say we sleep, look once more, then sleep until woken, a timer, or sleep_us.
        waker.prepare_sleep(in_ring || !poll_fds_.empty() ? Waker::kOnEventfd : Waker::kOnFutex);
        bool pending = false;
        for (uint32_t t = 0; t < rings_.threads() && !pending; ++t)
            pending = rte_ring_count(rings_.to_proxy(t, cfg_.index)) > 0;
        if (pending || stop_.load(std::memory_order_acquire)) {
            waker.cancel_sleep();
            give_poller();
            continue;
        }
        // With a doorbell, look at the ports once more after saying we sleep: a peer that sent
        // before it could see our word did not ring (doorbell.hpp, ordering).
        if ((bell_ || !poll_fds_.empty()) && poll_once(now_ns()) > 0) {
            waker.cancel_sleep();
            give_poller();
            last_work = now;
            continue;
        }
        // Woken on arrival, the long sleep is safe only while all our work comes with a wake:
        // a compute thread's ring that was full (blocked_) drains without telling us, and a
        // port's TX ring frees slots as the peer reads. Then the short sleep, as without wakes.
        bool waits_unwoken = !blocked_.empty();
        for (const auto& q : txq_) waits_unwoken |= !q.empty();
        const bool long_sleep = (bell_ || udp_wait_ || !poll_fds_.empty()) && !waits_unwoken;
        uint64_t sleep_ns = uint64_t{long_sleep ? cfg_.woken_sleep_us : cfg_.sleep_us} * 1000;
        // What an assisting compute thread leaves after we looked (a timer it armed, a full ring
        // or TX queue) comes with no wake: while compute threads assist, sleep at most
        // kAssistSleepNs, so that waits that long at most.
        if (watched || last_assist_ns_ + kAssistRecentNs > now) sleep_ns = std::min(sleep_ns, kAssistSleepNs);
        uint64_t next = wheel_.next_expiry();
        if (wan_next != UINT64_MAX) next = std::min(next, wan_next - kWanSpinNs);  // never oversleep a held message
        // Watched, the timers are the watchers': their assists run them (poll_once), and the
        // last one to leave wakes us when one is armed (poll_leaving). Waking for a timer here
        // (the delayed ack's 50 us) took the core from the waiting thread on every round trip's
        // tail: p99 27 us against a 1.7 us median, 2.7 us without (perf/README.md, issue 21).
        if (next != UINT64_MAX && !watched) sleep_ns = next > now ? std::min(sleep_ns, next - now) : 0;
        if (sleep_ns < 1000) {
            waker.cancel_sleep();
            give_poller();
            continue;
        }
        ++ctr_.sleeps;
        // The sleep runs unowned, so compute threads can poll meanwhile; with fabric udp too:
        // they take the port's direct path, which leaves the ring (whose wait this is) alone.
        if (in_ring) {
            udp_->wait_prepare();
            give_poller();
            udp_->wait(sleep_ns);
            waker.cancel_sleep();
            continue;
        }
        give_poller();
        if (!poll_fds_.empty()) {
            const timespec ts{static_cast<time_t>(sleep_ns / 1'000'000'000),
                              static_cast<long>(sleep_ns % 1'000'000'000)};
            ppoll(poll_fds_.data(), poll_fds_.size(), &ts, nullptr);
            waker.cancel_sleep();
            if (poll_fds_.back().revents & POLLIN) {  // a compute thread's wake: consume it
                uint64_t v;
                [[maybe_unused]] const ssize_t r = read(poll_fds_.back().fd, &v, sizeof v);
            }
        } else {
            waker.sleep(static_cast<uint32_t>(sleep_ns / 1000));
        }
    }
    // Wait out an assisting compute thread's iteration, then publish.
    while (!take_poller()) sched_yield();
    publish();
    if (wan_) wan_publish();  // the run's report reads the final link counters
    give_poller();
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

uint32_t Proxy::wan_poll(uint64_t now_ns) {
    if (wan_cmd_pending_.load(std::memory_order_acquire)) {
        std::vector<WanCommand> cmds;
        {
            std::lock_guard<std::mutex> lock(wan_cmd_mu_);
            cmds.swap(wan_cmds_);
            wan_cmd_pending_.store(false, std::memory_order_relaxed);
        }
        for (const WanCommand& c : cmds) {
            if (c.kind == WanCommand::kMode) {
                wan_->set_mode(c.mode, now_ns);
                continue;
            }
            if (c.a >= wan_->topology().sites || c.b >= wan_->topology().sites) continue;
            WanLinkParams p = wan_->topology().at(c.a, c.b);
            if (c.kind == WanCommand::kSet) {
                const double loss = p.loss;
                p = c.params;
                p.loss = loss;
            } else {
                p.loss = c.params.loss;
            }
            wan_->set_link(c.a, c.b, p, now_ns);
        }
    }
    wan_->drive(now_ns);
    uint32_t work = 0;
    uint16_t site = 0;
    // Due messages in arrival order; a full ring stops its source site's queue until next time.
    for (void* m; (m = wan_->peek_due(now_ns, site)) != nullptr;) {
        if (!deliver(nullptr, static_cast<PktBuf*>(m))) break;
        wan_->pop(site);
        ++wan_released_;
        ++work;
    }
    wan_held_.store(wan_->held_msgs(), std::memory_order_relaxed);
    if (now_ns - last_wan_publish_ns_ >= 10'000'000) {
        wan_publish();
        last_wan_publish_ns_ = now_ns;
    }
    return work;
}

uint32_t Proxy::wan_lose_burst(PktBuf** frames, uint32_t n, bool datagrams) {
    uint32_t kept = 0;
    for (uint32_t i = 0; i < n; ++i) {
        PktBuf* f = frames[i];
        // The sender's IPv4 address: the socket's (fabric udp), or the IPv4 header's (not ARP).
        // Fabric udp: every socket may share one address, so its port names the proxy too.
        uint32_t src_be = 0;
        uint16_t port = 0;
        bool ip = false;
        if (datagrams) {
            ip = f->data_len >= kDgramAddrLen;
            if (ip) {
                std::memcpy(&src_be, f->data() + offsetof(DgramAddrHdr, src_ip_be), 4);
                port = load_be16(f->data() + offsetof(DgramAddrHdr, src_port_be));
            }
        } else {
            ip = f->data_len >= 14 + 20 && load_be16(f->data() + 12) == 0x0800;
            if (ip) std::memcpy(&src_be, f->data() + 14 + 12, 4);
        }
        if (ip) {
            const uint32_t src = __builtin_bswap32(src_be);
            for (const ProxyAddr& peer : cfg_.peers)
                if (peer.ip.v == src && (!datagrams || peer.udp_port == port)) {
                    if (wan_->remote(peer.cluster) && wan_->lose(wan_->site_of(peer.cluster))) {
                        pkt_free(f);
                        f = nullptr;
                    }
                    break;
                }
        }
        if (f != nullptr) frames[kept++] = f;
    }
    return kept;
}

void Proxy::wan_publish() {
    std::unique_lock<std::mutex> lock(wan_view_mu_, std::try_to_lock);
    if (!lock.owns_lock()) return;  // a reader is copying it: next time
    WanView& v = wan_view_;
    v.on = true;
    v.mode = wan_->mode();
    v.sites = wan_->topology().sites;
    v.my_site = wan_->my_site();
    v.held_msgs = wan_->held_msgs();
    v.held_bytes = wan_->held_bytes();
    v.held_max_msgs = wan_held_max_;
    v.hold_full = wan_hold_full_;
    v.released = wan_released_;
    v.links.clear();
    for (const auto& [a, b] : wan_->used_links())
        v.links.push_back(WanView::Link{a, b, wan_->topology().at(a, b), wan_->counters(a, b)});
    v.changes.assign(wan_->changes().begin(), wan_->changes().end());
}

bool Proxy::wan_post(const WanCommand& c) {
    if (!wan_) return false;
    std::lock_guard<std::mutex> lock(wan_cmd_mu_);
    wan_cmds_.push_back(c);
    wan_cmd_pending_.store(true, std::memory_order_release);
    rings_.proxy_waker(cfg_.index).wake();
    return true;
}

WanView Proxy::wan_view() const {
    std::lock_guard<std::mutex> lock(wan_view_mu_);
    return wan_view_;
}

}  // namespace iccs
