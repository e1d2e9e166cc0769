// proxy_tx.cpp: a proxy's transmit side (proxy.hpp): messages from the compute threads' rings to
// their sub-connections (combined into bundles when small), and frames to the ports in bursts.
#include "proxy_impl.hpp"

#include <rte_ring.h>

#include <algorithm>

#include "conv_hdr.hpp"
#include "stamps.hpp"

namespace iccs {

namespace {
constexpr size_t kBacklogLimit = 4096;  // beyond this, leave messages in the rings (backpressure)
constexpr size_t kTxQueueLimit = 8192;  // frames a port may have waiting for its TX ring
}  // namespace

uint32_t Proxy::port_tx(size_t port, PktBuf** frames, uint32_t n) {
    stamps::stamp(stamps::kFabricTx);
    if (!capture_) return ports_[port]->tx_burst(frames, n);
    for (uint32_t i = 0; i < n; ++i) pkt_ref(frames[i]);
    const uint32_t sent = ports_[port]->tx_burst(frames, n);
    capture_->write_burst(static_cast<uint32_t>(port), frames, sent, realtime_ns(), PcapngWriter::Dir::kOut);
    for (uint32_t i = 0; i < n; ++i) pkt_free(frames[i]);  // our reference only: the rest is as tx_burst left it
    return sent;
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
            if (trace_) [[unlikely]] trace_->record(trace_record(m, static_cast<uint16_t>(t), false, now_ns));
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

// Headroom the layers below need in front of a bundle: eth, IPv4, UDP, slidwin (and, with a
// [security] key, its auth block: see combine()).
constexpr uint32_t kBelowHeadroom = 14 + 20 + 8 + kSlidwinHdrLen;

bool Proxy::combine(uint16_t cluster, PktBuf* m) {
    OpenBundle& o = open_[cluster];
    const bool opens = o.b == nullptr;
    // With a key, slidwin also prepends its auth block: kPktHeadroom leaves room for it (issue 37),
    // so authenticated runs bundle too; a buffer without the room (not one of ours) stays alone.
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
        if (port_state_[p] == kGone) {  // its peer is gone (leave_port): nothing reads the link
            for (PktBuf* f : q) pkt_free(f);
            q.clear();
            continue;
        }
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

}  // namespace iccs
