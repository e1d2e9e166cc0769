// wan_script.cpp: see wan_script.hpp.
#include "wan_script.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace iccs {

namespace {

std::vector<std::string> split(const std::string& line) {
    std::vector<std::string> t;
    std::istringstream in(line.substr(0, line.find('#')));
    for (std::string w; in >> w;) t.push_back(w);
    return t;
}

bool number(const std::string& s, double& out) {
    const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
    return r.ec == std::errc{} && r.ptr == s.data() + s.size() && std::isfinite(out);
}

bool site(const std::string& s, uint32_t sites, uint32_t& out, std::string& err) {
    double d = 0;
    if (!number(s, d) || d < 0 || d != std::floor(d) || d >= sites) {
        err = "site '" + s + "': expected a site id from 0 to " + std::to_string(sites - 1);
        return false;
    }
    out = static_cast<uint32_t>(d);
    return true;
}

// "A B BW LAT_S" tokens -> link and params.
bool link_values(const std::vector<std::string>& t, size_t from, uint32_t sites, uint32_t& a, uint32_t& b,
                 WanLinkParams& p, std::string& err) {
    if (!site(t[from], sites, a, err) || !site(t[from + 1], sites, b, err)) return false;
    if (a == b) {
        err = "link " + t[from] + " -> " + t[from + 1] + ": a link joins two different sites";
        return false;
    }
    double bw = 0, lat = 0;
    if (!number(t[from + 2], bw) || bw < 0) {
        err = "bandwidth '" + t[from + 2] + "': expected bytes per second >= 0 (0 = unlimited)";
        return false;
    }
    if (!number(t[from + 3], lat) || lat < 0 || lat > 100) {
        err = "latency '" + t[from + 3] + "': expected seconds from 0 to 100";
        return false;
    }
    p = WanLinkParams{bw, static_cast<uint64_t>(std::llround(lat * 1e9)), true};
    return true;
}

bool loss_value(const std::string& s, double& out, std::string& err) {
    if (!number(s, out) || out < 0 || out > 1) {
        err = "loss '" + s + "': expected a probability from 0 to 1";
        return false;
    }
    return true;
}

// "A B P" tokens (from index `from`) -> link and loss probability.
bool loss_values(const std::vector<std::string>& t, size_t from, uint32_t sites, uint32_t& a, uint32_t& b,
                 double& loss, std::string& err) {
    if (t.size() - from != 3) {
        err = "needs 3 values (A B LOSS), got " + std::to_string(t.size() - from);
        return false;
    }
    if (!site(t[from], sites, a, err) || !site(t[from + 1], sites, b, err)) return false;
    if (a == b) {
        err = "link " + t[from] + " -> " + t[from + 1] + ": a link joins two different sites";
        return false;
    }
    return loss_value(t[from + 2], loss, err);
}

std::string at(const std::string& name, size_t line) { return name + ":" + std::to_string(line) + ": "; }

bool read_text(const std::string& path, std::string& text, std::string& err) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        err = "cannot read " + path + ": " + std::strerror(errno);
        return false;
    }
    std::ostringstream s;
    s << in.rdbuf();
    text = s.str();
    return true;
}

