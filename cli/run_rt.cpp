// run_rt.cpp: `iccs run exchange|ping|PATH`: programs on the cluster runtime (compute/runtime.hpp),
// over --transport iccs|direct|delay.
#include "run_rt.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "args.hpp"
#include "config.hpp"
#include "group_programs.hpp"
#include "satin.hpp"
#include "runtime_launch.hpp"
#include "uring_udp.hpp"

namespace iccs {

namespace {

[[noreturn]] void usage_error(const std::string& msg) { cli::usage_error("run", msg); }
uint64_t parse_u64(const std::string& flag, const std::string& v, uint64_t lo, uint64_t hi) {
    return cli::parse_u64("run", flag, v.c_str(), lo, hi);
}

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

// `iccs run <satin program>`: the verdict from cluster 0's result file, as text or one JSON object.
int satin_report(const satin::RunOptions& so, int rc, bool json, const std::string& transport, uint16_t clusters,
                 uint16_t threads, const group::Topology& topo, const MachineConfig& cfg) {
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
        std::string s = "{\"app\": \"" + so.app + "\", \"policy\": \"" + group::to_string(so.policy) +
                        "\", \"size\": \"" + (so.paper ? "paper" : "test") + "\", \"clusters\": " +
                        std::to_string(clusters) + ", \"threads\": " + std::to_string(threads) +
                        ", \"processes\": " + std::to_string(clusters * threads) + ", \"sites\": " +
                        std::to_string(topo.sites) + ", \"transport\": \"" + transport +
                        "\", \"wan_latency_ms\": " + std::to_string(cfg.wan.latency_ms) +
                        ", \"wan_bandwidth_bytes_per_s\": " + std::to_string(cfg.wan.bandwidth_bytes_per_s) +
                        ", \"wan_script\": \"" + cfg.wan.script + "\", \"wan_series\": \"" + cfg.wan.series +
                        "\", \"exit_status\": " + std::to_string(rc) + ", \"inject_error\": " +
                        (so.inject_error ? "true" : "false");
        for (const auto& [k, v] : kv)
            if (k != "result") s += ", \"" + k + "\": " + v;
        s += ", \"result\": \"" + verdict + "\"}";
        std::printf("%s\n", s.c_str());
    } else {
        std::printf("%s\n", verdict == "PASS" ? "PASS: the parallel result equals the sequential one" : "FAIL");
    }
    return rc != 0 ? rc : verdict == "PASS" ? 0 : 1;
}

}  // namespace

bool is_rt_program(const char* name) {
    if (std::strcmp(name, "exchange") == 0 || std::strcmp(name, "ping") == 0 || std::strcmp(name, "collectives") == 0 ||
        std::strcmp(name, "ordered") == 0 || satin::is_program(name))
        return true;
    return std::strchr(name, '/') != nullptr;  // a path: ./prog, build/x/y, /abs/prog
}

