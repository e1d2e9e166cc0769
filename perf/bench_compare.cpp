// bench_compare.cpp: `iccs bench compare`. Per run, interleaved (the host is shared and noisy):
// the round trip (bench_paths: iccs_rtt / kernel_rtt) and the one-way rate (iccs_stream /
// kernel_stream) over memif, udp and the kernel's blocking sockets (with --key, each iccs run
// again authenticated, right after the plain one, each round trip after a look at the host's
// shared-memory floor); then medians over the runs, their spread, each iccs path's ratio to the
// kernel sockets, and with --key the authenticated ones' to the plain, also run by run.
#include "bench_compare.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench_paths.hpp"
#include "bench_raw.hpp"
#include "slidwin_auth.hpp"
#include "uring_udp.hpp"

namespace iccs {

namespace {

struct Path {
    const char* key;    // JSON
    std::string label;  // table
    std::vector<double> rtt_us, rate;
    std::vector<double> delivered;  // per rate run (the kernel stream may lose datagrams)
    std::vector<std::string> errors;
    Path* raw = nullptr;    // the same fabric with no stack (an iccs path's raw-fabric baseline)
    Path* plain = nullptr;  // --key: the same fabric without the key (an authenticated path's baseline)
    // --key, an authenticated path: per run whose both round trips ran, auth / plain, and the
    // host's floor (one cache line between the two pinned cores, ns) measured right before each.
    std::vector<double> pair_ratio{}, floor_plain_ns{}, floor_auth_ns{};
    // --key, an authenticated path: per run, the median of the blocks' ratios auth / plain of a
    // plain and an authenticated run taking turns (bench_paths.hpp, iccs_rtt_turns and
    // iccs_stream_turns): both meet the same state of the host.
    std::vector<double> rtt_turn_ratio{}, rate_turn_ratio{};
};

// Runs taking turns: blocks of each (the round trip: 40 of samples/40, at least 100; the rate:
// 20 of messages/20, at least 1000).
constexpr uint32_t kRttTurnBlocks = 40, kRateTurnBlocks = 20;

void note_rtt(Path& p, const RttStats& s) {
    if (!s.error.empty()) p.errors.push_back(s.error);
    else p.rtt_us.push_back(s.median_us);
}

void note_rate(Path& p, const RateStats& s) {
    if (!s.error.empty()) {
        p.errors.push_back(s.error);
        return;
    }
    p.rate.push_back(s.msgs_per_s);
    p.delivered.push_back(static_cast<double>(s.delivered));
}

// The floor moves between two levels on a shared virtual host (~165 and ~500 ns here, with the
// placement of its virtual CPUs: perf/README.md, issue 37): a pair of runs whose floors differ
// by more than this measured two hosts, and their ratio says so.
constexpr double kHostMovedFactor = 1.5;

bool host_moved(double a_ns, double b_ns) {
    return a_ns > 0 && b_ns > 0 && std::max(a_ns, b_ns) > kHostMovedFactor * std::min(a_ns, b_ns);
}

size_t runs_host_moved(const Path& p) {
    size_t n = 0;
    for (size_t i = 0; i < p.pair_ratio.size(); ++i) n += host_moved(p.floor_plain_ns[i], p.floor_auth_ns[i]) ? 1 : 0;
    return n;
}

// The floor now (20,000 round trips of one cache line, a few ms), the caller's CPU affinity kept
// (floor_rtt pins the calling thread to core 0). 0 if it could not run.
double floor_now_ns() {
    cpu_set_t was;
    const bool saved = sched_getaffinity(0, sizeof was, &was) == 0;
    const RttStats f = floor_rtt(20000);
    if (saved) sched_setaffinity(0, sizeof was, &was);
    return f.error.empty() ? f.median_us * 1000.0 : 0.0;
}

// An authenticated round trip right after its plain one, each after a look at the floor.
void measure_rtt_pair(const BenchCompareOptions& o, const std::shared_ptr<const SlidwinAuthKey>& key, Path& plain,
                      Path& auth, const char* fabric, const std::string& pcap_dir) {
    const double fp = floor_now_ns();
    const RttStats p = iccs_rtt(fabric, o.polling, o.size_bytes, o.samples, pcap_dir);
    const double fa = floor_now_ns();
    const RttStats a = iccs_rtt(fabric, o.polling, o.size_bytes, o.samples, {}, key);
    note_rtt(plain, p);
    note_rtt(auth, a);
    if (p.error.empty() && a.error.empty() && p.median_us > 0) {
        auth.pair_ratio.push_back(a.median_us / p.median_us);
        auth.floor_plain_ns.push_back(fp);
        auth.floor_auth_ns.push_back(fa);
    }
}

std::string rate_text(double r) {
    char b[32];
    if (r >= 1e6) std::snprintf(b, sizeof b, "%.2fM", r / 1e6);
    else std::snprintf(b, sizeof b, "%.0fk", r / 1e3);
    return b;
}

// Every path of one comparison, with its baselines wired (an iccs path to its raw fabric, an
// authenticated one to the plain one).
struct ComparePaths {
    explicit ComparePaths(const char* auth_label)
        : memif_auth{"memif_auth", std::string("  the same, ") + auth_label, {}, {}, {}, {}, nullptr, &memif},
          udp_auth{"udp_auth", std::string("  the same, ") + auth_label, {}, {}, {}, {}, nullptr, &udp} {}
    ComparePaths(const ComparePaths&) = delete;
    ComparePaths& operator=(const ComparePaths&) = delete;

