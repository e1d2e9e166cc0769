// uring_rx.cpp: the io_uring UDP port's receive side (uring_udp.hpp): multishot recvmsg into
// provided buffers or batched recvmsg, GRO runs split, recvmmsg on the direct path, datagrams
// copied into the stack's buffers and handed to the bound handlers.
#include "uring_udp_impl.hpp"

#include <arpa/inet.h>
#include <linux/sock_diag.h>
#include <netinet/udp.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace iccs {

using namespace uring_detail;

namespace {

// The datagram length a UDP_GRO control message gives (0: not one): a receive buffer holds
// datagrams of that length, the last maybe shorter.
uint32_t gro_seg(const cmsghdr* cm) {
    if (cm->cmsg_level != SOL_UDP || cm->cmsg_type != UDP_GRO || cm->cmsg_len < CMSG_LEN(sizeof(int))) return 0;
    int g;
    std::memcpy(&g, CMSG_DATA(cm), sizeof g);
    return g > 0 ? static_cast<uint32_t>(g) : 0;
}

}  // namespace

void UringUdpPort::arm_multishot() {
    io_uring_sqe* sqe = get_sqe();
    if (sqe == nullptr) return;  // tried again next burst
    io_uring_prep_recvmsg_multishot(sqe, fd_, &rx_msg_, MSG_TRUNC);
    set_fd(sqe);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = kBufGroup;
    io_uring_sqe_set_data64(sqe, kTagRxMulti);
    rx_armed_ = true;
    ++ctr_.rx_arms;
}

void UringUdpPort::arm_batched(uint32_t slot) {
    RxSlot& s = rx_slots_[slot];
    s.msg = msghdr{};
    s.msg.msg_name = &s.from;
    s.msg.msg_namelen = sizeof s.from;
    s.msg.msg_iov = &s.iov;
    s.msg.msg_iovlen = 1;
    io_uring_sqe* sqe = get_sqe();
    if (sqe == nullptr) {
        rx_rearm_list_.push_back(slot);  // tried again next burst
        return;
    }
    // MSG_TRUNC: the result is the datagram's real length, so a truncated one is seen.
    io_uring_prep_recvmsg(sqe, fd_, &s.msg, MSG_TRUNC);
    set_fd(sqe);
    io_uring_sqe_set_data64(sqe, kTagRxBatch | slot);
    ++ctr_.rx_arms;
}

void UringUdpPort::sample_kernel_drops(uint64_t now_ns) {
    if (now_ns - drops_sampled_ns_ < 50'000'000) return;
    drops_sampled_ns_ = now_ns;
    uint32_t mem[SK_MEMINFO_VARS] = {};
    socklen_t len = sizeof mem;
    if (getsockopt(fd_, SOL_SOCKET, SO_MEMINFO, mem, &len) == 0 && len > SK_MEMINFO_DROPS * sizeof(uint32_t))
        ctr_.rx_kernel_drops = mem[SK_MEMINFO_DROPS];
}

PktBuf* UringUdpPort::copy_in(const uint8_t* payload, uint32_t len, const sockaddr_in& from) {
    PktBuf* p = pkt_alloc(rx_pool_, kPktHeadroom);
    if (p == nullptr) {
        ++ctr_.rx_drop_nopool;
        return nullptr;
    }
    uint8_t* a = pkt_append(p, kDgramAddrLen);
    const DgramAddrHdr h{from.sin_addr.s_addr, from.sin_port, htons(port_)};
    std::memcpy(a, &h, sizeof h);
    if (len > 0 && !pkt_write(p, rx_pool_, payload, len)) {
        pkt_free(p);
        ++ctr_.rx_drop_nopool;
        return nullptr;
    }
    ++ctr_.rx_datagrams;
    ctr_.rx_bytes += len;
    return p;
}

