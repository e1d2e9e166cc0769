// rank_engine.cpp: matching, chunking and progress of one rank (rank_engine.hpp).
#include "rank_engine.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstring>

#include "clock.hpp"

namespace iccs::mpi {

namespace {

uint64_t iov_total(const iovec* iov, uint32_t n) {
    uint64_t t = 0;
    for (uint32_t i = 0; i < n; ++i) t += iov[i].iov_len;
    return t;
}

// Copy n bytes of the message that starts at `offset` out of an iovec.
void gather(const iovec* iov, uint32_t cnt, uint64_t offset, uint8_t* dst, uint64_t n) {
    for (uint32_t i = 0; i < cnt && n > 0; ++i) {
        if (offset >= iov[i].iov_len) {
            offset -= iov[i].iov_len;
            continue;
        }
        const uint64_t m = std::min<uint64_t>(iov[i].iov_len - offset, n);
        std::memcpy(dst, static_cast<const uint8_t*>(iov[i].iov_base) + offset, m);
        dst += m;
        n -= m;
        offset = 0;
    }
}
// Copy n bytes from the message at src_off of one list of pieces to dst_off of another (a
// record's payload as it arrived into the user's buffer; the bytes past the end of either list
// are not copied).
void copy_pieces(const iovec* dst, uint32_t dst_cnt, uint64_t dst_off, const iovec* src, uint32_t src_cnt,
                 uint64_t src_off, uint64_t n) {
    uint32_t d = 0, s = 0;
    while (d < dst_cnt && dst_off >= dst[d].iov_len) dst_off -= dst[d++].iov_len;
    while (s < src_cnt && src_off >= src[s].iov_len) src_off -= src[s++].iov_len;
    while (n > 0 && d < dst_cnt && s < src_cnt) {
        const uint64_t k = std::min({n, dst[d].iov_len - dst_off, src[s].iov_len - src_off});
        std::memcpy(static_cast<uint8_t*>(dst[d].iov_base) + dst_off, static_cast<const uint8_t*>(src[s].iov_base) + src_off, k);
        n -= k;
        dst_off += k;
        src_off += k;
        if (dst_off == dst[d].iov_len) {
            ++d;
            dst_off = 0;
        }
        if (src_off == src[s].iov_len) {
            ++s;
            src_off = 0;
        }
    }
}

// The pieces of an iovec that hold n bytes of its message from offset, into out (at most cnt of
// them: the iovec's own count); returns how many.
uint32_t iov_slice(const iovec* iov, uint32_t cnt, uint64_t offset, uint64_t n, iovec* out) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < cnt && n > 0; ++i) {
        if (offset >= iov[i].iov_len) {
            offset -= iov[i].iov_len;
            continue;
        }
        const uint64_t m = std::min<uint64_t>(iov[i].iov_len - offset, n);
        out[k++] = iovec{static_cast<uint8_t*>(iov[i].iov_base) + offset, m};
        n -= m;
        offset = 0;
    }
    return k;
}

uint64_t op_flags(bool send, bool tagged, bool has_data) {
    return (send ? FI_SEND : FI_RECV) | (tagged ? FI_TAGGED : FI_MSG) | (has_data ? FI_REMOTE_CQ_DATA : 0);
}

constexpr uint64_t kMinPartialChunk = 4096;  // a chunk smaller than this waits for room instead

}  // namespace

const char* prov_errno_text(int e) {
    switch (e) {
        case kErrPeerDead: return "the peer rank died (its process ended without closing the provider)";
        case kErrAgentGone: return "this rank's agent is gone: ranks of other clusters are unreachable";
        case kErrNoMatch: return "no message matches the peek";
        case kErrCanceled: return "the receive was cancelled";
        case kErrTruncated: return "the message is longer than the receive buffer";
        default: return "no error";
    }
}

const char* prov_errno_text(int prov_errno, char* buf, size_t len) {
    const char* s = prov_errno_text(prov_errno);
    if (buf == nullptr || len == 0) return s;
    std::strncpy(buf, s, len - 1);
    buf[len - 1] = '\0';
    return buf;
}

