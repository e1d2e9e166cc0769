// convergence.hpp: parallel connections striped over a cluster's proxies (DESIGN.md §1-§3).
//
// An application thread "thinks" it has one connection to a thread of another cluster; under it,
// every message goes to one of the cluster's proxies (dispatch), each proxy carries it over its
// own reliable sub-connection, and the receiving module puts messages back in order (ordered
// connections) and large messages back together (striping).
//
// Threading: one Convergence per compute thread, used only by that thread (`_st` in spirit: no
// locks inside). Connections belong to the module that made them. Modules of one cluster share
// the proxies, the buffer pool and the port table (ConvNet); ports are unique per cluster.
//
// Time-outs: every call that can wait takes timeout_us: 0 = do not wait, kForever = wait as long
// as it takes (a down peer still ends the wait). While a call waits it keeps serving every
// connection of the module (taking arrivals, answering connects, sending credit), so two
// threads that send to each other cannot deadlock inside the library.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "conn_rx.hpp"
#include "conv_setup.hpp"
#include "dispatch.hpp"
#include "ipv4_hdr.hpp"
#include "rings.hpp"

namespace iccs {

class Convergence;

// One parallel connection. Owned by its module; valid until close() returns.
class Connection {
   public:
    Endpoint local() const { return local_; }
    Endpoint remote() const { return remote_; }
    bool ordered() const { return ordered_; }
    Dispatch dispatch() const { return dispatch_; }
    uint32_t conn_id() const { return conn_id_; }
    // Messages sent / taken on this connection, and what its receive side counted.
    uint64_t msgs_sent() const { return next_seq_; }
    uint64_t msgs_received() const { return rx_.msgs_taken(); }
    const ConnRxCounters& rx_counters() const { return rx_.counters(); }

   private:
    friend class Convergence;
    enum class State { kConnecting, kOpen, kRefused, kClosed };
    Connection(bool ordered, uint32_t window_msgs, uint32_t window_bytes, uint32_t* packet_budget)
        : rx_(ordered, window_msgs, window_bytes, packet_budget) {}
    Endpoint local_, remote_;
    uint32_t conn_id_ = 0;
    bool ordered_ = true;
    Dispatch dispatch_ = Dispatch::kRoundRobin;
    State state_ = State::kConnecting;
    bool accepted_ = false;      // server side
    bool owns_port_ = false;     // client side: the ephemeral port is ours to unbind
    uint32_t refuse_reason_ = 0; // kRefuse: kRefuseNoListener or kRefuseBacklogFull
    // send side
    uint32_t next_seq_ = 0;
    uint64_t bytes_sent_ = 0;
    uint32_t peer_window_bytes_ = 0, peer_window_msgs_ = 0;
    uint64_t peer_bytes_taken_ = 0;
    uint32_t peer_credit_msgs_ = 0;  // the peer has taken every message below this conn_seq
    bool peer_closed_ = false;       // kClose received
    uint32_t peer_total_msgs_ = 0;   // from its kClose
    // receive side
    ConnRx rx_;
    uint64_t credited_bytes_ = 0;    // what our last kCredit said
    uint32_t credited_msgs_ = 0;
    uint32_t my_window_bytes_ = 0, my_window_msgs_ = 0;  // what we promised to hold
    uint64_t credit_asked_ns_ = 0;   // when we last asked the peer for credit
};

// A buffer the library hands out for a zero-copy send: write the message into its segments,
// then send_buffer(). Holds pieces sized for the connection's striping.
class SendBuffer {
   public:
    SendBuffer() = default;
    SendBuffer(SendBuffer&& o) noexcept { *this = std::move(o); }
    SendBuffer& operator=(SendBuffer&& o) noexcept;
    ~SendBuffer() { reset(); }
    void reset();
    uint32_t size() const { return len_; }
    // The writable bytes, piece by piece (contiguous within a piece).
    uint32_t segments() const { return static_cast<uint32_t>(pieces_.size()); }
    std::span<uint8_t> segment(uint32_t i);
    // Copy bytes in at a message offset (crossing pieces as needed); false if out of range.
    bool write(uint32_t offset, const void* src, uint32_t n);
    // The one-piece case: the whole message, contiguous (nullptr if striped).
    uint8_t* data() { return pieces_.size() == 1 ? segment(0).data() : nullptr; }

