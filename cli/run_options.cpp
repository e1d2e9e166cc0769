// run_options.cpp: see run_options.hpp.
#include "run_options.hpp"

#include <string>
#include <vector>

namespace iccs {

using cli::config_opt;
using cli::Option;
using cli::OptionGroup;
using cli::text_opt;
using cli::uint_opt;

const OptionGroup& config_options() {
    static const OptionGroup g = [] {
        OptionGroup o;
        o.title = "configuration";
        o.options.push_back(text_opt("--config", "FILE", "machine configuration (TOML; every key in iccs.example.toml)"));
        Option set = text_opt("--set", "SECTION.KEY=V", "any key of the configuration (may be given more than once)");
        set.repeats = true;
        o.options.push_back(set);
        return o;
    }();
    return g;
}

const OptionGroup& machine_options() {
    static const OptionGroup g = [] {
        OptionGroup o;
        o.title = "machine options (each sets one configuration key, over the file)";
        o.options = {
            config_opt("--clusters", "C", "machine.clusters"),
            config_opt("--threads", "S", "cluster.compute_threads"),
            config_opt("--cluster-size", "S", "cluster.compute_threads"),
            config_opt("--proxies", "P|auto", "cluster.proxies"),
            config_opt("--polling", "MODE", "cluster.polling"),
            config_opt("--dispatch", "POLICY", "cluster.dispatch"),
            config_opt("--order", "ORDER", "convergence.order"),
            config_opt("--stripe-threshold", "N", "convergence.stripe_threshold_bytes"),
            config_opt("--fabric", "NAME", "machine.fabric"),
            config_opt("--mtu", "N", "machine.mtu_bytes"),
            config_opt("--drop", "P", "test.drop"),
            config_opt("--duplicate", "P", "test.duplicate"),
            config_opt("--reorder", "N", "test.reorder_window"),
            config_opt("--seed", "N", "test.seed"),
            config_opt("--pcap", "DIR", "machine.pcap_dir",
                       "every proxy writes the frames its ports send and receive to DIR/cluster<C>-proxy<P>.pcapng "
                       "(DPDK fabrics only; at most [machine] pcap_max_bytes per file)"),
            config_opt("--sites", "LIST", "wan.sites"),
            config_opt("--wan-latency-ms", "X", "wan.latency_ms"),
            config_opt("--wan-bandwidth", "BPS", "wan.bandwidth_bytes_per_s"),
            config_opt("--wan-loss", "P", "wan.loss"),
            config_opt("--wan-script", "FILE", "wan.script"),
            config_opt("--wan-series", "FILE", "wan.series"),
        };
        o.options[2].same_as = "--threads";
        return o;
    }();
    return g;
}

const OptionGroup& runtime_options() {
    static const OptionGroup g = [] {
        OptionGroup o;
        o.title = "runtime options";
        o.options.push_back(cli::choice_opt("--transport", {"iccs", "direct", "delay"},
                                            "[runtime] transport: iccs (the convergence library and the proxies), "
                                            "direct (\"no delay\": shared memory between the cluster processes, no "
                                            "proxy, no stack), or delay (\"no contention\": as direct, every "
                                            "message held --delay-us first)",
                                            "[runtime] transport, iccs"));
        Option d = cli::real_opt("--delay-us", "N|auto", 0, 60e6,
                                 "[runtime] delay_us, the hold time of --transport delay [us]; auto = the idle ICCS's "
                                 "one-way latency at the program's mean message size (a first run over direct gives "
                                 "the mean, an idle ping over iccs at that size gives median RTT / 2)");
        d.also = "auto";
        o.options.push_back(d);
        return o;
    }();
    return g;
}

Option timeout_option(uint32_t default_s) {
    return uint_opt("--timeout", "S", 1, 86400, "stop the run after S seconds", std::to_string(default_s));
}

const ConvergenceOptions& convergence_options() {
    static const ConvergenceOptions o{
        uint_opt("--messages", "N", 1, 100'000'000, "messages per pair of compute threads", "1000"),
        uint_opt("--min-size", "N", 0, 16u << 20, "smallest message payload [bytes]", "1"),
        uint_opt("--max-size", "N", 0, 16u << 20, "largest message payload [bytes]", "9000"),
        uint_opt("--gap-us", "N", 0, 10'000'000,
                 "pingpong: the pinger pauses N us before each round, outside the timing; alltoall: "
                 "every compute thread pauses N us once its connections are open, then sends",
                 "0")};
    return o;
}

const std::vector<Option>& alltoall_options() {
    static const std::vector<Option> o = [] {
        const ConvergenceOptions& c = convergence_options();
        return std::vector<Option>{
            c.messages, c.min_size, c.max_size, c.gap,
            cli::flag("--inject-error", "test hook: thread 0.0's message 1 to thread 1.0 leaves with a byte wrong; "
                                        "its receiver counts it corrupt and the run FAILs (exit 1)"),
            timeout_option(300)};
    }();
    return o;
}

}  // namespace iccs
