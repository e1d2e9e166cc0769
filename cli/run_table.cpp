// run_table.cpp: the rows of `iccs run` (run_table.hpp) and the command itself: look the row up,
// parse once against it, launch.
#include "run_table.hpp"

#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "group_programs.hpp"
#include "run_app.hpp"
#include "run_widearea.hpp"
#include "runtime_launch.hpp"
#include "satin.hpp"
#include "widearea.hpp"

namespace iccs {

using cli::choice_opt;
using cli::flag;
using cli::Option;
using cli::OptionGroup;
using cli::text_opt;
using cli::uint_opt;

namespace {

std::vector<ProgramRow> make_rows() {
    const std::vector<const OptionGroup*> machine = {&machine_options(), &config_options()};
    const std::vector<const OptionGroup*> runtime = {&runtime_options(), &machine_options(), &config_options()};
    std::vector<ProgramRow> rows;

    // ---- convergence: compute/'s built-in programs over parallel connections
    const ConvergenceOptions& conv = convergence_options();
    rows.push_back(ProgramRow{
        "alltoall", "convergence",
        "every compute thread to every compute thread of every other cluster, each message checked",
        "  Every compute thread opens a parallel connection to every compute thread of every other\n"
        "  cluster and sends --messages messages over it (sizes random in [--min-size, --max-size]; the\n"
        "  first message has the smallest size, the second the largest); every receiver checks each one:\n"
        "  intact, exactly once, and in order on ordered connections; then both ends close and the\n"
        "  receiver sees end-of-stream. Prints per-cluster PASS/FAIL, the proxy counters and each compute\n"
        "  thread's convergence counters.\n",
        machine, alltoall_options(), false,
        "PASS: every message arrived exactly once, intact and in order", launch_convergence});
    rows.push_back(ProgramRow{
        "errors", "convergence", "the failure cases of connections, each checked (2 clusters)",
        "  Connect to a port nobody bound (refused), recv after the peer closed (end-of-stream), and\n"
        "  cluster 1 killing itself (its peer is told the cluster is down within [cluster]\n"
        "  peer_timeout_ms).\n",
        machine, {timeout_option(300)}, false,
        "PASS: refused, end-of-stream and peer-down were each reported as documented", launch_convergence});
    rows.push_back(ProgramRow{
        "pingpong", "convergence", "one message in flight between thread 0 of clusters 0 and 1: round-trip times",
        "  Thread 0 of cluster 0 sends --messages messages of --min-size bytes, one at a time, to thread 0\n"
        "  of cluster 1, which sends each back (after --warmup untimed rounds); prints the round-trip\n"
        "  times: 'rtt_ns MEDIAN P99 MIN MAX N'. ICCS_PINGPONG_SIZES=S1,S2,... cycles the sizes (give\n"
        "  --max-size >= the largest; compute/README.md).\n",
        machine,
        {conv.messages, conv.min_size, conv.max_size,
         uint_opt("--warmup", "N", 0, 1'000'000, "untimed rounds first", "10"), conv.gap, timeout_option(300)},
        false, "PASS: every round trip completed", launch_convergence});

    // ---- runtime: compute/runtime.hpp's built-in programs
    rows.push_back(ProgramRow{
        "exchange", "runtime", "active messages, requests and barriers between every pair of compute threads",
        "  Every compute thread sends --messages active messages of random sizes in [--min-size,\n"
        "  --max-size] to every compute thread of every other cluster; receivers check the bytes,\n"
        "  exactly-once and per-source order; each thread makes 20 requests (answered at once by a\n"
        "  service endpoint, or deferred and answered from another endpoint); then --barriers barrier\n"
        "  and barrier_gather rounds, contents checked. Each cluster prints its runtime counters per\n"
        "  endpoint (rt C.T, rt C.service), over iccs also its proxies' counters.\n",
        runtime,
        {uint_opt("--messages", "N", 1, 100'000'000, "active messages per pair of compute threads", "200"),
         uint_opt("--min-size", "N", 0, 1u << 20, "smallest message [bytes]", "1"),
         uint_opt("--max-size", "N", 0, (1u << 20) - 8, "largest message [bytes] (max_message() with its 8-byte number)",
                  "9000"),
         uint_opt("--barriers", "N", 0, 1'000'000, "barrier and barrier_gather rounds", "10"),
         flag("--inject-error", "test hook: thread 0.0 flips a byte of its message 1 to thread 1.0 (the run FAILs)"),
         timeout_option(300)},
        false,
        "PASS: every message arrived exactly once, intact and in order per source; every reply and barrier round "
        "was right",
        launch_exchange});
    rows.push_back(ProgramRow{
        "ping", "runtime", "request/reply round trips from thread 0 of cluster 0 to cluster 1",
        "  Thread 0 of cluster 0 sends --messages requests (after --warmup) of --size bytes to thread 0\n"
        "  of cluster 1, which replies; prints median/p99 round trip.\n",
        runtime,
        {uint_opt("--messages", "N", 1, 100'000'000, "timed requests", "1000"),
         uint_opt("--size", "N", 0, 1u << 20, "request size [bytes]", "64"),
         uint_opt("--warmup", "N", 0, 1'000'000, "untimed requests first", "100"), timeout_option(300)},
        false, "PASS: every round trip completed", launch_ping});

    // ---- group/: collectives and the ordered broadcast
    rows.push_back(ProgramRow{
        "collectives", "group", "every collective of group/ in both families against its sequential reference",
        "  group/'s collectives (barrier, bcast, reduce, allreduce, gather(v), scatter(v), allgather(v),\n"
        "  alltoall(v), reduce_scatter, scan; sum/min/max/prod/user function) on every compute thread\n"
        "  against a sequential reference, the hierarchical (MagPIe) and the flat family; the topology\n"
        "  is [wan] sites (--sites); cluster 0 prints the counters summed over the clusters (WAN bytes\n"
        "  against the minimum, WAN hops, per WAN link) and MagPIe's rule is checked for the\n"
        "  hierarchical family. --bad: bad use on purpose instead (the last rank broadcasts from another\n"
        "  root, passes a longer allreduce, or skips the allreduce): every thread prints its error\n"
        "  (naming the call and the threads) and the run fails. Every thread prints a CRC-32 of its\n"
        "  results per collective ('results C.T FAMILY: bcast CRC ...').\n",
        runtime,
        {choice_opt("--family", {"hier", "flat", "both"}, "the families to check", "both"),
         cli::uint_list_opt("--elements", "N,N,...", 0, 1u << 17, "int64 elements per rank and collective (1 MiB at most)",
                            "0,1,1000,20000"),
         uint_opt("--rounds", "R", 1, 1000, "rounds of every collective", "1"),
         uint_opt("--segment-bytes", "N", 64, 1u << 20, "long messages travel in segments of this size",
                  "[group] segment_bytes"),
         uint_opt("--call-timeout-ms", "N", 100, 3'600'000, "a call waiting longer fails naming the peer", "120000"),
         choice_opt("--bad", {"root", "size", "missing"}, "bad use on purpose (the run must fail)"),
         flag("--inject-error", "test hook: rank 0 adds 1 to one element of its input to an allreduce (the run FAILs)"),
         timeout_option(300)},
        false,
        "PASS: every collective equals its sequential reference on every thread; MagPIe's rule holds for the "
        "hierarchical family",
        launch_collectives});
    rows.push_back(ProgramRow{
        "ordered", "group", "the totally ordered broadcast under concurrent senders, and replicated objects",
        "  group/'s totally ordered broadcast: every thread sends --messages of --size bytes at once and\n"
        "  delivers everyone's; every thread of every cluster must see the same sequence, each sender's\n"
        "  in order; then --latency-rounds one at a time from senders in phases of 10; then --writes per\n"
        "  thread to a replicated object, which must end identical on every cluster. Every thread prints\n"
        "  its sequence's hash and its replica, thread 0.0 the senders of both in delivery order.\n",
        runtime,
        {uint_opt("--messages", "N", 1, 1'000'000, "messages per thread, all at once", "100"),
         uint_opt("--size", "N", 8, (1u << 20) - 64, "message size [bytes]", "64"),
         choice_opt("--sequencer", {"central", "rotating", "migrating", "all"}, "the sequencer policies", "all"),
         uint_opt("--latency-rounds", "N", 0, 1'000'000, "one message at a time from phased senders", "60"),
         uint_opt("--writes", "N", 0, 1'000'000, "writes per thread to the replicated object", "20"),
         flag("--inject-error", "test hook: rank 0 sends its messages 0 and 1 the wrong way round (the run FAILs)"),
         timeout_option(300)},
        false,
        "PASS: every thread delivered the same sequence under every sequencer policy; the replicated objects ended "
        "identical",
        launch_ordered});

    // ---- Satin's programs (apps/satin/), from their registry
    for (const std::string& name : satin::program_list()) {
        std::vector<Option> own = {
            choice_opt("--policy", {"rs", "chs", "crs"},
                       "random stealing; cluster-hierarchical (a cluster steals over the WAN only when all its "
                       "threads are idle); cluster-aware random (at most one asynchronous WAN steal per thread)",
                       "crs"),
            choice_opt("--size", {"test", "paper"}, "problem size", "test"),
            flag("--json", "one JSON object: time_s, sequential_s, the steal counters summed, result"),
            flag("--inject-error", "test hook: corrupt the result (the run must FAIL)"),
            timeout_option(300)};
        if (name == "raytrace") own.push_back(text_opt("--image", "FILE", "the image as PPM (cluster 0)"));
        rows.push_back(ProgramRow{
            name, "satin", "Satin's " + name + " on group/'s work stealing, checked against the sequential result",
            "  A Satin divide-and-conquer program on every compute thread (apps/satin/README.md), checked\n"
            "  byte for byte against the sequential computation in the same run; one cluster is allowed.\n"
            "  WAN scenarios of the Satin study on 4 clusters: --wan-script perf/wan_scenarios/sN.wan\n"
            "  (N = 1..8), --wan-series perf/wan_scenarios/s9.series.\n",
            runtime, own, false, "", launch_satin});
    }

    // ---- the applications of the study on the DSM (apps/), from their list
    for (const char* app : app_names())
        rows.push_back(ProgramRow{
            app, "app", std::string("the study's ") + app + " across cluster processes on the page-grain DSM",
            "  Starts C cluster processes of build/apps/iccs-app-" + std::string(app) +
                "-dsm with S compute threads each; the\n"
                "  application gets -p C*S and --size, checks its result against a sequential reference, and\n"
                "  this prints PASS/FAIL, the parallel section's time, the runtime's messages, each proxy's\n"
                "  counters and the DSM's counters summed over the clusters. Standard output carries the\n"
                "  application's lines only (cluster 0's); this report goes to standard error (or to --report\n"
                "  FILE). apps/README.md has every --json key.\n",
            runtime,
            {choice_opt("--size", {"test", "paper"}, "problem size (paper = the study's Table 1)", "test"),
             flag("--json", "stdout is one JSON object on one line (everything else goes to stderr)"),
             text_opt("--report", "FILE", "the launcher's report (the --json object) into FILE instead of stderr"),
             text_opt("--trace", "FILE",
                      "record every message the proxies take from and deliver to compute threads (transport "
                      "iccs), one CSV line each; the proxy model's input (perf/model/README.md)"),
             flag("--inject-error", "test hook: the application corrupts its result before the check (FAIL)"),
             timeout_option(300)},
            false, "", launch_app});

    // ---- the wide-area suite (apps/widearea/), from its registry
    for (const widearea::Program& wp : widearea::programs()) {
        std::string names, variants_help;
        bool grid = false;
        for (const widearea::VariantInfo& v : wp.variants) {
            names += (names.empty() ? "" : ", ") + std::string(widearea::to_string(v.id));
            variants_help += "    " + std::string(widearea::to_string(v.id)) + ": " + v.help + "\n";
            grid = grid || v.id == widearea::Variant::kGrid;
        }
        if (*wp.no_optimized) variants_help += "    (no optimized: " + std::string(wp.no_optimized) + ")\n";
        if (*wp.caveat) variants_help += "    (" + std::string(wp.caveat) + ")\n";
        std::vector<Option> own = {
            text_opt("--variant", "V[,V...]|both|all",
                     "one of its variants (" + names + "; default original), a comma-separated list of them (run in "
                     "turn in one launch, each timed and checked on its own), both (original,optimized), or all "
                     "(every variant but grid)"),
            choice_opt("--size", {"test", "paper"}, std::string("problem size: ") + wp.sizes, "test"),
            flag("--json",
                 "stdout is one JSON object on one line (everything else to stderr): app, variant, size, result, "
                 "time_s, seq_s, speedup, check, problem, the WAN traffic, the run's shape; with several variants "
                 "runs: [one per variant]"),
            text_opt("--report", "FILE", "that JSON object into FILE as well"),
            flag("--inject-error", "test hook: cluster 0 corrupts its part of the result (the run must FAIL)"),
            uint_opt("--wait-timeout-ms", "N", 100, 86'400'000, "a wait for a message or barrier longer than this fails",
                     "120000"),
            timeout_option(300)};
        if (grid)
            own.push_back(text_opt("--grid-opts", "LIST",
                                   "the grid variant's changes: any of tree-sync,rings,polling,grain,autoflush, or "
                                   "all (default), none"));
        if (std::strcmp(wp.name, "sor") == 0)
            own.push_back(choice_opt("--sor-rule", {"orca", "tight"},
                                     "the stopping rule: orca (the Orca program's grid, omega and tolerance 0.001 / "
                                     "(2 - omega) on the change before omega, as the study ran it) or tight (ours: a "
                                     "sine boundary, largest change after omega below 1e-6)",
                                     "orca"));
        rows.push_back(ProgramRow{
            wp.name, "wide-area", wp.help,
            "  The wide-area suite (Bal, Plaat et al. 1998-99; apps/widearea/README.md) across C cluster\n"
            "  processes of S compute threads each (the study's 'cluster' is a WAN site: each cluster process\n"
            "  its own site unless --sites groups them). Each variant runs timed between barriers, then\n"
            "  every cluster checks its part of the result against the sequential computation, and the\n"
            "  inter-site traffic (RPCs, broadcast messages and their bytes per WAN link, counted as the\n"
            "  study's Orca did) is summed over the clusters. --seed sets the inputs (and [test] seed).\n"
            "  Its variants (original: as the study ran it; optimized: the study's change; other names: ours):\n" +
                variants_help,
            runtime, own, false, "", launch_widearea});
    }

    // ---- any program linked with the runtime, or any PARMACS program (run_row.cpp)
    rows.push_back(path_row());
    rows.push_back(ProgramRow{
        "--mpi", "mpi", "iccs run --mpi PATH: an MPI program (mpicc, unchanged) under mpirun over the proxies",
        "  PATH is an MPI program built with Debian's mpicc. Debian's mpirun starts C*S ranks with pml cm,\n"
        "  mtl ofi and the libfabric provider iccs (this build's, through FI_PROVIDER_PATH); ranks c*S ..\n"
        "  c*S+S-1 form cluster c and share its proxies (an agent process per cluster; with\n"
        "  --cluster-size 1 --polling inline the cluster runs in its rank's process instead, and the\n"
        "  rank's own thread runs its proxies from its MPI calls). --polling inline with more ranks a\n"
        "  cluster needs a core for every rank and every agent's bridge (2 x C*S): on fewer cores the\n"
        "  agents poll adaptively instead, and a line says so (inline there was ~40x slower, its bridges\n"
        "  spinning in each other's way). Messages inside a cluster go through shared memory\n"
        "  (mpi/provider/README.md). As root, mpirun is given\n"
        "  --allow-run-as-root; with more ranks than cores, --oversubscribe. The mpirun line is printed\n"
        "  first (standard error). The program's standard output and error and the exit status are\n"
        "  mpirun's; then the launcher's report (each rank's provider counters: messages and bytes by\n"
        "  path, unexpected messages, posted receives, peeks, cancels, truncations; each proxy's\n"
        "  counters) on standard error, or with --report FILE as one JSON object in FILE.\n",
        runtime,
        {text_opt("--report", "FILE", "the agents' counters of every rank and proxy as one JSON object in FILE"),
         [] {
             Option m = text_opt("--mpirun-arg", "ARG", "one more argument for mpirun (may be given more than once)");
             m.repeats = true;
             return m;
         }(),
         choice_opt("--collectives", {"mpi", "magpie"},
                    "whose collectives the program's MPI_Bcast, MPI_Allreduce, ... are: Open MPI's own, or "
                    "MagPIe's wide-area ones (mpi/magpie/, libiccs-magpie.so preloaded, the ranks placed by the "
                    "same machine file; its per-collective counters in the report)",
                    "mpi"),
         timeout_option(86400)},
        true, "", launch_mpi});
    return rows;
}

const char* const kLevels[][2] = {
    {"convergence", "over parallel connections (compute/, convergence/)"},
    {"runtime", "on the cluster runtime (compute/runtime.hpp)"},
    {"group", "group/'s collectives and ordered broadcast"},
    {"satin", "Satin's divide-and-conquer programs (apps/satin/)"},
    {"app", "the study's applications on the DSM (apps/)"},
    {"wide-area", "the wide-area suite (apps/widearea/)"},
    {"path", "a program given by path"},
    {"mpi", "an MPI program under mpirun over the provider iccs (mpi/provider/)"},
};

void print_rows_help() {
    std::printf("usage: iccs run PROGRAM [options] [-- ARGS]\n"
                "  Starts every cluster of the machine as its own process (own DPDK EAL, proxies on pinned\n"
                "  lcores, memif links, veths, NIC ports, or the kernel's UDP sockets via io_uring) and runs\n"
                "  PROGRAM on the compute threads. iccs run PROGRAM --help: its options, generated from its row.\n"
                "  Each cluster prints what it costs in memory at start ('cluster 0: memory 257 MiB: DPDK -m\n"
                "  185 (...)'); a run the host cannot hold stops before any cluster starts, with what it needs\n"
                "  and what the host has. A cluster that dies (a signal, an error exit, its proxies stopping)\n"
                "  ends the run at once: one line names it, its signal or status and what it was doing, the\n"
                "  others are stopped, and the run exits with its status. Ctrl-C or SIGTERM stops every\n"
                "  cluster within about a second (each says what it was doing) and exits 130/143; a second\n"
                "  Ctrl-C kills them at once.\n"
                "programs:\n");
    for (const auto& [level, title] : kLevels) {
        std::printf(" %s:\n", title);
        for (const ProgramRow& r : run_rows())
            if (r.level == level) std::printf("  %-13s %s\n", r.name.c_str(), r.summary.c_str());
    }
    std::printf("iccs run --list-widearea: the wide-area programs, one a line.\n");
}

// `iccs run --rows`: every row and its options, one line each, for the tests (tests/integration/cli_rows.py):
// NAME, LEVEL, then OPTION=BAD per option of its own and +OPTION=BAD per option of its groups, BAD a
// value it refuses ("" when none is known: a flag, a text).
void print_rows_machine() {
    for (const ProgramRow& r : run_rows()) {
        std::printf("%s\t%s", r.name.c_str(), r.level.c_str());
        for (const Option& o : r.options) std::printf("\t%s=%s", o.name.c_str(), cli::refused_sample(o).c_str());
        for (const OptionGroup* g : r.groups)
            for (const Option& o : g->options) std::printf("\t+%s=%s", o.name.c_str(), cli::refused_sample(o).c_str());
        std::printf("\n");
    }
}

}  // namespace

const std::vector<ProgramRow>& run_rows() {
    static const std::vector<ProgramRow> rows = make_rows();
    return rows;
}

const ProgramRow* find_run_row(const std::string& name) {
    const bool path = name.find('/') != std::string::npos;
    for (const ProgramRow& r : run_rows())
        if (path ? r.name == "PATH" : r.name == name) return &r;
    return nullptr;
}

int cmd_run(int argc, char** argv) {
    if (argc < 1 || std::strcmp(argv[0], "--help") == 0 || std::strcmp(argv[0], "-h") == 0) {
        if (argc < 1) {
            std::fprintf(stderr, "iccs run: no program (iccs run --help lists them)\n");
            return 2;
        }
        print_rows_help();
        return 0;
    }
    if (std::strcmp(argv[0], "--list-widearea") == 0) {
        print_widearea_list();
        return 0;
    }
    if (std::strcmp(argv[0], "--rows") == 0) {
        print_rows_machine();
        return 0;
    }
    const std::string name = argv[0];
    if (name == "--mpi") {  // iccs run --mpi PATH [options]: the path comes first, the options after it
        const ProgramRow* row = find_run_row(name);
        const bool path_given = argc > 1 && argv[1][0] != '-';
        const cli::Args p = cli::parse_options(row->option_set("run --mpi"), argc, argv, path_given ? 2 : 1, row->usage());
        if (!path_given) cli::usage_error("run --mpi", "no program: iccs run --mpi PATH [options] [-- ARGS]");
        return row->launch(*row, argv[1], p);
    }
    const ProgramRow* row = find_run_row(name);
    if (row == nullptr) {
        std::string all;
        for (const ProgramRow& r : run_rows())
            if (r.name != "PATH" && r.name != "--mpi") all += (all.empty() ? "" : ", ") + r.name;
        cli::usage_error("run", "unknown program '" + name + "' (programs: " + all + "; or a path to a program)");
    }
    return run_row(*row, argc, argv);
}

}  // namespace iccs
