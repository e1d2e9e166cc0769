// cluster_stop.cpp: the stop of a cluster process (cluster_stop.hpp): a signal handler that writes
// to a pipe, a stopper thread that reads it, and a watchdog that bounds the stop.
#include "cluster_stop.hpp"

#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "activity.hpp"
#include "clock.hpp"  // now_ns: clock_gettime, async-signal-safe (the signal handler reads it)

namespace iccs {

namespace {

std::atomic<bool> g_installed{false};
std::atomic<bool> g_stopping{false};
std::atomic<uint64_t> g_first_signal_ns{0};
int g_pipe[2] = {-1, -1};
int g_err_fd = 2;
uint16_t g_cluster = 0;

std::mutex g_mu;  // the hooks, and a stop's reason from cluster_stop_now
std::vector<std::pair<int, std::function<void()>>> g_hooks;
int g_next_id = 1;
std::string g_why;
int g_status = 1;
thread_local bool t_is_stopper = false;  // this thread runs the hooks (stopper_main, finish)

void on_signal(int sig) {
    const uint64_t now = now_ns();
    if (g_stopping.exchange(true)) {
        // A second signal: the user insists (a second Ctrl-C), unless it is the other copy of the
        // first (the terminal's and the launcher's, milliseconds apart).
        if (now - g_first_signal_ns.load() >= uint64_t{kSameStopMs} * 1'000'000) _exit(128 + sig);
        return;
    }
    g_first_signal_ns.store(now);
    const unsigned char b = static_cast<unsigned char>(sig);
    (void)!write(g_pipe[1], &b, 1);
}

// Everything after the line: a watchdog, the hooks in order, _exit.
[[noreturn]] void finish(int status) {
    t_is_stopper = true;
    std::thread([status] {
        std::this_thread::sleep_for(std::chrono::milliseconds(kStopBudgetMs));
        _exit(status);
    }).detach();
    std::vector<std::pair<int, std::function<void()>>> hooks;
    {
        std::lock_guard<std::mutex> lock(g_mu);
        hooks = g_hooks;
    }
    for (auto& [id, fn] : hooks) fn();
    // What the program wrote and stdio still holds (a thread holding stdout's lock stops this
    // here: the watchdog ends the process all the same).
    std::fflush(stdout);
    _exit(status);
}

void say(const std::string& what) {
    char act[768];
    std::string line = "cluster " + std::to_string(g_cluster) + ": " + what;
    if (activity_describe_to(act, sizeof act) > 0) line += std::string(" while ") + act;
    line += "\n";
    (void)!write(g_err_fd, line.data(), line.size());
}

void stopper_main() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);  // the handler runs in the program's threads
    unsigned char b = 0;
    for (;;) {
        const ssize_t r = read(g_pipe[0], &b, 1);
        if (r == 1) break;
        if (r < 0 && errno == EINTR) continue;
        return;  // the pipe is gone: nothing will ever stop us through it
    }
    int status = 0;
    if (b == 0) {  // cluster_stop_now
        std::string why;
        {
            std::lock_guard<std::mutex> lock(g_mu);
            why = g_why;
            status = g_status;
        }
        say(why);
    } else {
        status = 128 + b;
        say("stopped by signal " + std::to_string(b) + " (" + strsignal(b) + ")");
    }
    finish(status);
}

}  // namespace

void cluster_stop_install(uint16_t cluster) {
    if (g_installed.exchange(true)) return;
    g_cluster = cluster;
    if (pipe2(g_pipe, O_CLOEXEC) != 0) {
        g_installed.store(false);
        return;
    }
    if (g_err_fd == 2) {  // (unless cluster_stop_report_fd said where)
        const int fd = fcntl(2, F_DUPFD_CLOEXEC, 3);
        if (fd >= 0) g_err_fd = fd;
    }
    std::thread(stopper_main).detach();
    struct sigaction sa{};
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;  // the program's system calls go on; the stopper ends the process
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    sigset_t both;
    sigemptyset(&both);
    sigaddset(&both, SIGINT);
    sigaddset(&both, SIGTERM);
    pthread_sigmask(SIG_UNBLOCK, &both, nullptr);  // a launcher may have blocked them before fork
}

void cluster_stop_report_fd(int fd) {
    if (fd >= 0) g_err_fd = fd;
}

int cluster_stop_add(std::function<void()> hook) {
    std::lock_guard<std::mutex> lock(g_mu);
    g_hooks.emplace_back(g_next_id, std::move(hook));
    return g_next_id++;
}

void cluster_stop_remove(int id) {
    // A stop under way may already run this hook (it took them all under the lock): the caller
    // would undo the same things beside it (closing a capture twice: a survivor stopped while it
    // ended its run crashed in free, fault-kill-memif-exit-run). It waits instead; the stop ends
    // the process (its watchdog within kStopBudgetMs; past twice that, no stop is coming: a
    // stopper whose pipe broke). Only the stopping thread itself goes on (a hook removing one).
    if (g_stopping.load() && !t_is_stopper)
        std::this_thread::sleep_for(std::chrono::milliseconds(2 * kStopBudgetMs));
    std::lock_guard<std::mutex> lock(g_mu);
    std::erase_if(g_hooks, [id](const auto& h) { return h.first == id; });
}

bool cluster_stopping() { return g_stopping.load(std::memory_order_relaxed); }

void cluster_stop_now(int status, const std::string& why) {
    {
        std::lock_guard<std::mutex> lock(g_mu);
        g_why = why;
        g_status = status;
    }
    if (!g_stopping.exchange(true)) {
        if (g_installed.load()) {
            const unsigned char b = 0;
            if (write(g_pipe[1], &b, 1) == 1)
                for (;;) pause();  // the stopper ends the process
        }
        say(why);
        finish(status);
    }
    for (;;) pause();  // a stop is under way: it ends the process
}

}  // namespace iccs
