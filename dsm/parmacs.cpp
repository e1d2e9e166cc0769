// parmacs.cpp: the PARMACS functions behind parmacs.h / parmacs.m4, over one DsmNode per process.
// Start-up by replay (dsm/PROTOCOL.md): every cluster runs main's sequential prefix; the first CREATE
// turns the region and the program's globals coherent (start_parallel compares the clusters'
// copies) and starts this cluster's share of the n threads: pids are dealt in blocks of
// ceil(n / C), pid 0 being main on cluster 0. From there on only cluster 0 runs main: the main
// thread of every other cluster serves (servant_loop), running its share of each later CREATE
// that cluster 0's main announces, until cluster 0 ends the run. So main's code between and after
// CREATEs (an epilogue that frees, writes a file, counts) runs once, as in one process.
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "activity.hpp"
#include "parmacs.h"
#include "parmacs_attach.hpp"

// Bounds of the program's own globals, from the linker script parmacs_globals.ld (pkg-config
// --libs iccs); null when the program was linked without it.
extern "C" {
extern char __iccs_globals_data_start[] __attribute__((weak, visibility("hidden")));
extern char __iccs_globals_data_end[] __attribute__((weak, visibility("hidden")));
extern char __iccs_globals_bss_start[] __attribute__((weak, visibility("hidden")));
extern char __iccs_globals_bss_end[] __attribute__((weak, visibility("hidden")));
}

