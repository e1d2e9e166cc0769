// options.cpp: see options.hpp.
#include "options.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "config.hpp"

namespace iccs::cli {

namespace {

std::string number_text(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

// The documentation of a configuration key ("[cluster] polling", its allowed values).
const ConfigKeyDoc* key_doc(const std::string& dotted) {
    const size_t dot = dotted.find('.');
    if (dot == std::string::npos) return nullptr;
    for (const ConfigKeyDoc& d : config_key_docs())
        if (d.section == dotted.substr(0, dot) && d.key == dotted.substr(dot + 1)) return &d;
    return nullptr;
}

bool parse_uint_text(const std::string& v, uint64_t& out) {
    if (v.empty() || v[0] < '0' || v[0] > '9') return false;  // no sign, no blank, no "0x"
    const auto r = std::from_chars(v.data(), v.data() + v.size(), out);
    return r.ec == std::errc{} && r.ptr == v.data() + v.size();
}

bool parse_uint_list_text(const std::string& v, uint64_t lo, uint64_t hi, std::vector<uint64_t>& out) {
    out.clear();
    for (size_t at = 0; at <= v.size();) {
        const size_t comma = std::min(v.find(',', at), v.size());
        uint64_t x = 0;
        if (!parse_uint_text(v.substr(at, comma - at), x) || x < lo || x > hi) return false;
        out.push_back(x);
        at = comma + 1;
    }
    return true;
}

bool parse_real_text(const std::string& v, double& out) {
    if (v.empty()) return false;
    char* end = nullptr;
    errno = 0;
    out = std::strtod(v.c_str(), &end);
    return errno == 0 && end == v.c_str() + v.size() && std::isfinite(out);
}

// The value v of option o, checked; or the reason it is refused (what is allowed).
std::string check_value(const Option& o, const std::string& v) {
    switch (o.type) {
        case OptType::kFlag: return {};
        case OptType::kUint: {
            uint64_t x = 0;
            if (!o.also.empty() && v == o.also) return {};
            return parse_uint_text(v, x) && x >= o.lo && x <= o.hi ? std::string() : o.allowed();
        }
        case OptType::kUintList: {
            std::vector<uint64_t> xs;
            return parse_uint_list_text(v, o.lo, o.hi, xs) ? std::string() : o.allowed();
        }
        case OptType::kReal: {
            double x = 0;
            if (!o.also.empty() && v == o.also) return {};
            return parse_real_text(v, x) && x >= o.rlo && x <= o.rhi ? std::string() : o.allowed();
        }
        case OptType::kChoice:
            for (const std::string& c : o.choices)
                if (v == c) return {};
            return o.allowed();
        case OptType::kText: return v.empty() ? o.allowed() : std::string();
        case OptType::kConfig: {
            // The key's own rule, as a file would be checked (config.hpp).
            MachineConfig scratch;
            resolve(scratch);
            if (apply_override(scratch, o.key, v)) return o.allowed();
            return {};
        }
    }
    return {};
}

}  // namespace

void usage_error(const std::string& who, const std::string& msg) {
    std::fprintf(stderr, "iccs%s%s: %s\n", who.empty() ? "" : " ", who.c_str(), msg.c_str());
    std::exit(2);
}

std::string Option::allowed() const {
    switch (type) {
        case OptType::kFlag: return "no value";
        case OptType::kUint:
            return "an integer from " + std::to_string(lo) + " to " + std::to_string(hi) + (also.empty() ? "" : ", or " + also);
        case OptType::kUintList:
            return "a comma-separated list of integers, each from " + std::to_string(lo) + " to " + std::to_string(hi);
        case OptType::kReal:
            return "a number from " + number_text(rlo) + " to " + number_text(rhi) + (also.empty() ? "" : ", or " + also);
        case OptType::kChoice: {
            std::string s = "one of ";
            for (size_t i = 0; i < choices.size(); ++i) s += (i ? ", " : "") + choices[i];
            return s;
        }
        case OptType::kText: return "a non-empty " + (metavar.empty() ? std::string("value") : metavar);
        case OptType::kConfig: {
            const ConfigKeyDoc* d = key_doc(key);
            return d == nullptr ? "a value of " + key : std::string(d->allowed);
        }
    }
    return {};
}

std::string Option::where() const {
    if (type != OptType::kConfig) return {};
    const ConfigKeyDoc* d = key_doc(key);
    return d == nullptr ? " (" + key + ")" : " ([" + std::string(d->section) + "] " + std::string(d->key) + ")";
}

Option flag(std::string name, std::string help) {
    Option o;
    o.name = std::move(name);
    o.help = std::move(help);
    return o;
}

Option uint_opt(std::string name, std::string metavar, uint64_t lo, uint64_t hi, std::string help, std::string dflt) {
    Option o = flag(std::move(name), std::move(help));
    o.type = OptType::kUint;
    o.metavar = std::move(metavar);
    o.lo = lo;
    o.hi = hi;
    o.dflt = std::move(dflt);
    return o;
}

Option uint_list_opt(std::string name, std::string metavar, uint64_t lo, uint64_t hi, std::string help,
                     std::string dflt) {
    Option o = uint_opt(std::move(name), std::move(metavar), lo, hi, std::move(help), std::move(dflt));
    o.type = OptType::kUintList;
    return o;
}

Option real_opt(std::string name, std::string metavar, double lo, double hi, std::string help, std::string dflt) {
    Option o = flag(std::move(name), std::move(help));
    o.type = OptType::kReal;
    o.metavar = std::move(metavar);
    o.rlo = lo;
    o.rhi = hi;
    o.dflt = std::move(dflt);
    return o;
}

Option choice_opt(std::string name, std::vector<std::string> choices, std::string help, std::string dflt) {
    Option o = flag(std::move(name), std::move(help));
    o.type = OptType::kChoice;
    for (size_t i = 0; i < choices.size(); ++i) o.metavar += (i ? "|" : "") + choices[i];
    o.choices = std::move(choices);
    o.dflt = std::move(dflt);
    return o;
}

Option text_opt(std::string name, std::string metavar, std::string help) {
    Option o = flag(std::move(name), std::move(help));
    o.type = OptType::kText;
    o.metavar = std::move(metavar);
    return o;
}

Option config_opt(std::string name, std::string metavar, std::string key, std::string help) {
    Option o = flag(std::move(name), std::move(help));
    o.type = OptType::kConfig;
    o.metavar = std::move(metavar);
    o.key = std::move(key);
    return o;
}

uint64_t Args::u64(const std::string& name, uint64_t dflt) const {
    const auto it = values_.find(name);
    if (it == values_.end()) return dflt;
    uint64_t x = dflt;
    parse_uint_text(it->second, x);  // checked by parse_options
    return x;
}

std::vector<uint64_t> Args::u64_list(const std::string& name) const {
    std::vector<uint64_t> xs;
    const auto it = values_.find(name);
    if (it != values_.end()) parse_uint_list_text(it->second, 0, UINT64_MAX, xs);  // checked by parse_options
    return xs;
}

double Args::real(const std::string& name, double dflt) const {
    const auto it = values_.find(name);
    if (it == values_.end()) return dflt;
    double x = dflt;
    parse_real_text(it->second, x);
    return x;
}

std::string Args::text(const std::string& name, const std::string& dflt) const {
    const auto it = values_.find(name);
    return it == values_.end() ? dflt : it->second;
}

const Option* OptionSet::find(const std::string& name) const {
    if (own != nullptr)
        for (const Option& o : *own)
            if (o.name == name) return &o;
    for (const OptionGroup* g : groups)
        for (const Option& o : g->options)
            if (o.name == name) return &o;
    return nullptr;
}

std::string OptionSet::names() const {
    std::string s;
    auto add = [&s](const Option& o) { s += (s.empty() ? "" : ", ") + o.name; };
    if (own != nullptr)
        for (const Option& o : *own) add(o);
    for (const OptionGroup* g : groups)
        for (const Option& o : g->options) add(o);
    if (takes_rest) s += (s.empty() ? "" : ", ") + std::string("-- ARGS");
    return s.empty() ? "no options" : s;
}

Args parse_options(const OptionSet& set, int argc, char** argv, int first, const std::string& help) {
    Args p;
    std::map<std::string, std::string> given_as;  // setting -> the name it was last given by
    for (int i = first; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--help" || a == "-h") {
            std::fputs(help.c_str(), stdout);
            std::exit(0);
        }
        if (a == "--") {
            if (!set.takes_rest)
                usage_error(set.who, "'--' passes arguments to a program given by path, which " + set.who + " is not");
            for (++i; i < argc; ++i) p.rest.emplace_back(argv[i]);
            break;
        }
        const Option* o = set.find(a);
        if (o == nullptr) {
            if (const auto h = set.hints.find(a); h != set.hints.end())
                usage_error(set.who, a + " " + h->second + " (it takes: " + set.names() + ")");
            usage_error(set.who, (a.rfind("-", 0) == 0 ? "unknown option '" : "unexpected argument '") + a +
                                     "' (it takes: " + set.names() + ")");
        }
        std::string v;
        if (o->type != OptType::kFlag) {
            if (i + 1 >= argc) usage_error(set.who, o->name + " needs a value (allowed: " + o->allowed() + ")");
            v = argv[++i];
            if (const std::string why = check_value(*o, v); !why.empty())
                usage_error(set.who, "bad value '" + v + "' for " + o->name + o->where() + ": allowed: " + why);
        }
        // An option given again replaces its earlier value, as a later --set does (scripts append to
        // a base line); the two names of one setting (--cluster-size, --threads) must agree.
        const std::string& name = o->same_as.empty() ? o->name : o->same_as;
        if (const auto it = given_as.find(name); it != given_as.end() && it->second != o->name && p.text(name) != v)
            usage_error(set.who, it->second + " " + p.text(name) + " and " + o->name + " " + v +
                                     " disagree (they are the same setting)");
        given_as[name] = o->name;
        p.set(name, v);
        p.given.push_back(o->name);
        if (o->type != OptType::kFlag) p.given.push_back(v);
        if (o->type == OptType::kConfig) p.overrides.emplace_back(o->key, v);
        if (o->name == "--config") p.config_path = v;
        if (o->name == "--set") {
            const auto eq = v.find('=');
            if (eq == std::string::npos || eq == 0) usage_error(set.who, "--set takes SECTION.KEY=VALUE, got '" + v + "'");
            p.overrides.emplace_back(v.substr(0, eq), v.substr(eq + 1));
        }
    }
    return p;
}

std::string refused_sample(const Option& o) {
    switch (o.type) {
        case OptType::kFlag:
        case OptType::kText: return {};
        case OptType::kUint: return o.hi < UINT64_MAX ? std::to_string(o.hi + 1) : "-1";
        case OptType::kUintList: return "1,x";
        case OptType::kReal: return o.rlo > -1e300 ? number_text(o.rlo - 1) : "x";
        case OptType::kChoice: return "not-" + o.choices.front();
        case OptType::kConfig:
            for (const char* v : {"0", "-1", "not-a-value"})
                if (!check_value(o, v).empty()) return v;
            return {};
    }
    return {};
}

std::string option_help(const OptionSet& set) {
    std::string out;
    auto line = [&out](const Option& o) {
        std::string head = "  " + o.name + (o.metavar.empty() ? "" : " " + o.metavar);
        if (head.size() < 24) head.resize(24, ' ');
        else head += "\n" + std::string(24, ' ');
        std::string text = o.help;
        if (text.empty() && o.type == OptType::kConfig)
            if (const ConfigKeyDoc* d = key_doc(o.key)) text = std::string(d->doc);
        if (o.type != OptType::kFlag && o.type != OptType::kText) {
            text += std::string(text.empty() ? "" : " ") + "(" + o.allowed();
            if (const std::string w = o.where(); !w.empty()) text += "; " + w.substr(2, w.size() - 3);
            text += o.dflt.empty() ? ")" : "; default " + o.dflt + ")";
        } else if (!o.dflt.empty()) {
            text += " (default " + o.dflt + ")";
        }
        if (!o.same_as.empty()) text += std::string(text.empty() ? "" : " ") + "(the same as " + o.same_as + ")";
        // Fold at 100 columns, continuation lines under the text.
        std::string body;
        size_t col = 24;
        size_t pos = 0;
        while (pos < text.size()) {
            size_t sp = text.find(' ', pos);
            if (sp == std::string::npos) sp = text.size();
            const std::string word = text.substr(pos, sp - pos);
            if (col + word.size() + 1 > 100 && col > 24) {
                body += "\n" + std::string(24, ' ');
                col = 24;
            } else if (col > 24) {
                body += ' ';
                ++col;
            }
            body += word;
            col += word.size();
            pos = sp + 1;
        }
        out += head + body + "\n";
    };
    if (set.own != nullptr && !set.own->empty()) {
        out += "options:\n";
        for (const Option& o : *set.own) line(o);
    }
    for (const OptionGroup* g : set.groups) {
        out += g->title + ":\n";
        for (const Option& o : g->options) line(o);
    }
    if (set.takes_rest) out += "  -- ARGS                the program's own arguments\n";
    return out;
}

}  // namespace iccs::cli
