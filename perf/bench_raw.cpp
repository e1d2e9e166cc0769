// bench_raw.cpp: see bench_raw.hpp.
#include "bench_raw.hpp"

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "conv_hdr.hpp"
#include "dpdk_env.hpp"
#include "dpdk_pool.hpp"
#include "port.hpp"
#include "proxy.hpp"
#include "slidwin_hdr.hpp"
#include "uring_udp.hpp"

namespace iccs {

namespace {

constexpr uint32_t kEthIpUdp = 14 + 20 + 8;
constexpr uint32_t kBurst = 32;
constexpr uint64_t kQuietNs = 200'000'000;     // udp stream: nothing for this long after the first: the rest was lost
constexpr uint64_t kStartNs = 20'000'000'000;  // a peer not ready (link, socket) within this: error
constexpr int kChildTimeoutS = 120;

// What the two processes and the parent share (one MAP_SHARED page).
struct Shared {
    std::atomic<uint32_t> ready[2];
    std::atomic<uint16_t> udp_port[2];
    std::atomic<uint64_t> t0_ns, last_ns, delivered, sent;
    std::atomic<uint64_t> dropped;  // udp stream: datagrams a port or the kernel counted as dropped
    std::atomic<uint64_t> median_ns, p99_ns, samples;
    std::atomic<uint32_t> failed;
    std::atomic<uint32_t> done[2];  // memif: this side is out of its loops (PeerDone)
    char error[512];
};

void fail(Shared* sh, const std::string& e) {
    if (sh->failed.exchange(1) == 0) std::snprintf(sh->error, sizeof sh->error, "%s", e.c_str());
}

void pin_to(unsigned cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu % std::max(1u, std::thread::hardware_concurrency()), &set);
    sched_setaffinity(0, sizeof set, &set);
}

// Both sides ready (link up / socket bound), or the other failed: false.
bool await_peer(Shared* sh, int me) {
    sh->ready[me].store(1);
    const uint64_t end = now_ns() + kStartNs;
    while (sh->ready[1 - me].load() == 0) {
        if (sh->failed.load() != 0) return false;
        if (now_ns() > end) {
            fail(sh, "the other side of the raw baseline was not ready within 20 s");
            return false;
        }
    }
    return true;
}

void note_rtts(Shared* sh, std::vector<uint64_t>& v) {
    if (v.empty()) return;
    std::sort(v.begin(), v.end());
    sh->median_ns.store(v[v.size() / 2]);
    sh->p99_ns.store(v[std::min(v.size() - 1, v.size() * 99 / 100)]);
    sh->samples.store(v.size());
}

struct Job {
    bool rtt = true;        // ping-pong, else one-way stream
    uint32_t len = 0;       // frame / datagram bytes
    uint64_t count = 0;     // rtt: rounds (samples + warm-up); stream: frames
    uint64_t warmup = 0;
    std::string prefix;     // memif: EAL file prefix base; the role is appended
    std::string socket;     // memif: the link's socket file
};

// ---- memif: DPDK bursts on a net_memif port, nothing else ----

// Keeps a memif side's port open until the other side is out of its loops too (or failed, or
// kStartNs passed): a side that closed its port first (its process ending) made the other's
// net_memif unmap the link under its rx/tx burst, the hang-up race of proxy/memif_guard.hpp, and
// the run failed as "did not end cleanly" (the likely cause of bench-raw failing once in a
// whole-suite run: the children's stderr is not kept, so not proven). Declared after
// the port, so it runs before the port closes.
struct PeerDone {
    Shared* sh;
    int me;
    ~PeerDone() {
        sh->done[me].store(1);
        const uint64_t end = now_ns() + kStartNs;
        while (sh->done[1 - me].load() == 0 && sh->failed.load() == 0 && now_ns() < end) usleep(200);
    }
};

int memif_side(Shared* sh, int me, const Job& j) {
    std::string err;
    EalOptions eo;
    eo.file_prefix = j.prefix + "-" + std::to_string(me);
    eo.lcore_cpus = {static_cast<unsigned>(me)};
    eo.memory_mb = 128;
    eo.log_level = "*:error";
    if (!eal_start(eo, err)) {
        fail(sh, "raw memif baseline: " + err);
        return 1;
    }
    rte_mempool* rx = rte_pktmbuf_pool_create("rawrx", 4095, 256, rx_priv_size(), RTE_MBUF_DEFAULT_BUF_SIZE,
                                              SOCKET_ID_ANY);
    rte_mempool* desc = rte_pktmbuf_pool_create("rawdesc", 1023, 64, 0, 0, SOCKET_ID_ANY);
    const uint32_t seg = std::max<uint32_t>(RTE_MBUF_DEFAULT_BUF_SIZE, j.len + RTE_PKTMBUF_HEADROOM);
    rte_mempool* tx = rte_pktmbuf_pool_create("rawtx", 4095, 256, 0, static_cast<uint16_t>(std::min<uint32_t>(seg, 65535)),
                                              SOCKET_ID_ANY);
    if (rx == nullptr || desc == nullptr || tx == nullptr) {
        fail(sh, "raw memif baseline: cannot create the mbuf pools");
        return 1;
    }
    // As the cluster runs' links: one frame per memif buffer (bsize = the frame rounded up to 2^n).
    const uint32_t bsize = std::max<uint32_t>(2048, std::bit_ceil(j.len));
    const std::string devargs = "net_memif_raw,role=" + std::string(me == 0 ? "server" : "client") +
                                ",socket=" + j.socket + ",socket-abstract=no,bsize=" + std::to_string(bsize);
    Port port;
    if (!port.open(devargs, rx, desc, 20'000, err)) {
        fail(sh, "raw memif baseline: " + err);
        return 1;
    }
    if (!port.wait_link(20'000)) {
        fail(sh, "raw memif baseline: the memif link " + j.socket + " did not come up within 20 s");
        return 1;
    }
    const uint16_t pid = port.id();
    const PeerDone leave_together{sh, me};
    if (!await_peer(sh, me)) return 1;
    rte_mbuf* m[kBurst];
    if (j.rtt) {
        std::vector<uint64_t> rtt;
        rtt.reserve(j.count);
        for (uint64_t i = 0; i < j.count; ++i) {
            if (me == 1) {  // echo: the frame goes back as it came
                while (rte_eth_rx_burst(pid, 0, m, 1) == 0) {
                    if (sh->failed.load(std::memory_order_relaxed) != 0) return 1;
                }
                while (rte_eth_tx_burst(pid, 0, m, 1) == 0) {
                }
                continue;
            }
            const uint64_t t0 = now_ns();
            rte_mbuf* f = rte_pktmbuf_alloc(tx);
            char* d = f == nullptr ? nullptr : rte_pktmbuf_append(f, static_cast<uint16_t>(j.len));
            if (d == nullptr) {
                fail(sh, "raw memif baseline: no mbuf for a frame of " + std::to_string(j.len) + " bytes");
                return 1;
            }
            std::memset(d, 0, std::min<uint32_t>(j.len, kEthIpUdp + kSlidwinHdrLen + kConvHdrLen));
            std::memcpy(d + j.len - sizeof i, &i, sizeof i);
            while (rte_eth_tx_burst(pid, 0, &f, 1) == 0) {
            }
            rte_mbuf* r = nullptr;
            while (rte_eth_rx_burst(pid, 0, &r, 1) == 0) {
            }
            const uint64_t t1 = now_ns();
            uint64_t back = 0;
            std::memcpy(&back, rte_pktmbuf_mtod_offset(r, char*, r->pkt_len - sizeof back), sizeof back);
            const bool ok = r->pkt_len == j.len && back == i;
            rte_pktmbuf_free(r);
            if (!ok) {
                fail(sh, "raw memif baseline: round " + std::to_string(i) + " came back wrong");
                return 1;
            }
            if (i >= j.warmup) rtt.push_back(t1 - t0);
        }
        note_rtts(sh, rtt);
        return 0;
    }
    if (me == 0) {  // sender
        sh->t0_ns.store(now_ns());
        for (uint64_t sent = 0; sent < j.count;) {
            const uint32_t k = static_cast<uint32_t>(std::min<uint64_t>(kBurst, j.count - sent));
            if (rte_pktmbuf_alloc_bulk(tx, m, k) != 0) continue;  // the driver still holds them: retry
            for (uint32_t i = 0; i < k; ++i) {
                char* d = rte_pktmbuf_append(m[i], static_cast<uint16_t>(j.len));
                const uint64_t seq = sent + i;
                std::memcpy(d + j.len - sizeof seq, &seq, sizeof seq);
            }
            for (uint32_t off = 0; off < k;) off += rte_eth_tx_burst(pid, 0, m + off, static_cast<uint16_t>(k - off));
            sent += k;
        }
        sh->sent.store(j.count);
        return 0;
    }
    uint64_t got = 0, last = 0, idle_since = now_ns();
    while (got < j.count) {
        const uint16_t n = rte_eth_rx_burst(pid, 0, m, kBurst);
        if (n == 0) {
            if (now_ns() - idle_since > kStartNs) {
                fail(sh, "raw memif baseline: the stream stopped at " + std::to_string(got) + " frames");
                break;
            }
            continue;
        }
        got += n;
        last = idle_since = now_ns();
        rte_pktmbuf_free_bulk(m, n);
    }
    sh->delivered.store(got);
    sh->last_ns.store(last);
    return 0;
}

// ---- udp: the proxies' io_uring loop (rx_burst, flush) with bare datagrams ----

int udp_side(Shared* sh, int me, const Job& j) {
    std::string err;
    const uint32_t seg = std::max<uint32_t>(2048, j.len) + kPktHeadroom;
    HeapPktPool rx_pool(4096, 2048 + kPktHeadroom), tx_pool(1024, seg);
    UringUdpConfig uc;
    uc.port = 0;
    uc.single_issuer = true;  // one thread polls each socket, as a busy or adaptive proxy's
    auto port = UringUdpPort::open(uc, rx_pool, tx_pool, err);
    if (!port) {
        fail(sh, "raw udp baseline: " + err);
        return 1;
    }
    sh->udp_port[me].store(port->port());
    if (!await_peer(sh, me)) return 1;
    const uint16_t mine = port->port(), peer = sh->udp_port[1 - me].load();
    const Ipv4Addr lo{0x7f000001};
    auto datagram = [&](uint64_t seq) -> PktBuf* {
        PktBuf* p = pkt_alloc(tx_pool);
        uint8_t* d = p == nullptr ? nullptr : pkt_append(p, j.len);
        if (d == nullptr) return nullptr;
        std::memset(d, 0, std::min<uint32_t>(j.len, kSlidwinHdrLen + kConvHdrLen));
        std::memcpy(d + j.len - sizeof seq, &seq, sizeof seq);
        return p;
    };
    PktBuf* in[kBurst];
    // One loop iteration of a side that expects nothing: reap send completions (and free anything).
    auto idle_iteration = [&] {
        const uint32_t n = port->rx_burst(in, kBurst);
        for (uint32_t i = 0; i < n; ++i) pkt_free(in[i]);
        port->flush();
    };
    if (j.rtt) {
        std::vector<uint64_t> rtt;
        rtt.reserve(j.count);
        for (uint64_t i = 0; i < j.count; ++i) {
            if (me == 1) {  // echo: the datagram goes back as it came (its address prefix cut off)
                uint32_t n;
                while ((n = port->rx_burst(in, 1)) == 0) {
                    if (sh->failed.load(std::memory_order_relaxed) != 0) return 1;
                    port->flush();
                }
                pkt_adj(in[0], kDgramAddrLen);
                port->udp_output(in[0], mine, lo, peer);
                port->flush();
                continue;
            }
            const uint64_t t0 = now_ns();
            PktBuf* p = datagram(i);
            if (p == nullptr) {
                fail(sh, "raw udp baseline: no buffer for a datagram of " + std::to_string(j.len) + " bytes");
                return 1;
            }
            port->udp_output(p, mine, lo, peer);
            port->flush();
            while (port->rx_burst(in, 1) == 0) port->flush();
            const uint64_t t1 = now_ns();
            const bool ok = in[0]->pkt_len == j.len + kDgramAddrLen;
            pkt_free(in[0]);
            if (!ok) {
                fail(sh, "raw udp baseline: round " + std::to_string(i) + " came back wrong");
                return 1;
            }
            if (i >= j.warmup) rtt.push_back(t1 - t0);
        }
        // the last echo's send completes before the socket goes
        while (!port->tx_idle()) idle_iteration();
        note_rtts(sh, rtt);
        return 0;
    }
    if (me == 0) {  // sender: at most 256 datagrams queued or in flight (the proxies' send slots)
        sh->t0_ns.store(now_ns());
        uint64_t sent = 0;
        while (sent < j.count) {
            const UringUdpCounters& c = port->counters();
            const uint64_t done = c.tx_datagrams + c.tx_errors + c.tx_drop_queue_full;
            for (uint32_t k = 0; k < kBurst && sent < j.count && sent - done < 256; ++k) {
                PktBuf* p = datagram(sent);
                if (p == nullptr) break;
                port->udp_output(p, mine, lo, peer);
                ++sent;
            }
            idle_iteration();
        }
        while (!port->tx_idle()) idle_iteration();
        const UringUdpCounters& c = port->counters();
        sh->dropped.fetch_add(c.tx_errors + c.tx_drop_queue_full + c.tx_drop_too_big);
        sh->sent.store(sent);
        return 0;
    }
    uint64_t got = 0, last = 0, idle_since = now_ns();
    while (got < j.count) {
        const uint32_t n = port->rx_burst(in, kBurst);
        if (n == 0) {
            port->flush();
            const uint64_t now = now_ns();
            if (now - idle_since > (got > 0 ? kQuietNs : kStartNs)) break;  // the rest was lost
            continue;
        }
        for (uint32_t i = 0; i < n; ++i) pkt_free(in[i]);
        got += n;
        last = idle_since = now_ns();
    }
    if (got == 0) fail(sh, "raw udp baseline: no datagram arrived");
    // What did not arrive was dropped where it was counted: the socket's buffer overflowing (the
    // kernel's count, read now whatever the last sample's age) or this port's own drops.
    port->sample_kernel_drops(UINT64_MAX);
    const UringUdpCounters& c = port->counters();
    sh->dropped.fetch_add(c.rx_kernel_drops + c.rx_drop_nopool + c.rx_drop_trunc + c.rx_drop_port + c.rx_errors);
    sh->delivered.store(got);
    sh->last_ns.store(last);
    return 0;
}

// Runs both sides, each in its own forked process pinned to its core (0: pinger/sender, 1:
// echo/receiver); the shared page after both ended, or an error.
bool run_pair(const std::string& fabric, const Job& job, Shared* sh, std::string& err) {
    pid_t pids[2] = {-1, -1};
    for (int me = 1; me >= 0; --me) {
        const pid_t pid = fork();
        if (pid < 0) {
            err = std::string("fork: ") + std::strerror(errno);
            break;
        }
        if (pid == 0) {
            pin_to(static_cast<unsigned>(me));
            alarm(kChildTimeoutS);
            // EAL's start-up chatter (telemetry) is not the benchmark's: errors come back through sh.
            if (const int null = fabric == "memif" ? open("/dev/null", O_WRONLY) : -1; null >= 0) {
                dup2(null, STDOUT_FILENO);
                dup2(null, STDERR_FILENO);
            }
            std::fflush(nullptr);
            _exit(fabric == "memif" ? memif_side(sh, me, job) : udp_side(sh, me, job));
        }
        pids[me] = pid;
    }
    const uint64_t end = now_ns() + static_cast<uint64_t>(kChildTimeoutS + 5) * 1'000'000'000ull;
    bool bad_exit = false;
    for (int me = 0; me < 2; ++me) {
        if (pids[me] < 0) continue;
        int st = 0;
        while (waitpid(pids[me], &st, WNOHANG) == 0) {
            if (now_ns() > end) {
                kill(pids[me], SIGKILL);
                waitpid(pids[me], &st, 0);
                break;
            }
            usleep(2000);
        }
        bad_exit |= !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    if (fabric == "memif") {
        std::remove(job.socket.c_str());
        eal_remove_runtime_dir(job.prefix + "-0");
        eal_remove_runtime_dir(job.prefix + "-1");
    }
    if (!err.empty()) return false;
    if (sh->failed.load() != 0) {
        err = sh->error;
        return false;
    }
    if (bad_exit) {
        err = "the raw " + fabric + " baseline's processes did not end cleanly (killed or timed out)";
        return false;
    }
    return true;
}

Job job_for(const std::string& fabric, uint32_t size, const RawOptions& o) {
    static unsigned runs = 0;
    Job j;
    j.len = raw_frame_bytes(fabric, size);
    const std::string tag = std::to_string(getpid()) + "-" + std::to_string(++runs);
    j.prefix = "iccs-raw-" + tag;
    j.socket = o.sock_dir + "/iccs-raw-" + tag + ".sock";
    return j;
}

Shared* shared_page() {
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : new (p) Shared{};
}

}  // namespace

uint32_t raw_frame_bytes(const std::string& fabric, uint32_t size) {
    const uint32_t dgram = kSlidwinHdrLen + kConvHdrLen + size;
    return fabric == "udp" ? dgram : kEthIpUdp + dgram;
}

std::string raw_unavailable(const std::string& fabric, const RawOptions& o) {
    if (fabric == "udp") {
        UringCaps caps;
        std::string err;
        if (!uring_probe(caps, err)) return "raw udp baseline: " + err;
        return {};
    }
    if (fabric == "memif") {
        if (access(o.sock_dir.c_str(), W_OK | X_OK) != 0)
            return "raw memif baseline: its socket directory " + o.sock_dir + " is not writable (" +
                   std::strerror(errno) + ")";
        return {};
    }
    return "raw baseline: fabric \"" + fabric + "\" has none (memif and udp do)";
}

// One measurement: refuses with the reason where the fabric or the frame size is not there, runs
// the pair of processes on `j` (set by `setup`) and reads the shared page's results (`read`).
// Returns the error ("" on success).
template <typename Setup, typename Read>
std::string run_raw(const std::string& fabric, uint32_t size, const RawOptions& o, Setup setup, Read read) {
    if (std::string why = raw_unavailable(fabric, o); !why.empty()) return why;
    if (fabric == "memif" && raw_frame_bytes(fabric, size) > 9014)
        return "raw memif baseline: a frame of " + std::to_string(raw_frame_bytes(fabric, size)) +
               " bytes is over the largest memif buffer the cluster runs use (MTU 9000)";
    Shared* sh = shared_page();
    if (sh == nullptr) return "mmap failed";
    Job j = job_for(fabric, size, o);
    setup(j);
    std::string err;
    if (run_pair(fabric, j, sh, err)) read(*sh, err);
    munmap(sh, 4096);
    return err;
}

RttStats raw_rtt(const std::string& fabric, uint32_t size, uint64_t samples, const RawOptions& o) {
    RttStats s;
    s.error = run_raw(
        fabric, size, o,
        [samples](Job& j) {
            j.rtt = true;
            j.warmup = samples / 10;
            j.count = samples + j.warmup;
        },
        [&s](const Shared& sh, std::string&) {
            s.median_us = static_cast<double>(sh.median_ns.load()) / 1000.0;
            s.p99_us = static_cast<double>(sh.p99_ns.load()) / 1000.0;
            s.n = sh.samples.load();
        });
    return s;
}

RateStats raw_stream(const std::string& fabric, uint32_t size, uint64_t messages, const RawOptions& o) {
    RateStats s;
    s.error = run_raw(
        fabric, size, o,
        [messages](Job& j) {
            j.rtt = false;
            j.count = messages;
        },
        [&s, &fabric](const Shared& sh, std::string& err) {
            s.sent = sh.sent.load();
            s.delivered = sh.delivered.load();
            s.dropped = sh.dropped.load();
            const uint64_t t0 = sh.t0_ns.load(), last = sh.last_ns.load();
            if (s.delivered > 0 && last > t0)
                s.msgs_per_s = static_cast<double>(s.delivered) * 1e9 / static_cast<double>(last - t0);
            else
                err = "raw " + fabric + " stream: nothing arrived";
        });
    return s;
}

}  // namespace iccs
