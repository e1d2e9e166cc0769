// conn_rx.cpp: see conn_rx.hpp.
#include "conn_rx.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>

namespace iccs {

RecvMsg& RecvMsg::operator=(RecvMsg&& o) noexcept {
    if (this != &o) {
        reset();
        pkt_ = o.pkt_;
        budget_ = o.budget_;
        heap_ = std::move(o.heap_);
        len_ = o.len_;
        seq_ = o.seq_;
        o.pkt_ = nullptr;
        o.len_ = 0;
    }
    return *this;
}

void RecvMsg::reset() {
    if (pkt_ != nullptr) {
        pkt_free(pkt_);
        if (budget_ != nullptr) ++*budget_;
    }
    pkt_ = nullptr;
    budget_ = nullptr;
    heap_.reset();
    len_ = 0;
}

uint32_t RecvMsg::copy_to(void* dst, uint32_t cap) const {
    const uint32_t n = std::min(cap, len_);
    if (n == 0) return 0;
    if (pkt_ != nullptr) return pkt_read(pkt_, 0, n, dst);
    std::memcpy(dst, heap_.get(), n);
    return n;
}

const uint8_t* RecvMsg::contiguous() const {
    if (heap_) return heap_.get();
    if (pkt_ != nullptr && pkt_->data_len >= len_) return pkt_->data();
    return nullptr;
}

uint32_t RecvMsg::segments(iovec* out, uint32_t max) const {
    if (len_ == 0 || max == 0) return 0;
    if (pkt_ == nullptr) {
        out[0] = iovec{heap_.get(), len_};
        return 1;
    }
    uint32_t n = 0, left = len_;
    for (const PktBuf* s = pkt_; s != nullptr && left > 0; s = s->next) {
        if (s->data_len == 0) continue;
        if (n == max) return 0;
        const uint32_t k = std::min(s->data_len, left);
        out[n++] = iovec{const_cast<uint8_t*>(s->data()), k};
        left -= k;
    }
    return left == 0 ? n : 0;
}

void RecvMsg::set_packet(PktBuf* p, uint32_t len, uint32_t seq, uint32_t* budget) {
    reset();
    pkt_ = p;
    budget_ = budget;
    len_ = len;
    seq_ = seq;
}

void RecvMsg::set_heap(std::unique_ptr<uint8_t[]> b, uint32_t len, uint32_t seq) {
    reset();
    heap_ = std::move(b);
    len_ = len;
    seq_ = seq;
}

ConnRx::ConnRx(bool ordered, uint32_t window_msgs, uint32_t window_bytes, uint32_t* packet_budget)
    : ordered_(ordered),
      mask_(std::bit_ceil(std::max<uint32_t>(window_msgs, 1)) - 1),
      window_bytes_(window_bytes),
      packet_budget_(packet_budget),
      slots_(mask_ + 1) {}

ConnRx::~ConnRx() {
    for (Slot& s : slots_)
        if (s.pkt != nullptr) {
            pkt_free(s.pkt);
            if (packet_budget_ != nullptr) ++*packet_budget_;
        }
}

PieceResult ConnRx::on_piece(PktBuf* p, const ConvHdr& h) {
    const uint32_t seq = h.conn_seq.get();
    const uint32_t len = h.msg_len.get();
    const uint32_t cnt = h.piece_cnt.get();
    const uint32_t idx = h.piece_idx.get();
    auto drop = [&](PieceResult r) {
        ++(r == PieceResult::kDuplicate ? ctr_.dup_pieces : ctr_.bad_pieces);
        pkt_free(p);
        return r;
    };
    const uint32_t ahead = seq - base_;  // modulo 2^32: "behind base" wraps to a huge value
    if (ahead > mask_) return drop(static_cast<int32_t>(ahead) < 0 ? PieceResult::kDuplicate : PieceResult::kBad);
    // The header must sit in the first segment (the proxy checks it too).
    if (cnt == 0 || idx >= cnt || p->data_len < kConvHdrLen) return drop(PieceResult::kBad);
    const uint32_t psize = piece_size(len, cnt);
    const uint32_t off = idx * psize;
    const uint32_t plen = p->pkt_len - kConvHdrLen;
    if (uint64_t{psize} * (cnt - 1) >= len && cnt > 1) return drop(PieceResult::kBad);  // counts do not fit len
    if (plen != (idx + 1 == cnt ? len - off : psize)) return drop(PieceResult::kBad);
    Slot& s = slot(seq);
    // A new message must fit the byte window beside what is held (a true sender never exceeds it).
    if (s.state == SlotState::kEmpty && held_bytes_ + len > window_bytes_) return drop(PieceResult::kBad);
    if (s.state == SlotState::kComplete || s.state == SlotState::kTaken) return drop(PieceResult::kDuplicate);
    if (s.state == SlotState::kPartial && (s.seq != seq || s.len != len || s.piece_cnt != cnt))
        return drop(PieceResult::kBad);
    ++ctr_.pieces;
    if (cnt == 1) {
        s.state = SlotState::kPartial;
        s.seq = seq;
        s.len = len;
        if (packet_budget_ == nullptr || *packet_budget_ > 0) {  // zero copy: keep the packet
            pkt_adj(p, kConvHdrLen);  // the header is in the first segment (checked above)
            s.pkt = p;
            if (packet_budget_ != nullptr) --*packet_budget_;
        } else {  // the thread holds enough receive buffers: copy, give the packet back
            s.buf.reset(new (std::nothrow) uint8_t[std::max<uint32_t>(len, 1)]);
            if (!s.buf) {
                s.state = SlotState::kEmpty;
                ++ctr_.alloc_failures;
                pkt_free(p);
                return PieceResult::kBad;
            }
            pkt_read(p, kConvHdrLen, len, s.buf.get());
            pkt_free(p);
            ++ctr_.copied;
        }
        ++held_msgs_;
        held_bytes_ += len;
        complete(s);
        return PieceResult::kTaken;
    }
    if (s.state == SlotState::kEmpty) {
        s.buf.reset(new (std::nothrow) uint8_t[len]);
        s.got.reset(new (std::nothrow) uint64_t[(cnt + 63) / 64]());
        if (!s.buf || !s.got) {
            ++ctr_.alloc_failures;
            s.buf.reset();
            s.got.reset();
            pkt_free(p);
            return PieceResult::kBad;
        }
        s.state = SlotState::kPartial;
        s.seq = seq;
        s.len = len;
        s.piece_cnt = static_cast<uint16_t>(cnt);
        s.pieces_got = 0;
        ++held_msgs_;
        held_bytes_ += len;
    }
    uint64_t& word = s.got[idx / 64];
    const uint64_t bit = uint64_t{1} << (idx % 64);
    if (word & bit) return drop(PieceResult::kDuplicate);
    word |= bit;
    pkt_read(p, kConvHdrLen, plen, s.buf.get() + off);
    pkt_free(p);
    if (++s.pieces_got == cnt) complete(s);
    return PieceResult::kTaken;
}

void ConnRx::complete(Slot& s) {
    s.state = SlotState::kComplete;
    s.got.reset();
    if (s.seq != base_) ++ctr_.reordered;
    if (!ordered_) ready_.push_back(s.seq);
}

bool ConnRx::readable() const {
    if (!ordered_) return !ready_.empty();
    const Slot& s = slots_[base_ & mask_];
    return s.state == SlotState::kComplete && s.seq == base_;
}

bool ConnRx::pop(RecvMsg& out) {
    if (!readable()) return false;
    const uint32_t seq = ordered_ ? base_ : ready_.front();
    if (!ordered_) ready_.pop_front();
    Slot& s = slot(seq);
    if (s.pkt != nullptr) {
        out.set_packet(s.pkt, s.len, seq, packet_budget_);
        s.pkt = nullptr;
    } else {
        out.set_heap(std::move(s.buf), s.len, seq);
    }
    --held_msgs_;
    held_bytes_ -= s.len;
    bytes_taken_ += s.len;
    ++msgs_taken_;
    s.state = SlotState::kTaken;
    advance_base();
    return true;
}

void ConnRx::advance_base() {
    while (true) {
        Slot& s = slot(base_);
        if (s.state != SlotState::kTaken || s.seq != base_) return;
        s.state = SlotState::kEmpty;
        ++base_;
    }
}

}  // namespace iccs
