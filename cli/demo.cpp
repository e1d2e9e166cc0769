// demo.cpp: `iccs demo --alltoall` (cluster processes over memif, run.cpp) and `--wire`: the
// stack alone: two stack instances (eth, arp, ipv4, udp, slidwin) in one process, joined by the
// in-memory wire, which drops, duplicates, reorders and corrupts frames. It resolves ARP, sends
// messages of sizes that need IP fragmentation, and reports what arrived and what each layer
// counted.
#include "demo.hpp"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "mem_wire.hpp"
#include "run.hpp"
#include "slidwin_endpoint.hpp"

namespace iccs {

namespace {

struct CheckingSink : SlidwinSink {
    uint64_t next = 0, bad = 0, bytes = 0;
    bool on_message(SubConnection&, PktBuf* m) override {
        uint64_t i = ~0ull;
        pkt_read(m, 0, 8, &i);
        if (i != next) ++bad;
        ++next;
        bytes += m->pkt_len;
        pkt_free(m);
        return true;
    }
};

StackConfig host(uint8_t last) { return mem_wire_host(last); }

}  // namespace

int cmd_demo(int argc, char** argv) {
    bool wire = false, alltoall = false;
    for (int i = 0; i < argc; ++i) {
        if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
            std::printf("usage: iccs demo [--runs N] [--app APP] [RUN OPTIONS]   the study in miniature (the default)\n"
                        "       iccs demo --alltoall [RUN OPTIONS]                 checked messages over the proxies\n"
                        "       iccs demo --wire [--messages N]                    the stack alone\n"
                        "  By default: Water (apps/water, test size: 64 molecules, 2 time steps) on the page-grain\n"
                        "  DSM across 2 cluster processes of 2 compute threads (-p 4), proxies auto (2 per cluster),\n"
                        "  round-robin dispatch, memif links, adaptive polling; run over direct (no delay: no proxy,\n"
                        "  no stack) and over the ICCS, --runs N times each (default 3, interleaved). Prints PASS or\n"
                        "  FAIL of each run (the app checks its result against a sequential reference), both median\n"
                        "  times of the parallel section, the slowdown (ICCS / direct) and the per-proxy counters of\n"
                        "  the ICCS run (messages, mean message time, queue length, utilization) in one table.\n"
                        "  --app APP picks another of the eight applications; RUN OPTIONS (iccs run APP --help, e.g.\n"
                        "  --cluster-size S, --proxies P, --dispatch fixed) override the defaults. Exit 0 when every\n"
                        "  run passed.\n"
                        "  --alltoall: 2 cluster processes of 2 compute threads each, proxies auto, memif links;\n"
                        "  every compute thread sends 2000 messages of 1..9000 bytes to every compute thread of the\n"
                        "  other cluster; each is checked; per-proxy counters at the end. Takes the options of\n"
                        "  `iccs run alltoall` (see iccs run --help), e.g. --pcap DIR: every proxy writes the frames\n"
                        "  it sends and receives to DIR/cluster<C>-proxy<P>.pcapng.\n"
                        "  --wire: the protocol stack alone, two stack instances in one process over the in-memory\n"
                        "  wire (10%% loss, 5%% duplicates, reordering within 64 frames, 1%% bit flips).\n");
            return 0;
        }
        if (std::strcmp(argv[i], "--wire") == 0) wire = true;
        if (std::strcmp(argv[i], "--alltoall") == 0) alltoall = true;
    }
    if (wire) return cmd_demo_wire(argc, argv);
    if (alltoall) {
        std::vector<char*> rest;
        for (int i = 0; i < argc; ++i)
            if (std::strcmp(argv[i], "--alltoall") != 0) rest.push_back(argv[i]);
        return cmd_run(static_cast<int>(rest.size()), rest.data(), true);
    }
    return cmd_demo_study(argc, argv);
}

