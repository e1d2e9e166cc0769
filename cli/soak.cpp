// soak.cpp: `iccs soak --minutes N`: alltoall for N minutes with loss, duplication and reordering on
// every link, WAN emulation and a key on, a progress line every minute (messages delivered, each
// cluster's RSS); PASS when every message arrived exactly once, intact and in order and no cluster's
// RSS grew 5% or more after the first minute (issue 34).
#include "soak.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "activity.hpp"
#include "config.hpp"
#include "run.hpp"
#include "run_table.hpp"

namespace iccs {

namespace {

constexpr double kRssGrowthLimit = 0.05;  // the goal: < 5% after the first minute

// Resident set size of a process [bytes] (/proc/PID/status VmRSS); 0 when it is gone.
uint64_t rss_bytes(pid_t pid) {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/status", static_cast<int>(pid));
    FILE* f = std::fopen(path, "r");
    if (f == nullptr) return 0;
    char line[256];
    uint64_t kb = 0;
    while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "VmRSS: %lu kB", &kb) == 1) break;
    std::fclose(f);
    return kb * 1024;
}

// A fresh key for the run: 32 random bytes in an owner-only file; "" with err on failure.
std::string make_key_file(std::string& err) {
    char path[] = "/tmp/iccs-soak-key-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) {
        err = std::string("cannot create a key file in /tmp: ") + std::strerror(errno);
        return "";
    }
    unsigned char key[32];
    const bool ok = fchmod(fd, 0600) == 0 && getrandom(key, sizeof key, 0) == static_cast<ssize_t>(sizeof key) &&
                    write(fd, key, sizeof key) == static_cast<ssize_t>(sizeof key);
    close(fd);
    if (!ok) {
        err = std::string("cannot write the key file ") + path + ": " + std::strerror(errno);
        unlink(path);
        return "";
    }
    return path;
}

// What the ticks saw: the progress lines and each cluster's RSS after the first minute.
class SoakWatch {
   public:
    SoakWatch(uint32_t seconds, uint32_t every_s)
        : every_s_(every_s), baseline_s_(std::min<uint32_t>(60, std::max<uint32_t>(1, seconds / 2))) {}

    void tick(const std::vector<pid_t>& pids, const std::string& run_dir) {
        const auto now = std::chrono::steady_clock::now();
        uint64_t delivered = 0;
        bool running = true;
        for (size_t c = 0; c < pids.size(); ++c) {
            const ActivityReport a = activity_read(activity_path(run_dir, static_cast<uint16_t>(c)));
            delivered += a.progress;
            running = running && pids[c] != 0 && a.readable && a.phase == ClusterPhase::kRunning;
        }
        if (!started_) {  // the clock starts when every cluster runs its program
            if (!running) return;
            started_ = true;
            t0_ = now;
            rss_first_.assign(pids.size(), 0);
            rss_max_.assign(pids.size(), 0);
        }
        if (!running) return;  // (the end: what the clusters do after their soak is not the soak's)
        const double t = std::chrono::duration<double>(now - t0_).count();
        std::vector<uint64_t> rss(pids.size());
        for (size_t c = 0; c < pids.size(); ++c) rss[c] = rss_bytes(pids[c]);
        if (t >= baseline_s_) {
            for (size_t c = 0; c < pids.size(); ++c) {
                if (rss_first_[c] == 0) rss_first_[c] = rss[c];
                rss_max_[c] = std::max(rss_max_[c], rss[c]);
            }
        }
        delivered_ = delivered;
        if (t + 0.5 < next_line_s_) return;
        next_line_s_ += every_s_;
        std::string line;
        char buf[160];
        std::snprintf(buf, sizeof buf, "soak: %3u:%02u  delivered %llu messages (%.0f/s since the last line)",
                      static_cast<unsigned>(t) / 60, static_cast<unsigned>(t) % 60,
                      static_cast<unsigned long long>(delivered),
                      (delivered - delivered_at_line_) / std::max(1e-3, t - t_at_line_));
        line = buf;
        for (size_t c = 0; c < pids.size(); ++c) {
            std::snprintf(buf, sizeof buf, "; cluster %zu RSS %.1f MiB", c, rss[c] / 1048576.0);
            line += buf;
        }
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
        delivered_at_line_ = delivered;
        t_at_line_ = t;
    }

    // The verdict on memory: true when no cluster grew kRssGrowthLimit or more after the baseline.
    bool memory_ok(std::string& said) const {
        if (!started_ || rss_first_.empty() || rss_first_[0] == 0) {
            said = "RSS not measured: the soak ended before its baseline at " + std::to_string(baseline_s_) + " s";
            return false;
        }
        bool ok = true;
        char buf[160];
        for (size_t c = 0; c < rss_first_.size(); ++c) {
            const double growth = rss_first_[c] ? double(rss_max_[c]) / double(rss_first_[c]) - 1.0 : 0.0;
            ok = ok && growth < kRssGrowthLimit;
            std::snprintf(buf, sizeof buf, "%scluster %zu %.1f -> %.1f MiB (%+.1f%%)", c ? ", " : "", c,
                          rss_first_[c] / 1048576.0, rss_max_[c] / 1048576.0, 100.0 * growth);
            said += buf;
        }
        said = "RSS from " + std::to_string(baseline_s_) + " s to the end (largest): " + said;
        return ok;
    }
    uint64_t delivered() const { return delivered_; }

   private:
    uint32_t every_s_, baseline_s_;
    bool started_ = false;
    std::chrono::steady_clock::time_point t0_{};
    double next_line_s_ = every_s_, t_at_line_ = 0;
    uint64_t delivered_ = 0, delivered_at_line_ = 0;
    std::vector<uint64_t> rss_first_, rss_max_;
};

}  // namespace