std::string to_string(const MpiRecHdr& h) {
    char b[200];
    std::snprintf(b, sizeof b, "%s%s src %u dst %u tag 0x%llx len %llu off %llu chunk %u",
                  h.type == uint8_t(RecType::kData) ? "data" : h.type == uint8_t(RecType::kRankDown) ? "rank-down" : "?",
                  (h.flags.get() & kRecTagged) ? " tagged" : "", h.src_rank.get(), h.dst_rank.get(),
                  (unsigned long long)h.tag.get(), (unsigned long long)h.total_len.get(),
                  (unsigned long long)h.offset.get(), h.chunk_len.get());
    return b;
}

RankEngine::RankEngine(const Region& region, const EngineConfig& cfg) : region_(region), cfg_(cfg) {
    const RegionHeader& h = region.hdr();
    my_member_ = region.member_of(cfg.my_rank);
    slot_ = &region.slot(my_member_);
    out_.resize(h.members);
    // Every member, this rank included: a message to itself (MPI_Send to self through the MTL)
    // goes through its own ring.
    for (uint32_t j = 0; j < h.members; ++j) {
        OutPath& p = out_[j];
        p.ring = ShmRingProducer(region.base(), region.pair_ring(my_member_, j));
        p.wake = &region.slot(j).doorbell;
        p.chunk = std::min<uint64_t>(cfg.local_chunk, shm_max_record(h.pair_ring_bytes) - kMpiRecHdrLen);
        p.remote = rank_is_remote(h.first_rank + j);
    }
    for (uint32_t i = 0; i < h.members; ++i)
        in_.push_back(InPath{ShmRingConsumer(region.base(), region.pair_ring(i, my_member_)), h.first_rank + i});
    if (cfg.bridged) {
        out_agent_.ring = ShmRingProducer(region.base(), region.to_agent_ring(my_member_));
        out_agent_.wake = &slot_->bridge_word;
        out_agent_.chunk = std::min<uint64_t>(cfg.remote_chunk, shm_max_record(h.agent_ring_bytes) - kMpiRecHdrLen);
        out_agent_.remote = true;
        in_.push_back(InPath{ShmRingConsumer(region.base(), region.from_agent_ring(my_member_)), kAnyRank});
    }
    for (OutPath& p : out_) paths_.push_back(&p);
    if (cfg.bridged) paths_.push_back(&out_agent_);
    incoming_.resize(cfg.world);
    dead_.assign(cfg.world, 0);
    seen_epoch_ = h.epoch.load(std::memory_order_acquire) - 1;  // look at the peers at the first progress
}

RankEngine::OutPath& RankEngine::route(uint32_t dst) {
    if (region_.is_member(dst)) return out_[region_.member_of(dst)];
    return out_agent_;
}

long RankEngine::send(const SendArgs& a) {
    if (a.dst >= cfg_.world || a.iov_count > kMaxIov || (!cfg_.bridged && !region_.is_member(a.dst))) return -FI_EINVAL;
    const uint64_t total = iov_total(a.iov, a.iov_count);
    if (total > cfg_.max_msg_size || (a.inject && total > cfg_.inject_size)) return -FI_EMSGSIZE;
    if (dead(a.dst)) {
        add(slot_->counters.errors, 1);
        return -FI_EIO;
    }
    if (sends_outstanding_ >= cfg_.tx_size) return -FI_EAGAIN;
    const bool want_completion = a.completion;
    OutPath& p = route(a.dst);
    SendOp op;
    op.dst = a.dst;
    op.tagged = a.tagged;
    op.has_data = a.has_data;
    op.completion = want_completion;
    op.tag = a.tag;
    op.data = a.data;
    op.context = a.context;
    op.iov_count = a.iov_count;
    std::copy(a.iov, a.iov + a.iov_count, op.iov);
    op.total = total;
    // The common case: nothing queued on this ring, the message fits one record and the ring has
    // room: it goes now, and completes now. (A nearly full ring may take only a part: the rest
    // queues as any send.)
    // In the rank (DirectOut) a record for another cluster goes onto its connection from here;
    // when it cannot go now (kLater), the send waits in the queue, not in the ring.
    Direct direct = Direct::kRing;
    if (p.queue.empty() && total <= p.chunk && (!want_completion || tx_room())) {
        if (&p == &out_agent_) direct = send_direct(op);
        if (direct == Direct::kRing && write_chunk(p, op)) futex_wake_shared(p.wake);
        if (op.started && op.sent == total) {
            if (a.inject) add(slot_->counters.injects, 1);
            add(p.remote ? slot_->counters.sent_remote_msgs : slot_->counters.sent_local_msgs, 1);
            add(p.remote ? slot_->counters.sent_remote_bytes : slot_->counters.sent_local_bytes, total);
            if (want_completion)
                push_tx(Completion{op.context, op_flags(true, op.tagged, false), 0, nullptr, 0, op.tag});
            return 0;
        }
    }
    if (a.inject) {
        // Started or not, the caller's buffer is free at return: the queue sends from a copy.
        if (inject_queued_ + total > cfg_.inject_queue_bytes && !op.started) return -FI_EAGAIN;
        op.copy.resize(total);
        gather(a.iov, a.iov_count, 0, op.copy.data(), total);
        op.iov[0] = iovec{op.copy.data(), total};
        op.iov_count = 1;
        inject_queued_ += total;
        add(slot_->counters.injects, 1);
    }
    ++sends_outstanding_;
    p.queue.push_back(std::move(op));
    if (direct != Direct::kLater) push_out(p);  // (it just said not now: progress tries again)
    return 0;
}