    Path raw_memif{"raw_memif", "  raw memif: DPDK bursts", {}, {}, {}, {}};
    Path raw_udp{"raw_udp", "  raw udp: bare datagrams", {}, {}, {}, {}};
    Path memif{"memif", "iccs over memif (DPDK)", {}, {}, {}, {}, &raw_memif};
    Path udp{"udp", "iccs over udp (io_uring)", {}, {}, {}, {}, &raw_udp};
    Path kernel{"kernel", "kernel UDP sockets (blocking)", {}, {}, {}, {}};
    Path memif_auth;
    Path udp_auth;

    // The paths in the report's order (with --key, each authenticated one after its plain one).
    std::vector<Path*> in_order(bool keyed) {
        if (keyed) return {&memif, &memif_auth, &raw_memif, &udp, &udp_auth, &raw_udp, &kernel};
        return {&memif, &raw_memif, &udp, &raw_udp, &kernel};
    }
};

// What the report says beside the figures.
struct CompareSetting {
    const BenchCompareOptions& o;
    unsigned cores;
    unsigned spinning;    // iccs threads that spin under o.polling
    bool oversubscribed;  // more of them than cores
    std::string io_udp;   // how the udp path does its I/O
    const char* auth_label;
    bool keyed;
};

// The set-up: io_uring for the udp path (a refusal stops the comparison now, not halfway), the
// --key file, the raw-fabric baselines. False: refused, said on stderr.
bool compare_setup(const BenchCompareOptions& o, bool& multishot, std::shared_ptr<const SlidwinAuthKey>& key) {
    UringCaps caps;
    std::string err;
    if (!uring_probe(caps, err)) {
        std::fprintf(stderr, "iccs: %s (bench compare measures memif, udp and kernel sockets together)\n", err.c_str());
        return false;
    }
    const char* forced = std::getenv("ICCS_URING_RX");
    multishot = forced != nullptr && *forced != '\0' ? std::string(forced) == "multishot" : caps.multishot_recvmsg;
    if (!o.key_file.empty()) {
        key = slidwin_load_key(o.key_file, o.encrypt, err);
        if (!key) {
            std::fprintf(stderr, "iccs bench compare: --key: %s\n", err.c_str());
            return false;
        }
    }
    // The raw-fabric baselines run in the same command: a fabric they cannot use stops it now.
    for (const char* f : {"memif", "udp"})
        if (const std::string why = raw_unavailable(f); !why.empty()) {
            std::fprintf(stderr, "iccs: bench compare: %s\n", why.c_str());
            return false;
        }
    return true;
}

// One run: every path's round trip, then every path's rate.
void measure_run(const BenchCompareOptions& o, const std::shared_ptr<const SlidwinAuthKey>& key, ComparePaths& ps) {
    if (key) {
        measure_rtt_pair(o, key, ps.memif, ps.memif_auth, "memif", o.pcap_dir);
        measure_rtt_pair(o, key, ps.udp, ps.udp_auth, "udp", {});
    } else {
        note_rtt(ps.memif, iccs_rtt("memif", o.polling, o.size_bytes, o.samples, o.pcap_dir));
        note_rtt(ps.udp, iccs_rtt("udp", o.polling, o.size_bytes, o.samples));
    }
    note_rtt(ps.raw_memif, raw_rtt("memif", o.size_bytes, o.samples));
    note_rtt(ps.raw_udp, raw_rtt("udp", o.size_bytes, o.samples));
    note_rtt(ps.kernel, kernel_rtt(o.size_bytes, o.samples));
    note_rate(ps.memif, iccs_stream("memif", o.polling, o.size_bytes, o.messages, o.pcap_dir));
    if (key) note_rate(ps.memif_auth, iccs_stream("memif", o.polling, o.size_bytes, o.messages, {}, key));
    note_rate(ps.udp, iccs_stream("udp", o.polling, o.size_bytes, o.messages));
    if (key) note_rate(ps.udp_auth, iccs_stream("udp", o.polling, o.size_bytes, o.messages, {}, key));
    if (key)
        for (Path* p : {&ps.memif_auth, &ps.udp_auth}) {
            const char* fabric = p == &ps.memif_auth ? "memif" : "udp";
            const RttTurns rt = iccs_rtt_turns(fabric, o.polling, o.size_bytes, kRttTurnBlocks,
                                               std::max<uint64_t>(100, o.samples / kRttTurnBlocks), key);
            if (!rt.error.empty()) p->errors.push_back(rt.error);
            else p->rtt_turn_ratio.push_back(spread_of(rt.ratio_by_block).median);
            const RateTurns ra = iccs_stream_turns(fabric, o.polling, o.size_bytes, kRateTurnBlocks,
                                                   std::max<uint64_t>(1000, o.messages / kRateTurnBlocks), key);
            if (!ra.error.empty()) p->errors.push_back(ra.error);
            else p->rate_turn_ratio.push_back(spread_of(ra.ratio_by_block).median);
        }
    note_rate(ps.raw_memif, raw_stream("memif", o.size_bytes, o.messages));
    note_rate(ps.raw_udp, raw_stream("udp", o.size_bytes, o.messages));
    note_rate(ps.kernel, kernel_stream(o.size_bytes, o.messages));
}

// --json: one object, a member per path with its medians, spread, ratios and errors.
void print_json(const CompareSetting& s, ComparePaths& ps) {
    const BenchCompareOptions& o = s.o;
    const Spread k_rtt = spread_of(ps.kernel.rtt_us), k_rate = spread_of(ps.kernel.rate);
    std::printf("{\"size_bytes\": %u, \"runs\": %u, \"rtt_samples_per_run\": %llu, "
                "\"rate_messages_per_run\": %llu, "
                "\"cores\": %u, \"polling\": \"%s\", \"pinning\": \"sender/pinger core 0, receiver/echo core 1\", "
                "\"spinning_threads\": %u, \"oversubscribed\": %s, \"udp_io\": %s, \"combine_max_bytes\": %u, \"paths\": {",
                o.size_bytes, o.runs, static_cast<unsigned long long>(o.samples),
                static_cast<unsigned long long>(o.messages), s.cores, o.polling.c_str(), s.spinning,
                s.oversubscribed ? "true" : "false", json_str(s.io_udp).c_str(), bench_combine());
    bool first = true;
    for (Path* p : ps.in_order(s.keyed)) {
        const Spread rt = spread_of(p->rtt_us), ra = spread_of(p->rate), dl = spread_of(p->delivered);
        if (p->raw != nullptr) {  // ours against the same fabric with no stack
            const Spread rrt = spread_of(p->raw->rtt_us), rra = spread_of(p->raw->rate);
            std::printf("%s\"%s\": {\"raw_rtt_median_us\": %.3f, \"raw_rate_msgs_per_s\": %.0f, "
                        "\"overhead_ratio\": %.3f, \"rate_overhead_ratio\": %.3f, ",
                        first ? "" : ", ", p->key, rrt.median, rra.median, rrt.median > 0 ? rt.median / rrt.median : 0.0,
                        ra.median > 0 ? rra.median / ra.median : 0.0);
        } else if (p->plain != nullptr) {  // authenticated against the same fabric without the key
            const Spread prt = spread_of(p->plain->rtt_us), pra = spread_of(p->plain->rate);
            std::printf("%s\"%s\": {\"auth_mode\": \"%s\", \"auth_rtt_overhead\": %.4f, "
                        "\"auth_rate_ratio\": %.4f, \"auth_rtt_overhead_paired\": %.4f, \"runs_host_moved\": %zu, ",
                        first ? "" : ", ", p->key, o.encrypt ? "aes-128-gcm aead" : "aes-128-gcm mac",
                        prt.median > 0 ? rt.median / prt.median : 0.0, pra.median > 0 ? ra.median / pra.median : 0.0,
                        spread_of(p->pair_ratio).median, runs_host_moved(*p));
            std::printf("\"auth_rtt_overhead_turns\": %.4f, \"auth_rate_ratio_turns\": %.4f, ",
                        spread_of(p->rtt_turn_ratio).median, spread_of(p->rate_turn_ratio).median);
            for (const auto& [name, v] : {std::pair{"auth_rtt_overhead_by_run", &p->pair_ratio},
                                          std::pair{"floor_before_plain_ns", &p->floor_plain_ns},
                                          std::pair{"floor_before_auth_ns", &p->floor_auth_ns},
                                          std::pair{"auth_rtt_overhead_turns_by_run", &p->rtt_turn_ratio},
                                          std::pair{"auth_rate_ratio_turns_by_run", &p->rate_turn_ratio}}) {
                std::printf("\"%s\": [", name);
                for (size_t i = 0; i < v->size(); ++i) std::printf("%s%.4g", i ? ", " : "", (*v)[i]);
                std::printf("], ");
            }
        } else {
            std::printf("%s\"%s\": {", first ? "" : ", ", p->key);
        }
        std::printf("\"rtt_median_us\": %.3f, \"rtt_min_us\": %.3f, \"rtt_max_us\": %.3f, "
                    "\"rtt_ratio_to_kernel\": %.4f, \"rate_msgs_per_s\": %.0f, \"rate_min\": %.0f, \"rate_max\": "
                    "%.0f, \"rate_ratio_to_kernel\": %.4f, \"delivered_median\": %.0f, \"runs_ok\": %zu, "
                    "\"errors\": [",
                    rt.median, rt.min, rt.max,
                    k_rtt.median > 0 ? rt.median / k_rtt.median : 0.0, ra.median, ra.min, ra.max,
                    k_rate.median > 0 ? ra.median / k_rate.median : 0.0, dl.median,
                    std::min(p->rtt_us.size(), p->rate.size()));
        for (size_t i = 0; i < p->errors.size(); ++i)
            std::printf("%s%s", i ? ", " : "", json_str(p->errors[i]).c_str());
        std::printf("]}");
        first = false;
    }
    std::printf("}}\n");
}

// The table: per path the round trip and the rate, each against the kernel sockets.
void print_table(const CompareSetting& s, ComparePaths& ps) {
    const BenchCompareOptions& o = s.o;
    const Spread k_rtt = spread_of(ps.kernel.rtt_us), k_rate = spread_of(ps.kernel.rate);
    std::printf("bench compare: %u-byte messages, host has %u cores; every path on the same 2 threads, one process "
                "each,\n  pinned to cores 0 (sender, pinger) and 1 (receiver, echo); iccs polling %s, combining %s; medians "
                "of %u runs [min .. max]\n",
                o.size_bytes, s.cores, o.polling.c_str(),
                bench_combine() == 0 ? "off" : ("up to " + std::to_string(bench_combine()) + " bytes").c_str(), o.runs);
    std::printf("  %-31s | %-34s | %-34s\n", "", "round trip, one message in flight",
                "one-way rate, one sender thread");
    std::printf("  %-31s | %9s %-15s %8s | %9s %-15s %8s\n", "path", "median us", "[min .. max]", "x kernel",
                "msgs/s", "[min .. max]", "x kernel");
    for (Path* p : ps.in_order(s.keyed)) {
        const Spread rt = spread_of(p->rtt_us), ra = spread_of(p->rate);
        char rr[24], rar[40];
        std::snprintf(rr, sizeof rr, "[%.1f .. %.1f]", rt.min, rt.max);
        std::snprintf(rar, sizeof rar, "[%s .. %s]", rate_text(ra.min).c_str(), rate_text(ra.max).c_str());
        std::printf("  %-31s | %9.2f %-15s %8.2f | %9s %-15s %8.2f\n", p->label.c_str(), rt.median, rr,
                    k_rtt.median > 0 ? rt.median / k_rtt.median : 0.0, rate_text(ra.median).c_str(), rar,
                    k_rate.median > 0 ? ra.median / k_rate.median : 0.0);
    }
    std::printf("  x kernel: below 1 for the round trip, above 1 for the rate: faster than the kernel sockets.\n");
}

// Below the table: the authenticated and raw-fabric ratios, what each path is, errors.
void print_table_notes(const CompareSetting& s, ComparePaths& ps) {
    const BenchCompareOptions& o = s.o;
    const double delivered = spread_of(ps.kernel.delivered).median;
    if (s.keyed)
        for (Path* p : {&ps.memif_auth, &ps.udp_auth}) {
            const double rt = spread_of(p->rtt_us).median, ra = spread_of(p->rate).median;
            const double prt = spread_of(p->plain->rtt_us).median, pra = spread_of(p->plain->rate).median;
            std::printf("  %s / plain %-5s: round trip %.3f (%+.2f us), message rate %.3f (%s against %s)\n",
                        s.auth_label, p->plain->key, prt > 0 ? rt / prt : 0.0, rt - prt, pra > 0 ? ra / pra : 0.0,
                        rate_text(ra).c_str(), rate_text(pra).c_str());
            if (!p->rtt_turn_ratio.empty() || !p->rate_turn_ratio.empty()) {
                const Spread tr = spread_of(p->rtt_turn_ratio), ta = spread_of(p->rate_turn_ratio);
                std::printf("    taking turns (a plain and an authenticated run alternating in blocks, the median of "
                            "the blocks' ratios a run):\n    round trip %.3f [%.3f .. %.3f], message rate %.3f [%.3f .. "
                            "%.3f]\n",
                            tr.median, tr.min, tr.max, ta.median, ta.min, ta.max);
            }
            if (p->pair_ratio.empty()) continue;
            const Spread pr = spread_of(p->pair_ratio), fp = spread_of(p->floor_plain_ns),
                         fa = spread_of(p->floor_auth_ns);
            std::printf("    run by run (each authenticated run right after its plain one): round trip %.3f [%.2f .. "
                        "%.2f]; the host's floor\n    before each (one cache line between the two cores): plain "
                        "%.0f [%.0f .. %.0f] ns, authenticated %.0f [%.0f .. %.0f] ns",
                        pr.median, pr.min, pr.max, fp.median, fp.min, fp.max, fa.median, fa.min, fa.max);
            if (const size_t moved = runs_host_moved(*p); moved > 0)
                std::printf(";\n    in %zu of %zu runs it moved over %.1fx between the two: their ratio is the host's "
                            "as much as ours",
                            moved, p->pair_ratio.size(), kHostMovedFactor);
            std::printf("\n");
        }
    for (Path* p : {&ps.memif, &ps.udp}) {
        const double rt = spread_of(p->rtt_us).median, ra = spread_of(p->rate).median;
        const double rrt = spread_of(p->raw->rtt_us).median, rra = spread_of(p->raw->rate).median;
        std::printf("  ours / raw %-5s: round trip %.2f (%+.2f us), time per message %.2f (rate %s against %s)\n",
                    p->key, rrt > 0 ? rt / rrt : 0.0, rt - rrt, ra > 0 ? rra / ra : 0.0, rate_text(ra).c_str(),
                    rate_text(rra).c_str());
    }
    std::printf("  raw:    the same two pinned processes, frames of the size an iccs message makes (memif: %u B,\n"
                "          udp: %u B datagrams), no stack, no reliability: what the fabric alone gives.\n",
                raw_frame_bytes("memif", o.size_bytes), raw_frame_bytes("udp", o.size_bytes));
    std::printf("  memif:  DPDK net_memif shared-memory link under iccs's own eth/ipv4/udp stack.\n");
    std::printf("  udp:    the kernel does IP and UDP; %s.\n", s.io_udp.c_str());
    std::printf("  kernel: blocking sendto/recvfrom on loopback, 4 MiB socket buffers.\n");
    std::printf("  RTT:  %llu round trips a run (after %llu untimed); each run's median.\n",
                static_cast<unsigned long long>(o.samples), static_cast<unsigned long long>(o.samples / 10));
    std::printf("  rate: %llu messages a run, first send to last delivery. The iccs paths are reliable (sliding\n"
                "        window, acks, exactly once); the kernel stream is not: it delivered %.0f of %llu "
                "(median)%s.\n",
                static_cast<unsigned long long>(o.messages), delivered, static_cast<unsigned long long>(o.messages),
                delivered < static_cast<double>(o.messages) ? ", the socket dropped the rest" : "");
    if (s.oversubscribed)
        std::printf("  note: polling %s spins %u threads on %u cores: the iccs figures are oversubscribed ones, not "
                    "dedicated-core ones.\n",
                    o.polling.c_str(), s.spinning, s.cores);
    for (Path* p : ps.in_order(s.keyed))
        for (const std::string& e : p->errors) std::printf("  error (%s): %s\n", p->key, e.c_str());
}

}  // namespace

int bench_compare(const BenchCompareOptions& o) {
    const unsigned cores = std::thread::hardware_concurrency();
    bool multishot = false;
    std::shared_ptr<const SlidwinAuthKey> key;
    if (!compare_setup(o, multishot, key)) return 2;
    const char* auth_label = o.encrypt ? "authenticated + encrypted" : "authenticated";
    ComparePaths ps(auth_label);
    const std::string io_udp = std::string("io_uring: ") +
                               (multishot ? "multishot recvmsg + provided-buffer ring" : "batched recvmsg") +
                               ", batched sendmsg, at most one system call per loop iteration";
    if (!o.json)
        std::fprintf(stderr, "bench compare: %u-byte messages, %u runs of: RTT (%llu round trips) and rate (%llu "
                     "messages) over memif, udp, kernel sockets; host has %u cores\n",
                     o.size_bytes, o.runs, static_cast<unsigned long long>(o.samples),
                     static_cast<unsigned long long>(o.messages), cores);
    if (!o.pcap_dir.empty())
        std::fprintf(stderr, "bench compare: capturing the memif runs to %s/rtt-memif-N and stream-memif-N "
                             "(cluster<C>-proxy<P>.pcapng); udp runs are not captured (kernel sockets, no frames); "
                             "the memif figures include the capture's cost; decode with tshark -o iccs.udp_port:%u\n",
                     o.pcap_dir.c_str(), bench_udp_port());
    for (uint32_t r = 0; r < o.runs; ++r) {
        if (!o.json) std::fprintf(stderr, "  run %u of %u ...\n", r + 1, o.runs);
        measure_run(o, key, ps);
    }
    const unsigned spinning = iccs_spinning_threads(o.polling);
    const CompareSetting setting{o, cores, spinning, spinning > cores, io_udp, auth_label, key != nullptr};
    bool any_error = false;
    for (Path* p : ps.in_order(setting.keyed)) any_error |= !p->errors.empty();
    if (o.json) {
        print_json(setting, ps);
    } else {
        print_table(setting, ps);
        print_table_notes(setting, ps);
    }
    return any_error ? 1 : 0;
}

}  // namespace iccs
