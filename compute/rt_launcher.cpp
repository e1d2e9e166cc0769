// rt_launcher.cpp: `iccs run`'s launch of runtime programs (built in, or any binary exec'd once
// per cluster). Apart from runtime_from_env (rt_launch.cpp) so that a program started by it does
// not link the launcher (launch_clusters and, through it, DPDK's EAL).
#include <fcntl.h>
#include <sys/personality.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "rt_core.hpp"
#include "runtime_launch.hpp"

namespace iccs {

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
    // terminal (each opens the file itself: its own offset); else cluster 0 keeps the terminal.
    std::string stdin_file;
    const bool tty = isatty(0);
    if (!l.argv.empty() && !tty) {
        stdin_file = "/tmp/iccs-" + plan.run_id + "-stdin";
        const int out = open(stdin_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (out < 0) {
            std::fprintf(stderr, "iccs run: %s: %s\n", stdin_file.c_str(), std::strerror(errno));
            if (shm) rt_shm_remove(l.spec.run_id);
            return 2;
        }
        char buf[65536];
        ssize_t n;
        while ((n = read(0, buf, sizeof buf)) > 0)
            if (write(out, buf, size_t(n)) != n) break;
        close(out);
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
        if (!stdin_file.empty() || (tty && s.cluster != 0)) {
            const int in = open(stdin_file.empty() ? "/dev/null" : stdin_file.c_str(), O_RDONLY);
            if (in >= 0) {
                dup2(in, 0);
                close(in);
            }
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
    if (!stdin_file.empty()) std::remove(stdin_file.c_str());
    return rc;
}

}  // namespace iccs