std::string dir_of(const std::string& path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

// A set / set_sym / cut / cut_sym line into topology t; "" or the error (without the place).
std::string apply_link_line(const std::vector<std::string>& w, WanTopology& t) {
    const std::string& cmd = w[0];
    uint32_t a = 0, b = 0;
    WanLinkParams p;
    std::string err;
    if (cmd == "cut" || cmd == "cut_sym") {
        if (w.size() != 3) return cmd + " needs 2 values (A B), got " + std::to_string(w.size() - 1);
        if (!site(w[1], t.sites, a, err) || !site(w[2], t.sites, b, err)) return err;
        if (a == b) return "link " + w[1] + " -> " + w[2] + ": a link joins two different sites";
        t.at(a, b).present = false;
        if (cmd == "cut_sym") t.at(b, a).present = false;
        return {};
    }
    if (cmd == "loss" || cmd == "loss_sym") {
        double loss = 0;
        if (!loss_values(w, 1, t.sites, a, b, loss, err)) return cmd + " " + err;
        t.at(a, b).loss = loss;
        if (cmd == "loss_sym") t.at(b, a).loss = loss;
        return {};
    }
    const bool sym = cmd == "set_sym";
    size_t from = 1;
    if (sym && w.size() == 6) from = 2;  // Panda's "set_sym one A B BW LAT"
    if (w.size() - from != 4)
        return cmd + " needs 4 values (A B BW LAT_S" + std::string(sym ? "; optionally a name first" : "") +
               "), got " + std::to_string(w.size() - 1);
    if (!link_values(w, from, t.sites, a, b, p, err)) return err;
    p.loss = t.at(a, b).loss;  // set changes bandwidth and latency; loss has its own line
    t.at(a, b) = p;
    if (sym) {
        p.loss = t.at(b, a).loss;
        t.at(b, a) = p;
    }
    return {};
}

bool parse_scenario(const std::string& text, const std::string& name, const WanTopology& base, WanTopology& out,
                    std::string& err) {
    out = base;
    std::istringstream in(text);
    std::string line;
    for (size_t n = 1; std::getline(in, line); ++n) {
        const auto w = split(line);
        if (w.empty()) continue;
        if (w[0] != "set" && w[0] != "set_sym" && w[0] != "cut" && w[0] != "cut_sym" && w[0] != "loss" &&
            w[0] != "loss_sym") {
            err = at(name, n) + "unknown scenario line '" + w[0] +
                  "' (a scenario has set, set_sym, cut, cut_sym, loss, loss_sym)";
            return false;
        }
        if (std::string e = apply_link_line(w, out); !e.empty()) {
            err = at(name, n) + e;
            return false;
        }
    }
    if (std::string u = out.unreachable(); !u.empty()) {
        err = name + ": " + u;
        return false;
    }
    return true;
}

}  // namespace

bool wan_parse_link_values(const std::string& args, uint32_t sites, uint32_t& a, uint32_t& b, WanLinkParams& p,
                           std::string& err) {
    const auto w = split(args);
    if (w.size() != 4) {
        err = "needs 4 values (A B BW LAT_S), got " + std::to_string(w.size());
        return false;
    }
    return link_values(w, 0, sites, a, b, p, err);
}

bool wan_parse_loss_values(const std::string& args, uint32_t sites, uint32_t& a, uint32_t& b, double& loss,
                           std::string& err) {
    return loss_values(split(args), 0, sites, a, b, loss, err);
}

bool wan_parse_script(const std::string& text, const std::string& name, const std::string& dir,
                      const WanTopology& base, WanProgram& out, std::string& err) {
    out = WanProgram{};
    out.source = name;
    std::istringstream in(text);
    std::string line;
    int64_t loop_start = -1;   // op index of the forever body
    size_t loop_line = 0;
    bool braces = false, closed = false, loop_sleeps = false;
    for (size_t n = 1; std::getline(in, line); ++n) {
        const auto w = split(line);
        if (w.empty()) continue;
        const std::string& cmd = w[0];
        if (closed) {
            err = at(name, n) + "'" + cmd + "' after the forever block never runs";
            return false;
        }
        if (cmd == "sleep") {
            double ms = 0;
            if (w.size() != 2) {
                err = at(name, n) + "sleep needs 1 value (MS), got " + std::to_string(w.size() - 1);
                return false;
            }
            if (!number(w[1], ms) || ms < 0 || ms > 86'400'000) {
                err = at(name, n) + "sleep '" + w[1] + "': expected milliseconds from 0 to 86400000";
                return false;
            }
            WanOp op;
            op.kind = WanOp::kSleep;
            op.ns = static_cast<uint64_t>(std::llround(ms * 1e6));
            if (loop_start >= 0 && op.ns > 0) loop_sleeps = true;
            out.ops.push_back(op);
        } else if (cmd == "set" || cmd == "set_sym") {
            WanTopology t = base;  // only for the checks; the op holds the values
            if (std::string e = apply_link_line(w, t); !e.empty()) {
                err = at(name, n) + e;
                return false;
            }
            const size_t from = cmd == "set_sym" && w.size() == 6 ? 2 : 1;
            WanOp op;
            op.kind = WanOp::kSet;
            std::string e;
            link_values(w, from, base.sites, op.a, op.b, op.params, e);
            out.ops.push_back(op);
            if (cmd == "set_sym") {
                std::swap(op.a, op.b);
                out.ops.push_back(op);
            }
        } else if (cmd == "loss" || cmd == "loss_sym") {
            WanOp op;
            op.kind = WanOp::kLoss;
            std::string e;
            if (!loss_values(w, 1, base.sites, op.a, op.b, op.params.loss, e)) {
                err = at(name, n) + cmd + " " + e;
                return false;
            }
            out.ops.push_back(op);
            if (cmd == "loss_sym") {
                std::swap(op.a, op.b);
                out.ops.push_back(op);
            }
        } else if (cmd == "read") {
            if (w.size() != 2) {
                err = at(name, n) + "read needs 1 value (SCENARIO file), got " + std::to_string(w.size() - 1);
                return false;
            }
            const std::string path = !w[1].empty() && w[1][0] == '/' ? w[1] : dir + w[1];
            std::string stext, e;
            WanTopology t;
            if (!read_text(path, stext, e) || !parse_scenario(stext, path, base, t, e)) {
                err = at(name, n) + "read " + w[1] + ": " + e;
                return false;
            }
            WanOp op;
            op.kind = WanOp::kScenario;
            op.scenario = static_cast<uint32_t>(out.scenarios.size());
            out.scenarios.push_back(std::move(t));
            out.ops.push_back(op);
        } else if (cmd == "forever") {
            if (loop_start >= 0) {
                err = at(name, n) + "forever inside forever (line " + std::to_string(loop_line) + ")";
                return false;
            }
            if (w.size() > 2 || (w.size() == 2 && w[1] != "{")) {
                err = at(name, n) + "forever takes nothing, or '{' to open a block closed by '}'";
                return false;
            }
            braces = w.size() == 2;
            loop_start = static_cast<int64_t>(out.ops.size());
            loop_line = n;
        } else if (cmd == "}") {
            if (loop_start < 0 || !braces || w.size() != 1) {
                err = at(name, n) + "'}' without 'forever {'";
                return false;
            }
            closed = true;
        } else {
            err = at(name, n) + "unknown command '" + cmd + "' (commands: read, sleep, set, set_sym, loss, loss_sym, forever)";
            return false;
        }
    }
    if (loop_start >= 0) {
        if (braces && !closed) {
            err = at(name, loop_line) + "forever { is never closed by '}'";
            return false;
        }
        if (!loop_sleeps) {
            err = at(name, loop_line) + "forever loop never sleeps (it would spin): add a sleep MS with MS > 0";
            return false;
        }
        WanOp op;
        op.kind = WanOp::kJump;
        op.target = static_cast<uint32_t>(loop_start);
        out.ops.push_back(op);
    }
    if (out.ops.empty()) {
        err = name + ": the script has no commands";
        return false;
    }
    return true;
}

