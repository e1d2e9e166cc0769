// apps/common/app_common.cpp: command line, partitions, comparison and the result line.
#include "app_common.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace apps {

const char* size_name(Size s) { return s == Size::paper ? "paper" : "test"; }

namespace {

[[noreturn]] void usage_error(const char* app, const std::string& msg) {
    std::fprintf(stderr, "%s: %s (try --help)\n", app, msg.c_str());
    std::exit(2);
}

void print_usage(const char* app, const char* about) {
    std::printf("usage: %s [-p N] [--size test|paper] [--json]\n"
                "%s\n"
                "  -p N                threads (SPLASH convention; default 1, 1..1024)\n"
                "  --size test|paper   problem size (default test; paper = the 1997 study's Table 1)\n"
                "  --json              print one JSON object on one line instead of text\n"
                "  --inject-error      test hook: corrupt one value of the parallel result before\n"
                "                      the check, which must then report FAIL and exit 1\n"
                "Exit status: 0 PASS, 1 FAIL (result differs from the sequential reference), 2 bad argument.\n",
                app, about);
}

int parse_threads(const char* app, const char* v) {
    char* end = nullptr;
    errno = 0;
    long n = std::strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || errno != 0 || n < 1 || n > 1024)
        usage_error(app, std::string("-p ") + v + ": expected an integer 1..1024");
    return static_cast<int>(n);
}

Size parse_size(const char* app, const char* v) {
    if (std::strcmp(v, "test") == 0) return Size::test;
    if (std::strcmp(v, "paper") == 0) return Size::paper;
    usage_error(app, std::string("--size ") + v + ": allowed values are test, paper");
}

}  // namespace

Options parse_args(const char* app, const char* about, int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const char* a = argv[i];
        auto value = [&](const char* flag) -> const char* {
            if (i + 1 >= argc) usage_error(app, std::string(flag) + ": missing value");
            return argv[++i];
        };
        if (std::strcmp(a, "-p") == 0) {
            o.nprocs = parse_threads(app, value("-p"));
        } else if (std::strncmp(a, "-p", 2) == 0 && a[2] >= '0' && a[2] <= '9') {
            o.nprocs = parse_threads(app, a + 2);  // -p4, as SPLASH programs accept it
        } else if (std::strcmp(a, "--size") == 0) {
            o.size = parse_size(app, value("--size"));
        } else if (std::strncmp(a, "--size=", 7) == 0) {
            o.size = parse_size(app, a + 7);
        } else if (std::strcmp(a, "--json") == 0) {
            o.json = true;
        } else if (std::strcmp(a, "--inject-error") == 0) {
            o.inject_error = true;
        } else if (std::strcmp(a, "--help") == 0 || std::strcmp(a, "-h") == 0) {
            print_usage(app, about);
            std::exit(0);
        } else {
            usage_error(app, std::string("unknown argument '") + a + "'");
        }
    }
    return o;
}

Range block_range(long total, int nprocs, int pid) {
    long base = total / nprocs, extra = total % nprocs;
    long lo = pid * base + (pid < extra ? pid : extra);
    long hi = lo + base + (pid < extra ? 1 : 0);
    return Range{lo, hi};
}

std::uint64_t Rng::next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double Rng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

long Rng::below(long n) { return static_cast<long>(next() % static_cast<std::uint64_t>(n)); }

Compare compare_rel(const double* got, const double* want, std::size_t n, double rel_tol) {
    Compare c;
    double scale = 0;
    for (std::size_t i = 0; i < n; ++i) scale = std::fmax(scale, std::fabs(want[i]));
    if (scale == 0) scale = 1;  // all-zero reference: absolute comparison
    for (std::size_t i = 0; i < n; ++i) {
        double e = std::fabs(got[i] - want[i]) / scale;
        if (!(e <= c.max_err)) {  // also catches NaN, which must fail
            c.max_err = std::isnan(e) ? INFINITY : e;
            c.worst = i;
            c.got = got[i];
            c.want = want[i];
        }
    }
    c.ok = c.max_err <= rel_tol;
    return c;
}

std::string fmt_double(double v) {
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (std::isnan(v)) return "nan";
    char buf[64];
    for (int prec = 6; prec <= 17; ++prec) {  // shortest form that reads back to the same value
        std::snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (std::strtod(buf, nullptr) == v) break;
    }
    return buf;
}

void Report::add(std::string what, std::string fail) {
    checks.push_back(std::move(what));
    if (!fail.empty()) failures.push_back(std::move(fail));
}

