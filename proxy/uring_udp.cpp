// uring_udp.cpp: the io_uring UDP port's set-up (uring_udp.hpp), step by step, its teardown, and
// the ring's plumbing (entering it, its owner, waiting on it). Sending is in uring_tx.cpp,
// receiving in uring_rx.cpp, the kernel's features in uring_probe.cpp.
#include "uring_udp_impl.hpp"

#include <arpa/inet.h>
#include <netinet/udp.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace iccs {

using namespace uring_detail;

namespace {

uint32_t pow2_at_least(uint32_t v) {
    uint32_t n = 1;
    while (n < v) n <<= 1;
    return n;
}

}  // namespace

UringUdpPort::UringUdpPort(const UringUdpConfig& cfg, PktPool& rx_pool, PktPool& tx_pool)
    : cfg_(cfg), rx_pool_(rx_pool), tx_pool_(tx_pool) {}

std::unique_ptr<UringUdpPort> UringUdpPort::open(const UringUdpConfig& cfg, PktPool& rx_pool, PktPool& tx_pool,
                                                 std::string& err) {
    UringCaps caps;
    if (!uring_probe(caps, err)) return nullptr;
    std::unique_ptr<UringUdpPort> port(new UringUdpPort(cfg, rx_pool, tx_pool));
    if (!port->setup(caps, err)) return nullptr;
    return port;
}

bool UringUdpPort::setup(const UringCaps& caps, std::string& err) {
    if (!check_sizes(err) || !choose_rx_mode(caps, err) || !open_socket(caps, err) || !init_ring(caps, err) ||
        !map_rx_buffers(err) || !map_direct_path(err))
        return false;
    make_tx_slots();
    return true;
}

bool UringUdpPort::check_sizes(std::string& err) const {
    const UringUdpConfig& c = cfg_;
    if (c.rx_buffers == 0 || c.rx_buffers > 32768 || (c.rx_buffers & (c.rx_buffers - 1)) != 0 || c.rx_batch == 0 ||
        c.rx_batch > 256 || c.rx_buffer_bytes < 64 || c.tx_slots == 0 || c.sq_entries < 8 ||
        c.tx_slots > c.sq_entries / 2 || c.tx_queue_limit == 0) {
        err = "io_uring UDP port: bad sizes (rx_buffers a power of two up to 32768, rx_batch 1..256, tx_slots "
              "1..sq_entries/2)";
        return false;
    }
    return true;
}

// The mode: the environment may force one (tests of the fallback), else the config, else the kernel.
bool UringUdpPort::choose_rx_mode(const UringCaps& caps, std::string& err) {
    const UringUdpConfig& c = cfg_;
    mode_ = c.rx_mode;
    if (const char* m = std::getenv("ICCS_URING_RX"); m != nullptr && *m != '\0') {
        if (std::strcmp(m, "multishot") == 0) {
            mode_ = UringRxMode::kMultishot;
        } else if (std::strcmp(m, "batched") == 0) {
            mode_ = UringRxMode::kBatched;
        } else {
            err = std::string("ICCS_URING_RX = \"") + m + "\": allowed values are multishot, batched";
            return false;
        }
    }
    if (mode_ == UringRxMode::kAuto) mode_ = caps.multishot_recvmsg ? UringRxMode::kMultishot : UringRxMode::kBatched;
    if (mode_ == UringRxMode::kMultishot && !caps.multishot_recvmsg) {
        err = "io_uring multishot recvmsg with provided buffers is not available on this kernel (Linux 6.0 or "
              "later); unset ICCS_URING_RX to use batched recvmsg";
        return false;
    }
    return true;
}

