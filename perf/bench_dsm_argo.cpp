// bench_dsm_argo.cpp: `iccs bench dsm --vs argo`. Compiles Argo's side once (mpic++, the flags of
// our release build), then for each run and program: mpirun of Argo's, `iccs run` of ours over iccs,
// then over direct; each prints one result line (dsm_vs_argo/programs.hpp, report()) that this
// file reads. Nothing of a run is kept unless its result line says PASS.
#include "bench_dsm_argo.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench_paths.hpp"
#include "config.hpp"
#include "floor_check.hpp"
#include "run_capture.hpp"

namespace iccs {

namespace {

namespace fs = std::filesystem;

constexpr const char* kAllPrograms[] = {"matmul", "jacobi", "fft", "taskq"};
constexpr const char* kSystems[] = {"argo", "iccs", "direct"};
constexpr int kNumSystems = 3;
constexpr unsigned kProcesses = 2, kThreadsPerProcess = 2;
constexpr unsigned kRunTimeoutS = 600;

// The programs' sizes: the bench's (the defaults of programs.hpp, printed in the table) or small.
std::vector<std::string> size_args(const std::string& prog, bool small) {
    if (!small) return {};
    if (prog == "matmul") return {"--n", "128"};
    if (prog == "jacobi") return {"--n", "256", "--iters", "10"};
    if (prog == "fft") return {"--n", "128", "--iters", "1"};
    return {"--tasks", "512", "--work", "500"};
}

struct Series {
    std::vector<double> parallel_s, wall_s;
    std::string size, error;
};

double load_average() {
    double l = -1;
    if (FILE* f = std::fopen("/proc/loadavg", "r")) {
        if (std::fscanf(f, "%lf", &l) != 1) l = -1;
        std::fclose(f);
    }
    return l;
}

std::string self_exe() {
    std::error_code ec;
    const fs::path p = fs::read_symlink("/proc/self/exe", ec);
    return ec ? "iccs" : p.string();
}

bool on_path(const std::string& prog) {
    std::string out;
    CaptureOptions co;
    co.err_file = "/dev/null";
    return run_capture({"sh", "-c", "command -v " + prog}, out, co) == 0 && !out.empty();
}

// The value of key=... in a result line ("" when absent).
std::string field(const std::string& line, const std::string& key) {
    const size_t at = line.find(" " + key + "=");
    if (at == std::string::npos) return "";
    const size_t v = at + key.size() + 2;
    if (key == "failure") return line.substr(v);  // the rest of the line
    return line.substr(v, line.find(' ', v) - v);
}

// One run: the command's result line read into the series, or its error.
void run_once(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& what,
              const std::string& err_file, Series& s) {
    std::string out;
    CaptureOptions co;
    co.env = env;
    co.err_file = err_file;
    co.timeout_s = kRunTimeoutS;
    bool timed_out = false;
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = run_capture(argv, out, co, &timed_out);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string line;
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);)
        if (l.rfind("dsm-vs-argo ", 0) == 0) line = l;
    std::string err;
    if (timed_out)
        err = what + " did not end within " + std::to_string(kRunTimeoutS) + " s (stopped)";
    else if (line.empty())
        err = what + " exited " + std::to_string(rc) + " with no result line: " + last_line_of(err_file);
    else if (field(line, "result") != "PASS")
        err = what + ": " + (field(line, "failure").empty() ? "result " + field(line, "result") : field(line, "failure"));
    else if (rc != 0)
        err = what + " printed PASS but exited " + std::to_string(rc) + ": " + last_line_of(err_file);
    if (!err.empty()) {
        if (s.error.empty()) s.error = err + " (its stderr: " + err_file + ")";
        return;
    }
    s.size = field(line, "size");
    s.parallel_s.push_back(std::strtod(field(line, "parallel_s").c_str(), nullptr));
    s.wall_s.push_back(wall);
}

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

// Argo's side and ours can run: --argo is an install prefix, Open MPI's tools are there, our side
// is built. False: said on stderr.
bool argo_bench_ready(const BenchDsmArgoOptions& o, const std::string& ours) {
    const std::string problem = argo_install_problem(o.argo_dir);
    if (!problem.empty()) {
        std::fprintf(stderr, "iccs bench dsm: %s\n", problem.c_str());
        return false;
    }
    for (const char* tool : {"mpic++", "mpirun"})
        if (!on_path(tool)) {
            std::fprintf(stderr, "iccs bench dsm: --vs argo needs %s (Open MPI: apt-get install libopenmpi-dev openmpi-bin)\n",
                         tool);
            return false;
        }
    if (access(ours.c_str(), X_OK) != 0) {
        std::fprintf(stderr, "iccs bench dsm: our side of --vs argo (%s) is not built: ninja -C build (./iccs does)\n",
                     ours.c_str());
        return false;
    }
    return true;
}

