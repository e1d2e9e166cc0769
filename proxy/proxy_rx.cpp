// proxy_rx.cpp: a proxy's receive side (proxy.hpp): frames from the ports (impaired on request),
// messages and bundles out of sub-connections, connects refused, delivery to the compute threads.
#include "proxy_impl.hpp"

#include <rte_ring.h>

#include <algorithm>

#include "conv_hdr.hpp"
#include "stamps.hpp"

namespace iccs {

void Proxy::capture_rx(size_t port, PktBuf** frames, uint32_t n) {
    if (n == 0) return;
    capture_->write_burst(static_cast<uint32_t>(port), frames, n, realtime_ns(), PcapngWriter::Dir::kIn);
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

void Proxy::on_peer_restarted(SubConnection& sc, uint64_t new_token) {
    const uint32_t c = sc.local_id() / 64;  // global_id()
    ++ctr_.peers_restarted;
    std::fprintf(stderr, "proxy %u.%u: cluster %u restarted (new token %016llx on sub-connection %u): "
                 "handled as down, its new incarnation is not merged\n", cfg_.cluster, cfg_.index, c,
                 static_cast<unsigned long long>(new_token), sc.local_id());
    if (c < last_heard_ns_.size()) last_heard_ns_[c] = 0;
    if (rings_.mark_cluster_down(c, ClusterRings::DownReason::kRestarted)) {
        ++ctr_.peers_down;
        for (uint32_t t = 0; t < rings_.threads(); ++t) rings_.thread_waker(t).wake();
    }
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
    const auto type = static_cast<ConvType>(h[offsetof(ConvHdr, type)]);
    if (type == ConvType::kProxyStatus) {
        ++ctr_.status_rx;
        if (h[offsetof(ConvHdr, flags)] & kStatusDone) rings_.mark_cluster_done(src_cluster);
        if (h[offsetof(ConvHdr, flags)] & kStatusIdle) rings_.mark_cluster_idle(src_cluster);
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
    // Everything read from the message is read before it is handed over: once in the thread's
    // ring, the compute thread may take it, free it, and its buffer carry another message.
    const uint32_t len = msg->pkt_len;
    uint64_t enq_be;
    std::memcpy(&enq_be, h + offsetof(ConvHdr, enq_ns), 8);
    const uint64_t enq = __builtin_bswap64(enq_be);
    MsgTraceRecord rec{};
    if (trace_) [[unlikely]] rec = trace_record(msg, static_cast<uint16_t>(port), true, iter_now_ns_);
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
    ctr_.bytes_rx += len;
    if (trace_) [[unlikely]] trace_->record(rec);
    // Message time: the sender's enqueue stamp to this delivery (same host: same clock).
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

}  // namespace iccs
