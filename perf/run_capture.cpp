// run_capture.cpp: see run_capture.hpp. A timeout sends SIGTERM to the child alone: the children
// the benchmarks run (mpirun, `iccs run`) stop what they started on it. The child stays in our
// process group, so a Ctrl-C at the terminal reaches it too.
#include "run_capture.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>

namespace iccs {

int run_capture(const std::vector<std::string>& argv, std::string& out, const CaptureOptions& o, bool* timed_out) {
    if (timed_out) *timed_out = false;
    int fds[2];
    if (argv.empty() || pipe(fds) != 0) return -1;
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        if (!o.err_file.empty()) {
            const int fd = open(o.err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd >= 0) dup2(fd, 2);
        }
        for (const std::string& e : o.env) putenv(const_cast<char*>(e.c_str()));
        std::vector<char*> a;
        for (const std::string& s : argv) a.push_back(const_cast<char*>(s.c_str()));
        a.push_back(nullptr);
        execvp(a[0], a.data());
        std::fprintf(stderr, "iccs bench: cannot run %s\n", a[0]);
        _exit(127);
    }
    close(fds[1]);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
    bool stopped = false;
    char buf[4096];
    for (;;) {
        pollfd pf{fds[0], POLLIN, 0};
        const int r = poll(&pf, 1, 200);
        if (r < 0 && errno != EINTR) break;
        if (r > 0) {
            const ssize_t n = read(fds[0], buf, sizeof buf);
            if (n == 0 || (n < 0 && errno != EINTR)) break;
            if (n > 0) out.append(buf, static_cast<size_t>(n));
        }
        if (o.timeout_s > 0 && !stopped && std::chrono::steady_clock::now() >= deadline) {
            kill(pid, SIGTERM);
            stopped = true;
        }
    }
    close(fds[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (timed_out) *timed_out = stopped;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::string last_line_of(const std::string& path) {
    std::ifstream in(path);
    std::string line, last;
    while (std::getline(in, line))
        if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
    return last;
}

}  // namespace iccs
