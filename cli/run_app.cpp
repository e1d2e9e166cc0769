// run_app.cpp: `iccs run <app>`: an application of the study (apps/) across clusters on the DSM.
// The launcher of runtime programs (run_rt.cpp) starts build/apps/iccs-app-<app>-dsm once per
// cluster with -p clusters*threads; every cluster process writes its counters to files named by
// ICCS_REPORT (the app's result line, runtime_finish's runtime and proxy counters, the DSM's), and
// this file merges them into one report: text, or with --json one JSON object on stdout (the
// contract the experiment runner reads; apps/README.md).
#include "run_app.hpp"

#include <fcntl.h>
#include <sys/stat.h>
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

#include "config.hpp"
#include "msg_trace.hpp"
#include "run_table.hpp"
#include "runtime_launch.hpp"

namespace iccs {

namespace {

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

}  // namespace

const std::vector<const char*>& app_names() {
    static const std::vector<const char*> names = {"jacobi", "matmul", "gauss", "fft",
                                                   "tsp",    "water",  "barnes", "unstructured"};
    return names;
}

bool is_app_name(const std::string& name) {
    for (const char* a : app_names())
        if (name == a) return true;
    return false;
}

void run_app(const std::string& app, const RunSetup& setup, const std::vector<std::string>& app_args, int quiet_fd,
             AppOutcome& out, bool report_to_file) {
    const std::string bin = app_binary(app);
    if (access(bin.c_str(), X_OK) != 0)
        usage_error("the DSM build of " + app + " (" + bin + ") is not there: build it with ninja -C build (./iccs does)");
    std::vector<std::string> args = {
        "-p", std::to_string(setup.cfg.machine.clusters * setup.cfg.cluster.compute_threads)};
    args.insert(args.end(), app_args.begin(), app_args.end());
    run_reported(bin, setup, args, quiet_fd, report_to_file, /*app=*/true, out);
}

void run_reported(const std::string& bin, const RunSetup& setup, const std::vector<std::string>& prog_args,
                  int quiet_fd, bool report_to_file, bool app, AppOutcome& out) {
    out = AppOutcome{};
    const uint32_t clusters = setup.cfg.machine.clusters;
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
    RtRequest r;
    r.name = bin;
    r.args = prog_args;
    r.one_cluster_ok = true;
    r.lines_on_stdout = false;  // a program given by path owns standard output
    if (!app) r.pass_line = "PASS: every cluster process exited with status 0";

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
    out.rc = run_rt(setup, r, &out.info);
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

int launch_path(const ProgramRow& row, const std::string& program, const cli::Args& p) {
    struct stat st {};
    if (stat(program.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || access(program.c_str(), X_OK) != 0)
        cli::usage_error("run", "program '" + program + "' is not an executable file (iccs run --help lists the "
                                "built-in programs)");
    const std::vector<std::string>& prog_args = p.rest;
    const std::string report = p.text("--report");
    // A program given by path runs as long as it needs: only a given --timeout stops it (24 h at most).
    const RunSetup setup = run_setup(p, 86400);
    if (report.empty()) {  // the launcher's lines on standard error
        RtRequest r;
        r.name = program;
        r.args = prog_args;
        r.one_cluster_ok = true;
        r.lines_on_stdout = false;
        r.pass_line = row.pass_line;
        return run_rt(setup, r);
    }
    FILE* out = open_report(report);
    AppOutcome o;
    run_reported(program, setup, prog_args, -1, /*report_to_file=*/true, /*app=*/false, o);
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

int launch_app(const ProgramRow&, const std::string& app, const cli::Args& p) {
    const std::string size = p.text("--size", "test");
    const bool json = p.flag("--json"), inject = p.flag("--inject-error");
    const std::string report = p.text("--report"), trace = p.text("--trace");
    const RunSetup setup = run_setup(p, 300);
    const std::string transport = setup.transport.empty() ? to_string(setup.cfg.runtime.transport) : setup.transport;
    std::vector<std::string> app_args;
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
    run_app(app, setup, app_args, json ? 2 : -1, o, report_out != nullptr);
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
