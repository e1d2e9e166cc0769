// uring_udp.hpp: the kernel path (fabric "udp"): one UDP socket of a proxy, driven by io_uring.
//
// The one idea: the kernel does IP and UDP, so this port is a DatagramService (the seam slidwin
// sits on, stack/datagram_service.hpp) instead of a Stack; slidwin and convergence run unchanged
// above it. The proxy loop drives it in bursts, with at most one system call per iteration:
//  - send: every datagram the endpoint sends becomes one sendmsg SQE whose iovecs point straight
//    at the PktBuf's segments (no copy; the port holds a reference until the completion). All
//    SQEs prepared in an iteration go to the kernel with one io_uring_submit in flush().
//  - receive: one multishot recvmsg (kernel 6.0+) selects buffers from a ring of provided buffers
//    registered with the kernel (io_uring_register_buf_ring); completions are reaped from the CQ
//    without a system call. The kernel ends a multishot (IORING_CQE_F_MORE clear) when every
//    buffer is full (ENOBUFS: the datagrams wait in the socket) or for other reasons: it is armed
//    again. Where multishot recvmsg is missing, a batch of single recvmsg SQEs stays in flight,
//    each re-submitted (with the iteration's one submit) as it completes.
//  - each received datagram is copied once, from its kernel buffer into PktBufs of the RX pool
//    (the buffer goes straight back to the ring): a datagram may be 64 KiB, the pool's segments
//    are 2 KiB, and slidwin may hold a datagram for long (out of order), so lending the kernel
//    buffer itself would pin 64 KiB per held datagram.
//  - registered with the kernel: the socket (a fixed file) and the provided-buffer ring of the
//    receive. Send buffers are not: a registered buffer serves only zero-copy sends, which over
//    loopback the kernel copies all the same (it says so: tx_zc_copied) at the price of a second
//    completion per send; measured slower (ICCS_URING_ZC=1 turns them on; perf/README.md).
//  - completion work runs cooperatively (IORING_SETUP_COOP_TASKRUN + TASKRUN_FLAG, kernel
//    5.19+): the kernel sets a flag instead of interrupting a polling thread, and the next
//    iteration's one system call runs it. It runs in the thread that armed the receive, so the
//    receive is armed by the first thread that polls (the proxy thread), not by the opener.
//    A port that one thread polls for its whole life (single_issuer: a proxy with its own
//    thread) goes further: deferred task running (SINGLE_ISSUER | DEFER_TASKRUN, 6.1+), the
//    work runs only inside its flush/wait calls, each flush one io_uring_enter that submits and
//    collects; the ring is created disabled and enabled by that thread.
//
//  - the direct path (adaptive polling's assist, issue 21): a single-issuer ring refuses every
//    thread but its owner (the proxy thread), and its completion work runs only inside the
//    owner's calls. Another thread that polls the port (a compute thread holding the proxy's
//    poller flag) never enters the ring: it reaps what the CQ already holds (memory only: sends
//    done, datagrams the multishot took, buffers back to the provided ring), takes datagrams
//    straight from the socket with one recvmmsg(MSG_DONTWAIT) per burst, and sends the queue with
//    one sendmmsg(MSG_DONTWAIT) per burst (GSO runs as cmsgs, GRO buffers cut apart as the
//    multishot's are). The socket's queue hands each datagram to one reader: the multishot, when
//    its completion work runs later, finds the queue empty (EAGAIN, it stays armed) or takes what
//    is left, so nothing is taken twice; the two readers may interleave a burst's order, which
//    slidwin's reordering absorbs. What only the owner can do (re-arm a receive the kernel ended,
//    submit, sends the socket refused with EAGAIN) the direct path leaves, and says so
//    (owner_needed(): the proxy then wakes its thread). Counters rx_direct_*, tx_direct_*.
//    The owner's sleep (wait()) may run while another thread takes the direct path: the SQ
//    and io_uring_enter are the owner's alone, and the direct path touches neither.
//
// Received datagrams travel from rx_burst to input_burst with their addresses in front of the
// payload (DgramAddrHdr), so the proxy's fault injection can hold, drop and copy them as it does
// frames.
//
// Threading: _st — one thread at a time (the proxy's thread, or whoever holds the inline lock or
// the proxy's poller flag), except wait() (above). The RX pool may be shared with other threads
// (MempoolPktPool), the rest is this port's.
#pragma once

