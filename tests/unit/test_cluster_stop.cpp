// cluster_stop (compute/cluster_stop.hpp): a stopped process runs its hooks once, in order, and
// exits 128 + signal; a thread that removes a hook while the stop runs it does not go on to undo
// the same work beside it. Each case runs in a forked child (the stop ends its process).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "cluster_stop.hpp"

namespace {

// Runs body in a child writing its marks to a pipe; returns the child's status and the marks.
template <typename Body>
std::pair<int, std::string> in_child(Body body) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        body(fds[1]);
        _exit(99);  // the stop must have ended the child before this
    }
    close(fds[1]);
    std::string marks;
    char buf[64];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) marks.append(buf, static_cast<size_t>(n));
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return {status, marks};
}

void mark(int fd, char c) { (void)!write(fd, &c, 1); }

}  // namespace

TEST_CASE("a stopped process runs its hooks in order and exits 128 + signal", "[stop]") {
    auto [status, marks] = in_child([](int fd) {
        iccs::cluster_stop_install(7);
        iccs::cluster_stop_add([fd] { mark(fd, 'a'); });
        const int gone = iccs::cluster_stop_add([fd] { mark(fd, 'x'); });
        iccs::cluster_stop_add([fd] { mark(fd, 'b'); });
        iccs::cluster_stop_remove(gone);
        kill(getpid(), SIGTERM);
        for (;;) pause();
    });
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 128 + SIGTERM);
    CHECK(marks == "ab");
}

TEST_CASE("removing a hook while a stop runs it waits for the stop to end the process", "[stop]") {
    // The stop has taken the hooks and runs this one (it takes 300 ms); the program's thread then
    // removes it, as run_cluster does before closing the captures itself. It must not return:
    // before, it did, and a survivor closed its capture twice (a crash in free).
    auto [status, marks] = in_child([](int fd) {
        iccs::cluster_stop_install(3);
        const int id = iccs::cluster_stop_add([fd] {
            mark(fd, 'h');
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            mark(fd, 'H');
        });
        kill(getpid(), SIGTERM);
        while (!iccs::cluster_stopping()) std::this_thread::yield();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the stopper is inside the hook
        iccs::cluster_stop_remove(id);
        mark(fd, 'R');  // undoing the hook's work here would race the hook
        for (;;) pause();
    });
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 128 + SIGTERM);
    CHECK(marks == "hH");
}