// The socket: bound, its buffers sized, GSO, GRO and zero-copy send as the kernel allows.
bool UringUdpPort::open_socket(const UringCaps& caps, std::string& err) {
    const UringUdpConfig& c = cfg_;
    ip_ = c.ip;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(c.ip.v);
    a.sin_port = htons(c.port);
    const std::string where = to_string(c.ip) + ":" + std::to_string(c.port);
    fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
        err = std::string("cannot create a UDP socket: ") + std::strerror(errno);
        return false;
    }
    const int sz = static_cast<int>(c.socket_buffer_bytes);
    // FORCE passes net.core.rmem_max as root; elsewhere the plain option gives what the limit allows.
    if (setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz) != 0)
        setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    if (setsockopt(fd_, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz) != 0)
        setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        const int e = errno;
        err = "cannot bind the proxy's UDP socket to " + where + ": " + std::strerror(e);
        if (e == EADDRINUSE) err += " (another run on this host? choose another [machine] udp_port)";
        if (e == EADDRNOTAVAIL) err += " (no interface of this host has that address: check [machine] udp_addresses)";
        return false;
    }
    socklen_t al = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &al);
    port_ = ntohs(a.sin_port);
    // GSO: the socket option with size 0 (per-send sizes come in a cmsg) tells whether the kernel
    // has it (4.18+). GRO: only with the multishot receive (its buffers take the cmsg).
    const int zero = 0, one = 1;
    gso_ = c.gso && !env_off("ICCS_URING_GSO") && setsockopt(fd_, SOL_UDP, UDP_SEGMENT, &zero, sizeof zero) == 0;
    gro_ = c.gro && !env_off("ICCS_URING_GRO") && mode_ == UringRxMode::kMultishot &&
           setsockopt(fd_, SOL_UDP, UDP_GRO, &one, sizeof one) == 0;

    zc_ = (c.zc_send || env_set("ICCS_URING_ZC")) && caps.send_zc;
    if ((c.zc_send || env_set("ICCS_URING_ZC")) && !zc_) notes_ += " (zero-copy sendmsg refused by this kernel)";
    if (zc_) notes_ += ", zero-copy sendmsg";
    return true;
}

// The ring, the socket as a fixed file.
bool UringUdpPort::init_ring(const UringCaps& caps, std::string& err) {
    const UringUdpConfig& c = cfg_;
    const bool want_defer = c.single_issuer && !env_off("ICCS_URING_DEFER") && caps.defer_taskrun;
    const int r =
        ring_init(pow2_at_least(c.sq_entries), ring_, caps.coop_taskrun, c.sqpoll, coop_, want_defer, &defer_);
    enabled_ = !defer_;
    if (c.single_issuer && !c.sqpoll && !defer_)
        notes_ += env_off("ICCS_URING_DEFER") ? " (deferred task run off: ICCS_URING_DEFER=0)"
                                              : " (deferred task run refused by this kernel: cooperative instead)";
    if (r < 0 && c.sqpoll) {
        err = std::string("io_uring refused an SQPOLL ring ([machine] udp_sqpoll = true): ") + std::strerror(-r) +
              "; set udp_sqpoll = false";
        return false;
    }
    if (r < 0) {
        err = refused("io_uring_queue_init", -r);
        return false;
    }
    ring_up_ = true;
    fixed_file_ = io_uring_register_files(&ring_, &fd_, 1) == 0;
    return true;
}

