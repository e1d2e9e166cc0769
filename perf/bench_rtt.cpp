// bench_rtt.cpp: `iccs bench rtt`. Three ping-pongs, one message in flight each, medians and p99
// (bench_paths.hpp): iccs between two cluster processes over the chosen fabric (memif: DPDK;
// udp: the kernel's UDP sockets driven by io_uring) and polling mode; the kernel's blocking UDP
// sockets on loopback (the path iccs bypasses); the shared-memory floor.
#include "bench_rtt.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>

#include "bench_paths.hpp"
#include "bench_raw.hpp"
#include "uring_udp.hpp"

namespace iccs {

int bench_rtt(const BenchRttOptions& o) {
    const unsigned cores = std::thread::hardware_concurrency();
    if (o.fabric == "udp") {  // refused io_uring: say so now, not after the other paths ran
        UringCaps caps;
        std::string err;
        if (!uring_probe(caps, err)) {
            std::fprintf(stderr, "iccs: %s\n", err.c_str());
            return 2;
        }
    }
    // The raw-fabric baseline runs in the same command: a fabric it cannot use stops it now.
    if (const std::string why = raw_unavailable(o.fabric); !why.empty()) {
        std::fprintf(stderr, "iccs: bench rtt: %s\n", why.c_str());
        return 2;
    }
    if (!o.json)
        std::fprintf(stderr, "bench rtt: %u-byte messages, %llu samples each, fabric %s, host has %u cores\n",
                     o.size_bytes, static_cast<unsigned long long>(o.samples), o.fabric.c_str(), cores);
    std::fflush(stdout);
    if (!o.pcap_dir.empty())
        std::fprintf(stderr, "bench rtt: capturing to %s/rtt-%s-1/cluster<C>-proxy<P>.pcapng: the iccs figures "
                             "include the capture's cost; decode with tshark -o iccs.udp_port:%u\n",
                     o.pcap_dir.c_str(), o.fabric.c_str(), bench_udp_port());
    std::shared_ptr<const SlidwinAuthKey> key;
    if (!o.key_file.empty()) {
        std::string err;
        key = slidwin_load_key(o.key_file, o.encrypt, err);
        if (!key) {
            std::fprintf(stderr, "iccs bench rtt: --key: %s\n", err.c_str());
            return 2;
        }
    }
    const bool all = o.only.empty();
    RttStats ic;
    RttStats au;
    // With a key, the plain and the authenticated run take turns in short blocks (the host's state
    // changes for seconds at a time: two runs one after the other measure it, perf/README.md),
    // and the overhead is the median of the blocks' ratios.
    RttTurns turns;
    const uint32_t blocks = std::max<uint32_t>(1, o.blocks);
    const uint64_t block_rounds = std::max<uint64_t>(100, o.samples / blocks);
    if (key) {
        if (!o.pcap_dir.empty())  // the capture's cost in the plain run only would skew the ratio
            std::fprintf(stderr, "bench rtt: --pcap with --key: the runs taking turns are not captured\n");
        turns = iccs_rtt_turns(o.fabric, o.polling, o.size_bytes, blocks, block_rounds, key);
        ic = turns.plain;
        au = turns.auth;
        if (ic.error.empty()) ic.error = turns.error;
    } else if (all || o.only == "iccs") {
        ic = iccs_rtt(o.fabric, o.polling, o.size_bytes, o.samples, o.pcap_dir);
    }
    const Spread by_block = spread_of(turns.ratio_by_block);
    const double auth_overhead = by_block.median;
    const double auth_overhead_of_medians = key && ic.median_us > 0 ? au.median_us / ic.median_us : 0;
    char auth_json[512] = "";
    if (key)
        std::snprintf(auth_json, sizeof auth_json,
                      ", \"auth_mode\": \"%s\", \"auth_rtt_median_us\": %.3f, \"auth_rtt_p99_us\": %.3f, "
                      "\"auth_overhead\": %.4f, \"auth_overhead_block_min\": %.4f, \"auth_overhead_block_max\": %.4f, "
                      "\"auth_overhead_of_medians\": %.4f, \"auth_blocks\": %zu, \"auth_block_rounds\": %llu",
                      o.encrypt ? "aes-128-gcm aead" : "aes-128-gcm mac", au.median_us, au.p99_us, auth_overhead,
                      by_block.min, by_block.max, auth_overhead_of_medians, turns.ratio_by_block.size(),
                      static_cast<unsigned long long>(block_rounds));
    const RttStats raw = all || o.only == "raw" ? raw_rtt(o.fabric, o.size_bytes, o.samples) : RttStats{};
    const RttStats k = all ? kernel_rtt(o.size_bytes, o.samples) : RttStats{};
    const RttStats fl = all ? floor_rtt(o.samples) : RttStats{};
    const double r_kernel = k.median_us > 0 ? ic.median_us / k.median_us : 0;
    const double r_floor = fl.median_us > 0 ? ic.median_us / fl.median_us : 0;
    const double r_raw = raw.median_us > 0 ? ic.median_us / raw.median_us : 0;
    const std::string error = !ic.error.empty() ? ic.error : raw.error;
    const unsigned spinning = iccs_spinning_threads(o.polling);
    const bool oversubscribed = spinning > cores;
    const std::string io = o.fabric == "udp" ? "udp (kernel sockets, io_uring)" : o.fabric + " (DPDK)";
    if (o.json) {
        std::printf("{\"size_bytes\": %u, \"samples\": %llu, \"cores\": %u, \"fabric\": \"%s\", \"polling\": \"%s\", "
                    "\"oversubscribed\": %s, \"iccs_rtt_median_us\": %.3f, \"iccs_rtt_p99_us\": %.3f, "
                    "\"kernel_rtt_median_us\": %.3f, \"kernel_rtt_p99_us\": %.3f, \"floor_rtt_median_us\": %.3f, "
                    "\"ratio_to_kernel\": %.4f, \"ratio_to_floor\": %.2f, \"raw_rtt_median_us\": %.3f, "
                    "\"raw_rtt_p99_us\": %.3f, \"raw_frame_bytes\": %u, \"overhead_ratio\": %.3f%s%s%s%s}\n",
                    o.size_bytes, static_cast<unsigned long long>(o.samples), cores, o.fabric.c_str(),
                    o.polling.c_str(), oversubscribed ? "true" : "false", ic.median_us, ic.p99_us, k.median_us,
                    k.p99_us, fl.median_us, r_kernel, r_floor, raw.median_us, raw.p99_us,
                    raw_frame_bytes(o.fabric, o.size_bytes), r_raw, auth_json, error.empty() ? "" : ", \"error\": \"",
                    error.c_str(), error.empty() ? "" : "\"");
    } else {
        std::printf("bench rtt: %u-byte messages, one in flight, %llu samples each; host has %u cores\n",
                    o.size_bytes, static_cast<unsigned long long>(o.samples), cores);
        std::printf("  %-70s %10s %10s\n", "path", "median us", "p99 us");
        const bool show_iccs = all || o.only == "iccs", show_raw = all || o.only == "raw";
        if (show_iccs)
            std::printf("  %-70s %10.2f %10.2f\n", ("iccs: 2 clusters over " + io + ", polling " + o.polling).c_str(),
                        ic.median_us, ic.p99_us);
        if (key) {
            std::printf("  %-70s %10.2f %10.2f\n",
                        o.encrypt ? "  the same, every datagram authenticated + encrypted (AES-128-GCM)"
                                  : "  the same, every datagram authenticated (AES-128-GCM MAC)",
                        au.median_us, au.p99_us);
            std::printf("  auth/plain = %.3f: median of %zu blocks' ratios [%.3f .. %.3f] (the two runs took turns, "
                        "%llu timed round trips a block; ratio of the medians %.3f)\n",
                        auth_overhead, turns.ratio_by_block.size(), by_block.min, by_block.max,
                        static_cast<unsigned long long>(block_rounds), auth_overhead_of_medians);
        }
        const std::string raw_label = o.fabric == "udp"
                                          ? "raw udp: the same io_uring loop, bare " +
                                                std::to_string(raw_frame_bytes(o.fabric, o.size_bytes)) +
                                                "-byte datagrams, no stack"
                                          : "raw " + o.fabric + ": DPDK rx/tx bursts of " +
                                                std::to_string(raw_frame_bytes(o.fabric, o.size_bytes)) +
                                                "-byte frames, no stack";
        if (show_raw) std::printf("  %-70s %10.2f %10.2f\n", raw_label.c_str(), raw.median_us, raw.p99_us);
        if (all) {
            std::printf("  %-70s %10.2f %10.2f\n", "kernel: UDP on loopback, 2 processes, blocking sockets",
                        k.median_us, k.p99_us);
            std::printf("  %-70s %10.2f %10.2f\n", "floor: one shared cache line, 2 pinned processes", fl.median_us,
                        fl.p99_us);
            std::printf("  ratio to kernel %.3f (target <= 0.05 with inline polling over memif), ratio to floor %.1f\n",
                        r_kernel, r_floor);
            std::printf("  ours / raw fabric %.2f (target <= 1.3 with inline polling): iccs = the fabric + %.2f us of "
                        "software per round trip\n",
                        r_raw, ic.median_us - raw.median_us);
        } else {
            std::printf("  --only %s: the other paths and the ratios were not measured\n", o.only.c_str());
        }
        if (oversubscribed)
            std::printf("  note: %u spinning threads on %u cores: this is an oversubscribed figure, not a "
                        "dedicated-core one\n",
                        spinning, cores);
        if (!ic.error.empty()) std::printf("  iccs: %s\n", ic.error.c_str());
        if (!au.error.empty()) std::printf("  iccs with --key: %s\n", au.error.c_str());
        if (!raw.error.empty()) std::printf("  raw: %s\n", raw.error.c_str());
    }
    return error.empty() && au.error.empty() ? 0 : 1;
}

}  // namespace iccs