PktBuf* UringUdpPort::complete_rx_multishot(const io_uring_cqe* cqe, uint32_t& bufs_back) {
    if (!(cqe->flags & IORING_CQE_F_MORE)) rx_armed_ = false;  // ended: armed again after this burst
    if (!(cqe->flags & IORING_CQE_F_BUFFER)) {
        if (cqe->res == -ENOBUFS) ++ctr_.rx_nobufs;
        else if (cqe->res < 0 && cqe->res != -ECANCELED) ++ctr_.rx_errors;
        return nullptr;
    }
    const uint16_t bid = static_cast<uint16_t>(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
    uint8_t* buf = rx_mem_ + size_t{bid} * rx_stride_;
    PktBuf* p = nullptr;
    io_uring_recvmsg_out* o = cqe->res >= 0 ? io_uring_recvmsg_validate(buf, cqe->res, &rx_msg_) : nullptr;
    if (o == nullptr || o->namelen < sizeof(sockaddr_in)) {
        ++ctr_.rx_errors;
    } else if (o->flags & MSG_TRUNC) {
        ++ctr_.rx_drop_trunc;
    } else {
        sockaddr_in from;
        std::memcpy(&from, io_uring_recvmsg_name(o), sizeof from);
        const auto* payload = static_cast<const uint8_t*>(io_uring_recvmsg_payload(o, &rx_msg_));
        const uint32_t len = io_uring_recvmsg_payload_length(o, cqe->res, &rx_msg_);
        uint32_t seg = 0;  // GRO: the length of each datagram in the buffer (the last may be shorter)
        if (gro_)
            for (cmsghdr* cm = io_uring_recvmsg_cmsg_firsthdr(o, &rx_msg_); cm != nullptr;
                 cm = io_uring_recvmsg_cmsg_nexthdr(o, &rx_msg_, cm))
                if (const uint32_t g = gro_seg(cm)) seg = g;
        if (seg > 0 && len > seg) {
            // Several datagrams: cut apart by rx_burst (gro_drain), the buffer kept until then.
            ++ctr_.rx_gro_buffers;
            gro_rx_ = GroPending{true, bid, payload, len, 0, seg, from};
            return nullptr;
        }
        p = copy_in(payload, len, from);
    }
    // The buffer goes back to the ring at once (made visible when the burst ends).
    io_uring_buf_ring_add(buf_ring_, buf, rx_stride_, bid, io_uring_buf_ring_mask(cfg_.rx_buffers),
                          static_cast<int>(bufs_back++));
    return p;
}

PktBuf* UringUdpPort::complete_rx_batched(const io_uring_cqe* cqe) {
    const uint32_t i = static_cast<uint32_t>(cqe->user_data);
    RxSlot& s = rx_slots_[i];
    rx_rearm_list_.push_back(i);
    PktBuf* p = nullptr;
    if (cqe->res < 0) {
        if (cqe->res != -ECANCELED) ++ctr_.rx_errors;
    } else if (static_cast<uint32_t>(cqe->res) > s.iov.iov_len) {
        ++ctr_.rx_drop_trunc;
    } else {
        p = copy_in(static_cast<const uint8_t*>(s.iov.iov_base), static_cast<uint32_t>(cqe->res), s.from);
    }
    return p;
}

uint32_t UringUdpPort::gro_drain(PktBuf** out, uint32_t room, uint32_t& bufs_back) {
    GroPending& g = gro_rx_;
    uint32_t n = 0;
    while (g.off < g.len && n < room) {
        const uint32_t k = std::min(g.seg, g.len - g.off);
        if (PktBuf* p = copy_in(g.payload + g.off, k, g.from)) out[n++] = p;
        ++ctr_.rx_gro_datagrams;
        if (g.direct) ++ctr_.rx_direct_datagrams;
        g.off += k;
    }
    if (g.off == g.len) {  // all out: the buffer goes back to the ring (the direct path's: free)
        if (!g.direct)
            io_uring_buf_ring_add(buf_ring_, rx_mem_ + size_t{g.bid} * rx_stride_, rx_stride_, g.bid,
                                  io_uring_buf_ring_mask(cfg_.rx_buffers), static_cast<int>(bufs_back++));
        g.active = false;
    }
    return n;
}

uint32_t UringUdpPort::direct_drain(PktBuf** out, uint32_t room) {
    uint32_t n = 0, none = 0;
    while (n < room && dr_next_ < dr_count_ && !gro_rx_.active) {
        const uint32_t i = dr_next_++;
        const msghdr& h = dr_msgs_[i].msg_hdr;
        const uint32_t len = dr_msgs_[i].msg_len;
        if (h.msg_flags & MSG_TRUNC) {
            ++ctr_.rx_drop_trunc;
            continue;
        }
        if (h.msg_flags & MSG_CTRUNC) {  // a GRO length we could not read: cutting would corrupt
            ++ctr_.rx_errors;
            continue;
        }
        const uint8_t* payload = static_cast<const uint8_t*>(dr_iov_[i].iov_base);
        uint32_t seg = 0;  // GRO: as complete_rx_multishot
        if (gro_ && h.msg_controllen > 0)
            for (cmsghdr* cm = CMSG_FIRSTHDR(&h); cm != nullptr; cm = CMSG_NXTHDR(const_cast<msghdr*>(&h), cm))
                if (const uint32_t g = gro_seg(cm)) seg = g;
        if (seg > 0 && len > seg) {
            ++ctr_.rx_gro_buffers;
            gro_rx_ = GroPending{true, 0, payload, len, 0, seg, dr_from_[i], true};
            n += gro_drain(out + n, room - n, none);
            continue;
        }
        ++ctr_.rx_direct_datagrams;
        if (PktBuf* p = copy_in(payload, len, dr_from_[i])) out[n++] = p;
    }
    return n;
}

uint32_t UringUdpPort::direct_recv(PktBuf** out, uint32_t room) {
    const uint32_t vlen = std::min(room, kDirectMsgs);
    const socklen_t ctrl = gro_ ? static_cast<socklen_t>(CMSG_SPACE(sizeof(int))) : 0;
    for (uint32_t i = 0; i < vlen; ++i) {
        msghdr& h = dr_msgs_[i].msg_hdr;
        h.msg_name = &dr_from_[i];
        h.msg_namelen = sizeof(sockaddr_in);
        h.msg_controllen = ctrl;
        h.msg_flags = 0;
    }
    const int r = recvmmsg(fd_, dr_msgs_.get(), vlen, MSG_DONTWAIT, nullptr);
    ++ctr_.rx_direct_calls;
    if (r <= 0) {
        if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ++ctr_.rx_errors;
        else ++ctr_.rx_direct_empty;
        return 0;
    }
    dr_count_ = static_cast<uint32_t>(r);
    dr_next_ = 0;
    return direct_drain(out, room);
}

uint32_t UringUdpPort::rx_burst(PktBuf** out, uint32_t max) {
    if (owner_ == nullptr && cfg_.single_issuer) [[unlikely]]
        claim_st();
    if (!enabled_) [[unlikely]]
        enable_st();
    uint32_t n = 0, seen = 0, bufs_back = 0;
    if (gro_rx_.active) n = gro_drain(out, max, bufs_back);
    if (dr_next_ < dr_count_) [[unlikely]]  // what the direct path took and had no room for
        n += direct_drain(out + n, max - n);
    unsigned head;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(&ring_, head, cqe) {
        if (n == max || rx_local_pending()) break;
        ++seen;
        const uint64_t tag = cqe->user_data & ~((1ull << kTagShift) - 1);
        PktBuf* p = nullptr;
        if (tag == kTagTx) complete_tx(cqe);
        else if (tag == kTagRxMulti) p = complete_rx_multishot(cqe, bufs_back);
        else if (tag == kTagRxBatch) p = complete_rx_batched(cqe);
        else if (tag == kTagWake) wake_armed_ = false, ++ctr_.wake_reads;
        if (p != nullptr) out[n++] = p;
        if (gro_rx_.active) n += gro_drain(out + n, max - n, bufs_back);
    }
    io_uring_cq_advance(&ring_, seen);
    if (bufs_back > 0) io_uring_buf_ring_advance(buf_ring_, static_cast<int>(bufs_back));
    if (direct_st()) {
        // Not the ring's owner: straight from the socket, after what the CQ held; re-arms wait
        // for the owner (owner_needed()).
        if (n < max && !rx_local_pending()) n += direct_recv(out + n, max - n);
        return n;
    }
    // (Re-)arm what ended; the SQEs go to the kernel with this iteration's flush().
    if (mode_ == UringRxMode::kMultishot) {
        if (!rx_armed_) arm_multishot();
    } else if (!rx_rearm_list_.empty()) {
        const size_t k = rx_rearm_list_.size();
        for (size_t j = 0; j < k; ++j) arm_batched(rx_rearm_list_[j]);  // a failed one goes to the end
        rx_rearm_list_.erase(rx_rearm_list_.begin(), rx_rearm_list_.begin() + static_cast<long>(k));
    }
    return n;
}

void UringUdpPort::input_burst(PktBuf* const* dgrams, uint32_t n, uint64_t now_ns) {
    for (uint32_t i = 0; i < n; ++i) {
        PktBuf* p = dgrams[i];
        uint8_t scratch[kDgramAddrLen];
        const uint8_t* raw = pkt_contig(p, 0, kDgramAddrLen, scratch);
        UdpHandler* h = nullptr;
        DgramAddrHdr a{};
        if (raw != nullptr) {
            std::memcpy(&a, raw, sizeof a);
            const uint16_t dport = ntohs(a.dst_port_be);
            for (const Binding& b : bindings_)
                if (b.port == dport) {
                    h = b.h;
                    break;
                }
        }
        if (h == nullptr || pkt_adj(p, kDgramAddrLen) == nullptr) {
            ++ctr_.rx_drop_port;
            pkt_free(p);
            continue;
        }
        h->udp_deliver(p, UdpMeta{Ipv4Addr{ntohl(a.src_ip_be)}, ip_, ntohs(a.src_port_be), ntohs(a.dst_port_be)},
                       now_ns);
    }
    for (const Binding& b : bindings_) b.h->end_of_burst(now_ns);
}

}  // namespace iccs