// Receive buffers: out header + source address + payload, cache-line strided.
bool UringUdpPort::map_rx_buffers(std::string& err) {
    const UringUdpConfig& c = cfg_;
    const uint32_t nbuf = mode_ == UringRxMode::kMultishot ? c.rx_buffers : c.rx_batch;
    const uint32_t ctrl = gro_ ? static_cast<uint32_t>(CMSG_SPACE(sizeof(int))) : 0;
    rx_stride_ = static_cast<uint32_t>(
        (sizeof(io_uring_recvmsg_out) + sizeof(sockaddr_in) + ctrl + c.rx_buffer_bytes + 63) & ~size_t{63});
    rx_mem_bytes_ = page_round(size_t{nbuf} * rx_stride_);
    rx_mem_ = static_cast<uint8_t*>(map_anon(rx_mem_bytes_));
    if (rx_mem_ == nullptr) {
        err = "cannot map " + std::to_string(rx_mem_bytes_ >> 20) + " MiB of receive buffers";
        return false;
    }
    if (mode_ == UringRxMode::kMultishot) {
        buf_ring_bytes_ = page_round(size_t{nbuf} * sizeof(io_uring_buf));
        buf_ring_ = static_cast<io_uring_buf_ring*>(map_anon(buf_ring_bytes_));
        io_uring_buf_reg reg{};
        reg.ring_addr = reinterpret_cast<uint64_t>(buf_ring_);
        reg.ring_entries = nbuf;
        reg.bgid = kBufGroup;
        const int rr = buf_ring_ == nullptr ? -ENOMEM : io_uring_register_buf_ring(&ring_, &reg, 0);
        if (rr != 0) {
            err = std::string("io_uring_register_buf_ring: ") + std::strerror(-rr);
            return false;
        }
        io_uring_buf_ring_init(buf_ring_);
        const int mask = io_uring_buf_ring_mask(nbuf);
        for (uint32_t i = 0; i < nbuf; ++i)
            io_uring_buf_ring_add(buf_ring_, rx_mem_ + size_t{i} * rx_stride_, rx_stride_, static_cast<uint16_t>(i),
                                  mask, static_cast<int>(i));
        io_uring_buf_ring_advance(buf_ring_, static_cast<int>(nbuf));
        rx_msg_.msg_namelen = sizeof(sockaddr_in);
        rx_msg_.msg_controllen = ctrl;
    } else {
        rx_slots_.resize(nbuf);
        for (uint32_t i = 0; i < nbuf; ++i) {
            RxSlot& s = rx_slots_[i];
            s.iov = iovec{rx_mem_ + size_t{i} * rx_stride_, rx_stride_};
            rx_rearm_list_.push_back(i);  // armed by the first rx_burst (the polling thread)
        }
    }
    return true;
}

// The direct path's buffers (a single-issuer port: other threads may poll it). Mapped, so
// only the pages a datagram touched take memory.
bool UringUdpPort::map_direct_path(std::string& err) {
    const UringUdpConfig& c = cfg_;
    if (!c.single_issuer) return true;
    const uint32_t dctrl = gro_ ? static_cast<uint32_t>(CMSG_SPACE(sizeof(int))) : 0;
    dr_stride_ = static_cast<uint32_t>((dctrl + c.rx_buffer_bytes + 63) & ~size_t{63});
    dr_mem_bytes_ = page_round(size_t{kDirectMsgs} * dr_stride_);
    dr_mem_ = static_cast<uint8_t*>(map_anon(dr_mem_bytes_));
    if (dr_mem_ == nullptr) {
        err = "cannot map " + std::to_string(dr_mem_bytes_ >> 20) + " MiB of receive buffers (direct path)";
        return false;
    }
    dr_msgs_.reset(new mmsghdr[kDirectMsgs]());
    dr_iov_.reset(new iovec[kDirectMsgs]);
    dr_from_.reset(new sockaddr_in[kDirectMsgs]());
    for (uint32_t i = 0; i < kDirectMsgs; ++i) {
        uint8_t* b = dr_mem_ + size_t{i} * dr_stride_;
        dr_iov_[i] = iovec{b + dctrl, c.rx_buffer_bytes};
        msghdr& h = dr_msgs_[i].msg_hdr;
        h.msg_iov = &dr_iov_[i];
        h.msg_iovlen = 1;
        h.msg_control = dctrl > 0 ? b : nullptr;
    }
    dt_msgs_.reset(new mmsghdr[kDirectMsgs]());
    dt_.reset(new DirectTx[kDirectMsgs]());
    dt_iov_.reset(new iovec[size_t{kDirectMsgs} * kMaxIov]);
    return true;
}

