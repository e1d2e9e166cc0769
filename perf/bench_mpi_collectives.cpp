// bench_mpi_collectives.cpp: `iccs bench mpi-collectives`. Writes the machine file (S*C clusters of
// R ranks, [wan] sites in blocks, latency and bandwidth), starts mpirun on perf/mpi_collectives.c
// over the iccs provider, reads its measurement lines, and prints medians side by side (and JSON).
// One host, one clock: every measurement starts at one instant on every rank (mpi_collectives.c).
#include "bench_mpi_collectives.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config.hpp"
#include "run_capture.hpp"

namespace iccs {

namespace {

struct Series {
    std::vector<double> ms;  // per measured rep
    uint64_t wan = 0, wan_min = 0;
    int late = 0;
    double median() const {
        if (ms.empty()) return 0;
        std::vector<double> v = ms;
        std::sort(v.begin(), v.end());
        return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    }
    double lo() const { return ms.empty() ? 0 : *std::min_element(ms.begin(), ms.end()); }
    double hi() const { return ms.empty() ? 0 : *std::max_element(ms.begin(), ms.end()); }
};
// (collective, size) -> impl ("magpie", "mpi", "han") -> series
using Results = std::map<std::pair<std::string, long>, std::map<std::string, Series>>;

// "m COLL SIZE IMPL REP TIME_US LATE WAN WAN_MIN" lines; rep 0 (the warm-up) left out. `mpi_as`
// names what PMPI_ measured in this run (mpi = tuned, or han).
void parse(const std::string& out, const std::string& mpi_as, bool take_magpie, Results& r) {
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream ls(line);
        std::string tag, coll, impl;
        long size = 0;
        int rep = 0, late = 0;
        double us = 0;
        unsigned long long wan = 0, wan_min = 0;
        if (!(ls >> tag >> coll >> size >> impl >> rep >> us >> late >> wan >> wan_min) || tag != "m" || rep == 0) continue;
        if (impl == "magpie" && !take_magpie) continue;
        Series& s = r[{coll, size}][impl == "magpie" ? impl : mpi_as];
        s.ms.push_back(us / 1e3);
        s.late += late;
        if (impl == "magpie") {
            s.wan = wan;
            s.wan_min = wan_min;
        }
    }
}

std::string build_dir() {
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    return (ec ? std::filesystem::path("build/cli") : self.parent_path()).parent_path().string();
}

// One bench mpi-collectives run: what it starts and what its report says.
struct MpiCollRun {
    const BenchMpiCollectivesOptions& o;
    uint32_t P;            // ranks
    bool iccs;             // over the iccs provider (else Open MPI's TCP)
    std::string program;   // perf/iccs-mpi-collectives
    std::string provider;  // the iccs provider's folder
    std::string machine;   // the machine file
    std::string lat;       // [wan] latency_ms
    std::string wan;       // what carries the run, for the report
    unsigned cores;
};

// The programs are built (and with --transport iccs the provider). False: said on stderr.
bool mpi_coll_built(const MpiCollRun& run) {
    if (access(run.program.c_str(), X_OK) != 0) {
        std::fprintf(stderr, "iccs bench mpi-collectives: %s was not built (Open MPI's libopenmpi-dev missing?)\n",
                     run.program.c_str());
        return false;
    }
    if (run.iccs && access((run.provider + "/libiccs-fi.so").c_str(), R_OK) != 0) {
        std::fprintf(stderr,
                     "iccs bench mpi-collectives: the iccs provider (%s/libiccs-fi.so, mpi/provider/, issue 35) is not "
                     "built: the WAN emulation is in its proxies. --transport tcp runs the programs over Open MPI's TCP "
                     "without WAN emulation (a functional run, not the WAN figure)\n",
                     run.provider.c_str());
        return false;
    }
    return true;
}

// What to run: the sizes for every collective, and 1 MiB for bcast and allreduce by default.
struct Pass {
    std::string colls, sizes;
};

std::vector<Pass> mpi_coll_passes(const BenchMpiCollectivesOptions& o) {
    const std::string sizes = o.size ? std::to_string(o.size) : "8,1024,65536";
    std::vector<Pass> passes = {{o.colls, sizes}};
    if (o.size == 0) {
        std::string big;
        for (const char* k : {"bcast", "allreduce"})
            if (o.colls == "all" || ("," + o.colls + ",").find(std::string(",") + k + ",") != std::string::npos)
                big += (big.empty() ? "" : ",") + std::string(k);
        if (!big.empty()) passes.push_back({big, "1048576"});
    }
    return passes;
}

// The mpirun command of one pass with Open MPI's collectives `module` (mpi = tuned, or han), and
// the environment it passes on (-x).
void mpirun_command(const MpiCollRun& run, const Pass& p, const std::string& module, int& run_no,
                    std::vector<std::string>& argv, std::vector<std::string>& env) {
    argv = {"mpirun", "--oversubscribe", "-n", std::to_string(run.P)};
    if (geteuid() == 0) argv.push_back("--allow-run-as-root");
    if (run.iccs) {
        for (const char* a : {"--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "mtl_ofi_provider_include", "iccs"})
            argv.push_back(a);
        env = {"FI_PROVIDER_PATH=" + run.provider, "ICCS_CONFIG=" + run.machine,
               "ICCS_RUN_ID=bm" + std::to_string(getpid()) + "r" + std::to_string(run_no++)};
    } else {
        for (const char* a : {"--mca", "pml", "ob1", "--mca", "btl", "tcp,self,vader"}) argv.push_back(a);
        env = {"ICCS_CONFIG=" + run.machine};
    }
    if (module == "han")
        for (const char* a : {"--mca", "coll_han_priority", "100"}) argv.push_back(a);
    for (const std::string& e : env) {
        argv.push_back("-x");
        argv.push_back(e.substr(0, e.find('=')));
    }
    for (const std::string& a : {run.program, std::string("--sizes"), p.sizes, std::string("--reps"),
                                 std::to_string(run.o.reps), std::string("--colls"), p.colls})
        argv.push_back(a);
}

// Every pass with tuned, then (--han) with han; the figures into res, failures into err (han
// that does not run here is said and left out).
void run_all_passes(const MpiCollRun& run, Results& res, std::string& err) {
    const std::vector<Pass> passes = mpi_coll_passes(run.o);
    const std::vector<std::string> modules =
        run.o.han ? std::vector<std::string>{"mpi", "han"} : std::vector<std::string>{"mpi"};
    int run_no = 0;
    for (const std::string& module : modules)
        for (const Pass& p : passes) {
            std::vector<std::string> argv, env;
            mpirun_command(run, p, module, run_no, argv, env);
            std::string out;
            CaptureOptions co;
            co.env = env;
            const int rc = run_capture(argv, out, co);
            if (rc != 0) {
                const std::string what = "the " + std::string(module == "han" ? "han" : "tuned") + " run (" + p.colls +
                                         ", sizes " + p.sizes + ") exited " + std::to_string(rc);
                if (module == "han") {
                    std::fprintf(stderr, "bench mpi-collectives: han does not run here: %s\n", what.c_str());
                    break;
                }
                err += (err.empty() ? "" : "; ") + what;
            }
            parse(out, module, module == "mpi", res);
        }
}

// The median of impl's series for (collective, size) (0: none), and tuned / magpie.
double median_ms(Results& res, const std::pair<std::string, long>& k, const char* impl) {
    const auto it = res[k].find(impl);
    return it == res[k].end() ? 0.0 : it->second.median();
}
double magpie_speedup(Results& res, const std::pair<std::string, long>& k) {
    const double m = median_ms(res, k, "magpie");
    return m > 0 ? median_ms(res, k, "mpi") / m : 0.0;
}

// The verdicts below the figures.
struct MpiCollGoal {
    bool all_min;   // MagPIe's WAN bytes at the minimum for every collective
    bool goal_cfg;  // the goal's configuration
    bool have_goal; // bcast and allreduce of 64 KiB were measured
    bool goal;
};

void print_mpi_coll_json(const MpiCollRun& run, Results& res, const MpiCollGoal& g, const std::string& err) {
    const BenchMpiCollectivesOptions& o = run.o;
    std::printf("{\"sites\": %u, \"clusters_per_site\": %u, \"cluster_size\": %u, \"ranks\": %u, \"proxies\": %u, "
                "\"transport\": \"%s\", \"wan_latency_ms\": %s, \"wan_bandwidth\": %" PRIu64 ", \"reps\": %u, "
                "\"cores\": %u, \"oversubscribed\": %s, \"mpi_collectives\": {",
                o.sites, o.clusters, o.cluster_size, run.P, o.proxies, o.transport.c_str(), run.lat.c_str(), o.wan_bandwidth,
                o.reps, run.cores, run.P > run.cores ? "true" : "false");
    std::string last;
    for (auto& [k, by] : res) {
        if (k.first != last) std::printf("%s\"%s\": {", last.empty() ? "" : "}, ", k.first.c_str());
        else std::printf(", ");
        last = k.first;
        const Series& m = by["magpie"];
        std::printf("\"%ld\": {\"magpie_ms\": %.2f, \"mpi_ms\": %.2f, \"speedup\": %.3f, \"wan_bytes\": %" PRIu64
                    ", \"wan_bytes_min\": %" PRIu64 ", \"magpie_min_ms\": %.2f, \"magpie_max_ms\": %.2f, "
                    "\"mpi_min_ms\": %.2f, \"mpi_max_ms\": %.2f",
                    k.second, m.median(), median_ms(res, k, "mpi"), magpie_speedup(res, k), m.wan, m.wan_min, m.lo(),
                    m.hi(), by["mpi"].lo(), by["mpi"].hi());
        if (by.count("han") && !by["han"].ms.empty())
            std::printf(", \"han_ms\": %.2f, \"speedup_han\": %.3f", by["han"].median(),
                        m.median() > 0 ? by["han"].median() / m.median() : 0.0);
        std::printf("}");
    }
    std::printf("%s}, \"wan_bytes_at_min\": %s, \"goal_config\": %s, \"goal_met\": %s", last.empty() ? "" : "}",
                g.all_min ? "true" : "false", g.goal_cfg ? "true" : "false", g.goal ? "true" : "false");
    if (!err.empty()) std::printf(", \"error\": %s", json_quote(err).c_str());
    std::printf("}\n");
}

void print_mpi_coll_table(const MpiCollRun& run, Results& res, const MpiCollGoal& g, const std::string& err) {
    const BenchMpiCollectivesOptions& o = run.o;
    std::printf("bench mpi-collectives: %u sites x %u clusters x %u ranks over %s; medians of %u reps (MagPIe and "
                "MPI interleaved)\n",
                o.sites, o.clusters, o.cluster_size, run.wan.c_str(), o.reps);
    std::printf("  %-21s %8s %10s %10s %8s %10s %8s %11s %11s  %s\n", "collective", "bytes", "magpie ms", "tuned ms",
                "speedup", "han ms", "vs han", "wan bytes", "wan min", "magpie min..max / tuned min..max ms");
    for (auto& [k, by] : res) {
        const Series& m = by["magpie"];
        const bool han = by.count("han") && !by["han"].ms.empty();
        char hs[32] = "-", hv[32] = "-";
        if (han) {
            std::snprintf(hs, sizeof hs, "%.1f", by["han"].median());
            std::snprintf(hv, sizeof hv, "%.2f", m.median() > 0 ? by["han"].median() / m.median() : 0.0);
        }
        std::printf("  %-21s %8ld %10.1f %10.1f %8.2f %10s %8s %11" PRIu64 " %11" PRIu64 "  %.0f..%.0f / %.0f..%.0f\n",
                    k.first.c_str(), k.second, m.median(), median_ms(res, k, "mpi"), magpie_speedup(res, k), hs, hv, m.wan,
                    m.wan_min, m.lo(), m.hi(), by["mpi"].lo(), by["mpi"].hi());
    }
    std::printf("  speedup = tuned / magpie; wan bytes = MagPIe's data bytes over WAN links per call, summed over "
                "the ranks; wan min = each item once to each site that needs it (by blocks over 3 or more sites: "
                "allreduce 2 (S - 1) vectors, reduce (S - 1) + (S - 1) / S)\n");
    std::printf("  WAN bytes at the minimum for every collective: %s\n", g.all_min ? "yes" : "NO");
    if (g.have_goal)
        std::printf("  goal (4 sites, 10 ms, 1 MB/s: bcast and allreduce of 64 KiB >= 3x tuned, WAN bytes at the "
                    "minimum): %s%s\n",
                    g.goal ? "met" : "not met", g.goal_cfg ? "" : " (this is not the goal's configuration)");
    if (run.P > run.cores)
        std::printf("  note: %u ranks (and their clusters' agents and proxies) on %u cores: oversubscribed, not a "
                    "dedicated-core figure\n",
                    run.P, run.cores);
    if (!err.empty()) std::printf("  error: %s\n", err.c_str());
}

}  // namespace

int bench_mpi_collectives(const BenchMpiCollectivesOptions& o) {
    const uint32_t C = o.sites * o.clusters;
    const std::string build = build_dir();
    MpiCollRun run{o, C * o.cluster_size, o.transport == "iccs", build + "/perf/iccs-mpi-collectives",
                   build + "/mpi/provider", "", "", "", std::max(1u, host_core_count())};
    if (!mpi_coll_built(run)) return 2;
    std::string sites;
    for (uint32_t c = 0; c < C; ++c) sites += (c ? ", " : "") + std::to_string(c / o.clusters);
    char lat[64];
    std::snprintf(lat, sizeof lat, "%g", o.wan_latency_ms);
    run.lat = lat;
    char tmpl[] = "/tmp/iccs-bench-mpi-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
        std::perror("iccs bench mpi-collectives: mkdtemp");
        return 1;
    }
    const std::string dir = tmpl;
    run.machine = dir + "/machine.toml";
    {
        std::ofstream m(run.machine);
        m << "[machine]\nclusters = " << C << "\nfabric = \"memif\"\n[cluster]\ncompute_threads = " << o.cluster_size
          << "\nproxies = " << o.proxies << "\npolling = \"adaptive\"\npeer_timeout_ms = 60000\n[wan]\nsites = [" << sites
          << "]\nlatency_ms = " << lat << "\nbandwidth_bytes_per_s = " << o.wan_bandwidth << "\n";
    }
    const ConfigResult cr = configure(run.machine, {});
    if (!cr.ok()) {
        std::fprintf(stderr, "iccs bench mpi-collectives: %s\n", cr.error.c_str());
        std::filesystem::remove_all(dir);
        return 2;
    }
    char wan[160] = "Open MPI's own TCP, no WAN emulation: a functional run, not the WAN figure";
    if (run.iccs)
        std::snprintf(wan, sizeof wan, "the iccs provider, WAN %s ms one way and %" PRIu64 " bytes/s per link, %u proxies per cluster",
                      lat, o.wan_bandwidth, o.proxies);
    run.wan = wan;
    std::fprintf(stderr,
                 "bench mpi-collectives: %u sites x %u clusters x %u ranks (%u ranks) under mpirun over %s; MagPIe "
                 "(libiccs-magpie) against Open MPI's own collectives (tuned%s) in the same run, interleaved, median of "
                 "%u reps after a warm-up; %u ranks on %u cores\n",
                 o.sites, o.clusters, o.cluster_size, run.P, wan, o.han ? ", then han" : "", o.reps, run.P, run.cores);
    Results res;
    std::string err;
    run_all_passes(run, res, err);
    std::filesystem::remove_all(dir);

    MpiCollGoal g{};
    g.all_min = true;
    for (auto& [k, by] : res)
        if (by.count("magpie") && by["magpie"].wan != by["magpie"].wan_min) g.all_min = false;
    g.goal_cfg = o.sites == 4 && o.wan_latency_ms == 10 && o.wan_bandwidth == 1'000'000 && run.iccs;
    const std::pair<std::string, long> bc{"bcast", 65536}, ar{"allreduce", 65536};
    g.have_goal = res.count(bc) && res.count(ar);
    g.goal = g.have_goal && magpie_speedup(res, bc) >= 3 && magpie_speedup(res, ar) >= 3 && g.all_min;
    if (o.json) print_mpi_coll_json(run, res, g, err);
    else print_mpi_coll_table(run, res, g, err);
    return err.empty() ? 0 : 1;
}

}  // namespace iccs
