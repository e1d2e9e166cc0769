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
#include <thread>

#include "dpdk_env.hpp"
#include "owner_only.hpp"

namespace iccs {

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

static std::vector<pid_t> g_children;
static void forward_signal(int sig) {
    for (pid_t c : g_children) kill(c, sig == SIGINT ? SIGTERM : sig);
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
    for (uint16_t c = 0; c < plan.clusters; ++c)
        for (uint16_t p = 0; p < plan.proxies_per_cluster[c]; ++p) {
            const std::string a = afp_ifname(plan, c, p);
            std::string b = a;
            b[1] = 'b';
            const std::string mtu = std::to_string(plan.mtu_bytes);
            if (!sh("ip link add " + a + " mtu " + mtu + " type veth peer name " + b + " mtu " + mtu) ||
                !sh("ip link set " + b + " master " + br) || !sh("ip link set " + b + " up") ||
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
    for (uint16_t c = 0; c < plan.clusters; ++c)
        for (uint16_t p = 0; p < plan.proxies_per_cluster[c]; ++p) sh("ip link del " + afp_ifname(plan, c, p));
    sh("ip link del " + afp_bridge(plan));
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
    if (plan.fabric == "af_packet" && !plan.no_fabric && !afp_fabric_up(plan)) {
        afp_fabric_down(plan);
        std::filesystem::remove_all(plan.sock_dir, ec);
        return 1;
    }
    return 0;
}

// The forked process of cluster c: runs it and exits with its status.
[[noreturn]] static void cluster_process(const ClusterPlan& plan, uint16_t c) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive the launcher
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
    const ClusterReport r = run_cluster(mine);
    if (!plan.quiet || !r.ok) print_report(mine, r);  // benchmarks print their own figures
    std::fflush(stdout);
    _exit(r.ok ? 0 : 1);
}

// Wait for every cluster process (g_children), naming each that failed; stop them all on a
// time-out or after a failure's grace. The first failing cluster's status, or 0.
static int wait_clusters(const ClusterPlan& plan, uint32_t timeout_s, bool& timed_out) {
    int first_status = 0;
    size_t left = g_children.size();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    bool stopping = false;
    timed_out = false;
    std::chrono::steady_clock::time_point kill_at{}, grace_until{};
    std::vector<bool> reaped(g_children.size(), false);
    // SIGTERM to every cluster still running, SIGKILL to those still there 5 s later.
    auto stop_all = [&] {
        if (stopping) return;
        stopping = true;
        kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        for (size_t i = 0; i < g_children.size(); ++i)
            if (!reaped[i]) kill(g_children[i], SIGTERM);
    };
    while (left > 0) {
        int status = 0;
        const pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid > 0) {
            for (size_t i = 0; i < g_children.size(); ++i) {
                if (g_children[i] != pid) continue;
                reaped[i] = true;
                --left;
                if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
                if (plan.workload == "errors" && i == 1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
                    std::fprintf(stderr, "iccs: cluster 1 killed itself, as the errors program does\n");
                    continue;
                }
                // Name the cluster and what ended it; the run's status is the first failing
                // cluster's own (a program's exit(3) makes `iccs run` exit 3; a signal, 128 + it).
                if (WIFSIGNALED(status))
                    std::fprintf(stderr, "iccs: cluster %zu died of signal %d (%s)\n", i, WTERMSIG(status),
                                 strsignal(WTERMSIG(status)));
                else if (WIFEXITED(status))
                    std::fprintf(stderr, "iccs: cluster %zu exited with status %d\n", i, WEXITSTATUS(status));
                if (first_status == 0)
                    first_status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WIFEXITED(status) ? WEXITSTATUS(status) : 1;
                // The others find out through their proxies (peer time-out) and report it; give
                // them that long, then stop them.
                if (!stopping && grace_until == std::chrono::steady_clock::time_point{})
                    grace_until = std::chrono::steady_clock::now() +
                                  std::chrono::milliseconds(plan.peer_timeout_ms != 0 ? plan.peer_timeout_ms + 5000 : 0);
            }
            continue;
        }
        const auto now = std::chrono::steady_clock::now();
        if (grace_until != std::chrono::steady_clock::time_point{} && now > grace_until) stop_all();
        if (!timed_out && now > deadline) {
            std::fprintf(stderr, "iccs: run timed out after %u s: stopping the clusters\n", timeout_s);
            timed_out = true;
            stop_all();
        }
        if (stopping && now > kill_at) {
            for (size_t i = 0; i < g_children.size(); ++i)
                if (!reaped[i]) kill(g_children[i], SIGKILL);
            kill_at = now + std::chrono::hours(1);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return first_status;
}

int launch_clusters(ClusterPlan plan, uint32_t timeout_s) {
    if (plan.run_id.empty()) plan.run_id = std::to_string(getpid());
    signal(SIGPIPE, SIG_IGN);  // a closed stdout (`| head`) must not kill a run before it cleans up
    remove_stale_runs();
    if (const int rc = prepare_run(plan); rc != 0) return rc;
    std::fflush(stdout);
    std::fflush(stderr);
    g_children.clear();
    for (uint16_t c = 0; c < plan.clusters; ++c) {
        const pid_t pid = fork();
        if (pid < 0) {
            std::perror("fork");
            forward_signal(SIGTERM);
            return 1;
        }
        if (pid == 0) cluster_process(plan, c);
        g_children.push_back(pid);
    }
    struct sigaction sa {};
    sa.sa_handler = forward_signal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    bool timed_out = false;
    const int first_status = wait_clusters(plan, timeout_s, timed_out);
    // Whatever a crashed cluster left behind.
    std::error_code ec;
    for (uint16_t c = 0; c < plan.clusters; ++c) eal_remove_runtime_dir(eal_prefix(plan, c));
    std::filesystem::remove_all(plan.sock_dir, ec);
    if (plan.fabric == "af_packet" && !plan.no_fabric) afp_fabric_down(plan);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (first_status == 0 && !timed_out) return 0;
    return first_status != 0 ? first_status : 1;
}

}  // namespace iccs
