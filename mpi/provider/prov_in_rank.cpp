// prov_in_rank.cpp: a cluster of one rank under inline polling runs its agent in the rank's own
// process (InRankLink, prov.hpp; mpi/provider/README.md, "Why an agent process"), from the module
// libiccs-mpi-inrank.so, loaded only then: a rank of any other run links no DPDK.
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "prov.hpp"

extern char** environ;

namespace iccs::mpi {

namespace {

// A process brings its EAL up once: a cluster that ended cannot come up again in it.
std::atomic<bool> g_in_rank_used{false};

// The files of a cluster that runs in this process (its EAL's runtime directory, the memif
// sockets and doorbells it serves in the run directory) outlive a process that ends without
// closing its domain: an MPI error ending in _exit, MPI_Abort, a kill. An agent process removes
// its own when its last rank is gone; here a reaper does, a shell started now that waits for the
// end of a pipe only this process holds (the kernel closes it whatever the end), then removes them.
// It holds nothing else of the rank (its standard streams /dev/null, every other descriptor
// closed: mpirun counts a rank as ended only once they all close) and has a process group of its
// own (a signal to the rank's group is not its). After a clean end it finds them gone already.
constexpr const char* kReaperScript =
    "read -r _; rm -rf -- \"$1\"; rm -f -- \"$2\"/memif-\"$3\".* \"$2\"/bell-c\"$3\"p*; rmdir -- \"$2\" 2>/dev/null; exit 0";

bool start_reaper(const std::string& eal_dir, const std::string& run_dir, uint32_t cluster, std::string& err) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        err = std::string("the reaper's pipe: ") + std::strerror(errno);
        return false;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[0], 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    const std::string c = std::to_string(cluster);
    const char* argv[] = {"sh", "-c", kReaperScript, "iccs-mpi-reaper", eal_dir.c_str(), run_dir.c_str(), c.c_str(), nullptr};
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, "/bin/sh", &fa, &at, const_cast<char**>(argv), environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(p[0]);
    if (rc != 0) {
        close(p[1]);
        err = std::string("cannot start the reaper of its files (/bin/sh): ") + std::strerror(rc);
        return false;
    }
    (void)p[1];  // held until the process ends
    return true;
}

// The module: ICCS_MPI_INRANK_MODULE, else beside this library, else where `meson install` put it.
std::string prov_in_rank_module_path() {
    return prov_companion_path("ICCS_MPI_INRANK_MODULE", "libiccs-mpi-inrank.so", R_OK, ICCS_MPI_INRANK_INSTALLED);
}

}  // namespace

bool in_rank_wanted(const MpiMachine& m) {
    return m.bridged() && m.cluster_size == 1 && m.config->cluster.polling == Polling::kInline;
}

bool InRankLink::start(const MpiMachine& m, Region& region, std::string& err) {
    if (g_in_rank_used.exchange(true)) {
        // (fi_domain's caller names the rank: prov_domain.cpp)
        err = "its cluster ran in this process and ended (a cluster of one rank under inline polling comes up once "
              "a process)";
        return false;
    }
    const std::string path = prov_in_rank_module_path();
    // RTLD_LOCAL: DPDK and the proxies stay out of the MPI library's namespace.
    void* dl = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (dl == nullptr) {
        err = std::string("a cluster of one rank under inline polling runs in the rank, but its module cannot be loaded "
                          "(ICCS_MPI_INRANK_MODULE names it): ") +
              dlerror();
        return false;
    }
    using StartFn = void* (*)(const MpiMachine*, int*, char*, size_t);
    const auto start_fn = reinterpret_cast<StartFn>(dlsym(dl, "iccs_mpi_in_rank_start"));
    step_ = reinterpret_cast<StepFn>(dlsym(dl, "iccs_mpi_in_rank_step"));
    end_ = reinterpret_cast<EndFn>(dlsym(dl, "iccs_mpi_in_rank_end"));
    using FilesFn = int (*)(const MpiMachine*, char*, size_t);
    const auto files_fn = reinterpret_cast<FilesFn>(dlsym(dl, "iccs_mpi_in_rank_files"));
    // (A module without these two, an older build's, runs every record through the rings.)
    send_ = reinterpret_cast<SendFn>(dlsym(dl, "iccs_mpi_in_rank_send"));
    deliver_to_ = reinterpret_cast<DeliverToFn>(dlsym(dl, "iccs_mpi_in_rank_deliver_pieces_to"));
    if (start_fn == nullptr || step_ == nullptr || end_ == nullptr || files_fn == nullptr) {
        err = path + ": not the in-rank agent module of this provider (iccs_mpi_in_rank_* missing)";
        return false;
    }
    std::vector<char> why(4096, '\0');
    if (files_fn(&m, why.data(), why.size()) == 0) {
        err = "the paths of the cluster's files are too long";
        return false;
    }
    const std::string files = why.data();
    const size_t nl = files.find('\n');
    if (!start_reaper(files.substr(0, nl), files.substr(nl + 1), m.domain_of(m.rank), err)) return false;
    int fd = -1;
    handle_ = start_fn(&m, &fd, why.data(), why.size());
    if (handle_ == nullptr) {
        err = why.data();
        return false;
    }
    if (!region.attach(fd, err)) {
        (void)end(false);
        return false;
    }
    return true;
}

void InRankLink::connect(RankEngine& engine) {
    if (handle_ == nullptr || send_ == nullptr || deliver_to_ == nullptr) return;
    if (const char* v = std::getenv("ICCS_MPI_IN_RANK_DIRECT"); v != nullptr && std::strcmp(v, "0") == 0) return;
    engine.set_direct_out(DirectOut{
        this, [](void* link, uint32_t dst, const iovec* rec, uint32_t pieces, uint32_t len, bool of_several) {
            auto* l = static_cast<InRankLink*>(link);
            return l->handle_ != nullptr ? l->send_(l->handle_, dst, rec, pieces, len, of_several ? 1 : 0) : 0;
        }});
    deliver_to_(handle_, &engine, [](void* e, const iovec* rec, uint32_t pieces, uint32_t len) {
        return static_cast<RankEngine*>(e)->take_direct(rec, pieces, len) ? 1 : 0;
    });
}

int InRankLink::end(bool finished) {
    if (handle_ == nullptr) return 0;
    void* h = handle_;
    handle_ = nullptr;
    return end_(h, finished ? 1 : 0);
}

}  // namespace iccs::mpi