// Compiles Argo's side (argo_programs.cpp) to argo_bin with the flags of our release build (-O3,
// NDEBUG) and Argo's own (C++17, OMPI_SKIP_MPICXX). False: said on stderr.
bool build_argo_side(const BenchDsmArgoOptions& o, const fs::path& dir, const std::string& work,
                     const std::string& argo_bin) {
    const std::string src = ICCS_DSM_VS_ARGO_SRC;
    const std::vector<std::string> cc = {"mpic++", "-std=c++17", "-O3", "-DNDEBUG", "-pthread", "-DOMPI_SKIP_MPICXX=1",
                                         "-I" + (dir / "include").string(), "-I" + (dir / "include/argo").string(),
                                         "-I" + src, src + "/argo_programs.cpp", "-o", argo_bin,
                                         "-L" + (dir / "lib").string(), "-Wl,-rpath," + (dir / "lib").string(), "-largo",
                                         "-largobackend-mpi"};
    std::string out;
    CaptureOptions co;
    co.err_file = work + "/build.log";
    std::fprintf(stderr, "bench dsm --vs argo: building Argo's side against %s\n", dir.c_str());
    if (run_capture(cc, out, co) != 0) {
        std::fprintf(stderr, "iccs bench dsm: building %s/argo_programs.cpp against --argo %s failed: %s (the "
                             "compiler's messages: %s)\n",
                     src.c_str(), o.argo_dir.c_str(), last_line_of(co.err_file).c_str(), co.err_file.c_str());
        return false;
    }
    return true;
}

// Where the runs go and what they run.
struct ArgoBenchPlan {
    const BenchDsmArgoOptions& o;
    std::vector<std::string> programs;
    std::string ours;      // our side: ICCS_DSM_VS_ARGO_EXE
    std::string argo_bin;  // Argo's side, built in `work`
    std::string work;      // a run's stderr files
};

// The command of one run of `prog` (args: its own) on system sys (0 argo, 1 iccs, 2 direct).
void argo_run_command(const ArgoBenchPlan& pl, int sys, const std::vector<std::string>& args,
                      std::vector<std::string>& argv, std::vector<std::string>& env) {
    if (sys == 0) {
        argv = {"mpirun", "-n", std::to_string(kProcesses), "--oversubscribe", "--bind-to", "none"};
        if (geteuid() == 0) argv.push_back("--allow-run-as-root");
        argv.push_back(pl.argo_bin);
        env = {"ARGO_PRINT_STATISTICS=0"};
    } else {
        argv = {self_exe(), "run", pl.ours, "--clusters", std::to_string(kProcesses), "--threads",
                std::to_string(kThreadsPerProcess), "--transport", kSystems[sys], "--proxies", "1",
                "--polling", "adaptive", "--"};
    }
    argv.insert(argv.end(), args.begin(), args.end());
}

// Every run: per run, per program, argo, iccs, direct in turn; a failed program is not run again
// on that system.
void run_all_series(const ArgoBenchPlan& pl, std::map<std::string, Series> (&series)[kNumSystems]) {
    const std::string np = std::to_string(kProcesses * kThreadsPerProcess);
    for (uint32_t r = 0; r < pl.o.runs; r++)
        for (const std::string& prog : pl.programs) {
            std::vector<std::string> args = {prog, "-p", np};
            const std::vector<std::string> sz = size_args(prog, pl.o.small);
            args.insert(args.end(), sz.begin(), sz.end());
            for (int sys = 0; sys < kNumSystems; sys++) {
                Series& s = series[sys][prog];
                if (!s.error.empty()) continue;  // a failed program is not run again on that system
                const std::string err_file = pl.work + "/" + prog + "-" + kSystems[sys] + "-" + std::to_string(r) + ".err";
                std::vector<std::string> argv, env;
                argo_run_command(pl, sys, args, argv, env);
                run_once(argv, env, std::string(kSystems[sys]) + " " + prog + " (run " + std::to_string(r + 1) + ")",
                         err_file, s);
                std::fprintf(stderr, "  run %u %-7s %-6s %s\n", r + 1, prog.c_str(), kSystems[sys],
                             s.error.empty() ? (std::to_string(s.parallel_s.back()) + " s").c_str() : "FAILED");
            }
        }
}

