// uring_tx.cpp: the io_uring UDP port's send side (uring_udp.hpp): datagrams queued by the stack,
// gathered (GSO runs to one peer), sent by batched or zero-copy sendmsg, or by sendmmsg on the
// direct path; their completions.
#include "uring_udp_impl.hpp"

#include <arpa/inet.h>
#include <netinet/udp.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace iccs {

using namespace uring_detail;

namespace {

uint32_t pages_of(const PktBuf* p) {
    uint32_t n = 0;
    for (const PktBuf* seg = p; seg != nullptr; seg = seg->next)
        if (seg->data_len > 0) {
            const auto a = reinterpret_cast<uintptr_t>(seg->data());
            n += static_cast<uint32_t>(((a + seg->data_len - 1) >> 12) - (a >> 12) + 1);
        }
    return n;
}

}  // namespace

bool UringUdpPort::udp_output(PktBuf* p, uint16_t /*src_port*/, Ipv4Addr dst, uint16_t dst_port) {
    if (p->pkt_len > kUdpMaxPayload || p->nb_segs > kMaxIov) {
        ++ctr_.tx_drop_too_big;
        pkt_free(p);
        return false;
    }
    if (txq_count_ == cfg_.tx_queue_limit) {
        ++ctr_.tx_drop_queue_full;
        pkt_free(p);
        return false;
    }
    txq_[(txq_head_ + txq_count_) & (txq_.size() - 1)] = TxPending{p, dst, dst_port};
    ++txq_count_;
    return true;
}

uint32_t UringUdpPort::gather_send(uint32_t from, msghdr& m, sockaddr_in& dst, iovec* iov, uint8_t* ctrl,
                                   bool& zc, PktBuf** pkts) {
    const uint32_t qmask = static_cast<uint32_t>(txq_.size() - 1);
    const uint32_t left = txq_count_ - from;
    const TxPending& d = txq_[(txq_head_ + from) & qmask];
    uint32_t k = 0, n = 0, bytes = 0;
    // The head datagram, then (GSO) those behind it to the same peer of the same length; a
    // shorter one ends the send, as the kernel wants (every segment full but the last).
    const uint32_t size = d.p->pkt_len;
    const bool gso = gso_ && size > 0 && size <= kMaxGsoSize;
    uint32_t pages = zc ? pages_of(d.p) : 0;
    zc = zc && pages <= kZcMaxPages;
    for (;;) {
        const TxPending& e = txq_[(txq_head_ + from + n) & qmask];
        for (PktBuf* seg = e.p; seg != nullptr; seg = seg->next)
            if (seg->data_len > 0) iov[k++] = iovec{seg->data(), seg->data_len};
        if (pkts != nullptr) pkts[n] = e.p;
        ++n;
        bytes += e.p->pkt_len;
        if (!gso || e.p->pkt_len < size || n == left || n == kMaxGsoSegs) break;
        const TxPending& f = txq_[(txq_head_ + from + n) & qmask];
        if (f.dst.v != d.dst.v || f.dst_port != d.dst_port || f.p->pkt_len > size || f.p->pkt_len == 0 ||
            k + f.p->nb_segs > kMaxIov || bytes + f.p->pkt_len > kMaxGsoBytes)
            break;
        if (zc) {
            pages += pages_of(f.p);
            if (pages > kZcMaxPages) break;
        }
    }
    dst = sockaddr_in{};
    dst.sin_family = AF_INET;
    dst.sin_addr.s_addr = htonl(d.dst.v);
    dst.sin_port = htons(d.dst_port);
    m = msghdr{};
    m.msg_name = &dst;
    m.msg_namelen = sizeof dst;
    m.msg_iov = iov;
    m.msg_iovlen = k;
    if (n > 1) {
        m.msg_control = ctrl;
        m.msg_controllen = CMSG_SPACE(sizeof(uint16_t));
        cmsghdr* cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_UDP;
        cm->cmsg_type = UDP_SEGMENT;
        cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        const auto g = static_cast<uint16_t>(size);
        std::memcpy(CMSG_DATA(cm), &g, sizeof g);
    }
    return n;
}

