// run_app.cpp: `iccs run <app>`: an application of the study (apps/) across clusters on the DSM.
// The launcher of runtime programs (run_rt.cpp) starts build/apps/iccs-app-<app>-dsm once per
// cluster with -p clusters*threads; every cluster process writes its counters to files named by
// ICCS_REPORT (the app's result line, runtime_finish's runtime and proxy counters, the DSM's), and
// this file merges them into one report: text, or with --json one JSON object on stdout (the
// contract the experiment runner reads; apps/README.md).
#include "run_app.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "args.hpp"
#include "config.hpp"
#include "msg_trace.hpp"
#include "runtime_launch.hpp"

namespace iccs {

namespace {

constexpr const char* kApps[] = {"jacobi", "matmul", "gauss", "fft", "tsp", "water", "barnes", "unstructured"};

[[noreturn]] void usage_error(const std::string& msg) { cli::usage_error("run", msg); }

// ---- a small reader for the flat JSON objects the cluster processes write

// The members of one JSON object, as raw value text by key (values are not decoded; nested
// objects and arrays stay as text). Enough for the report files, which we write ourselves.
std::map<std::string, std::string> json_members(const std::string& s) {
    std::map<std::string, std::string> m;
    size_t i = s.find('{');
    if (i == std::string::npos) return m;
    ++i;
    auto skip_ws = [&] {
        while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    };
    auto scan_string = [&] {  // s[i] == '"'; leaves i after the closing quote
        ++i;
        while (i < s.size() && s[i] != '"') i += s[i] == '\\' ? 2 : 1;
        ++i;
    };
    while (i < s.size()) {
        skip_ws();
        if (i >= s.size() || s[i] == '}') break;
        if (s[i] == ',') {
            ++i;
            continue;
        }
        if (s[i] != '"') break;
        const size_t k0 = i + 1;
        scan_string();
        const std::string key = s.substr(k0, i - 1 - k0);
        skip_ws();
        if (i >= s.size() || s[i] != ':') break;
        ++i;
        skip_ws();
        const size_t v0 = i;
        int depth = 0;
        while (i < s.size()) {
            const char c = s[i];
            if (c == '"') {
                scan_string();
                continue;
            }
            if (c == '{' || c == '[') ++depth;
            else if (c == '}' || c == ']') {
                if (depth == 0) break;
                --depth;
            } else if (c == ',' && depth == 0) break;
            ++i;
        }
        std::string v = s.substr(v0, i - v0);
        while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
        m[key] = v;
    }
    return m;
}

// The objects of a JSON array of flat objects, as text.
std::vector<std::string> json_objects(const std::string& arr) {
    std::vector<std::string> out;
    size_t i = 0;
    while ((i = arr.find('{', i)) != std::string::npos) {
        const size_t j = arr.find('}', i);
        if (j == std::string::npos) break;
        out.push_back(arr.substr(i, j - i + 1));
        i = j + 1;
    }
    return out;
}

double num(const std::map<std::string, std::string>& m, const char* key, double dflt = -1) {
    const auto it = m.find(key);
    if (it == m.end() || it->second.empty() || it->second == "null") return dflt;
    char* end = nullptr;
    const double v = std::strtod(it->second.c_str(), &end);
    return end == it->second.c_str() ? dflt : v;
}

std::string read_file(const std::string& f) {
    std::ifstream in(f);
    if (!in) return "";
    std::stringstream ss;
    ss << in.rdbuf();
    std::string s = ss.str();
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
}

std::string jnum(double v, int prec = 6) {
    if (!std::isfinite(v)) return "null";
    if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<long long>(v));
    char b[48];
    std::snprintf(b, sizeof b, "%.*g", prec, v);
    return b;
}
std::string jnum_or_null(double v, int prec = 6) { return v < 0 ? "null" : jnum(v, prec); }

}  // namespace

std::string fmt3(double v) {
    if (v < 0) return "-";  // no source gave it
    char b[32];
    std::snprintf(b, sizeof b, "%.3f", v);
    return b;
}