MpiRecHdr RankEngine::record_header(const SendOp& op, uint64_t n) const {
    MpiRecHdr h{};
    h.version = kMpiWireVersion;
    h.type = static_cast<uint8_t>(RecType::kData);
    h.flags.set(static_cast<uint16_t>((op.tagged ? kRecTagged : 0) | (op.has_data ? kRecHasData : 0)));
    h.src_rank.set(cfg_.my_rank);
    h.dst_rank.set(op.dst);
    h.chunk_len.set(static_cast<uint32_t>(n));
    h.tag.set(op.tag);
    h.cq_data.set(op.data);
    h.total_len.set(op.total);
    h.offset.set(op.sent);
    h.send_ns.set(cfg_.delay_ns != 0 ? now_ns() : 0);
    return h;
}

void RankEngine::write_record(const SendOp& op, uint64_t n, uint8_t* rec) const {
    const MpiRecHdr h = record_header(op, n);
    std::memcpy(rec, &h, kMpiRecHdrLen);
    gather(op.iov, op.iov_count, op.sent, rec + kMpiRecHdrLen, n);
}

bool RankEngine::write_chunk(OutPath& p, SendOp& op) {
    const uint64_t remaining = op.total - op.sent;
    uint64_t n = std::min(remaining, p.chunk);
    uint8_t* rec = p.ring.reserve(kMpiRecHdrLen + n);
    // A full ring: a smaller chunk may fit now (the reader frees room record by record).
    while (rec == nullptr && n > kMinPartialChunk) {
        n /= 2;
        rec = p.ring.reserve(kMpiRecHdrLen + n);
    }
    if (rec == nullptr) return false;
    write_record(op, n, rec);
    p.ring.commit();
    op.sent += n;
    op.started = true;
    return true;
}

RankEngine::Direct RankEngine::send_direct(SendOp& op) {
    // Only while the bridge has taken everything of this rank's ring: records to one rank keep
    // their order (the bridge sends what it takes before it pops it).
    if (direct_out_.send == nullptr || !out_agent_.ring.drained()) return Direct::kRing;
    const uint64_t n = std::min(op.total - op.sent, out_agent_.chunk);  // a record's payload: fits 32 bits
    const MpiRecHdr h = record_header(op, n);
    iovec rec[1 + kMaxIov];
    rec[0] = iovec{const_cast<MpiRecHdr*>(&h), kMpiRecHdrLen};
    const uint32_t pieces = 1 + iov_slice(op.iov, op.iov_count, op.sent, n, rec + 1);
    const int went = direct_out_.send(direct_out_.ctx, op.dst, rec, pieces, static_cast<uint32_t>(kMpiRecHdrLen + n),
                                      op.total > out_agent_.chunk);
    if (went == 0) return Direct::kRing;
    if (went < 0) return Direct::kLater;
    op.sent += n;
    op.started = true;
    return Direct::kSent;
}

