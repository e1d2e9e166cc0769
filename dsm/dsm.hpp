// dsm.hpp: the page-grain software DSM between clusters (issue 7). Home-based lazy release
// consistency with multiple writers, over the cluster runtime's active messages (runtime.hpp),
// so it runs unchanged over every transport.
//
// The one idea: a shared region sits at a fixed virtual address. Inside a cluster its threads
// share the pages through the hardware; between clusters the application mapping is guarded with
// mprotect and a SIGSEGV handler keeps it coherent page by page: a read of an invalid page fetches
// it from its home cluster, the first write in an interval makes a twin, a release that leaves
// the cluster (a lock token another cluster asked for, a barrier) sends byte diffs (twin vs page)
// to the homes and closes an interval whose write notices travel with the lock's token or the
// barrier, and an acquire invalidates the pages those notices name. The region
// is a memfd mapped twice: the application view (protected) and a private protocol view (always
// read-write), through which fetches, diffs and twins touch page contents while application
// threads may be faulting on the same page.
//
// Several DsmNode instances may live in one process (one per simulated cluster in the tests),
// each with its own region at its own base: messages carry page numbers and offsets, never
// pointers, and the fault handler finds the node that owns the faulting address. Addresses outside
// every region go to the previous SIGSEGV handler (or the default action): a program's own
// segfault stays its crash.
//
// Threading: a compute thread binds to its cluster's node with bind_thread(t) (it then uses
// runtime.endpoint(t)); the node's protocol requests go to the service endpoint (kRtService) of
// the home cluster, so they are answered while compute threads compute.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime.hpp"