   private:
    friend class Convergence;
    std::vector<PktBuf*> pieces_;  // each: data() at its ConvHdr, payload follows
    uint32_t len_ = 0, psize_ = 0;
    Connection* conn_ = nullptr;
};

struct PollItem {
    Connection* conn = nullptr;   // or
    uint16_t listen_port = 0;     // when conn is nullptr: a listening port (kAcceptable)
    uint32_t events = 0;          // what to wait for
    uint32_t revents = 0;         // what is ready (set by poll)
    static constexpr uint32_t kReadable = 1;    // recv would not wait (a message, end of stream, or an error)
    static constexpr uint32_t kWritable = 2;    // a send of up to the threshold would not wait for window
    static constexpr uint32_t kAcceptable = 4;  // accept would not wait
    static constexpr uint32_t kError = 8;       // the connection failed (peer down, refused)
};

struct ConvCounters {
    uint64_t msgs_sent = 0, bytes_sent = 0, pieces_sent = 0;
    uint64_t msgs_received = 0, bytes_received = 0;
    uint64_t ring_full_waits = 0;    // a proxy ring was full: waited for it
    uint64_t pool_empty_waits = 0;   // no buffer: waited for one
    uint64_t window_waits = 0;       // the peer's window was full: waited for credit
    uint64_t stale = 0;              // messages for no connection of this module (dropped)
    uint64_t credits_sent = 0;
    static constexpr uint32_t kProxiesCounted = 64;
    uint64_t to_proxy[kProxiesCounted] = {};  // messages and pieces handed to each local proxy
};

class Convergence {
   public:
    Convergence(const ConvNet& net, uint16_t thread, const ConvConfig& cfg);
    ~Convergence();  // closes what is open without waiting
    Convergence(const Convergence&) = delete;
    Convergence& operator=(const Convergence&) = delete;

    // --- server ---
    // Bind `port` to this thread and accept connections on it.
    ConvError listen(uint16_t port);
    // The next connection made to a listening port.
    ConvError accept(uint16_t port, Connection*& out, int64_t timeout_us = kForever);

    // --- client ---
    // Open a parallel connection to (cluster, port) of this logical machine; waits for the
    // answer (kRefused when nobody listens there, kPeerDown when the cluster is gone).
    ConvError connect(Endpoint remote, Connection*& out, const ConnOptions& o = {},
                      int64_t timeout_us = kDefaultTimeout);
    // The same by the NI addresses (IPv4 of every proxy) of the remote cluster. Addresses of a
    // cluster of this machine resolve to it (its sub-connections are already open); addresses of
    // another logical machine are refused with kUnsupported (see convergence/README.md).
    ConvError connect(std::span<const Ipv4Addr> ni_addrs, uint16_t port, Connection*& out,
                      const ConnOptions& o = {}, int64_t timeout_us = kDefaultTimeout);

