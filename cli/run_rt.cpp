// run_rt.cpp: see run_rt.hpp.
#include "run_rt.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "group.hpp"
#include "runtime_launch.hpp"
#include "uring_udp.hpp"

namespace iccs {

namespace {

struct Counters {
    uint64_t msgs = 0, bytes = 0;
    bool ok = false;
};
// The ICCS_COUNTERS_FILE.c<id> files of every cluster, summed (and removed).
Counters read_counters(const std::string& base, uint16_t clusters) {
    Counters c;
    c.ok = true;
    for (uint16_t i = 0; i < clusters; ++i) {
        const std::string f = base + ".c" + std::to_string(i);
        unsigned long long m = 0, b = 0;
        FILE* in = std::fopen(f.c_str(), "r");
        if (in == nullptr || std::fscanf(in, "msgs %llu bytes %llu", &m, &b) != 2) c.ok = false;
        if (in) std::fclose(in);
        std::remove(f.c_str());
        c.msgs += m;
        c.bytes += b;
    }
    return c;
}

// "rtt_ns MEDIAN ..." from ping's result file; 0 when missing.
uint64_t read_rtt_median(const std::string& file) {
    unsigned long long med = 0;
    if (FILE* in = std::fopen(file.c_str(), "r")) {
        if (std::fscanf(in, "rtt_ns %llu", &med) != 1) med = 0;
        std::fclose(in);
    }
    std::remove(file.c_str());
    return med;
}

// --delay-us auto: D = the idle ICCS's one-way latency at the program's mean message size. A first
// run over direct gives the mean (every cluster's counters), an idle ping over iccs at that size
// gives the median round trip; D is half of it [ns], or 0 when a step failed (the reason printed).
uint64_t measure_delay_auto(const RtLaunch& base, const std::function<void(RtLaunch&)>& program_of,
                            const std::string& program, FILE* lout) {
    auto say = [lout](const char* fmt, auto... a) {
        if (lout != nullptr) std::fprintf(lout, fmt, a...);
    };
    // 1. the application's mean message size: a first run over direct, counters from every cluster
    // The preliminary runs below are not the run the caller reports on (iccs run <app> --json).
    std::string report_env;
    if (const char* r = std::getenv(kEnvReport)) report_env = r;
    unsetenv(kEnvReport);
    const std::string cfile = "/tmp/iccs-counters-" + std::to_string(getpid());
    setenv(kEnvCountersFile, cfile.c_str(), 1);
    RtLaunch first = base;
    first.spec.transport = RtTransport::kDirect;
    first.spec.quiet = true;
    program_of(first);
    say("delay auto, step 1: a first run of %s over direct, for the mean message size\n", program.c_str());
    std::fflush(nullptr);
    int rc = rt_launch(first);
    unsetenv(kEnvCountersFile);
    const Counters c = read_counters(cfile, base.spec.clusters);
    if (rc != 0 || !c.ok || c.msgs == 0) {
        std::fprintf(stderr, "iccs run: --delay-us auto: the first run over direct %s\n",
                     rc != 0 ? "failed" : "sent no messages (no mean size to measure the ICCS at)");
        return 0;
    }
    const uint32_t mean = static_cast<uint32_t>(std::min<uint64_t>((c.bytes + c.msgs / 2) / c.msgs, 1u << 20));
    // 2. the idle ICCS's one-way latency at that size: ping over iccs, half the median round trip
    RtLaunch ping = base;
    ping.spec.transport = RtTransport::kIccs;
    ping.spec.quiet = true;
    RtPingOptions pp;
    pp.size = mean;
    pp.rounds = 500;
    pp.warmup = 50;
    pp.result_file = "/tmp/iccs-rtt-" + std::to_string(getpid());
    ping.builtin = [pp](std::unique_ptr<Runtime> rt) { return rt_program_ping(std::move(rt), pp); };
    say("delay auto, step 2: idle ping over iccs at the mean size, %u bytes\n", mean);
    std::fflush(nullptr);
    rc = rt_launch(ping);
    const uint64_t med = read_rtt_median(pp.result_file);
    if (rc != 0 || med == 0) {
        std::fprintf(stderr, "iccs run: --delay-us auto: the idle ping over iccs failed\n");
        return 0;
    }
    if (!report_env.empty()) setenv(kEnvReport, report_env.c_str(), 1);
    say("delay: D = %.1f us per message, obtained automatically: the application's mean message size %u "
                "bytes (%llu messages, %llu bytes in a first run over direct), the idle ICCS's one-way latency at "
                "that size = median round trip %.1f us / 2 (500 request/reply round trips over iccs)\n",
                med / 2 / 1e3, mean, static_cast<unsigned long long>(c.msgs),
                static_cast<unsigned long long>(c.bytes), med / 1e3);
    return med / 2;
}

}  // namespace

RunSetup run_setup(const cli::Args& p, uint32_t default_timeout_s,
                   const std::vector<std::pair<std::string, std::string>>& defaults) {
    RunSetup s;
    s.config_path = p.config_path;
    s.overrides = defaults;
    s.overrides.insert(s.overrides.end(), p.overrides.begin(), p.overrides.end());
    s.transport = p.text("--transport");
    s.delay_us = p.text("--delay-us");
    s.timeout_given = p.has("--timeout");
    s.timeout_s = static_cast<uint32_t>(p.u64("--timeout", default_timeout_s));
    const ConfigResult cr = configure(s.config_path, s.overrides);
    if (!cr.ok()) {
        std::fprintf(stderr, "%s\n", cr.error.c_str());
        std::exit(2);
    }
    s.cfg = *cr.config;
    return s;
}

int run_rt(const RunSetup& s, const RtRequest& r, RtRunInfo* info) {
    const MachineConfig& cfg = s.cfg;
    const std::string& program = r.name;
    RtTransport transport = cfg.runtime.transport;
    if (!s.transport.empty()) parse_transport(s.transport, transport);  // checked by the option's choices
    const std::string transport_s = to_string(transport);
    uint64_t delay_ns = cfg.runtime.delay_us * 1000;
    const bool auto_delay = s.delay_us == "auto";
    if (!s.delay_us.empty() && transport != RtTransport::kDelay)
        cli::usage_error("run " + program, "--delay-us is for --transport delay (got --transport " + transport_s + ")");
    if (transport == RtTransport::kDelay && !auto_delay && !s.delay_us.empty())
        delay_ns = static_cast<uint64_t>(std::llround(std::strtod(s.delay_us.c_str(), nullptr) * 1000));
    if (cfg.machine.clusters < 2 && !r.one_cluster_ok) {
        std::fprintf(stderr, "iccs run: %s needs at least 2 clusters ([machine] clusters = %u)\n", program.c_str(),
                     cfg.machine.clusters);
        return 2;
    }
    const bool needs_iccs = transport == RtTransport::kIccs || auto_delay;
    if (needs_iccs && hand_run_to_iccs_cli != nullptr) hand_run_to_iccs_cli();  // (iccs-run: no proxies here)
    if (needs_iccs && cfg.cluster.polling == Polling::kInline) {
        std::fprintf(stderr, "iccs run: transport iccs: [cluster] polling = \"inline\" is not supported by the runtime "
                             "(no proxy thread would serve the service endpoint while compute threads compute): use "
                             "--polling adaptive or busy\n");
        return 2;
    }
    if (needs_iccs && cfg.machine.fabric == Fabric::kUdp) {
        UringCaps caps;
        std::string err;
        if (!uring_probe(caps, err)) {
            std::fprintf(stderr, "iccs: %s\n", err.c_str());
            return 2;
        }
    }
    group::Topology topo;
    if (r.topology) {
        std::string err;
        if (!r.topology(cfg, topo, err)) {
            std::fprintf(stderr, "iccs run: %s\n", err.c_str());
            return 2;
        }
    }
    RtLaunch base;
    base.spec.clusters = static_cast<uint16_t>(cfg.machine.clusters);
    base.spec.threads = static_cast<uint16_t>(cfg.cluster.compute_threads);
    {
        std::string err;
        if (!plan_from_config(cfg, 0, base.spec.plan, err)) {
            std::fprintf(stderr, "%s\n", err.c_str());
            return 2;
        }
    }
    base.config_path = s.config_path;
    base.overrides = s.overrides;
    base.timeout_s = s.timeout_s;
    const std::function<void(RtLaunch&)> program_of = [&](RtLaunch& l) {
        if (r.builtin) {
            l.builtin = [fn = r.builtin, topo](std::unique_ptr<Runtime> rt) { return fn(std::move(rt), topo); };
        } else {
            l.argv = {program};
            l.argv.insert(l.argv.end(), r.args.begin(), r.args.end());
        }
    };
    if (info != nullptr) {
        info->resolved = true;
        info->transport = transport_s;
        info->dispatch = std::string(to_string(cfg.cluster.dispatch));
        info->polling = std::string(to_string(cfg.cluster.polling));
        info->fabric = std::string(to_string(cfg.machine.fabric));
        info->clusters = base.spec.clusters;
        info->threads = base.spec.threads;
        info->proxies = transport == RtTransport::kIccs ? cfg.cluster.proxies_resolved : 0;
        info->proxies_auto = cfg.cluster.proxies == kProxiesAuto;
    }
    // The launcher's own lines: a built-in program's output is this report; a program given by path
    // owns standard output (as under mpirun), so ours go to standard error, and nowhere with
    // --report FILE (the report file holds them).
    FILE* lout = r.lines_on_stdout ? stdout : (info != nullptr && info->report_to_file) ? nullptr : stderr;
    auto say = [lout](const char* fmt, auto... a) {
        if (lout != nullptr) std::fprintf(lout, fmt, a...);
    };
    say("iccs run %s: %u clusters x %u compute threads, runtime transport %s", program.c_str(),
                base.spec.clusters, base.spec.threads, transport_s.c_str());
    if (transport == RtTransport::kIccs)
        say(" (%u proxies per cluster, fabric %s, polling %s)", cfg.cluster.proxies_resolved,
                    std::string(to_string(cfg.machine.fabric)).c_str(), std::string(to_string(cfg.cluster.polling)).c_str());
    else
        say(" (shared memory between the cluster processes: no proxy, no stack)");
    say("%s", "\n");
    if (r.announce) say("%s\n", r.announce(topo).c_str());
    std::fflush(nullptr);
    if (auto_delay) {
        delay_ns = measure_delay_auto(base, program_of, program, lout);
        if (delay_ns == 0) return 1;
    } else if (transport == RtTransport::kDelay) {
        say("delay: D = %.1f us per message (given by %s)\n", delay_ns / 1e3,
                    s.delay_us.empty() ? "[runtime] delay_us" : "--delay-us");
    }
    std::fflush(nullptr);
    RtLaunch run = base;
    run.spec.transport = transport;
    run.spec.delay_ns = delay_ns;
    program_of(run);
    if (info != nullptr && transport == RtTransport::kDelay) info->delay_us = double(delay_ns) / 1e3;
    const int rc = rt_launch(run);
    if (!r.pass_line.empty()) say("%s\n", rc != 0 ? "FAIL" : r.pass_line.c_str());
    return rc;
}

}  // namespace iccs
