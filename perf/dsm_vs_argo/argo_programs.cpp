// argo_programs.cpp: ArgoDSM's side of `iccs bench dsm --vs argo`: the programs of programs.hpp on
// ArgoDSM's C++ API (MPI backend). Not built by this project: `iccs bench dsm --vs argo --argo DIR`
// compiles it with mpic++ against the Argo build in DIR (include/argo, lib/libargo*.so) and starts it
// with mpirun, one process per node, -p / nodes threads in each (std::thread). Thread ids are
// dealt in blocks as PARMACS deals pids over clusters: node k runs ids k*T .. k*T+T-1.
//
// Shared memory: argo::conew_array, collective, in main before the threads start. Sync: argo::barrier
// with the node's thread count (self-downgrade and self-invalidation at every node), and Argo's
// cohort locks (a node's threads hand the lock over locally before it leaves the node).
#include <argo/argo.hpp>
#include <argo/synchronization/cohort_lock.hpp>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "programs.hpp"

namespace {

struct ArgoSync {
    std::size_t node_threads;
    argo::globallock::cohort_lock* locks[dsm_vs_argo::kLocks];
    void barrier() { argo::barrier(node_threads); }
    void lock(int k) { locks[k]->lock(); }
    void unlock(int k) { locks[k]->unlock(); }
};

// Every allocation 16-byte aligned, as G_MALLOC's on our side.
void* shared_alloc(std::size_t bytes) {
    const auto p = reinterpret_cast<std::uintptr_t>(argo::conew_array<char>(bytes + 15));
    return reinterpret_cast<void*>((p + 15) & ~std::uintptr_t(15));
}

template <class Prog>
int run(const dsm_vs_argo::Params& p, ArgoSync& sync) {
    Prog prog(p, shared_alloc);
    const int node = static_cast<int>(argo::node_id());
    const int t_per_node = static_cast<int>(sync.node_threads);
    double parallel_s = 0;  // thread 0 runs on node 0, which prints
    std::vector<std::thread> threads;
    for (int t = 0; t < t_per_node; t++)
        threads.emplace_back([&, t] { dsm_vs_argo::thread_body(prog, node * t_per_node + t, sync, &parallel_s, p.inject_error); });
    for (std::thread& th : threads) th.join();
    int rc = 0;
    if (node == 0) rc = dsm_vs_argo::report(p, prog.size(), parallel_s, prog.check());
    argo::barrier();  // node 0's check reads the other nodes' memory: they stay until it is done
    return rc;
}

}  // namespace

int main(int argc, char** argv) {
    dsm_vs_argo::Params p;
    std::string err;
    if (!dsm_vs_argo::parse_params(argc, argv, p, err)) {
        std::fprintf(stderr, "dsm-vs-argo (argo): %s\n%s", err.c_str(), dsm_vs_argo::usage(argv[0]).c_str());
        return 2;
    }
    // Global memory: the program's data and 1 MiB for the locks, so Argo's default (naive)
    // distribution, one contiguous block per node, splits the data itself; a cache that holds all of it.
    const std::size_t bytes = dsm_vs_argo::shared_bytes(p) + (std::size_t(1) << 20);
    argo::init(bytes, bytes);
    const int nodes = static_cast<int>(argo::number_of_nodes());
    if (p.nprocs % nodes != 0) {
        if (argo::node_id() == 0)
            std::fprintf(stderr, "dsm-vs-argo (argo): -p %d is not a multiple of the %d processes\n", p.nprocs, nodes);
        argo::finalize();
        return 2;
    }
    ArgoSync sync;
    sync.node_threads = static_cast<std::size_t>(p.nprocs / nodes);
    for (auto*& l : sync.locks) l = new argo::globallock::cohort_lock();  // collective
    int rc = 0;
    if (p.program == "matmul") rc = run<dsm_vs_argo::Matmul>(p, sync);
    if (p.program == "jacobi") rc = run<dsm_vs_argo::Jacobi>(p, sync);
    if (p.program == "fft") rc = run<dsm_vs_argo::Fft>(p, sync);
    if (p.program == "taskq") rc = run<dsm_vs_argo::TaskQueue>(p, sync);
    for (auto* l : sync.locks) delete l;
    argo::finalize();
    return rc;
}