    // --- data ---
    // Copying send: waits (up to timeout_us) for window and buffers; a message is sent whole
    // or not at all. A message may be as large as the receiver's byte window (kNoMemory beyond).
    ConvError send(Connection* c, const void* data, uint32_t len, int64_t timeout_us = kForever);
    // The same for a message whose bytes lie in several places (a header and a user's buffers:
    // mpi/provider/'s in-rank bridge): each piece is copied from them straight into its packet
    // buffers, with the sums kept as send's copy keeps them. The message is their concatenation.
    ConvError sendv(Connection* c, std::span<const iovec> parts, int64_t timeout_us = kForever);
    // Zero-copy send: a buffer of len bytes to fill, then send_buffer() (which consumes it).
    ConvError alloc_send_buffer(Connection* c, uint32_t len, SendBuffer& out, int64_t timeout_us = kForever);
    ConvError send_buffer(Connection* c, SendBuffer& buf, int64_t timeout_us = kForever);
    // The largest message alloc_send_buffer hands out as one contiguous piece (SendBuffer::data()
    // not nullptr): one packet buffer's room after the headers, at most the stripe threshold.
    uint32_t contiguous_send_max() const;
    // Receive into buf (cap bytes): len = the message's size; a message larger than cap is
    // truncated to cap (len still says its size).
    ConvError recv(Connection* c, void* buf, uint32_t cap, uint32_t& len, int64_t timeout_us = kForever);
    // Receive without copying: the message stays in the library's buffer until `out` dies (which
    // must be before this module's end).
    ConvError recv_msg(Connection* c, RecvMsg& out, int64_t timeout_us = kForever);
    // Wait until one of the items is ready; returns how many are (0 on time-out).
    int poll(std::span<PollItem> items, int64_t timeout_us);

    // Close: say we send no more, wait (up to timeout_us) until the peer took everything we sent
    // (or closed, or went down), then free the connection. unsent = messages the peer had not
    // taken (0 when all arrived). Messages the peer still sends after this are dropped.
    ConvError close(Connection* c, int64_t timeout_us, uint64_t* unsent = nullptr);
    // Stop listening on port (connections already accepted stay).
    void unlisten(uint16_t port);

    // Take what arrived and answer control messages, without waiting. Calls that wait do this.
    void progress();
    // For a thread that serves more than this module (mpi/provider/'s agent: a rank's shared-
    // memory ring beside the rank's connections): one pass of the wait every blocking call makes
    // (a spin that runs the proxies' iterations under the assist, then a sleep on this thread's
    // waker until a proxy delivers or someone wakes it). other_work() is asked again after the
    // thread said it sleeps, so work whose producer wakes the waker after making it is never slept
    // on. started_ns: when the caller began waiting (monotonic_ns). Returns the time it went by.
    uint64_t idle(uint64_t started_ns, uint64_t deadline_ns, const std::function<bool()>& other_work);
    // The caller's wait is over (it found work): stop watching the proxies (the assist).
    void idle_end() {
        if (watching_) set_watching(false);
    }
    const ConvCounters& counters() const { return ctr_; }
    uint16_t thread() const { return thread_; }
    uint16_t cluster() const { return net_.cluster; }
    uint32_t stripe_threshold() const { return threshold_; }
    // Why the last call failed, in words (names the endpoint, the value, the cause). A would-block
    // keeps only what names it, and its words are put together here, when someone asks: a
    // non-blocking poll that finds nothing is the hot loop of a bridge or a runtime endpoint, and
    // building the words there cost an allocation per empty poll (10-17% of a sending MPI
    // bridge's CPU on a 1 MiB stream).
    const std::string& last_error() const;