// One program's figures on the three systems and their ratios.
struct ArgoRow {
    std::string prog, size, error;
    Spread sys[kNumSystems], wall[kNumSystems];
    double iccs_argo = 0, direct_argo = 0, direct_iccs = 0;
    bool goal = false, direct_slower = false;
};

ArgoRow argo_row(const std::string& prog, std::map<std::string, Series> (&series)[kNumSystems]) {
    ArgoRow row;
    row.prog = prog;
    for (int sys = 0; sys < kNumSystems; sys++) {
        const Series& s = series[sys][prog];
        if (!s.error.empty() && row.error.empty()) row.error = s.error;
        if (!s.size.empty()) row.size = s.size;
        row.sys[sys] = spread_of(s.parallel_s);
        row.wall[sys] = spread_of(s.wall_s);
    }
    if (row.error.empty()) {
        row.iccs_argo = ratio(row.sys[1].median, row.sys[0].median);
        row.direct_argo = ratio(row.sys[2].median, row.sys[0].median);
        row.direct_iccs = ratio(row.sys[2].median, row.sys[1].median);
        row.goal = row.iccs_argo <= 0.5;
        row.direct_slower = floor_broken(series[2][prog].parallel_s, series[1][prog].parallel_s);
    }
    return row;
}

// What the report says beside the rows.
struct ArgoReport {
    unsigned cores;
    bool over;  // more compute threads than cores
    double load_before, load_after;
    bool all_ok, goal_met, floor_ok;
};

void print_argo_json(const BenchDsmArgoOptions& o, const std::vector<ArgoRow>& rows, const ArgoReport& rep) {
    std::printf("{\"runs\": %u, \"processes\": %u, \"threads_per_process\": %u, \"cores\": %u, \"oversubscribed\": %s, "
                "\"small\": %s, \"load_average_before\": %.2f, \"load_average_after\": %.2f, \"programs\": {",
                o.runs, kProcesses, kThreadsPerProcess, rep.cores, rep.over ? "true" : "false", o.small ? "true" : "false",
                rep.load_before, rep.load_after);
    for (size_t i = 0; i < rows.size(); i++) {
        const ArgoRow& w = rows[i];
        std::printf("%s\"%s\": {\"size\": \"%s\"", i ? ", " : "", w.prog.c_str(), w.size.c_str());
        for (int sys = 0; sys < kNumSystems; sys++)
            std::printf(", \"%s_median_s\": %.6f, \"%s_min_s\": %.6f, \"%s_max_s\": %.6f, \"%s_wall_median_s\": %.3f",
                        kSystems[sys], w.sys[sys].median, kSystems[sys], w.sys[sys].min, kSystems[sys],
                        w.sys[sys].max, kSystems[sys], w.wall[sys].median);
        std::printf(", \"ratio_iccs_argo\": %.3f, \"ratio_direct_argo\": %.3f, \"ratio_direct_iccs\": %.3f, "
                    "\"goal_met\": %s, \"direct_slower\": %s",
                    w.iccs_argo, w.direct_argo, w.direct_iccs, w.goal ? "true" : "false",
                    w.direct_slower ? "true" : "false");
        if (!w.error.empty()) std::printf(", \"error\": %s", json_str(w.error).c_str());
        std::printf("}");
    }
    std::printf("}, \"goal_met\": %s, \"floor_ok\": %s, \"ok\": %s}\n", rep.goal_met ? "true" : "false",
                rep.floor_ok ? "true" : "false", rep.all_ok ? "true" : "false");
}