namespace iccs::parmacs {

namespace {

// What cluster 0's main tells the other clusters' mains after the first CREATE, written before the
// main barrier (a release) and read after it (an acquire).
struct Command {
    enum Kind : uint32_t { kCreate = 1, kWaitForEnd, kEnd };
    uint32_t kind;
    int32_t status;  // kEnd: the run's exit status
    long n;          // kCreate: the threads
    void (*fn)(void);
};

struct State {
    Runtime* rt = nullptr;
    dsm::DsmNode* node = nullptr;  // lives until the process exits
    uint16_t cluster = 0, clusters = 1, threads = 1;
    bool started = false;          // the environment was started (MAIN_INITENV or a first macro)
    std::atomic<bool> report_written{false};
    long created = 0;  // n of the last CREATE
    long per = 1;      // pids per cluster
    std::vector<std::thread> workers;
    uint32_t main_barrier = 0;  // the mains of the clusters meet here at every command of cluster 0
    // In the shared region: what cluster 0's main announces, command k in slot k % 2 (it writes
    // command k+1 while the others may still read command k; k+2 only after they all met it at k+1).
    Command* cmd = nullptr;
    uint64_t cmd_seq = 0;
    bool serving = false;       // cluster 0's main announces to the other clusters' (after CREATE)
    // Main is running its pid's share of CREATE (fn): an exit() from there leaves the other
    // threads of the run waiting for it (a BARRIER, a LOCK it holds), so it cannot end the run
    // collectively. Written and read by main only.
    bool main_in_share = false;
    uint64_t roi_begin_ns = 0, roi_ns = 0;
    std::thread::id main_thread;
};
State g;
thread_local long t_pid = -1;

// Thread ids follow the clusters (dsm/README.md): SPLASH programs number their threads themselves,
// first thing in the thread function (LOCK(idlock); id = next++; UNLOCK), and cut their arrays by
// that id. Left to the race of those first LOCKs, about half the runs of 2 x 2 threads gave a
// cluster ids {0, 3} or {0, 2}: ocean-nc's rows then hold both clusters' blocks on every page, and a
// run took 11 s instead of 0.8 (30x the faults, diffs and fetches). So a thread of cluster c > 0
// makes its first LOCK of a CREATE only once every thread of the clusters before c has made its
// own first LOCK (or entered another blocking operation first, or ended): cluster c's threads then
// take the ids after theirs. pthreads promise no order, so this is one of the orders the program
// allows; it costs one message a cluster per CREATE. A bound (kStartOrderWaitUs) keeps a program
// whose threads wait for each other in some other way from waiting for ever.
struct StartOrder {
    bool on = true;                            // ICCS_PARMACS_ORDERED_START=0 turns it off
    uint16_t handler = 0;                      // runtime handler of the "cluster passed" message
    uint64_t creates = 0;                      // CREATEs started here (the same count in every cluster)
    std::atomic<long> pending{0};              // this cluster's threads of this CREATE not yet past
    std::atomic<uint64_t> lower_passed{0};     // "passed" messages from lower clusters, all CREATEs
    std::atomic<uint64_t> waits_cut_short{0};  // first LOCKs that went ahead at the bound
    std::atomic<uint64_t> wait_ns{0};          // time threads spent waiting for earlier clusters
};
StartOrder order;
constexpr uint64_t kStartOrderWaitUs = 200'000;  // a backstop: waits are 0.1-40 ms on a loaded host
thread_local bool t_before_first_lock = false;  // this thread of a CREATE has not passed yet
// This thread of a CREATE, on a cluster that later clusters wait for, has not made its first
// UNLOCK yet. That first lock is the one the later clusters' threads take next (the id lock), and
// a released token goes back only once a flush covers its release (PROTOCOL.md, "Locks"): without
// one it waited for this cluster's next sync operation, after whatever the thread computes between
// (SPLASH-3 radix: cluster 1's first LOCK waited out cluster 0's whole key generation, 751 ms of
// its 6 s parallel section on a loaded host). So that UNLOCK flushes.
thread_local bool t_first_unlock_flushes = false;
thread_local uint16_t t_local = 0;              // this thread's compute endpoint in its cluster
// Clusters other than 0, outside the parallel section: the program's standard output and error
// go to /dev/null; the real ones are kept here (our own diagnostics use saved_stderr). Plain ints,
// constant-initialised: quiet_from_start uses them before any dynamic initialiser has run.
struct Fds {
    int saved_stdout = -1, saved_stderr = -1, devnull = -1;
};
constinit Fds fds;

[[noreturn]] void die(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void quiet(bool on);
void die(const char* fmt, ...) {
    fflush(stdout);
    // One write of the whole line: every cluster may die of the same error at once on one
    // terminal, and pieces written separately interleave.
    char line[2048];
    int n = snprintf(line, sizeof line, "iccs parmacs (cluster %u): ", unsigned(g.cluster));
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && n < int(sizeof line)) n += vsnprintf(line + n, sizeof line - size_t(n), fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if (n > int(sizeof line) - 2) n = int(sizeof line) - 2;
    line[n++] = '\n';
    fflush(stderr);
    if (write(diag_fd(), line, size_t(n)) < 0) { /* nothing left to report it to */ }
    // From any thread, with others running: flush and leave without static destructors (a
    // joinable worker std::thread would turn exit() into std::terminate). The other clusters
    // learn it from the runtime (peer down).
    fflush(nullptr);
    _exit(1);
}

// The environment starts on first use: SPLASH programs may G_MALLOC, initialise locks or read the
// clock in a set-up function that runs before MAIN_INITENV (with the suite's own macros these
// need no environment), so any macro that needs the DSM starts it, and MAIN_INITENV later does
// nothing.
dsm::DsmNode& need_node(const char* what) {
    if (!g.node) iccs_pm_init();
    if (!g.node) die("%s: the PARMACS environment did not start", what);
    return *g.node;
}

void check(dsm::DsmStatus s, const char* what) {
    if (s != dsm::DsmStatus::kOk) die("%s: %s", what, dsm::DsmNode::error().c_str());
}

uint64_t mono_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Clusters other than 0 replay main's prefix and epilogue: their prints would repeat cluster 0's.
// Standard output and error both, from the first instruction of main (see quiet_from_start).
void quiet(bool on) {
    if (fds.saved_stdout < 0) return;
    fflush(stdout);
    fflush(stderr);
    dup2(on ? fds.devnull : fds.saved_stdout, 1);
    dup2(on ? fds.devnull : fds.saved_stderr, 2);
}

bool keep_real_fds() {
    if (fds.saved_stdout >= 0) return true;
    fds.saved_stdout = fcntl(1, F_DUPFD_CLOEXEC, 10);
    fds.saved_stderr = fcntl(2, F_DUPFD_CLOEXEC, 10);
    fds.devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (fds.saved_stdout >= 0 && fds.saved_stderr >= 0 && fds.devnull >= 0) return true;
    for (int* fd : {&fds.saved_stdout, &fds.saved_stderr, &fds.devnull})
        if (*fd >= 0) close(*fd), *fd = -1;
    return false;
}

// The rank of this process in a run, before anything is started: our launcher's ICCS_CLUSTER,
// or mpirun's / srun's rank (the runtime's order, DESIGN.md §8); -1 outside a run.
long rank_from_env() {
    for (const char* v : {"ICCS_CLUSTER", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
        const char* r = getenv(v);
        if (r == nullptr || *r == '\0') continue;
        char* end = nullptr;
        const long k = strtol(r, &end, 10);
        return (*end == '\0' && k >= 0) ? k : -1;
    }
    return -1;
}

// Before main: in a run, every cluster's standard output is line-buffered, so the lines of the
// clusters' threads that share one pipe or file arrive whole (a full buffer would be written at
// an arbitrary byte); on clusters other than 0 the program's output is silent from here until
// CREATE, so what main prints before MAIN_INITENV (banners, usage, echoed input) is cluster 0's
// alone, as in one process.
__attribute__((constructor)) void quiet_from_start() {
    const long rank = rank_from_env();
    if (rank < 0) return;
    if (!isatty(1)) setvbuf(stdout, nullptr, _IOLBF, 0);
    if (rank > 0 && keep_real_fds()) quiet(true);
}

// How many of pids 0..n-1 run on `cluster`, under the distribution of the last CREATE.
long local_share(long n, uint16_t cluster) {
    const long lo = long(cluster) * g.per, hi = std::min(n, lo + g.per);
    return hi > lo ? hi - lo : 0;
}

// Tell every later cluster that this one's threads of the current CREATE all passed.
void order_send_passed() {
    for (uint16_t c = uint16_t(g.cluster + 1); c < g.clusters; c++) {
        const uint64_t n = order.creates;
        // A cluster that is down gets nothing; its own threads, if any, are gone.
        (void)g.rt->endpoint(t_local).send(RtAddr{c, kRtService}, order.handler, RtBytes{&n, sizeof n});
    }
}

void order_on_passed(RtEndpoint&, const AmMsg&, void*) {
    order.lower_passed.fetch_add(1, std::memory_order_acq_rel);
    for (uint16_t t = 0; t < g.threads; t++) g.rt->endpoint(t).notify();
}

// This thread passed: its first LOCK is held, or it blocks in another operation, or it ended.
void order_passed() {
    if (!t_before_first_lock) return;
    t_before_first_lock = false;
    if (order.pending.fetch_sub(1, std::memory_order_acq_rel) == 1) order_send_passed();
}

// Before this thread's first LOCK of a CREATE: wait until every earlier cluster passed.
void order_wait_for_earlier_clusters() {
    if (g.cluster == 0) return;
    const uint64_t need = uint64_t(g.cluster) * order.creates;
    if (order.lower_passed.load(std::memory_order_acquire) >= need) return;
    // A release first: a lock token this cluster holds free, but not yet covered by a flush, goes
    // back only at this cluster's next sync operation (PROTOCOL.md, "Locks"), and while every
    // thread here waits that would be none: an earlier cluster's first LOCK of such a lock (volrend's
    // IndexLock, homed here) waited out the whole bound.
    check(g.node->flush(), "LOCK");
    const uint64_t t0 = mono_ns();
    const RtStatus s = g.rt->endpoint(t_local).wait_until(
        [need] { return order.lower_passed.load(std::memory_order_acquire) >= need; }, kStartOrderWaitUs);
    if (s != RtStatus::kOk) order.waits_cut_short.fetch_add(1, std::memory_order_relaxed);
    order.wait_ns.fetch_add(mono_ns() - t0, std::memory_order_relaxed);
}

// The ids of the sync object at `object` (k of them): the same ids each time it is initialised.
uint32_t sync_id(const void* object, unsigned k, const char* what) {
    const uint32_t id = need_node(what).alloc_sync_ids_for(object, k);
    if (id >= g.node->config().max_sync_ids)
        die("%s: no sync ids left (%u in all: locks, barriers, counters, flags, condition variables)", what,
            g.node->config().max_sync_ids);
    return id;
}

// Sync ids 0 (the fence lock) and 1 (WAIT_FOR_END's barrier) are the layer's own; a program's
// object holding one of them was never initialised (shared memory starts zeroed).
constexpr uint32_t kFirstUserSyncId = 2;
uint32_t user_id(uint32_t id, const char* use, const char* init) {
    if (id < kFirstUserSyncId) die("%s of an object that %s never initialised", use, init);
    return id;
}

// Under our launcher only (its run directory exists and is removed at the end of the run).
void start_counters_file(Runtime& rt) {
    const char* run = getenv("ICCS_RUN_ID");
    if (run == nullptr || *run == '\0') return;
    const std::string dir = std::string("/tmp/iccs-") + run;
    if (access(dir.c_str(), W_OK) != 0) return;
    const std::string path = dir + "/dsm-c" + std::to_string(rt.cluster()) + ".json";
    const RtTransport t = rt.transport();
    const std::string transport = t == RtTransport::kIccs ? "iccs" : t == RtTransport::kDirect ? "direct" : "delay";
    dsm::DsmNode* node = g.node;
    const long pid = long(getpid());
    std::thread([path, transport, node, pid, run = std::string(run)] {
        const std::string tmp = path + ".tmp";
        for (;;) {
            std::string j = "{\"run\": \"" + run + "\", \"pid\": " + std::to_string(pid) + ", \"transport\": \"" +
                            transport + "\"";
            for (const auto& [k, v] : node->counter_pairs()) j += ", \"" + k + "\": " + std::to_string(v);
            j += "}\n";
            if (FILE* f = fopen(tmp.c_str(), "w")) {
                fputs(j.c_str(), f);
                fclose(f);
                if (rename(tmp.c_str(), path.c_str()) != 0) return;  // the run directory is gone
            } else {
                return;
            }
            std::this_thread::sleep_for(std::chrono::seconds(1));
        }
    }).detach();
}

// The program's own globals as the linker script bounds them (empty ranges left out).
std::vector<std::pair<uintptr_t, uint64_t>> program_globals() {
    std::vector<std::pair<uintptr_t, uint64_t>> out;
    const std::pair<char*, char*> ranges[] = {{__iccs_globals_data_start, __iccs_globals_data_end},
                                              {__iccs_globals_bss_start, __iccs_globals_bss_end}};
    for (const auto& [a, e] : ranges)
        if (a != nullptr && e > a) out.emplace_back(reinterpret_cast<uintptr_t>(a), uint64_t(e - a));
    return out;
}

// This cluster's share of CREATE(fn, n): threads for its pids but the first, which the calling
// thread (main) runs; the threads of an earlier CREATE have ended (join_workers).
void run_share(dsm::DsmNode& nd, void (*fn)(void), long n) {
    g.created = n;
    g.per = (n + g.clusters - 1) / g.clusters;
    const long mine = local_share(n, g.cluster);
    const long first = long(g.cluster) * g.per;
    const bool ordered = order.on && g.clusters > 1;
    t_local = 0;
    if (ordered) {
        order.creates++;
        order.pending.store(mine, std::memory_order_release);
        if (mine == 0) order_send_passed();
    }
    for (long i = 1; i < mine; i++)
        g.workers.emplace_back([fn, i, first, ordered, &nd] {
            iccs::activity_bind_thread(uint32_t(i) + 1);  // compute thread i's line (main is slot 0)
            nd.bind_thread(uint16_t(i));
            t_pid = first + i;
            t_local = uint16_t(i);
            t_before_first_lock = ordered;
            t_first_unlock_flushes = ordered && g.cluster + 1 < g.clusters;
            fn();
            order_passed();
            nd.unbind_thread();  // a release: this thread's writes go home
        });
    if (mine > 0) {
        t_pid = first;
        t_before_first_lock = ordered;
        t_first_unlock_flushes = ordered && g.cluster + 1 < g.clusters;
        g.main_in_share = true;
        fn();
        g.main_in_share = false;
        order_passed();
        check(nd.flush(), "end of the thread function");
    }
}

void join_workers() {
    for (auto& w : g.workers) w.join();
    g.workers.clear();
}

// Cluster 0's main: every cluster's main meets it in the main barrier, then reads `c`.
void announce(dsm::DsmNode& nd, const Command& c, const char* what) {
    g.cmd[g.cmd_seq++ % 2] = c;
    check(nd.barrier(g.main_barrier, 1, g.clusters), what);
}

// The main thread of a cluster other than 0 from the first CREATE on: meets cluster 0's main at
// each of its commands, after this cluster's threads of the last CREATE ended; never returns.
[[noreturn]] void servant_loop(dsm::DsmNode& nd) {
    for (;;) {
        join_workers();
        check(nd.barrier(g.main_barrier, 1, g.clusters), "the clusters' mains meeting");
        const Command c = g.cmd[g.cmd_seq++ % 2];
        if (c.kind == Command::kCreate) {
            run_share(nd, c.fn, c.n);
        } else if (c.kind == Command::kEnd) {
            t_pid = 0;
            exit(c.status);  // ends the run collectively (MAIN_END's path, the on_exit handler)
        } else if (c.kind != Command::kWaitForEnd) {
            die("cluster 0's main sent an unknown command %u", unsigned(c.kind));
        }
    }
}

}  // namespace

bool attach(Runtime& rt, std::string& err) {
    dsm::DsmConfig cfg;
    if (!dsm::dsm_config_from_env(cfg, err)) return false;
    cfg.globals = program_globals();
    if (cfg.globals.empty() && rt.clusters() > 1 && __iccs_globals_data_start == nullptr) {
        err = "the program was not linked with the iccs linker script (pkg-config --libs iccs gives -Wl,-T,"
              "parmacs_globals.ld): its globals cannot be shared between the clusters";
        return false;
    }
    auto n = dsm::DsmNode::attach(rt, cfg, err);
    if (!n) return false;
    g.rt = &rt;
    g.node = n.release();
    g.cluster = rt.cluster();
    g.clusters = rt.clusters();
    g.threads = rt.threads();
    if (const char* v = getenv("ICCS_PARMACS_ORDERED_START")) {
        if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0) {
            err = std::string("ICCS_PARMACS_ORDERED_START=") + v + ": must be 0 or 1";
            return false;
        }
        order.on = strcmp(v, "1") == 0;
    }
    // The handler id after the DSM's range (or the one before it, if the DSM's ends at the top).
    order.handler = uint16_t(cfg.handler_base + dsm::kDsmHandlers < kRtUserHandlers ? cfg.handler_base + dsm::kDsmHandlers
                                                                                    : cfg.handler_base - 1);
    rt.set_handler(order.handler, order_on_passed, nullptr);
    // Every cluster registered its handlers: meet before anyone sends (runtime.hpp). The runtime
    // barrier is of every compute thread, so this cluster's other endpoints join from helpers.
    std::vector<std::thread> helpers;
    std::atomic<int> bad{0};
    for (uint16_t t = 1; t < g.threads; t++)
        helpers.emplace_back([&, t] { if (rt.endpoint(t).barrier() != RtStatus::kOk) bad++; });
    if (rt.endpoint(0).barrier() != RtStatus::kOk) bad++;
    for (auto& h : helpers) h.join();
    if (bad.load()) {
        err = "the start-up barrier of the clusters failed: " + rt.endpoint(0).last_error();
        return false;
    }
    // Counters served while the program runs: over DPDK telemetry (/iccs/dsm) where the runtime
    // has it (iccs); else (direct, delay) a file the launcher's run directory holds,
    // /tmp/iccs-<run>/dsm-c<cluster>.json, rewritten every second, which `iccs stat` reads.
    dsm::DsmNode* node = g.node;
    if (!rt.serve_counters("dsm", [node] { return node->counter_pairs(); })) start_counters_file(rt);
    g.main_thread = std::this_thread::get_id();
    g.main_barrier = g.node->alloc_sync_ids(1);  // == 1: the first id after the fence lock
    g.node->bind_thread(0);  // main is compute thread 0 (the prefix's CLOCK replay uses its endpoint)
    if (g.cluster != 0 && fds.saved_stdout < 0) {  // a rank the environment did not give (tests)
        if (!keep_real_fds()) {
            err = "cannot redirect standard output of cluster " + std::to_string(g.cluster);
            return false;
        }
        quiet(true);
    }
    return true;
}

int diag_fd() { return fds.saved_stderr >= 0 ? fds.saved_stderr : 2; }

void write_report_file() {
    const char* base = getenv("ICCS_REPORT");
    if (base == nullptr || *base == '\0' || g.node == nullptr || g.report_written.exchange(true)) return;
    const dsm::DsmCounters& c = g.node->counters();
    auto u = [](const std::atomic<uint64_t>& a) { return static_cast<unsigned long long>(a.load()); };
    const std::string file = std::string(base) + ".dsm.c" + std::to_string(g.node->cluster());
    FILE* out = fopen(file.c_str(), "w");
    if (out == nullptr) return;  // the launcher reports this cluster's DSM counters as missing (null)
    fprintf(out,
            "{\"cluster\":%u,\"read_faults\":%llu,\"write_faults\":%llu,\"page_fetches\":%llu,"
            "\"page_fetch_us_mean\":%.3f,\"diffs_sent\":%llu,\"diff_bytes\":%llu,\"diffs_applied\":%llu,"
            "\"invalidations\":%llu,\"intervals\":%llu,\"notices_received\":%llu,\"lock_acquires\":%llu,"
            "\"lock_wait_s\":%.9f,\"barriers\":%llu,\"barrier_wait_s\":%.9f,\"getsubs\":%llu,"
            "\"remote_allocs\":%llu,\"shared_used_bytes\":%llu,\"private_global_words\":%llu,\"roi_s\":%s}\n",
            unsigned(g.node->cluster()), u(c.read_faults), u(c.write_faults), u(c.page_fetches),
            c.page_fetches.load() ? double(c.page_fetch_ns.load()) / 1e3 / double(c.page_fetches.load()) : 0.0,
            u(c.diffs_sent), u(c.diff_bytes), u(c.diffs_applied), u(c.invalidations), u(c.intervals),
            u(c.write_notices_received), u(c.lock_acquires), double(c.lock_wait_ns.load()) / 1e9, u(c.barriers),
            double(c.barrier_wait_ns.load()) / 1e9, u(c.getsubs), u(c.remote_allocs),
            static_cast<unsigned long long>(g.node->used_bytes()), u(c.private_global_words),
            g.roi_ns ? std::to_string(double(g.roi_ns) / 1e9).c_str() : "null");
    fclose(out);
}

bool report_to_file_only() {
    const char* v = getenv("ICCS_REPORT_ONLY");
    return v != nullptr && *v == '1';
}

void finish_report() {
    fflush(stdout);
    quiet(false);
    if (!g.node) return;
    write_report_file();
    if (report_to_file_only()) return;  // `iccs run --report FILE`: the launcher writes them there
    std::string block = g.node->format_counters();
    if (g.roi_ns) {
        char roi[64];
        snprintf(roi, sizeof roi, "  roi_us %.1f\n", double(g.roi_ns) / 1e3);
        block += roi;
    }
    if (order.wait_ns.load() || order.waits_cut_short.load()) {  // "Thread ids follow the clusters"
        char line[128];
        snprintf(line, sizeof line, "  first_lock_order_wait_us %.1f  first_lock_order_cut_short %llu\n",
                 double(order.wait_ns.load()) / 1e3, static_cast<unsigned long long>(order.waits_cut_short.load()));
        block += line;
    }
    // One write: the block of each cluster stays whole on a terminal the clusters share.
    fflush(stderr);
    (void)!write(diag_fd(), block.data(), block.size());
}

dsm::DsmNode* node() { return g.node; }

bool quiescent_main() {
    return std::this_thread::get_id() == g.main_thread && !g.main_in_share && g.workers.empty();
}

void end_servants(int status) {
    if (!g.serving || g.cluster != 0) return;
    g.serving = false;
    Command c{};
    c.kind = Command::kEnd;
    c.status = status;
    announce(*g.node, c, "the end of the run");
}

}  // namespace iccs::parmacs

using namespace iccs;
using iccs::parmacs::g;
using iccs::parmacs::t_pid;

extern "C" {

void iccs_pm_init(void) {
    if (g.started) return;  // MAIN_INITENV after a macro started the environment, or twice
    g.started = true;
    parmacs::start_backend();
}

void* iccs_pm_malloc(size_t bytes, const char* file, int line) {
    void* p = parmacs::need_node("G_MALLOC").alloc(bytes, 16);
    if (!p) parmacs::die("%s:%d: %s", file, line, dsm::DsmNode::error().c_str());
    return p;
}

// The shared region is a bump allocator (deterministic across the clusters' replays): freed
// memory is not reused.
void iccs_pm_free(void*) {}

// CREATE(fn, n): the threads of an earlier CREATE end first, in every cluster (none of SPLASH-3's
// programs lets them run on past a later CREATE: volrend's meet main in a barrier); then n threads
// across the clusters, main running pid 0.
void iccs_pm_create(void (*fn)(void), long n) {
    dsm::DsmNode& nd = parmacs::need_node("CREATE");
    const long cap = long(g.clusters) * g.threads;
    if (n < 1 || n > cap)
        parmacs::die("CREATE(fn, %ld): the run has %u clusters x %u compute threads = %ld; n must be 1..%ld (run with "
                     "more --clusters or --threads)", n, unsigned(g.clusters), unsigned(g.threads), cap, cap);
    parmacs::join_workers();
    if (!nd.parallel()) {
        if (g.clusters > 1) {  // where cluster 0's main writes its commands: the prefix's last allocation
            g.cmd = static_cast<parmacs::Command*>(nd.alloc(2 * sizeof(parmacs::Command), 64));
            if (g.cmd == nullptr) parmacs::die("CREATE: %s", dsm::DsmNode::error().c_str());
        }
        parmacs::check(nd.start_parallel(), "CREATE");
        parmacs::quiet(false);
        g.serving = g.clusters > 1;
        if (g.cluster != 0) {
            parmacs::run_share(nd, fn, n);
            parmacs::servant_loop(nd);
        }
    } else if (g.serving) {
        parmacs::Command c{};
        c.kind = parmacs::Command::kCreate;
        c.n = n;
        c.fn = fn;
        parmacs::announce(nd, c, "CREATE");
    }
    parmacs::run_share(nd, fn, n);
}

void iccs_pm_wait_for_end(long) {
    dsm::DsmNode& nd = parmacs::need_node("WAIT_FOR_END");
    const iccs::ActivityScope doing("WAIT_FOR_END");
    parmacs::order_passed();
    parmacs::join_workers();
    // The clusters' mains meet once their threads ended: every thread's writes are visible to
    // main's code after it (its epilogue reads results, e.g. to print them).
    if (g.serving) {
        parmacs::Command c{};
        c.kind = parmacs::Command::kWaitForEnd;
        parmacs::announce(nd, c, "WAIT_FOR_END");
    } else if (nd.parallel()) {
        parmacs::check(nd.flush(), "WAIT_FOR_END");
    }
    t_pid = 0;
}

long iccs_pm_pid(void) { return t_pid < 0 ? 0 : t_pid; }

unsigned long iccs_pm_clock_us(void) {
    timeval tv;
    gettimeofday(&tv, nullptr);
    const unsigned long us = (unsigned long)tv.tv_sec * 1000000ul + (unsigned long)tv.tv_usec;
    // In the replayed prefix (SPLASH programs read CLOCK before CREATE, often into shared memory)
    // every cluster takes cluster 0's value, so the prefixes stay identical.
    dsm::DsmNode& nd = parmacs::need_node("CLOCK");
    if (!nd.parallel() && t_pid < 0) return (unsigned long)nd.replay_value(us);
    return us;
}

void iccs_pm_lock_init(iccs_pm_lock_t* l) { l->id = parmacs::sync_id(l, 1, "LOCKINIT"); }

void iccs_pm_alock_init(iccs_pm_lock_t* a, long n) {
    if (n < 0) parmacs::die("ALOCKINIT(a, %ld): negative count", n);
    const uint32_t first = parmacs::sync_id(a, unsigned(n), "ALOCKINIT");
    for (long i = 0; i < n; i++) a[i].id = first + uint32_t(i);
}

void iccs_pm_lock(iccs_pm_lock_t* l) {
    const iccs::ActivityScope doing("LOCK", l->id);
    if (parmacs::t_before_first_lock) parmacs::order_wait_for_earlier_clusters();
    parmacs::check(parmacs::need_node("LOCK").lock(parmacs::user_id(l->id, "LOCK", "LOCKINIT")), "LOCK");
    parmacs::order_passed();
}
void iccs_pm_unlock(iccs_pm_lock_t* l) {
    dsm::DsmNode& nd = parmacs::need_node("UNLOCK");
    parmacs::check(nd.unlock(parmacs::user_id(l->id, "UNLOCK", "LOCKINIT")), "UNLOCK");
    if (parmacs::t_first_unlock_flushes) {  // (t_first_unlock_flushes says why)
        parmacs::t_first_unlock_flushes = false;
        parmacs::check(nd.flush(), "UNLOCK");
    }
}

void iccs_pm_bar_init(iccs_pm_barrier_t* b, long) { b->id = parmacs::sync_id(b, 1, "BARINIT"); }

void iccs_pm_barrier(iccs_pm_barrier_t* b, long n) {
    dsm::DsmNode& nd = parmacs::need_node("BARRIER");
    if (g.created == 0) parmacs::die("BARRIER before CREATE");
    if (n < 1 || n > g.created) parmacs::die("BARRIER(b, %ld): n must be 1..%ld (the threads CREATE started)", n, g.created);
    uint16_t parts = 0;
    for (uint16_t c = 0; c < g.clusters; c++)
        if (parmacs::local_share(n, c) > 0) parts++;
    const long local = parmacs::local_share(n, g.cluster);
    const iccs::ActivityScope doing("BARRIER", b->id);
    parmacs::order_passed();
    parmacs::check(nd.barrier(parmacs::user_id(b->id, "BARRIER", "BARINIT"), uint16_t(local), parts), "BARRIER");
}

void iccs_pm_gs_init(iccs_pm_gs_t* gs) { gs->id = parmacs::sync_id(gs, 1, "GSINIT"); }

long iccs_pm_getsub(iccs_pm_gs_t* gs, long last, long nproc) {
    int64_t s = -1;
    const iccs::ActivityScope doing("GETSUB", gs->id);
    parmacs::check(parmacs::need_node("GETSUB").getsub(parmacs::user_id(gs->id, "GETSUB", "GSINIT"), last, nproc, s), "GETSUB");
    return long(s);
}

void iccs_pm_pause_init(iccs_pm_pause_t* p) { p->id = parmacs::sync_id(p, 1, "PAUSEINIT"); }
void iccs_pm_pause_set(iccs_pm_pause_t* p) { parmacs::check(parmacs::need_node("SETPAUSE").flag_set(parmacs::user_id(p->id, "SETPAUSE", "PAUSEINIT")), "SETPAUSE"); }
void iccs_pm_pause_clear(iccs_pm_pause_t* p) {
    parmacs::check(parmacs::need_node("CLEARPAUSE").flag_clear(parmacs::user_id(p->id, "CLEARPAUSE", "PAUSEINIT")), "CLEARPAUSE");
}
void iccs_pm_pause_wait(iccs_pm_pause_t* p) {
    const iccs::ActivityScope doing("WAITPAUSE", p->id);
    parmacs::order_passed();
    parmacs::check(parmacs::need_node("WAITPAUSE").flag_wait(parmacs::user_id(p->id, "WAITPAUSE", "PAUSEINIT")), "WAITPAUSE");
}

void iccs_pm_cond_init(iccs_pm_cond_t* c) { c->id = parmacs::sync_id(c, 1, "CONDVARINIT"); }
void iccs_pm_cond_wait(iccs_pm_cond_t* c, iccs_pm_lock_t* l) {
    const iccs::ActivityScope doing("CONDVARWAIT", c->id);
    parmacs::order_passed();
    parmacs::check(parmacs::need_node("CONDVARWAIT").cond_wait(parmacs::user_id(c->id, "CONDVARWAIT", "CONDVARINIT"), parmacs::user_id(l->id, "CONDVARWAIT", "LOCKINIT")), "CONDVARWAIT");
}
void iccs_pm_cond_signal(iccs_pm_cond_t* c, int all) {
    parmacs::check(parmacs::need_node("CONDVARSIGNAL").cond_signal(parmacs::user_id(c->id, all ? "CONDVARBCAST" : "CONDVARSIGNAL", "CONDVARINIT"), all != 0), all ? "CONDVARBCAST" : "CONDVARSIGNAL");
}

void iccs_pm_release_fence(void) {
    dsm::DsmNode& nd = parmacs::need_node("RELEASE_FENCE");
    if (nd.parallel()) parmacs::check(nd.fence(dsm::DsmNode::Fence::kRelease), "RELEASE_FENCE");
}
void iccs_pm_acquire_fence(void) {
    dsm::DsmNode& nd = parmacs::need_node("ACQUIRE_FENCE");
    if (nd.parallel()) parmacs::check(nd.fence(dsm::DsmNode::Fence::kAcquire), "ACQUIRE_FENCE");
}
void iccs_pm_fence(void) {
    dsm::DsmNode& nd = parmacs::need_node("FULL_FENCE");
    if (nd.parallel()) parmacs::check(nd.fence(dsm::DsmNode::Fence::kFull), "FULL_FENCE");
}

static void iccs_pm_nothing(void) {}
iccs_pm_then_t iccs_pm_fence_then(void (*fence)(void)) {
    fence();
    return iccs_pm_nothing;
}
iccs_pm_then_t iccs_pm_roi_then(int begin) {
    iccs_pm_roi(begin);
    return iccs_pm_nothing;
}

void iccs_pm_roi(int begin) {
    if (begin) g.roi_begin_ns = parmacs::mono_ns();
    else if (g.roi_begin_ns) g.roi_ns += parmacs::mono_ns() - g.roi_begin_ns;
}

}  // extern "C"
