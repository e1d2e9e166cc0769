// launcher.cpp: launch_clusters() (cluster.hpp): one process per cluster on this host, forked
// before any DPDK call, waited for, and cleaned up after (EAL runtime dirs, sockets, af_packet's
// bridge), also when a cluster crashes or the user presses Ctrl-C.
#include "cluster.hpp"

#include <execinfo.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>

#include "activity.hpp"
#include "cluster_memory.hpp"
#include "dpdk_env.hpp"
#include "owner_only.hpp"
#include "pcapng.hpp"

namespace iccs {

#ifdef ICCS_LAUNCHER_EXEC_ONLY
// In cli/'s iccs-run (compute/meson.build): a forked cluster process of a program given by path
// runs plan.process_main (an exec), never the built-in programs' cluster, so it is named weakly
// and neither it nor the proxies, nor DPDK's libraries with their constructors, are linked.
ClusterReport run_cluster(const ClusterPlan& plan) __attribute__((weak));
void print_report(const ClusterPlan& plan, const ClusterReport& r, FILE* out) __attribute__((weak));
// (the proxies' pools sized by DPDK's rules: checked for runs over the fabric only, which iccs-run
// hands to iccs-cli: cli/run_rt.cpp)
bool run_memory_fits(const ClusterPlan& plan, std::string& err) __attribute__((weak));
#endif

bool pcap_dir_ready(const std::string& dir, std::string& err) {
    std::error_code ec;
    if (!std::filesystem::exists(dir, ec)) {
        // A directory we create is owner-only; one the user gave keeps its mode (the files are 0600).
        const OwnerOnlyUmask owner_only;
        std::filesystem::create_directories(dir, ec);
    }
    if (ec) {
        err = "--pcap " + dir + ": cannot create the directory: " + ec.message();
        return false;
    }
    if (!std::filesystem::is_directory(dir, ec)) {
        err = "--pcap " + dir + ": not a directory";
        return false;
    }
    if (access(dir.c_str(), W_OK | X_OK) != 0) {
        err = "--pcap " + dir + ": not writable: " + std::strerror(errno);
        return false;
    }
    return true;
}

// fabric af_packet: a Linux bridge "icbr<run>" and, per proxy, a veth pair whose "ic..." end the
// proxy's af_packet port opens and whose "ib..." end is on the bridge. No IP address is given
// to the kernel side (the stacks are in the proxies); IPv6 is off so the kernel stays quiet.
static bool sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

static std::string afp_bridge(const ClusterPlan& plan) { return "icbr" + plan.run_id; }

bool afp_fabric_up(const ClusterPlan& plan) {
    const std::string br = afp_bridge(plan);
    if (!sh("ip link add " + br + " type bridge") || !sh("ip link set " + br + " up")) {
        std::fprintf(stderr, "iccs: fabric af_packet needs root and iproute2 to create bridge %s and veth pairs\n",
                     br.c_str());
        return false;
    }
    sh("sysctl -w net.ipv6.conf." + br + ".disable_ipv6=1");
    const uint32_t run_hash = static_cast<uint32_t>(std::hash<std::string>{}(plan.run_id));
    for (uint16_t c = 0; c < plan.clusters; ++c)
        for (uint16_t p = 0; p < plan.proxies_per_cluster[c]; ++p) {
            const std::string a = afp_ifname(plan, c, p);
            std::string b = a;
            b[1] = 'b';
            const std::string mtu = std::to_string(plan.mtu_bytes);
            // The proxy's end gets an interface index of our choosing. DPDK 22.11's af_packet
            // PMD joins each socket to the fanout group (its pid ^ ifindex) & 0xffff, and the
            // kernel refuses (EINVAL) a group id already used on another interface: with the
            // kernel's consecutive indexes (ours n, n + 2, ...) two clusters whose pids differ by
            // 2 (a process or thread made between the launcher's forks, on a busy host) met in one
            // group and the second could not create its port ("could not set PACKET_FANOUT").
            // Indexes whose low 16 bits are multiples of 256 differ from each other in bits 8-15
            // only, which pids that differ by less than 256 never do in the same way.
            const uint32_t slot = uint32_t{c} * 64 + p;
            const uint32_t low = (slot & 0xff) << 8;
            bool made = false;
            for (uint32_t attempt = 0; attempt < 16 && !made; ++attempt) {  // (an index in use: the next)
                const uint32_t index = 0x10000u * (1 + (run_hash + attempt * 7919 + (slot >> 8)) % 30000) + low;
                made = sh("ip link add " + a + " index " + std::to_string(index) + " mtu " + mtu + " type veth peer name " +
                          b + " mtu " + mtu);
            }
            if (!made || !sh("ip link set " + b + " master " + br) || !sh("ip link set " + b + " up") ||
                !sh("ip link set " + a + " up")) {
                std::fprintf(stderr, "iccs: cannot create veth pair %s/%s on bridge %s\n", a.c_str(), b.c_str(),
                             br.c_str());
                return false;
            }
            sh("sysctl -w net.ipv6.conf." + a + ".disable_ipv6=1");
            sh("sysctl -w net.ipv6.conf." + b + ".disable_ipv6=1");
        }
    return true;
}

void afp_fabric_down(const ClusterPlan& plan) {
    // One `ip` for every link (a shell and an `ip` a link took some 20 ms each here: a run's end
    // waits for it). Deleting one end of a veth pair deletes both.
    FILE* ip = popen("ip -force -batch - >/dev/null 2>&1", "w");
    if (ip == nullptr) return;
    for (uint16_t c = 0; c < plan.clusters; ++c)
        for (uint16_t p = 0; p < plan.proxies_per_cluster[c]; ++p)
            std::fprintf(ip, "link del %s\n", afp_ifname(plan, c, p).c_str());
    std::fprintf(ip, "link del %s\n", afp_bridge(plan).c_str());
    pclose(ip);
}

// Runtime dirs and socket dirs of runs whose launcher is gone (killed with SIGKILL, or the
// machine rebooted mid-run): iccs-<pid>-c<id> and /tmp/iccs-<pid> with no process <pid>.
static void remove_stale_runs() {
    std::error_code ec;
    auto stale = [](const std::string& name, const char* prefix) -> bool {
        if (name.rfind(prefix, 0) != 0) return false;
        const std::string rest = name.substr(std::strlen(prefix));
        char* end = nullptr;
        const long pid = std::strtol(rest.c_str(), &end, 10);
        if (end == rest.c_str() || pid <= 0 || (*end != '\0' && *end != '-')) return false;
        return kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
    };
    const std::string rundir = std::filesystem::path(eal_runtime_dir("x")).parent_path();
    for (const auto& e : std::filesystem::directory_iterator(rundir, ec))
        if (stale(e.path().filename().string(), "iccs-")) std::filesystem::remove_all(e.path(), ec);
    for (const auto& e : std::filesystem::directory_iterator("/tmp", ec))
        if (e.is_directory(ec) && stale(e.path().filename().string(), "iccs-")) std::filesystem::remove_all(e.path(), ec);
}

// Before any fork: the run's socket directory (owner-only), and what the fabric needs (io_uring,
// the capture directory, af_packet's bridge). 0, or the launcher's exit status with the reason
// printed.
static int prepare_run(ClusterPlan& plan) {
    if (const std::string w = unauthenticated_fabric_warning(plan); !w.empty()) std::fprintf(stderr, "%s\n", w.c_str());
    plan.sock_dir = "/tmp/iccs-" + plan.run_id;
    std::error_code ec;
    {
        // Owner-only (0700), and never another user's directory or a planted symlink (issue 17).
        std::string err;
        struct stat st{};
        if (lstat(plan.sock_dir.c_str(), &st) == 0 && (S_ISLNK(st.st_mode) || st.st_uid != geteuid()))
            err = plan.sock_dir + ": permission denied: owned by UID " + std::to_string(st.st_uid) +
                  (S_ISLNK(st.st_mode) ? " (a symlink)" : "");
        if (err.empty()) std::filesystem::remove_all(plan.sock_dir, ec);  // a stale socket says "Address already in use"
        if (err.empty()) make_private_dir(plan.sock_dir, err);
        if (!err.empty()) {
            std::fprintf(stderr, "iccs: run directory %s\n", err.c_str());
            return 2;
        }
    }
    if (plan.fabric == "udp" && !plan.no_fabric) {
        // Refused io_uring (old kernel, seccomp, io_uring_disabled) stops the run here, with the
        // alternative named, not later inside every cluster.
        UringCaps caps;
        std::string err;
        if (!uring_probe(caps, err)) {
            std::fprintf(stderr, "iccs: %s\n", err.c_str());
            std::filesystem::remove_all(plan.sock_dir, ec);
            return 2;
        }
    }
    if (!plan.pcap_dir.empty() && !plan.no_fabric) {
        std::string err;
        if (plan.fabric == "udp") err = "--pcap records the frames of DPDK ports (fabrics memif, af_packet, pci); "
                                        "fabric udp has kernel sockets and no frames (capture those with tcpdump -i lo)";
        if (err.empty()) pcap_dir_ready(plan.pcap_dir, err);
        if (!err.empty()) {
            std::fprintf(stderr, "iccs: %s\n", err.c_str());
            std::filesystem::remove_all(plan.sock_dir, ec);
            return 2;
        }
    }
    if (!plan.no_fabric) {
        // Issue 34: a run this host cannot hold stops here with the figures (cluster_memory.hpp),
        // not inside DPDK in one cluster while the others wait for it.
        std::string err;
#ifdef ICCS_LAUNCHER_EXEC_ONLY
        if (run_memory_fits == nullptr) {
            std::fprintf(stderr, "iccs: this launcher runs over shared memory only (use iccs-cli)\n");
            std::filesystem::remove_all(plan.sock_dir, ec);
            return 2;
        }
#endif
        if (!run_memory_fits(plan, err)) {
            std::fprintf(stderr, "iccs: %s\n", err.c_str());
            std::filesystem::remove_all(plan.sock_dir, ec);
            return 2;
        }
    }
    for (uint16_t c = 0; c < plan.clusters; ++c) {  // what each cluster is doing (activity.hpp)
        std::string err;
        if (!activity_create(activity_path(plan.sock_dir, c), err)) {
            std::fprintf(stderr, "iccs: run directory: %s\n", err.c_str());
            std::filesystem::remove_all(plan.sock_dir, ec);
            return 2;
        }
    }
    if (plan.fabric == "af_packet" && !plan.no_fabric && !afp_fabric_up(plan)) {
        afp_fabric_down(plan);
        std::filesystem::remove_all(plan.sock_dir, ec);
        return 1;
    }
    return 0;
}

// The forked process of cluster c: runs it and exits with its status.
[[noreturn]] static void cluster_process(const ClusterPlan& plan, uint16_t c, pid_t launcher,
                                        const sigset_t& mask) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive the launcher
    if (getppid() != launcher) _exit(1);  // it died before the line above
    // The launcher takes its signals synchronously; a cluster process gets them as they come
    // (cluster_stop.hpp installs what SIGINT and SIGTERM do).
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    sigprocmask(SIG_SETMASK, &mask, nullptr);
    // A crash says where, on stderr, before the launcher reports the signal.
    signal(SIGSEGV, [](int sig) {
        void* frames[48];
        const int n = backtrace(frames, 48);
        const char msg[] = "iccs: cluster process crashed; backtrace:\n";
        (void)!write(2, msg, sizeof msg - 1);
        backtrace_symbols_fd(frames, n, 2);
        signal(sig, SIG_DFL);
        raise(sig);
    });
    // A quiet run (a benchmark) keeps stdout for its own result (`bench --json`): the
    // cluster's report goes to stderr.
    if (plan.quiet) dup2(2, 1);
    // Every cluster process writes to the same stdout: fully buffered into a pipe, a 4 KiB buffer
    // flushed mid-line puts another cluster's lines inside this one's (a report's table row cut
    // in two). A line written whole is under PIPE_BUF, so the kernel never splits it.
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    ClusterPlan mine = plan;
    mine.cluster_id = c;
    mine.exit_without_teardown = true;  // this process _exit()s right after the report
    if (plan.process_main) {
        const int rc = plan.process_main(mine);
        std::fflush(stdout);
        std::fflush(stderr);
        _exit(rc);
    }
#ifdef ICCS_LAUNCHER_EXEC_ONLY
    if (run_cluster == nullptr) {  // (a built-in program asked of iccs-run: its callers never do)
        std::fprintf(stderr, "iccs: this launcher runs programs given by path only (use iccs-cli)\n");
        _exit(2);
    }
#endif
    const ClusterReport r = run_cluster(mine);
    if (!plan.quiet || !r.ok) print_report(mine, r);  // benchmarks print their own figures
    std::fflush(stdout);
    _exit(r.ok ? 0 : 1);
}