#include <liburing.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "datagram_service.hpp"
#include "pktbuf.hpp"
#include "udp_hdr.hpp"

namespace iccs {

enum class UringRxMode {
    kAuto,       // multishot when the kernel has it, else batched (chosen by open())
    kMultishot,  // one multishot recvmsg over a provided-buffer ring
    kBatched,    // rx_batch single recvmsg SQEs kept in flight
};

struct UringUdpConfig {
    Ipv4Addr ip{0x7f000001};              // bind address (127.0.0.1)
    uint16_t port = 0;                    // bind port; 0: the kernel picks one (see port())
    UringRxMode rx_mode = UringRxMode::kAuto;
    uint32_t sq_entries = 512;            // submission queue [entries] (the CQ is twice that)
    uint32_t rx_buffers = 128;            // provided buffers (multishot) [buffers] (2^n, 1..32768)
    uint32_t rx_batch = 32;               // recvmsg SQEs in flight (batched) [SQEs] (1..256)
    uint32_t rx_buffer_bytes = 65536;     // payload room of one receive buffer [bytes]; longer
                                          // datagrams are dropped (rx_drop_trunc): keep >= 65507
    uint32_t tx_slots = 256;              // sendmsg SQEs in flight at once [SQEs] (1..sq_entries/2)
    uint32_t tx_queue_limit = 8192;       // datagrams waiting for a free slot before drops [datagrams]
    uint32_t socket_buffer_bytes = 4u << 20;  // SO_RCVBUF/SO_SNDBUF asked for [bytes]
    // UDP GSO (UDP_SEGMENT): consecutive queued datagrams to one peer of one length (the last may
    // be shorter), up to 1472 bytes each, go as one sendmsg the kernel cuts into datagrams.
    bool gso = true;
    // UDP GRO (multishot receive only): the kernel may hand over several datagrams of one sender
    // in one buffer (a GSO send over loopback arrives so); they are cut apart here.
    bool gro = true;
    // SQPOLL ([machine] udp_sqpoll): a kernel thread polls the submission queue, so submitting
    // needs no system call while it is awake (it sleeps after 10 ms idle); it busies a core of
    // its own. Without cooperative task running (the kernel refuses the two together).
    bool sqpoll = false;
    // Deferred task running (IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN, kernel 6.1+): completion
    // work runs only inside this port's own io_uring_enter calls (flush, wait), in batches, never
    // as an interruption. Only for a port that ONE thread polls for its whole life (a proxy with
    // its own thread: busy or adaptive polling; not inline, where compute threads take turns):
    // the ring is created disabled and enabled by the first thread that calls rx_burst, flush or
    // wait, and the kernel refuses every other thread from then on. The opener may be another
    // thread. Destroyed by another thread once the poller stopped polling (a DPDK lcore that
    // returned), the port skips the cancel-and-wait (the kernel would refuse it): the kernel
    // touches our buffers only inside the owner's calls (deferred completion work), and
    // io_uring_queue_exit cancels what is left. ICCS_URING_DEFER=0 turns it off; a kernel that
    // refuses it gets the cooperative ring (describe() says which).
    bool single_issuer = false;
    // Zero-copy sends (IORING_OP_SENDMSG_ZC, 6.1+): opt-in by ICCS_URING_ZC=1 or this flag, for
    // measurements: over loopback the kernel copies every such datagram anyway (tx_zc_copied) and
    // each send costs a second completion (the notification), so it loses here (perf/README.md).
    bool zc_send = false;
};

// Not on any wire: a received datagram's addresses, in front of its payload from rx_burst to
// input_burst (big-endian, as the socket address holds them).
struct DgramAddrHdr {
    uint32_t src_ip_be;
    uint16_t src_port_be;
    uint16_t dst_port_be;
};
static_assert(sizeof(DgramAddrHdr) == 8);
inline constexpr uint32_t kDgramAddrLen = sizeof(DgramAddrHdr);

#define ICCS_URING_COUNTERS(X)                                                                     \
    X(rx_datagrams, "datagrams received")                                                          \
    X(rx_bytes, "their payload bytes")                                                             \
    X(rx_arms, "receive (re-)arms: multishot recvmsg submitted after the kernel ended the last")   \
    X(rx_nobufs, "multishot receives ended by ENOBUFS (every provided buffer was full)")           \
    X(rx_drop_nopool, "datagrams dropped: the RX packet pool was empty")                           \
    X(rx_drop_trunc, "datagrams dropped: longer than a receive buffer")                            \
    X(rx_drop_port, "datagrams for a port nobody bound")                                           \
    X(rx_errors, "receive completions with another error")                                         \
    X(rx_kernel_drops, "datagrams the kernel dropped for us: socket buffer full (SO_MEMINFO)")     \
    X(tx_datagrams, "datagrams the kernel took (sendmsg completed)")                               \
    X(tx_bytes, "their payload bytes")                                                             \
    X(tx_errors, "datagrams whose sendmsg completed with an error (lost; slidwin resends)")        \
    X(tx_gso_sends, "sendmsg SQEs that carried several datagrams (UDP GSO)")                       \
    X(tx_gso_datagrams, "datagrams sent in them")                                                  \
    X(tx_gso_refused, "GSO sends the kernel refused (GSO is then off for this socket)")            \
    X(rx_gro_buffers, "receive buffers that held several datagrams (UDP GRO)")                     \
    X(rx_gro_datagrams, "datagrams cut out of them")                                               \
    X(tx_drop_too_big, "datagrams over 65507 bytes or with more segments than an iovec array")     \
    X(tx_drop_queue_full, "datagrams dropped: tx_queue_limit datagrams already waited")            \
    X(tx_waits, "flushes that left datagrams waiting for a free send slot")                        \
    X(tx_zc_sends, "zero-copy sendmsg SQEs completed (ICCS_URING_ZC=1)")                           \
    X(tx_zc_copied, "of them, sends the kernel copied anyway (loopback always does)")              \
    X(flushes, "flush() calls: proxy loop iterations (submits / flushes = system calls per loop)") \
    X(submits, "system calls: io_uring_submit / io_uring_get_events / the waits below")            \
    X(waits, "blocking waits for a completion (adaptive polling's sleep)")                         \
    X(wake_reads, "waits ended by the wake eventfd (a compute thread had work)")                   \
    X(sqes, "SQEs submitted")                                                                      \
    X(submit_errors, "io_uring_submit calls that failed (the SQEs are retried)")                   \
    X(rx_direct_calls, "recvmmsg calls of the direct path (a poller other than the ring's owner)") \
    X(rx_direct_empty, "of them, calls that found the socket empty")                              \
    X(rx_direct_datagrams, "datagrams taken straight from the socket by the direct path")         \
    X(tx_direct_calls, "sendmmsg calls of the direct path")                                       \
    X(tx_direct_datagrams, "datagrams sent straight (sendmmsg) by the direct path")               \
    X(tx_direct_again, "direct sends the socket refused for now (EAGAIN): left to the owner's ring")

struct UringUdpCounters {
#define X(name, doc) uint64_t name = 0;
    ICCS_URING_COUNTERS(X)
#undef X
    template <typename Fn>
    void for_each(Fn&& fn) const {
#define X(name, doc) fn(#name, doc, name);
        ICCS_URING_COUNTERS(X)
#undef X
    }
};

// What this kernel's io_uring offers the UDP port (uring_probe()).
struct UringCaps {
    bool multishot_recvmsg = false;  // recvmsg multishot with a registered buffer ring (6.0+)
    bool coop_taskrun = false;       // IORING_SETUP_COOP_TASKRUN | TASKRUN_FLAG (5.19+)
    bool defer_taskrun = false;      // IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN (6.1+)
    bool send_zc = false;            // IORING_OP_SENDMSG_ZC (6.1+)
};

// Checks at start that io_uring works here with what the port needs (sendmsg, recvmsg); fills
// caps. False with err = the one line to show, e.g. `fabric "udp" needs io_uring, which this
// kernel refused (io_uring_queue_init: Operation not permitted); use fabric = "memif" or
// "af_packet"`. ICCS_URING_DISABLE=1 in the environment simulates that refusal (tests).
bool uring_probe(UringCaps& caps, std::string& err);

class UringUdpPort final : public DatagramService {
   public:
    // A socket bound to cfg.ip:cfg.port and its io_uring. Received datagrams are copied into
    // rx_pool; pool() (the endpoint's acks) is tx_pool. nullptr with err on failure.
    static std::unique_ptr<UringUdpPort> open(const UringUdpConfig& cfg, PktPool& rx_pool, PktPool& tx_pool,
                                              std::string& err);
    ~UringUdpPort() override;
    UringUdpPort(const UringUdpPort&) = delete;
    UringUdpPort& operator=(const UringUdpPort&) = delete;

