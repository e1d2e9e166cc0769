// uring_udp.cpp: see uring_udp.hpp.
#include "uring_udp.hpp"

#include <arpa/inet.h>
#include <linux/sock_diag.h>
#include <netinet/udp.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace iccs {

namespace {

constexpr uint64_t kTagShift = 32;
constexpr uint64_t kTagTx = 1ull << kTagShift;       // | slot index
constexpr uint64_t kTagRxMulti = 2ull << kTagShift;
constexpr uint64_t kTagRxBatch = 3ull << kTagShift;  // | slot index
constexpr uint64_t kTagCancel = 4ull << kTagShift;
constexpr uint64_t kTagWake = 5ull << kTagShift;  // the read of the wake eventfd
constexpr uint16_t kBufGroup = 1;
constexpr uint32_t kMaxIov = 64;  // segments of one datagram: 64 KiB in 2 KiB segments is 33
// GSO: datagrams per send (the kernel's UDP_MAX_SEGMENTS is at least 64), the largest datagram
// (one Ethernet frame of 1500 bytes: a non-loopback path refuses larger segments), bytes per send.
constexpr uint32_t kMaxGsoSegs = 64;
constexpr uint32_t kMaxGsoSize = 1472;
constexpr uint32_t kMaxGsoBytes = 65000;
// Zero-copy send (6.2+; liburing 2.3's header predates them): ask the notification to say
// whether the kernel copied the data after all, and that bit of its result.
constexpr uint16_t kZcReportUsage = 1u << 3;       // IORING_SEND_ZC_REPORT_USAGE
constexpr uint32_t kNotifZcCopied = 1u << 31;      // IORING_NOTIF_USAGE_ZC_COPIED
// A zero-copy send pins its pages as the fragments of one skb: at most MAX_SKB_FRAGS (17 by
// default), else EMSGSIZE. A GSO run ends before its pages pass this; a longer datagram goes copied.
constexpr uint32_t kZcMaxPages = 16;

uint32_t pages_of(const PktBuf* p) {
    uint32_t n = 0;
    for (const PktBuf* seg = p; seg != nullptr; seg = seg->next)
        if (seg->data_len > 0) {
            const auto a = reinterpret_cast<uintptr_t>(seg->data());
            n += static_cast<uint32_t>(((a + seg->data_len - 1) >> 12) - (a >> 12) + 1);
        }
    return n;
}

const char* const kAlternative = "use fabric = \"memif\" or \"af_packet\"";

std::string refused(const char* call, int e) {
    return std::string("fabric \"udp\" needs io_uring, which this kernel refused (") + call + ": " +
           std::strerror(e) + "); " + kAlternative;
}

size_t page_round(size_t n) {
    const size_t pg = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return (n + pg - 1) / pg * pg;
}

void* map_anon(size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
}

// NAME=0 in the environment: a default-on feature off (measurements, tests).
bool env_off(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && std::strcmp(v, "0") == 0;
}

bool env_set(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

constexpr unsigned kDeferFlags =
    IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_R_DISABLED;

// A ring with deferred task running if asked for and the kernel has it (6.1+: created disabled,
// enabled by the thread that will own it), else with cooperative task running if the kernel has
// it (5.19+), else a plain one; or an SQPOLL ring (its kernel thread idles 10 ms before it sleeps).
int ring_init(unsigned entries, io_uring& ring, bool want_coop, bool sqpoll, bool& coop, bool want_defer = false,
              bool* defer = nullptr) {
    io_uring_params p{};
    if (defer != nullptr) *defer = false;
    if (sqpoll) {
        p.flags = IORING_SETUP_SQPOLL;
        p.sq_thread_idle = 10;
        coop = false;
        return io_uring_queue_init_params(entries, &ring, &p);
    }
    if (want_defer) {
        p.flags = kDeferFlags;
        if (io_uring_queue_init_params(entries, &ring, &p) == 0) {
            coop = true;  // the TASKRUN flag says when there is deferred work, as with coop
            *defer = true;
            return 0;
        }
        p = io_uring_params{};
    }
    if (want_coop) {
        p.flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
        const int r = io_uring_queue_init_params(entries, &ring, &p);
        if (r != -EINVAL) {
            coop = r == 0;
            return r;
        }
        p = io_uring_params{};
    }
    coop = false;
    return io_uring_queue_init_params(entries, &ring, &p);
}

// Multishot recvmsg with a provided-buffer ring, tried for real: a socket sends itself one byte
// and a multishot receive must return it in a selected buffer. An older kernel refuses the
// buffer ring (before 5.19) or the multishot flag (before 6.0) at once.
bool probe_multishot(io_uring& ring) {
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    const size_t ring_bytes = page_round(sizeof(io_uring_buf));
    auto* br = static_cast<io_uring_buf_ring*>(map_anon(ring_bytes));
    bool ok = false;
    alignas(64) static thread_local uint8_t buf[256];
    msghdr m{};
    m.msg_namelen = sizeof(sockaddr_in);
    if (br != nullptr && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &al) == 0) {
        io_uring_buf_reg reg{};
        reg.ring_addr = reinterpret_cast<uint64_t>(br);
        reg.ring_entries = 1;
        reg.bgid = kBufGroup;
        if (io_uring_register_buf_ring(&ring, &reg, 0) == 0) {
            io_uring_buf_ring_init(br);
            io_uring_buf_ring_add(br, buf, sizeof buf, 0, io_uring_buf_ring_mask(1), 0);
            io_uring_buf_ring_advance(br, 1);
            io_uring_sqe* sqe = io_uring_get_sqe(&ring);
            io_uring_prep_recvmsg_multishot(sqe, fd, &m, 0);
            sqe->flags |= IOSQE_BUFFER_SELECT;
            sqe->buf_group = kBufGroup;
            io_uring_sqe_set_data64(sqe, 1);
            if (io_uring_submit(&ring) == 1 &&
                sendto(fd, "x", 1, 0, reinterpret_cast<sockaddr*>(&a), sizeof a) == 1) {
                __kernel_timespec ts{1, 0};
                io_uring_cqe* cqe = nullptr;
                if (io_uring_wait_cqe_timeout(&ring, &cqe, &ts) == 0 && cqe != nullptr) {
                    ok = cqe->res > 0 && (cqe->flags & IORING_CQE_F_BUFFER) != 0;
                    io_uring_cqe_seen(&ring, cqe);
                }
            }
            // Cancel the receive and wait for it before the buffer ring is unmapped.
            io_uring_sqe* c = io_uring_get_sqe(&ring);
            io_uring_prep_cancel64(c, 1, 0);
            io_uring_sqe_set_data64(c, 2);
            io_uring_submit(&ring);
            for (int i = 0; i < 4; ++i) {
                __kernel_timespec ts{0, 50'000'000};
                io_uring_cqe* cqe = nullptr;
                if (io_uring_wait_cqe_timeout(&ring, &cqe, &ts) != 0) break;
                const bool done = cqe->user_data == 1 && !(cqe->flags & IORING_CQE_F_MORE);
                io_uring_cqe_seen(&ring, cqe);
                if (done) break;
            }
            io_uring_unregister_buf_ring(&ring, kBufGroup);
        }
    }
    close(fd);
    if (br != nullptr) munmap(br, ring_bytes);
    return ok;
}

// The datagram length a UDP_GRO control message gives (0: not one): a receive buffer holds
// datagrams of that length, the last maybe shorter.
uint32_t gro_seg(const cmsghdr* cm) {
    if (cm->cmsg_level != SOL_UDP || cm->cmsg_type != UDP_GRO || cm->cmsg_len < CMSG_LEN(sizeof(int))) return 0;
    int g;
    std::memcpy(&g, CMSG_DATA(cm), sizeof g);
    return g > 0 ? static_cast<uint32_t>(g) : 0;
}

uint32_t pow2_at_least(uint32_t v) {
    uint32_t n = 1;
    while (n < v) n <<= 1;
    return n;
}

}  // namespace

