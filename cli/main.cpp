// main.cpp: the iccs command's binary (the ./iccs script builds it and calls it). One table of
// subcommands; each is a thin call into a part.
#include <string>

#include "bench_table.hpp"
#include "demo.hpp"
#include "interop.hpp"
#include "options.hpp"
#include "run_table.hpp"
#include "soak.hpp"

int main(int argc, char** argv) {
    if (argc < 2) iccs::cli::usage_error("", "no subcommand (see ./iccs --help)");
    const std::string cmd = argv[1];
    if (cmd == "demo") return iccs::cmd_demo(argc - 2, argv + 2);
    if (cmd == "bench") return iccs::cmd_bench(argc - 2, argv + 2);
    if (cmd == "run") return iccs::cmd_run(argc - 2, argv + 2);
    if (cmd == "soak") return iccs::cmd_soak(argc - 2, argv + 2);
    if (cmd == "interop") return iccs::cmd_interop(argc - 2, argv + 2);
    iccs::cli::usage_error("", "unknown subcommand '" + cmd + "' (see ./iccs --help)");
}