    // --- DatagramService ---
    // Queues a sendmsg of p to (dst, dst_port) from this socket (src_port is the socket's own
    // port). Sent by the next flush().
    bool udp_output(PktBuf* p, uint16_t src_port, Ipv4Addr dst, uint16_t dst_port) override;
    void bind(uint16_t port, UdpHandler* h) override;
    PktPool& pool() override { return tx_pool_; }

    // --- the proxy loop ---
    // Reaps completions: finished sends release their datagrams; up to max received datagrams
    // go to out (address-prefixed, DgramAddrHdr). Arms the receive if it is not armed. No
    // system call; on the direct path (a caller other than a single-issuer ring's owner) one
    // recvmmsg when the CQ left room in out.
    uint32_t rx_burst(PktBuf** out, uint32_t max);
    // Hands address-prefixed datagrams (from rx_burst) to the handler bound to their destination
    // port, then calls end_of_burst. Ownership passes in.
    void input_burst(PktBuf* const* dgrams, uint32_t n, uint64_t now_ns);
    // Prepares sendmsg SQEs for queued datagrams (as many as free slots), then submits every
    // prepared SQE (sends, receive re-arms) with one system call — or, with nothing to submit,
    // runs pending completion work if the kernel asked for it. At most one system call; returns
    // the completions it left ready for the next rx_burst (work for the loop: do not sleep).
    // On the direct path: one sendmmsg of at most 32 sends (GSO runs each one) from the queue's
    // head, no ring call; what is left counts as work.
    uint32_t flush();
    // The caller would take the direct path (a single-issuer ring owned by another thread).
    bool direct_st() const { return owner_ != nullptr && owner_ != &tl_mark_; }
    // After a direct-path iteration: work that only the owner can do waits (a receive to re-arm,
    // sends the socket refused) or received datagrams are left for the next rx_burst: wake the
    // owner unless someone polls again soon.
    bool owner_needed() const;
    // Wake on arrival (adaptive polling, issue 21): the eventfd whose write ends a wait() (the
    // proxy's Waker writes it for its compute threads); created on the first call, -1 with err.
    int wake_fd(std::string& err);
    // Sleep until a completion (a datagram, a send done, a write to wake_fd) or timeout_ns:
    // wait_prepare() arms the wake read when it is not (polling thread, after flush()), then
    // wait() is one io_uring_submit_and_wait_timeout. The owner may call wait() after it let
    // other threads poll (the direct path touches neither the SQ nor the ring's system calls);
    // its counters are added by the owner's next flush(). Completions go to the next rx_burst.
    void wait_prepare();
    void wait(uint64_t timeout_ns);
    // GSO / GRO in use on this socket (asked for in the config and taken by the kernel).
    bool gso() const { return gso_; }
    // Deferred task running / zero-copy sends in use (asked for and taken by the kernel).
    bool defer_taskrun() const { return defer_; }
    bool zc_send() const { return zc_; }
    bool gro() const { return gro_; }
    // Nothing queued and no send in flight.
    bool tx_idle() const { return txq_count_ == 0 && tx_inflight_ == 0; }
    // Reads the kernel's drop count of the socket into rx_kernel_drops, at most every 50 ms (one
    // getsockopt; a drop there is a datagram slidwin will resend).
    void sample_kernel_drops(uint64_t now_ns);

