// interop.cpp: `iccs-cli interop`: one stack instance on a real Linux interface through DPDK's
// net_af_packet, talking plain UDP (no slidwin) with the kernel. It answers ARP, echoes every
// datagram that arrives on --port back to its sender, and with --peer also sends datagrams of the
// given sizes to a kernel UDP echo server and checks that each comes back intact. The sizes go
// past the MTU, so both directions exercise IP fragmentation and reassembly against Linux.
// Used by tests/integration/interop_afpacket.py (two network namespaces joined by a veth pair).
#include "interop.hpp"

#include <arpa/inet.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "dpdk_env.hpp"
#include "options.hpp"
#include "dpdk_pool.hpp"
#include "port.hpp"
#include "proxy.hpp"
#include "stack.hpp"

namespace iccs {

namespace {

const char* kInteropHelp =
    "usage: iccs-cli interop --iface NAME --ip A.B.C.D [options]\n"
    "  Runs one iccs stack (eth, arp, ipv4 with fragmentation/reassembly, udp; no slidwin) on the\n"
    "  Linux interface NAME through DPDK's net_af_packet, for interoperability tests against the\n"
    "  kernel (run it as root, e.g. in a network namespace with one end of a veth pair; the kernel\n"
    "  must not have --ip configured on NAME). It answers ARP for --ip, echoes every UDP datagram\n"
    "  that arrives on --port back to its sender, and with --peer sends --send datagrams (sizes\n"
    "  cycling through --sizes) from --src-port to PEER:PEER_PORT, which must echo them, one at a\n"
    "  time (resent after 1 s, at most 3 times), checking each echo byte for byte.\n"
    "  It stops after --seconds, or earlier once every datagram it sent came back and --expect\n"
    "  datagrams arrived on --port (and were echoed). Prints the non-zero stack counters and\n"
    "  `interop: sent N, echoed back M, received K, echoed K`; exits 0 when everything expected arrived.\n"
    ;

std::atomic<bool> g_stop{false};

[[noreturn]] void usage_error(const std::string& msg) { cli::usage_error("interop", msg); }

// The content of datagram `seq` of `size` bytes: distinct per datagram, so a wrong or stale echo
// is told apart from the right one.
uint8_t pattern_byte(uint32_t seq, uint32_t size, uint32_t j) {
    return static_cast<uint8_t>((j * 131u + seq * 29u + size) ^ (j >> 8) ^ (seq >> 3));
}

constexpr unsigned kAfpBlock = 4096, kAfpFrame = 2048, kAfpFrames = 512;  // the PMD's defaults, spelled out

// Everything that arrives on the echo port goes back to where it came from.
class EchoHandler final : public UdpHandler {
   public:
    EchoHandler(Stack& stack, PktPool& pool, uint16_t port) : stack_(stack), pool_(pool), port_(port) {}
    void udp_deliver(PktBuf* p, const UdpMeta& meta, uint64_t) override {
        ++received;
        bytes += p->pkt_len;
        // The buffer is ours: reuse it when its head segment can take the udp+ipv4+eth headers in
        // front; otherwise (a view, a shared buffer, short headroom) copy into fresh segments.
        constexpr uint32_t kNeed = kUdpHdrLen + kIpv4HdrLen + kEthHdrLen;
        if (p->direct != nullptr || p->headroom() < kNeed || pkt_shared(p)) {
            PktBuf* c = pkt_copy(pool_, p, kPktHeadroom);
            pkt_free(p);
            if (c == nullptr) {
                ++echo_fail;
                return;
            }
            ++copied;
            p = c;
        }
        if (stack_.udp_output(p, port_, meta.src, meta.src_port))
            ++echoed;
        else
            ++echo_fail;
    }
    uint64_t received = 0, echoed = 0, echo_fail = 0, copied = 0, bytes = 0;

