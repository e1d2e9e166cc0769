// mem_wire.cpp: see mem_wire.hpp.
#include "mem_wire.hpp"

namespace iccs {

MemWire::MemWire(Stack& a, Stack& b, const WireImpairment& imp) : ends_{&a, &b}, imp_(imp), rng_(imp.seed) {
    ready_.reserve(64);
    if (imp.corrupt > 0) sum_both_ends();
}

void MemWire::sum_both_ends() {
    for (Stack* s : ends_) s->sum_every_datagram();
}

MemWire::~MemWire() {
    for (auto& h : held_)
        for (PktBuf* p : h) pkt_free(p);
}

void MemWire::set_impairment(const WireImpairment& imp) {
    imp_ = imp;
    rng_.seed(imp.seed);
    if (imp.corrupt > 0) sum_both_ends();
}

uint32_t MemWire::pump(uint64_t now_ns, bool flush_held) {
    return move(0, now_ns, flush_held) + move(1, now_ns, flush_held);
}

uint32_t MemWire::move(int dir, uint64_t now_ns, bool flush_held) {
    Stack& from = *ends_[dir];
    Stack& to = *ends_[1 - dir];
    std::vector<PktBuf*>& held = held_[dir];
    const bool impaired = imp_.drop > 0 || imp_.duplicate > 0 || imp_.corrupt > 0 || imp_.reorder_window > 0;
    uint32_t delivered = 0;
    PktBuf* tx[32];
    for (;;) {
        const uint32_t n = from.tx_take(tx, 32);
        ready_.clear();
        for (uint32_t i = 0; i < n; ++i) {
            PktBuf* f = tx[i];
            ++ctr_.frames;
            ctr_.bytes += f->pkt_len;
            int copies = 1;
            if (imp_.drop_if && imp_.drop_if(dir, *f)) {
                ++ctr_.dropped;
                copies = 0;
            } else if (impaired) {
                if (unit_(rng_) < imp_.drop) {
                    ++ctr_.dropped;
                    copies = 0;
                } else if (unit_(rng_) < imp_.duplicate) {
                    ++ctr_.duplicated;
                    copies = 2;
                }
            }
            for (int c = 0; c < copies; ++c) {
                // The receiver's own buffers, as DMA would fill them.
                PktBuf* r = pkt_copy(to.pool(), f);
                if (r == nullptr) {
                    ++ctr_.nobuf;
                    continue;
                }
                if (impaired && unit_(rng_) < imp_.corrupt && r->pkt_len > 0) {
                    const uint32_t bit = static_cast<uint32_t>(rng_() % (uint64_t{r->pkt_len} * 8));
                    PktBuf* s = r;
                    uint32_t byte = bit / 8;
                    while (byte >= s->data_len) {
                        byte -= s->data_len;
                        s = s->next;
                    }
                    s->data()[byte] ^= static_cast<uint8_t>(1u << (bit % 8));
                    ++ctr_.corrupted;
                }
                if (imp_.reorder_window > 0) {
                    held.push_back(r);
                    if (held.size() > imp_.reorder_window) {
                        const size_t k = rng_() % held.size();
                        if (k != held.size() - 1) ++ctr_.reordered;
                        ready_.push_back(held[k]);
                        held[k] = held.back();
                        held.pop_back();
                    }
                } else {
                    ready_.push_back(r);
                }
            }
            pkt_free(f);
        }
        if (n == 0 && flush_held) {
            while (!held.empty()) {
                const size_t k = rng_() % held.size();
                ready_.push_back(held[k]);
                held[k] = held.back();
                held.pop_back();
            }
        }
        // Feed in bursts of at most 32, as a NIC's RX burst would.
        for (size_t i = 0; i < ready_.size(); i += 32) {
            const uint32_t k = static_cast<uint32_t>(std::min<size_t>(32, ready_.size() - i));
            to.input_burst(ready_.data() + i, k, now_ns);
            delivered += k;
        }
        if (n == 0) break;
    }
    return delivered;
}

}  // namespace iccs