bool RankEngine::push_out(OutPath& p) {
    bool wrote = false, moved = false;  // into the ring; onto a connection (DirectOut)
    while (!p.queue.empty()) {
        SendOp& op = p.queue.front();
        if (!op.failed) {
            while (!op.started || op.sent < op.total) {
                if (&p == &out_agent_) {
                    const Direct d = send_direct(op);
                    if (d == Direct::kSent) {
                        moved = true;
                        continue;
                    }
                    if (d == Direct::kLater) goto out;  // progress tries again
                }
                if (!write_chunk(p, op)) {
                    if (!op.waited) add(slot_->counters.send_ring_full, 1);
                    op.waited = true;
                    goto out;
                }
                wrote = true;
            }
            if (op.completion) {
                if (!tx_room()) {
                    add(slot_->counters.cq_full, 1);
                    goto out;
                }
                push_tx(Completion{op.context, op_flags(true, op.tagged, false), 0, nullptr, 0, op.tag});
            }
            add(p.remote ? slot_->counters.sent_remote_msgs : slot_->counters.sent_local_msgs, 1);
            add(p.remote ? slot_->counters.sent_remote_bytes : slot_->counters.sent_local_bytes, op.total);
        }
        if (!op.copy.empty()) inject_queued_ -= op.total;
        p.queue.pop_front();
        --sends_outstanding_;
    }
out:
    if (wrote) futex_wake_shared(p.wake);
    return wrote || moved;
}

uint32_t RankEngine::progress() {
    check_peers();
    uint32_t work = 0;
    for (OutPath* p : paths_)
        if (!p->queue.empty() && push_out(*p)) ++work;
    const uint32_t n = static_cast<uint32_t>(in_.size());
    for (uint32_t k = 0; k < n; ++k) {
        InPath& in = in_[(next_in_ + k) % n];
        if (!take_in(in, work)) break;  // a CQ is full: stop until it is read
    }
    if (n != 0) next_in_ = (next_in_ + 1) % n;
    return work;
}

bool RankEngine::sends_pending() const {
    for (const OutPath* p : paths_)
        if (!p->queue.empty()) return true;
    return false;
}

bool RankEngine::sends_wait_only_for_agent() {
    room_wait_pos_.store(kNoRoomWait, std::memory_order_relaxed);
    for (const OutPath* p : paths_)
        if (p != &out_agent_ && !p->queue.empty()) return false;
    if (out_agent_.queue.empty()) return true;
    room_wait_pos_.store(out_agent_.ring.consumer_position(), std::memory_order_relaxed);
    add(slot_->counters.room_blocks, 1);
    return true;
}

void RankEngine::forget_receives() {
    for (Incoming& in : incoming_)
        if (in.kind == Incoming::kPosted) in.kind = Incoming::kDiscard;
    posted_tagged_.clear();
    posted_msg_.clear();
    active_.clear();
    recvs_posted_ = 0;
    for (Unexpected& u : unexpected_) {
        u.claimed = false;
        u.claimed_by = nullptr;
    }
    for (OutPath* p : all_paths())
        for (SendOp& op : p->queue) op.completion = false;  // nobody reads the closed endpoint's CQ
}

void RankEngine::sleep_until_work(uint64_t timeout_us) {
    // The writers' protocol (futex_wake_shared): say we sleep, look once more, sleep while the
    // word says so. Only the rings' shared positions are read here (another thread may be in
    // progress() under FI_THREAD_SAFE, which owns the consumers' cached state).
    // Sends that wait for room in the agent ring ask the bridge for a wake when it takes records
    // (kDoorbellRoom); without, the bridge's takes do not wake us. Bits are or-ed in: under
    // FI_THREAD_SAFE another thread of the rank may sleep on the same word.
    const uint64_t pos = room_wait_pos_.exchange(kNoRoomWait, std::memory_order_relaxed);
    const uint32_t bits = kDoorbellSleeps | (pos != kNoRoomWait ? kDoorbellRoom : 0);
    const uint32_t word = slot_->doorbell.fetch_or(bits, std::memory_order_seq_cst) | bits;
    const auto found_work = [&] {
        bool work = region_.hdr().epoch.load(std::memory_order_acquire) != seen_epoch_;
        for (const InPath& in : in_) work = work || in.ring.maybe_nonempty();
        // The bridge took records since the wait looked (its ring of the doorbell may have come
        // before our word said we sleep). The note is this wait's.
        return work || (pos != kNoRoomWait && out_agent_.ring.consumer_position() != pos);
    };
    if (!found_work() && futex_wait_shared(&slot_->doorbell, word, timeout_us) && !found_work())
        add(slot_->counters.idle_wakes, 1);
    slot_->doorbell.store(0, std::memory_order_relaxed);
}