uint32_t UringUdpPort::prep_send() {
    if (tx_free_ == UINT32_MAX || io_uring_sq_space_left(&ring_) == 0) return 0;
    const uint32_t i = tx_free_;
    TxSlot& s = tx_slots_[i];
    tx_free_ = s.next_free;
    bool zc = zc_;
    const uint32_t n = gather_send(0, s.msg, s.dst, &tx_iov_[size_t{i} * kMaxIov], s.ctrl, zc,
                                   &tx_pkts_[size_t{i} * kMaxGsoSegs]);
    s.n = n;
    s.notif = false;
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (zc) {
        io_uring_prep_sendmsg_zc(sqe, fd_, &s.msg, 0);
        sqe->ioprio |= kZcReportUsage;
    } else {
        io_uring_prep_sendmsg(sqe, fd_, &s.msg, 0);
    }
    set_fd(sqe);
    io_uring_sqe_set_data64(sqe, kTagTx | i);
    ++tx_inflight_;
    return n;
}

void UringUdpPort::direct_send() {
    // One sendmmsg of at most kDirectMsgs sends per flush, a burst as the ring's flush is one
    // (bounded by its slots): the thread that runs it holds the proxy's poller flag, and a
    // backlog of thousands of datagrams sent in one go kept the proxy from its own thread for
    // seconds when that compute thread lost its core (perf/README.md). What is left waits for
    // the next iteration, or the owner (owner_needed()).
    const uint32_t qmask = static_cast<uint32_t>(txq_.size() - 1);
    uint32_t m = 0, pos = 0;
    while (m < kDirectMsgs && pos < txq_count_) {
        DirectTx& t = dt_[m];
        bool zc = false;
        t.n = gather_send(pos, dt_msgs_[m].msg_hdr, t.dst, &dt_iov_[size_t{m} * kMaxIov], t.ctrl, zc, nullptr);
        pos += t.n;
        ++m;
    }
    const int r = sendmmsg(fd_, dt_msgs_.get(), m, MSG_DONTWAIT);
    ++ctr_.tx_direct_calls;
    auto release = [&](uint32_t n) {
        for (uint32_t j = 0; j < n; ++j) pkt_free(txq_[(txq_head_ + j) & qmask].p);
        txq_head_ = (txq_head_ + n) & qmask;
        txq_count_ -= n;
    };
    if (r < 0) {
        const int e = errno;
        if (e == EAGAIN || e == EWOULDBLOCK || e == ENOBUFS || e == EINTR) {
            ++ctr_.tx_direct_again;  // the owner's ring sends them (it waits for room)
            return;
        }
        // The head message failed: its datagrams are lost (slidwin resends), as a failed
        // sendmsg completion's are; a GSO send refused turns GSO off (complete_tx).
        const uint32_t n = dt_[0].n;
        ctr_.tx_errors += n;
        if (n > 1 && (e == EIO || e == EINVAL)) {
            ++ctr_.tx_gso_refused;
            gso_ = false;
        }
        release(n);
        return;
    }
    // r messages went (a message short of the batch failed: the next call starts with it).
    for (uint32_t i = 0; i < static_cast<uint32_t>(r) && i < m; ++i) {
        const uint32_t n = dt_[i].n;
        ctr_.tx_datagrams += n;
        ctr_.tx_direct_datagrams += n;
        ctr_.tx_bytes += dt_msgs_[i].msg_len;
        if (n > 1) {
            ++ctr_.tx_gso_sends;
            ctr_.tx_gso_datagrams += n;
        }
        release(n);
    }
}

