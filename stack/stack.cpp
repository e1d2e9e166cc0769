// stack.cpp: the Stack's burst entry, TX queue, port bindings and slow timers.
#include "stack.hpp"

#include <algorithm>
#include <bit>

namespace iccs {

Stack::Stack(const StackConfig& cfg, PktPool& pool)
    : cfg_(cfg), pool_(pool), arp_(cfg.arp_entries), reass_(cfg.reass) {
    cfg_.tx_queue_frames = std::bit_ceil(std::max<uint32_t>(cfg.tx_queue_frames, 32));
    tx_mask_ = cfg_.tx_queue_frames - 1;
    txq_.reset(new PktBuf*[cfg_.tx_queue_frames]);
}

Stack::~Stack() {
    for (Pending& q : arp_pending_) pkt_free(q.p);
    while (tx_count_ > 0) {
        pkt_free(txq_[tx_head_]);
        tx_head_ = (tx_head_ + 1) & tx_mask_;
        --tx_count_;
    }
}

void Stack::input_burst(PktBuf* const* frames, uint32_t n, uint64_t now_ns) {
    last_now_ns_ = now_ns;
    for (uint32_t i = 0; i < n; ++i) eth_input(frames[i], now_ns);
    for (UdpHandler* h : burst_listeners_) h->end_of_burst(now_ns);
}

uint32_t Stack::tx_take(PktBuf** out, uint32_t max) {
    uint32_t n = 0;
    while (n < max && tx_count_ > 0) {
        out[n++] = txq_[tx_head_];
        tx_head_ = (tx_head_ + 1) & tx_mask_;
        --tx_count_;
    }
    return n;
}

void Stack::bind(uint16_t port, UdpHandler* h) {
    for (size_t i = 0; i < bindings_.size(); ++i)
        if (bindings_[i].port == port) {
            UdpHandler* old = bindings_[i].h;
            bindings_.erase(bindings_.begin() + static_cast<long>(i));
            std::erase(burst_listeners_, old);
            break;
        }
    if (h == nullptr) return;
    bindings_.push_back(Binding{port, h});
    burst_listeners_.push_back(h);
}

void Stack::timers(uint64_t now_ns) {
    last_now_ns_ = now_ns;
    reass_.expire(now_ns, ctr_);
    for (size_t i = 0; i < arp_asked_.size(); ++i)
        if (now_ns - arp_asked_[i].sent_ns >= cfg_.arp_retry_ns) arp_request(arp_asked_[i].ip, now_ns);
}

}  // namespace iccs