    Ipv4Addr ip() const { return ip_; }
    uint16_t port() const { return port_; }
    UringRxMode rx_mode() const { return mode_; }
    // For the startup line: "io_uring, multishot recvmsg + provided buffers (128 x 64 KiB), batched sendmsg".
    std::string describe() const;
    const UringUdpCounters& counters() const { return ctr_; }

   private:
    struct TxSlot {
        msghdr msg;
        sockaddr_in dst;
        uint32_t n;  // datagrams in this send (their PktBufs: tx_pkts_), 0 when the slot is free
        bool notif;  // zero copy: the result came, the buffers wait for the kernel's notification
        uint32_t next_free;
        alignas(cmsghdr) uint8_t ctrl[CMSG_SPACE(sizeof(uint16_t))];  // UDP_SEGMENT
    };
    // A receive buffer of several datagrams (GRO) being cut apart: what rx_burst had no room for.
    struct GroPending {
        bool active = false;
        uint16_t bid = 0;
        const uint8_t* payload = nullptr;
        uint32_t len = 0, off = 0, seg = 0;
        sockaddr_in from{};
        bool direct = false;  // a buffer of the direct path's (no provided buffer to give back)
    };
    struct TxPending {
        PktBuf* p;
        Ipv4Addr dst;
        uint16_t dst_port;
    };
    // The direct path: one recvmmsg / sendmmsg per burst of at most this many messages.
    static constexpr uint32_t kDirectMsgs = 32;
    struct DirectTx {  // one message of a sendmmsg
        sockaddr_in dst;
        uint32_t n;  // datagrams (from the queue head on) it carries
        alignas(cmsghdr) uint8_t ctrl[CMSG_SPACE(sizeof(uint16_t))];  // UDP_SEGMENT
    };
    struct RxSlot {  // batched mode: one recvmsg in flight
        msghdr msg;
        sockaddr_in from;
        iovec iov;
    };
    UringUdpPort(const UringUdpConfig& cfg, PktPool& rx_pool, PktPool& tx_pool);
    // The set-up, step by step (each false with err on failure).
    bool setup(const UringCaps& caps, std::string& err);
    bool check_sizes(std::string& err) const;
    bool choose_rx_mode(const UringCaps& caps, std::string& err);
    bool open_socket(const UringCaps& caps, std::string& err);
    bool init_ring(const UringCaps& caps, std::string& err);
    bool map_rx_buffers(std::string& err);
    bool map_direct_path(std::string& err);
    void make_tx_slots();
    io_uring_sqe* get_sqe();
    void set_fd(io_uring_sqe* sqe);
    void arm_multishot();
    void arm_batched(uint32_t slot);
    uint32_t prep_send();  // datagrams taken from the queue head into one send (0: no slot)
    // The datagrams from queue position `from` on that go in one send (GSO: a run to one peer
    // of one length), as m's iovecs (iov) and UDP_SEGMENT cmsg (ctrl); their count. zc: the
    // send may be zero copy (in), is (out).
    uint32_t gather_send(uint32_t from, msghdr& m, sockaddr_in& dst, iovec* iov, uint8_t* ctrl, bool& zc,
                         PktBuf** pkts);
    uint32_t gro_drain(PktBuf** out, uint32_t room, uint32_t& bufs_back);
    // The direct path (see the file comment).
    void claim_st();  // the first polling thread of a single-issuer ring owns it (and enables it)
    static inline thread_local const char tl_mark_ = 0;  // its address tells threads apart
    uint32_t direct_drain(PktBuf** out, uint32_t room);
    uint32_t direct_recv(PktBuf** out, uint32_t room);
    void direct_send();
    bool rx_local_pending() const { return gro_rx_.active || dr_next_ < dr_count_; }
    PktBuf* copy_in(const uint8_t* payload, uint32_t len, const sockaddr_in& from);
    void complete_tx(const io_uring_cqe* cqe);
    void release_tx(uint32_t slot);
    PktBuf* complete_rx_multishot(const io_uring_cqe* cqe, uint32_t& bufs_back);
    PktBuf* complete_rx_batched(const io_uring_cqe* cqe);
    void drain_for_close();
    void enable_st();  // single issuer: the first polling thread enables the ring (and owns it)
    int submit(bool get_events);

