// run_widearea.cpp: `iccs run NAME` of the wide-area programs (apps/widearea/): the program's own
// flags (--variant, --size, --json, --report, --inject-error) here, every run option through the
// runtime's launcher (run_rt.cpp), which forks one cluster process per cluster running
// widearea::run_cluster; cluster 0 writes one JSON object per variant to a file this reads back.
#include "run_widearea.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "args.hpp"
#include "config.hpp"
#include "run_app.hpp"
#include "run_rt.hpp"
#include "widearea.hpp"

namespace iccs {

namespace {

[[noreturn]] void usage_error(const std::string& msg) { cli::usage_error("run", msg); }

// "original, optimized, exact-halo": a program's variants.
std::string variant_names(const widearea::Program& p, const char* sep = ", ") {
    std::string r;
    for (const widearea::VariantInfo& v : p.variants) r += std::string(r.empty() ? "" : sep) + widearea::to_string(v.id);
    return r;
}

void print_help(const widearea::Program* only) {
    std::printf(
        "usage: iccs run NAME [--variant V[,V...]|both|all] [--grid-opts LIST]\n"
        "                     [--size test|paper] [--json]\n"
        "                     [--report FILE] [--inject-error] [--clusters C] [--cluster-size S]\n"
        "                     [--sites LIST] [--wan-latency-ms X] [--wan-bandwidth BPS] [--wan-loss P]\n"
        "                     [--transport iccs|direct|delay] [--delay-us N] [other run options]\n"
        "  The wide-area suite (Bal, Plaat et al. 1998-99; apps/widearea/README.md): a program on the\n"
        "  cluster runtime and group/ across C cluster processes of S compute threads each. The study's\n"
        "  'cluster' is a WAN site (each cluster process its own site unless --sites groups them); its\n"
        "  'processes' are the compute threads (C*S in all). Each variant runs timed between barriers,\n"
        "  then every cluster checks its part of the result against the sequential computation (cluster\n"
        "  0's is timed: speedup = sequential / parallel), and the inter-site traffic (RPCs and their\n"
        "  bytes, broadcast messages and their bytes, per WAN link, counted as the study's Orca did) is\n"
        "  summed over the clusters.\n"
        "programs and their variants (original: as the study ran it; optimized: the study's change;\n"
        "other names: ours):\n");
    for (const widearea::Program& p : widearea::programs()) {
        if (only != nullptr && only != &p) continue;
        std::printf("  %-9s %s\n  %-9s sizes: %s\n", p.name, p.help, "", p.sizes);
        for (const widearea::VariantInfo& v : p.variants)
            std::printf("  %-9s   %s: %s\n", "", widearea::to_string(v.id), v.help);
        if (*p.no_optimized) std::printf("  %-9s   (no optimized: %s)\n", "", p.no_optimized);
        if (*p.caveat) std::printf("  %-9s   (%s)\n", "", p.caveat);
    }
    std::printf(
        "options:\n"
        "  --variant V          one of the program's variants (default original), a comma-separated\n"
        "                       list of them (run in turn in one launch, each timed and checked on its\n"
        "                       own), both (original,optimized), or all (every variant but grid)\n"
        "  --grid-opts LIST     the grid variant's changes: any of tree-sync,rings,polling,grain,autoflush,\n"
        "                       or all (default), none\n"
        "  --size test|paper    problem size (default test)\n"
        "  --json               stdout is one JSON object on one line (everything else to stderr): app,\n"
        "                       variant, size, result, time_s, seq_s, speedup, check, problem, wan_rpcs,\n"
        "                       wan_rpc_bytes, wan_bcasts, wan_bcast_bytes, msgs, msg_bytes, wan_links\n"
        "                       [{from_site, to_site, rpcs, rpc_bytes, bcasts, bcast_bytes}], stats, and\n"
        "                       the run's shape (clusters, cluster_size, transport, ...); with several\n"
        "                       variants: {app, variant: V, result, shape..., runs: [one per variant]}\n"
        "  --report FILE        that JSON object into FILE as well\n"
        "  --inject-error       test hook: cluster 0 corrupts its part of the parallel result before the\n"
        "                       check, which must FAIL (exit 1)\n"
        "  --cluster-size S     compute threads per cluster ([cluster] compute_threads; --threads is the same)\n"
        "  --seed N             inputs (and [test] seed)\n"
        "  --wait-timeout-ms N  a wait for a message or barrier longer than this fails (default 120000)\n"
        "  Other options as for runtime programs (iccs run --help): --config, --set, --proxies,\n"
        "  --polling, --fabric, --timeout S, --sites, --wan-*. Exit status 0 PASS, 1 FAIL, 2 a usage\n"
        "  error (naming the flag).\n");
}

// --variant's value for program p: a name, a list, both or all; exits 2 naming what is wrong.
std::vector<widearea::Variant> parse_variants(const widearea::Program& p, const std::string& v) {
    std::vector<widearea::Variant> out;
    if (v == "all") {
        for (const widearea::VariantInfo& i : p.variants)
            if (i.id != widearea::Variant::kGrid) out.push_back(i.id);
        return out;
    }
    const std::string list = v == "both" ? "original,optimized" : v;
    for (size_t at = 0; at <= list.size();) {
        const size_t end = std::min(list.find(',', at), list.size());
        const std::string w = list.substr(at, end - at);
        at = end + 1;
        widearea::Variant id{};
        if (!widearea::parse_variant(w, id))
            usage_error("bad value '" + w + "' for --variant: allowed values are " + variant_names(p) +
                        " (a comma-separated list of them), both, all");
        if (!p.has(id)) {
            if (id == widearea::Variant::kOptimized && *p.no_optimized)
                usage_error(std::string("--variant ") + v + ": " + p.name + " has no optimized variant: " + p.no_optimized);
            usage_error(std::string("--variant ") + v + ": " + p.name + " has no variant " + w + " (its variants: " +
                        variant_names(p) + ")");
        }
        for (widearea::Variant seen : out)
            if (seen == id) usage_error("--variant " + v + ": " + w + " twice");
        out.push_back(id);
    }
    return out;
}

std::string read_lines(const std::string& f, std::vector<std::string>& lines) {
    std::ifstream in(f);
    std::string all;
    for (std::string l; std::getline(in, l);)
        if (!l.empty()) {
            lines.push_back(l);
            all += l;
        }
    return all;
}

}  // namespace

bool is_widearea_name(const char* name) { return widearea::find_program(name) != nullptr; }

void print_widearea_list() {
    for (const widearea::Program& p : widearea::programs())
        std::printf("%s\t%s\t%s\n", p.name, p.help, variant_names(p, ",").c_str());
}

int cmd_run_widearea(int argc, char** argv) {
    const widearea::Program* prog = widearea::find_program(argv[0]);
    if (prog == nullptr) usage_error(std::string("unknown wide-area program '") + argv[0] + "'");
    widearea::Options o;
    std::vector<std::string> flags = {argv[0]};
    bool json = false;
    std::string report, cluster_size, threads, variant = "original";
    bool grid_opts_given = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--help" || a == "-h") {
            print_help(prog);
            return 0;
        }
        if (a == "--json") {
            json = true;
            continue;
        }
        if (a == "--inject-error") {
            o.inject_error = true;
            continue;
        }
        if (a == "--") usage_error("'--' passes arguments to a program given by path; " + std::string(prog->name) +
                                   " takes its options directly (iccs run " + prog->name + " --help)");
        for (const char* other : {"--messages", "--min-size", "--max-size", "--barriers", "--warmup", "--trace"})
            if (a == other) usage_error(a + " is not an option of the wide-area program " + prog->name);
        if (i + 1 >= argc) usage_error(a + " needs a value (see iccs run " + prog->name + " --help)");
        const std::string v = argv[++i];
        if (a == "--variant") {
            o.variants = parse_variants(*prog, v);
            variant = v;
        } else if (a == "--grid-opts") {
            std::string err;
            if (!widearea::parse_grid_opts(v, o.grid_opts, err)) usage_error("--grid-opts: " + err);
            grid_opts_given = true;
        } else if (a == "--size") {
            if (v == "test") o.size = widearea::Size::kTest;
            else if (v == "paper") o.size = widearea::Size::kPaper;
            else usage_error("bad value '" + v + "' for --size: allowed values are test, paper");
        } else if (a == "--report") {
            if (v.empty()) usage_error("--report needs a file name");
            report = v;
        } else if (a == "--wait-timeout-ms") {
            o.timeout_ms = cli::parse_u64("run", a, v.c_str(), 100, 86'400'000);
        } else if (a == "--cluster-size" || a == "--threads") {
            cli::note_cluster_size("run", a, v, cluster_size, threads);
            flags.insert(flags.end(), {"--threads", v});
        } else if (a.rfind("--", 0) == 0) {
            if (a == "--seed") o.seed = cli::parse_u64("run", a, v.c_str(), 0, UINT64_MAX);
            flags.insert(flags.end(), {a, v});
        } else {
            usage_error("unexpected argument '" + a + "' (see iccs run " + prog->name + " --help)");
        }
    }
    if (grid_opts_given && std::find(o.variants.begin(), o.variants.end(), widearea::Variant::kGrid) == o.variants.end())
        usage_error("--grid-opts applies to --variant grid only");
    FILE* rep = nullptr;
    if (!report.empty() && (rep = std::fopen(report.c_str(), "w")) == nullptr)
        usage_error("--report " + report + ": " + std::strerror(errno));
    o.result_file = "/tmp/iccs-widearea-" + std::to_string(getpid()) + ".json";
    std::remove(o.result_file.c_str());

    RtRunInfo info;
    info.app = true;
    info.builtin = [prog, o](std::unique_ptr<Runtime> rt, const group::Topology& topo) {
        return widearea::run_cluster(std::move(rt), topo, *prog, o);
    };
    std::vector<char*> av;
    for (std::string& f : flags) av.push_back(f.data());
    av.push_back(nullptr);
    std::fflush(nullptr);
    int saved_out = -1;
    if (json) {  // stdout carries only the final object
        saved_out = dup(1);
        dup2(2, 1);
    }
    const int rc = cmd_run_rt(static_cast<int>(flags.size()), av.data(), &info);
    std::fflush(stdout);
    if (json) {
        dup2(saved_out, 1);
        close(saved_out);
    }
    std::vector<std::string> lines;
    read_lines(o.result_file, lines);
    std::remove(o.result_file.c_str());
    if (!info.resolved) {
        if (rep) std::fclose(rep), std::remove(report.c_str());
        return rc == 0 ? 2 : rc;
    }
    bool pass = rc == 0 && lines.size() == o.variants.size();
    for (const std::string& l : lines) pass = pass && l.find("\"result\":\"PASS\"") != std::string::npos;
    const std::string shape = shape_members_json(info) + ",\"exit_status\":" + std::to_string(rc);
    std::string j;
    if (lines.empty()) {
        j = "{\"app\":\"" + std::string(prog->name) + "\",\"variant\":\"" + variant +
            "\",\"result\":\"FAIL\",\"failure\":\"cluster 0 wrote no result: a cluster process failed (its error is on "
            "stderr)\"" + shape + "}";
    } else if (o.variants.size() == 1) {
        j = lines[0].substr(0, lines[0].size() - 1) + shape + "}";
        if (!pass && j.find("\"result\":\"PASS\"") != std::string::npos)
            j.replace(j.find("\"result\":\"PASS\""), 15, "\"result\":\"FAIL\"");
    } else {
        j = "{\"app\":\"" + std::string(prog->name) + "\",\"variant\":" + json_quote(variant) + ",\"result\":\"" + (pass ? "PASS" : "FAIL") +
            "\"" + shape + ",\"runs\":[";
        for (size_t k = 0; k < lines.size(); ++k) j += (k ? "," : "") + lines[k];
        j += "]}";
    }
    if (json) std::printf("%s\n", j.c_str());
    if (rep) {
        std::fprintf(rep, "%s\n", j.c_str());
        std::fclose(rep);
    }
    if (!json) std::printf("%s\n", pass ? "PASS" : "FAIL");
    std::fflush(stdout);
    return pass ? 0 : 1;
}

}  // namespace iccs
