// options.hpp: the options of the iccs command as tables, and the one argument reader.
//
// A program row of `iccs run` (run_table.hpp) or a bench row of `iccs bench` (bench_table.cpp)
// lists the option groups it takes (the machine's flags, the runtime's, ...) and its own options,
// each with its type and its range or allowed values. `parse_options()` reads the arguments
// against those tables once: a flag the row does not take, a missing value, a value out of range
// or not allowed stops the command with exit status 2 and one line that names the command, the
// flag and what is allowed (never a clamp); `--help` prints the help generated from the same
// tables. The launch function then reads typed values from `Args`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace iccs::cli {

// Prints "iccs <who>: <msg>" and exits with status 2 (a usage error).
[[noreturn]] void usage_error(const std::string& who, const std::string& msg);

enum class OptType {
    kFlag,    // no value
    kUint,    // an integer in [lo, hi]
    kUintList,  // comma-separated integers, each in [lo, hi]
    kReal,    // a number in [rlo, rhi]
    kChoice,  // one of `choices`
    kText,    // any non-empty text (a file, a list checked by the launcher)
    kConfig,  // a value of the configuration key `key`, checked by that key's own rule
};

struct Option {
    std::string name;     // "--messages"
    std::string metavar;  // "N" (empty for a flag)
    OptType type = OptType::kFlag;
    std::string help;     // what it does, without the allowed values (they are added from the type)
    uint64_t lo = 0, hi = 0;
    double rlo = 0, rhi = 0;
    std::vector<std::string> choices;
    std::string key;         // kConfig: "section.key" the value goes to
    std::string also;        // kReal, kUint: one more word allowed ("auto")
    std::string same_as;     // another name of the option `same_as` (--cluster-size: --threads)
    bool repeats = false;    // may be given more than once (--set)
    std::string dflt;        // the default, for the help ("" = none said)

    // What the value may be, for messages and the help: "an integer from 1 to 64".
    std::string allowed() const;
    // kConfig: " ([machine] clusters)", the key the value goes to; "" otherwise.
    std::string where() const;
};

// Builders, so a table reads as a list.
Option flag(std::string name, std::string help);
Option uint_opt(std::string name, std::string metavar, uint64_t lo, uint64_t hi, std::string help, std::string dflt = "");
Option uint_list_opt(std::string name, std::string metavar, uint64_t lo, uint64_t hi, std::string help,
                     std::string dflt = "");
Option real_opt(std::string name, std::string metavar, double lo, double hi, std::string help, std::string dflt = "");
Option choice_opt(std::string name, std::vector<std::string> choices, std::string help, std::string dflt = "");
Option text_opt(std::string name, std::string metavar, std::string help);
Option config_opt(std::string name, std::string metavar, std::string key, std::string help = "");

// A set of options several rows take (the machine's flags, the runtime's, the report's).
struct OptionGroup {
    std::string title;  // "machine options (each overrides the configuration file)"
    std::vector<Option> options;
};

// What the arguments said, checked.
class Args {
   public:
    bool has(const std::string& name) const { return values_.count(name) != 0; }
    bool flag(const std::string& name) const { return has(name); }
    uint64_t u64(const std::string& name, uint64_t dflt) const;
    std::vector<uint64_t> u64_list(const std::string& name) const;  // a kUintList's values (empty: not given)
    double real(const std::string& name, double dflt) const;
    std::string text(const std::string& name, const std::string& dflt = "") const;

    // --config FILE; the configuration keys of the flags and of --set, in the order given.
    std::string config_path;
    std::vector<std::pair<std::string, std::string>> overrides;
    std::vector<std::string> rest;  // the arguments after "--" (a program given by path)
    // Every option as given ("--flag", "value"), in order: what a row hands on to another launcher.
    std::vector<std::string> given;

    void set(const std::string& name, const std::string& v) { values_[name] = v; }

   private:
    std::map<std::string, std::string> values_;
};

// What one command takes: its groups and its own options.
struct OptionSet {
    std::string who;    // "run alltoall": the messages say "iccs run alltoall: ..."
    std::vector<const OptionGroup*> groups;
    const std::vector<Option>* own = nullptr;
    bool takes_rest = false;  // "-- ARGS" allowed
    // Why a flag of another command is not taken here ("--transport": "is for programs on the
    // cluster runtime"), said in the refusal.
    std::map<std::string, std::string> hints;
    // Searched in order: own options first, then the groups'.
    const Option* find(const std::string& name) const;
    // "--messages, --min-size, ..." (every option it takes).
    std::string names() const;
};

// Reads argv[first..argc) against `set`. "--help"/"-h" prints help() and exits 0; anything not
// taken exits 2 with one line naming set.who, the flag and what it takes. An option given again
// replaces its earlier value (the last one counts, as with --set); two names of one setting
// (--cluster-size, --threads) given with different values are refused.
Args parse_options(const OptionSet& set, int argc, char** argv, int first, const std::string& help);

// A value `o` refuses ("" for a flag or text): for the tests that every row refuses one.
std::string refused_sample(const Option& o);

// The option lines of a help text: "  --messages N   messages per pair ... (an integer from 1 to ...)".
std::string option_help(const OptionSet& set);

}  // namespace iccs::cli