// Send slots and the queue in front of them.
void UringUdpPort::make_tx_slots() {
    const UringUdpConfig& c = cfg_;
    tx_slots_.resize(c.tx_slots);
    tx_iov_.reset(new iovec[size_t{c.tx_slots} * kMaxIov]);
    tx_pkts_.reset(new PktBuf*[size_t{c.tx_slots} * kMaxGsoSegs]);
    for (uint32_t i = 0; i < c.tx_slots; ++i) {
        tx_slots_[i].n = 0;
        tx_slots_[i].next_free = i + 1 < c.tx_slots ? i + 1 : UINT32_MAX;
    }
    tx_free_ = 0;
    txq_.resize(pow2_at_least(c.tx_queue_limit));
}

UringUdpPort::~UringUdpPort() {
    drain_for_close();
    for (uint32_t i = 0; i < txq_count_; ++i) pkt_free(txq_[(txq_head_ + i) & (txq_.size() - 1)].p);
    txq_count_ = 0;
    for (size_t i = 0; i < tx_slots_.size(); ++i)
        for (uint32_t j = 0; j < tx_slots_[i].n; ++j) pkt_free(tx_pkts_[i * kMaxGsoSegs + j]);
    if (ring_up_) io_uring_queue_exit(&ring_);
    if (fd_ >= 0) close(fd_);
    if (wake_fd_ >= 0) close(wake_fd_);
    if (buf_ring_ != nullptr) munmap(buf_ring_, buf_ring_bytes_);
    if (rx_mem_ != nullptr) munmap(rx_mem_, rx_mem_bytes_);
    if (dr_mem_ != nullptr) munmap(dr_mem_, dr_mem_bytes_);
}

void UringUdpPort::drain_for_close() {
    if (!ring_up_ || !enabled_) return;  // a ring never enabled never had a request
    // Single issuer: only the owner may enter the ring. Another thread destroys the port after
    // the owner stopped polling: deferred completion work (a send retried, a datagram copied
    // into a buffer) runs only inside the owner's calls, so nothing touches our buffers any
    // more, and io_uring_queue_exit cancels the rest.
    if (defer_ && owner_ != &tl_mark_) return;
    // Cancel every request still in flight and wait (bounded) for their completions, so the
    // kernel is done with our buffers before they go.
    if (io_uring_sqe* sqe = io_uring_get_sqe(&ring_)) {
        io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
        io_uring_sqe_set_data64(sqe, kTagCancel);
    }
    io_uring_submit(&ring_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    uint32_t rx_pending = mode_ == UringRxMode::kBatched
                              ? static_cast<uint32_t>(rx_slots_.size() - rx_rearm_list_.size())
                              : (rx_armed_ ? 1u : 0u);
    while ((tx_inflight_ > 0 || rx_pending > 0) && std::chrono::steady_clock::now() < deadline) {
        __kernel_timespec ts{0, 10'000'000};
        io_uring_cqe* cqe = nullptr;
        if (io_uring_wait_cqe_timeout(&ring_, &cqe, &ts) != 0 || cqe == nullptr) continue;
        const uint64_t tag = cqe->user_data & ~((1ull << kTagShift) - 1);
        if (tag == kTagTx) {
            complete_tx(cqe);
        } else if (tag == kTagRxBatch) {
            --rx_pending;
        } else if (tag == kTagRxMulti && !(cqe->flags & IORING_CQE_F_MORE)) {
            rx_pending = 0;
            rx_armed_ = false;
        }
        io_uring_cqe_seen(&ring_, cqe);
    }
}

void UringUdpPort::bind(uint16_t port, UdpHandler* h) {
    std::erase_if(bindings_, [port](const Binding& b) { return b.port == port; });
    if (h != nullptr) bindings_.push_back(Binding{port, h});
}

io_uring_sqe* UringUdpPort::get_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {  // the SQ is full (never with the default sizes): hand it over now
        submit(defer_);
        sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
}

int UringUdpPort::submit(bool get_events) {
    if (!enabled_) [[unlikely]]
        enable_st();
    const int r = get_events ? io_uring_submit_and_get_events(&ring_) : io_uring_submit(&ring_);
    ++ctr_.submits;
    if (r >= 0) {
        ctr_.sqes += static_cast<uint64_t>(r);
    } else if (++ctr_.submit_errors == 1 && r == -EEXIST) {
        // A programming error, said once: a single-issuer ring polled by a second thread.
        std::fprintf(stderr, "iccs: io_uring UDP port %u: polled by a thread other than its owner (single issuer: "
                             "UringUdpConfig::single_issuer needs one polling thread; ICCS_URING_DEFER=0 turns it off)\n",
                     static_cast<unsigned>(port_));
    }
    return r;
}

void UringUdpPort::claim_st() {
    owner_ = &tl_mark_;
    if (!enabled_) enable_st();
}

void UringUdpPort::enable_st() {
    owner_ = &tl_mark_;
    enabled_ = true;
    // liburing 2.3 declares io_uring_enable_rings but does not export it: the system call itself.
    if (syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0) != 0)
        std::fprintf(stderr, "iccs: io_uring UDP port %u: IORING_REGISTER_ENABLE_RINGS: %s\n",
                     static_cast<unsigned>(port_), std::strerror(errno));
}