namespace {

std::string app_binary(const std::string& app) {
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    const std::filesystem::path dir = ec ? std::filesystem::path("build/cli") : self.parent_path();
    return (dir.parent_path() / "apps" / ("iccs-app-" + app + "-dsm")).string();
}

// The shape of the run from the configuration flags among `flags` (as cmd_run_rt reads them).
void resolve_shape(const std::vector<std::string>& flags, uint32_t& clusters, uint32_t& threads) {
    std::string config_path;
    std::vector<std::pair<std::string, std::string>> overrides;
    for (size_t i = 0; i + 1 < flags.size(); ++i) {
        const std::string& a = flags[i];
        const std::string& v = flags[i + 1];
        bool mapped = false;
        for (const auto& [flag, key] : cli::kRunConfigFlags)
            if (a == flag) {
                overrides.emplace_back(key, v);
                mapped = true;
            }
        if (mapped) {
            ++i;
            continue;
        }
        if (a == "--config") config_path = v, ++i;
        else if (a == "--set") {
            const auto eq = v.find('=');
            if (eq == std::string::npos) usage_error("--set takes SECTION.KEY=VALUE, got '" + v + "'");
            overrides.emplace_back(v.substr(0, eq), v.substr(eq + 1));
            ++i;
        } else if (a.rfind("--", 0) == 0) {
            ++i;  // another option with a value (--transport, --delay-us, --timeout): cmd_run_rt checks it
        }
    }
    const ConfigResult cr = configure(config_path, overrides);
    if (!cr.ok()) {
        std::fprintf(stderr, "%s\n", cr.error.c_str());
        std::exit(2);
    }
    clusters = cr.config->machine.clusters;
    threads = cr.config->cluster.compute_threads;
}

}  // namespace

bool is_app_name(const char* name) {
    for (const char* a : kApps)
        if (std::strcmp(a, name) == 0) return true;
    return false;
}

void run_app(const std::string& app, const std::vector<std::string>& run_flags, const std::vector<std::string>& app_args,
             int quiet_fd, AppOutcome& out, bool report_to_file) {
    const std::string bin = app_binary(app);
    if (access(bin.c_str(), X_OK) != 0)
        usage_error("the DSM build of " + app + " (" + bin + ") is not there: build it with ninja -C build (./iccs does)");
    uint32_t clusters = 0, threads = 0;
    resolve_shape(run_flags, clusters, threads);
    std::vector<std::string> args = {"-p", std::to_string(clusters * threads)};
    args.insert(args.end(), app_args.begin(), app_args.end());
    run_reported(bin, run_flags, args, quiet_fd, report_to_file, /*app=*/true, out);
}