int cmd_run_rt(int argc, char** argv, RtRunInfo* info) {
    const std::string program = argv[0];
    const bool external = info != nullptr && info->builtin;  // a program of the caller's (wide-area)
    const bool is_satin = satin::is_program(program);
    const bool builtin = external || program == "exchange" || program == "ping" || program == "collectives" ||
                         program == "ordered" || is_satin;
    if (!builtin) {
        struct stat st {};
        if (stat(program.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || access(program.c_str(), X_OK) != 0)
            usage_error("program '" + program + "' is not an executable file (built-in programs: alltoall, errors, "
                        "pingpong, exchange, ping, collectives, ordered, integrate, nqueens, raytrace, satin-tsp)");
    }
    std::string config_path, transport_s, delay_s;  // "": [runtime] transport / delay_us
    std::vector<std::pair<std::string, std::string>> overrides;
    RtExchangeOptions ex;
    RtPingOptions po;
    group::CollectivesRunOptions co;
    bool segment_given = false;  // else [group] segment_bytes
    group::OrderedRunOptions oo;
    satin::RunOptions so;
    so.app = program;
    bool json = false;
    uint32_t timeout_s = 300;

    std::vector<std::string> args;
    bool messages_set = false, timeout_set = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--") {
            if (builtin) usage_error("'--' passes arguments to a program given by path; " + program + " is built in");
            for (++i; i < argc; ++i) args.emplace_back(argv[i]);
            break;
        }
        if (is_satin && (a == "--help" || a == "-h")) {
            std::printf("usage: iccs run %s --policy rs|chs|crs [--size test|paper] [--json] [--inject-error]%s\n"
                        "       [--seed N] [--timeout S] [--clusters C] [--threads|--cluster-size T] [--transport iccs|direct|delay]\n"
                        "       [--sites LIST] [--wan-latency-ms X] [--wan-bandwidth BPS] [--wan-script FILE]\n"
                        "       [--wan-series FILE] [--set SECTION.KEY=V] [run options: iccs run --help]\n"
                        "Satin's divide-and-conquer program on group/'s work stealing, checked byte for byte against\n"
                        "the sequential computation in the same run (PASS/FAIL, exit 0/1); apps/satin/README.md.\n"
                        "WAN scenarios 1-9 of the Satin study on 4 clusters: --wan-script perf/wan_scenarios/sN.wan\n"
                        "(N = 1..8), --wan-series perf/wan_scenarios/s9.series.\n",
                        program.c_str(), program == "raytrace" ? " [--image FILE]" : "");
            return 0;
        }
        if (is_satin && (a == "--json" || a == "--inject-error")) {
            (a == "--json" ? json : so.inject_error) = true;
            continue;
        }
        if (a == "--inject-error" && (program == "exchange" || program == "collectives" || program == "ordered")) {
            ex.inject_error = co.inject_error = oo.inject_error = true;  // the test hook: the run must FAIL
            continue;
        }
        if (i + 1 >= argc) usage_error(a + " needs a value (see iccs run --help)");
        const std::string v = argv[++i];
        // --cluster-size is --threads' other name (as for iccs run APP and the wide-area programs).
        if (a == "--cluster-size") {
            overrides.emplace_back("cluster.compute_threads", v);
            continue;
        }
        bool mapped = false;
        for (const auto& [flag, key] : cli::kRunConfigFlags)
            if (a == flag) {
                overrides.emplace_back(key, v);
                mapped = true;
            }
        if (mapped) continue;
        if (a == "--config") config_path = v;
        else if (a == "--set") {
            const auto eq = v.find('=');
            if (eq == std::string::npos) usage_error("--set takes SECTION.KEY=VALUE, got '" + v + "'");
            overrides.emplace_back(v.substr(0, eq), v.substr(eq + 1));
        } else if (a == "--transport") transport_s = v;
        else if (a == "--delay-us") delay_s = v;
        else if (a == "--messages") {
            ex.messages = parse_u64(a, v, 1, 100'000'000);
            oo.messages = static_cast<uint32_t>(std::min<uint64_t>(ex.messages, 1'000'000));
            po.rounds = ex.messages;
            messages_set = true;
        } else if (a == "--min-size") ex.min_size = static_cast<uint32_t>(parse_u64(a, v, 0, 1u << 20));
        else if (a == "--max-size") ex.max_size = static_cast<uint32_t>(parse_u64(a, v, 0, (1u << 20) - 8));
        else if (a == "--size" && is_satin) {
            if (v != "test" && v != "paper") usage_error("bad value '" + v + "' for --size: allowed values are test, paper");
            so.paper = v == "paper";
        } else if (a == "--policy" && is_satin) {
            if (!group::parse_steal_policy(v, so.policy))
                usage_error("bad value '" + v + "' for --policy: allowed values are rs, chs, crs");
        } else if (a == "--image" && program == "raytrace") {
            so.image_file = v;
        } else if (a == "--size") {
            po.size = static_cast<uint32_t>(parse_u64(a, v, 0, 1u << 20));
            oo.size = std::max<uint32_t>(8, std::min<uint32_t>(po.size, (1u << 20) - 64));

        } else if (a == "--family" && program == "collectives") {
            co.families.clear();
            group::Family f;
            if (v == "both") co.families = {group::Family::kHier, group::Family::kFlat};
            else if (group::parse_family(v, f)) co.families = {f};
            else usage_error("bad value '" + v + "' for --family: allowed values are hier, flat, both");
        } else if (a == "--elements" && program == "collectives") {
            co.elements.clear();
            size_t pos = 0;
            while (pos <= v.size()) {
                const size_t comma = std::min(v.find(',', pos), v.size());
                co.elements.push_back(static_cast<uint32_t>(parse_u64(a, v.substr(pos, comma - pos), 0, 1u << 17)));
                pos = comma + 1;
            }
        } else if (a == "--rounds" && program == "collectives") {
            co.rounds = static_cast<uint32_t>(parse_u64(a, v, 1, 1000));
        } else if (a == "--segment-bytes" && program == "collectives") {
            co.segment_bytes = static_cast<uint32_t>(parse_u64(a, v, 64, 1u << 20));
            segment_given = true;
        } else if (a == "--bad" && program == "collectives") {
            if (v != "root" && v != "size" && v != "missing")
                usage_error("bad value '" + v + "' for --bad: allowed values are root, size, missing");
            co.bad = v;
        } else if (a == "--call-timeout-ms" && program == "collectives") {
            co.timeout_ms = parse_u64(a, v, 100, 3'600'000);
        } else if (a == "--sequencer" && program == "ordered") {
            group::Sequencer sq;
            if (v == "all") oo.policies = {group::Sequencer::kCentral, group::Sequencer::kRotating, group::Sequencer::kMigrating};
            else if (group::parse_sequencer(v, sq)) oo.policies = {sq};
            else usage_error("bad value '" + v + "' for --sequencer: allowed values are central, rotating, migrating, all");
        } else if (a == "--writes" && program == "ordered") {
            oo.writes = static_cast<uint32_t>(parse_u64(a, v, 0, 1'000'000));
        } else if (a == "--latency-rounds" && program == "ordered") {
            oo.latency_rounds = static_cast<uint32_t>(parse_u64(a, v, 0, 1'000'000));
        } else if (a == "--barriers") ex.barriers = static_cast<uint32_t>(parse_u64(a, v, 0, 1'000'000));
        else if (a == "--warmup") po.warmup = parse_u64(a, v, 0, 1'000'000);
        else if (a == "--timeout") {
            timeout_s = static_cast<uint32_t>(parse_u64(a, v, 1, 86400));
            timeout_set = true;
        }
        else usage_error("unknown option '" + a + "' (see iccs run --help)");
    }
    if (!messages_set) po.rounds = 1000;
    // An application (PATH) runs as long as it needs: only a given --timeout stops it (24 h at most).
    if (!builtin && !timeout_set) timeout_s = 86400;
    if (ex.min_size > ex.max_size)
        usage_error("--min-size " + std::to_string(ex.min_size) + " exceeds --max-size " + std::to_string(ex.max_size));
    RtTransport transport = RtTransport::kIccs;
    if (!transport_s.empty() && !parse_transport(transport_s, transport))
        usage_error("bad value '" + transport_s + "' for --transport: allowed values are iccs, direct, delay");
    const ConfigResult cr = configure(config_path, overrides);
    if (!cr.ok()) {
        std::fprintf(stderr, "%s\n", cr.error.c_str());
        return 2;
    }
    const MachineConfig& cfg = *cr.config;
    if (transport_s.empty()) {
        transport = cfg.runtime.transport;
        transport_s = to_string(transport);
    }
    uint64_t delay_ns = cfg.runtime.delay_us * 1000;
    const bool auto_delay = delay_s == "auto";
    if (!delay_s.empty() && transport != RtTransport::kDelay)
        usage_error("--delay-us is for --transport delay (got --transport " + transport_s + ")");
    if (transport == RtTransport::kDelay) {
        if (!auto_delay && !delay_s.empty()) {
            char* end = nullptr;
            const double us = std::strtod(delay_s.c_str(), &end);
            if (end == delay_s.c_str() || *end != '\0' || !(us >= 0) || us > 60e6)
                usage_error("bad value '" + delay_s + "' for --delay-us: microseconds from 0 to 60000000, or auto");
            delay_ns = static_cast<uint64_t>(std::llround(us * 1000));
        }
    }
    if (cfg.machine.clusters < 2 && builtin && !external && !is_satin) {
        std::fprintf(stderr, "iccs run: %s needs at least 2 clusters ([machine] clusters = %u)\n", program.c_str(),
                     cfg.machine.clusters);
        return 2;
    }
    const bool needs_iccs = transport == RtTransport::kIccs || auto_delay;
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
    if (program == "collectives" || program == "ordered" || external || is_satin) {
        std::string err;
        if (!group::topology_from_config(cfg, topo, err)) {
            std::fprintf(stderr, "iccs run: %s\n", err.c_str());
            return 2;
        }
        if (!segment_given) co.segment_bytes = group::options_from_config(cfg).segment_bytes;
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
    base.config_path = config_path;
    base.overrides = overrides;
    base.timeout_s = timeout_s;
    auto program_of = [&](RtLaunch& l) {
        if (external)
            l.builtin = [fn = info->builtin, topo](std::unique_ptr<Runtime> rt) { return fn(std::move(rt), topo); };
        else if (program == "exchange") l.builtin = [ex](std::unique_ptr<Runtime> rt) { return rt_program_exchange(std::move(rt), ex); };
        else if (program == "ping") l.builtin = [po](std::unique_ptr<Runtime> rt) { return rt_program_ping(std::move(rt), po); };
        else if (program == "ordered")
            l.builtin = [oo, topo](std::unique_ptr<Runtime> rt) { return group::program_ordered(std::move(rt), topo, oo); };
        else if (program == "collectives")
            l.builtin = [co, topo](std::unique_ptr<Runtime> rt) { return group::program_collectives(std::move(rt), topo, co); };
        else if (is_satin)
            l.builtin = [so, topo](std::unique_ptr<Runtime> rt) { return satin::program(std::move(rt), topo, so); };
        else {
            l.argv = {program};
            l.argv.insert(l.argv.end(), args.begin(), args.end());
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
    FILE* lout = builtin && !json ? stdout : (info != nullptr && info->report_to_file) ? nullptr : stderr;
    if (is_satin) {
        so.seed = cfg.test.seed;
        so.timeout_ms = uint64_t{timeout_s} * 1000;
        so.quiet = json;
        so.result_file = "/tmp/iccs-satin-" + std::to_string(getpid());
    }
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
    if (program == "collectives")
        say("collectives: topology %s; every collective of each family against its sequential reference\n",
            topo.describe().c_str());
    if (program == "exchange")
        say("exchange: %llu messages of %u..%u bytes from every compute thread to every compute thread of every "
                    "other cluster, 20 requests per thread, %u barrier + barrier_gather rounds\n",
                    static_cast<unsigned long long>(ex.messages), ex.min_size, ex.max_size, ex.barriers);
    std::fflush(nullptr);
    if (auto_delay) {
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
            return 1;
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
            return 1;
        }
        delay_ns = med / 2;
        if (!report_env.empty()) setenv(kEnvReport, report_env.c_str(), 1);
        say("delay: D = %.1f us per message, obtained automatically: the application's mean message size %u "
                    "bytes (%llu messages, %llu bytes in a first run over direct), the idle ICCS's one-way latency at "
                    "that size = median round trip %.1f us / 2 (500 request/reply round trips over iccs)\n",
                    delay_ns / 1e3, mean, static_cast<unsigned long long>(c.msgs),
                    static_cast<unsigned long long>(c.bytes), med / 1e3);
    } else if (transport == RtTransport::kDelay) {
        say("delay: D = %.1f us per message (given by %s)\n", delay_ns / 1e3,
                    delay_s.empty() ? "[runtime] delay_us" : "--delay-us");
    }
    std::fflush(nullptr);
    RtLaunch run = base;
    run.spec.transport = transport;
    run.spec.delay_ns = delay_ns;
    program_of(run);
    if (info != nullptr && transport == RtTransport::kDelay) info->delay_us = double(delay_ns) / 1e3;
    const int rc = rt_launch(run);
    if (info != nullptr && info->app) return rc;
    if (is_satin) return satin_report(so, rc, json, transport_s, base.spec.clusters, base.spec.threads, topo, cfg);
    say("%s\n", rc != 0 ? "FAIL"
                        : program == "exchange"
                            ? "PASS: every message arrived exactly once, intact and in order per source; every reply "
                              "and barrier round was right"
                        : program == "ping" ? "PASS: every round trip completed"
                        : program == "ordered"
                            ? "PASS: every thread delivered the same sequence under every sequencer policy; the "
                              "replicated objects ended identical"
                        : program == "collectives"
                            ? "PASS: every collective equals its sequential reference on every thread; MagPIe's rule "
                              "holds for the hierarchical family"
                                            : "PASS: every cluster process exited with status 0");
    return rc;
}

}  // namespace iccs
