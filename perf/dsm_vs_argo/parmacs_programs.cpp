// parmacs_programs.cpp: our side of `iccs bench dsm --vs argo`: the programs of programs.hpp on the
// iccs DSM through PARMACS, started across clusters by `iccs run PATH` (build/perf/iccs-dsm-vs-argo).
// main's prefix (replayed by every cluster) allocates; CREATE starts -p threads dealt over the
// clusters; the check and the result line run once, on cluster 0, after WAIT_FOR_END.
#include "parmacs.h"

#include <string>

#include "programs.hpp"

MAIN_ENV

namespace {

struct SyncObjects {
    BARDEC(bar)
    LOCKDEC(lock0)
    LOCKDEC(lock1)
};

// Set by the prefix (the same on every cluster), read by the threads.
SyncObjects* g_sync;
int g_nprocs;
bool g_inject_error;
void* g_prog;
double* g_parallel_s;  // written by thread 0 (cluster 0), read by main's epilogue there
void (*g_body)(int pid);

struct ParmacsSync {
    void barrier() { BARRIER(g_sync->bar, g_nprocs) }
    void lock(int k) {
        if (k == 0) {
            LOCK(g_sync->lock0)
        } else {
            LOCK(g_sync->lock1)
        }
    }
    void unlock(int k) {
        if (k == 0) {
            UNLOCK(g_sync->lock0)
        } else {
            UNLOCK(g_sync->lock1)
        }
    }
};

template <class Prog>
void body(int pid) {
    ParmacsSync s;
    dsm_vs_argo::thread_body(*static_cast<Prog*>(g_prog), pid, s, g_parallel_s, g_inject_error);
}

void Worker(void) {
    int pid;
    GET_PID(pid)
    g_body(pid);
}

template <class Prog>
int run(const dsm_vs_argo::Params& p) {
    const dsm_vs_argo::Alloc alloc = [](std::size_t bytes) { return G_MALLOC_F(bytes); };
    auto* prog = new Prog(p, alloc);
    g_prog = prog;
    g_body = &body<Prog>;
    CREATE(Worker, p.nprocs)
    WAIT_FOR_END(p.nprocs)
    return dsm_vs_argo::report(p, prog->size(), *g_parallel_s, prog->check());
}

}  // namespace

int main(int argc, char** argv) {
    dsm_vs_argo::Params p;
    std::string err;
    if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
        std::printf("%s", dsm_vs_argo::usage(argv[0]).c_str());
        return 0;
    }
    if (!dsm_vs_argo::parse_params(argc, argv, p, err)) {
        std::fprintf(stderr, "iccs-dsm-vs-argo: %s\n%s", err.c_str(), dsm_vs_argo::usage(argv[0]).c_str());
        return 2;
    }
    MAIN_INITENV()
    g_nprocs = p.nprocs;
    g_inject_error = p.inject_error;
    g_sync = static_cast<SyncObjects*>(G_MALLOC_F(sizeof(SyncObjects)));
    BARINIT(g_sync->bar, p.nprocs)
    LOCKINIT(g_sync->lock0)
    LOCKINIT(g_sync->lock1)
    g_parallel_s = static_cast<double*>(G_MALLOC_F(sizeof(double)));
    *g_parallel_s = 0;
    int rc = 0;
    if (p.program == "matmul") rc = run<dsm_vs_argo::Matmul>(p);
    if (p.program == "jacobi") rc = run<dsm_vs_argo::Jacobi>(p);
    if (p.program == "fft") rc = run<dsm_vs_argo::Fft>(p);
    if (p.program == "taskq") rc = run<dsm_vs_argo::TaskQueue>(p);
    if (rc != 0) std::exit(rc);
    MAIN_END
}
