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

#include "config.hpp"
#include "group.hpp"
#include "run_app.hpp"
#include "run_rt.hpp"
#include "run_table.hpp"
#include "widearea.hpp"

namespace iccs {

namespace {

// "original, optimized, exact-halo": a program's variants.
std::string variant_names(const widearea::Program& p, const char* sep = ", ") {
    std::string r;
    for (const widearea::VariantInfo& v : p.variants) r += std::string(r.empty() ? "" : sep) + widearea::to_string(v.id);
    return r;
}

// --variant's value for program p: a name, a list, both or all; exits 2 naming what is wrong.
std::vector<widearea::Variant> parse_variants(const widearea::Program& p, const std::string& v) {
    auto usage_error = [&p](const std::string& msg) { cli::usage_error(std::string("run ") + p.name, msg); };
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

void print_widearea_list() {
    for (const widearea::Program& p : widearea::programs())
        std::printf("%s\t%s\t%s\n", p.name, p.help, variant_names(p, ",").c_str());
}

int launch_widearea(const ProgramRow& row, const std::string&, const cli::Args& p) {
    const widearea::Program* prog = widearea::find_program(row.name);
    const std::string who = "run " + row.name;
    widearea::Options o;
    const bool json = p.flag("--json");
    const std::string report = p.text("--report"), variant = p.text("--variant", "original");
    o.inject_error = p.flag("--inject-error");
    o.variants = parse_variants(*prog, variant);
    if (p.has("--grid-opts")) {
        if (std::find(o.variants.begin(), o.variants.end(), widearea::Variant::kGrid) == o.variants.end())
            cli::usage_error(who, "--grid-opts applies to --variant grid only");
        std::string err;
        if (!widearea::parse_grid_opts(p.text("--grid-opts"), o.grid_opts, err))
            cli::usage_error(who, "bad value '" + p.text("--grid-opts") + "' for --grid-opts: " + err);
    }
    if (p.text("--sor-rule", "orca") == "tight") o.sor_rule = widearea::SorRule::kTight;  // sor's only (run_table)
    o.size = p.text("--size", "test") == "paper" ? widearea::Size::kPaper : widearea::Size::kTest;
    o.timeout_ms = p.u64("--wait-timeout-ms", o.timeout_ms);
    o.seed = p.u64("--seed", o.seed);
    const RunSetup setup = run_setup(p, 300);
    FILE* rep = nullptr;
    if (!report.empty() && (rep = std::fopen(report.c_str(), "w")) == nullptr)
        cli::usage_error(who, "--report " + report + ": " + std::strerror(errno));
    o.result_file = "/tmp/iccs-widearea-" + std::to_string(getpid()) + ".json";
    std::remove(o.result_file.c_str());

    RtRunInfo info;
    info.app = true;
    RtRequest r;
    r.name = row.name;
    r.builtin = [prog, o](std::unique_ptr<Runtime> rt, const group::Topology& topo) {
        return widearea::run_cluster(std::move(rt), topo, *prog, o);
    };
    r.topology = group::topology_from_config;
    r.one_cluster_ok = true;
    std::fflush(nullptr);
    int saved_out = -1;
    if (json) {  // stdout carries only the final object
        saved_out = dup(1);
        dup2(2, 1);
    }
    const int rc = run_rt(setup, r, &info);
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