void RankEngine::wake_self() { futex_wake_shared(&slot_->doorbell); }

bool RankEngine::busy() {
    for (InPath& in : in_)
        if (!in.ring.empty()) return true;
    return sends_pending();
}

bool RankEngine::take_in(InPath& in, uint32_t& records) {
    for (uint32_t budget = 256; budget > 0; --budget) {
        uint32_t len = 0;
        const uint8_t* rec = in.ring.peek(len);
        if (rec == nullptr) return true;
        if (!rx_room()) {
            add(slot_->counters.cq_full, 1);
            return false;
        }
        const iovec whole{const_cast<uint8_t*>(rec), len};
        if (!take_record(&whole, 1, len)) return true;  // not due yet
        in.ring.pop();
        ++records;
    }
    return true;
}

bool RankEngine::take_record(const iovec* rec, uint32_t pieces, uint32_t len) {
    if (len < kMpiRecHdrLen) return true;
    MpiRecHdr h;
    if (rec[0].iov_len >= kMpiRecHdrLen) {
        std::memcpy(&h, rec[0].iov_base, kMpiRecHdrLen);
    } else {
        const iovec to{&h, kMpiRecHdrLen};
        copy_pieces(&to, 1, 0, rec, pieces, 0, kMpiRecHdrLen);
    }
    const uint32_t src = h.src_rank.get();
    const bool remote = src < cfg_.world && rank_is_remote(src);
    if (cfg_.delay_ns != 0 && remote && now_ns() < h.send_ns.get() + cfg_.delay_ns) return false;
    if (h.version == kMpiWireVersion && h.type == static_cast<uint8_t>(RecType::kData) &&
        h.chunk_len.get() == len - kMpiRecHdrLen && h.dst_rank.get() == cfg_.my_rank)
        on_record(h, Payload{rec, pieces, kMpiRecHdrLen}, remote);
    return true;
}

bool RankEngine::take_direct(const iovec* rec, uint32_t pieces, uint32_t len) {
    if (!rx_room()) {
        add(slot_->counters.cq_full, 1);
        return false;
    }
    return take_record(rec, pieces, len);
}

bool RankEngine::matches(const RecvOp& r, uint32_t src, bool tagged, uint64_t tag) const {
    if (r.tagged != tagged) return false;
    if (r.src != kAnyRank && r.src != src) return false;
    return !tagged || ((tag ^ r.tag) & ~r.ignore) == 0;
}

void RankEngine::place(RecvOp& r, uint64_t offset, const Payload& p, uint64_t n) {
    if (offset >= r.cap) return;
    copy_pieces(r.iov, r.iov_count, offset, p.piece, p.pieces, p.skip, std::min(n, r.cap - offset));
}