void run_reported(const std::string& bin, const std::vector<std::string>& run_flags,
                  const std::vector<std::string>& prog_args, int quiet_fd, bool report_to_file, bool app,
                  AppOutcome& out) {
    out = AppOutcome{};
    uint32_t clusters = 0, threads = 0;
    resolve_shape(run_flags, clusters, threads);
    const std::string base = "/tmp/iccs-report-" + std::to_string(getpid()) + "-" +
                             std::filesystem::path(bin).filename().string();
    auto remove_files = [&] {
        for (uint32_t c = 0; c < clusters; ++c)
            for (const char* k : {".app.c", ".rt.c", ".dsm.c"}) std::remove((base + k + std::to_string(c)).c_str());
    };
    remove_files();
    setenv(kEnvReport, base.c_str(), 1);

    // Counters only in the report files (not on standard error) when they go to --report FILE.
    if (report_to_file) setenv("ICCS_REPORT_ONLY", "1", 1);
    std::vector<std::string> args = {bin};
    args.insert(args.end(), run_flags.begin(), run_flags.end());
    args.push_back("--");
    args.insert(args.end(), prog_args.begin(), prog_args.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    std::fflush(stdout);
    std::fflush(stderr);
    int saved_out = -1, saved_err = -1;
    if (quiet_fd >= 0) {
        saved_out = dup(1);
        saved_err = dup(2);
        dup2(quiet_fd, 1);
        dup2(quiet_fd, 2);
    }
    out.info.app = app;
    out.info.report_to_file = report_to_file;
    out.rc = cmd_run_rt(static_cast<int>(args.size()), argv.data(), &out.info);
    std::fflush(stdout);
    std::fflush(stderr);
    if (quiet_fd >= 0) {
        dup2(saved_out, 1);
        dup2(saved_err, 2);
        close(saved_out);
        close(saved_err);
    }
    unsetenv(kEnvReport);
    unsetenv("ICCS_REPORT_ONLY");

    out.app_json = read_file(base + ".app.c0");
    const auto appm = json_members(out.app_json);
    out.parallel_s = num(appm, "parallel_s");
    const auto res = appm.find("result");
    out.pass = out.rc == 0 && res != appm.end() && res->second == "\"PASS\"";
    double msgs = 0, bytes = 0, wsum = 0, wcount = 0, qsum = 0, usum = 0;
    int qn = 0, un = 0;
    bool any_rt = false;
    for (uint32_t c = 0; c < clusters; ++c) {
        out.rt_json.push_back(read_file(base + ".rt.c" + std::to_string(c)));
        out.dsm_json.push_back(read_file(base + ".dsm.c" + std::to_string(c)));
        if (out.rt_json.back().empty()) continue;
        const auto m = json_members(out.rt_json.back());
        any_rt = true;
        msgs += num(m, "msgs", 0);
        bytes += num(m, "bytes", 0);
        const auto pr = m.find("proxies");
        if (pr == m.end() || pr->second == "null") continue;
        for (const std::string& po : json_objects(pr->second)) {
            const auto pm = json_members(po);
            AppOutcome::Proxy p;
            p.cluster = static_cast<unsigned>(num(pm, "cluster", 0));
            p.proxy = static_cast<unsigned>(num(pm, "proxy", 0));
            p.msgs_tx = num(pm, "msgs_tx", 0);
            p.msgs_rx = num(pm, "msgs_rx", 0);
            p.bytes_tx = num(pm, "bytes_tx", 0);
            p.bytes_rx = num(pm, "bytes_rx", 0);
            p.msg_time_count = num(pm, "msg_time_count", 0);
            p.msg_time_us = num(pm, "msg_time_us_mean");
            p.queue_len = num(pm, "queue_len_mean");
            p.utilization = num(pm, "utilization");
            p.total_s = num(pm, "total_s");
            if (p.msg_time_us >= 0) {
                wsum += p.msg_time_us * p.msg_time_count;
                wcount += p.msg_time_count;
            }
            if (p.queue_len >= 0) qsum += p.queue_len, ++qn;
            if (p.utilization >= 0) usum += p.utilization, ++un;
            out.proxies.push_back(p);
        }
    }
    if (any_rt) {
        out.rt_msgs = msgs;
        out.rt_bytes = bytes;
    }
    if (!out.proxies.empty()) {
        out.msg_time_us_mean = wcount > 0 ? wsum / wcount : -1;
        out.queue_len_mean = qn ? qsum / qn : -1;
        out.utilization_mean = un ? usum / un : -1;
    }
    remove_files();
}

namespace {

const char* kDsmKeys[] = {"read_faults", "write_faults", "page_fetches", "diffs_sent", "diff_bytes", "invalidations"};
const char* kDsmSeconds[] = {"lock_wait_s", "barrier_wait_s"};


}  // namespace

std::string shape_members_json(const RtRunInfo& in) {
    std::string j = ",\"threads\":" + std::to_string(unsigned(in.clusters) * in.threads);
    j += ",\"clusters\":" + std::to_string(in.clusters) + ",\"cluster_size\":" + std::to_string(in.threads);
    j += ",\"proxies_per_cluster\":" + std::to_string(in.proxies);
    j += std::string(",\"proxies_auto\":") + (in.proxies_auto && in.transport == "iccs" ? "true" : "false");
    j += ",\"dispatch\":\"" + in.dispatch + "\",\"transport\":\"" + in.transport + "\"";
    j += ",\"delay_us\":" + (in.delay_us < 0 ? std::string("null") : jnum(in.delay_us));
    j += ",\"polling\":\"" + in.polling + "\",\"fabric\":\"" + in.fabric + "\"";
    return j;
}

namespace {

// The members every report has after the run's verdict: the host's load, and the runtime's,
// proxies' and DSM's counters of every cluster.
std::string run_members_json(const AppOutcome& o);

std::string outcome_json(const std::string& app, const std::string& size, const AppOutcome& o) {
    const auto appm = json_members(o.app_json);
    auto app_raw = [&](const char* k) {
        const auto it = appm.find(k);
        return it == appm.end() ? std::string("null") : it->second;
    };
    std::string j = "{\"app\":\"" + app + "\",\"size\":\"" + size + "\"";
    j += shape_members_json(o.info);
    j += std::string(",\"result\":\"") + (o.pass ? "PASS" : "FAIL") + "\"";
    j += ",\"exit_status\":" + std::to_string(o.rc);
    j += ",\"parallel_s\":" + app_raw("parallel_s");
    j += ",\"check\":" + app_raw("check");
    if (appm.count("failure")) j += ",\"failure\":" + app_raw("failure");
    else if (o.app_json.empty())
        j += ",\"failure\":\"cluster 0 wrote no result: a cluster process failed before the check (its error is on "
             "stderr)\"";
    else if (!o.pass)
        j += ",\"failure\":\"the application passed its check but a cluster process failed (see stderr)\"";
    j += run_members_json(o);
    j += ",\"app_report\":" + (o.app_json.empty() ? std::string("null") : o.app_json);
    if (!o.trace_json.empty()) j += ",\"trace\":" + o.trace_json;
    return j + "}";
}

std::string run_members_json(const AppOutcome& o) {
    const RtRunInfo& in = o.info;
    const unsigned cores = host_core_count();
    const unsigned busy = unsigned(in.clusters) * in.threads + unsigned(in.clusters) * in.proxies;
    std::string j;
    j += ",\"host_cores\":" + std::to_string(cores);
    j += ",\"busy_threads\":" + std::to_string(busy);
    j += std::string(",\"oversubscribed\":") + (busy > cores ? "true" : "false");
    if (o.rt_msgs < 0) j += ",\"rt\":null";
    else
        j += ",\"rt\":{\"msgs\":" + jnum(o.rt_msgs) + ",\"bytes\":" + jnum(o.rt_bytes) + ",\"mean_msg_bytes\":" +
             (o.rt_msgs > 0 ? jnum(o.rt_bytes / o.rt_msgs) : "null") + "}";
    if (in.transport != "iccs" || o.proxies.empty()) j += ",\"iccs\":null";
    else {
        j += ",\"iccs\":{\"msg_time_us_mean\":" + jnum_or_null(o.msg_time_us_mean) +
             ",\"queue_len_mean\":" + jnum_or_null(o.queue_len_mean) +
             ",\"utilization_mean\":" + jnum_or_null(o.utilization_mean) +
             ",\"proxies\":[";
        for (size_t i = 0; i < o.proxies.size(); ++i) {
            const AppOutcome::Proxy& p = o.proxies[i];
            j += std::string(i ? "," : "") + "{\"cluster\":" + std::to_string(p.cluster) +
                 ",\"proxy\":" + std::to_string(p.proxy) + ",\"msgs_tx\":" + jnum(p.msgs_tx) +
                 ",\"msgs_rx\":" + jnum(p.msgs_rx) + ",\"bytes_tx\":" + jnum(p.bytes_tx) +
                 ",\"bytes_rx\":" + jnum(p.bytes_rx) + ",\"msg_time_us_mean\":" + jnum_or_null(p.msg_time_us) +
                 ",\"queue_len_mean\":" + jnum_or_null(p.queue_len) + ",\"utilization\":" + jnum_or_null(p.utilization) +
                 ",\"total_s\":" + jnum_or_null(p.total_s, 6) + "}";
        }
        j += "]}";
    }
    // DSM: summed over the clusters that reported (null when none did).
    std::vector<std::map<std::string, std::string>> dm;
    std::string per;
    for (size_t c = 0; c < o.dsm_json.size(); ++c) {
        if (o.dsm_json[c].empty()) continue;
        dm.push_back(json_members(o.dsm_json[c]));
        per += (per.empty() ? "" : ",") + o.dsm_json[c];
    }
    if (dm.empty()) j += ",\"dsm\":null";
    else {
        j += ",\"dsm\":{";
        bool first = true;
        for (const char* k : kDsmKeys) {
            double s = 0;
            for (const auto& m : dm) s += num(m, k, 0);
            j += std::string(first ? "" : ",") + "\"" + k + "\":" + jnum(s);
            first = false;
        }
        for (const char* k : kDsmSeconds) {
            double s = 0;
            for (const auto& m : dm) s += num(m, k, 0);
            j += std::string(",\"") + k + "\":" + jnum(s, 9);
        }
        j += ",\"clusters_reported\":" + std::to_string(dm.size()) + "}";
    }
    j += ",\"dsm_per_cluster\":" + (dm.empty() ? std::string("null") : "[" + per + "]");
    return j;
}

// The trace parts the cluster processes write: PREFIX.c<C>.p<P> (proxy/msg_trace.hpp), sorted.
std::vector<std::filesystem::path> trace_parts_of(const std::string& part_prefix) {
    namespace fs = std::filesystem;
    std::vector<fs::path> parts;
    const fs::path dir = fs::path(part_prefix).parent_path().empty() ? fs::path(".") : fs::path(part_prefix).parent_path();
    const std::string stem = fs::path(part_prefix).filename().string() + ".c";
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.path().filename().string().rfind(stem, 0) == 0) parts.push_back(e.path());
    std::sort(parts.begin(), parts.end());
    return parts;
}

// --trace FILE: the parts merged into one file with one header, the parts removed. Returns the
// JSON object of what it holds.
std::string merge_trace(const std::string& file, const std::string& part_prefix, std::string& err) {
    namespace fs = std::filesystem;
    const std::vector<fs::path> parts = trace_parts_of(part_prefix);
    std::error_code ec;
    std::ofstream out(file, std::ios::trunc);
    if (!out) {
        err = "--trace " + file + ": cannot write it";
        return "";
    }
    out << kMsgTraceHeader << "\n";
    unsigned long long tx = 0, rx = 0, dropped = 0;
    for (const fs::path& p : parts) {
        std::ifstream in(p);
        for (std::string line; std::getline(in, line);) {
            if (line.rfind("# dropped,", 0) == 0) {
                dropped += std::strtoull(line.substr(line.rfind(',') + 1).c_str(), nullptr, 10);
                continue;
            }
            (line.rfind("tx,", 0) == 0 ? tx : rx) += 1;
            out << line << "\n";
        }
        fs::remove(p, ec);
    }
    out << "# dropped," << dropped << "\n";
    if (!out.flush()) err = "--trace " + file + ": write failed";
    if (parts.empty()) err = "--trace " + file + ": no cluster wrote a trace";
    return "{\"file\":\"" + file + "\",\"parts\":" + std::to_string(parts.size()) + ",\"records\":" +
           std::to_string(tx + rx) + ",\"tx\":" + std::to_string(tx) + ",\"rx\":" + std::to_string(rx) +
           ",\"dropped\":" + std::to_string(dropped) + "}";
}

// The launcher's report of an application run, on standard error (standard output is the
// application's own lines).
void print_text(const std::string& app, const AppOutcome& o) {
    const RtRunInfo& in = o.info;
    std::fprintf(stderr, "\n%s: %s", app.c_str(), o.pass ? "PASS" : "FAIL");
    if (o.parallel_s >= 0) std::fprintf(stderr, ", parallel section %.6f s", o.parallel_s);
    std::fprintf(stderr, " (%u clusters x %u compute threads = -p %u, transport %s", in.clusters, in.threads,
                unsigned(in.clusters) * in.threads, in.transport.c_str());
    if (in.transport == "iccs") std::fprintf(stderr, ", %u proxies per cluster, dispatch %s", in.proxies, in.dispatch.c_str());
    if (in.delay_us >= 0) std::fprintf(stderr, ", delay %.1f us", in.delay_us);
    std::fprintf(stderr, ")\n");
    if (o.rt_msgs >= 0)
        std::fprintf(stderr, "  runtime: %.0f messages, %.0f bytes (mean %.1f bytes), every endpoint of every cluster\n", o.rt_msgs,
                    o.rt_bytes, o.rt_msgs > 0 ? o.rt_bytes / o.rt_msgs : 0.0);
    if (!o.proxies.empty()) {
        std::fprintf(stderr, "  %-7s %9s %9s %11s %11s %13s %9s %11s\n", "proxy", "msgs tx", "msgs rx", "bytes tx", "bytes rx",
                    "msg time us", "queue len", "utilization");
        for (const AppOutcome::Proxy& p : o.proxies) {
            char mt[32] = "-";
            if (p.msg_time_us >= 0) std::snprintf(mt, sizeof mt, "%.1f", p.msg_time_us);
            std::fprintf(stderr, "  %u.%-5u %9.0f %9.0f %11.0f %11.0f %13s %9s %11s\n", p.cluster, p.proxy, p.msgs_tx, p.msgs_rx,
                        p.bytes_tx, p.bytes_rx, mt, fmt3(p.queue_len).c_str(), fmt3(p.utilization).c_str());
        }
        char mt[32] = "-";
        if (o.msg_time_us_mean >= 0) std::snprintf(mt, sizeof mt, "%.1f", o.msg_time_us_mean);
        std::fprintf(stderr, "  %-7s %9s %9s %11s %11s %13s %9s %11s\n", "mean", "", "", "", "", mt, fmt3(o.queue_len_mean).c_str(),
                    fmt3(o.utilization_mean).c_str());
    }
    double s[6] = {0, 0, 0, 0, 0, 0}, w[2] = {0, 0};
    int n = 0;
    for (const std::string& d : o.dsm_json) {
        if (d.empty()) continue;
        const auto m = json_members(d);
        for (int i = 0; i < 6; ++i) s[i] += num(m, kDsmKeys[i], 0);
        for (int i = 0; i < 2; ++i) w[i] += num(m, kDsmSeconds[i], 0);
        ++n;
    }
    if (n > 0)
        std::fprintf(stderr, "  dsm (%d clusters): read faults %.0f, write faults %.0f, page fetches %.0f, diffs %.0f (%.0f bytes), "
                    "invalidations %.0f, lock wait %.4f s, barrier wait %.4f s\n",
                    n, s[0], s[1], s[2], s[3], s[4], s[5], w[0], w[1]);
    std::fflush(stderr);
}

const char* kAppRunHelp =
    "usage: iccs run APP [--clusters C] [--cluster-size S] [--proxies P|auto]\n"
    "                    [--dispatch fixed|round-robin|least-loaded] [--transport iccs|direct|delay]\n"
    "                    [--delay-us N|auto] [--size test|paper] [--json] [other run options]\n"
    "  APP: jacobi, matmul, gauss, fft, tsp, water, barnes, unstructured (apps/README.md).\n"
    "  Starts C cluster processes of build/apps/iccs-app-APP-dsm (the application on the page-grain\n"
    "  DSM across clusters) with S compute threads each; the application gets -p C*S and --size,\n"
    "  checks its result against a sequential reference, and this prints PASS/FAIL, the parallel\n"
    "  section's time, the runtime's messages, each proxy's counters (over iccs: messages and bytes\n"
    "  each way, mean message time, queue length, utilization) and the DSM's counters summed over\n"
    "  the clusters. Standard output carries the application's lines only (cluster 0's); this\n"
    "  report goes to standard error (or to --report FILE).\n"
    "  --cluster-size S     compute threads per cluster ([cluster] compute_threads; --threads is the same)\n"
    "  --size test|paper    problem size (default test; paper = the study's Table 1)\n"
    "  --json               stdout is one JSON object on one line (everything else goes to stderr):\n"
    "                       app, size, threads, clusters, cluster_size, proxies_per_cluster (0 over\n"
    "                       direct/delay), dispatch, transport, delay_us (null unless delay), result,\n"
    "                       parallel_s, check, host_cores, oversubscribed, rt {msgs, bytes,\n"
    "                       mean_msg_bytes}, iccs (null unless iccs) {msg_time_us_mean, queue_len_mean,\n"
    "                       utilization_mean, proxies [...]}, dsm {...summed}, dsm_per_cluster [...];\n"
    "                       a value no source gave is null (apps/README.md has every key)\n"
    "  --report FILE        the launcher's report (the --json object) goes to FILE instead of\n"
    "                       standard error; standard output keeps only the application's own lines\n"
    "  --trace FILE         record every message the proxies take from and deliver to compute\n"
    "                       threads (transport iccs): one CSV line each (dir tx|rx, cluster, proxy,\n"
    "                       t_ns, enq_ns, src/dst cluster, thread, ports, type, bytes, msg_id), written\n"
    "                       at the end (ICCS_TRACE_RECORDS per proxy at most, default 262144; more are\n"
    "                       counted as dropped); --json gains trace {file, records, tx, rx, dropped}.\n"
    "                       The input of the proxy model (perf/model/README.md)\n"
    "  --inject-error       test hook: the application corrupts its result before the check (FAIL)\n"
    "  Other options as for runtime programs (iccs run --help): --config, --set, --polling,\n"
    "  --fabric, --timeout, ... Exit status 0 PASS, 1 FAIL (wrong answer or a cluster failed), 2 a\n"
    "  usage error.\n";

}  // namespace