namespace {

// How long a cluster asked to stop may take before it is killed: its own stop takes at most
// kStopBudgetMs (cluster_stop.hpp).
constexpr auto kStopGrace = std::chrono::milliseconds(1000);
// How long the others may take to end by themselves after a cluster exited with a status before
// the run's end (on_end): the same exit in every cluster takes them that long at most here.
constexpr auto kExitGrace = std::chrono::milliseconds(1000);
using Clock = std::chrono::steady_clock;

struct Child {
    pid_t pid = 0;
    bool reaped = false;
    bool stopped = false;  // the launcher asked it to stop (a signal it sent): its end is not a failure
    bool killed = false;   // it did not stop in time and got SIGKILL
    bool clean = false;    // exited 0 by itself (its captures were closed whole)
    bool dying = false;    // seen exiting before its run's end (look_for_dying): not to be stopped
};

// The cluster processes of one run and what the launcher does about them (launch_clusters).
class RunWatch {
   public:
    RunWatch(const ClusterPlan& plan, std::vector<Child> kids) : plan_(plan), kids_(std::move(kids)) {
        const char* keep = std::getenv("ICCS_KEEP_SURVIVORS");
        keep_survivors_ = keep != nullptr && std::strcmp(keep, "1") == 0;
    }

    // Until every cluster ended: deaths, signals, the time-out. Returns the run's exit status.
    int wait(uint32_t timeout_s, const sigset_t& signals, const LaunchTick& tick) {
        const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
        auto next_tick = Clock::now() + std::chrono::seconds(1);
        size_t left = kids_.size();
        while (left > 0) {
            const timespec wait_ts{0, 20'000'000};
            siginfo_t info{};
            const int sig = sigtimedwait(&signals, &info, &wait_ts);
            if (sig == SIGINT || sig == SIGTERM) on_user_signal(sig);
            int status = 0;
            for (pid_t pid; (pid = waitpid(-1, &status, WNOHANG)) > 0;)
                for (size_t i = 0; i < kids_.size(); ++i)
                    if (kids_[i].pid == pid && !kids_[i].reaped) {
                        --left;
                        on_end(i, status);
                    }
            look_for_dying();
            const auto now = Clock::now();
            if (!timed_out_ && now > deadline) {
                std::fprintf(stderr, "iccs: run timed out after %u s: stopping the clusters\n", timeout_s);
                timed_out_ = true;
                stop_all(SIGTERM, false);
            }
            if (stop_others_at_ != Clock::time_point{} && now > stop_others_at_) {  // (on_end)
                stop_others_at_ = {};
                stop_all(SIGTERM, true);
            }
            if (survivors_until_ != Clock::time_point{} && now > survivors_until_) {  // (on_end)
                survivors_until_ = {};
                stop_all(SIGTERM, true);
            }
            if (kill_at_ != Clock::time_point{} && now > kill_at_) {
                for (size_t i = 0; i < kids_.size(); ++i)
                    if (!kids_[i].reaped && kids_[i].stopped && !kids_[i].killed && !exiting(kids_[i].pid)) {
                        std::fprintf(stderr, "iccs: cluster %zu did not stop within %lld ms: killed\n", i,
                                     static_cast<long long>(kStopGrace.count()));
                        kill(kids_[i].pid, SIGKILL);
                        kids_[i].killed = true;
                    }
                kill_at_ = {};
            }
            if (tick && now >= next_tick && left > 0) {
                std::vector<pid_t> pids;
                for (const Child& k : kids_) pids.push_back(k.reaped ? 0 : k.pid);
                tick(pids);
                next_tick = now + std::chrono::seconds(1);
            }
        }
        if (user_signal_ != 0) return 128 + user_signal_;
        if (first_status_ != 0) return first_status_;
        return timed_out_ ? 1 : 0;
    }

