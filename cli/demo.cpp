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
#include "options.hpp"
#include "run.hpp"
#include "run_app.hpp"
#include "run_options.hpp"
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
        if (std::strcmp(argv[i], "--wire") == 0) wire = true;
        if (std::strcmp(argv[i], "--alltoall") == 0) alltoall = true;
    }
    if (wire && alltoall) cli::usage_error("demo", "--wire and --alltoall are two different demos: choose one");
    // Each demo takes its own options, read once against its table (cli/options.hpp).
    static const std::vector<cli::Option> wire_own = {
        cli::flag("--wire", "the protocol stack alone over the in-memory wire"),
        cli::uint_opt("--messages", "N", 1, 100'000'000, "messages sent each way", "200000")};
    static const std::vector<cli::Option> alltoall_own = [] {
        std::vector<cli::Option> o = {cli::flag("--alltoall", "checked messages over the proxies")};
        o.insert(o.end(), alltoall_options().begin(), alltoall_options().end());
        o[1].dflt = "2000";  // --messages: the demo sends more than iccs run alltoall
        return o;
    }();
    static const std::vector<cli::Option> study_own = [] {
        std::vector<std::string> apps;
        for (const char* a : app_names()) apps.emplace_back(a);
        return std::vector<cli::Option>{
            cli::choice_opt("--app", apps, "the application", "water"),
            cli::uint_opt("--runs", "N", 1, 21, "runs over each transport, interleaved; the medians are shown", "3"),
            timeout_option(300)};
    }();
    cli::OptionSet set;
    set.who = "demo";
    set.own = wire ? &wire_own : alltoall ? &alltoall_own : &study_own;
    if (!wire) set.groups = {&machine_options(), &config_options()};
    cli::OptionSet study_set = set, alltoall_set = set, wire_set = set;
    study_set.own = &study_own;
    alltoall_set.own = &alltoall_own;
    wire_set.own = &wire_own;
    wire_set.groups.clear();
    const std::string help =
        "usage: iccs demo [--runs N] [--app APP] [machine options]   the study in miniature (the default)\n"
        "       iccs demo --alltoall [options of iccs run alltoall]    checked messages over the proxies\n"
        "       iccs demo --wire [--messages N]                        the stack alone\n"
        "  By default: Water (apps/water, test size: 64 molecules, 2 time steps) on the page-grain\n"
        "  DSM across 2 cluster processes of 2 compute threads (-p 4), proxies auto (2 per cluster),\n"
        "  round-robin dispatch, memif links, adaptive polling; run over direct (no delay: no proxy,\n"
        "  no stack) and over the ICCS, --runs N times each (interleaved). Prints PASS or FAIL of each\n"
        "  run (the app checks its result against a sequential reference), both median times of the\n"
        "  parallel section, the slowdown (ICCS / direct) and the per-proxy counters of the ICCS run\n"
        "  (messages, mean message time, queue length, utilization) in one table. The machine options\n"
        "  override the demo's shape. Exit 0 when every run passed.\n" +
        cli::option_help(study_set) +
        "--alltoall: 2 cluster processes of 2 compute threads each, proxies auto, memif links; every\n"
        "  compute thread sends 2000 messages of 1..9000 bytes to every compute thread of the other\n"
        "  cluster; each is checked; per-proxy counters at the end. Takes the options of iccs run\n"
        "  alltoall (iccs run alltoall --help), e.g. --pcap DIR.\n"
        "--wire: the protocol stack alone, two stack instances in one process over the in-memory wire\n"
        "  (10% loss, 5% duplicates, reordering within 64 frames, 1% bit flips).\n" +
        cli::option_help(wire_set);
    const cli::Args p = cli::parse_options(set, argc, argv, 0, help);
    if (wire) return cmd_demo_wire(p.u64("--messages", 200'000));
    if (alltoall) return run_alltoall_demo(p);
    return cmd_demo_study(p);
}

int cmd_demo_wire(uint64_t n) {
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