void Report::add_array(const std::string& name, const std::string& against, const double* got, const double* want,
                       std::size_t n, double rel_tol, std::size_t row_len) {
    Compare c = compare_rel(got, want, n, rel_tol);
    std::string what = name + " vs " + against + ": max norm-relative error " + fmt_double(c.max_err) + " (tolerance " +
                       fmt_double(rel_tol) + ")";
    std::string fail;
    if (!c.ok) {  // built by appends: `"..." + std::string` trips a false -Wrestrict in GCC 12
        char idx[64];
        if (row_len > 0)
            std::snprintf(idx, sizeof idx, "[%zu][%zu]", c.worst / row_len, c.worst % row_len);
        else
            std::snprintf(idx, sizeof idx, "[%zu]", c.worst);
        fail = name;
        fail += idx;
        fail += " = ";
        fail += fmt_double(c.got);
        fail += ", reference ";
        fail += fmt_double(c.want);
        fail += " (norm-relative error ";
        fail += fmt_double(c.max_err);
        fail += " > ";
        fail += fmt_double(rel_tol);
        fail += ")";
    }
    add(std::move(what), std::move(fail));
}

std::string json_number(double v) { return std::isfinite(v) ? fmt_double(v) : "null"; }

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (unsigned char ch : s) {
        switch (ch) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\t': out += "\\t"; break;
            default:
                if (ch < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", ch);
                    out += buf;
                } else {
                    out += static_cast<char>(ch);
                }
        }
    }
    return out + "\"";
}

namespace {
std::string join(const std::vector<std::string>& v, const char* sep) {
    std::string out;
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (i) out += sep;
        out += v[i];
    }
    return out;
}
}  // namespace

int finish(const Report& r) {
    // A report with no comparison is not a pass: every app must check something.
    bool pass = r.failures.empty() && !r.checks.empty();
    std::string failure = r.checks.empty() ? std::string("nothing was checked") : join(r.failures, "; ");
    // Started by `iccs run <app>` (cli/run_app.cpp): the JSON line also goes to the file the
    // launcher named, ICCS_REPORT.app.c<cluster>, whatever this process's stdout is (on the DSM,
    // clusters other than 0 print to /dev/null; with --json the launcher sends every cluster's
    // stdout to stderr and prints one merged object itself).
    const char* report = std::getenv("ICCS_REPORT");
    const bool to_file = report != nullptr && *report != '\0';
    if (r.opt.json || to_file) {
        // Built by appends: one long operator+ chain trips a false -Wrestrict in GCC 12.
        char secs[32];
        std::snprintf(secs, sizeof secs, "%.6f", r.parallel_s);
        std::string line = "{\"app\":";
        line += json_string(r.app);
        line += ",\"size\":";
        line += json_string(size_name(r.opt.size));
        line += ",\"threads\":";
        line += std::to_string(r.opt.nprocs);
        line += ",\"result\":";
        line += json_string(pass ? "PASS" : "FAIL");
        line += ",\"parallel_s\":";
        line += secs;
        line += ",\"check\":";
        line += json_string(join(r.checks, "; "));
        line += ",\"problem\":";
        line += json_string(r.problem);
        for (const auto& [k, v] : r.params) {
            line += ",";
            line += json_string(k);
            line += ":";
            line += v;
        }
        if (r.opt.inject_error) line += ",\"inject_error\":true";
        if (!pass) {
            line += ",\"failure\":";
            line += json_string(failure);
        }
        line += "}";
        if (to_file) {
            const char* cl = std::getenv("ICCS_CLUSTER");
            const std::string f = std::string(report) + ".app.c" + (cl != nullptr && *cl != '\0' ? cl : "0");
            if (std::FILE* out = std::fopen(f.c_str(), "w")) {
                std::fprintf(out, "%s\n", line.c_str());
                std::fclose(out);
            }
        }
        if (r.opt.json) std::printf("%s\n", line.c_str());
    }
    if (!r.opt.json) {
        std::printf("%s: %s (size %s), %d thread%s%s\n", r.app, r.problem.c_str(), size_name(r.opt.size),
                    r.opt.nprocs, r.opt.nprocs == 1 ? "" : "s", r.opt.inject_error ? ", error injected" : "");
        for (const auto& c : r.checks) std::printf("  check %s\n", c.c_str());
        std::printf("parallel section: %.6f s\n", r.parallel_s);
        if (pass)
            std::printf("PASS\n");
        else
            std::printf("FAIL: %s\n", failure.c_str());
    }
    std::fflush(stdout);
    return pass ? 0 : 1;
}

}  // namespace apps