uint32_t UringUdpPort::flush() {
    if (owner_ == nullptr && cfg_.single_issuer) [[unlikely]]
        claim_st();
    if (direct_st()) {  // not the ring's owner: no ring call (see the file comment)
        if (txq_count_ > 0) direct_send();
        // what is still queued is work: the caller polls again (or wakes the owner)
        return io_uring_cq_ready(&ring_) + (rx_local_pending() ? 1 : 0) + (txq_count_ > 0 ? 1 : 0);
    }
    if (waited_) {  // the last wait(), run while others may have polled
        waited_ = false;
        ++ctr_.submits;
        ++ctr_.waits;
        if (wait_result_ > 0) ctr_.sqes += static_cast<uint64_t>(wait_result_);
    }
    ++ctr_.flushes;
    const uint32_t qmask = static_cast<uint32_t>(txq_.size() - 1);
    while (txq_count_ > 0) {
        const uint32_t n = prep_send();
        if (n == 0) break;
        txq_head_ = (txq_head_ + n) & qmask;
        txq_count_ -= n;
    }
    if (txq_count_ > 0) ++ctr_.tx_waits;
    // Completion work the kernel deferred to us (cooperative task running), or CQEs it could
    // not post (overflow): the one system call of this iteration runs it.
    if (coop_ && (IO_URING_READ_ONCE(*ring_.sq.kflags) & IORING_SQ_TASKRUN)) want_events_ = true;
    // Deferred task running: completions are posted only inside our own calls, and the kernel
    // runs at most a batch of its deferred work per call (20 items on 6.13+), clearing the
    // TASKRUN flag even when some is left: so every flush enters to collect them. Waiting for
    // the flag instead, one run of clusters-3x2-udp in six stalled (the likely cause).
    if (defer_) want_events_ = true;
    if (io_uring_cq_has_overflow(&ring_)) want_events_ = true;
    if (io_uring_sq_ready(&ring_) > 0) {
        submit(want_events_);
    } else if (want_events_) {
        if (!enabled_) [[unlikely]]
            enable_st();
        io_uring_get_events(&ring_);
        ++ctr_.submits;
    } else {
        return rx_local_pending() ? 1 : 0;  // datagrams of a GRO buffer wait for the next rx_burst
    }
    want_events_ = false;
    return io_uring_cq_ready(&ring_) + (rx_local_pending() ? 1 : 0);
}

void UringUdpPort::complete_tx(const io_uring_cqe* cqe) {
    const uint32_t i = static_cast<uint32_t>(cqe->user_data);
    TxSlot& s = tx_slots_[i];
    if (cqe->flags & IORING_CQE_F_NOTIF) {  // zero copy: the kernel is done with the buffers
        if (static_cast<uint32_t>(cqe->res) & kNotifZcCopied) ++ctr_.tx_zc_copied;
        release_tx(i);
        return;
    }
    if (cqe->res < 0) {
        ctr_.tx_errors += s.n;
        // A zero-copy send the kernel will not take (6.1 has no usage report): plain sends from now on.
        if (zc_ && cqe->res == -EINVAL && !(cqe->flags & IORING_CQE_F_MORE)) zc_ = false;
        // A GSO send the kernel will not take (a device without checksum offload: EIO; a path
        // whose MTU is below the segment: EINVAL): GSO off for good; slidwin resends these.
        if (s.n > 1 && (cqe->res == -EIO || cqe->res == -EINVAL)) {
            ++ctr_.tx_gso_refused;
            gso_ = false;
        }
    } else {
        ctr_.tx_datagrams += s.n;
        ctr_.tx_bytes += static_cast<uint64_t>(cqe->res);
        if (s.n > 1) {
            ++ctr_.tx_gso_sends;
            ctr_.tx_gso_datagrams += s.n;
        }
    }
    if (cqe->flags & IORING_CQE_F_MORE) {  // zero copy: the buffers wait for the notification
        ++ctr_.tx_zc_sends;
        s.notif = true;
        return;
    }
    release_tx(i);
}

void UringUdpPort::release_tx(uint32_t i) {
    TxSlot& s = tx_slots_[i];
    PktBuf** pkts = &tx_pkts_[size_t{i} * kMaxGsoSegs];
    for (uint32_t j = 0; j < s.n; ++j) pkt_free(pkts[j]);
    s.n = 0;
    s.next_free = tx_free_;
    tx_free_ = i;
    --tx_inflight_;
}

}  // namespace iccs
