// bench_mpi.cpp: see bench_mpi.hpp. Each run of a path is one mpirun of the benchmark program; its
// rank 0 prints "KIND SIZE VALUE" lines (perf/mpi/mpi_bench.c), which are collected per path and
// size, and the medians over the runs are set side by side.
#include "bench_mpi.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "bench_paths.hpp"
#include "clock.hpp"
#include "config.hpp"
#include "runtime_launch.hpp"

namespace iccs {

namespace {

struct Path {
    std::string name;
    std::vector<std::string> mca;  // mpirun arguments that choose the path
    std::string fabric;            // iccs paths: the machine file's fabric ("" otherwise)
};

const std::vector<Path>& all_paths() {
    static const std::vector<Path> p = {
        {"iccs-memif", {"--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "mtl_ofi_provider_include", "iccs"}, "memif"},
        {"iccs-udp", {"--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "mtl_ofi_provider_include", "iccs"}, "udp"},
        {"tcp", {"--mca", "pml", "ob1", "--mca", "btl", "tcp,self"}, ""},
        {"ofi-tcp-rxm", {"--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "mtl_ofi_provider_include", "tcp;ofi_rxm"}, ""},
        {"ofi-udp-rxd", {"--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "mtl_ofi_provider_include", "udp;ofi_rxd"}, ""},
        {"vader", {"--mca", "pml", "ob1", "--mca", "btl", "vader,self"}, ""},
    };
    return p;
}

// (kind, size) -> the values of the runs
using Figures = std::map<std::pair<std::string, uint64_t>, std::vector<double>>;

// One mpirun of the benchmark over path p: its figures, or an error in `err`.
bool run_once(const BenchMpiOptions& o, const Path& p, const std::string& tmp, uint32_t run, Figures& out,
              std::string& err) {
    const uint32_t ranks = 2 * o.ranks_per_cluster;
    std::vector<std::string> cmd = {"mpirun", "-n", std::to_string(ranks), "--bind-to", "core", "--map-by", "core"};
    if (geteuid() == 0) cmd.push_back("--allow-run-as-root");
    if (ranks > std::thread::hardware_concurrency()) cmd.push_back("--oversubscribe");
    cmd.insert(cmd.end(), p.mca.begin(), p.mca.end());
    std::vector<std::pair<std::string, std::string>> env;
    if (!p.fabric.empty()) {
        // one id per run and fabric: the previous run's agents linger a second after their ranks left
        // and still hold the names of their run. Appended to a named string, not `"b" + std::string&&`:
        // GCC 12 inlines that operator+ into a bogus -Wrestrict (GCC bug 105329)
        std::string run_id = "b";
        run_id += std::to_string(getpid() % 100000);
        run_id += std::to_string(run % 10);
        run_id += p.fabric;
        const std::string machine = tmp + "/machine-" + p.fabric + ".toml";
        // memif: jumbo frames, as `iccs run --mpi` gives MPI runs (config.hpp, kMpiMemifMtuBytes)
        const std::string mtu = p.fabric == "memif" ? "mtu_bytes = " + std::to_string(kMpiMemifMtuBytes) + "\n" : "";
        std::ofstream(machine) << "[machine]\nclusters = 2\nfabric = \"" << p.fabric << "\"\n"
                               << mtu << "udp_port = " << bench_udp_port() << "\n[cluster]\ncompute_threads = "
                               << o.ranks_per_cluster << "\nproxies = 1\npolling = \"" << o.polling << "\"\n";
        env = {{"FI_PROVIDER_PATH", ICCS_MPI_PROVIDER_DIR},
               {"ICCS_CONFIG", machine},
               {"ICCS_RUN_ID", run_id},
               {"ICCS_TRANSPORT", "iccs"}};
        for (const auto& [k, v] : env) {
            (void)v;
            cmd.push_back("-x");
            cmd.push_back(k);
        }
    }
    cmd.push_back(ICCS_MPI_BENCH_PATH);
    cmd.push_back("--reps");
    cmd.push_back(std::to_string(o.reps));
    cmd.push_back("--max-size");
    cmd.push_back(std::to_string(o.max_size));
    if (o.quick) cmd.push_back("--quick");
    int fds[2];
    if (pipe(fds) != 0) {
        err = std::string("pipe: ") + std::strerror(errno);
        return false;
    }
    const std::string errlog = tmp + "/mpirun-" + p.name + ".err";
    const pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 1);
        const FILE* e = std::freopen(errlog.c_str(), "w", stderr);
        (void)e;
        for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
        std::vector<char*> av;
        for (std::string& c : cmd) av.push_back(c.data());
        av.push_back(nullptr);
        execvp("mpirun", av.data());
        _exit(127);
    }
    close(fds[1]);
    std::string text;
    char buf[4096];
    ssize_t n;
    // A path that stalls (a provider that never completes a size) is stopped after --run-timeout:
    // mpirun ends its ranks on SIGTERM and the path is reported FAILED.
    const uint64_t deadline = now_ns() + uint64_t(o.run_timeout_s) * 1'000'000'000ull;
    bool stopped = false;
    for (;;) {
        pollfd pf{fds[0], POLLIN, 0};
        const int r = poll(&pf, 1, 200);
        if (r < 0 && errno != EINTR) break;
        if (r > 0) {
            n = read(fds[0], buf, sizeof buf);
            if (n == 0 || (n < 0 && errno != EINTR)) break;
            if (n > 0) text.append(buf, static_cast<size_t>(n));
        }
        if (!stopped && now_ns() >= deadline) {
            kill(pid, SIGTERM);
            stopped = true;
        }
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    std::istringstream in(text);
    std::string kind;
    uint64_t size = 0;
    double v = 0;
    uint32_t lines = 0;
    while (in >> kind >> size >> v) {
        out[{kind, size}].push_back(v);
        ++lines;
    }
    if (stopped) {
        err = "mpirun over " + p.name + " did not end within --run-timeout " + std::to_string(o.run_timeout_s) +
              " s (stopped; " + std::to_string(lines) + " figures by then, none kept)";
        for (auto& [k, v] : out) (void)k, v.clear();
        return false;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || lines == 0) {
        std::ifstream e(errlog);
        std::string tail, l;
        while (std::getline(e, l))
            if (!l.empty()) tail = l;
        err = "mpirun over " + p.name + " exited " +
              (WIFEXITED(status) ? std::to_string(WEXITSTATUS(status)) : "on signal " + std::to_string(WTERMSIG(status))) +
              " with " + std::to_string(lines) + " figures" + (tail.empty() ? "" : ": " + tail);
        return false;
    }
    return true;
}

double med(const std::vector<double>& v) { return v.empty() ? 0 : spread_of(v).median; }

// What the runs measured: per path its figures, the paths that failed, iccs's own round trip.
struct MpiResults {
    std::map<std::string, Figures> figs;
    std::map<std::string, std::string> failed;  // path -> why
    RttStats rtt;
    std::vector<std::pair<std::string, uint64_t>> keys;  // every (kind, size) seen, in order

    // The median of a path's figure (0: none).
    double value(const std::string& path, const std::string& kind, uint64_t size) const {
        auto f = figs.find(path);
        if (f == figs.end()) return 0.0;
        auto it = f->second.find({kind, size});
        return it == f->second.end() ? 0.0 : med(it->second);
    }
};

// The goals of bench mpi and the figures they are judged on.
struct MpiGoals {
    double tcp8 = 0, iccs8 = 0, tcp1m = 0, iccs1m = 0;
    bool beats_ofi = true;
    uint32_t ofi_compared = 0;  // figures set against an ofi path (none when those paths were not run)
    bool lat_tcp = false, lat_rtt = false, bw = false;
};

MpiGoals mpi_goals(const MpiResults& res) {
    MpiGoals g;
    g.tcp8 = res.value("tcp", "latency", 8);
    g.iccs8 = res.value("iccs-memif", "latency", 8);
    g.tcp1m = res.value("tcp", "bandwidth", 1u << 20);
    g.iccs1m = res.value("iccs-memif", "bandwidth", 1u << 20);
    for (const auto& [kind, size] : res.keys) {
        if ((kind != "latency" && kind != "bandwidth") || size > 65536) continue;
        const double mine = res.value("iccs-memif", kind, size);
        for (const char* other : {"ofi-tcp-rxm", "ofi-udp-rxd"}) {
            const double theirs = res.value(other, kind, size);
            if (mine == 0 || theirs == 0) continue;
            ++g.ofi_compared;
            if (kind == "latency" ? mine > theirs : mine < theirs) g.beats_ofi = false;
        }
    }
    g.beats_ofi = g.beats_ofi && g.ofi_compared > 0;
    g.lat_tcp = g.tcp8 > 0 && g.iccs8 > 0 && g.iccs8 <= 0.15 * g.tcp8;
    g.lat_rtt = res.rtt.median_us > 0 && g.iccs8 > 0 && g.iccs8 <= 1.5 * res.rtt.median_us / 2;
    g.bw = g.tcp1m > 0 && g.iccs1m >= g.tcp1m;
    return g;
}

std::string mpi_unit(const std::string& kind) {
    return kind == "latency" ? "latency_us" : kind == "bandwidth" ? "bandwidth_mb_s" : kind == "msgrate" ? "msg_rate_per_s"
           : kind == "barrier" ? "barrier_us" : "allreduce_us";
}

// The JSON object of every path's figures by unit and size (ratio: each as a ratio to tcp's).
std::string mpi_json_figures(const std::vector<Path>& paths, const MpiResults& res, bool ratio) {
    std::string out = "{";
    bool first_path = true;
    for (const Path& p : paths) {
        if (res.figs.find(p.name) == res.figs.end()) continue;
        out += std::string(first_path ? "" : ",") + "\"" + p.name + "\":{";
        first_path = false;
        std::string last_kind;
        bool first_kind = true;
        for (const auto& [kind, size] : res.keys) {
            double v = res.value(p.name, kind, size);
            if (ratio) {
                const double t = res.value("tcp", kind, size);
                v = t > 0 && v > 0 ? v / t : 0;
            }
            const bool scalar = kind == "msgrate" || kind == "barrier";
            if (kind != last_kind) {
                if (!last_kind.empty() && !(last_kind == "msgrate" || last_kind == "barrier")) out += "}";
                out += std::string(first_kind ? "" : ",") + "\"" + mpi_unit(kind) + "\":" + (scalar ? "" : "{");
                first_kind = false;
                last_kind = kind;
            } else if (!scalar) {
                out += ",";
            }
            char num[64];
            std::snprintf(num, sizeof num, "%.4g", v);
            if (!scalar) {  // "size": (appended piece by piece: GCC 12 bug 105329, see run_once)
                out += '"';
                out += std::to_string(size);
                out += "\":";
            }
            out += v > 0 ? num : "null";
        }
        if (!last_kind.empty() && !(last_kind == "msgrate" || last_kind == "barrier")) out += "}";
        out += "}";
    }
    return out + "}";
}

void print_mpi_json(const BenchMpiOptions& o, const std::vector<Path>& paths, const MpiResults& res, const MpiGoals& g,
                    unsigned cores, unsigned iccs_threads) {
    std::string errors = "{";
    for (const auto& [p, e] : res.failed) {
        errors += std::string(errors.size() > 1 ? "," : "") + json_quote(p) + ":" + json_quote(e);
    }
    errors += "}";
    std::printf("{\"runs\":%u,\"ranks_per_cluster\":%u,\"cores\":%u,\"iccs_threads\":%u,\"oversubscribed\":%s,"
                "\"iccs_runtime_rtt_median_us\":%.3f,\"mpi\":%s,\"ratio_to_tcp\":%s,\"goals\":{"
                "\"latency_8_le_0.15_tcp\":%s,\"latency_8_le_1.5_half_rtt\":%s,\"bandwidth_1m_ge_tcp\":%s,"
                "\"beats_ofi_up_to_64k\":%s},\"failed\":%s}\n",
                o.runs, o.ranks_per_cluster, cores, iccs_threads, iccs_threads > cores ? "true" : "false",
                res.rtt.median_us, mpi_json_figures(paths, res, false).c_str(), mpi_json_figures(paths, res, true).c_str(),
                g.lat_tcp ? "true" : "false", g.lat_rtt ? "true" : "false", g.bw ? "true" : "false",
                g.beats_ofi ? "true" : "false", errors.c_str());
}

void print_mpi_table(const BenchMpiOptions& o, const std::vector<Path>& paths, const MpiResults& res, const MpiGoals& g,
                     unsigned cores, unsigned iccs_threads) {
    std::printf("MPI over every path: 2 clusters x %u ranks, medians of %u interleaved runs (ratio to tcp in brackets)\n",
                o.ranks_per_cluster, o.runs);
    std::string last;
    for (const auto& [kind, size] : res.keys) {
        if (kind != last) {
            std::printf("\n%-16s %9s", mpi_unit(kind).c_str(), "size");
            for (const Path& p : paths) std::printf(" %20s", p.name.c_str());
            std::printf("\n");
            last = kind;
        }
        std::printf("%-16s %9llu", "", (unsigned long long)size);
        for (const Path& p : paths) {
            const double v = res.value(p.name, kind, size), t = res.value("tcp", kind, size);
            if (v == 0) std::printf(" %20s", "-");
            else if (t > 0) std::printf(" %11.4g [%5.2fx]", v, v / t);
            else std::printf(" %11.4g [   - ]", v);
        }
        std::printf("\n");
    }
    std::printf("\niccs's own runtime round trip (bench rtt, memif, %s, 8 B): median %.2f us (half: %.2f us)\n",
                o.polling.c_str(), res.rtt.median_us, res.rtt.median_us / 2);
    std::printf("goals:\n");
    // A goal whose figures did not come (a path not run or FAILED) is NOT MEASURED, not NOT MET.
    auto verdict = [](bool measured, bool met) { return !measured ? "NOT MEASURED" : met ? "MET" : "NOT MET"; };
    std::printf("  8 B latency over iccs-memif <= 0.15x Open MPI TCP: %s (%.2f us against %.2f us: %.2fx)\n",
                verdict(g.iccs8 > 0 && g.tcp8 > 0, g.lat_tcp), g.iccs8, g.tcp8, g.tcp8 > 0 ? g.iccs8 / g.tcp8 : 0.0);
    std::printf("  8 B latency over iccs-memif <= 1.5x half of iccs's runtime round trip: %s (%.2f us against %.2f us)\n",
                verdict(g.iccs8 > 0 && res.rtt.median_us > 0, g.lat_rtt), g.iccs8, 1.5 * res.rtt.median_us / 2);
    std::printf("  1 MiB bandwidth over iccs-memif >= Open MPI TCP: %s (%.1f MB/s against %.1f MB/s)\n",
                verdict(g.iccs1m > 0 && g.tcp1m > 0, g.bw), g.iccs1m, g.tcp1m);
    std::printf("  iccs-memif beats tcp;ofi_rxm and udp;ofi_rxd at every size up to 64 KiB: %s\n",
                g.ofi_compared == 0 ? "NOT MEASURED (neither ofi path ran)" : g.beats_ofi ? "MET" : "NOT MET");
    if (iccs_threads > cores)
        std::printf("  note: an iccs run wants %u threads (%u ranks in MPI's progress loop, an agent per cluster with "
                    "a bridge per rank and a proxy) on %u cores: its figures are oversubscribed ones (the iccs ranks "
                    "block in their waits), not those of a host with a core for each\n",
                    iccs_threads, 2 * o.ranks_per_cluster, cores);
    for (const auto& [p, e] : res.failed) std::printf("  FAILED %s: %s\n", p.c_str(), e.c_str());
}

}  // namespace

const std::vector<std::string>& bench_mpi_paths() {
    static std::vector<std::string> names = [] {
        std::vector<std::string> n;
        for (const Path& p : all_paths()) n.push_back(p.name);
        return n;
    }();
    return names;
}

int bench_mpi(const BenchMpiOptions& o) {
    std::vector<Path> paths;
    for (const Path& p : all_paths())
        if (o.paths.empty() || std::find(o.paths.begin(), o.paths.end(), p.name) != o.paths.end()) paths.push_back(p);
    char tmpl[] = "/tmp/iccs-benchmpi-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
        std::fprintf(stderr, "iccs bench mpi: mkdtemp: %s\n", std::strerror(errno));
        return 1;
    }
    const std::string tmp = tmpl;
    MpiResults res;
    for (uint32_t r = 0; r < o.runs; ++r)
        for (const Path& p : paths) {
            if (res.failed.count(p.name)) continue;
            std::fprintf(stderr, "iccs bench mpi: run %u of %u over %s\n", r + 1, o.runs, p.name.c_str());
            std::string err;
            if (!run_once(o, p, tmp, r, res.figs[p.name], err)) res.failed[p.name] = err;
        }
    // iccs's own runtime round trip (bench rtt's path: the convergence API, no MPI, no agent), for
    // the latency goal: half of it is the one-way time the MPI path is held against.
    res.rtt = iccs_rtt("memif", o.polling, 8, o.rtt_samples);
    std::error_code ec;
    std::filesystem::remove_all(tmp, ec);

    const unsigned cores = std::thread::hardware_concurrency();
    // Threads that want a core: the ranks in MPI's progress loop, and for an iccs path an agent
    // per cluster (a bridge per rank, a proxy): more than this host has, the iccs ranks block in
    // their waits instead of polling (mpi/provider/README.md, "Waiting").
    // (In-rank clusters, inline polling with one rank a cluster: the ranks alone.)
    const bool in_rank = o.polling == "inline" && o.ranks_per_cluster == 1;
    const unsigned iccs_threads = in_rank ? 2 : 2 * o.ranks_per_cluster + 2 * (o.ranks_per_cluster + 1);
    for (const auto& [path, fs] : res.figs)
        for (const auto& [k, v] : fs)
            if (std::find(res.keys.begin(), res.keys.end(), k) == res.keys.end()) res.keys.push_back(k);
    std::sort(res.keys.begin(), res.keys.end());
    const MpiGoals goals = mpi_goals(res);
    if (o.json) print_mpi_json(o, paths, res, goals, cores, iccs_threads);
    else print_mpi_table(o, paths, res, goals, cores, iccs_threads);
    return res.failed.empty() ? 0 : 1;
}

}  // namespace iccs