void RankEngine::on_record(const MpiRecHdr& h, const Payload& payload, bool remote) {
    const uint32_t src = h.src_rank.get();
    if (src >= cfg_.world) return;
    Incoming& in = incoming_[src];
    const uint64_t off = h.offset.get(), n = h.chunk_len.get(), total = h.total_len.get();
    if (off == 0) {
        const bool tagged = (h.flags.get() & kRecTagged) != 0;
        const bool has_data = (h.flags.get() & kRecHasData) != 0;
        add(remote ? slot_->counters.recv_remote_msgs : slot_->counters.recv_local_msgs, 1);
        add(remote ? slot_->counters.recv_remote_bytes : slot_->counters.recv_local_bytes, total);
        in = Incoming{};
        in.total = total;
        in.got = n;
        in.remote = remote;
        std::list<RecvOp>& posted = tagged ? posted_tagged_ : posted_msg_;
        const uint64_t tag = h.tag.get();
        auto r = std::find_if(posted.begin(), posted.end(), [&](const RecvOp& x) { return matches(x, src, tagged, tag); });
        if (r != posted.end()) {
            active_.splice(active_.end(), posted, r);
            --recvs_posted_;
            r->msg_src = src;
            r->msg_tag = tag;
            r->msg_data = h.cq_data.get();
            r->msg_has_data = has_data;
            r->msg_len = total;
            place(*r, 0, payload, n);
            r->got = n;
            if (n == total) {
                finish_recv(r);
            } else {
                in.kind = Incoming::kPosted;
                in.recv = r;
            }
            return;
        }
        Unexpected u;
        u.src = src;
        u.tagged = tagged;
        u.has_data = has_data;
        u.tag = tag;
        u.data = h.cq_data.get();
        u.total = total;
        u.got = n;
        u.bytes.resize(total);
        const iovec kept{u.bytes.data(), total};
        copy_pieces(&kept, 1, 0, payload.piece, payload.pieces, payload.skip, n);
        unexpected_.push_back(std::move(u));
        add(slot_->counters.unexpected, 1);
        if (n < total) {
            in.kind = Incoming::kUnexpected;
            in.unx = std::prev(unexpected_.end());
        }
        return;
    }
    if (in.kind == Incoming::kNone || off != in.got || off + n > in.total) return;  // a stray chunk (a failed peer's)
    in.got += n;
    switch (in.kind) {
        case Incoming::kPosted:
            place(*in.recv, off, payload, n);
            in.recv->got += n;
            if (in.got == in.total) finish_recv(in.recv);
            break;
        case Incoming::kUnexpected: {
            const iovec kept{in.unx->bytes.data(), in.unx->total};
            copy_pieces(&kept, 1, off, payload.piece, payload.pieces, payload.skip, n);
            in.unx->got += n;
            break;
        }
        default:
            break;
    }
    if (in.got == in.total) in.kind = Incoming::kNone;
}

void RankEngine::finish_recv(std::list<RecvOp>::iterator it) {
    const RecvOp& r = *it;
    Completion c{r.context, op_flags(false, r.tagged, r.msg_has_data), r.msg_len,
                 r.iov_count ? r.iov[0].iov_base : nullptr, r.msg_data, r.msg_tag, r.msg_src};
    if (r.msg_len > r.cap) {
        add(slot_->counters.truncations, 1);
        c.len = r.cap;
        c.err = FI_ETRUNC;
        c.olen = r.msg_len - r.cap;
        c.prov_errno = kErrTruncated;
        push_rx(c);
    } else if (r.completion) {
        push_rx(c);
    }
    active_.erase(it);
}

RankEngine::RecvOp RankEngine::make_recv(const RecvArgs& a) const {
    RecvOp r;
    r.context = a.context;
    r.src = a.src;
    r.tagged = a.tagged;
    r.tag = a.tagged ? a.tag : 0;
    r.ignore = a.tagged ? a.ignore : ~uint64_t{0};
    r.completion = a.completion;
    r.iov_count = a.iov_count;
    std::copy(a.iov, a.iov + a.iov_count, r.iov);
    r.cap = iov_total(a.iov, a.iov_count);
    return r;
}

std::list<RankEngine::Unexpected>::iterator RankEngine::find_unexpected(const RecvArgs& a) {
    const RecvOp probe = make_recv(a);
    return std::find_if(unexpected_.begin(), unexpected_.end(),
                        [&](const Unexpected& u) { return !u.claimed && matches(probe, u.src, u.tagged, u.tag); });
}

long RankEngine::take_unexpected(std::list<Unexpected>::iterator u, RecvOp r) {
    const bool complete = u->got == u->total;
    if (complete && !rx_room()) return -FI_EAGAIN;
    r.msg_src = u->src;
    r.msg_tag = u->tag;
    r.msg_data = u->data;
    r.msg_has_data = u->has_data;
    r.msg_len = u->total;
    const iovec kept{u->bytes.data(), u->got};
    place(r, 0, Payload{&kept, 1, 0}, u->got);
    r.got = u->got;
    active_.push_back(r);
    const auto it = std::prev(active_.end());
    if (complete) {
        finish_recv(it);
    } else {
        Incoming& in = incoming_[u->src];
        in.kind = Incoming::kPosted;
        in.recv = it;
    }
    unexpected_.erase(u);
    return 0;
}

