// run_table.hpp: `iccs run` as a table of program rows. One row per program: its name, level,
// one-line summary, help, the option groups it takes, its own options (type, range or allowed
// values), its launch function and its PASS line. `iccs run NAME ...` looks the row up, parses the
// arguments against it once (cli/options.hpp) and calls the launch function; `iccs run NAME --help`
// is generated from the row; `iccs run --help` lists the rows. The rows of the applications, the
// wide-area suite and Satin's programs come from their own registries. cli/README.md says how to
// add a row.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "options.hpp"
#include "run_options.hpp"

namespace iccs {

struct ProgramRow {
    std::string name;     // iccs run NAME ("PATH": a program given by path)
    std::string level;    // convergence, runtime, group, satin, app, wide-area, path
    std::string summary;  // one line, for `iccs run --help`
    std::string help;     // what it does and prints (paragraphs, folded already)
    std::vector<const cli::OptionGroup*> groups;
    std::vector<cli::Option> options;  // its own
    bool takes_rest = false;           // "-- ARGS" for the program
    std::string pass_line;             // what a passing run prints last ("": the launch prints its verdict)
    // Runs it: `name` is what the user typed (a path for PATH). Returns the exit status.
    std::function<int(const ProgramRow& row, const std::string& name, const cli::Args& args)> launch;

    cli::OptionSet option_set(const std::string& who) const;
    std::string usage() const;  // "iccs run NAME [options]" and the generated option lines
};

// Every row, in the order `iccs run --help` lists them.
const std::vector<ProgramRow>& run_rows();
// The row of NAME (a path: the PATH row), or null.
const ProgramRow* find_run_row(const std::string& name);

// `iccs run ...` (argv: the arguments after "run").
int cmd_run(int argc, char** argv);

// run_row.cpp, linked by iccs-run too: the PATH row, and `iccs run NAME ...` for a row found
// (argv[0]: NAME as typed; parsed against the row once, then launched).
ProgramRow path_row();
int run_row(const ProgramRow& row, int argc, char** argv);

// The launch functions of the rows, each in the file of its level.
int launch_convergence(const ProgramRow& row, const std::string& name, const cli::Args& p);  // run.cpp
int launch_exchange(const ProgramRow& row, const std::string& name, const cli::Args& p);     // run_builtin.cpp
int launch_ping(const ProgramRow& row, const std::string& name, const cli::Args& p);
int launch_collectives(const ProgramRow& row, const std::string& name, const cli::Args& p);
int launch_ordered(const ProgramRow& row, const std::string& name, const cli::Args& p);
int launch_satin(const ProgramRow& row, const std::string& name, const cli::Args& p);
int launch_app(const ProgramRow& row, const std::string& name, const cli::Args& p);        // run_app.cpp
int launch_path(const ProgramRow& row, const std::string& name, const cli::Args& p);
int launch_widearea(const ProgramRow& row, const std::string& name, const cli::Args& p);   // run_widearea.cpp
int launch_mpi(const ProgramRow& row, const std::string& name, const cli::Args& p);        // run_mpi.cpp

}  // namespace iccs
