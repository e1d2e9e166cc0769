// conv_setup.hpp: what a convergence module (convergence.hpp) is set up with and answers in: the
// time-out words, the errors (ConvError) and endpoints it names, its configuration (ConvConfig),
// a connection's options (ConnOptions), what it needs of its cluster (ConvNet), and the default
// stripe threshold.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dispatch.hpp"
#include "ipv4_hdr.hpp"
#include "rings.hpp"

namespace iccs {

inline constexpr int64_t kForever = -1;
inline constexpr int64_t kDefaultTimeout = -2;  // connect: ConvConfig::connect_timeout_ms

// What a call can end with. Names are stable; conv_strerror() says what happened in words.
enum class ConvError {
    kOk = 0,
    kTimeout,      // the time-out passed
    kWouldBlock,   // timeout 0 and the call would have had to wait
    kRefused,      // nobody bound the remote port (or its accept backlog was full)
    kPeerDown,     // the remote cluster stopped answering (its proxies reported it)
    kEndOfStream,  // recv: the peer closed and every message it sent was taken
    kClosed,       // the connection was closed locally (send after close, ...)
    kPortInUse,    // bind/listen: another thread of the cluster holds the port
    kBadArgument,  // a bad endpoint, size, or option (the message says which)
    kNoMemory,     // no buffers for a message right now (timeout 0), or a message too large
    kUnsupported,  // asked for something this build cannot do (the message says what)
};
const char* conv_strerror(ConvError e);

struct Endpoint {
    uint16_t cluster = 0;
    uint16_t port = 0;
    friend bool operator==(const Endpoint&, const Endpoint&) = default;
};
std::string to_string(Endpoint e);  // "cluster C port P", in the modules' error messages

// Per-module defaults; ConnOptions may override some per connection.
struct ConvConfig {
    Dispatch dispatch = Dispatch::kRoundRobin;
    bool ordered = true;
    uint32_t window_bytes = 8u << 20;      // bytes a receiver holds unconsumed at most [bytes]
    uint32_t window_msgs = 4096;           // messages a receiver holds unconsumed at most
    uint32_t stripe_threshold_bytes = 0;   // larger messages are cut into pieces [bytes]; 0 = one MTU's payload
    uint32_t accept_backlog = 64;          // connections a listener holds before accept()
    uint32_t connect_timeout_ms = 5000;    // connect() without its own time-out [ms]
    // Proxy receive buffers this thread's connections may keep for zero-copy recv_msg; beyond
    // it one-piece messages are copied (conn_rx.hpp), so untaken messages never starve a port.
    uint32_t zero_copy_packets = 256;
};

struct ConnOptions {
    enum class Order { kDefault, kOrdered, kUnordered };
    Order order = Order::kDefault;
    bool dispatch_set = false;
    Dispatch dispatch = Dispatch::kRoundRobin;  // used when dispatch_set
};

// What a module needs of its cluster (filled by the cluster runtime, compute/).
struct ConvNet {
    uint16_t cluster = 0;               // this cluster's id
    uint16_t clusters = 0;              // clusters in the logical machine
    uint32_t mtu_bytes = 1500;          // IPv4 MTU of the fabric (default stripe threshold)
    ClusterRings* rings = nullptr;      // rings, wakers, port table, peer state
    PktPool* pool = nullptr;            // message buffers (thread-safe: an rte_mempool)
    // Large message buffers (thread-safe), or nullptr: a copying send chains the payload that
    // does not fit the first buffer from here while it has any (jumbo frames on a DPDK fabric:
    // a 9000-byte frame spans 1-2 of them instead of 5 buffers of 2 KiB; ClusterMemory::bulk).
    PktPool* bulk_pool = nullptr;
    // The proxies' own stack sends the datagrams (a DPDK fabric; fabric udp: the kernel's): a
    // send sums each piece's payload as it copies it in, for the UDP checksum (PktBuf::sum).
    bool payload_sums = false;
    // The NI addresses (IPv4 of every proxy) of each cluster of this machine, for connect by
    // address. Index: cluster id.
    std::vector<std::vector<Ipv4Addr>> ni_addrs;
    // inline polling: run the proxies' loop on this thread (nullptr with proxy threads).
    // now_ns: the time (now_ns) of the pass, read by the caller (a wait reads it every
    // few passes of its spin, which run back to back: wait_some).
    std::function<void(uint64_t now_ns)> poll_inline;
    // adaptive polling's assist: run one iteration of proxy p's loop on this thread if no other
    // thread runs one (p < 0: of every proxy of the cluster); returns the work done (0: none, or
    // not taken). A waiting thread calls it before it yields or sleeps, a sender instead of
    // waking a sleeping proxy thread. now_ns: the time (now_ns) of the call, which the
    // caller read anyway. nullptr: leave all to the proxy threads.
    std::function<uint32_t(int32_t p, uint64_t now_ns)> poll_assist;
    // ... and for the last watcher to leave a sleeping proxy p (rings.hpp, Waker::watch_leave):
    // one iteration, waiting for a running one to end instead of giving up; to_sleep: the thread
    // goes to sleep next (the proxy thread is woken if a timer is armed: it slept past them).
    std::function<uint32_t(uint32_t p, bool to_sleep)> poll_leaving;
};

// The payload bytes of one message per pieces of the default threshold: MTU - IPv4 - UDP -
// slidwin - convergence headers.
uint32_t default_stripe_threshold(uint32_t mtu_bytes);

}  // namespace iccs