namespace {

// --report FILE: opened before the run, so a path that cannot be written stops it at once.
FILE* open_report(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) usage_error("--report " + path + ": " + std::strerror(errno));
    return f;
}
void write_report(FILE* f, const std::string& path, const std::string& json) {
    if (std::fprintf(f, "%s\n", json.c_str()) < 0 || std::fclose(f) != 0)
        std::fprintf(stderr, "iccs run: --report %s: %s\n", path.c_str(), std::strerror(errno));
}

}  // namespace

int cmd_run_path(int argc, char** argv) {
    const std::string program = argv[0];
    std::vector<std::string> run_flags, prog_args;
    std::string report;
    int i = 1;
    for (; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--") {
            for (++i; i < argc; ++i) prog_args.emplace_back(argv[i]);
            break;
        }
        if (a == "--report") {
            if (i + 1 >= argc) usage_error("--report needs a value (a file for the run's JSON report)");
            report = argv[++i];
            continue;
        }
        run_flags.push_back(a);
    }
    if (report.empty()) return cmd_run_rt(argc, argv);  // the launcher's lines on standard error
    FILE* out = open_report(report);
    AppOutcome o;
    run_reported(program, run_flags, prog_args, -1, /*report_to_file=*/true, /*app=*/false, o);
    if (!o.info.resolved) {  // stopped before the run (its message is out): no report
        std::fclose(out);
        std::remove(report.c_str());
        return o.rc == 0 ? 2 : o.rc;
    }
    std::string j = "{\"program\":" + json_quote(program) + ",\"args\":[";
    for (size_t k = 0; k < prog_args.size(); ++k) j += (k ? "," : "") + json_quote(prog_args[k]);
    j += "]" + shape_members_json(o.info);
    j += std::string(",\"result\":\"") + (o.rc == 0 ? "PASS" : "FAIL") + "\"";
    j += ",\"exit_status\":" + std::to_string(o.rc);
    j += run_members_json(o);
    j += ",\"rt_per_cluster\":[";
    for (size_t c = 0; c < o.rt_json.size(); ++c) j += (c ? "," : "") + (o.rt_json[c].empty() ? "null" : o.rt_json[c]);
    j += "]}";
    write_report(out, report, j);
    return o.rc;
}