int cmd_demo_wire(int argc, char** argv) {
    uint64_t n = 200'000;
    for (int i = 0; i < argc; ++i) {
        if (std::strcmp(argv[i], "--wire") == 0) continue;
        if (std::strcmp(argv[i], "--messages") == 0 && i + 1 < argc) {
            n = std::strtoull(argv[++i], nullptr, 10);
            if (n == 0 || n > 100'000'000) {
                std::fprintf(stderr, "iccs demo: bad value '%s' for --messages: 1..100000000 allowed\n", argv[i]);
                return 2;
            }
            continue;
        }
        std::fprintf(stderr, "iccs demo: unknown option '%s' (see iccs demo --help)\n", argv[i]);
        return 2;
    }
    std::printf("iccs demo --wire: the protocol stack (eth/arp/ipv4/udp/slidwin) between two stack instances in\n"
                "one process over the in-memory wire (no proxies, no DPDK: the stack alone).\n\n");
    HeapPktPool pa(16384, 2048), pb(16384, 2048);
    Stack a(host(1), pa), b(host(2), pb);
    WireImpairment imp;
    imp.drop = 0.10;
    imp.duplicate = 0.05;
    imp.reorder_window = 64;
    imp.corrupt = 0.01;
    imp.seed = 1997;
    MemWire wire(a, b, imp);
    TimerWheel wa(10'000, 1024, 0), wb(10'000, 1024, 0);
    CheckingSink sa, sb;
    SlidwinConfig cfg;
    SlidwinEndpoint ea(a, wa, 9410, cfg, sa), eb(b, wb, 9410, cfg, sb);
    // No static ARP entries: the first datagram waits for ARP, as on a real link.
    SubConnection* ca = ea.open(0, b.config().ip, 9410, 0, 0);
    eb.open(0, a.config().ip, 9410, 0, 0);
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t now = 0, sent = 0;
    std::vector<uint8_t> buf(4000);
    for (uint64_t step = 0; sb.next < n && step < 1'000'000'000ull; ++step) {
        while (sent < n && ca->send_space() > 0) {
            const uint32_t size = (sent % 10 == 9) ? 3000 : 100 + static_cast<uint32_t>(sent % 900);  // every 10th fragments
            std::memcpy(buf.data(), &sent, 8);
            PktBuf* m = pkt_alloc(pa);
            if (m == nullptr || !pkt_write(m, pa, buf.data(), size)) {
                if (m != nullptr) pkt_free(m);
                break;
            }
            slidwin_send(*ca, m, now);
            ++sent;
        }
        if (wire.pump(now) == 0) wire.pump(now, true);
        now += 1'000;  // protocol time: 1 us a step
        wa.advance(now);
        wb.advance(now);
        a.timers(now);
        b.timers(now);
        if (step % 200'000 == 0 && step > 0)
            std::fprintf(stderr, "  ... %llu of %llu delivered\n", static_cast<unsigned long long>(sb.next),
                         static_cast<unsigned long long>(n));
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto& w = wire.counters();
    std::printf("sent %llu messages (100..999 bytes, every 10th 3000 bytes: 3 IP fragments)\n",
                static_cast<unsigned long long>(sent));
    std::printf("delivered %llu in order, %llu out of order or wrong: %s\n", static_cast<unsigned long long>(sb.next),
                static_cast<unsigned long long>(sb.bad), (sb.next == n && sb.bad == 0) ? "PASS" : "FAIL");
    std::printf("wire: %llu frames, %llu dropped, %llu duplicated, %llu reordered, %llu corrupted\n",
                static_cast<unsigned long long>(w.frames), static_cast<unsigned long long>(w.dropped),
                static_cast<unsigned long long>(w.duplicated), static_cast<unsigned long long>(w.reordered),
                static_cast<unsigned long long>(w.corrupted));
    std::printf("time: %.2f s wall, %.3f s of protocol time\n\n", secs, static_cast<double>(now) / 1e9);
    std::printf("%-22s %14s %14s\n", "counter", "sender (A)", "receiver (B)");
    auto row = [](const char* name, uint64_t x, uint64_t y) {
        if (x != 0 || y != 0)
            std::printf("%-22s %14llu %14llu\n", name, static_cast<unsigned long long>(x),
                        static_cast<unsigned long long>(y));
    };
    std::vector<std::pair<const char*, uint64_t>> ca_s, cb_s;
    a.counters().for_each([&](const char* nm, const char*, uint64_t v) { ca_s.emplace_back(nm, v); });
    b.counters().for_each([&](const char* nm, const char*, uint64_t v) { cb_s.emplace_back(nm, v); });
    for (size_t i = 0; i < ca_s.size(); ++i) row(ca_s[i].first, ca_s[i].second, cb_s[i].second);
    std::vector<std::pair<const char*, uint64_t>> sa_s, sb_s;
    ca->counters().for_each([&](const char* nm, const char*, uint64_t v) { sa_s.emplace_back(nm, v); });
    eb.get(0)->counters().for_each([&](const char* nm, const char*, uint64_t v) { sb_s.emplace_back(nm, v); });
    for (size_t i = 0; i < sa_s.size(); ++i) row(sa_s[i].first, sa_s[i].second, sb_s[i].second);
    return (sb.next == n && sb.bad == 0) ? 0 : 1;
}

}  // namespace iccs