namespace iccs::dsm {

enum class HomePolicy : uint8_t {
    kRoundRobin,  // page p's home is cluster p mod C
    kBlock,       // the region is cut into C contiguous blocks, block c's home is cluster c
    kAllocBlock,  // each allocation made before CREATE is cut into C contiguous blocks (block c's
                  // home is cluster c), as programs split each array among their threads; an
                  // allocation of fewer than C pages, and memory allocated later, round-robin
};

struct DsmConfig {
    uintptr_t base_addr = 0x200000000000ull;  // [address] application view; same in every cluster
    // [bytes] a multiple of page_bytes. Address space, not memory: the region is reserved, and a
    // page costs memory only once touched (as the pthread build's malloc). 0: the default,
    // dsm_default_region_bytes().
    uint64_t region_bytes = 0;
    uint32_t page_bytes = 4096;               // [bytes] coherence unit: a multiple of the OS page, <= 1 MiB
    HomePolicy home = HomePolicy::kAllocBlock;  // ICCS_DSM_HOME; measured against round-robin: dsm/README.md
    uint32_t max_sync_ids = 65536;            // ids of locks, barriers, counters, flags: 0 .. max-1
    uint16_t handler_base = 100;              // runtime handler ids handler_base .. +kDsmHandlers-1
    // GETSUB as SPLASH-2's macros build it (a lock around the counter): an acquire and a release,
    // so data written before one caller's GETSUB is seen by the caller of a later index. false:
    // a bare counter at the home (one request, orders no data).
    bool getsub_orders = true;
    // Home migration (ICCS_DSM_MIGRATE): at a barrier every bound thread of every cluster is in,
    // a page that exactly one cluster wrote since the last such barrier becomes that cluster's
    // home page (its writes then need no twin, no diff and, under block homes, no fault). false:
    // homes stay where the home policy put them.
    bool migrate_homes = true;
    // Pages kept writable across releases (ICCS_DSM_KEEP_WRITTEN; dsm/PROTOCOL.md "A page written
    // at every release stays writable"): a page of another home that this cluster changed at its
    // last release and changes again is diffed from a copy at the release and stays writable with
    // that copy as its twin, instead of being protected and faulting at its next write. false, the
    // default: every released page is protected, as before session 21 (on, fmm's and radiosity's
    // write faults fell by a fifth and a half, but barnes was not shown not slower at load 6-15:
    // dsm/SPLASH3-LOCKS.md, session 21).
    bool keep_written = false;
    // Lock grace (ICCS_DSM_LOCK_GRACE_US): a token recalled while its lock is in use here (acquired
    // here within the grace before the recall) may still be taken again by this cluster for this
    // long after the recall, with no message, before it leaves (dsm/PROTOCOL.md, "Lock grace"). 0:
    // a recalled token leaves at its next release (or at once when free and flushed).
    uint32_t lock_grace_us = 1000;
    // The grace's idle end (dsm/PROTOCOL.md "A grace ends when its cluster stops using the lock"):
    // a recalled token in its grace leaves once this cluster has not taken it for kGraceIdleGaps
    // (dsm_impl.hpp) of the lock's smoothed reuse gap here (from the recall, or from the release of
    // the holder the recall met), the grace's full length above being the most it stays. This
    // (ICCS_DSM_LOCK_GRACE_IDLE_US) is the least idle end: a lock taken every microsecond still gets
    // this long for a thread the scheduler paused. At or above the grace: no idle end (the token
    // stays the whole grace, as before session 19). A fixed 100 us made barnes faster but raytrace
    // slower (its ray-id lock is taken less often than that by each cluster); the per-lock idle end
    // keeps raytrace's whole grace (dsm/SPLASH3-LOCKS.md).
    uint32_t lock_grace_idle_us = 50;
    // Grants ahead (ICCS_DSM_GRANTS_AHEAD, dsm/PROTOCOL.md "Grants ahead"): how many idle tokens
    // of the next ids a home grants with a lock to a cluster walking its ids (at most
    // kGrantsAhead, 16). 0, the default: none. On, barnes makes ~16 % fewer remote lock requests,
    // but radiosity's come out twice as many in most runs and it runs ~2x slower (session 17's
    // quiet-host A/B, dsm/SPLASH3.md), so it is left to the program that walks lock arrays.
    uint32_t grants_ahead = 0;
    // A LOCK that asked another cluster waits for its grant awake, polling and yielding the core,
    // this long before it sleeps (ICCS_DSM_LOCK_SPIN_US; dsm/PROTOCOL.md "The asker may wait awake
    // first"). 0, the default: wait_until's own 20 us spin only. 200 was not told apart from 0 on
    // a host at load 17-20 (barnes faster in 1 of 3 A/B pairs, fmm in 2 of 3: dsm/SPLASH3.md,
    // session 18), so it is left to a quiet-host measurement.
    uint32_t lock_spin_us = 0;
    // The program's own writable globals: page-aligned ranges (address, bytes) shared like the
    // region once parallel, under the same consistency (start_parallel maps each range onto DSM
    // memory in place; PARMACS passes the .data and .bss of the program's object files, which
    // the linker script dsm/parmacs_globals.ld puts on pages of their own). Coherence unit: the
    // OS page. One process per cluster only: clusters simulated in one process share their
    // globals through the hardware.
    std::vector<std::pair<uintptr_t, uint64_t>> globals;
};
inline constexpr uint16_t kDsmHandlers = 20;  // 18 used (dsm_wire.hpp), a few spare

// The default region: 64 GiB of address space, or this host's memory plus swap rounded up to a
// power of two where that is more, so any G_MALLOC the host could back fits.
uint64_t dsm_default_region_bytes();

// Reads ICCS_DSM_BASE, ICCS_DSM_SIZE, ICCS_DSM_PAGE, ICCS_DSM_HOME over the defaults; false with
// `err` naming the variable, its value and what is allowed.
bool dsm_config_from_env(DsmConfig& cfg, std::string& err);
// Checks a configuration against this host (page multiple, sizes); false with `err`.
bool dsm_config_check(const DsmConfig& cfg, std::string& err);

// Per-cluster counters (relaxed atomics: written by every thread of the cluster, read at the end).
struct DsmCounters {
    std::atomic<uint64_t> read_faults{0}, write_faults{0};
    std::atomic<uint64_t> page_fetches{0}, page_fetch_ns{0};
    std::atomic<uint64_t> diffs_sent{0}, diff_bytes{0}, diffs_applied{0};  // pages; payload bytes
    std::atomic<uint64_t> invalidations{0}, intervals{0}, write_notices_received{0};
    std::atomic<uint64_t> lock_acquires{0}, lock_wait_ns{0};
    // Acquires that asked the lock's home (the others found its token here: no message), and
    // tokens given back to the home because another cluster asked for the lock.
    std::atomic<uint64_t> lock_requests{0}, lock_returns{0};
    // Of lock_returns: tokens sent back behind their flush's diffs, before the diffs' acks (every
    // diff of the flush went to the lock's home: dsm_diff.cpp, flush_locked).
    std::atomic<uint64_t> lock_returns_early{0};
    // Of lock_requests and lock_returns: those of locks homed at this cluster, made by the thread
    // itself on the home's manager (no message to this cluster's service thread, no wake-up of it).
    std::atomic<uint64_t> lock_requests_here{0}, lock_returns_here{0};
    // Of lock_returns: sent to the home's thread that waits for the token (it asked on the home
    // itself: lock_requests_here there), which takes it back in its wait, not to the service thread.
    std::atomic<uint64_t> lock_returns_to_thread{0};
    // Of lock_returns: idle tokens that went home with a recalled one, unasked (tokens_ahead).
    std::atomic<uint64_t> lock_returns_ahead{0};
    // Idle tokens granted to this cluster along with the one it asked for, unasked (its requests
    // walk the home's ids: grants ahead), and of them those a LOCK here took before they left.
    std::atomic<uint64_t> lock_grants_ahead{0}, lock_grants_ahead_used{0};
    // Lock grace (DsmConfig::lock_grace_us): recalls that left a token here in its grace (not given
    // back at once), acquires that took a recalled token in its grace (no message), and the time
    // from such a recall to the token's leaving, summed (what the other cluster waited for it on
    // account of the grace and the flush after it).
    std::atomic<uint64_t> lock_graces{0}, lock_grace_reuses{0}, lock_grace_hold_ns{0};
    // FENCE macros (each an exchange with the fence lock's home), and condition-variable
    // operations (a message to the variable's home, or made on it when it is this cluster).
    std::atomic<uint64_t> fences{0}, cond_ops{0};
    std::atomic<uint64_t> barriers{0}, barrier_wait_ns{0};
    // Of barriers: the cluster's exchanges made on the barrier's home manager here, with no
    // message, because this cluster is its home (dsm/PROTOCOL.md, "Barriers").
    std::atomic<uint64_t> barriers_here{0};
    std::atomic<uint64_t> getsubs{0}, remote_allocs{0};
    // Words of the program's globals whose values differed between the clusters at CREATE
    // (pointers to memory from malloc): each cluster keeps its own.
    std::atomic<uint64_t> private_global_words{0};
    // Pages whose home moved to their only writer at a barrier (the same count at every cluster).
    std::atomic<uint64_t> homes_moved{0};
    // Pages made writable by a write fault on the page before them (kWriteAhead, dsm_impl.hpp),
    // and of them those whose diff at the release was empty (no change: no diff, no notice).
    std::atomic<uint64_t> pages_written_ahead{0}, written_ahead_unchanged{0};
    // Pages a fetch installed writable (changed here at one of the last two flushes: "Fetch for
    // write"); those left unchanged count in written_ahead_unchanged too.
    std::atomic<uint64_t> pages_fetched_writable{0};
    // Home pages left writable (untracked) that a served fetch twinned instead of protecting (PROTOCOL.md,
    // "A served home page is twinned, not protected"); those found unchanged at the next release
    // count in written_ahead_unchanged too.
    std::atomic<uint64_t> pages_served_twinned{0};
    std::atomic<uint64_t> pages_kept_writable{0};  // released pages left writable with a new twin (keep_written)
    // mprotect calls of the protocol in the parallel section (each splits or merges mappings and
    // flushes the TLB of every core running a thread of the process): one per run of pages whose
    // protection changes together, at a fault, a served fetch, a release, an invalidation or a move.
    std::atomic<uint64_t> protection_changes{0};
};

enum class DsmStatus : uint8_t { kOk, kBadArg, kNoSpace, kMismatch, kRuntime };

class DsmNode {
public:
    // Map the region at cfg.base_addr (fails if anything is mapped there), register the protocol
    // handlers on `rt` (every cluster must attach before any of them sends: meet in a barrier or
    // start_parallel afterwards). nullptr with `err` on failure.
    static std::unique_ptr<DsmNode> attach(Runtime& rt, const DsmConfig& cfg, std::string& err);
    ~DsmNode();  // unmaps; the runtime must no longer call the handlers (stop it first)
    DsmNode(const DsmNode&) = delete;
    DsmNode& operator=(const DsmNode&) = delete;