long RankEngine::recv(const RecvArgs& a) {
    if (a.iov_count > kMaxIov || (a.src != kAnyRank && a.src >= cfg_.world)) return -FI_EINVAL;
    if ((a.peek || a.claim || a.discard) && !a.tagged) return -FI_EBADFLAGS;
    if (a.peek) {
        if (!rx_room()) return -FI_EAGAIN;
        add(slot_->counters.peeks, 1);
        const auto u = find_unexpected(a);
        if (u == unexpected_.end()) {
            // Nothing, even when the source died: Open MPI's probe takes no error but FI_ENOMSG
            // (any other error entry ends the job: "Error returned by request error callback").
            add(slot_->counters.peek_misses, 1);
            Completion c{a.context, op_flags(false, true, false), 0, nullptr, 0, a.tag};
            c.err = FI_ENOMSG;
            c.prov_errno = kErrNoMatch;
            push_rx(c);
            return 0;
        }
        Completion c{a.context, op_flags(false, true, u->has_data), u->total, nullptr, u->data, u->tag, u->src};
        if (a.discard) {
            add(slot_->counters.discards, 1);
            if (u->got < u->total) incoming_[u->src].kind = Incoming::kDiscard;
            unexpected_.erase(u);
            c.len = 0;
        } else if (a.claim) {
            add(slot_->counters.claims, 1);
            u->claimed = true;
            u->claimed_by = a.context;
        }
        push_rx(c);
        return 0;
    }
    if (a.claim) return recv_claimed(a);
    const auto u = find_unexpected(a);
    if (u != unexpected_.end()) {
        const long rc = take_unexpected(u, make_recv(a));
        if (rc == 0) add(slot_->counters.posted_recvs, 1);
        return rc;
    }
    // Nothing has come that matches, and what it waits for may never come: the source died (or,
    // for any source, some rank died: its message may be the one awaited) before this receive
    // was posted, so fail_peer never saw it. Posted, it would wait forever (a survivor that
    // reached its receive from the killed rank after the rank's cluster was found gone hung in
    // MPI_Sendrecv: mpi-killed-2x2, about 1 run in 15 on a loaded host).
    if (const int why = lost_source(a.src); why != kErrNone) return fail_now(a, why);
    if (recvs_posted_ >= cfg_.rx_size) return -FI_EAGAIN;
    (a.tagged ? posted_tagged_ : posted_msg_).push_back(make_recv(a));
    ++recvs_posted_;
    add(slot_->counters.posted_recvs, 1);
    return 0;
}

long RankEngine::recv_claimed(const RecvArgs& a) {
    const auto u = std::find_if(unexpected_.begin(), unexpected_.end(),
                                [&](const Unexpected& x) { return x.claimed && x.claimed_by == a.context; });
    if (u == unexpected_.end()) return -FI_EINVAL;  // nothing was claimed with this context
    if (a.discard) {
        if (!rx_room()) return -FI_EAGAIN;
        add(slot_->counters.discards, 1);
        if (u->got < u->total) incoming_[u->src].kind = Incoming::kDiscard;
        push_rx(Completion{a.context, op_flags(false, true, false), 0, nullptr, 0, u->tag, u->src});
        unexpected_.erase(u);
        return 0;
    }
    return take_unexpected(u, make_recv(a));
}

long RankEngine::cancel(void* context) {
    for (std::list<RecvOp>* l : {&posted_tagged_, &posted_msg_}) {
        const auto it = std::find_if(l->begin(), l->end(), [&](const RecvOp& r) { return r.context == context; });
        if (it == l->end()) continue;
        Completion c{it->context, op_flags(false, it->tagged, false), 0, nullptr, 0, it->tag};
        c.err = FI_ECANCELED;
        c.prov_errno = kErrCanceled;
        l->erase(it);
        --recvs_posted_;
        add(slot_->counters.cancels, 1);
        push_rx(c);
        return 0;
    }
    return -FI_ENOENT;
}

