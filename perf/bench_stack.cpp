// bench_stack.cpp: one thread drives a sender and a receiver stack over the in-memory wire
// (no loss) and counts CPU time per delivered message: send + receive + ack, everything the two
// stacks do, including the wire's copy of each frame into the receiver's buffers (what a NIC's
// DMA would do). In the same run it measures the kernel's UDP path on loopback the same way:
// sendmmsg of 32 datagrams from one socket, recvmmsg of 32 on another, same payload size, CPU
// time of the one thread (loopback delivery runs in the sender's softirq, so it is counted).
#include "bench_stack.hpp"
#include "slidwin_auth.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <thread>
#include <vector>

#include "mem_wire.hpp"
#include "slidwin_endpoint.hpp"

namespace iccs {

static uint64_t thread_cpu_ns() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

namespace {

struct CountingSink : SlidwinSink {
    uint64_t got = 0;
    uint64_t bytes = 0;
    bool on_message(SubConnection&, PktBuf* m) override {
        ++got;
        bytes += m->pkt_len;
        pkt_free(m);
        return true;
    }
};

StackConfig host(uint8_t last) { return mem_wire_host(last); }

// Two stacks over the in-memory wire, one sub-connection open between them (with `key`: every
// datagram authenticated), each end counting what it receives.
struct StackPair {
    HeapPktPool pa, pb;
    Stack a, b;
    MemWire wire;
    TimerWheel wa{10'000, 1024, 0}, wb{10'000, 1024, 0};
    CountingSink sa, sb;
    SlidwinConfig cfg;
    SlidwinEndpoint ea, eb;
    SubConnection* ca;
    SubConnection* cb;
    StackPair(uint32_t bufs, const SlidwinAuthKey* key)
        : pa(bufs, 2048), pb(bufs, 2048), a(host(1), pa), b(host(2), pb), wire(a, b), cfg(with_key(key)),
          ea(a, wa, 9410, cfg, sa), eb(b, wb, 9410, cfg, sb) {
        a.arp().add_static(b.config().ip, b.config().mac);
        b.arp().add_static(a.config().ip, a.config().mac);
        ca = ea.open(0, b.config().ip, 9410, 0, 0);
        cb = eb.open(0, a.config().ip, 9410, 0, 0);
    }
    static SlidwinConfig with_key(const SlidwinAuthKey* key) {
        SlidwinConfig c;
        c.auth = key;
        return c;
    }
    // Move frames, then let virtual time pass: timers behave as on a fast LAN, the clock costs
    // nothing.
    void step(uint64_t& now, uint64_t dt) {
        wire.pump(now);
        now += dt;
        wa.advance(now);
        wb.advance(now);
    }
};

double run_iccs(uint32_t size, uint64_t n, uint64_t& retx, const SlidwinAuthKey* key) {
    StackPair s(8192, key);
    HeapPktPool& pa = s.pa;
    CountingSink& sb = s.sb;
    SubConnection* ca = s.ca;
    std::vector<uint8_t> payload(size, 0x5a);
    uint64_t now = 0, sent = 0;
    const uint64_t t0 = thread_cpu_ns();
    while (sb.got < n) {
        // a burst of up to 32 sends, as a proxy drains its rings
        for (int k = 0; k < 32 && sent < n && ca->send_space() > 0; ++k) {
            PktBuf* m = pkt_alloc(pa);
            if (m == nullptr) break;
            std::memcpy(pkt_append(m, size), payload.data(), size);
            slidwin_send(*ca, m, now);
            ++sent;
        }
        s.step(now, 1'000);  // 1 us a loop
    }
    const uint64_t t1 = thread_cpu_ns();
    retx = ca->counters().tx_retx;
    return static_cast<double>(t1 - t0) / static_cast<double>(n);
}

// One message in flight, as bench rtt's round trip but on one thread over the in-memory wire:
// a sends, b's reply goes back as soon as b has the message (the acks ride on the data, as in
// the cluster runs), CPU ns per round trip. What the software of a round trip costs, free of
// the scheduling that makes wall-clock round trips on a loaded host noisy.
double run_iccs_pingpong(uint32_t size, uint64_t n, const SlidwinAuthKey* key) {
    StackPair s(1024, key);
    std::vector<uint8_t> payload(size, 0x5a);
    uint64_t now = 0;
    auto send = [&](PktPool& pool, SubConnection* c) {
        PktBuf* m = pkt_alloc(pool);
        if (m == nullptr) return false;
        std::memcpy(pkt_append(m, size), payload.data(), size);
        return slidwin_send(*c, m, now) == SlidwinSendResult::kOk;
    };
    auto until = [&](const CountingSink& sink, uint64_t want) {
        for (int spins = 0; sink.got < want; ++spins) {
            if (spins > 1'000'000) return false;  // lost: never on a lossless wire
            s.step(now, 100);  // a round trip takes a few microseconds: timers (delayed acks) stay quiet
        }
        return true;
    };
    // The handshake and a first exchange, not timed.
    if (!send(s.pa, s.ca) || !until(s.sb, 1) || !send(s.pb, s.cb) || !until(s.sa, 1)) return 0;
    const uint64_t t0 = thread_cpu_ns();
    for (uint64_t i = 2; i <= n + 1; ++i)
        if (!send(s.pa, s.ca) || !until(s.sb, i) || !send(s.pb, s.cb) || !until(s.sa, i)) return 0;
    const uint64_t t1 = thread_cpu_ns();
    return static_cast<double>(t1 - t0) / static_cast<double>(n);
}

double run_kernel(uint32_t size, uint64_t n, std::string& err) {
    const int tx = socket(AF_INET, SOCK_DGRAM, 0);
    const int rx = socket(AF_INET, SOCK_DGRAM, 0);
    if (tx < 0 || rx < 0) {
        err = std::string("socket: ") + std::strerror(errno);
        if (tx >= 0) close(tx);
        if (rx >= 0) close(rx);
        return 0;
    }
    int buf = 8 << 20;
    setsockopt(rx, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t alen = sizeof addr;
    if (bind(rx, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        getsockname(rx, reinterpret_cast<sockaddr*>(&addr), &alen) != 0 ||
        connect(tx, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        err = std::string("bind/connect on loopback: ") + std::strerror(errno);
        close(tx);
        close(rx);
        return 0;
    }
    constexpr int kBatch = 32;
    std::vector<uint8_t> out(size, 0x5a);
    std::vector<uint8_t> in(static_cast<size_t>(kBatch) * std::max<uint32_t>(size, 1));
    mmsghdr smsg[kBatch]{}, rmsg[kBatch]{};
    iovec siov[kBatch], riov[kBatch];
    for (int i = 0; i < kBatch; ++i) {
        siov[i] = iovec{out.data(), size};
        smsg[i].msg_hdr.msg_iov = &siov[i];
        smsg[i].msg_hdr.msg_iovlen = 1;
        riov[i] = iovec{in.data() + static_cast<size_t>(i) * std::max<uint32_t>(size, 1), std::max<uint32_t>(size, 1)};
        rmsg[i].msg_hdr.msg_iov = &riov[i];
        rmsg[i].msg_hdr.msg_iovlen = 1;
    }
    uint64_t got = 0;
    const uint64_t t0 = thread_cpu_ns();
    while (got < n) {
        const int want = static_cast<int>(std::min<uint64_t>(kBatch, n - got));
        int s = sendmmsg(tx, smsg, static_cast<unsigned>(want), 0);
        if (s < 0) {
            err = std::string("sendmmsg: ") + std::strerror(errno);
            break;
        }
        int r = 0;
        while (r < s) {
            const int k = recvmmsg(rx, rmsg + r, static_cast<unsigned>(s - r), MSG_WAITFORONE, nullptr);
            if (k < 0) {
                err = std::string("recvmmsg: ") + std::strerror(errno);
                break;
            }
            r += k;
        }
        if (!err.empty()) break;
        got += static_cast<uint64_t>(r);
    }
    const uint64_t t1 = thread_cpu_ns();
    close(tx);
    close(rx);
    return got == 0 ? 0 : static_cast<double>(t1 - t0) / static_cast<double>(got);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

}  // namespace

BenchStackResult bench_stack(const BenchStackOptions& o) {
    BenchStackResult r;
    std::vector<double> ic, kc;
    // Warm-up of both paths (page faults, caches), not counted.
    std::shared_ptr<const SlidwinAuthKey> key;
    if (!o.key_file.empty()) {
        key = slidwin_load_key(o.key_file, o.encrypt, r.key_error);
        if (!key) return r;
        r.auth = true;
    }
    std::vector<double> ac;
    uint64_t retx = 0;
    run_iccs(o.size_bytes, std::min<uint64_t>(o.messages, 100'000), retx, nullptr);
    if (key) run_iccs(o.size_bytes, std::min<uint64_t>(o.messages, 100'000), retx, key.get());
    run_kernel(o.size_bytes, std::min<uint64_t>(o.messages, 20'000), r.kernel_error);
    for (uint32_t i = 0; i < o.runs; ++i) {
        ic.push_back(run_iccs(o.size_bytes, o.messages, retx, nullptr));
        r.iccs_retx += retx;
        if (key) {
            ac.push_back(run_iccs(o.size_bytes, o.messages, retx, key.get()));
            r.iccs_retx += retx;
        }
        if (r.kernel_error.empty()) {
            const double k = run_kernel(o.size_bytes, o.messages / 4 + 1, r.kernel_error);
            if (r.kernel_error.empty()) kc.push_back(k);
        }
        if (!o.json) std::fprintf(stderr, "  run %u/%u done\n", i + 1, o.runs);
    }
    r.iccs_ns_per_msg = median(ic);
    r.iccs_min = *std::min_element(ic.begin(), ic.end());
    r.iccs_max = *std::max_element(ic.begin(), ic.end());
    if (key) {
        // 200,000 calls a stage (fewer for a short run: --messages under that).
        const uint32_t reps = static_cast<uint32_t>(std::clamp<uint64_t>(o.messages, 1000, 200'000));
        r.stages = bench_auth_stages(*key, o.size_bytes, reps, o.runs);
        // The round trip, plain and authenticated, interleaved.
        std::vector<double> pp, pk;
        const uint64_t trips = std::max<uint64_t>(1000, o.messages / 10);
        for (uint32_t i = 0; i < o.runs; ++i) {
            pp.push_back(run_iccs_pingpong(o.size_bytes, trips, nullptr));
            pk.push_back(run_iccs_pingpong(o.size_bytes, trips, key.get()));
        }
        r.rtt_plain_ns = median(pp);
        r.rtt_auth_ns = median(pk);
        if (*std::min_element(pp.begin(), pp.end()) == 0 || *std::min_element(pk.begin(), pk.end()) == 0)
            r.stages.error = "the ping-pong lost a message on a lossless wire";
    }
    if (!ac.empty()) {
        r.auth_ns_per_msg = median(ac);
        r.auth_min = *std::min_element(ac.begin(), ac.end());
        r.auth_max = *std::max_element(ac.begin(), ac.end());
        r.auth_overhead = r.auth_ns_per_msg / r.iccs_ns_per_msg;
    }
    if (!kc.empty()) {
        r.kernel_ns_per_msg = median(kc);
        r.kernel_min = *std::min_element(kc.begin(), kc.end());
        r.kernel_max = *std::max_element(kc.begin(), kc.end());
        r.ratio = r.iccs_ns_per_msg / r.kernel_ns_per_msg;
    }
    return r;
}

void print_bench_stack(const BenchStackOptions& o, const BenchStackResult& r) {
    const unsigned cores = std::thread::hardware_concurrency();
    std::string auth_json;
    if (r.auth) {
        char b[256];
        std::snprintf(b, sizeof b,
                      ", \"auth_mode\": \"%s\", \"auth_ns_per_msg\": %.1f, \"auth_ns_min\": %.1f, "
                      "\"auth_ns_max\": %.1f, \"auth_overhead\": %.3f",
                      o.encrypt ? "aes-128-gcm aead" : "aes-128-gcm mac", r.auth_ns_per_msg, r.auth_min, r.auth_max,
                      r.auth_overhead);
        auth_json = b;
        if (!r.stages.error.empty()) {
            auth_json += ", \"auth_stages_error\": \"" + r.stages.error + "\"";
        } else {
            auth_json += ", \"auth_stages_ns\": {";
            for (size_t i = 0; i < r.stages.stages.size(); ++i) {
                std::snprintf(b, sizeof b, "%s\"%s\": %.1f", i ? ", " : "", r.stages.stages[i].key.c_str(),
                              r.stages.stages[i].ns);
                auth_json += b;
            }
            std::snprintf(b, sizeof b,
                          "}, \"auth_seal_evp_over_ours\": %.3f, \"auth_seal_provider_over_ours\": %.3f, "
                          "\"auth_mac_on_aesni\": %s, \"pingpong_plain_ns\": %.1f, \"pingpong_auth_ns\": %.1f",
                          r.stages.evp_over_ours, r.stages.provider_over_ours, r.stages.mac_on_aesni ? "true" : "false",
                          r.rtt_plain_ns, r.rtt_auth_ns);
            auth_json += b;
        }
    }
    if (o.json) {
        std::printf(
            "{\"size_bytes\": %u, \"messages_per_run\": %llu, \"runs\": %u, \"cores\": %u, "
            "\"iccs_ns_per_msg\": %.1f, \"iccs_ns_min\": %.1f, \"iccs_ns_max\": %.1f, \"iccs_retransmissions\": %llu, "
            "\"kernel_ns_per_msg\": %s, \"kernel_ns_min\": %.1f, \"kernel_ns_max\": %.1f, \"ratio\": %s%s%s%s%s}\n",
            o.size_bytes, static_cast<unsigned long long>(o.messages), o.runs, cores, r.iccs_ns_per_msg, r.iccs_min,
            r.iccs_max, static_cast<unsigned long long>(r.iccs_retx),
            r.kernel_error.empty() ? std::to_string(r.kernel_ns_per_msg).c_str() : "null", r.kernel_min,
            r.kernel_max, r.kernel_error.empty() ? std::to_string(r.ratio).c_str() : "null",
            r.kernel_error.empty() ? "" : ", \"kernel_error\": \"", r.kernel_error.c_str(),
            r.kernel_error.empty() ? "" : "\"", auth_json.c_str());
        return;
    }
    std::printf("bench stack: %u-byte messages, %llu per run, median of %u runs, one thread (host has %u cores)\n",
                o.size_bytes, static_cast<unsigned long long>(o.messages), o.runs, cores);
    std::printf("  %-44s %10s %10s %10s\n", "path (CPU ns per delivered message)", "median", "min", "max");
    std::printf("  %-44s %10.1f %10.1f %10.1f\n", "iccs stack: send+receive+ack, in-memory wire", r.iccs_ns_per_msg,
                r.iccs_min, r.iccs_max);
    if (r.auth)
        std::printf("  %-44s %10.1f %10.1f %10.1f   (auth/plain = %.3f)\n",
                    o.encrypt ? "  the same, authenticated + encrypted (GCM)" : "  the same, authenticated (GCM MAC)",
                    r.auth_ns_per_msg, r.auth_min, r.auth_max, r.auth_overhead);
    if (r.auth && !r.stages.error.empty()) std::printf("  authentication stages: not measured: %s\n", r.stages.error.c_str());
    if (r.auth && r.stages.error.empty()) {
        std::printf("  authentication, stage by stage (CPU ns per call, %u-byte payload):\n", o.size_bytes);
        for (const AuthStage& s : r.stages.stages)
            std::printf("    %-56s %10.1f %10.1f %10.1f\n", s.what.c_str(), s.ns, s.min, s.max);
        std::printf("    seal (data) through EVP_CIPHER_CTX / SlidwinCipher::seal = %.3f\n", r.stages.evp_over_ours);
        std::printf("    seal (data) all through the provider's GCM / SlidwinCipher::seal = %.3f (%s)\n",
                    r.stages.provider_over_ours,
                    r.stages.mac_on_aesni ? "MAC only: SlidwinGmac, AES-NI and PCLMULQDQ"
                    : o.encrypt           ? "encrypt: the provider's GCM both"
                                          : "no AES-NI or PCLMULQDQ: the provider's GCM both");
        std::printf("  one message in flight, a round trip on one thread (CPU ns): plain %.1f, authenticated %.1f"
                    " (+%.1f ns, %.3f)\n",
                    r.rtt_plain_ns, r.rtt_auth_ns, r.rtt_auth_ns - r.rtt_plain_ns,
                    r.rtt_plain_ns > 0 ? r.rtt_auth_ns / r.rtt_plain_ns : 0);
    }
    if (r.kernel_error.empty()) {
        std::printf("  %-44s %10.1f %10.1f %10.1f\n", "kernel UDP loopback: sendmmsg/recvmmsg x32", r.kernel_ns_per_msg,
                    r.kernel_min, r.kernel_max);
        std::printf("  ratio iccs/kernel = %.3f (issue 21 goal <= 0.07)\n", r.ratio);
    } else {
        std::printf("  kernel UDP baseline unavailable: %s\n", r.kernel_error.c_str());
    }
    if (r.iccs_retx != 0) std::printf("  note: %llu retransmissions on a lossless wire\n",
                                      static_cast<unsigned long long>(r.iccs_retx));
}

}  // namespace iccs
