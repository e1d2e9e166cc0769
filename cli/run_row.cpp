// run_row.cpp: what `iccs run` needs of its table for one row, apart from the table: a row's
// option set and usage, the PATH row, and running a row's command line. iccs-run (run_path_main.cpp)
// links this and the core alone, so the launcher of `iccs run PATH` loads no DPDK (cli/README.md).
#include <string>
#include <vector>

#include "run_table.hpp"

namespace iccs {

using cli::text_opt;

cli::OptionSet ProgramRow::option_set(const std::string& who) const {
    cli::OptionSet s;
    s.who = who;
    s.groups = groups;
    s.own = &options;
    s.takes_rest = takes_rest;
    if (level == "convergence")
        for (const cli::Option& o : runtime_options().options)
            s.hints[o.name] = "is for programs on the cluster runtime (exchange, ping, ... or a PATH); " + name +
                              " is a convergence-level program that always runs over the proxies";
    return s;
}

std::string ProgramRow::usage() const {
    const std::string shown = name == "--mpi" ? "--mpi PATH" : name;
    std::string u = "usage: iccs run " + shown + " [options]" + (takes_rest ? " [-- ARGS]" : "") + "\n" + help;
    if (!help.empty() && help.back() != '\n') u += "\n";
    u += cli::option_help(option_set("run " + name));
    if (!pass_line.empty()) u += "A run that passes ends with: " + pass_line + "\n";
    u += "Exit status: 0 PASS, 1 FAIL, 2 a usage error (naming the flag).\n";
    return u;
}

ProgramRow path_row() {
    const std::vector<const cli::OptionGroup*> runtime = {&runtime_options(), &machine_options(), &config_options()};
    return ProgramRow{
        "PATH", "path", "any program linked with the runtime, or a PARMACS program, run as mpirun would",
        "  One process per cluster, exec'd with ICCS_CLUSTER, ICCS_CLUSTERS, ICCS_CONFIG, ICCS_OVERRIDES,\n"
        "  ICCS_RUN_ID, ICCS_TRANSPORT, ICCS_DELAY_NS; it calls runtime_from_env() and ends with\n"
        "  runtime_finish(). A standard input that is not a terminal is read once and given to every\n"
        "  cluster process; a terminal stays with cluster 0. As under mpirun: the caller's directory and\n"
        "  environment; standard output is the program's; the launcher's lines go to standard error; the\n"
        "  exit status is the program's (the first failing cluster's). PATH contains a '/'.\n",
        runtime,
        {text_opt("--report", "FILE",
                  "the launcher's report (run shape, verdict, exit status, runtime, proxy and DSM counters) as "
                  "one JSON object in FILE, and nothing of it on standard error"),
         timeout_option(86400)},
        true, "PASS: every cluster process exited with status 0", launch_path};
}

int run_row(const ProgramRow& row, int argc, char** argv) {
    const cli::Args p = cli::parse_options(row.option_set("run " + row.name), argc, argv, 1, row.usage());
    return row.launch(row, argv[0], p);
}

}  // namespace iccs
