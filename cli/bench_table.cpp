// bench_table.cpp: `iccs bench` as a table of bench rows (bench_table.hpp): each row its name,
// summary, help, its options (type and range), and its launch function into perf/. `iccs bench
// NAME ...` looks the row up, parses once against it (cli/options.hpp) and runs it.
#include "bench_table.hpp"

#include <cstdio>
#include <algorithm>
#include <cstring>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench_collectives.hpp"
#include "bench_compare.hpp"
#include "bench_dsm.hpp"
#include "bench_dsm_argo.hpp"
#include "bench_mpi.hpp"
#include "bench_mpi_collectives.hpp"
#include "bench_paths.hpp"
#include "bench_rtt.hpp"
#include "bench_stack.hpp"
#include "bench_stripe.hpp"
#include "cluster.hpp"

namespace iccs {

using cli::choice_opt;
using cli::flag;
using cli::Option;
using cli::text_opt;
using cli::uint_opt;

namespace {

const std::vector<std::string> kPollings = {"inline", "adaptive", "busy"};

// --pcap DIR of the cluster benchmarks: capture needs DPDK frames and a directory we can write.
void check_pcap(const std::string& who, const std::string& dir, const std::string& fabric) {
    if (dir.empty()) return;
    if (fabric == "udp")
        cli::usage_error(who, "--pcap records the frames of DPDK ports; --fabric udp has kernel sockets and no frames "
                              "(use --fabric memif, or tcpdump -i lo)");
    std::string err;
    if (!pcap_dir_ready(dir, err)) cli::usage_error(who, err);
}

void check_key(const std::string& who, const cli::Args& p) {
    if (p.flag("--encrypt") && !p.has("--key")) cli::usage_error(who, "--encrypt needs --key FILE");
}

Option pcap_option() {
    return text_opt("--pcap", "DIR",
                    "every proxy of each cluster run writes its frames to DIR/<measurement>-<fabric>-<n>/"
                    "cluster<C>-proxy<P>.pcapng (memif only); the iccs figures then include the capture's cost");
}
Option combine_option() {
    return uint_opt("--combine", "BYTES", 0, 1400,
                    "message combining in the iccs runs, as [cluster] combine_max_bytes (0 = off)",
                    std::to_string(bench_combine()));
}
Option json_option() { return flag("--json", "one JSON object instead of the table"); }
Option key_option() {
    return text_opt("--key", "FILE",
                    "also with every datagram authenticated ([security] key_file: 32..4096 random bytes, yours, mode 0600)");
}
Option encrypt_option() { return flag("--encrypt", "with --key: authenticated and encrypted"); }

int launch_stack(const BenchRow& row, const cli::Args& p) {
    check_key("bench " + row.name, p);
    BenchStackOptions o;
    o.size_bytes = static_cast<uint32_t>(p.u64("--size", o.size_bytes));
    o.messages = p.u64("--messages", o.messages);
    o.runs = static_cast<uint32_t>(p.u64("--runs", o.runs));
    o.key_file = p.text("--key");
    o.encrypt = p.flag("--encrypt");
    o.json = p.flag("--json");
    const auto r = bench_stack(o);
    if (!r.key_error.empty()) {
        std::fprintf(stderr, "iccs bench stack: --key: %s\n", r.key_error.c_str());
        return 2;
    }
    print_bench_stack(o, r);
    return 0;
}

int launch_rtt(const BenchRow& row, const cli::Args& p) {
    check_key("bench " + row.name, p);
    BenchRttOptions o;
    o.size_bytes = static_cast<uint32_t>(p.u64("--size", o.size_bytes));
    o.samples = p.u64("--samples", o.samples);
    o.polling = p.text("--polling", o.polling);
    o.fabric = p.text("--fabric", o.fabric);
    o.pcap_dir = p.text("--pcap");
    if (p.has("--combine")) bench_set_combine(static_cast<uint32_t>(p.u64("--combine", 0)));
    o.only = p.text("--only");
    o.key_file = p.text("--key");
    o.encrypt = p.flag("--encrypt");
    o.blocks = static_cast<uint32_t>(p.u64("--blocks", o.blocks));
    o.json = p.flag("--json");
    // The raw fabric has no stack to authenticate: a key's round trip is the iccs path's.
    if (o.only == "raw" && !o.key_file.empty())
        cli::usage_error("bench " + row.name, "--key measures the iccs path; it does not go with --only raw");
    check_pcap("bench " + row.name, o.pcap_dir, o.fabric);
    return bench_rtt(o);
}

int launch_stripe(const BenchRow& row, const cli::Args& p) {
    BenchStripeOptions o;
    o.runs = static_cast<uint32_t>(p.u64("--runs", o.runs));
    o.big_messages = static_cast<uint32_t>(p.u64("--messages", o.big_messages));
    o.polling = p.text("--polling", o.polling);
    o.fabric = p.text("--fabric", o.fabric);
    o.pcap_dir = p.text("--pcap");
    o.json = p.flag("--json");
    check_pcap("bench " + row.name, o.pcap_dir, o.fabric);
    return bench_stripe(o);
}

int launch_compare(const BenchRow& row, const cli::Args& p) {
    check_key("bench " + row.name, p);
    BenchCompareOptions o;
    o.size_bytes = static_cast<uint32_t>(p.u64("--size", o.size_bytes));
    o.runs = static_cast<uint32_t>(p.u64("--runs", o.runs));
    o.samples = p.u64("--samples", o.samples);
    o.messages = p.u64("--messages", o.messages);
    o.polling = p.text("--polling", o.polling);
    o.pcap_dir = p.text("--pcap");
    if (p.has("--combine")) bench_set_combine(static_cast<uint32_t>(p.u64("--combine", 0)));
    o.key_file = p.text("--key");
    o.encrypt = p.flag("--encrypt");
    o.json = p.flag("--json");
    check_pcap("bench " + row.name, o.pcap_dir, "memif");  // compare captures its memif runs only
    return bench_compare(o);
}

int launch_dsm_argo(const BenchRow& row, const cli::Args& p) {
    const std::string who = "bench " + row.name;
    if (p.has("--rounds")) cli::usage_error(who, "--rounds is the operation benchmark's; --vs argo runs whole programs");
    BenchDsmArgoOptions o;
    std::stringstream list(p.text("--programs", "all"));
    for (std::string name; std::getline(list, name, ',');) {
        if (name == "all") continue;
        if (name != "matmul" && name != "jacobi" && name != "fft" && name != "taskq")
            cli::usage_error(who, "--programs: unknown program '" + name + "' (matmul, jacobi, fft, taskq, all)");
        o.programs.push_back(name);
    }
    o.argo_dir = p.text("--argo");
    const std::string problem = argo_install_problem(o.argo_dir);
    if (!problem.empty()) cli::usage_error(who, problem);
    o.runs = static_cast<uint32_t>(p.u64("--runs", o.runs));
    o.small = p.flag("--small");
    o.json = p.flag("--json");
    return bench_dsm_argo(o);
}

int launch_dsm(const BenchRow& row, const cli::Args& p) {
    if (p.has("--vs")) return launch_dsm_argo(row, p);
    for (const char* only_vs : {"--argo", "--programs", "--small"})
        if (p.has(only_vs)) cli::usage_error("bench " + row.name, std::string(only_vs) + " belongs to --vs argo");
    BenchDsmOptions o;
    o.rounds = static_cast<uint32_t>(p.u64("--rounds", o.rounds));
    o.runs = static_cast<uint32_t>(p.u64("--runs", o.runs));
    o.json = p.flag("--json");
    return bench_dsm(o);
}

int launch_collectives(const BenchRow& row, const cli::Args& p) {
    BenchCollectivesOptions o;
    o.sites = static_cast<uint32_t>(p.u64("--sites", o.sites));
    o.clusters = static_cast<uint32_t>(p.u64("--clusters", o.clusters));
    o.cluster_size = static_cast<uint32_t>(p.u64("--cluster-size", o.cluster_size));
    o.wan_latency_ms = p.real("--wan-latency-ms", o.wan_latency_ms);
    o.wan_bandwidth = p.u64("--wan-bandwidth", o.wan_bandwidth);
    o.size = static_cast<uint32_t>(p.u64("--size", o.size));
    o.reps = static_cast<uint32_t>(p.u64("--reps", o.reps));
    o.cyclic = p.text("--layout", "block") == "cyclic";
    o.ordered_messages = static_cast<uint32_t>(p.u64("--ordered-messages", o.ordered_messages));
    o.json = p.flag("--json");
    if (o.sites * o.clusters > 64) cli::usage_error("bench " + row.name, "--sites x --clusters is at most 64 clusters");
    return bench_collectives(o);
}

// --colls: all, or a comma-separated list of MPI collectives by their counter names.
const std::set<std::string> kMpiColls = {"barrier", "bcast", "reduce", "allreduce", "gather", "gatherv",
                                         "scatter", "scatterv", "allgather", "allgatherv", "alltoall",
                                         "alltoallv", "reduce_scatter", "reduce_scatter_block", "scan", "exscan"};

int launch_mpi_collectives(const BenchRow& row, const cli::Args& p) {
    BenchMpiCollectivesOptions o;
    o.sites = static_cast<uint32_t>(p.u64("--sites", o.sites));
    o.clusters = static_cast<uint32_t>(p.u64("--clusters", o.clusters));
    o.cluster_size = static_cast<uint32_t>(p.u64("--cluster-size", o.cluster_size));
    o.proxies = static_cast<uint32_t>(p.u64("--proxies", o.proxies));
    o.wan_latency_ms = p.real("--wan-latency-ms", o.wan_latency_ms);
    o.wan_bandwidth = p.u64("--wan-bandwidth", o.wan_bandwidth);
    o.size = static_cast<uint32_t>(p.u64("--size", o.size));
    o.reps = static_cast<uint32_t>(p.u64("--reps", o.reps));
    o.colls = p.text("--colls", o.colls);
    o.han = !p.flag("--no-han");
    o.transport = p.text("--transport", o.transport);
    o.json = p.flag("--json");
    if (o.colls != "all") {
        std::istringstream in(o.colls);
        std::string c;
        while (std::getline(in, c, ','))
            if (!kMpiColls.count(c)) {
                std::string all;
                for (const std::string& k : kMpiColls) all += (all.empty() ? "" : ", ") + k;
                cli::usage_error("bench " + row.name, "bad value '" + c + "' in --colls: allowed: all, or a list of " + all);
            }
    }
    if (o.sites * o.clusters > 64) cli::usage_error("bench " + row.name, "--sites x --clusters is at most 64 clusters");
    return bench_mpi_collectives(o);
}

int launch_bench_mpi(const BenchRow& row, const cli::Args& p) {
    BenchMpiOptions o;
    o.runs = static_cast<uint32_t>(p.u64("--runs", o.runs));
    o.ranks_per_cluster = static_cast<uint32_t>(p.u64("--ranks-per-cluster", o.ranks_per_cluster));
    o.reps = static_cast<uint32_t>(p.u64("--reps", o.reps));
    o.max_size = p.u64("--max-size", o.max_size);
    o.rtt_samples = p.u64("--rtt-samples", o.rtt_samples);
    o.run_timeout_s = static_cast<uint32_t>(p.u64("--run-timeout", o.run_timeout_s));
    o.quick = p.flag("--quick");
    o.json = p.flag("--json");
    o.polling = p.text("--polling", o.polling);
    const std::string list = p.text("--paths");
    const auto& known = bench_mpi_paths();
    for (size_t pos = 0; !list.empty() && pos <= list.size();) {
        const size_t comma = std::min(list.find(',', pos), list.size());
        const std::string path = list.substr(pos, comma - pos);
        if (std::find(known.begin(), known.end(), path) == known.end())
            cli::usage_error("bench " + row.name, "bad value '" + path + "' for --paths: allowed paths are iccs-memif, "
                                                  "iccs-udp, tcp, ofi-tcp-rxm, ofi-udp-rxd, vader");
        o.paths.push_back(path);
        pos = comma + 1;
    }
    return bench_mpi(o);
}

std::vector<BenchRow> make_rows() {
    std::vector<BenchRow> rows;
    rows.push_back(BenchRow{
        "stack", "the stack's CPU ns per message against the kernel's UDP path",
        "  CPU ns per delivered message (send + receive + ack) of the iccs stack over the in-memory wire,\n"
        "  against the kernel's UDP loopback path (sendmmsg/recvmmsg x32) measured in the same run;\n"
        "  prints both and their ratio. --key FILE [--encrypt]: the iccs stack also with every datagram\n"
        "  authenticated (and encrypted), runs interleaved: auth_ns_per_msg, auth_overhead (auth /\n"
        "  plain); and what authenticating costs stage by stage (CPU ns per call: key derivation, key\n"
        "  schedule, seal and open of an ack-only and of a data datagram, the anti-replay window, with\n"
        "  --encrypt the sealed copy of a retransmission), with the data seal through an EVP_CIPHER_CTX\n"
        "  (how slidwin sealed before) as the same-run baseline: auth_stages_ns, auth_seal_evp_over_ours.\n",
        {uint_opt("--size", "N", 1, 1400, "payload bytes", "100"),
          uint_opt("--messages", "N", 1000, 1'000'000'000, "messages per run", "2000000"),
          uint_opt("--runs", "N", 1, 100, "runs; the median is reported", "5"), key_option(), encrypt_option(),
          json_option()},
        launch_stack});
    rows.push_back(BenchRow{
        "rtt", "cluster-to-cluster round trip against kernel UDP, the shared-memory floor and the raw fabric",
        "  round-trip time of messages between compute threads of two clusters (processes, proxies) over\n"
        "  --fabric memif (DPDK, the default) or udp (kernel UDP sockets via io_uring), median and p99,\n"
        "  with the kernel's UDP ping-pong on loopback and the shared-memory floor (one cache line\n"
        "  between two pinned processes) in the same run, and the raw fabric: the same two pinned\n"
        "  processes exchanging a frame of the same size over the same fabric with no stack (memif: DPDK\n"
        "  rx/tx bursts on a net_memif port; udp: the proxies' io_uring loop with bare datagrams);\n"
        "  refused, with the reason, where that fabric is unavailable. --samples N (default 20000, at\n"
        "  least 100). JSON keys: iccs_rtt_median_us, iccs_rtt_p99_us, kernel_rtt_median_us,\n"
        "  floor_rtt_median_us, raw_rtt_median_us, raw_rtt_p99_us, raw_frame_bytes, overhead_ratio (iccs\n"
        "  / raw), ratio_to_kernel, ratio_to_floor, cores, fabric, polling. --key FILE: the iccs round\n"
        "  trip again with every datagram authenticated ([security] key_file; --encrypt: and encrypted),\n"
        "  beside the plain one, the two runs taking turns in --blocks blocks (each its own pair of\n"
        "  cluster processes; one sleeps while the other's block runs), so both meet the same state of\n"
        "  the host: auth_rtt_median_us, auth_rtt_p99_us, auth_overhead (auth / plain: the median of the\n"
        "  blocks' ratios), auth_overhead_block_min/max, auth_overhead_of_medians, auth_blocks,\n"
        "  auth_block_rounds; iccs_rtt_median_us is then the plain run's of the same turns.\n"
        "  --only iccs|raw: that path alone (to profile it: perf record sees nothing else); the other\n"
        "  paths' figures and the ratios are then 0. With --key, --only iccs measures the iccs path plain\n"
        "  and authenticated (auth/plain kept); --only raw refuses a key (no stack to authenticate).\n",
        {uint_opt("--size", "N", 1, 9000, "payload bytes", "100"),
          uint_opt("--samples", "N", 100, 10'000'000, "timed round trips", "20000"),
          choice_opt("--polling", kPollings, "the proxies' polling", "inline"),
          choice_opt("--fabric", {"memif", "udp"}, "memif (DPDK) or udp (kernel UDP sockets via io_uring)", "memif"),
          combine_option(), pcap_option(), key_option(), encrypt_option(),
          uint_opt("--blocks", "N", 1, 10'000, "with --key: blocks the plain and keyed runs alternate in", "40"),
          choice_opt("--only", {"iccs", "raw"}, "that path alone (to profile it); iccs with --key: plain and authenticated"), json_option()},
        launch_rtt});
    rows.push_back(BenchRow{
        "stripe", "1 MiB throughput over 1, 2, 4 proxies against kernel TCP; message rate per dispatch policy",
        "  what striping buys: throughput of 1 MiB messages between two clusters (processes) over one\n"
        "  parallel connection with 1, 2 and 4 proxies per cluster, against a kernel TCP loopback stream\n"
        "  of the same messages in the same run; and the message rate of 100-byte messages with each\n"
        "  dispatch policy (fixed, round-robin, least-loaded) over 2 proxies, also with proxy 1 slowed on\n"
        "  purpose. --fabric memif (default) or udp; --polling (default adaptive); --runs N (default 3,\n"
        "  medians); --messages N: 1 MiB messages per run (default 64). States the host's cores; with\n"
        "  fewer cores than threads the figures are functional, and it says so. JSON keys: cores, fabric,\n"
        "  kernel_tcp_mb_per_s, mb_per_s_1_proxy, mb_per_s_2_proxies, mb_per_s_4_proxies, ratio_2_to_1,\n"
        "  ratio_4_to_1, ratio_1_proxy_to_kernel, msgs_per_s_fixed, msgs_per_s_round_robin,\n"
        "  msgs_per_s_least_loaded, slowed_msgs_per_s_round_robin, slowed_msgs_per_s_least_loaded,\n"
        "  slowed_share_round_robin, slowed_share_least_loaded (proxy 1 slowed: rate and the share it\n"
        "  got), functional_only.\n",
        {uint_opt("--runs", "N", 1, 101, "runs; medians are reported", "3"),
          uint_opt("--messages", "N", 2, 100'000, "1 MiB messages per run", "64"),
          choice_opt("--polling", kPollings, "the proxies' polling", "adaptive"),
          choice_opt("--fabric", {"memif", "udp"}, "memif (DPDK) or udp (kernel UDP sockets via io_uring)", "memif"),
          pcap_option(), json_option()},
        launch_stripe});
    rows.push_back(BenchRow{
        "compare", "the headline table: RTT and message rate over memif, udp and kernel sockets",
        "  the headline table: the same 100-byte round trip (median) and one-way message rate (one sender\n"
        "  thread) over memif (DPDK), udp (io_uring) and plain blocking kernel sockets, all on the same\n"
        "  two pinned threads, interleaved over --runs N runs (default 5), medians with min and max, and\n"
        "  the ratio of each to the kernel sockets; beside each iccs path its raw fabric (as for rtt: no\n"
        "  stack) and ours / raw. --samples N round trips (default 10000) and --messages N (default\n"
        "  200000) per run; --polling as for rtt (default inline: no thread but the two). JSON:\n"
        "  paths.memif, paths.raw_memif, paths.udp, paths.raw_udp, paths.kernel, each with rtt_median_us,\n"
        "  rtt_ratio_to_kernel, rate_msgs_per_s, rate_ratio_to_kernel, min/max; memif and udp also\n"
        "  raw_rtt_median_us, raw_rate_msgs_per_s, overhead_ratio (round trip, ours / raw),\n"
        "  rate_overhead_ratio (time per message, ours / raw); cores, oversubscribed, combine_max_bytes\n"
        "  (--combine). --key FILE [--encrypt]: each iccs run again with every datagram authenticated\n"
        "  (and encrypted), right after the plain one; rows \"the same, authenticated\" and auth / plain\n"
        "  for the round trip and the message rate; JSON paths.memif_auth and paths.udp_auth also with\n"
        "  auth_rtt_overhead (auth / plain round trip) and auth_rate_ratio (auth / plain message rate).\n"
        "  With --key each round trip follows a look at the host's floor (one cache line between the\n"
        "  two cores, which moves between levels on a shared virtual host): the ratio run by run and\n"
        "  the floors, JSON auth_rtt_overhead_paired (their median), auth_rtt_overhead_by_run,\n"
        "  floor_before_plain_ns, floor_before_auth_ns, runs_host_moved (floors over 1.5x apart).\n"
        "  And each run measures both again as a plain and an authenticated run taking turns in blocks\n"
        "  (as bench rtt --key; the rate in 20 blocks of messages/20): auth_rtt_overhead_turns and\n"
        "  auth_rate_ratio_turns (medians over the runs of each run's median block ratio), and\n"
        "  auth_rtt_overhead_turns_by_run, auth_rate_ratio_turns_by_run.\n",
        {uint_opt("--size", "N", 1, 9000, "payload bytes", "100"),
          uint_opt("--runs", "N", 1, 100, "runs, interleaved; medians with min and max", "5"),
          uint_opt("--samples", "N", 100, 10'000'000, "round trips per run", "10000"),
          uint_opt("--messages", "N", 1000, 100'000'000, "messages per rate measurement", "200000"),
          choice_opt("--polling", kPollings, "the iccs paths' polling", "inline"), combine_option(), pcap_option(),
          key_option(), encrypt_option(), json_option()},
        launch_compare});
    rows.push_back(BenchRow{
        "dsm", "the DSM's page fetch, diff, lock and barrier over iccs against direct; --vs argo: programs against ArgoDSM",
        "  the DSM's costs between 2 cluster processes (1 compute thread each) started by the runtime's\n"
        "  launcher, over the iccs transport (1 proxy per cluster, memif) and over direct (shared memory,\n"
        "  no proxy) in the same command: page fetch round trip (fault to data), release of one fully\n"
        "  written 4 KiB page (diff to its home, acked), lock acquire+release of a lock homed at the\n"
        "  other cluster, 2-cluster barrier; median and p99 of --rounds N (default 400, 10..100000) each,\n"
        "  and the ratio iccs/direct of the medians; --runs N (default 3, 1..20) runs per transport,\n"
        "  interleaved iccs, direct, iccs, ..., each figure the median of the runs'. States the host's\n"
        "  cores and whether threads are oversubscribed. direct is the floor: an operation where it is\n"
        "  slower than iccs beyond noise (median over 10% higher and its best run slower) is printed as\n"
        "  FLOOR BROKEN. JSON: runs, cores, oversubscribed, floor_ok, and fetch, diff, lock, barrier,\n"
        "  each with iccs_median_us, iccs_p99_us, direct_median_us, direct_p99_us, samples (of all runs),\n"
        "  ratio_iccs_direct, direct_slower.\n"
        "  --vs argo --argo DIR: whole programs against ArgoDSM instead (perf/dsm_vs_argo/README.md): matmul\n"
        "  (512x512), jacobi (1024x1024, 50 sweeps), fft (512x512 complex, 2 forward+inverse 2-D FFTs by\n"
        "  row FFTs and transposes) and taskq (4096 tasks under one queue lock), the same C++ on both\n"
        "  (every thread writes its part of the data, the parallel section timed between barriers, every\n"
        "  run checked against a sequential reference), 2 processes x 2 threads: Argo's compiled by the\n"
        "  bench with mpic++ against the Argo install in DIR (never fetched or built by iccs; a DIR\n"
        "  without include/argo/argo.hpp and lib/libargo*.so is refused, naming the path) and started\n"
        "  by mpirun (ARGO_* variables of the environment reach it); ours by iccs run over iccs (1 proxy\n"
        "  per cluster, adaptive polling) and over direct. Runs\n"
        "  interleaved (argo, iccs, direct per program), --runs N each (default 3); medians with min and\n"
        "  max, ratios iccs/argo and direct/argo, the goal iccs <= 0.5 x argo per program, and FLOOR\n"
        "  BROKEN where direct is slower than iccs beyond noise. --small: small sizes (checks the setup).\n"
        "  JSON: runs, processes, threads_per_process, cores, oversubscribed, load_average_before/after,\n"
        "  programs.<name> with size, argo_/iccs_/direct_median_s, _min_s, _max_s, _wall_median_s (whole\n"
        "  run), ratio_iccs_argo, ratio_direct_argo, ratio_direct_iccs, goal_met, direct_slower, error;\n"
        "  goal_met, floor_ok, ok. Exit 1 when a run fails its check or does not finish.\n",
        {uint_opt("--rounds", "N", 10, 100'000, "repetitions of each operation", "400"),
          uint_opt("--runs", "N", 1, 20, "runs per transport, interleaved", "3"),
          choice_opt("--vs", {"argo"}, "whole programs against ArgoDSM (needs --argo DIR)"),
          text_opt("--argo", "DIR", "with --vs argo: the install prefix of an ArgoDSM build (MPI backend)"),
          text_opt("--programs", "P,...", "with --vs argo: matmul, jacobi, fft, taskq or all (default all)"),
          flag("--small", "with --vs argo: small sizes, a check of the setup"), json_option()},
        launch_dsm});
    rows.push_back(BenchRow{
        "collectives", "group/'s hierarchical against flat collectives over the emulated WAN; ordered broadcast",
        "  group/'s collectives across S sites (default 4) of C clusters (default 1 per site) of T\n"
        "  compute threads (default 1), the sites joined by the proxies' WAN emulation (transport iccs; L\n"
        "  ms one way, default 10; B bytes/s per link, default 1000000): completion time of each\n"
        "  collective (barrier, bcast, reduce, allreduce, gather, scatter, allgather, alltoall,\n"
        "  reduce_scatter, scan) in the hierarchical (MagPIe) and the flat family, interleaved, median\n"
        "  (and min..max) of --reps R (default 5) after a warm-up; --size N bytes (default 65536: the\n"
        "  vector of bcast, reduce, allreduce, scan, reduce_scatter; the total of gather, scatter,\n"
        "  allgather; each rank's buffer of alltoall); WAN data bytes per call against the minimum (each\n"
        "  item once to each receiving site); then the ordered broadcast per sequencer policy: latency\n"
        "  (median, one message at a time, senders in phases of 5 over every rank) and throughput (M\n"
        "  messages per thread at once, default 50). --layout block (default: clusters numbered site by\n"
        "  site) or cyclic (cluster c on site c mod S: rank order unrelated to sites, as a grid-unaware\n"
        "  numbering may be). JSON: layout, collectives.<name> with hier_median_us, flat_median_us,\n"
        "  speedup (flat / hier), wan_bytes, wan_bytes_min, flat_wan_bytes, min/max, hops;\n"
        "  ordered_bcast.<central|rotating|migrating> with latency_us (median), latency_mean_us and\n"
        "  msgs_per_s; goal_config, goal_met, cores, oversubscribed.\n",
        {uint_opt("--sites", "S", 1, 16, "WAN sites", "4"),
          uint_opt("--clusters", "C", 1, 16, "clusters per site", "1"),
          uint_opt("--cluster-size", "T", 1, 16, "compute threads per cluster", "1"),
          cli::real_opt("--wan-latency-ms", "L", 0, 100000, "one-way latency of every WAN link [ms]", "10"),
          uint_opt("--wan-bandwidth", "B", 0, 1'000'000'000'000, "bytes/s per WAN link (0 = unlimited)", "1000000"),
          uint_opt("--size", "N", 8, 16u << 20, "bytes per collective", "65536"),
          uint_opt("--reps", "R", 1, 1000, "measured repetitions", "5"),
          choice_opt("--layout", {"block", "cyclic"}, "clusters numbered site by site, or round-robin over the sites",
                     "block"),
          uint_opt("--ordered-messages", "M", 1, 100'000, "messages per thread for the ordered broadcast's throughput",
                   "50"),
          json_option()},
        launch_collectives});
    rows.push_back(BenchRow{
        "mpi-collectives", "MagPIe for MPI programs against Open MPI's own collectives, under mpirun over the WAN",
        "  MagPIe for MPI programs (mpi/magpie/, libiccs-magpie.so) against Open MPI's own collectives:\n"
        "  our MPI program (perf/mpi_collectives.c) under real mpirun on S sites of C clusters of R\n"
        "  ranks, P proxies per cluster, over the iccs provider (mpi/provider/: pml cm, mtl ofi) whose\n"
        "  proxies emulate the WAN (L ms one way; B bytes/s per link); each collective timed as MPI_X\n"
        "  (MagPIe) and PMPI_X (Open MPI's tuned) in the same run, interleaved, every measurement started\n"
        "  at one instant on every rank (one host, one clock), median (and min..max) of --reps R after a\n"
        "  warm-up; then a second run with coll han preferred (--no-han: not), reported where it runs.\n"
        "  Sizes (bytes per rank; --size N for one): 8, 1024, 65536 for all 16 collectives, 1048576 for\n"
        "  bcast and allreduce; --colls a list. WAN data bytes per MagPIe call against the minimum\n"
        "  (each data item once to each site that needs it: over 3 or more sites from 16 KiB on,\n"
        "  allreduce and reduce go by blocks: allreduce 2 (S - 1) vectors in all, not S (S - 1); reduce\n"
        "  (S - 1) + (S - 1) / S, not S - 1; mpi/magpie/README.md).\n"
        "  --transport tcp: Open MPI's own TCP, no WAN emulation (checks the programs; not the WAN\n"
        "  figure). JSON: mpi_collectives.<name>.<size> with magpie_ms, mpi_ms, speedup (tuned /\n"
        "  magpie), wan_bytes, wan_bytes_min, min/max, han_ms, speedup_han; wan_bytes_at_min,\n"
        "  goal_config, goal_met, cores, oversubscribed.\n",
        {uint_opt("--sites", "S", 1, 16, "WAN sites", "4"),
         uint_opt("--clusters", "C", 1, 16, "clusters per site", "2"),
         uint_opt("--cluster-size", "R", 1, 16, "MPI ranks per cluster", "2"),
         uint_opt("--proxies", "P", 1, 8, "proxies per cluster", "1"),
         cli::real_opt("--wan-latency-ms", "L", 0, 100000, "one-way latency of every WAN link [ms]", "10"),
         uint_opt("--wan-bandwidth", "B", 0, 1'000'000'000'000, "bytes/s per WAN link (0 = unlimited)", "1000000"),
         uint_opt("--size", "N", 8, 16u << 20, "bytes per rank, one size only", "8, 1024, 65536; 1048576 for bcast, allreduce"),
         uint_opt("--reps", "R", 1, 1000, "measured repetitions", "5"),
         text_opt("--colls", "all|NAME,...", "all, or a list of MPI collectives by their counter names (bcast,allreduce)"),
         flag("--no-han", "no second run with Open MPI's coll han preferred"),
         choice_opt("--transport", {"iccs", "tcp"}, "the iccs provider with WAN emulation, or Open MPI's own TCP", "iccs"),
         json_option()},
        launch_mpi_collectives});
    rows.push_back(BenchRow{
        "mpi", "MPI point to point and collectives over the provider iccs against Open MPI's TCP, libfabric's and shared memory",
        "  MPI programs of our own (perf/mpi/mpi_bench.c, built with mpicc) under mpirun over every path,\n"
        "  runs interleaved: iccs-memif and iccs-udp (the provider iccs: pml cm, mtl ofi), tcp (Open MPI's\n"
        "  pml ob1, btl tcp,self: the baseline), ofi-tcp-rxm and ofi-udp-rxd (libfabric's tcp;ofi_rxm and\n"
        "  udp;ofi_rxd under the same mtl), vader (btl vader,self: the floor); 2 clusters of S ranks, every\n"
        "  rank bound to a core the same way. Figures: one-way latency of a ping-pong 0 B .. 4 MiB,\n"
        "  streaming bandwidth with a window of 64, the message rate of every pair at once (8 B, window\n"
        "  64), barrier, allreduce (8 B, 64 KiB); medians over --runs, ratios to tcp; then the goals (8 B\n"
        "  latency <= 0.15x tcp and <= 1.5x half of iccs's own runtime round trip, measured as bench rtt\n"
        "  does; 1 MiB bandwidth >= tcp; beating ofi-tcp-rxm and ofi-udp-rxd up to 64 KiB), each MET, NOT\n"
        "  MET or NOT MEASURED with its figures. A path whose mpirun fails: FAILED with mpirun's last\n"
        "  line, exit 1. JSON: mpi.<path>.latency_us.<size>, mpi.<path>.bandwidth_mb_s.<size>,\n"
        "  .msg_rate_per_s, .barrier_us, .allreduce_us.<size>; ratio_to_tcp.<path>... (the same keys);\n"
        "  iccs_runtime_rtt_median_us, goals, failed, cores, oversubscribed.\n",
        {uint_opt("--runs", "N", 1, 50, "runs of every path, interleaved; medians", "3"),
         uint_opt("--ranks-per-cluster", "S", 1, 8, "MPI ranks per cluster (2 clusters)", "1"),
         uint_opt("--reps", "R", 2, 64, "repetitions inside one run (the first a warm-up)", "5"),
         uint_opt("--max-size", "N", 8, 64u << 20, "largest message [bytes]", "4194304"),
         flag("--quick", "sizes 8 B, 64 KiB and 1 MiB only"),
         text_opt("--paths", "P,...", "the paths to run (default all): iccs-memif, iccs-udp, tcp, ofi-tcp-rxm, "
                                      "ofi-udp-rxd, vader"),
         uint_opt("--rtt-samples", "N", 100, 1'000'000, "round trips of iccs's own runtime measurement", "5000"),
         uint_opt("--run-timeout", "S", 10, 86400, "one mpirun longer than S seconds is stopped: its path FAILED", "300"),
         choice_opt("--polling", kPollings,
                    "the iccs paths' polling, and of the runtime round trip of the goal (inline with "
                    "--ranks-per-cluster 1: each cluster runs in its rank's process, mpi/provider/README.md)",
                    "adaptive"),
         json_option()},
        launch_bench_mpi});
    return rows;
}

}  // namespace

const std::vector<BenchRow>& bench_rows() {
    static const std::vector<BenchRow> rows = make_rows();
    return rows;
}

cli::OptionSet BenchRow::option_set() const {
    cli::OptionSet s;
    s.who = "bench " + name;
    s.own = &options;
    return s;
}

std::string BenchRow::usage() const {
    return "usage: iccs bench " + name + " [options]\n" + help + cli::option_help(option_set()) +
           "Benchmarks print ratios against baselines measured in the same run.\n";
}

int cmd_bench(int argc, char** argv) {
    if (argc < 1 || std::strcmp(argv[0], "--help") == 0 || std::strcmp(argv[0], "-h") == 0) {
        std::fprintf(argc < 1 ? stderr : stdout, "usage: iccs bench NAME [options]   (iccs bench NAME --help: its options)\n");
        for (const BenchRow& r : bench_rows())
            std::fprintf(argc < 1 ? stderr : stdout, "  %-12s %s\n", r.name.c_str(), r.summary.c_str());
        return argc < 1 ? 2 : 0;
    }
    if (std::strcmp(argv[0], "--rows") == 0) {  // for the tests: NAME then OPTION=REFUSED per option
        for (const BenchRow& r : bench_rows()) {
            std::printf("%s\tbench", r.name.c_str());
            for (const Option& o : r.options) std::printf("\t%s=%s", o.name.c_str(), cli::refused_sample(o).c_str());
            std::printf("\n");
        }
        return 0;
    }
    const std::string name = argv[0];
    for (const BenchRow& r : bench_rows())
        if (r.name == name) return r.launch(r, cli::parse_options(r.option_set(), argc, argv, 1, r.usage()));
    std::string all;
    for (const BenchRow& r : bench_rows()) all += (all.empty() ? "" : ", ") + r.name;
    cli::usage_error("bench", "unknown benchmark '" + name + "' (benchmarks: " + all + ")");
}

}  // namespace iccs
