// convergence.cpp: see convergence.hpp.
#include "convergence.hpp"

#include <rte_ring.h>
#include <sched.h>

#include <algorithm>
#include <cstring>

#include "clock.hpp"
#include "slidwin_hdr.hpp"
#include "stamps.hpp"
#include "udp_hdr.hpp"

namespace iccs {

namespace {

constexpr uint32_t kMaxPieces = 65535;          // piece_cnt is 16 bits
constexpr uint64_t kSpinNs = 20'000;            // spin (yielding) this long before sleeping
// With the assist, longer: a waiting thread that went to sleep leaves its reply to two wake-ups
// (the peer's doorbell to a sleeping proxy thread, then the proxy's to this thread), some 50 us
// here; the peer, waiting for that reply, passes its own spin and sleeps too, and the two sides
// stayed in that slow mode for tens of rounds (a ping-pong's p99 of 50 us against a median of
// 1.8). A spin longer than that slow round lets one slow round end there.
constexpr uint64_t kAssistSpinNs = 200'000;
// ... and while it assists, it yields the core once per this long, not after every pass: the
// yields were ~45% of a waiting thread's time (perf record, bench rtt adaptive); with watching
// our own proxy threads sleep, so a yield serves only other threads on this core. bench rtt
// --polling adaptive, memif, 10 interleaved pairs of binaries: 4.26 -> 3.78 us median (faster in
// 7 of 10); beside 2 busy loops of other sessions 4.24 -> 3.83 (3 of 3); perf/README.md, issue 21.
constexpr uint64_t kAssistYieldGapNs = 50'000;
// A yield that came back at once gave the core to nobody and cost ~0.55 us here (a tight loop of
// sched_yield); in a ping-pong they were the round trip's tail: p99 3.1x the median. So the gap
// doubles after each yield that came back within kYieldRanNobodyNs, up to kAssistYieldGapMaxNs
// of spinning (over the waits that follow: one wait spins 200 us at most); a yield that took
// longer (another thread ran) or a wait that ended asleep (its answer did not come within the
// spin: maybe from a thread of this core) sets it back. bench rtt --polling adaptive, memif, 15
// interleaved rounds: p99 / median 3.1 -> 2.2, median 1.75 -> 1.49 us (perf/README.md, issue 21).
constexpr uint64_t kYieldRanNobodyNs = 5'000;
constexpr uint64_t kAssistYieldGapMaxNs = 1'000'000;
constexpr uint32_t kSleepUs = 200;              // longest sleep; a proxy's delivery wakes us sooner
constexpr uint64_t kCreditAskNs = 2'000'000;    // ask a silent peer for credit this often
// A pass of an inline or assist spin is ~100 ns and a clock read 20-40 ns of it: wait_some reads
// the clock every kInlineClockEvery passes of one wait, gives that time to the proxies' iteration
// and returns it for the caller's deadline (perf/README.md, issue 21).
constexpr uint32_t kInlineClockEvery = 4;

}  // namespace

// ---- SendBuffer

SendBuffer& SendBuffer::operator=(SendBuffer&& o) noexcept {
    if (this != &o) {
        reset();
        pieces_ = std::move(o.pieces_);
        len_ = o.len_;
        psize_ = o.psize_;
        conn_ = o.conn_;
        o.pieces_.clear();
        o.len_ = 0;
    }
    return *this;
}

void SendBuffer::reset() {
    for (PktBuf* p : pieces_) pkt_free(p);
    pieces_.clear();
    len_ = 0;
    conn_ = nullptr;
}

std::span<uint8_t> SendBuffer::segment(uint32_t i) {
    if (i >= pieces_.size()) return {};
    PktBuf* p = pieces_[i];
    return {p->data() + kConvHdrLen, p->data_len - kConvHdrLen};
}

bool SendBuffer::write(uint32_t offset, const void* src, uint32_t n) {
    if (uint64_t{offset} + n > len_) return false;
    const auto* s = static_cast<const uint8_t*>(src);
    while (n > 0) {
        const uint32_t i = offset / psize_, in = offset % psize_;
        std::span<uint8_t> seg = segment(i);
        const uint32_t k = std::min<uint32_t>(n, static_cast<uint32_t>(seg.size()) - in);
        std::memcpy(seg.data() + in, s, k);
        s += k;
        n -= k;
        offset += k;
    }
    return true;
}

// ---- Convergence

ConvError Convergence::fail(ConvError e, std::string msg) {
    err_ = std::move(msg);
    wb_ = WouldBlock::kNone;
    return e;
}

ConvError Convergence::would_block(WouldBlock why, Endpoint remote) {
    wb_ = why;
    wb_remote_ = remote;
    return ConvError::kWouldBlock;
}

const std::string& Convergence::last_error() const {
    switch (wb_) {
        case WouldBlock::kNone: return err_;
        case WouldBlock::kWindowFull: err_ = "the window of " + to_string(wb_remote_) + " is full"; break;
        case WouldBlock::kNoBuffers: err_ = "no message buffers free right now"; break;
        case WouldBlock::kNoMessage: err_ = "no message from " + to_string(wb_remote_) + " yet"; break;
    }
    wb_ = WouldBlock::kNone;
    return err_;
}

uint64_t Convergence::deadline(int64_t timeout_us) {
    if (timeout_us < 0) return UINT64_MAX;
    return now_ns() + static_cast<uint64_t>(timeout_us) * 1000;
}

uint64_t Convergence::spin_clock(uint64_t started_ns) {
    // A clock read was a quarter of the inline spin and 29% of the assist spin (perf/README.md,
    // issue 21): within one wait the passes run back to back, so the first takes the wait's
    // start (read just before) and every kInlineClockEvery-th pass after it reads the clock.
    // A pass that gave the core away (yield, sleep) makes the next one read it (spin_fresh).
    if (started_ns != spin_start_) {
        spin_start_ = spin_now_ = started_ns;
        spin_passes_ = 0;
    } else if (++spin_passes_ % kInlineClockEvery == 0) {
        spin_now_ = now_ns();
    }
    return spin_now_;
}

void Convergence::spin_fresh() { spin_passes_ = kInlineClockEvery - 1; }

uint64_t Convergence::idle(uint64_t started_ns, uint64_t deadline_ns, const std::function<bool()>& other_work) {
    return wait_some(started_ns, deadline_ns, &other_work);
}

uint64_t Convergence::wait_some(uint64_t started_ns, uint64_t deadline_ns, const std::function<bool()>* other_work) {
    if (net_.poll_inline) {  // inline polling: this thread runs the stack
        const uint64_t now = spin_clock(started_ns);
        net_.poll_inline(now);
        return now;
    }
    // Adaptive: the assist spin's passes run back to back too (a yield every kAssistYieldGapNs);
    // without the assist each pass yields, so each reads the clock.
    const uint64_t now = net_.poll_assist ? spin_clock(started_ns) : now_ns();
    if (now - started_ns < (net_.poll_assist ? kAssistSpinNs : kSpinNs)) {
        if (net_.poll_assist) {  // adaptive: poll the proxies ourselves while we spin
            if (!watching_) set_watching(true);
            if (net_.poll_assist(-1, now) > 0) return now;  // this thread ran a proxy: look again
            if (now - last_yield_ns_ < yield_gap_ns_) return now;  // poll again at once
            sched_yield();  // another thread of this core runs now
            const uint64_t after = now_ns();
            yield_gap_ns_ = after - now < kYieldRanNobodyNs ? std::min(yield_gap_ns_ * 2, kAssistYieldGapMaxNs)
                                                            : kAssistYieldGapNs;
            last_yield_ns_ = spin_now_ = after;
            return after;
        }
        sched_yield();  // a proxy woken on this core runs now
        return now;
    }
    spin_fresh();  // what follows may sleep
    yield_gap_ns_ = kAssistYieldGapNs;
    if (watching_) {  // about to sleep: the proxy threads take over
        set_watching(false, true);
        if (rte_ring_count(net_.rings->to_thread(thread_)) != 0) return now;
    }
    Waker& w = net_.rings->thread_waker(thread_);
    w.prepare_sleep();
    if (rte_ring_count(net_.rings->to_thread(thread_)) != 0 || (other_work != nullptr && (*other_work)())) {
        w.cancel_sleep();
        return now;
    }
    uint64_t us = kSleepUs;
    if (deadline_ns != UINT64_MAX) us = deadline_ns > now ? std::min<uint64_t>(us, (deadline_ns - now) / 1000 + 1) : 1;
    w.sleep(static_cast<uint32_t>(us));
    return now;  // before the sleep: the next pass reads the clock (spin_fresh)
}

void Convergence::set_watching(bool on, bool to_sleep) {
    watching_ = on;
    ClusterRings& r = *net_.rings;
    for (uint32_t p = 0; p < r.proxies(); ++p) {
        Waker& w = r.proxy_waker(p);
        if (on)
            w.watch_enter();
        else if (w.watch_leave())  // the last watcher of a sleeping proxy: a skipped ring's frame
            net_.poll_leaving(p, to_sleep);
    }
}

void Convergence::progress() {
    void* in[64];
    for (int round = 0; round < 4; ++round) {
        const unsigned n = rte_ring_sc_dequeue_burst(net_.rings->to_thread(thread_), in, 64, nullptr);
        for (unsigned i = 0; i < n; ++i) take(static_cast<PktBuf*>(in[i]));
        if (n < 64) break;
    }
}

void Convergence::take(PktBuf* m) {
    // The proxy delivered it by dst_port and checked that the header is in the first segment.
    const ConvHdr h = load_hdr<ConvHdr>(m->data());
    const auto type = static_cast<ConvType>(h.type);
    if (type == ConvType::kConnect) {
        on_connect(m, h);
        return;
    }
    const auto it = conns_.find(key(h.dst_port.get(), h.src_cluster.get(), h.src_port.get()));
    if (it == conns_.end() || it->second->conn_id_ != h.conn_id.get()) {
        ++ctr_.stale;
        pkt_free(m);
        return;
    }
    Connection& c = *it->second;
    const uint8_t* body = m->data() + kConvHdrLen;
    const uint32_t body_len = m->data_len - kConvHdrLen;
    switch (type) {
        case ConvType::kData:
            stamps::stamp(stamps::kConvTake);
            c.rx_.on_piece(m, h);
            return;
        case ConvType::kAccept:
            if (c.state_ == Connection::State::kConnecting && body_len >= sizeof(ConvConnectBody)) {
                const auto b = load_hdr<ConvConnectBody>(body);
                c.peer_window_bytes_ = b.window_bytes.get();
                c.peer_window_msgs_ = b.window_msgs.get();
                c.state_ = Connection::State::kOpen;
            }
            break;
        case ConvType::kRefuse:
            if (c.state_ == Connection::State::kConnecting) {
                c.state_ = Connection::State::kRefused;
                c.refuse_reason_ = body_len >= 4 ? load_be32(body) : 0;
            }
            break;
        case ConvType::kClose:
        case ConvType::kCredit:
            if (body_len >= sizeof(ConvCreditBody)) {
                const auto b = load_hdr<ConvCreditBody>(body);
                c.peer_bytes_taken_ = std::max(c.peer_bytes_taken_, b.bytes_consumed.get());
                if (static_cast<int32_t>(b.msgs_consumed.get() - c.peer_credit_msgs_) > 0)
                    c.peer_credit_msgs_ = b.msgs_consumed.get();
            }
            if (type == ConvType::kClose) {
                c.peer_closed_ = true;
                c.peer_total_msgs_ = h.msg_len.get();
            } else if (h.flags & kCreditWanted) {
                maybe_credit(c, true);
            }
            break;
        default:
            ++ctr_.stale;
            break;
    }
    pkt_free(m);
}

uint16_t Convergence::pick_proxy(Connection& c) {
    const ClusterRings& r = *net_.rings;
    return dispatch_pick(ds_, c.dispatch_, [&](uint16_t p) {
        return rte_ring_count(r.to_proxy(thread_, p)) + r.proxy_load(p);
    });
}

void Convergence::enqueue(Connection& c, PktBuf* m) {
    const uint16_t p = pick_proxy(c);
    ++ctr_.to_proxy[p % ConvCounters::kProxiesCounted];
    rte_ring* ring = net_.rings->to_proxy(thread_, p);
    // enq_ns: the message time (DESIGN.md §6) starts when the message enters the ICCS.
    const uint64_t enq_ns = now_ns();
    const be64 t = be64::of(enq_ns);
    std::memcpy(m->data() + offsetof(ConvHdr, enq_ns), &t, sizeof t);
    if (rte_ring_sp_enqueue(ring, m) != 0) {
        ++ctr_.ring_full_waits;
        const uint64_t start = now_ns();
        const Unwatch unwatch{*this};  // the wait loop below ends watching (assist)
        do {
            net_.rings->proxy_waker(p).wake();
            progress();
            wait_some(start, UINT64_MAX);
        } while (rte_ring_sp_enqueue(ring, m) != 0);
    }
    Waker& w = net_.rings->proxy_waker(p);
    // A sleeping proxy thread: send it ourselves rather than pay for its wake-up (the assist);
    // wake it only when that did not take the message (another thread polls, or a full burst).
    if (net_.poll_assist && w.sleeping() && net_.poll_assist(p, enq_ns) > 0 && rte_ring_count(ring) == 0) return;
    w.wake();
}

ConvHdr Convergence::header(const Connection& c, ConvType type) const {
    ConvHdr h{};
    h.src_cluster = be16::of(net_.cluster);
    h.dst_cluster = be16::of(c.remote_.cluster);
    h.src_port = be16::of(c.local_.port);
    h.dst_port = be16::of(c.remote_.port);
    h.type = static_cast<uint8_t>(type);
    h.flags = c.ordered_ ? kConvOrdered : 0;
    h.conn_id = be32::of(c.conn_id_);
    h.piece_cnt = be16::of(1);
    return h;
}

void Convergence::send_control(Connection& c, ConvType type, const void* body, uint32_t body_len, uint32_t msg_len) {
    PktBuf* m = nullptr;
    const uint64_t start = now_ns();
    const Unwatch unwatch{*this};  // the wait loop below ends watching (assist)
    while ((m = pkt_alloc(*net_.pool)) == nullptr) {  // control is small and rare: wait for a buffer
        ++ctr_.pool_empty_waits;
        if (net_.rings->cluster_down(c.remote_.cluster)) return;
        progress();
        wait_some(start, UINT64_MAX);
    }
    ConvHdr h = header(c, type);
    h.msg_id = be32::of(next_msg_id_++);
    h.msg_len = be32::of(msg_len);
    store_hdr(pkt_append(m, kConvHdrLen), h);
    if (body_len > 0) std::memcpy(pkt_append(m, body_len), body, body_len);
    enqueue(c, m);
}

void Convergence::maybe_credit(Connection& c, bool force) {
    const uint64_t bytes = c.rx_.bytes_taken();
    const uint32_t msgs = c.rx_.credit_msgs();
    if (bytes == c.credited_bytes_ && msgs == c.credited_msgs_ && !force) return;
    if (!force && bytes - c.credited_bytes_ < c.my_window_bytes_ / 4 && msgs - c.credited_msgs_ < c.my_window_msgs_ / 4)
        return;
    ConvCreditBody b{be64::of(bytes), be32::of(msgs)};
    c.credited_bytes_ = bytes;
    c.credited_msgs_ = msgs;
    ++ctr_.credits_sent;
    send_control(c, ConvType::kCredit, &b, sizeof b);
}

void Convergence::ask_credit(Connection& c) {
    const uint64_t now = now_ns();
    if (now - c.credit_asked_ns_ < kCreditAskNs) return;
    c.credit_asked_ns_ = now;
    // Our own credit rides along (the peer may be waiting for it too).
    ConvCreditBody b{be64::of(c.rx_.bytes_taken()), be32::of(c.rx_.credit_msgs())};
    c.credited_bytes_ = c.rx_.bytes_taken();
    c.credited_msgs_ = c.rx_.credit_msgs();
    PktBuf* m = pkt_alloc(*net_.pool);
    if (m == nullptr) return;  // asked again later
    ConvHdr h = header(c, ConvType::kCredit);
    h.flags |= kCreditWanted;
    h.msg_id = be32::of(next_msg_id_++);
    store_hdr(pkt_append(m, kConvHdrLen), h);
    std::memcpy(pkt_append(m, sizeof b), &b, sizeof b);
    ++ctr_.credits_sent;
    enqueue(c, m);
}

bool Convergence::window_open(const Connection& c, uint32_t len) const {
    if (c.next_seq_ - c.peer_credit_msgs_ >= c.peer_window_msgs_) return false;
    const uint64_t outstanding = c.bytes_sent_ - c.peer_bytes_taken_;
    return outstanding == 0 || outstanding + len <= c.peer_window_bytes_;
}

ConvError Convergence::check_open(Connection* c, bool for_send) {
    if (c == nullptr) return fail(ConvError::kBadArgument, "no connection (nullptr)");
    if (c->state_ == Connection::State::kClosed)
        return fail(ConvError::kClosed, "the connection to " + to_string(c->remote_) + " is closed");
    if (for_send && c->peer_closed_)
        return fail(ConvError::kClosed, to_string(c->remote_) + " closed the connection: it takes no more messages");
    if (net_.rings->cluster_down(c->remote_.cluster))
        return fail(ConvError::kPeerDown, "cluster " + std::to_string(c->remote_.cluster) +
                                              " stopped answering (its proxies reported it down)");
    return ConvError::kOk;
}

ConvError Convergence::wait_window(Connection* c, uint32_t len, int64_t timeout_us) {
    if (window_open(*c, len)) return ConvError::kOk;
    ++ctr_.window_waits;
    if (timeout_us == 0) {
        // A look without a wait (an MPI bridge's every step, an in-rank rank's queued send at
        // every progress call): the loop's first pass without its clock reads (3 a look were 2.5%
        // of an in-rank 1 MiB stream's samples; ask_credit reads one, when it may ask).
        progress();
        if (window_open(*c, len)) return ConvError::kOk;
        if (const ConvError e = check_open(c, true); e != ConvError::kOk) return e;
        ask_credit(*c);
        return would_block(WouldBlock::kWindowFull, c->remote_);
    }
    const uint64_t start = now_ns(), dl = deadline(timeout_us);
    const Unwatch unwatch{*this};  // the wait loop below ends watching (assist)
    while (true) {
        progress();
        if (window_open(*c, len)) return ConvError::kOk;
        if (const ConvError e = check_open(c, true); e != ConvError::kOk) return e;
        ask_credit(*c);
        const uint64_t now = now_ns();
        if (now >= dl)  // (a look with time-out 0 returned above)
            return fail(ConvError::kTimeout,
                        "the window of " + to_string(c->remote_) + " stayed full (the receiver does not take)");
        wait_some(start, dl);
    }
}

ConvError Convergence::count_pieces(uint32_t len, uint32_t piece_max, uint32_t& cnt) {
    cnt = piece_count(len, piece_max);
    if (cnt <= kMaxPieces) return ConvError::kOk;
    return fail(ConvError::kNoMemory, "a message of " + std::to_string(len) + " bytes needs " + std::to_string(cnt) +
                                          " pieces; at most " + std::to_string(kMaxPieces) +
                                          " (raise the stripe threshold)");
}

uint32_t Convergence::contiguous_send_max() const {
    const uint32_t seg_room = net_.pool->seg_size() - kPktHeadroom - kConvHdrLen;
    return std::min(threshold_, seg_room);
}

ConvError Convergence::alloc_pieces(Connection* c, uint32_t len, SendBuffer& out, uint64_t deadline_ns) {
    // Copying sends cut at the threshold (a piece may chain segments); zero-copy pieces must be
    // contiguous, so they also fit one segment. Both ends derive offsets from (len, count) alone.
    const uint32_t pmax = contiguous_send_max();
    uint32_t cnt = 0;
    if (const ConvError e = count_pieces(len, pmax, cnt); e != ConvError::kOk) return e;
    const uint32_t psize = piece_size(len, cnt);
    out.reset();
    out.pieces_.reserve(cnt);
    out.len_ = len;
    out.psize_ = std::max<uint32_t>(psize, 1);
    out.conn_ = c;
    const uint64_t start = now_ns();
    const Unwatch unwatch{*this};  // the wait loop below ends watching (assist)
    for (uint32_t i = 0; i < cnt; ++i) {
        PktBuf* p;
        while ((p = pkt_alloc(*net_.pool)) == nullptr) {
            ++ctr_.pool_empty_waits;
            progress();
            if (now_ns() >= deadline_ns || net_.rings->cluster_down(c->remote_.cluster)) {
                out.reset();
                return deadline_ns == 0 ? would_block(WouldBlock::kNoBuffers)
                                        : fail(ConvError::kNoMemory, "no message buffers came free in time (" +
                                                                         std::to_string(cnt) + " needed)");
            }
            wait_some(start, deadline_ns);
        }
        pkt_append(p, kConvHdrLen);
        const uint32_t plen = i + 1 == cnt ? len - i * psize : psize;
        pkt_append(p, plen);
        out.pieces_.push_back(p);
    }
    return ConvError::kOk;
}

ConvError Convergence::check_size(Connection* c, uint32_t len) {
    if (c->state_ == Connection::State::kOpen && len > c->peer_window_bytes_)
        return fail(ConvError::kNoMemory, "a message of " + std::to_string(len) + " bytes is larger than the window of " +
                                              to_string(c->remote_) + " (" + std::to_string(c->peer_window_bytes_) +
                                              " bytes, [convergence] window_bytes there)");
    return ConvError::kOk;
}

ConvError Convergence::alloc_send_buffer(Connection* c, uint32_t len, SendBuffer& out, int64_t timeout_us) {
    if (const ConvError e = check_open(c, true); e != ConvError::kOk) return e;
    if (const ConvError e = check_size(c, len); e != ConvError::kOk) return e;
    return alloc_pieces(c, len, out, timeout_us == 0 ? 0 : deadline(timeout_us));
}

ConvError Convergence::send_buffer(Connection* c, SendBuffer& buf, int64_t timeout_us) {
    if (buf.conn_ != c || buf.pieces_.empty())
        return fail(ConvError::kBadArgument, "the send buffer was not allocated for this connection");
    if (const ConvError e = check_open(c, true); e != ConvError::kOk) return e;
    if (c->state_ != Connection::State::kOpen)
        return fail(ConvError::kBadArgument, "the connection to " + to_string(c->remote_) + " is not open");
    if (const ConvError e = wait_window(c, buf.len_, timeout_us); e != ConvError::kOk) return e;
    const uint32_t cnt = static_cast<uint32_t>(buf.pieces_.size());
    ConvHdr h = header(*c, ConvType::kData);
    h.conn_seq = be32::of(c->next_seq_++);
    h.msg_id = be32::of(next_msg_id_++);
    h.piece_cnt = be16::of(static_cast<uint16_t>(cnt));
    h.msg_len = be32::of(buf.len_);
    for (uint32_t i = 0; i < cnt; ++i) {
        h.piece_idx = be16::of(static_cast<uint16_t>(i));
        store_hdr(buf.pieces_[i]->data(), h);
        enqueue(*c, buf.pieces_[i]);
    }
    c->bytes_sent_ += buf.len_;
    ++ctr_.msgs_sent;
    ctr_.bytes_sent += buf.len_;
    ctr_.pieces_sent += cnt;
    buf.pieces_.clear();
    buf.reset();
    return ConvError::kOk;
}

ConvError Convergence::send(Connection* c, const void* data, uint32_t len, int64_t timeout_us) {
    if (len > 0 && data == nullptr) return fail(ConvError::kBadArgument, "send of " + std::to_string(len) +
                                                                             " bytes from nullptr");
    const iovec whole{const_cast<void*>(data), len};
    return sendv(c, {&whole, 1}, timeout_us);
}

ConvError Convergence::sendv(Connection* c, std::span<const iovec> parts, int64_t timeout_us) {
    stamps::stamp(stamps::kConvSend);
    if (const ConvError e = check_open(c, true); e != ConvError::kOk) return e;
    if (c->state_ != Connection::State::kOpen)
        return fail(ConvError::kBadArgument, "the connection to " + to_string(c->remote_) + " is not open");
    uint64_t total = 0;
    for (const iovec& v : parts) {
        if (v.iov_len > 0 && v.iov_base == nullptr)
            return fail(ConvError::kBadArgument, "send of " + std::to_string(v.iov_len) + " bytes from nullptr");
        total += v.iov_len;
    }
    if (total > UINT32_MAX) return fail(ConvError::kNoMemory, "a message of " + std::to_string(total) + " bytes");
    const auto len = static_cast<uint32_t>(total);
    if (const ConvError e = check_size(c, len); e != ConvError::kOk) return e;
    uint32_t cnt = 0;
    if (const ConvError e = count_pieces(len, threshold_, cnt); e != ConvError::kOk) return e;
    const uint64_t dl = timeout_us == 0 ? 0 : deadline(timeout_us);  // 0: now (no clock read for a look)
    if (const ConvError e = wait_window(c, len, timeout_us); e != ConvError::kOk) return e;
    const uint32_t psize = piece_size(len, cnt);
    // All pieces first (a message goes whole or not at all), then to the proxies.
    PktBuf* small[8];
    std::vector<PktBuf*> big;
    PktBuf** pieces = small;
    if (cnt > 8) {
        big.resize(cnt);
        pieces = big.data();
    }
    ConvHdr h = header(*c, ConvType::kData);
    h.conn_seq = be32::of(c->next_seq_);
    h.msg_id = be32::of(next_msg_id_);
    h.piece_cnt = be16::of(static_cast<uint16_t>(cnt));
    h.msg_len = be32::of(len);
    // The parts' cursor: piece i's bytes follow piece i-1's (a piece that failed is written again
    // from where it began).
    size_t part = 0;
    uint32_t part_off = 0;
    const PktSum sums = net_.payload_sums ? PktSum::kKeep : PktSum::kNone;
    uint64_t start = 0;  // read only if the pool runs empty
    const Unwatch unwatch{*this};  // the wait loop below ends watching (assist)
    for (uint32_t i = 0; i < cnt; ++i) {
        const uint32_t off = i * psize, plen = i + 1 == cnt ? len - off : psize;
        PktBuf* p = pkt_alloc(*net_.pool);
        const size_t piece_part = part;
        const uint32_t piece_part_off = part_off;
        if (p != nullptr) {
            h.piece_idx = be16::of(static_cast<uint16_t>(i));
            store_hdr(pkt_append(p, kConvHdrLen), h);
            PktPool& chain_from = payload_pool_ ? static_cast<PktPool&>(*payload_pool_) : *net_.pool;
            for (uint32_t left = plen; left > 0 && p != nullptr;) {
                const iovec& v = parts[part];
                const uint32_t k = std::min<uint32_t>(left, static_cast<uint32_t>(v.iov_len - part_off));
                if (k > 0 && !pkt_write(p, chain_from, static_cast<const uint8_t*>(v.iov_base) + part_off, k, sums)) {
                    pkt_free(p);
                    p = nullptr;
                    break;
                }
                left -= k;
                part_off += k;
                if (part_off == v.iov_len) {
                    ++part;
                    part_off = 0;
                }
            }
        }
        if (p == nullptr) {  // pool empty: the proxies free buffers as acks arrive
            ++ctr_.pool_empty_waits;
            if (start == 0) start = now_ns();
            progress();
            if (now_ns() >= dl || net_.rings->cluster_down(c->remote_.cluster)) {
                for (uint32_t k = 0; k < i; ++k) pkt_free(pieces[k]);
                if (net_.rings->cluster_down(c->remote_.cluster)) return check_open(c, true);
                return timeout_us == 0 ? would_block(WouldBlock::kNoBuffers)
                                       : fail(ConvError::kTimeout, "no message buffers came free in time");
            }
            wait_some(start, dl);
            part = piece_part;
            part_off = piece_part_off;
            --i;
            continue;
        }
        pieces[i] = p;
    }
    ++c->next_seq_;
    ++next_msg_id_;
    stamps::stamp(stamps::kRingEnq);
    for (uint32_t i = 0; i < cnt; ++i) enqueue(*c, pieces[i]);
    c->bytes_sent_ += len;
    ++ctr_.msgs_sent;
    ctr_.bytes_sent += len;
    ctr_.pieces_sent += cnt;
    return ConvError::kOk;
}

ConvError Convergence::recv_msg(Connection* c, RecvMsg& out, int64_t timeout_us) {
    if (c == nullptr) return fail(ConvError::kBadArgument, "no connection (nullptr)");
    if (c->state_ == Connection::State::kClosed)
        return fail(ConvError::kClosed, "the connection to " + to_string(c->remote_) + " is closed");
    // One clock read per call; the deadline is looked at with the wait's own clock (wait_some:
    // under inline polling and the assist, read every few passes; a read per pass here was a
    // third of the assist spin's clock reads: perf/README.md, issue 21).
    // A look without a wait (timeout 0: an MPI bridge's every step) reads none.
    const uint64_t start = timeout_us == 0 ? 0 : now_ns();
    const uint64_t dl = timeout_us < 0 ? UINT64_MAX : start + static_cast<uint64_t>(timeout_us) * 1000;
    uint64_t now = start;
    const Unwatch unwatch{*this};  // the wait loop below ends watching (assist)
    while (true) {
        progress();
        if (c->rx_.pop(out)) {
            ++ctr_.msgs_received;
            ctr_.bytes_received += out.size();
            maybe_credit(*c, false);
            return ConvError::kOk;
        }
        if (c->peer_closed_ && c->rx_.msgs_taken() >= c->peer_total_msgs_)
            return fail(ConvError::kEndOfStream, to_string(c->remote_) + " closed the connection");
        if (const ConvError e = check_open(c, false); e != ConvError::kOk) return e;
        if (c->state_ == Connection::State::kRefused)
            return fail(ConvError::kRefused, to_string(c->remote_) + " refused the connection");
        if (timeout_us == 0 || now >= dl)
            return timeout_us == 0 ? would_block(WouldBlock::kNoMessage, c->remote_)
                                   : fail(ConvError::kTimeout, "no message from " + to_string(c->remote_) + " within " +
                                                                   std::to_string(timeout_us) + " us");
        now = wait_some(start, dl);
    }
}

ConvError Convergence::recv(Connection* c, void* buf, uint32_t cap, uint32_t& len, int64_t timeout_us) {
    RecvMsg m;
    const ConvError e = recv_msg(c, m, timeout_us);
    if (e != ConvError::kOk) return e;
    len = m.size();
    m.copy_to(buf, cap);
    stamps::stamp(stamps::kDelivered);
    return ConvError::kOk;
}

int Convergence::poll(std::span<PollItem> items, int64_t timeout_us) {
    const uint64_t start = now_ns(), dl = deadline(timeout_us);
    const Unwatch unwatch{*this};  // the wait loop below ends watching (assist)
    while (true) {
        progress();
        int ready = 0;
        for (PollItem& it : items) {
            it.revents = 0;
            if (it.conn == nullptr) {
                for (const Listener& l : listeners_)
                    if (l.port == it.listen_port && !l.ready.empty()) it.revents |= PollItem::kAcceptable;
            } else {
                Connection& c = *it.conn;
                const bool down = net_.rings->cluster_down(c.remote_.cluster);
                const bool failed = down || c.state_ == Connection::State::kRefused;
                const bool eos = c.peer_closed_ && c.rx_.msgs_taken() >= c.peer_total_msgs_;
                if (c.rx_.readable() || eos || failed || c.state_ == Connection::State::kClosed)
                    it.revents |= PollItem::kReadable;
                if (failed) it.revents |= PollItem::kError;
                if (c.state_ == Connection::State::kOpen && !c.peer_closed_ && !down &&
                    window_open(c, std::min<uint32_t>(threshold_, c.peer_window_bytes_)))
                    it.revents |= PollItem::kWritable;
                else if ((it.events & PollItem::kWritable) && c.state_ == Connection::State::kOpen)
                    ask_credit(c);
            }
            it.revents &= it.events | PollItem::kError;
            ready += it.revents != 0;
        }
        if (ready > 0 || now_ns() >= dl) return ready;
        wait_some(start, dl);
    }
}

}  // namespace iccs
