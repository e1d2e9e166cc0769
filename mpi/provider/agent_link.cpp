// agent_link.cpp: a rank's way to its agent (connect, start it when missing, map the region).
#include "agent_link.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "owner_only.hpp"

extern char** environ;

namespace iccs::mpi {

namespace {

int connect_to(const std::string& path) {
    const int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0) return -1;
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return s;
    close(s);
    return -1;
}

// Start the agent of domain d and wait until it listens (it says so by exiting its first process
// with 0 once its socket is up; a non-zero status means it printed why and gave up).
bool spawn_agent(const MpiMachine& m, uint32_t d, const std::string& exe, std::string& err) {
    const std::string dom = std::to_string(d);
    const char* argv[] = {exe.c_str(), "--domain", dom.c_str(), "--detach", nullptr};
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, exe.c_str(), nullptr, nullptr, const_cast<char**>(argv), environ);
    if (rc != 0) {
        err = "cannot start the agent " + exe + ": " + std::strerror(rc) +
              " (ICCS_MPI_AGENT names it when it is not beside libiccs-fi.so)";
        return false;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
    err = "the agent of " + std::string(m.bridged() ? "cluster " : "domain ") + dom + " did not start (" +
          (WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                             : "signal " + std::to_string(WTERMSIG(status))) +
          "; its reason is on standard error above)";
    return false;
}

}  // namespace

AgentLink::~AgentLink() {
    if (sock >= 0) close(sock);
}

bool AgentLink::agent_gone() const {
    if (sock < 0) return true;
    pollfd p{sock, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLHUP | POLLERR)) return true;
    char b;
    return recv(sock, &b, 1, MSG_DONTWAIT | MSG_PEEK) == 0;
}

void AgentLink::bye() {
    if (sock < 0) return;
    const LinkBye b;
    (void)send(sock, &b, sizeof b, MSG_NOSIGNAL);
    close(sock);
    sock = -1;
}

long link_recv(int sock, void* buf, size_t cap) {
    while (true) {
        const ssize_t n = recv(sock, buf, cap, 0);
        if (n >= 0) return n;
        if (errno != EINTR) return -1;
    }
}

bool link_send_reply(int sock, const LinkReply& r, int region_fd) {
    iovec iov{const_cast<LinkReply*>(&r), sizeof r};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
    if (region_fd >= 0) {
        mh.msg_control = ctl;
        mh.msg_controllen = sizeof ctl;
        cmsghdr* c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(c), &region_fd, sizeof(int));
    }
    return sendmsg(sock, &mh, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof r);
}

bool agent_connect(const MpiMachine& m, const std::string& agent_exe, uint32_t timeout_ms, AgentLink& out,
                   std::string& err) {
    const uint32_t d = m.domain_of(m.rank);
    if (!make_private_dir(m.run_dir, err)) return false;
    const std::string path = m.agent_socket(d);
    int s = connect_to(path);
    if (s < 0) {
        // Nobody listens: the first rank of the domain to hold the lock starts the agent.
        const int lk = open(m.agent_lock(d).c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (lk < 0) {
            err = m.agent_lock(d) + ": " + std::strerror(errno);
            return false;
        }
        while (flock(lk, LOCK_EX) != 0 && errno == EINTR) {
        }
        s = connect_to(path);
        if (s < 0 && !spawn_agent(m, d, agent_exe, err)) {
            close(lk);
            return false;
        }
        if (s < 0) s = connect_to(path);
        close(lk);  // lets go of the lock
        if (s < 0) {
            err = "the agent of domain " + std::to_string(d) + " started but " + path + " takes no connection: " +
                  std::strerror(errno);
            return false;
        }
    }
    out.sock = s;
    LinkHello h;
    h.rank = m.rank;
    h.world = m.world;
    h.clusters = m.clusters;
    h.cluster_size = m.cluster_size;
    h.transport = static_cast<uint32_t>(m.transport);
    h.pid = static_cast<uint32_t>(getpid());
    h.run_hash = m.run_hash;
    h.delay_ns = m.delay_ns;
    if (send(s, &h, sizeof h, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof h)) {
        err = path + ": the agent hung up before the hello (" + std::strerror(errno) + ")";
        return false;
    }
    // The reply, with the region's fd. The agent answers at once; the wait is bounded all the same.
    pollfd p{s, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout_ms)) <= 0) {
        err = path + ": the agent did not answer the hello within " + std::to_string(timeout_ms) + " ms";
        return false;
    }
    LinkReply r;
    iovec iov{&r, sizeof r};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
    mh.msg_control = ctl;
    mh.msg_controllen = sizeof ctl;
    const ssize_t n = recvmsg(s, &mh, MSG_CMSG_CLOEXEC);
    int fd = -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
    if (n != static_cast<ssize_t>(sizeof r) || r.magic != kLinkMagic) {
        if (fd >= 0) close(fd);
        err = path + ": no answer from the agent (it hung up)";
        return false;
    }
    if (r.kind != LinkMsg::kWelcome || fd < 0) {
        if (fd >= 0) close(fd);
        r.why[sizeof r.why - 1] = '\0';
        err = std::string("the agent refused rank ") + std::to_string(m.rank) + ": " + r.why;
        return false;
    }
    const bool ok = out.region.attach(fd, err);
    close(fd);
    return ok;
}

}  // namespace iccs::mpi
