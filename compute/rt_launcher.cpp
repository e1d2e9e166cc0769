// rt_launcher.cpp: `iccs run`'s launch of runtime programs (built in, or any binary exec'd once
// per cluster). Apart from runtime_from_env (rt_launch.cpp) so that a program started by it does
// not link the launcher (launch_clusters and, through it, DPDK's EAL).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "rt_core.hpp"
#include "runtime_launch.hpp"

namespace iccs {

namespace {

// All of `from` into `to` (partial writes resumed); false on an error (errno says which).
bool copy_all(int from, int to) {
    char buf[65536];
    for (;;) {
        const ssize_t n = read(from, buf, sizeof buf);
        if (n == 0) return true;
        if (n < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        for (ssize_t done = 0; done < n;) {
            const ssize_t w = write(to, buf + done, size_t(n - done));
            if (w < 0) {
                if (errno == EINTR) continue;
                return false;
            }
            done += w;
        }
    }
}

}  // namespace

// ---- the launcher of `iccs run exchange|ping|PATH`

int rt_launch(RtLaunch l) {
    ClusterPlan plan = l.spec.plan;
    plan.run_id = std::to_string(getpid());
    l.spec.run_id = plan.run_id;
    const bool shm = l.spec.transport != RtTransport::kIccs;
    if (shm) {
        plan.no_fabric = true;  // no proxies: nothing of the fabric is set up
        rt_shm_remove(l.spec.run_id);
        std::string err;
        if (!rt_shm_create(l.spec, err)) {
            std::fprintf(stderr, "iccs run: %s\n", err.c_str());
            return 2;
        }
    }
    // Standard input of an exec'd program: all clusters get the same bytes when it is not a
    // terminal (each opens the copy itself: its own offset); else cluster 0 keeps the terminal.
    // The copy is a memory file, not a file in /tmp: a launcher killed outright (SIGKILL) left its
    // /tmp/iccs-PID-stdin behind. Its descriptor is inherited by the cluster processes, each of
    // which opens it anew through /proc/self/fd (a new open file: its own offset at 0).
    int stdin_copy = -1;
    const bool tty = isatty(0);
    if (!l.argv.empty() && !tty) {
        stdin_copy = memfd_create("iccs-run-stdin", 0);
        if (stdin_copy < 0 || !copy_all(0, stdin_copy)) {
            std::fprintf(stderr, "iccs run: cannot keep a copy of standard input for the clusters: %s\n",
                         std::strerror(errno));
            if (shm) rt_shm_remove(l.spec.run_id);
            return 2;
        }
    }
    std::string overrides;
    for (const auto& [k, v] : l.overrides) overrides += k + "=" + v + "\n";
    plan.user_program = !l.builtin;
    plan.process_main = [&](const ClusterPlan& mine) -> int {
        RtSpec s = l.spec;
        s.cluster = mine.cluster_id;
        s.plan = mine;
        if (l.builtin) {
            std::string err;
            std::unique_ptr<Runtime> rt = make_runtime(s, err);
            if (!rt) {
                std::fprintf(stderr, "cluster %u: %s\n", s.cluster, err.c_str());
                return 1;
            }
            return l.builtin(std::move(rt));
        }
        setenv(kEnvCluster, std::to_string(s.cluster).c_str(), 1);
        setenv(kEnvClusters, std::to_string(s.clusters).c_str(), 1);
        setenv(kEnvConfig, l.config_path.c_str(), 1);
        setenv(kEnvOverrides, overrides.c_str(), 1);
        setenv(kEnvRunId, plan.run_id.c_str(), 1);
        setenv(kEnvTransport, to_string(s.transport), 1);
        setenv(kEnvDelayNs, std::to_string(s.delay_ns).c_str(), 1);
        if (stdin_copy >= 0 || (tty && s.cluster != 0)) {
            const std::string from = stdin_copy >= 0 ? "/proc/self/fd/" + std::to_string(stdin_copy) : "/dev/null";
            const int in = open(from.c_str(), O_RDONLY);
            if (in < 0) {
                std::fprintf(stderr, "iccs run: cluster %u: cannot open the copy of standard input (%s): %s\n",
                             s.cluster, from.c_str(), std::strerror(errno));
                return 127;
            }
            dup2(in, 0);
            close(in);
            if (stdin_copy >= 0) close(stdin_copy);
        }
        // Every cluster replays main's prefix and CREATE compares the shared region: a pointer to a
        // global, a string literal or a function stored there before CREATE (a SPLASH program's
        // task table, a name in a shared struct) must have the same value in every cluster
        // process, so they all run with the same address-space layout (no ASLR, as `setarch -R`).
        // Where the kernel refuses, the run goes on and CREATE's check names any difference.
        const int persona = personality(0xffffffff);
        if (persona != -1) (void)personality(static_cast<unsigned long>(persona) | ADDR_NO_RANDOMIZE);
        std::vector<char*> argv;
        for (std::string& a : l.argv) argv.push_back(a.data());
        argv.push_back(nullptr);
        std::fflush(stdout);
        execvp(argv[0], argv.data());
        std::fprintf(stderr, "iccs run: cannot start %s: %s\n", argv[0], std::strerror(errno));
        return 127;
    };
    const int rc = launch_clusters(plan, l.timeout_s);
    if (shm) rt_shm_remove(l.spec.run_id);
    if (stdin_copy >= 0) close(stdin_copy);
    return rc;
}

}  // namespace iccs