int cmd_run_app(int argc, char** argv) {
    const std::string app = argv[0];
    std::vector<std::string> run_flags, app_args;
    std::string size = "test";
    bool json = false, inject = false;
    std::string cluster_size, threads, report, trace, transport = "iccs";
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--help" || a == "-h") {
            std::fputs(kAppRunHelp, stdout);
            return 0;
        }
        if (a == "--json") {
            json = true;
            continue;
        }
        if (a == "--inject-error") {
            inject = true;
            continue;
        }
        if (a == "--") usage_error("'--' passes arguments to a program given by path; " + app +
                                   " gets -p and --size from --clusters, --cluster-size and --size");
        if (a == "--messages" || a == "--min-size" || a == "--max-size" || a == "--barriers" || a == "--warmup")
            usage_error(a + " is for the built-in programs exchange and ping, not for the application " + app);
        if (i + 1 >= argc) usage_error(a + " needs a value (see iccs run " + app + " --help)");
        const std::string v = argv[++i];
        if (a == "--trace") {
            if (v.empty()) usage_error("--trace needs a file name");
            trace = v;
            continue;
        }
        if (a == "--transport") transport = v;
        if (a == "--size") {
            if (v != "test" && v != "paper") usage_error("bad value '" + v + "' for --size: allowed values are test, paper");
            size = v;
        } else if (a == "--report") {
            report = v;
        } else if (a == "--cluster-size" || a == "--threads") {
            cli::note_cluster_size("run", a, v, cluster_size, threads);
            run_flags.push_back("--threads");
            run_flags.push_back(v);
        } else if (a.rfind("--", 0) == 0) {
            run_flags.push_back(a);
            run_flags.push_back(v);
        } else {
            usage_error("unexpected argument '" + a + "' (see iccs run " + app + " --help)");
        }
    }
    app_args = {"--size", size};
    if (json) app_args.push_back("--json");
    if (inject) app_args.push_back("--inject-error");
    if (!trace.empty() && transport != "iccs")
        usage_error("--trace records what the proxies carry: transport " + transport + " has none (use iccs)");
    const std::string trace_parts = trace.empty() ? "" : trace + ".part";
    if (!trace.empty()) {
        std::error_code ec;
        for (const auto& stale : trace_parts_of(trace_parts)) std::filesystem::remove(stale, ec);  // an earlier run's
        setenv("ICCS_TRACE", trace_parts.c_str(), 1);
    }
    FILE* report_out = nullptr;
    if (!report.empty()) report_out = open_report(report);
    AppOutcome o;
    // --json: our stdout carries only the final object; the launcher's and the clusters' lines go
    // to stderr.
    run_app(app, run_flags, app_args, json ? 2 : -1, o, report_out != nullptr);
    if (!trace.empty()) {
        unsetenv("ICCS_TRACE");
        std::string terr;
        o.trace_json = merge_trace(trace, trace_parts, terr);
        std::fprintf(stderr, "trace: %s: %s\n", trace.c_str(), terr.empty() ? o.trace_json.c_str() : terr.c_str());
        if (terr.empty() && o.trace_json.find("\"dropped\":0}") == std::string::npos)
            std::fprintf(stderr, "trace: some proxies' buffers filled up: records dropped (raise ICCS_TRACE_RECORDS)\n");
        if (!terr.empty() && o.info.resolved && o.info.transport != "iccs") {
            std::fprintf(stderr, "iccs run: --trace: transport %s has no proxies to trace\n", o.info.transport.c_str());
            return 2;
        }
        if (!terr.empty()) o.pass = false;
    }
    if (!o.info.resolved) return o.rc == 0 ? 2 : o.rc;  // stopped before the run: its message is out
    if (json) {
        std::printf("%s\n", outcome_json(app, size, o).c_str());
        std::fflush(stdout);
    }
    if (report_out != nullptr) write_report(report_out, report, outcome_json(app, size, o));
    else if (!json) print_text(app, o);
    if (o.rc == 2) return 2;
    return o.pass ? 0 : 1;
}

}  // namespace iccs