void print_argo_table(const BenchDsmArgoOptions& o, const std::vector<ArgoRow>& rows, const ArgoReport& rep) {
    std::printf("bench dsm --vs argo: the same programs on ArgoDSM (mpirun, MPI backend) and on our DSM (iccs run, "
                "transports iccs and direct), %u processes x %u threads, %u interleaved runs each; medians of the "
                "timed parallel section [s] (min..max); host has %u cores, load average %.2f before, %.2f after\n",
                kProcesses, kThreadsPerProcess, o.runs, rep.cores, rep.load_before, rep.load_after);
    std::printf("  %-7s %-13s %-26s %-26s %-26s %8s %8s  %s\n", "program", "size", "argo", "iccs", "direct",
                "iccs/ar", "dir/ar", "goal: iccs <= 0.5 x argo");
    for (const ArgoRow& w : rows) {
        if (!w.error.empty()) {
            std::printf("  %-7s FAILED: %s\n", w.prog.c_str(), w.error.c_str());
            continue;
        }
        char cell[kNumSystems][64];
        for (int sys = 0; sys < kNumSystems; sys++)
            std::snprintf(cell[sys], sizeof cell[sys], "%.4f (%.4f..%.4f)", w.sys[sys].median, w.sys[sys].min,
                          w.sys[sys].max);
        std::printf("  %-7s %-13s %-26s %-26s %-26s %8.2f %8.2f  %s\n", w.prog.c_str(), w.size.c_str(), cell[0],
                    cell[1], cell[2], w.iccs_argo, w.direct_argo, w.goal ? "MET" : "NOT MET");
    }
    std::printf("  whole runs, start-up included [s], medians (argo / iccs / direct):");
    for (const ArgoRow& w : rows)
        if (w.error.empty())
            std::printf(" %s %.2f / %.2f / %.2f;", w.prog.c_str(), w.wall[0].median, w.wall[1].median,
                        w.wall[2].median);
    std::printf("\n");
    for (const ArgoRow& w : rows)
        if (w.direct_slower)
            std::printf("  FLOOR BROKEN: %s: direct (no proxy, no stack) is slower than iccs beyond noise (median "
                        "%.4f against %.4f s, more than %.0f%% over, and its best run slower too)\n",
                        w.prog.c_str(), w.sys[2].median, w.sys[1].median, kFloorTolerance * 100);
    if (o.small) std::printf("  note: --small sizes: a check of the setup, not the comparison\n");
    if (rep.over)
        std::printf("  note: %u compute threads per run (plus MPI's progress, or our service and proxy threads) on "
                    "%u cores: oversubscribed, not a dedicated-core figure\n",
                    kProcesses * kThreadsPerProcess, rep.cores);
}

}  // namespace

std::string argo_install_problem(const std::string& dir) {
    if (dir.empty()) return "--vs argo needs --argo DIR: the install prefix of an ArgoDSM build (its include/argo and lib)";
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return "--argo " + dir + ": no such directory";
    for (const char* f : {"include/argo/argo.hpp", "include/argo/synchronization/cohort_lock.hpp", "lib/libargo.so",
                          "lib/libargobackend-mpi.so"})
        if (!fs::exists(fs::path(dir) / f, ec))
            return "--argo " + dir + ": " + (fs::path(dir) / f).string() +
                   " is not there: DIR must be the install prefix of an ArgoDSM build with the MPI backend (cmake "
                   "-DARGO_BACKEND_MPI=ON -DCMAKE_INSTALL_PREFIX=DIR ... && make install)";
    return "";
}

int bench_dsm_argo(const BenchDsmArgoOptions& o) {
    const std::string ours = ICCS_DSM_VS_ARGO_EXE;
    if (!argo_bench_ready(o, ours)) return 2;
    const fs::path dir = fs::absolute(o.argo_dir);
    const std::string work = "/tmp/iccs-dsm-vs-argo-" + std::to_string(getpid());
    fs::create_directories(work);
    const std::string argo_bin = work + "/argo-programs";
    if (!build_argo_side(o, dir, work, argo_bin)) return 1;
    ArgoBenchPlan pl{o, o.programs, ours, argo_bin, work};
    if (pl.programs.empty()) pl.programs.assign(std::begin(kAllPrograms), std::end(kAllPrograms));
    ArgoReport rep{};
    rep.cores = std::max(1u, host_core_count());
    rep.load_before = load_average();
    std::fprintf(stderr, "bench dsm --vs argo: %zu programs, %u runs each on argo, iccs, direct (interleaved), %u "
                         "processes x %u threads; host has %u cores, load average %.2f\n",
                 pl.programs.size(), o.runs, kProcesses, kThreadsPerProcess, rep.cores, rep.load_before);
    std::map<std::string, Series> series[kNumSystems];
    run_all_series(pl, series);
    rep.load_after = load_average();

    rep.all_ok = rep.goal_met = rep.floor_ok = true;
    std::vector<ArgoRow> rows;
    for (const std::string& prog : pl.programs) {
        const ArgoRow row = argo_row(prog, series);
        rep.all_ok = rep.all_ok && row.error.empty();
        rep.goal_met = rep.goal_met && row.error.empty() && row.goal;
        rep.floor_ok = rep.floor_ok && !row.direct_slower;
        rows.push_back(row);
    }
    rep.over = kProcesses * kThreadsPerProcess > rep.cores;
    if (o.json) print_argo_json(o, rows, rep);
    else print_argo_table(o, rows, rep);
    if (rep.all_ok) fs::remove_all(work);  // a failed run's stderr stays for the user (named above)
    return rep.all_ok ? 0 : 1;
}

}  // namespace iccs
