// bench_table.hpp: `iccs bench` as a table of bench rows (one per benchmark of perf/): name,
// summary, help, its own options with their types and ranges, and its launch function.
// `iccs bench NAME --help` is generated from the row; `iccs bench --help` lists the rows.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "options.hpp"

namespace iccs {

struct BenchRow {
    std::string name;
    std::string summary;  // one line, for `iccs bench --help`
    std::string help;     // what it measures and against which baseline (folded)
    std::vector<cli::Option> options;
    std::function<int(const BenchRow& row, const cli::Args& args)> launch;

    cli::OptionSet option_set() const;
    std::string usage() const;
};

const std::vector<BenchRow>& bench_rows();

// `iccs bench ...` (argv: the arguments after "bench").
int cmd_bench(int argc, char** argv);

}  // namespace iccs
