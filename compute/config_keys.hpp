// config_keys.hpp: the key table of the machine configuration, shared by the files of config.hpp's
// implementation only (config_keys.cpp: the rows; config_read.cpp: file, flags, validation;
// config_views.cpp: what the other parts get from a MachineConfig, and the dump).
//
// Each key is one row: where it lives, how it is checked and stored (set), how it is read back as
// a TOML value (put), and a comment for the dump (note). Values from the command line are turned
// into TOML nodes first, so a flag goes through the very check a file does.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "config.hpp"

namespace iccs::config_detail {

inline constexpr std::string_view kSections[] = {"machine", "cluster", "slidwin", "reassembly", "convergence",
                                                 "test", "wan", "runtime", "security", "group"};

// ---- values as text
std::string quote(std::string_view s);
// A node as it would be written in TOML (values in messages, and the dump).
std::string value_text(const toml::node& n);
std::string ipv4_text(Ipv4Addr a);
bool parse_int(std::string_view s, int64_t& out);
bool parse_double(std::string_view s, double& out);
size_t edit_distance(std::string_view a, std::string_view b);
// A typo of `known` (a few edits away, by length).
bool close_enough(std::string_view typed, std::string_view known);

// ---- the key table
struct Problem {
    uint32_t line = 0;  // 0: no place in a file (a flag, a config built in code)
    uint32_t column = 0;
    std::string text;   // "[cluster] polling = \"fast\": allowed values are busy, adaptive, inline"
};

// A problem at node n of a file (its line and column).
Problem problem_at(const toml::node& n, std::string text);

enum class Kind { kInt, kEnum, kIpv4, kProxies, kProbability, kCoreArray, kPciArray, kIpv4Array, kPath, kNumber,
                  kSiteArray, kLinkArray, kString };

struct Key {
    std::string_view section;
    std::string_view name;
    Kind kind;
    std::string allowed;  // "an integer from 1 to 64", "busy, adaptive, inline"
    std::string_view doc;
    std::function<std::optional<Problem>(MachineConfig&, const toml::node&)> set;
    std::function<void(const MachineConfig&, toml::table&)> put;  // inserts the key's value
    std::function<std::string(const MachineConfig&)> note;        // dump comment, may be empty

    std::string head() const { return "[" + std::string(section) + "] " + std::string(name); }
    // The message for a wrong value at node n.
    Problem wrong(const toml::node& n) const {
        return problem_at(n, head() + " = " + value_text(n) + ": " +
                                 (kind == Kind::kEnum ? "allowed values are " : "expected ") + allowed);
    }
};

// Every key, in the order of the dump; one of them, or null.
const std::vector<Key>& keys();
const Key* find_key(std::string_view section, std::string_view name);
bool is_section(std::string_view s);
// The messages for a name that is no key or section, with the nearest known one when there is one.
std::string unknown_key_text(std::string_view section, std::string_view name);
std::string unknown_section_text(std::string_view section);
std::string top_level_text(std::string_view name);

// [wan] links entry: "A->B BW LAT_MS [LOSS]", "A<->B BW LAT_MS [LOSS]", "A->B cut", "A<->B cut".
struct LinkSpec {
    uint32_t a = 0, b = 0;
    bool both = false, cut = false, has_loss = false;
    double bw = 0, lat_ms = 0, loss = 0;
};
bool parse_link_spec(std::string_view text, LinkSpec& out);

}  // namespace iccs::config_detail