bool wan_parse_series(const std::string& text, const std::string& name, const WanTopology& base, WanProgram& out,
                      std::string& err) {
    out = WanProgram{};
    out.source = name;
    std::istringstream in(text);
    std::string line;
    double prev_s = 0;
    for (size_t n = 1; std::getline(in, line); ++n) {
        const auto w = split(line);
        if (w.empty()) continue;
        if (w.size() != 5 && w.size() != 6) {
            err = at(name, n) + "a series line needs 5 values (TIME_S A B BW LAT_S) or 6 (... LOSS), got " +
                  std::to_string(w.size());
            return false;
        }
        double t = 0;
        if (!number(w[0], t) || t < 0) {
            err = at(name, n) + "time '" + w[0] + "': expected seconds >= 0";
            return false;
        }
        if (t < prev_s) {
            err = at(name, n) + "time " + w[0] + " goes back (the previous line is at " + std::to_string(prev_s) + " s)";
            return false;
        }
        WanOp set;
        set.kind = WanOp::kSet;
        std::string e;
        if (!link_values(w, 1, base.sites, set.a, set.b, set.params, e) ||
            (w.size() == 6 && !loss_value(w[5], set.params.loss, e))) {
            err = at(name, n) + e;
            return false;
        }
        set.with_loss = w.size() == 6;
        if (t > prev_s) {
            WanOp sleep;
            sleep.kind = WanOp::kSleep;
            sleep.ns = static_cast<uint64_t>(std::llround((t - prev_s) * 1e9));
            out.ops.push_back(sleep);
            prev_s = t;
        }
        out.ops.push_back(set);
    }
    if (out.ops.empty()) {
        err = name + ": the series has no lines";
        return false;
    }
    return true;
}

bool wan_load_script(const std::string& path, const WanTopology& base, WanProgram& out, std::string& err) {
    std::string text;
    return read_text(path, text, err) && wan_parse_script(text, path, dir_of(path), base, out, err);
}

bool wan_load_series(const std::string& path, const WanTopology& base, WanProgram& out, std::string& err) {
    std::string text;
    return read_text(path, text, err) && wan_parse_series(text, path, base, out, err);
}

}  // namespace iccs