int RankEngine::lost_source(uint32_t src) const {
    if (src == kAnyRank) return peers_lost_ ? first_loss_ : kErrNone;
    return dead_[src];
}

long RankEngine::fail_now(const RecvArgs& a, int prov_errno) {
    if (!rx_room()) return -FI_EAGAIN;
    add(slot_->counters.errors, 1);
    if (a.context == nullptr) return 0;
    Completion c{a.context, op_flags(false, a.tagged, false), 0, nullptr, 0, a.tagged ? a.tag : 0, a.src};
    c.err = FI_EIO;
    c.prov_errno = prov_errno;
    c.peer = a.src == kAnyRank ? first_lost_rank_ : a.src;
    push_rx(c);
    return 0;
}

void RankEngine::check_peers() {
    const uint32_t e = region_.hdr().epoch.load(std::memory_order_acquire);
    if (e == seen_epoch_) return;
    seen_epoch_ = e;
    for (uint32_t r = 0; r < cfg_.world; ++r) {
        if (dead_[r] || r == cfg_.my_rank) continue;
        const bool gone = region_.is_member(r)
                              ? region_.slot(region_.member_of(r)).state.load(std::memory_order_acquire) ==
                                    static_cast<uint32_t>(RankState::kDead)
                              : region_.dead_flag(r).load(std::memory_order_acquire) != 0;
        if (gone) fail_peer(r, kErrPeerDead);
    }
}

void RankEngine::agent_lost() {
    for (uint32_t r = 0; r < cfg_.world; ++r)
        if (!dead_[r] && !region_.is_member(r)) fail_peer(r, kErrAgentGone);
}

void RankEngine::fail_peer(uint32_t rank, int prov_errno) {
    dead_[rank] = static_cast<uint8_t>(prov_errno);
    if (!peers_lost_) {
        first_loss_ = prov_errno;
        first_lost_rank_ = rank;
    }
    peers_lost_ = true;
    uint64_t failed = 0;
    auto fail_recv = [&](const RecvOp& x) {
        ++failed;
        if (x.context == nullptr) return;
        Completion c{x.context, op_flags(false, x.tagged, false), 0, nullptr, 0, x.tagged ? x.tag : 0, rank};
        c.err = FI_EIO;
        c.prov_errno = prov_errno;
        c.peer = rank;
        push_rx(c);
    };
    // Receives that wait for it, and those for any source: a message they wait for may never come
    // (MPI's ANY_SOURCE after a failure, as ULFM's MPI_ERR_PROC_FAILED_PENDING).
    for (std::list<RecvOp>* l : {&posted_tagged_, &posted_msg_})
        for (auto it = l->begin(); it != l->end();) {
            if (it->src == rank || it->src == kAnyRank) {
                fail_recv(*it);
                it = l->erase(it);
                --recvs_posted_;
            } else {
                ++it;
            }
        }
    Incoming& in = incoming_[rank];
    if (in.kind == Incoming::kPosted) {
        fail_recv(*in.recv);
        active_.erase(in.recv);
    } else if (in.kind == Incoming::kUnexpected) {
        unexpected_.erase(in.unx);  // it will never be whole
    }
    in.kind = Incoming::kNone;
    auto fail_sends = [&](OutPath& p) {
        for (SendOp& op : p.queue) {
            if (op.dst != rank || op.failed) continue;
            op.failed = true;
            ++failed;
            if (op.context == nullptr) continue;  // nobody to tell (fi_inject*, Open MPI's Ssend acknowledgement)
            Completion c{op.context, op_flags(true, op.tagged, false), 0, nullptr, 0, op.tag, rank};
            c.err = FI_EIO;
            c.prov_errno = prov_errno;
            c.peer = rank;
            push_tx(c);
        }
    };
    for (OutPath* p : paths_) fail_sends(*p);
    add(slot_->counters.errors, failed);
}

void RankEngine::push_tx(const Completion& c) {
    if (tx_sink_ != nullptr) tx_sink_->push(c);
}

void RankEngine::push_rx(const Completion& c) {
    if (rx_sink_ != nullptr) rx_sink_->push(c);
}

}  // namespace iccs::mpi