    const std::vector<Child>& children() const { return kids_; }

   private:
    // SIGINT/SIGTERM to the launcher (a Ctrl-C, `timeout`, a batch system): the same signal to
    // every cluster, each stops within kStopBudgetMs and says what it was doing; a second one
    // kills them all at once.
    void on_user_signal(int sig) {
        if (user_signal_ != 0) {
            std::fprintf(stderr, "iccs: %s again: killing every cluster\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
            for (Child& k : kids_)
                if (!k.reaped) {
                    kill(k.pid, SIGKILL);
                    k.stopped = k.killed = true;
                }
            return;
        }
        user_signal_ = sig;
        std::fprintf(stderr, "iccs: %s: stopping every cluster (%s again kills them at once)\n",
                     sig == SIGINT ? "SIGINT" : "SIGTERM", sig == SIGINT ? "Ctrl-C" : "the signal");
        stop_all(sig, false);
    }

    // Ask every cluster still running to stop (not those past their run, with finished_spared:
    // they only report and exit).
    void stop_all(int sig, bool finished_spared) {
        for (size_t i = 0; i < kids_.size(); ++i) {
            Child& k = kids_[i];
            if (k.reaped || k.stopped || k.dying) continue;
            if (finished_spared && activity_read(activity_path(plan_.sock_dir, static_cast<uint16_t>(i))).phase ==
                                       ClusterPhase::kFinished)
                continue;
            kill(k.pid, sig);
            k.stopped = true;
        }
        kill_at_ = Clock::now() + kStopGrace;
    }

    void on_end(size_t i, int status) {
        Child& k = kids_[i];
        k.reaped = true;
        const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        // One the launcher stopped: that is not a fault of its own (it said what it was doing).
        // Its captures are not known whole even when it exited by itself: its stop closes them
        // only if its proxies halt within 200 ms (a loaded host: not always), so the launcher
        // cuts them after their last whole block (a no-op on a whole file). But a crash signal is
        // not one the launcher sends (SIGTERM, SIGKILL): a stopped cluster that ends by one crashed
        // by itself (already in its fault handler when it was told to stop, or while stopping) and
        // is named as any crash is.
        const bool crash = WIFSIGNALED(status) && (WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGBUS ||
                                                   WTERMSIG(status) == SIGABRT || WTERMSIG(status) == SIGILL ||
                                                   WTERMSIG(status) == SIGFPE);
        if (k.stopped && !crash) return;
        k.clean = ok;
        if (ok) return;
        if (plan_.workload == "errors" && i == 1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
            std::fprintf(stderr, "iccs: cluster 1 killed itself, as the errors program does\n");
            return;
        }
        // Name the cluster, what ended it, and what it was doing (activity.hpp: the page outlives
        // the process). The run's status is the first failing cluster's own (a program's exit(3)
        // makes `iccs run` exit 3; a signal, 128 + it).
        // A cluster that fails after another died before the run's end (its peer went down under
        // it) is not a second fault; a crash always is, and so is a failure after the first one
        // had finished its run (every cluster's own status, as a program's exit(3) everywhere).
        if (first_failed_ >= 0 && first_died_mid_run_ && !crash) {
            std::fprintf(stderr, "iccs: cluster %zu ended too (%s %d) after cluster %d\n", i,
                         WIFSIGNALED(status) ? "signal" : "status", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
                         first_failed_);
            return;
        }
        if (first_failed_ < 0) first_failed_ = static_cast<int>(i);
        const ActivityReport a = activity_read(activity_path(plan_.sock_dir, static_cast<uint16_t>(i)));
        const bool before_end = a.phase != ClusterPhase::kFinished;
        // (after its run's end only the status matters: the program's own exit)
        const std::string doing = a.readable && before_end ? " while " + a.line : std::string();
        if (first_failed_ == static_cast<int>(i)) first_died_mid_run_ = before_end;
        const bool mid_run = before_end && !keep_survivors_;
        const char* stopping = k.dying || k.stopped ? "" : ": stopping the others";  // (said, or under way)
        const bool before_parallel = before_its_threads(a);  // (below)
        if (WIFSIGNALED(status))
            std::fprintf(stderr, "iccs: cluster %zu died of signal %d (%s)%s%s\n", i, WTERMSIG(status),
                         strsignal(WTERMSIG(status)), doing.c_str(), mid_run ? stopping : "");
        else
            std::fprintf(stderr, "iccs: cluster %zu exited with status %d%s%s\n", i, WEXITSTATUS(status), doing.c_str(),
                         !mid_run ? ""
                         : before_parallel ? ": stopping the others within 1 s unless they end"
                                           : stopping);
        if (first_status_ == 0)
            first_status_ = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WIFEXITED(status) ? WEXITSTATUS(status) : 1;
        // Before the end of the run the others cannot finish without it: stop them now, not
        // after their peer time-out (issue 34: a dead cluster ends the run within 1 s). Those
        // already finished (reporting) end by themselves.
        // A program's own exit (a status, no signal) before its parallel part is often every
        // cluster's: a usage error exits 2 in each, and only cluster 0's words are shown (the
        // PARMACS layer silences the others before CREATE). Stopping cluster 0 at once could cut
        // it off before it said why, so such an exit stops the others after kExitGrace unless they
        // end by themselves. An exit once its compute threads ran (a.program_threads), or outside
        // the program (set-up, ending), a crash or a kill stops them now: the others wait on it.
        if (mid_run && (WIFSIGNALED(status) || !before_parallel)) stop_all(SIGTERM, true);
        else if (mid_run && stop_others_at_ == Clock::time_point{}) stop_others_at_ = Clock::now() + kExitGrace;
        // A failure after its run's end (it reported, e.g. its peer went down), or any with
        // ICCS_KEEP_SURVIVORS=1: the others find out by themselves, as under mpirun (a closed
        // memif link, the fabric's silence, the direct transport's peer check); they are stopped
        // if they have not ended peer_timeout_ms + 5 s later, never left to the run's time-out.
        if (!mid_run && survivors_until_ == Clock::time_point{})
            survivors_until_ = Clock::now() + std::chrono::milliseconds(plan_.peer_timeout_ms + 5000);
    }

    // A cluster the kernel is taking down (killed, crashed, _exit) is seen at once, not when it
    // can be reaped: tearing down its memory and sockets takes the kernel 0.5-1.2 s here under load
    // (a packet socket's close alone waits for an RCU grace period: af_packet.hpp), and the others
    // wait on it meanwhile. One that dies before its run's end stops the others now, as on_end
    // would once it is reaped; on_end still names it, with its signal or status. Not one that
    // finished its run, nor a program that has not started its threads (its exit may be a usage
    // error every cluster makes: on_end's grace), nor with ICCS_KEEP_SURVIVORS=1.
    // Every cluster going down at this look is marked, not only the first: two can be seen at once
    // (a crash, and a peer that failed at once on the closed link), and one marked stopped would
    // have its own end go unreported (on_end).
    void look_for_dying() {
        if (dying_seen_ || keep_survivors_ || user_signal_ != 0) return;
        std::string which;
        size_t n = 0;
        for (size_t i = 0; i < kids_.size(); ++i) {
            Child& k = kids_[i];
            if (k.reaped || k.stopped || !exiting_flag(k.pid)) continue;
            if (plan_.workload == "errors" && i == 1) continue;  // it kills itself: the others must see it (on_end)
            const ActivityReport a = activity_read(activity_path(plan_.sock_dir, static_cast<uint16_t>(i)));
            if (a.phase == ClusterPhase::kFinished || before_its_threads(a)) continue;
            k.dying = true;
            which += (n++ == 0 ? "" : ", ") + std::to_string(i);
        }
        if (n == 0) return;
        dying_seen_ = true;
        std::fprintf(stderr, "iccs: %s %s going down before the run's end: stopping the others\n",
                     n == 1 ? "cluster" : "clusters", (which + (n == 1 ? " is" : " are")).c_str());
        stop_all(SIGTERM, true);
    }

    // A program that has not started its compute threads: its exit with a status may be a usage
    // error that every cluster makes (on_end's grace). A program of the user's runs its main
    // before it starts the runtime (the page still says "starting"); ours start in set-up.
    bool before_its_threads(const ActivityReport& a) const {
        if (a.program_threads) return false;
        return a.phase == ClusterPhase::kRunning ||
               (plan_.user_program && (a.phase == ClusterPhase::kStarting || a.phase == ClusterPhase::kLinks));
    }

    // /proc/PID/stat after the command's closing parenthesis (" S ppid pgrp ... flags ...");
    // false when the process is gone or the line is not whole.
    static bool stat_after_comm(pid_t pid, char* buf, size_t len, const char*& rest) {
        char path[64];
        std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
        FILE* f = std::fopen(path, "r");
        if (f == nullptr) return false;
        const size_t n = std::fread(buf, 1, len - 1, f);
        std::fclose(f);
        buf[n] = '\0';
        rest = n > 0 ? std::strrchr(buf, ')') : nullptr;  // the command may hold ')' itself
        return rest != nullptr && rest[1] != '\0';
    }

    // The kernel's PF_EXITING on the process's main thread (field 9): set at the start of its
    // exit, before its memory and files are released.
    static bool exiting_flag(pid_t pid) {
        char buf[512];
        const char* rest = nullptr;
        unsigned long flags = 0;
        // state ppid pgrp session tty_nr tpgid flags
        if (!stat_after_comm(pid, buf, sizeof buf, rest) ||
            std::sscanf(rest + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags) != 1)
            return false;
        constexpr unsigned long kPfExiting = 0x4;
        return (flags & kPfExiting) != 0;
    }

    // Its main thread has exited (a zombie) and the kernel is taking the rest down (unmapping its
    // memory takes a while on a loaded host): it stopped, nothing to kill.
    static bool exiting(pid_t pid) {
        char buf[512];
        const char* rest = nullptr;
        if (!stat_after_comm(pid, buf, sizeof buf, rest)) return true;
        return rest[2] == 'Z' || rest[2] == 'X';
    }

    const ClusterPlan& plan_;
    std::vector<Child> kids_;
    int user_signal_ = 0, first_status_ = 0, first_failed_ = -1;
    bool timed_out_ = false;
    Clock::time_point kill_at_{};
    bool keep_survivors_ = false;
    bool first_died_mid_run_ = false;  // the first failing cluster ended before its run's end
    bool dying_seen_ = false;          // look_for_dying stopped the others
    Clock::time_point survivors_until_{};
    Clock::time_point stop_others_at_{};  // a cluster exited with a status before the end (on_end)
};

}  // namespace

int launch_clusters(ClusterPlan plan, uint32_t timeout_s, const LaunchTick& tick) {
    if (plan.run_id.empty()) plan.run_id = std::to_string(getpid());
    signal(SIGPIPE, SIG_IGN);  // a closed stdout (`| head`) must not kill a run before it cleans up
    remove_stale_runs();
    if (const int rc = prepare_run(plan); rc != 0) return rc;
    // The launcher takes SIGINT, SIGTERM and SIGCHLD synchronously (sigtimedwait): a death or a
    // user's signal is seen at once, and nothing runs in a signal handler.
    sigset_t signals, old_mask;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGCHLD);
    sigprocmask(SIG_BLOCK, &signals, &old_mask);
    std::fflush(stdout);
    std::fflush(stderr);
    std::vector<Child> kids;
    const pid_t launcher = getpid();
    for (uint16_t c = 0; c < plan.clusters; ++c) {
        const pid_t pid = fork();
        if (pid < 0) {
            std::perror("fork");
            for (const Child& k : kids) kill(k.pid, SIGKILL);
            break;
        }
        if (pid == 0) cluster_process(plan, c, launcher, old_mask);
        kids.push_back(Child{pid});
    }
    RunWatch watch(plan, std::move(kids));
    const int rc = watch.children().size() < plan.clusters ? 1 : watch.wait(timeout_s, signals, tick);
    for (const Child& k : watch.children())  // (a fork that failed: reap the ones started)
        if (!k.reaped) waitpid(k.pid, nullptr, 0);
    // Whatever a cluster that died left behind; a capture cut inside a block by a kill ends after
    // its last whole one (tshark reads it to the end).
    std::error_code ec;
    for (uint16_t c = 0; c < plan.clusters; ++c) {
        eal_remove_runtime_dir(eal_prefix(plan, c));
        const bool clean = c < watch.children().size() && watch.children()[c].clean;
        if (!plan.pcap_dir.empty() && !clean)
            for (uint16_t p = 0; p < plan.proxies_per_cluster[c]; ++p) {
                std::string err;
                if (std::filesystem::exists(pcap_path(plan, c, p), ec)) pcapng_cut_to_whole_blocks(pcap_path(plan, c, p), err);
            }
    }
    std::filesystem::remove_all(plan.sock_dir, ec);
    if (plan.fabric == "af_packet" && !plan.no_fabric) afp_fabric_down(plan);
    // Signals that came after the last cluster ended are the launcher's to answer, as they were.
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    return rc;
}

}  // namespace iccs