    const DsmConfig& config() const { return cfg_; }
    uint16_t cluster() const { return cluster_; }
    uint16_t clusters() const { return clusters_; }
    void* base() const { return reinterpret_cast<void*>(cfg_.base_addr); }
    bool parallel() const { return parallel_.load(std::memory_order_acquire); }

    // Shared allocation (aligned to `align`, a power of two). Before start_parallel: a local,
    // deterministic bump allocator (every cluster replaying the same prefix gets the same
    // addresses). After: one request to cluster 0, which owns the bump pointer. nullptr when the
    // region is full (error() says how much was asked, used and available).
    void* alloc(uint64_t bytes, uint64_t align = 16);
    uint64_t used_bytes() const { return used_.load(); }
    // A sync id (locks, barriers, counters, flags), the same way: local before start, cluster 0
    // after. Returns max_sync_ids (out of range) when none is left.
    uint32_t alloc_sync_ids(uint32_t n);
    // The sync ids of one object (a lock, barrier, counter, flag or condition variable, or an
    // array of n locks) at address `object`: the first init takes n fresh ids; initialising the
    // same object again (with the same n) gives the same ids, with no message once this cluster
    // knows them. SPLASH programs re-initialise the locks and condition variables of reused cells
    // every step (barnes); without this each init would use up ids (and a round trip) for good.
    // The shared region is never reused by G_MALLOC, so an address names one object for the run;
    // ids are per object, not per type, so memory a program's own allocator reuses for another
    // sync object keeps the ids. Returns max_sync_ids when none is left.
    uint32_t alloc_sync_ids_for(const void* object, uint32_t n);