bool uring_probe(UringCaps& caps, std::string& err) {
    caps = UringCaps{};
    if (env_set("ICCS_URING_DISABLE")) {
        err = refused("io_uring_queue_init", EPERM) + " [simulated: ICCS_URING_DISABLE is set]";
        return false;
    }
    io_uring ring{};
    bool coop = false;
    const int r = ring_init(8, ring, true, false, coop);
    if (r < 0) {
        err = refused("io_uring_queue_init", -r);
        return false;
    }
    caps.coop_taskrun = coop;
    io_uring_probe* probe = io_uring_get_probe_ring(&ring);
    const bool ops = probe != nullptr && io_uring_opcode_supported(probe, IORING_OP_SENDMSG) &&
                     io_uring_opcode_supported(probe, IORING_OP_RECVMSG);
    caps.send_zc = probe != nullptr && io_uring_opcode_supported(probe, IORING_OP_SENDMSG_ZC);
    if (probe != nullptr) io_uring_free_probe(probe);
    if (!ops) {
        utsname u{};
        uname(&u);
        err = std::string("fabric \"udp\" needs io_uring with sendmsg and recvmsg (Linux 5.3 or later), which this "
                          "kernel (") + u.release + ") lacks; " + kAlternative;
        io_uring_queue_exit(&ring);
        return false;
    }
    caps.multishot_recvmsg = probe_multishot(ring);
    io_uring_queue_exit(&ring);
    io_uring dr{};
    bool dc = false, df = false;
    if (ring_init(8, dr, false, false, dc, true, &df) == 0) {
        caps.defer_taskrun = df;
        io_uring_queue_exit(&dr);
    }
    return true;
}

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
    const UringUdpConfig& c = cfg_;
    if (c.rx_buffers == 0 || c.rx_buffers > 32768 || (c.rx_buffers & (c.rx_buffers - 1)) != 0 || c.rx_batch == 0 ||
        c.rx_batch > 256 || c.rx_buffer_bytes < 64 || c.tx_slots == 0 || c.sq_entries < 8 ||
        c.tx_slots > c.sq_entries / 2 || c.tx_queue_limit == 0) {
        err = "io_uring UDP port: bad sizes (rx_buffers a power of two up to 32768, rx_batch 1..256, tx_slots "
              "1..sq_entries/2)";
        return false;
    }
    // The mode: the environment may force one (tests of the fallback), else the config, else the kernel.
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

    // The socket.
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

    // The ring, the socket as a fixed file.
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

    // Receive buffers: out header + source address + payload, cache-line strided.
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

    // The direct path's buffers (a single-issuer port: other threads may poll it). Mapped, so
    // only the pages a datagram touched take memory.
    if (c.single_issuer) {
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
    }

    // Send slots and the queue in front of them.
    tx_slots_.resize(c.tx_slots);
    tx_iov_.reset(new iovec[size_t{c.tx_slots} * kMaxIov]);
    tx_pkts_.reset(new PktBuf*[size_t{c.tx_slots} * kMaxGsoSegs]);
    for (uint32_t i = 0; i < c.tx_slots; ++i) {
        tx_slots_[i].n = 0;
        tx_slots_[i].next_free = i + 1 < c.tx_slots ? i + 1 : UINT32_MAX;
    }
    tx_free_ = 0;
    txq_.resize(pow2_at_least(c.tx_queue_limit));
    return true;
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