void UringUdpPort::set_fd(io_uring_sqe* sqe) {
    if (fixed_file_) {
        sqe->fd = 0;  // index in the registered files
        sqe->flags |= IOSQE_FIXED_FILE;
    }
}

bool UringUdpPort::owner_needed() const {
    const bool rearm = mode_ == UringRxMode::kMultishot ? !rx_armed_ : !rx_rearm_list_.empty();
    return rearm || txq_count_ > 0 || rx_local_pending();
}

int UringUdpPort::wake_fd(std::string& err) {
    if (wake_fd_ < 0) {
        wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (wake_fd_ < 0) err = std::string("eventfd: ") + std::strerror(errno);
    }
    return wake_fd_;
}

void UringUdpPort::wait_prepare() {
    if (owner_ == nullptr && cfg_.single_issuer) [[unlikely]]
        claim_st();
    if (!wake_armed_ && wake_fd_ >= 0) {
        if (io_uring_sqe* sqe = get_sqe()) {
            io_uring_prep_read(sqe, wake_fd_, &wake_buf_, sizeof wake_buf_, 0);
            io_uring_sqe_set_data64(sqe, kTagWake);
            wake_armed_ = true;
        }
    }
}

void UringUdpPort::wait(uint64_t timeout_ns) {
    // Only the SQ, the ring's system call and members no other poller touches: another thread
    // may take the direct path meanwhile (it reads and advances the CQ; liburing here only
    // looks at it). The counters wait for the owner's next flush().
    if (!enabled_) [[unlikely]]
        enable_st();
    __kernel_timespec ts{static_cast<long long>(timeout_ns / 1'000'000'000),
                         static_cast<long long>(timeout_ns % 1'000'000'000)};
    io_uring_cqe* cqe = nullptr;
    wait_result_ = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
    waited_ = true;
    want_events_ = false;
}

std::string UringUdpPort::describe() const {
    std::string s = "io_uring, ";
    if (mode_ == UringRxMode::kMultishot)
        s += "multishot recvmsg + provided buffers (" + std::to_string(cfg_.rx_buffers) + " x " +
             std::to_string(cfg_.rx_buffer_bytes >> 10) + " KiB ring)";
    else
        s += "batched recvmsg (" + std::to_string(cfg_.rx_batch) + " in flight)";
    s += ", batched sendmsg (" + std::to_string(cfg_.tx_slots) + " in flight)";
    if (gso_) s += ", UDP GSO";
    if (gro_) s += ", UDP GRO";
    if (fixed_file_) s += ", fixed file";
    if (coop_) s += ", cooperative task run";
    if (cfg_.sqpoll) s += ", SQPOLL";
    if (defer_) s += ", deferred task run (single issuer)";
    s += notes_;
    return s;
}

}  // namespace iccs
