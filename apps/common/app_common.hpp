// apps/common/app_common.hpp: what the eight applications share and is not part of PARMACS:
// their command line (-p N, --size test|paper, --json, --inject-error), block partitions, a
// deterministic random generator, result comparison with a stated tolerance, and the one result
// line (text or JSON). It names no backend: the same object links with the pthreads and the DSM
// builds.
//
// Globals that worker threads read must be plain values or pointers into G_MALLOC memory (on the
// DSM only those reach the other clusters), so Options is a plain struct.
#ifndef ICCS_APPS_COMMON_APP_COMMON_HPP
#define ICCS_APPS_COMMON_APP_COMMON_HPP

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace apps {

enum class Size { test, paper };

struct Options {
    int nprocs = 1;          // -p N: threads in all (CREATE's n)
    Size size = Size::test;  // --size
    bool json = false;       // --json: one JSON object on one line instead of text
    bool inject_error = false;  // --inject-error (test hook): corrupt one value of the parallel result before the check
};

const char* size_name(Size s);

// Parses the common arguments. --help prints the usage (with `about`, one line on what the app
// does) and exits 0; an unknown argument or a bad value prints one line naming it and exits 2.
Options parse_args(const char* app, const char* about, int argc, char** argv);

// Thread pid's share [lo, hi) of `total` items split in nprocs contiguous blocks (the first
// total % nprocs blocks one larger). Contiguous blocks keep each thread's writes on its own pages.
struct Range {
    long lo;
    long hi;
};
Range block_range(long total, int nprocs, int pid);

// splitmix64: the same sequence on every host and compiler (std distributions are not portable),
// so the sequential prefix of main is deterministic as the contract requires.
class Rng {
public:
    explicit Rng(std::uint64_t seed) : state_(seed) {}
    std::uint64_t next();
    double uniform();                  // [0, 1)
    double uniform(double lo, double hi);
    long below(long n);                // [0, n)

private:
    std::uint64_t state_;
};

// Element-wise comparison with a norm-wise relative tolerance: element i matches when
// |got[i] - want[i]| <= rel_tol * max_j |want[j]|. Scaling by the largest reference magnitude
// keeps elements that are near zero from failing on rounding noise.
struct Compare {
    bool ok = true;
    double max_err = 0;     // max |got - want| / scale
    std::size_t worst = 0;  // index of that element
    double got = 0, want = 0;
};
Compare compare_rel(const double* got, const double* want, std::size_t n, double rel_tol);

// The outcome of one run. `check` says what was compared and with which tolerance; `failure` is
// empty on PASS, else what differed. `params` are extra JSON keys (numbers or strings, already
// formatted as JSON values: json_number, json_string, std::to_string) describing the problem, e.g. {"n", "128"}.
struct Report {
    const char* app = "";
    Options opt;
    double parallel_s = 0;
    std::string problem;  // human-readable problem size, e.g. "128x128 grid, 2 iterations"
    std::vector<std::string> checks;    // one entry per comparison made
    std::vector<std::string> failures;  // one entry per comparison that failed
    std::vector<std::pair<std::string, std::string>> params;

    // Records one comparison: `what` describes it, `fail` is empty when it held.
    void add(std::string what, std::string fail);
    // An element-wise comparison (compare_rel) of the parallel result `name` against the reference
    // described by `against`, e.g. add_array("grid", "sequential reference", ...). With row_len > 0
    // a failure names the element as [i / row_len][i % row_len].
    void add_array(const std::string& name, const std::string& against, const double* got, const double* want,
                   std::size_t n, double rel_tol, std::size_t row_len = 0);
};

// Prints the report (text: a summary, the parallel time, then PASS or FAIL: ...; --json: one
// object on one line) and returns the exit status: 0 on PASS, 1 on FAIL.
int finish(const Report& r);

std::string json_string(const std::string& s);
std::string json_number(double v);  // a JSON number; null when not finite (JSON has no inf or nan)
std::string fmt_double(double v);  // shortest round-trip form, for text and JSON

}  // namespace apps

#endif  // ICCS_APPS_COMMON_APP_COMMON_HPP
