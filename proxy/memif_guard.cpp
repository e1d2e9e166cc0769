// memif_guard.cpp: the memif hang-up guard (memif_guard.hpp): an EAL alarm callback that keeps the
// interrupt thread and polls the links' control sockets.
#include "memif_guard.hpp"

#include <dirent.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <rte_alarm.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace iccs {

struct MemifHangupGuard::State {
    std::vector<MemifGuardLink> links;
    std::vector<int> fds;  // each link's control socket; -1 once it hung up (the PMD owns the fd)
    int stop_fd = -1;      // eventfd: stop() writes it
    std::atomic<int> phase{0};  // 0 not yet run, 1 running, 2 returned
    std::atomic<unsigned> hangups{0};
};

namespace {

bool unix_path_is(int fd, bool peer, const std::string& path) {
    sockaddr_un a{};
    socklen_t len = sizeof a;
    const int r = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
                       : getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    if (r != 0 || a.sun_family != AF_UNIX || len <= offsetof(sockaddr_un, sun_path)) return false;
    const size_t n = strnlen(a.sun_path, len - offsetof(sockaddr_un, sun_path));
    return path.size() == n && std::memcmp(a.sun_path, path.data(), n) == 0;
}

// Runs on the EAL interrupt thread until stop(): the PMD's handlers wait behind it, forever.
void guard_main(void* arg) {
    auto* st = static_cast<MemifHangupGuard::State*>(arg);
    st->phase.store(1, std::memory_order_release);
    std::vector<pollfd> pf;
    for (;;) {
        pf.clear();
        pf.push_back(pollfd{st->stop_fd, POLLIN, 0});
        for (const int fd : st->fds)
            if (fd >= 0) pf.push_back(pollfd{fd, POLLIN | POLLRDHUP, 0});
        if (poll(pf.data(), pf.size(), -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (pf[0].revents != 0) break;
        size_t k = 1;
        for (size_t i = 0; i < st->fds.size(); ++i) {
            if (st->fds[i] < 0) continue;
            if (pf[k++].revents != 0) {  // readable, hung up, or gone: the peer is
                st->fds[i] = -1;
                st->hangups.fetch_add(1, std::memory_order_relaxed);
                if (st->links[i].on_hangup) st->links[i].on_hangup();
            }
        }
    }
    st->phase.store(2, std::memory_order_release);
}

}  // namespace

// The control socket of the link on `path` in this process: the client's socket connected to
// it, or the server's socket accepted on it (bound to it, not listening). -1 when there is none.
int memif_control_socket(const std::string& path) {
    DIR* d = opendir("/proc/self/fd");
    if (d == nullptr) return -1;
    int found = -1;
    const int dir_fd = dirfd(d);
    while (dirent* e = readdir(d)) {
        char* end = nullptr;
        const long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fd == dir_fd) continue;
        struct stat st{};
        if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
        int listening = 0;
        socklen_t ol = sizeof listening;
        if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_ACCEPTCONN, &listening, &ol) != 0 || listening) continue;
        if (unix_path_is(static_cast<int>(fd), true, path) || unix_path_is(static_cast<int>(fd), false, path)) {
            found = static_cast<int>(fd);
            break;
        }
    }
    closedir(d);
    return found;
}

bool MemifHangupGuard::start(std::vector<MemifGuardLink> links, std::string& err) {
    if (st_ != nullptr) {
        err = "memif hang-up guard: started twice";
        return false;
    }
    auto* st = new State;  // never freed while the interrupt thread may hold it (see stop)
    st->links = std::move(links);
    st->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (st->stop_fd < 0) {
        err = std::string("memif hang-up guard: eventfd: ") + std::strerror(errno);
        delete st;
        return false;
    }
    std::vector<size_t> gone;  // links whose socket is already closed (the peer left before we looked)
    for (size_t i = 0; i < st->links.size(); ++i) {
        st->fds.push_back(memif_control_socket(st->links[i].socket_path));
        if (st->fds.back() < 0) gone.push_back(i);
    }
    if (const int r = rte_eal_alarm_set(1, guard_main, st); r != 0) {
        err = std::string("memif hang-up guard: rte_eal_alarm_set: ") + std::strerror(-r);
        close(st->stop_fd);
        delete st;
        return false;
    }
    st_ = st;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (st->phase.load(std::memory_order_acquire) == 0) {
        if (std::chrono::steady_clock::now() > until) {
            err = "memif hang-up guard: the EAL interrupt thread did not run it within 2 s";
            return false;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    for (const size_t i : gone) {
        st->hangups.fetch_add(1, std::memory_order_relaxed);
        if (st->links[i].on_hangup) st->links[i].on_hangup();
    }
    return true;
}

void MemifHangupGuard::stop() {
    if (st_ == nullptr || st_->phase.load(std::memory_order_acquire) != 1) return;
    const uint64_t one = 1;
    (void)!write(st_->stop_fd, &one, sizeof one);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (st_->phase.load(std::memory_order_acquire) == 1 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
}

bool MemifHangupGuard::running() const { return st_ != nullptr && st_->phase.load(std::memory_order_acquire) == 1; }

unsigned MemifHangupGuard::hangups() const {
    return st_ != nullptr ? st_->hangups.load(std::memory_order_relaxed) : 0;
}

}  // namespace iccs