    // The calling thread (any OS thread) acts as compute thread t of this cluster from now on:
    // its faults and sync operations use runtime endpoint(t). unbind_thread() flushes its writes.
    void bind_thread(uint16_t t);
    void unbind_thread();
    RtEndpoint* bound_endpoint() const;

    // End of the sequential prefix (called once per cluster, by a bound thread): every cluster's
    // region copy is compared by hash at cluster 0 (kMismatch, with error(), when the prefix was
    // not deterministic), then the region turns coherent with every page valid everywhere. Later
    // calls do nothing (the region stays coherent).
    DsmStatus start_parallel();

    // Replay of a non-deterministic input of the sequential prefix (before start_parallel), e.g.
    // the wall clock SPLASH programs read before CREATE: cluster 0 returns `mine` and records it;
    // every other cluster gets cluster 0's value of the same call (by sequence number), so the
    // replayed prefixes stay identical. After start it returns `mine`. The thread must be bound.
    uint64_t replay_value(uint64_t mine);

    // Release-consistent synchronization; the calling thread must be bound. A lock's token stays
    // at the cluster that acquired it last: a re-acquire there, by any of its threads, sends no
    // message, and an unlock sends and flushes nothing until another cluster asks for the lock
    // (its home recalls the token, which leaves after a flush, with the write notices).
    DsmStatus lock(uint32_t id);
    DsmStatus unlock(uint32_t id);
    // Barrier `id` of `local` threads of this cluster and `clusters` participating clusters
    // (defaults: every thread of every cluster). Threads of a cluster meet first, then the last
    // of them exchanges write notices with the barrier's home.
    DsmStatus barrier(uint32_t id, uint16_t local = 0, uint16_t clusters = 0);
    // Get-next-index: s = 0, 1, ..., last, then -1; after `nproc` callers saw -1 it starts again.
    // With config().getsub_orders (the default) it runs under the lock of the same id (acquire,
    // take the index, release), as SPLASH-2's GETSUB does under its lock.
    DsmStatus getsub(uint32_t id, int64_t last, int64_t nproc, int64_t& s);
    // A flag event on sync id `id` (set/clear under the id's lock: set is a release, wait an acquire).
    DsmStatus flag_set(uint32_t id);
    DsmStatus flag_clear(uint32_t id);
    DsmStatus flag_wait(uint32_t id);
    // Condition variable `cv` used with lock `lk` held (Mesa semantics).
    DsmStatus cond_wait(uint32_t cv, uint32_t lk);
    DsmStatus cond_signal(uint32_t cv, bool all);
    // Make this cluster's writes visible (release: a flush, and its notices acked by the fence
    // lock's home) / see every write released so (acquire: the notices that home holds applied);
    // kFull does both. One exchange with that home, no lock taken. A thread spinning on a flag sees
    // the flag's new value possibly before the writer's notices reach it: it must fence again
    // after seeing it.
    enum class Fence : uint8_t { kRelease = 1, kAcquire = 2, kFull = 3 };
    DsmStatus fence(Fence kind = Fence::kFull);
    // Flush this cluster's writes to their homes and close an interval (part of every release
    // that leaves the cluster: a lock token given back, a barrier, a fence); then give back the
    // recalled lock tokens the flush covers.
    DsmStatus flush();
    // After the run's collective end (no handler runs any more): the region and the globals turn
    // plain read-write memory of this process, so code that runs after it (exit handlers, static
    // destructors writing globals) takes no fault.
    void end_coherence();