   private:
    Stack& stack_;
    PktPool& pool_;
    uint16_t port_;
};

// Sends datagrams to the kernel's echo server one at a time and checks what comes back.
class PeerClient final : public UdpHandler {
   public:
    PeerClient(Stack& stack, PktPool& pool, uint16_t src_port, Ipv4Addr peer, uint16_t peer_port,
               std::vector<uint32_t> sizes)
        : stack_(stack), pool_(pool), src_port_(src_port), peer_(peer), peer_port_(peer_port) {
        for (uint32_t i = 0; i < sizes.size(); ++i) dgrams_.push_back(Dgram{i, sizes[i], false});
    }

    void udp_deliver(PktBuf* p, const UdpMeta& meta, uint64_t) override {
        if (!(meta.src == peer_) || meta.src_port != peer_port_) {
            ++stray;
            pkt_free(p);
            return;
        }
        buf_.resize(p->pkt_len);
        pkt_read(p, 0, p->pkt_len, buf_.data());
        pkt_free(p);
        // The one in flight first, then any other (a late echo of a resent datagram).
        auto matches = [&](const Dgram& d) {
            if (d.size != buf_.size()) return false;
            for (uint32_t j = 0; j < d.size; ++j)
                if (buf_[j] != pattern_byte(d.seq, d.size, j)) return false;
            return true;
        };
        Dgram* hit = nullptr;
        if (next_ > 0 && matches(dgrams_[next_ - 1])) hit = &dgrams_[next_ - 1];
        for (size_t i = 0; hit == nullptr && i < dgrams_.size(); ++i)
            if (matches(dgrams_[i])) hit = &dgrams_[i];
        if (hit == nullptr) {
            ++bad;
            if (bad <= 5)
                std::printf("interop: echo of %zu bytes from the peer matches no datagram sent\n", buf_.size());
            return;
        }
        if (hit->echoed) {
            ++duplicates;
            return;
        }
        hit->echoed = true;
        ++echoed_back;
    }

    // Send the next datagram when the previous one came back (or was given up on).
    void step(uint64_t now) {
        if (open_) {
            const Dgram& d = dgrams_[next_ - 1];
            if (d.echoed) {
                open_ = false;
            } else if (now - sent_at_ < kRetryNs) {
                return;
            } else if (tries_ < kMaxTries) {
                ++resent;
                send(d, now);
                return;
            } else {
                ++lost;
                open_ = false;
                std::printf("interop: no echo for datagram %u (%u bytes) after %u tries\n", d.seq, d.size, tries_);
            }
        }
        if (next_ == dgrams_.size()) return;
        tries_ = 0;
        open_ = true;
        ++sent;
        send(dgrams_[next_++], now);
    }

    bool done() const { return next_ == dgrams_.size() && (!open_ || dgrams_[next_ - 1].echoed); }
    uint64_t sent = 0, echoed_back = 0, resent = 0, lost = 0, bad = 0, duplicates = 0, stray = 0, send_fail = 0;

   private:
    static constexpr uint64_t kRetryNs = 1'000'000'000;
    static constexpr uint32_t kMaxTries = 3;
    struct Dgram {
        uint32_t seq, size;
        bool echoed;
    };
    void send(const Dgram& d, uint64_t now) {
        ++tries_;
        sent_at_ = now;
        buf_.resize(d.size);
        for (uint32_t j = 0; j < d.size; ++j) buf_[j] = pattern_byte(d.seq, d.size, j);
        PktBuf* p = pkt_alloc(pool_);
        if (p == nullptr || !pkt_write(p, pool_, buf_.data(), d.size)) {
            if (p != nullptr) pkt_free(p);
            ++send_fail;
            return;
        }
        if (!stack_.udp_output(p, src_port_, peer_, peer_port_)) ++send_fail;
    }

