// agent_main.cpp: iccs-mpi-agent --domain D [--detach]. Started by the first rank of a domain
// that finds no agent (agent_link.cpp), with the rank's environment; --detach: the first process
// exits 0 once the agent serves (its socket listens), or 1 after printing why it could not.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "agent.hpp"
#include "cluster_stop.hpp"

using namespace iccs;
using namespace iccs::mpi;

namespace {

// The rank's descriptors came along (posix_spawn keeps what is not close-on-exec: MPI's own
// sockets and pipes). Holding them would keep the launcher's view of that rank open.
void close_inherited() {
    std::error_code ec;
    std::vector<int> fds;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
        const int fd = std::atoi(e.path().filename().c_str());
        if (fd > 2) fds.push_back(fd);
    }
    for (int fd : fds) close(fd);  // the directory's own descriptor fails harmlessly
}

int usage() {
    std::fprintf(stderr,
                 "usage: iccs-mpi-agent --domain D [--detach]\n"
                 "  the agent of domain D (cluster D under the iccs transport) of the MPI run its environment\n"
                 "  describes (ICCS_CONFIG, the launcher's job id); started by the iccs provider (mpi/provider/README.md)\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    long domain = -1;
    bool detach = false;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--domain") == 0 && i + 1 < argc) {
            char* end = nullptr;
            domain = std::strtol(argv[++i], &end, 10);
            if (*end != '\0' || domain < 0) return usage();
        } else if (std::strcmp(argv[i], "--detach") == 0) {
            detach = true;
        } else {
            return usage();
        }
    }
    if (domain < 0) return usage();
    close_inherited();
    signal(SIGPIPE, SIG_IGN);
    int ready_fd = -1;
    if (detach) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) != 0) {
            std::perror("iccs-mpi-agent: pipe");
            return 1;
        }
        const pid_t pid = fork();
        if (pid < 0) {
            std::perror("iccs-mpi-agent: fork");
            return 1;
        }
        if (pid > 0) {  // the first process: wait for the agent's word
            close(p[1]);
            char ok = 0;
            const ssize_t n = read(p[0], &ok, 1);
            return n == 1 && ok == 'y' ? 0 : 1;
        }
        close(p[0]);
        ready_fd = p[1];
        // A process group of its own: a signal to the rank's group is not ours. Not a session of
        // its own (setsid): with the kernel's autogroups (sched_autogroup_enabled, on by default)
        // a session is a scheduling group, and the agent's threads then competed as one group
        // against the ranks' group, so a bridge's sched_yield after waking its rank did not hand
        // the rank the core (mpi/provider/README.md, "Waiting").
        setpgid(0, 0);
        const int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);  // standard error stays until the agent serves: a start-up failure is said there
            close(null);
        }
    }
    signal(SIGTERM, [](int) { g_agent_stop = true; });
    signal(SIGINT, [](int) { g_agent_stop = true; });
    MpiMachine m;
    std::string err;
    if (!mpi_machine_from_env([](const char* n) -> const char* { return std::getenv(n); }, false, m, err)) {
        std::fprintf(stderr, "iccs-mpi-agent: %s\n", err.c_str());
        return 1;
    }
    if (static_cast<uint32_t>(domain) >= m.domains()) {
        std::fprintf(stderr, "iccs-mpi-agent: --domain %ld: the run has %u\n", domain, m.domains());
        return 1;
    }
    // Where the agent's words go once it serves (ICCS_MPI_AGENT_LOG, else nowhere), opened now:
    // the cluster's stopper (cluster_stop.hpp) keeps its own descriptor for its last line, and
    // one taken from standard error now would be the starting rank's, held to the agent's end.
    int log_fd = -1;
    if (ready_fd >= 0) {
        const char* log = std::getenv("ICCS_MPI_AGENT_LOG");
        log_fd = log != nullptr && *log != '\0' ? open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)
                                                : open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (log_fd >= 0) cluster_stop_report_fd(log_fd);
    }
    Agent agent(m, static_cast<uint32_t>(domain));
    if (!agent.start(err)) {
        std::fprintf(stderr, "iccs-mpi-agent: %s\n", err.c_str());
        agent.abandon();
        std::fflush(stderr);
        _exit(1);
    }
    if (ready_fd >= 0) {
        // From now on nothing of the rank that started us stays open here: its launcher (mpirun)
        // counts a rank as ended only once its standard error is closed too, so an agent holding
        // it would hide a crashed rank from mpirun. What goes wrong later reaches the ranks through
        // the region (Region::set_agent_error); the rest goes to ICCS_MPI_AGENT_LOG if set.
        const char y = 'y';
        (void)!write(ready_fd, &y, 1);
        close(ready_fd);
        if (log_fd >= 0) dup2(log_fd, 2);
    }
    const int rc = agent.serve();
    // DPDK's memory and threads go with the process (run_cluster left them: exit_without_teardown).
    std::fflush(stderr);
    _exit(rc);
}