    // Cluster 0's side of alloc() and alloc_sync_ids() once parallel (its service thread only).
    void alloc_commit(uint64_t new_used);
    uint32_t take_sync_ids(uint32_t n);
    // The ids of `object` (n of them) at cluster 0, taken on its first init (any thread).
    uint32_t take_sync_ids_for(uint64_t object, uint32_t n);

    // Why the calling thread's last call failed (one line).
    static const std::string& error();

    DsmCounters& counters() { return ctr_; }
    // Counters as one block ("dsm cluster C:" and indented "name value" pairs), for the end of a run.
    std::string format_counters() const;
    // The same counters as (name, value) pairs, times in ns (telemetry /iccs/dsm, the live file).
    std::vector<std::pair<std::string, uint64_t>> counter_pairs() const;

    struct Impl;  // protocol state (dsm_impl.hpp; dsm.cpp and the parts it names)

private:
    DsmNode() = default;
    std::string region_full(uint64_t bytes, uint64_t used) const;
    friend struct Impl;
    friend struct FaultDispatch;
    DsmConfig cfg_;
    uint16_t cluster_ = 0, clusters_ = 1;
    std::atomic<bool> parallel_{false};
    std::atomic<uint64_t> used_{0};
    std::atomic<uint32_t> next_sync_{1};  // 0 is the fence lock
    // Object address -> (first id, count): every id this cluster took or learned for an object
    // (the whole map at cluster 0 once parallel; the prefix's entries are the same everywhere).
    std::mutex objects_mu_;
    std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> object_ids_;
    DsmCounters ctr_;
    std::unique_ptr<Impl> impl_;
};

const char* to_string(DsmStatus s);

}  // namespace iccs::dsm