    Stack& stack_;
    PktPool& pool_;
    uint16_t src_port_;
    Ipv4Addr peer_;
    uint16_t peer_port_;
    std::vector<Dgram> dgrams_;
    std::vector<uint8_t> buf_;
    size_t next_ = 0;
    uint32_t tries_ = 0;
    bool open_ = false;  // dgrams_[next_ - 1] is in flight
    uint64_t sent_at_ = 0;
};

struct Options {
    std::string iface;
    Ipv4Addr ip{};
    bool have_ip = false;
    std::string mac = "auto";
    uint16_t port = 7777;
    uint32_t mtu = 1500;
    uint32_t seconds = 10;
    uint64_t expect = 0;
    Ipv4Addr peer{};
    bool have_peer = false;
    int peer_port = -1, src_port = -1;
    uint32_t send = 20;
    std::vector<uint32_t> sizes = {1, 100, 1472, 1473, 4000, 9000, 65507};
    uint32_t send_delay_ms = 0;
    bool kernel_defrag = false;
};

const std::vector<cli::Option>& interop_options() {
    static const std::vector<cli::Option> o = {
        cli::text_opt("--iface", "NAME", "Linux interface (must exist and be up; required)"),
        cli::text_opt("--ip", "A.B.C.D", "the stack's IPv4 address (required)"),
        cli::text_opt("--mac", "auto|MAC", "the stack's MAC (default auto: the interface's; the port is promiscuous)"),
        cli::uint_opt("--port", "N", 1, 65535, "UDP port of the echo service", "7777"),
        cli::uint_opt("--mtu", "N", kMtuMin, 1900, "IPv4 MTU (af_packet frames are 2048 bytes)", "1500"),
        cli::uint_opt("--seconds", "S", 1, 86400, "run at most S seconds", "10"),
        cli::uint_opt("--expect", "N", 0, 1'000'000'000, "stay until N datagrams arrived on --port", "0"),
        cli::text_opt("--peer", "A.B.C.D", "send datagrams to this kernel UDP echo server ..."),
        cli::uint_opt("--peer-port", "N", 1, 65535, "... on this UDP port (default: --port)"),
        cli::uint_opt("--src-port", "N", 1, 65535, "our UDP port for them (default: --port + 1)"),
        cli::uint_opt("--send", "N", 0, 1'000'000, "how many datagrams", "20"),
        cli::uint_list_opt("--sizes", "a,b,c", 0, kUdpMaxPayload, "their payload sizes", "1,100,1472,1473,4000,9000,65507"),
        cli::uint_opt("--send-delay", "MS", 0, 3'600'000, "wait MS milliseconds after start before sending", "0"),
        cli::flag("--kernel-defrag",
                  "keep DPDK 22.11 af_packet's PACKET_FANOUT_FLAG_DEFRAG: the kernel then reassembles fragments "
                  "before the stack sees them, and datagrams longer than a ring frame (~1980 bytes) arrive "
                  "truncated. By default the PMD's socket is replaced by an identical one without fanout, so the "
                  "stack receives the fragments as they are on the wire."),
    };
    return o;
}

Options parse(int argc, char** argv) {
    cli::OptionSet set;
    set.who = "interop";
    set.own = &interop_options();
    const cli::Args p = cli::parse_options(set, argc, argv, 0, std::string(kInteropHelp) + cli::option_help(set));
    Options o;
    o.kernel_defrag = p.flag("--kernel-defrag");
    o.iface = p.text("--iface");
    if (p.has("--ip")) {
        if (!parse_ipv4(p.text("--ip"), o.ip)) usage_error("bad IPv4 address '" + p.text("--ip") + "' for --ip");
        o.have_ip = true;
    }
    if (p.has("--mac")) {
        const std::string v = p.text("--mac");
        MacAddr m;
        if (v != "auto" && !parse_mac(v, m)) usage_error("bad MAC '" + v + "' for --mac (auto or xx:xx:xx:xx:xx:xx)");
        o.mac = v;
    }
    o.port = static_cast<uint16_t>(p.u64("--port", o.port));
    o.mtu = static_cast<uint32_t>(p.u64("--mtu", o.mtu));
    o.seconds = static_cast<uint32_t>(p.u64("--seconds", o.seconds));
    o.expect = p.u64("--expect", o.expect);
    if (p.has("--peer")) {
        if (!parse_ipv4(p.text("--peer"), o.peer)) usage_error("bad IPv4 address '" + p.text("--peer") + "' for --peer");
        o.have_peer = true;
    }
    if (p.has("--peer-port")) o.peer_port = static_cast<int>(p.u64("--peer-port", 0));
    if (p.has("--src-port")) o.src_port = static_cast<int>(p.u64("--src-port", 0));
    o.send = static_cast<uint32_t>(p.u64("--send", o.send));
    if (p.has("--sizes")) {
        o.sizes.clear();
        for (const uint64_t n : p.u64_list("--sizes")) o.sizes.push_back(static_cast<uint32_t>(n));
    }
    o.send_delay_ms = static_cast<uint32_t>(p.u64("--send-delay", o.send_delay_ms));
    if (o.iface.empty()) usage_error("--iface is required (see iccs-cli interop --help)");
    if (!o.have_ip) usage_error("--ip is required (see iccs-cli interop --help)");
    if (o.peer_port < 0) o.peer_port = o.port;
    if (o.src_port < 0) o.src_port = o.port == 65535 ? 65534 : o.port + 1;
    if (o.have_peer && o.src_port == o.port)
        usage_error("--src-port must differ from --port (the peer's echoes would be echoed again)");
    return o;
}

// Frames the stack produced that the device has not taken yet (af_packet's ring can be full).
class TxQueue {
   public:
    TxQueue(Stack& stack, Port& port) : stack_(stack), port_(port) {}
    ~TxQueue() {
        for (PktBuf* f : q_) pkt_free(f);
    }
    // Take what the stack has queued, then hand the device as much as it takes.
    void flush() {
        PktBuf* f[64];
        for (uint32_t n; (n = stack_.tx_take(f, 64)) > 0;)
            for (uint32_t i = 0; i < n; ++i) {
                if (q_.size() >= 65536) {
                    ++drops;
                    pkt_free(f[i]);
                } else {
                    q_.push_back(f[i]);
                }
            }
        while (!q_.empty()) {
            const uint32_t k = static_cast<uint32_t>(std::min<size_t>(q_.size(), 64));
            std::copy(q_.begin(), q_.begin() + k, f);
            const uint32_t sent = port_.tx_burst(f, k);
            q_.erase(q_.begin(), q_.begin() + sent);
            if (sent < k) break;
        }
    }
    bool empty() const { return q_.empty(); }
    uint64_t drops = 0;

   private:
    Stack& stack_;
    Port& port_;
    std::deque<PktBuf*> q_;
};

// Polls the port until --seconds, a signal, or everything expected arrived; then lets the last
// echoes out. true when it finished (not stopped, not out of time).
bool poll_until_done(const Options& o, Port& port, Stack& stack, TxQueue& txq, const EchoHandler& echo,
                     PeerClient* client) {
    const uint64_t t0 = now_ns();
    const uint64_t deadline = t0 + uint64_t{o.seconds} * 1'000'000'000ull;
    const uint64_t send_at = t0 + uint64_t{o.send_delay_ms} * 1'000'000ull;
    uint64_t last_timers = t0;
    bool finished = false;
    PktBuf* frames[64];
    while (!g_stop.load(std::memory_order_relaxed)) {
        const uint64_t now = now_ns();
        if (now >= deadline) break;
        const uint32_t n = port.rx_burst(frames, 64);
        if (n > 0) stack.input_burst(frames, n, now);
        if (now - last_timers >= 1'000'000) {
            stack.timers(now);
            last_timers = now;
        }
        if (client != nullptr && now >= send_at) client->step(now);
        txq.flush();
        if ((client == nullptr || client->done()) && echo.received >= o.expect && (client != nullptr || o.expect > 0)) {
            finished = true;
            break;
        }
        if (n == 0 && txq.empty()) {
            const timespec nap{0, 20'000};
            nanosleep(&nap, nullptr);
        }
    }
    const uint64_t drain_until = now_ns() + 500'000'000ull;
    while ((!txq.empty() || stack.tx_queued() > 0) && now_ns() < drain_until) txq.flush();
    std::printf("interop: %s after %.2f s\n", g_stop.load() ? "stopped by signal" : finished ? "done" : "time is up",
                double(now_ns() - t0) / 1e9);
    return finished;
}

// The counters and the verdict line; true when every datagram expected came and went intact.
bool print_interop_report(const Options& o, Port& port, Stack& stack, const TxQueue& txq, const EchoHandler& echo,
                          const PeerClient* client) {
    using ull = unsigned long long;
    std::printf("counters (non-zero):\n");
    stack.counters().for_each([](const char* name, const char*, uint64_t v) {
        if (v != 0) std::printf("  %-22s %llu\n", name, static_cast<ull>(v));
    });
    const PortCounters& pc = port.counters();
    std::printf("  port rx_frames %llu tx_frames %llu tx_ring_full %llu; tx queue drops %llu\n", (ull)pc.rx_frames,
                (ull)pc.tx_frames, (ull)pc.tx_ring_full, (ull)txq.drops);
    std::printf("  echo: received %llu (%llu bytes) echoed %llu failed %llu copied %llu\n", (ull)echo.received,
                (ull)echo.bytes, (ull)echo.echoed, (ull)echo.echo_fail, (ull)echo.copied);
    uint64_t sent = 0, back = 0;
    bool client_ok = true;
    if (client != nullptr) {
        sent = client->sent;
        back = client->echoed_back;
        std::printf("  peer: sent %llu resent %llu echoed back %llu lost %llu bad %llu duplicates %llu "
                    "stray %llu send failures %llu\n",
                    (ull)client->sent, (ull)client->resent, (ull)client->echoed_back, (ull)client->lost,
                    (ull)client->bad, (ull)client->duplicates, (ull)client->stray, (ull)client->send_fail);
        client_ok = client->sent == o.send && client->echoed_back == o.send && client->bad == 0;
    }
    std::printf("interop: sent %llu, echoed back %llu, received %llu, echoed %llu\n", (ull)sent, (ull)back,
                (ull)echo.received, (ull)echo.echoed);
    const bool ok = client_ok && echo.echoed == echo.received && echo.received >= o.expect && !g_stop.load();
    if (!ok) std::printf("interop: FAIL\n");
    return ok;
}

// The stack on an open port: echo (and the peer client), the poll loop, the report. Exit status.
int serve_on_port(const Options& o, Port& port, MempoolPktPool& pool) {
    StackConfig sc;
    sc.ip = o.ip;
    sc.mtu_bytes = o.mtu;
    sc.mac = port.mac();
    if (o.mac != "auto") parse_mac(o.mac, sc.mac);
    // Not the reassembly default of 1 s: the kernel echoes 65507-byte datagrams in 45
    // fragments, which take a while through af_packet on a loaded host.
    sc.reass.timeout_ns = 2'000'000'000;
    auto stack = std::make_unique<Stack>(sc, pool);
    EchoHandler echo(*stack, pool, o.port);
    stack->bind(o.port, &echo);
    std::unique_ptr<PeerClient> client;
    if (o.have_peer) {
        std::vector<uint32_t> sizes;
        for (uint32_t i = 0; i < o.send; ++i) sizes.push_back(o.sizes[i % o.sizes.size()]);
        client = std::make_unique<PeerClient>(*stack, pool, static_cast<uint16_t>(o.src_port), o.peer,
                                              static_cast<uint16_t>(o.peer_port), sizes);
        stack->bind(static_cast<uint16_t>(o.src_port), client.get());
    }
    std::printf("interop: ready on %s (iface %s) mac %s ip %s mtu %u, echo on udp port %u%s\n", port.name().c_str(),
                o.iface.c_str(), to_string(sc.mac).c_str(), to_string(o.ip).c_str(), o.mtu, o.port,
                o.kernel_defrag ? " (kernel defragments for af_packet)" : "");
    if (o.have_peer)
        std::printf("interop: sending %u datagrams from port %d to %s:%d\n", o.send, o.src_port,
                    to_string(o.peer).c_str(), o.peer_port);
    std::fflush(stdout);
    int rc = 1;
    {
        TxQueue txq(*stack, port);
        poll_until_done(o, port, *stack, txq, echo, client.get());
        rc = print_interop_report(o, port, *stack, txq, echo, client.get()) ? 0 : 1;
        // Tear down in dependency order: what the stack holds, then our queue (its destructor),
        // then the port (the caller).
        stack->bind(o.port, nullptr);
        if (client) stack->bind(static_cast<uint16_t>(o.src_port), nullptr);
        stack.reset();
    }
    if (pool.in_use() != 0)
        std::printf("interop: warning: %u stack pool segments still in use at exit (leak)\n", pool.in_use());
    return rc;
}

int run(const Options& o) {
    constexpr uint32_t kRxMbufs = 8192, kStackSegs = 8192, kStackRoom = 2048 + kPktHeadroom, kDescs = 8192;
    rte_mempool* rx = nullptr;
    rte_mempool* desc = nullptr;
    std::string err;
    int rc = 1;
    std::unique_ptr<MempoolPktPool> pool = MempoolPktPool::create("iop-stk", kStackSegs, kStackRoom, err);
    if (pool) {
        rx = rte_pktmbuf_pool_create("iop-rx", kRxMbufs, 256, rx_priv_size(), RTE_MBUF_DEFAULT_BUF_SIZE,
                                     SOCKET_ID_ANY);
        desc = rte_pktmbuf_pool_create("iop-txd", kDescs, 256, 0, 0, SOCKET_ID_ANY);
        if (rx == nullptr || desc == nullptr) err = "cannot create the mbuf pools (raise -m)";
    }
    {
        Port port;
        if (o.kernel_defrag) port.keep_kernel_defrag();
        const std::string devargs = "net_af_packet0,iface=" + o.iface + ",blocksz=" + std::to_string(kAfpBlock) +
                                    ",framesz=" + std::to_string(kAfpFrame) + ",framecnt=" + std::to_string(kAfpFrames);
        if (err.empty() && port.open(devargs, rx, desc, 1000, err)) rc = serve_on_port(o, port, *pool);
        if (!err.empty()) std::fprintf(stderr, "iccs interop: %s\n", err.c_str());
        port.close();
    }
    if (rx != nullptr) {
        if (rte_mempool_in_use_count(rx) != 0)
            std::printf("interop: warning: %u rx mbufs still in use at exit (leak)\n", rte_mempool_in_use_count(rx));
        rte_mempool_free(rx);
    }
    if (desc != nullptr) rte_mempool_free(desc);
    pool.reset();
    std::fflush(stdout);
    return rc;
}

}  // namespace

int cmd_interop(int argc, char** argv) {
    const Options o = parse(argc, argv);
    setvbuf(stdout, nullptr, _IOLBF, 0);
    const std::string prefix = "iccs-interop-" + std::to_string(getpid());
    EalOptions eo;
    eo.file_prefix = prefix;
    eo.lcore_cpus = {0};
    eo.memory_mb = 192;
    std::string err;
    if (!eal_start(eo, err)) {
        std::fprintf(stderr, "iccs interop: %s\n", err.c_str());
        eal_remove_runtime_dir(prefix);
        return 1;
    }
    signal(SIGINT, [](int) { g_stop.store(true); });
    signal(SIGTERM, [](int) { g_stop.store(true); });
    const int rc = run(o);
    eal_stop(prefix);
    return rc;
}

}  // namespace iccs