int cmd_soak(int argc, char** argv) {
    static const std::vector<cli::Option> own = {
        cli::real_opt("--minutes", "N", 0.05, 10080, "how long the messages flow", "10"),
        cli::uint_opt("--every", "S", 1, 3600, "seconds between progress lines", "60"),
        cli::uint_opt("--min-size", "N", 0, 16u << 20, "smallest message payload [bytes]", "1"),
        cli::uint_opt("--max-size", "N", 0, 16u << 20, "largest message payload [bytes]", "4000"),
        cli::text_opt("--key", "FILE",
                      "the run's key ([security] key_file; >= 32 random bytes, mode 0600); default: a fresh "
                      "32-byte key in /tmp, removed at the end"),
        cli::flag("--inject-error", "test hook: thread 0.0's message 1 to thread 1.0 leaves with a byte wrong; the "
                                    "soak must FAIL at once, naming it (exit 1)"),
        cli::uint_opt("--timeout", "S", 1, 1'000'000, "stop the run after S seconds (default: the soak's length + 300)")};
    cli::OptionSet set;
    set.who = "soak";
    set.own = &own;
    set.groups = {&machine_options(), &config_options()};
    const std::string help =
        "usage: iccs soak [--minutes N] [--every S] [options]\n"
        "  alltoall (iccs run alltoall) for N minutes instead of a message count: every compute thread\n"
        "  sends to every compute thread of every other cluster over an ordered parallel connection,\n"
        "  every message checked (intact, exactly once, in order); then each sender says how many it\n"
        "  sent and each receiver takes messages until what it got adds up. By default on every link:\n"
        "  frames dropped (--drop 0.01), duplicated (--duplicate 0.01) and reordered (--reorder 8), WAN\n"
        "  emulation on (--wan-latency-ms 1, every cluster its own site), every datagram authenticated\n"
        "  with a fresh key (--key FILE to give one); 2 clusters x 2 threads, memif, adaptive polling.\n"
        "  Any of these can be changed with the machine options below. Every --every seconds one line:\n"
        "  the time, messages delivered so far and each cluster's resident memory (RSS).\n"
        "  PASS when every message arrived exactly once, intact and in order and no cluster's RSS grew\n"
        "  5% or more after the first minute (its RSS at 1 minute, or at half the soak when shorter,\n"
        "  against the largest seen later). The clusters' reports (per-proxy counters) follow the run.\n" +
        cli::option_help(set) + "Exit status: 0 PASS, 1 FAIL, 2 a usage error (naming the flag).\n";
    cli::Args p = cli::parse_options(set, argc, argv, 0, help);
    if (p.u64("--min-size", 1) > p.u64("--max-size", 4000))
        cli::usage_error("soak", "--min-size " + std::to_string(p.u64("--min-size", 1)) + " exceeds --max-size " +
                                     std::to_string(p.u64("--max-size", 4000)));
    setvbuf(stdout, nullptr, _IOLBF, 0);
    const double minutes = p.real("--minutes", 10);
    const uint32_t seconds = static_cast<uint32_t>(std::max(1.0, std::round(minutes * 60)));
    // alltoall's own options with the soak's defaults (run.cpp reads them from the arguments)
    if (!p.has("--min-size")) p.set("--min-size", "1");
    if (!p.has("--max-size")) p.set("--max-size", "4000");
    std::string key = p.text("--key"), err;
    const bool own_key = key.empty();
    if (own_key && (key = make_key_file(err)).empty()) {
        std::fprintf(stderr, "iccs soak: %s\n", err.c_str());
        return 1;
    }
    SoakHooks h;
    h.seconds = seconds;
    h.defaults = {{"machine.clusters", "2"},       {"cluster.compute_threads", "2"}, {"machine.fabric", "\"memif\""},
                  {"cluster.polling", "\"adaptive\""}, {"convergence.order", "\"ordered\""}, {"test.drop", "0.01"},
                  {"test.duplicate", "0.01"},      {"test.reorder_window", "8"},     {"wan.latency_ms", "1"},
                  {"security.key_file", json_quote(key)}};
    SoakWatch watch(seconds, static_cast<uint32_t>(p.u64("--every", 60)));
    h.tick = [&watch](const std::vector<pid_t>& pids, const std::string& run_dir) { watch.tick(pids, run_dir); };
    const int rc = run_alltoall_soak(p, h);
    if (own_key) unlink(key.c_str());
    std::string mem;
    const bool mem_ok = watch.memory_ok(mem);
    std::printf("soak: %s\n", mem.c_str());
    if (rc == 0 && mem_ok) {
        std::printf("PASS: every message arrived exactly once, intact and in order (%llu or more delivered in %u s); "
                    "no cluster's RSS grew %.0f%% after the first minute\n",
                    static_cast<unsigned long long>(watch.delivered()), seconds, 100 * kRssGrowthLimit);
        return 0;
    }
    // A user's Ctrl-C (or a SIGTERM to `iccs soak`) ends the run 128 + the signal: say so, not
    // that the run failed.
    const char* why = rc == 128 + SIGINT    ? "interrupted (SIGINT) before its end: nothing was checked to the end"
                       : rc == 128 + SIGTERM ? "stopped (SIGTERM) before its end: nothing was checked to the end"
                       : rc != 0             ? "the run failed (see the clusters' lines above)"
                                             : "a cluster's RSS grew 5% or more after the first minute";
    std::printf("FAIL: %s\n", why);
    return rc != 0 ? rc : 1;
}

}  // namespace iccs