    UringUdpConfig cfg_;
    PktPool& rx_pool_;
    PktPool& tx_pool_;
    int fd_ = -1;
    bool fixed_file_ = false;
    bool ring_up_ = false;
    io_uring ring_{};
    Ipv4Addr ip_{};
    uint16_t port_ = 0;
    UringRxMode mode_ = UringRxMode::kAuto;
    bool coop_ = false;
    bool defer_ = false;
    bool enabled_ = true;       // false: created disabled (single issuer), enabled by enable_st()
    bool zc_ = false;
    std::string notes_;         // describe()'s tail: zero copy, and what the kernel or env refused
    bool gso_ = false;
    bool gro_ = false;
    GroPending gro_rx_;
    bool want_events_ = false;  // the kernel has completion work for us: run it with the next call
    const void* owner_ = nullptr;  // single issuer: tl_mark_ of the thread that polled first (the owner)
    int wake_fd_ = -1;          // eventfd: a write ends wait()
    bool wake_armed_ = false;   // a read of it is in flight
    uint64_t wake_buf_ = 0;     // where that read goes
    uint64_t drops_sampled_ns_ = 0;
    // receive
    bool rx_armed_ = false;     // multishot: armed and not ended
    uint32_t rx_rearm_ = 0;     // batched: slots to re-submit
    uint8_t* rx_mem_ = nullptr; // rx buffers (multishot: rx_buffers, batched: rx_batch), each rx_stride_
    size_t rx_mem_bytes_ = 0;
    uint32_t rx_stride_ = 0;
    io_uring_buf_ring* buf_ring_ = nullptr;
    size_t buf_ring_bytes_ = 0;
    msghdr rx_msg_{};  // multishot: the template (name room, no control)
    std::vector<RxSlot> rx_slots_;
    std::vector<uint32_t> rx_rearm_list_;
    // the direct path's receive: kDirectMsgs buffers of rx_buffer_bytes (+ the GRO cmsg), what
    // the last recvmmsg took (dr_count_) and how far rx_burst got (dr_next_)
    uint8_t* dr_mem_ = nullptr;
    size_t dr_mem_bytes_ = 0;
    uint32_t dr_stride_ = 0;
    std::unique_ptr<mmsghdr[]> dr_msgs_;
    std::unique_ptr<iovec[]> dr_iov_;
    std::unique_ptr<sockaddr_in[]> dr_from_;
    uint32_t dr_count_ = 0, dr_next_ = 0;
    // ... and its sends
    std::unique_ptr<mmsghdr[]> dt_msgs_;
    std::unique_ptr<DirectTx[]> dt_;
    std::unique_ptr<iovec[]> dt_iov_;  // kMaxIov per message
    // the owner's last wait, counted by its next flush (the wait may run while others poll)
    bool waited_ = false;
    int wait_result_ = 0;
    // send
    std::vector<TxSlot> tx_slots_;
    std::unique_ptr<iovec[]> tx_iov_;  // kMaxIov per slot
    std::unique_ptr<PktBuf*[]> tx_pkts_;  // kMaxGsoSegs per slot
    uint32_t tx_free_ = UINT32_MAX;    // free list head
    uint32_t tx_inflight_ = 0;
    std::vector<TxPending> txq_;       // ring of tx_queue_limit (power of two)
    uint32_t txq_head_ = 0, txq_count_ = 0;
    // binding
    struct Binding {
        uint16_t port;
        UdpHandler* h;
    };
    std::vector<Binding> bindings_;
    UringUdpCounters ctr_;
};

}  // namespace iccs