   private:
    struct Listener {
        uint16_t port;
        std::vector<Connection*> ready;
    };
    static uint64_t key(uint16_t local_port, uint16_t remote_cluster, uint16_t remote_port) {
        return uint64_t{local_port} << 32 | uint64_t{remote_cluster} << 16 | remote_port;
    }
    ConvError fail(ConvError e, std::string msg);
    void take(PktBuf* m);
    void on_connect(PktBuf* m, const ConvHdr& h);
    // A header for c with its endpoints, type, flags and conn_id (one piece; the rest zero).
    ConvHdr header(const Connection& c, ConvType type) const;
    void send_control(Connection& c, ConvType type, const void* body, uint32_t body_len, uint32_t msg_len = 0);
    void maybe_credit(Connection& c, bool force);
    void ask_credit(Connection& c);
    bool window_open(const Connection& c, uint32_t len) const;
    uint16_t pick_proxy(Connection& c);
    // Hand one message (or piece) to a proxy; waits on a full ring. False on g_stop-like abort.
    void enqueue(Connection& c, PktBuf* m);
    // Wait a little for something to happen (not past deadline_ns); started_ns: when the caller
    // began waiting (it spins briefly, then sleeps until a proxy wakes it). Returns the time it
    // went by (spin_clock: at most a few passes, or one sleep, old) for the caller's deadline.
    uint64_t wait_some(uint64_t started_ns, uint64_t deadline_ns, const std::function<bool()>* other_work = nullptr);
    // Adaptive polling's assist: while this thread waits in a loop it watches its cluster's
    // proxies (rings.hpp, Waker::watch_enter), polling them itself, so frames for them ring no
    // doorbell; it stops watching before it sleeps and when the loop ends (Unwatch). A call made
    // while the caller's own wait watches (idle() until idle_end(): the MPI agent's bridge, whose
    // loop makes non-blocking sends and receives between its passes) leaves that watch alone: it
    // ended it on every receive that found nothing, so during most of the bridge's loop nobody
    // watched, and the peer's frames rang the sleeping proxy thread awake on another core
    // (mpi/provider/README.md, "Waiting").
    void set_watching(bool on, bool to_sleep = false);
    struct Unwatch {
        Convergence& c;
        const bool callers = c.watching_;  // the caller's wait watches: not this call's to end
        ~Unwatch() {
            if (c.watching_ && !callers) c.set_watching(false);
        }
    };
    ConvError wait_window(Connection* c, uint32_t len, int64_t timeout_us);
    // How many pieces of at most piece_max bytes len needs; kNoMemory beyond the 16-bit count.
    ConvError count_pieces(uint32_t len, uint32_t piece_max, uint32_t& cnt);
    ConvError alloc_pieces(Connection* c, uint32_t len, SendBuffer& out, uint64_t deadline_ns);
    ConvError check_open(Connection* c, bool for_send);
    ConvError check_size(Connection* c, uint32_t len);
    void destroy(Connection* c);
    static uint64_t deadline(int64_t timeout_us);

    ConvNet net_;
    // Where a copying send chains its payload from: net_.bulk_pool first, then net_.pool.
    std::optional<FallbackPktPool> payload_pool_;
    uint16_t thread_;
    bool watching_ = false;  // set_watching
    uint64_t spin_clock(uint64_t started_ns);  // wait_some's clock: read every kInlineClockEvery passes
    void spin_fresh();                         // the next pass reads it (this one gave the core away)
    uint64_t spin_start_ = 0;  // inline and assist spins: the started_ns of wait_some's current wait
    uint32_t spin_passes_ = 0;  // and its passes (the clock is read every kInlineClockEvery)
    uint64_t spin_now_ = 0;     // the time given to those passes
    uint64_t last_yield_ns_ = 0;      // adaptive: the assist spin's last sched_yield ...
    uint64_t yield_gap_ns_ = 50'000;  // ... and the spinning time to the next (kAssistYieldGapNs and up)
    ConvConfig cfg_;
    uint32_t threshold_;
    DispatchState ds_;
    uint32_t next_msg_id_ = 0;
    std::unordered_map<uint64_t, Connection*> conns_;  // by key(local port, remote cluster, remote port)
    std::vector<std::unique_ptr<Connection>> owned_;
    std::vector<Listener> listeners_;
    ConvCounters ctr_;
    // A would-block's cause, its words not yet made (last_error makes them).
    enum class WouldBlock : uint8_t { kNone, kWindowFull, kNoBuffers, kNoMessage };
    ConvError would_block(WouldBlock why, Endpoint remote = {});
    mutable std::string err_;
    mutable WouldBlock wb_ = WouldBlock::kNone;
    Endpoint wb_remote_{};
    uint32_t packet_budget_;  // ConvConfig::zero_copy_packets not yet in use
};

}  // namespace iccs
