// run_builtin.cpp: the launch functions of the built-in programs on the cluster runtime (rows of
// run_table.cpp): the runtime's exchange and ping, group/'s collectives and ordered, Satin's four.
// Each turns its parsed options into the program's options and hands the run to run_rt().
#include <unistd.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "group.hpp"
#include "group_programs.hpp"
#include "run_rt.hpp"
#include "run_table.hpp"
#include "runtime_launch.hpp"
#include "satin.hpp"

namespace iccs {

namespace {

// The request every built-in program makes: forked cluster processes, lines on stdout.
RtRequest builtin_request(const ProgramRow& row, std::function<int(std::unique_ptr<Runtime>, const group::Topology&)> fn) {
    RtRequest r;
    r.name = row.name;
    r.builtin = std::move(fn);
    r.pass_line = row.pass_line;
    return r;
}

// `iccs run <satin program>`: the verdict from cluster 0's result file, as text or one JSON object.
int satin_report(const satin::RunOptions& so, int rc, bool json, const RtRunInfo& info, const group::Topology& topo,
                 const MachineConfig& cfg) {
    std::vector<std::pair<std::string, std::string>> kv;
    if (FILE* in = std::fopen(so.result_file.c_str(), "r")) {
        char k[64], v[64];
        while (std::fscanf(in, "%63s %63s", k, v) == 2) kv.emplace_back(k, v);
        std::fclose(in);
    }
    std::remove(so.result_file.c_str());
    std::string verdict = "FAIL";
    for (const auto& [k, v] : kv)
        if (k == "result") verdict = rc == 0 ? v : "FAIL";
    if (json) {
        std::string s = "{\"app\": " + json_quote(so.app) + ", \"policy\": \"" + group::to_string(so.policy) +
                        "\", \"size\": \"" + (so.paper ? "paper" : "test") + "\", \"clusters\": " +
                        std::to_string(info.clusters) + ", \"threads\": " + std::to_string(info.threads) +
                        ", \"processes\": " + std::to_string(info.clusters * info.threads) + ", \"sites\": " +
                        std::to_string(topo.sites) + ", \"transport\": " + json_quote(info.transport) +
                        ", \"wan_latency_ms\": " + std::to_string(cfg.wan.latency_ms) +
                        ", \"wan_bandwidth_bytes_per_s\": " + std::to_string(cfg.wan.bandwidth_bytes_per_s) +
                        ", \"wan_script\": " + json_quote(cfg.wan.script) + ", \"wan_series\": " +
                        json_quote(cfg.wan.series) + ", \"exit_status\": " + std::to_string(rc) +
                        ", \"inject_error\": " + (so.inject_error ? "true" : "false");
        for (const auto& [k, v] : kv)
            if (k != "result") s += ", " + json_quote(k) + ": " + v;
        s += ", \"result\": \"" + verdict + "\"}";
        std::printf("%s\n", s.c_str());
    } else {
        std::printf("%s\n", verdict == "PASS" ? "PASS: the parallel result equals the sequential one" : "FAIL");
    }
    return rc != 0 ? rc : verdict == "PASS" ? 0 : 1;
}

}  // namespace

int launch_exchange(const ProgramRow& row, const std::string&, const cli::Args& p) {
    RtExchangeOptions ex;
    ex.messages = p.u64("--messages", ex.messages);
    ex.min_size = static_cast<uint32_t>(p.u64("--min-size", ex.min_size));
    ex.max_size = static_cast<uint32_t>(p.u64("--max-size", ex.max_size));
    ex.barriers = static_cast<uint32_t>(p.u64("--barriers", ex.barriers));
    ex.inject_error = p.flag("--inject-error");
    if (ex.min_size > ex.max_size)
        cli::usage_error("run " + row.name, "--min-size " + std::to_string(ex.min_size) + " exceeds --max-size " +
                                                std::to_string(ex.max_size));
    const RunSetup s = run_setup(p, 300);
    RtRequest r = builtin_request(row, [ex](std::unique_ptr<Runtime> rt, const group::Topology&) {
        return rt_program_exchange(std::move(rt), ex);
    });
    r.announce = [ex](const group::Topology&) {
        return "exchange: " + std::to_string(ex.messages) + " messages of " + std::to_string(ex.min_size) + ".." +
               std::to_string(ex.max_size) +
               " bytes from every compute thread to every compute thread of every other cluster, 20 requests per "
               "thread, " + std::to_string(ex.barriers) + " barrier + barrier_gather rounds";
    };
    return run_rt(s, r);
}

int launch_ping(const ProgramRow& row, const std::string&, const cli::Args& p) {
    RtPingOptions po;
    po.rounds = p.u64("--messages", 1000);
    po.size = static_cast<uint32_t>(p.u64("--size", po.size));
    po.warmup = p.u64("--warmup", po.warmup);
    const RunSetup s = run_setup(p, 300);
    return run_rt(s, builtin_request(row, [po](std::unique_ptr<Runtime> rt, const group::Topology&) {
                      return rt_program_ping(std::move(rt), po);
                  }));
}

int launch_collectives(const ProgramRow& row, const std::string&, const cli::Args& p) {
    group::CollectivesRunOptions co;
    if (p.has("--family")) {
        const std::string v = p.text("--family");
        group::Family f;
        if (v == "both") co.families = {group::Family::kHier, group::Family::kFlat};
        else if (group::parse_family(v, f)) co.families = {f};
    }
    if (p.has("--elements")) {
        co.elements.clear();
        for (const uint64_t n : p.u64_list("--elements")) co.elements.push_back(static_cast<uint32_t>(n));
    }
    co.rounds = static_cast<uint32_t>(p.u64("--rounds", co.rounds));
    co.bad = p.text("--bad");
    co.inject_error = p.flag("--inject-error");
    co.timeout_ms = p.u64("--call-timeout-ms", co.timeout_ms);
    const RunSetup s = run_setup(p, 300);
    co.segment_bytes = static_cast<uint32_t>(p.u64("--segment-bytes", group::options_from_config(s.cfg).segment_bytes));
    RtRequest r = builtin_request(row, [co](std::unique_ptr<Runtime> rt, const group::Topology& topo) {
        return group::program_collectives(std::move(rt), topo, co);
    });
    r.topology = group::topology_from_config;
    r.announce = [](const group::Topology& topo) {
        return "collectives: topology " + topo.describe() +
               "; every collective of each family against its sequential reference";
    };
    return run_rt(s, r);
}

int launch_ordered(const ProgramRow& row, const std::string&, const cli::Args& p) {
    group::OrderedRunOptions oo;
    oo.messages = static_cast<uint32_t>(p.u64("--messages", oo.messages));
    oo.size = static_cast<uint32_t>(p.u64("--size", oo.size));
    oo.writes = static_cast<uint32_t>(p.u64("--writes", oo.writes));
    oo.latency_rounds = static_cast<uint32_t>(p.u64("--latency-rounds", oo.latency_rounds));
    oo.inject_error = p.flag("--inject-error");
    if (p.has("--sequencer")) {
        const std::string v = p.text("--sequencer");
        group::Sequencer sq;
        if (v == "all") oo.policies = {group::Sequencer::kCentral, group::Sequencer::kRotating, group::Sequencer::kMigrating};
        else if (group::parse_sequencer(v, sq)) oo.policies = {sq};
    }
    const RunSetup s = run_setup(p, 300);
    RtRequest r = builtin_request(row, [oo](std::unique_ptr<Runtime> rt, const group::Topology& topo) {
        return group::program_ordered(std::move(rt), topo, oo);
    });
    r.topology = group::topology_from_config;
    return run_rt(s, r);
}

int launch_satin(const ProgramRow& row, const std::string&, const cli::Args& p) {
    satin::RunOptions so;
    so.app = row.name;
    if (p.has("--policy")) group::parse_steal_policy(p.text("--policy"), so.policy);
    so.paper = p.text("--size", "test") == "paper";
    so.inject_error = p.flag("--inject-error");
    so.image_file = p.text("--image");
    const bool json = p.flag("--json");
    const RunSetup s = run_setup(p, 300);
    so.seed = s.cfg.test.seed;
    so.timeout_ms = uint64_t{s.timeout_s} * 1000;
    so.quiet = json;
    so.result_file = "/tmp/iccs-satin-" + std::to_string(getpid());
    RtRequest r = builtin_request(row, [so](std::unique_ptr<Runtime> rt, const group::Topology& topo) {
        return satin::program(std::move(rt), topo, so);
    });
    r.topology = group::topology_from_config;
    r.one_cluster_ok = true;
    r.lines_on_stdout = !json;
    r.pass_line.clear();  // satin_report prints the verdict
    RtRunInfo info;
    const int rc = run_rt(s, r, &info);
    if (!info.resolved) return rc;
    group::Topology topo;
    std::string err;
    group::topology_from_config(s.cfg, topo, err);  // run_rt checked it
    return satin_report(so, rc, json, info, topo, s.cfg);
}

}  // namespace iccs
