// dsm_impl.hpp: the DSM's internal state (its messages: dsm_wire.hpp), shared by its parts:
// dsm.cpp (the node, the region), dsm_fault.cpp (faults, fetch), dsm_diff.cpp (twins, diffs, release),
// dsm_notices.cpp (intervals, write notices, acquire), dsm_alloc.cpp, dsm_start.cpp (CREATE,
// replay), dsm_config.cpp, dsm_sync.cpp (locks, counters, flags, condition variables and their
// home-side managers) and dsm_barrier.cpp (barriers). Not installed.
#pragma once

#include <time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "clock.hpp"
#include "dsm.hpp"
#include "dsm_wire.hpp"

namespace iccs::dsm {

static_assert(kHCount <= kDsmHandlers);  // the handler ids of dsm_wire.hpp fit in the range dsm.hpp reserves

// Read-only is 0: at CREATE every page is valid everywhere, and the page records live in memory
// that is zero until a page is first touched (DsmNode::Impl::pages), so no record is written then.
enum : uint8_t { kReadOnly = 0, kInvalid = 1, kWritable = 2 };

struct Page {
    std::mutex mu;                       // state transitions of this page in this cluster
    std::atomic<uint8_t> state{kReadOnly};
    std::atomic<bool> fetching{false};   // a thread of this cluster is fetching it; others wait
    bool twin = false;                   // twin holds the page as of the interval's first write (non-home; home: written ahead or served)
    bool dirty = false;                  // written in the current interval (a write notice to come)
    bool ahead = false;                  // made writable by a fault on a page before it (kWriteAhead)
    // A fetch of it was served here while this cluster was not its home: the requester had applied
    // a barrier's move of it here that this cluster had not yet (apply_moves then keeps it tracked).
    bool served_unhomed = false;
    // A home page left writable (untracked: written here since CREATE) that a served fetch
    // protected (protect_served), until it is writable again. Its writes since its last notice were
    // named in none, so `wrote_at` says nothing of them: write-ahead takes such a page as written
    // lately ("Write-ahead").
    bool served_protected = false;
    // Twinned by a served fetch while untracked (serve_run, "A served home page is twinned, not
    // protected"), until the release that compares it: found unchanged, it does not make that
    // release a flush of `flush_seq` (write-ahead's "written lately" counts flushes that changed).
    bool served_twin = false;
    uint32_t epoch = 0;                  // bumped by every invalidation: a fetch that crossed one retries
    // The cluster's flush (flush_seq) at which its diff last carried a change (a home page: at which
    // it was last in a write notice); 0: never. A write fault makes the following pages written as
    // recently writable with it (write-ahead), and a fetch installs such a page writable.
    uint32_t wrote_at = 0;
    // Changed at one of the cluster's last two flushes (`seq`: flush_seq now): likely written again.
    bool written_lately(uint32_t seq) const { return wrote_at != 0 && wrote_at + 1 >= seq; }
    // 0: the home is the policy's (home_of_page); h + 1: the page's home moved to cluster h at a
    // barrier (apply_moves), its only writer since the last barrier every thread was in.
    std::atomic<uint16_t> moved_home{0};
    std::atomic<uint8_t> home_moves{0};  // how often it moved (the same at every cluster)
    // The clusters (bit c; clusters from 63 on all set bit 63) that an interval stored here names
    // as writing it: a barrier's home knows every interval up to the barrier (kMoveSoleCopy).
    std::atomic<uint64_t> writers{0};
};

// A page of another home that this cluster changed at one of its last kKeepFlushes flushes stays
// writable through the next one (DsmConfig::keep_written, DsmNode::Impl::flush_locked).
inline constexpr uint32_t kKeepFlushes = 4;
// A page's home moves at most this many times, to a cluster that alone wrote it in the last
// kMoveEpochs epochs between full barriers (DsmNode::Impl::home_moves, dsm_home_moves.cpp).
inline constexpr uint8_t kMaxHomeMoves = 2;
inline constexpr size_t kMoveEpochs = 3;
// A move's new home (in the barrier reply's list) with this bit: no write notice the barrier's
// home has stored ever named the page's old home as its writer (Page::writers), so its copy is
// not its own data: every other cluster drops its copy and the new home leaves the page writable
// (apply_moves). Clusters number below it.
inline constexpr uint16_t kMoveSoleCopy = 0x8000;

// A lock's home-side state, and a flag's, a condition variable's and a counter's (one map of
// sync ids; an id is used as one kind by the program).
struct CondWaiter {
    RtAddr who;
    bool signaled = false;
    bool blocked = false;
    ReplyToken tok;
};
// A compute thread waiting for its grant (DsmNode::Impl::request_lock). A thread of the lock's home
// cluster asked no service thread: its grant is left here by whoever grants it and its endpoint
// notified. Another cluster's thread sent its request one-way: the grant comes back as a kHLockGrant
// message to its endpoint, whose handler (run in that thread's wait) leaves it here.
struct LocalGrant {
    std::vector<uint8_t> bytes;  // the grant, as a reply would carry it
    std::atomic<bool> ready{false};
};
struct LockWaiter {
    ReplyToken tok;
    VC acq;                        // the acquirer's time at its request
    LocalGrant* local = nullptr;   // non-null: a thread of the home cluster, granted in place
    // +1 / -1: the acquirer's requests to this home walk its ids up / down (grants ahead go with
    // its grant: grants_ahead); 0: not a walk.
    int8_t walk = 0;
};
struct SyncObj {
    // lock: its token is at cluster `owner` (-1: here at the home) until that cluster gives it back
    int32_t owner = -1;
    bool recalling = false;  // a kHLockRecall went to `owner` (one per tenure)
    int32_t ahead_from = -1;  // the token came home ahead from this cluster, and nobody took it since
    std::deque<LockWaiter> queue;
    VC vc;  // knowledge of the last release
    // flag
    bool flag = false;
    std::vector<ReplyToken> flag_waiters;
    // condition variable
    std::vector<CondWaiter> cond;
    // getsub
    int64_t sub = 0, seen_exhausted = 0;
    // barrier
    uint16_t bar_expect = 0;
    struct BarArrival {
        ReplyToken tok;
        VC vc;
        LocalGrant* local = nullptr;  // non-null: the home cluster's own thread, answered in place
    };
    std::vector<BarArrival> bar_arrived;
    VC bar_vc;
    // Home migration: every arrival of this episode came from a barrier all bound threads of its
    // cluster are in (`full`), and all with the same times of the latest and the oldest of the
    // last kMoveEpochs such barriers.
    bool bar_full = true;
    VC bar_lf, bar_since;
    std::vector<uint32_t> bar_kept;  // home pages their home may have written untracked: they do not move
};

// A read fault fetches its page and up to kFetchPages - 1 pages after it in one request: those of
// the region with the same home that are invalid here (dsm_fault.cpp, fetch). ArgoDSM's default
// loads 8 pages a miss the same way; one at a time, a cluster reading another's half of a matrix
// paid a round trip per page (matmul of `bench dsm --vs argo`: 256 requests of cluster 1 for B).
inline constexpr uint32_t kFetchPages = 8;
// Beyond them the run goes on, up to kFetchPagesWritten pages in all, over pages this cluster
// changed at one of its last two flushes (Page::written_lately; a fetch installs them writable,
// "Fetch for write"): SPLASH-3's lu-nc rewrites its rows of every column page after each notice
// of the other cluster's, 8 pages a round trip. Pages it only reads stay at 8: a fetch protects
// the home's copies, so each page fetched and not needed costs the home a write fault later
// (SPLASH-3's ocean with runs of 16 for every page: 8,200 -> 10,800 write faults a run). A read
// fault right after a thread's last fetched run doubles that run, up to this length too (fetch).
inline constexpr uint32_t kFetchPagesWritten = 32;

// A write fault on a non-home page also twins and unprotects, in the same mprotect, up to
// kWriteAhead - 1 pages after it that are read-only here, not homed here, and whose diff carried a
// change at one of this cluster's last two flushes (dsm_fault.cpp, make_writable); under block
// homes a fault on a home page does the same with the home pages after it that one of those
// flushes named, or that a fetch protected while left writable here (written untracked: no notice
// named them), and a fetch protected since (twinned only to be compared at the release): a program that
// writes the same rows or columns every step (LU's, radix's, ocean's) otherwise takes a SIGSEGV
// and an mprotect (splitting the mapping, flushing TLBs) per page per interval. A page made
// writable so and left unchanged costs a compare at the release and sends no diff and no notice.
inline constexpr uint32_t kWriteAhead = 16;
// The same prediction at a fetch: a fetched non-home page this cluster changed at one of its last
// two flushes is installed writable, twinned, in the fetch's mprotect (dsm_fault.cpp, fetch): a
// program that reads and then rewrites the pages another cluster's notice invalidated (LU's
// blocks, C -= A * B) took a read fault and then a write fault on each fetched run.

// The fence lock (sync id 0) keeps a home-held token: its release always goes home (one-way). Fences
// no longer take it (DsmNode::fence: their own exchange with its home, whose knowledge they share).
inline constexpr uint32_t kFenceLock = 0;

// This cluster's side of a lock other than the fence lock (dsm_sync.cpp). The lock's token stays at
// the cluster that acquired it last: its threads re-acquire it and hand it to each other with no
// message, and a release sends nothing, until the home recalls it for another cluster. It leaves
// with the cluster's write notices, after a flush that covers its last release here.
struct LockToken {
    bool here = false;        // the token is at this cluster
    bool held = false;        // a thread of this cluster holds the lock
    bool requesting = false;  // a thread of this cluster asked the home for it
    bool recalled = false;    // the home wants it back (another cluster waits)
    bool passed = false;      // recalled, but released to a waiting thread of this cluster (taken next)
    uint32_t waiters = 0;     // threads of this cluster waiting in LOCK for it
    uint32_t passes = 0;      // local passes since the recall (kMaxLocalPasses bounds them)
    uint64_t released = 0;    // rel_clock at its last release here
    uint64_t acquired_ns = 0;        // now_ns() at its last acquire here
    uint64_t released_ns = 0;        // now_ns() at its last release here
    uint64_t reuse_gap_ns = ~0ull;   // from its last release here to the LOCK call that took it next
    // reuse_gap_ns smoothed over this lock's acquires here (each new gap weighs 1/4, capped at
    // kReuseGapCapNs; 0: none yet): how often this cluster takes the lock, for its idle end.
    uint64_t reuse_gap_avg_ns = 0;
    // Recalled while in use here: the cluster's flushes keep it here until then (the idle end,
    // DsmNode::Impl::grace_idle_end: kGraceIdleGaps of its smoothed reuse gap, at least
    // DsmConfig::lock_grace_idle_us, after the recall or the release of a holder the recall met;
    // once taken again in the grace, grace_full_until_ns), and a LOCK of it takes it, with no
    // message, until grace_full_until_ns, the whole grace's end (DsmConfig::lock_grace_us <<
    // grace_doublings after the recall; 0: none).
    uint64_t grace_until_ns = 0;
    uint64_t grace_full_until_ns = 0;
    uint64_t graced_at_ns = 0;  // now_ns() at a recall that left it here in its grace (0: none)
    bool grace_reused = false;  // taken here since its recall, in its grace: it stays the whole grace
    // This lock's grace here is lock_grace_us << grace_doublings: a recall that meets a burst of use
    // here, of a token this cluster asked for again within the grace of giving it away (back_soon)
    // and that the other cluster asks for within the grace of its coming (or before), doubles it up
    // to kMaxGraceDoublings; any other recall sets it back to lock_grace_us. A counter
    // both clusters take all the time (SPLASH-3 raytrace's ray ids) stays longer where it is used;
    // a lock taken in bursts by one cluster at a time keeps the configured grace.
    uint8_t grace_doublings = 0;
    bool back_soon = false;   // its last request here came within the grace of its leaving
    uint64_t left_ns = 0;     // now_ns() when the token last left this cluster (0: never)
    uint64_t arrived_ns = 0;  // now_ns() when the grant of its last request here came
    VC at_grant;              // the lock's time at this cluster's grant
    // Where its return goes at the home (named by the recall): the thread of the home cluster that
    // waits for it (a request made on the home itself), else the home's service thread.
    uint16_t return_to = kRtService;
    // Granted ahead (with another lock's grant, unasked) and not yet taken here: a LOCK that takes
    // it counts it (lock_grants_ahead_used).
    bool came_ahead = false;
    // A recall found the token neither here nor asked for: it went home ahead, or a grant ahead of
    // it is still on the way here. Such a grant, when it comes, gives the token back at once.
    bool recall_unmatched = false;

    // A LOCK called at t0_ns takes it here: its reuse gaps, its acquire time.
    void taken(uint64_t t0_ns);
};

// A token leaving this cluster (DsmNode::Impl::token_return): the messages that give it back.
struct TokenReturn {
    uint32_t id = 0;
    uint16_t to = kRtService;  // the home's endpoint they go to (LockToken::return_to)
    std::vector<Wr> msgs;      // notices that do not fit go ahead, then the kHLockRel
    bool ahead = false;        // unasked (tokens_ahead): its last message is a kHLockAhead
};

// A recalled token still goes from its holder to a thread of the same cluster waiting for it, at
// most this many times before it leaves (as a cohort lock hands over locally, ArgoDSM's among them):
// two clusters contending for one lock otherwise move the token at every release (taskq of `bench
// dsm --vs argo` over direct: 898 transfers in one run, 48 in another, 0.22 s against 0.05 s).
inline constexpr uint32_t kMaxLocalPasses = 16;
// A lock's grace grows to at most lock_grace_us << kMaxGraceDoublings (LockToken::grace_doublings):
// raytrace's ray-id lock ran fastest near 3-10 ms of grace (dsm/SPLASH3.md, session 17).
inline constexpr uint8_t kMaxGraceDoublings = 2;
// A recalled token in its grace that its cluster does not take again leaves after this many of the
// lock's smoothed reuse gaps here (LockToken::reuse_gap_avg_ns; at least
// DsmConfig::lock_grace_idle_us, at most the whole grace): a lock taken every few microseconds
// (barnes's cell and body locks) leaves soon after its cluster stops taking it, one taken every
// few hundred microseconds (raytrace's ray-id lock) keeps the whole grace (dsm/SPLASH3-LOCKS.md).
inline constexpr uint64_t kGraceIdleGaps = 4;
// A reuse gap counts at most this much in the smoothed gap (a lock quiet for a phase would
// otherwise count as quiet for many acquires after it; any gap this long already means the whole
// grace, at most 1 s << kMaxGraceDoublings).
inline constexpr uint64_t kReuseGapCapNs = 4'000'000'000ull;

// A token given back at a recall from another cluster's home takes home with it the idle tokens of
// up to this many next ids of that home (DsmNode::Impl::tokens_ahead; PROTOCOL.md, "Tokens home
// ahead").
inline constexpr uint32_t kTokensAhead = 16;

// A grant to a cluster whose requests walk a home's ids carries, unasked, the tokens of up to this
// many next ids of that home in the walk's direction that are idle there (grants_ahead, dsm_sync.cpp;
// PROTOCOL.md, "Grants ahead").
inline constexpr uint32_t kGrantsAhead = 16;

struct LocalBarrier {
    uint32_t arrived = 0;
    std::atomic<uint64_t> gen{0};
    VC last;  // the merged knowledge this cluster got from the barrier's last episode
};

struct DsmNode::Impl {
    DsmNode& n;
    Runtime& rt;
    int memfd = -1;
    uint8_t* app = nullptr;   // application view at cfg.base_addr (protected)
    uint8_t* priv = nullptr;  // protocol view of the same memory (always read-write)
    uint8_t* twins = nullptr; // twin of page p at twins + p * page
    uint64_t npages = 0;      // pages of the region: 0 .. npages-1
    uint32_t page = 0;
    // The program's globals (DsmConfig::globals), each range an area of pages of gpage bytes
    // numbered after the region's, one unused number between areas (a run of consecutive
    // numbers never crosses an area). Shared in place from start_parallel on.
    struct Area {
        uint64_t first = 0, count = 0;  // page numbers first .. first+count-1
        uint8_t* app = nullptr;         // the program's own addresses (the application view)
        uint8_t* priv = nullptr;        // protocol view and twins, mapped at start_parallel
        uint8_t* twins = nullptr;
        int memfd = -1;
        // Per page, set at start_parallel: it holds a non-zero byte (copied into the memfd). The
        // others are holes of the memfd, compared at CREATE by the hash of a zero page, unread.
        std::vector<uint8_t> nonzero;
    };
    std::vector<Area> globals;
    uint32_t gpage = 4096;    // the OS page
    uint64_t total_pages = 0;  // page records: the region's and every area's (with the gaps)
    // One record a page of the whole region, in anonymous memory that is only reserved (mmap
    // MAP_NORESERVE): a zero record is a valid one (read-only, unlocked, no twin), so the region
    // can be tens of GiB and only the records of touched pages cost memory.
    Page* pages = nullptr;
    uint64_t pages_map_bytes = 0;  // 0: pages came from new[] (the zero-record check failed)
    std::vector<std::pair<uint64_t, uint64_t>> pre_allocs;  // (offset, bytes) of every alloc before CREATE
    std::vector<uint16_t> homes;  // block policies: the home of each page used at CREATE
    int slot = -1;            // in the process-wide node registry

    std::mutex dirty_mu;
    std::vector<uint32_t> dirty_list;  // pages whose dirty flag is set (and some whose flag an invalidation cleared)
    // Copies of the pages a flush keeps writable (keep_written), one run of kPageRun at a time;
    // flushes run one at a time (coh_mu).
    std::vector<uint8_t> kept_copies;
    uint8_t* kept_copy() {
        if (kept_copies.empty()) kept_copies.resize(kPageRun * size_t(page));
        return kept_copies.data();
    }
    // Flushes that had pages to release (flush_locked, under coh_mu); Page::wrote_at names one.
    std::atomic<uint32_t> flush_seq{0};

    // Flushes and the application of write notices run one at a time per cluster.
    std::mutex coh_mu;
    // Message buffers of earlier releases, kept with their capacity for the next ones (dsm_diff.cpp,
    // DiffBatch); under coh_mu.
    std::vector<std::vector<uint8_t>> spare_diff_buffers;
    std::mutex know_mu;  // vc and store
    VC vc;
    std::vector<std::map<uint32_t, std::vector<uint32_t>>> store;  // [cluster][interval] -> pages
    // [home cluster]: intervals that cluster's store is known to hold (its own always; others from
    // the VCs of its replies: a grant's lock time, a barrier's merged time, an acked release). A
    // release or barrier arrival to that home leaves them out: without it the first use of a
    // sync object late in a run (WAIT_FOR_END's barrier) would carry the run's whole history and
    // outgrow max_message(). One-way releases do not count (another endpoint's message to the
    // same home may overtake them).
    std::vector<VC> home_has;

    std::mutex held_mu;
    std::unordered_map<uint32_t, VC> held;  // the fence lock while held here: its knowledge at grant

    // Lock tokens (LockToken). A token may leave only once a flush that began after its last
    // release here has completed: rel_clock counts releases, flushed_clock is the rel_clock a
    // completed flush began at. The service thread gives a recalled idle token back at once when
    // that holds; otherwise the lock waits in recalled_idle for a compute thread's flush
    // (flush_wanted: the next sync operation or wait of any thread of the cluster flushes).
    std::mutex tok_mu;
    std::unordered_map<uint32_t, LockToken> tokens;
    std::vector<uint32_t> recalled_idle;
    // Per home cluster, the id of its last recall here (h_lock_recall: tokens go home ahead only
    // along a walk of that home's ids). Under tok_mu.
    std::vector<uint32_t> last_recall_from;
    // At the home, per cluster: the ids of its last two lock requests here (h_lock_acq: a walk of
    // this home's ids gets grants ahead). Under home_mu.
    std::vector<std::array<uint32_t, 2>> last_requests_from;
    // At the home, per cluster: tokens that came home ahead from it (kHLockAhead) and were then
    // granted to another cluster (useful) or back to it (wasted). Its recalls say whether to send
    // more (ahead_welcome). Under home_mu.
    std::vector<uint32_t> ahead_useful, ahead_wasted;
    bool ahead_welcome(int32_t from) const {
        return uint64_t(ahead_wasted[size_t(from)]) * 4 <= uint64_t(ahead_useful[size_t(from)]) + 16;
    }
    // A token that came home ahead from o.ahead_from is granted to cluster `to`: of use there, or
    // wasted (back to the cluster that sent it).
    void count_ahead_use(SyncObj& o, uint16_t to) {
        if (o.ahead_from < 0) return;
        (int32_t(to) == o.ahead_from ? ahead_wasted : ahead_useful)[size_t(o.ahead_from)]++;
        o.ahead_from = -1;
    }
    // Locks taken outside the parallel section (lock_outside_parallel: no token involved).
    std::vector<uint32_t> held_outside_parallel;
    std::atomic<bool> flush_wanted{false};
    // The earliest end of the grace of a token in recalled_idle kept in its grace (0 when one is
    // due now): until then a LOCK's or UNLOCK's flush for recalled_idle may wait; a thread about
    // to wait for another cluster flushes at once (serve_recalls). Written under tok_mu.
    std::atomic<uint64_t> grace_end_ns{0};
    // One grant slot a compute thread (by its thread index): where its pending LOCK's grant lands.
    std::unique_ptr<LocalGrant[]> grants;
    std::atomic<uint64_t> rel_clock{0}, flushed_clock{0};
    // Threads of this cluster waiting for a token held or asked for by another of its threads
    // sleep on their endpoints; tok_gen changes (and they are woken) when a token is released,
    // arrives, leaves, or a recall waits for a flush.
    std::atomic<uint64_t> tok_gen{0};
    std::atomic<uint32_t> tok_waiters{0};

    std::mutex bar_mu;
    std::unordered_map<uint32_t, LocalBarrier> bars;
    // Threads bound to this node (bind_thread .. unbind_thread): a barrier all of them are in, of
    // every cluster, is one where home pages may move (no thread anywhere touches shared memory).
    std::atomic<uint32_t> bound_threads{0};
    // The merged times of the last kMoveEpochs such barriers, the latest first (the same at every
    // cluster: each passes all of them, in the same order): a page written since the oldest by one
    // cluster only, and by it since the latest, moves to it.
    std::array<VC, kMoveEpochs> last_full;
    // Home pages of this cluster that a served fetch protected while untracked, and writable since
    // before the last full barrier (protect_served), in each of the last kMoveEpochs epochs, the
    // current one first: this cluster may have written them with no notice naming it, so a
    // barrier's arrival asks that they keep their home here
    // (home_moves, "Homes move to their only writer").
    std::mutex served_untracked_mu;
    std::array<std::vector<uint32_t>, kMoveEpochs> served_untracked;
    // flush_seq at the last two full barriers, the latest first: a page whose last notice
    // (Page::wrote_at) is not after the older one stayed untracked through a whole epoch. One
    // noticed since may have been left writable by the notice's own flush and not written since:
    // it is not listed (it moves when its writer alone wrote it in the window, as before).
    std::array<std::atomic<uint32_t>, 2> full_flush_seq{};
    void encode_served_untracked(Wr& w);  // dsm_barrier.cpp: a barrier arrival's part of them

    // Home-side managers: the service thread runs them, and a compute thread of this cluster acts
    // on a lock homed here itself (its request, its token's return: dsm_sync.cpp), all under
    // home_mu. Nothing is waited for under it (no request, no other lock of the node but know_mu).
    std::mutex home_mu;
    std::unordered_map<uint32_t, SyncObj> objs;
    struct StartArrival {
        ReplyToken tok;
        std::array<uint64_t, 5> v;  // region hash, used bytes, next sync id, region bytes, globals bytes
        std::vector<uint64_t> page_hashes;  // of every page of the globals, in order
    };
    std::vector<StartArrival> start_arrived;
    std::vector<std::pair<ReplyToken, std::vector<uint64_t>>> private_arrived;  // (page << 32 | offset)...
    // The words of the program's globals that differ between the clusters at CREATE (a pointer to
    // memory from malloc, a process id), by page: each cluster keeps its own value of them (a
    // fetch restores them, a diff leaves them out). Byte offsets of 8-byte words.
    std::unordered_map<uint64_t, std::vector<uint32_t>> private_words;

    // Cluster 0's values of non-deterministic inputs of the prefix (CLOCK), by sequence number,
    // and the requests of other clusters waiting for a value it has not produced yet.
    std::mutex replay_mu;
    std::vector<uint64_t> replay_log;
    std::vector<std::pair<uint64_t, ReplyToken>> replay_waiting;
    uint64_t replay_next = 0;  // this cluster's next sequence number

    Impl(DsmNode& node, Runtime& r) : n(node), rt(r) {}

    uint16_t h(uint16_t rel) const { return uint16_t(n.cfg_.handler_base + rel); }
    uint16_t home_of_page(uint64_t p) const {
        if (const uint16_t m = pages[p].moved_home.load(std::memory_order_acquire)) return uint16_t(m - 1);
        // Block policies: a table of the part used at CREATE (start_parallel; the region itself is
        // mostly unused address space). Round-robin, and pages allocated later: p mod C.
        if (p < homes.size()) return homes[p];
        return uint16_t(p % n.clusters_);
    }
    uint16_t home_of_sync(uint32_t id) const { return uint16_t(id % n.clusters_); }
    // Page p's area of globals (p must not be a region page); nullptr when p is in no area.
    const Area* area_of(uint64_t p) const {
        for (const Area& a : globals)
            if (p >= a.first && p < a.first + a.count) return &a;
        return nullptr;
    }
    // A page named by a message: the region's or a global one.
    bool valid_page(uint64_t p) const { return p < npages || area_of(p) != nullptr; }
    // Page p's bytes in the application view, the protocol view and its twin, and its length.
    uint8_t* page_app(uint64_t p) const {
        if (p < npages) return app + p * page;
        const Area* a = area_of(p);
        return a->app + (p - a->first) * gpage;
    }
    uint8_t* page_priv(uint64_t p) const {
        if (p < npages) return priv + p * page;
        const Area* a = area_of(p);
        return a->priv + (p - a->first) * gpage;
    }
    uint8_t* page_twin(uint64_t p) const {
        if (p < npages) return twins + p * page;
        const Area* a = area_of(p);
        return a->twins + (p - a->first) * gpage;
    }
    uint32_t page_len(uint64_t p) const { return p < npages ? page : gpage; }
    // The private words of page p (private_words), or nullptr: only pages of globals have some.
    const std::vector<uint32_t>* private_of(uint64_t p) const {
        if (p < npages || private_words.empty()) return nullptr;
        auto it = private_words.find(p);
        return it == private_words.end() ? nullptr : &it->second;
    }
    // The page holding address a (the region or an area of globals); UINT64_MAX when none does.
    uint64_t page_at(uintptr_t a) const {
        const uintptr_t b = n.cfg_.base_addr;
        if (a >= b && a < b + n.cfg_.region_bytes) return (a - b) / page;
        for (const Area& r : globals) {
            const uintptr_t s = reinterpret_cast<uintptr_t>(r.app);
            if (a >= s && a < s + r.count * gpage) return r.first + (a - s) / gpage;
        }
        return UINT64_MAX;
    }
    // Home pages left writable after their release (h_fetch): only where homes are contiguous.
    bool untracked_homes() const { return n.cfg_.home != HomePolicy::kRoundRobin; }
    RtAddr service(uint16_t c) const { return RtAddr{c, kRtService}; }

    // fn(run, len) over `sorted` (ascending, distinct pages) in chunks of at most kPageRun pages,
    // each chunk with its pages' locks held: taken in page order, as every path that holds two
    // while waiting for one takes them (fetch's and h_fetch's runs of kFetchPages; make_writable
    // only tries), so no deadlock. Lets a release or an invalidation change a run's protection
    // in one call.
    static constexpr size_t kPageRun = 64;
    // `after` runs once a chunk's locks are released (flush_locked sends its complete diff
    // messages there).
    template <class Fn, class After> void for_each_page_run(const std::vector<uint32_t>& sorted, Fn&& fn, After&& after) {
        for (size_t i = 0; i < sorted.size(); i += kPageRun) {
            const size_t len = std::min(kPageRun, sorted.size() - i);
            for (size_t k = 0; k < len; k++) pages[sorted[i + k]].mu.lock();
            fn(sorted.data() + i, len);
            for (size_t k = len; k-- > 0;) pages[sorted[i + k]].mu.unlock();
            after();
        }
    }
    template <class Fn> void for_each_page_run(const std::vector<uint32_t>& sorted, Fn&& fn) {
        for_each_page_run(sorted, fn, [] {});
    }
    void protect(uint32_t first, uint32_t count, int prot);  // mprotect of pages first .. first+count-1 (dsm_fault.cpp)
    // Within a chunk of for_each_page_run (locks held): each maximal run of consecutive pages
    // `pick` selects gets one mprotect to `prot` and the state `st`.
    template <class Pick> void protect_runs(const uint32_t* run, size_t len, int prot, uint8_t st, Pick&& pick) {
        for (size_t k = 0; k < len;) {
            if (!pick(run[k])) {
                ++k;
                continue;
            }
            size_t e = k + 1;
            while (e < len && run[e] == run[e - 1] + 1 && pick(run[e])) ++e;
            protect(run[k], uint32_t(e - k), prot);
            for (size_t j = k; j < e; j++) pages[run[j]].state.store(st);
            k = e;
        }
    }

    // dsm_fault.cpp
    void on_fault(uintptr_t addr, uint64_t p, int write);  // page p holds addr; write: 1 yes, 0 no, -1 unknown
    void fetch(uint64_t p, RtEndpoint& ep);
    void make_writable(uint64_t p, RtEndpoint& ep);
    // dsm_diff.cpp
    // coh_mu held. `defer_ro` (a barrier every bound thread of the cluster is in): the non-home
    // pages written in the interval are diffed but left writable and listed there, sorted, for
    // protect_deferred after the barrier's reply ("Protection deferred to the barrier's reply").
    bool flush_locked(RtEndpoint& ep, std::vector<uint32_t>* defer_ro = nullptr);
    // Write-protects the pages of `deferred` still writable here (takes coh_mu).
    void protect_deferred(const std::vector<uint32_t>& deferred, RtEndpoint& ep);
    bool send_page_diff(uint32_t p, RtEndpoint& ep);  // its page lock held; false: written ahead, unchanged, nothing sent
    void leave_out_private(uint64_t p);  // before diffing page p
    void lock_coh(RtEndpoint& ep);
    // Page::writers of each page of an interval of cluster c as it is stored (dsm_notices.cpp).
    void note_writers(uint16_t c, const uint32_t* list, size_t count);
    // dsm_notices.cpp
    // takes coh_mu; `home`: the cluster that sent `intervals` (pulled from there if left out)
    bool apply(const VC& target, Rd& intervals, RtEndpoint& ep, uint16_t home);
    void encode_vc(Wr& w, const VC& v);
    VC decode_vc(Rd& r);
    // intervals (from, to] of every cluster, from the store: inline when they fit max_message()
    // with what w holds, else the kNoticesPull marker (home side: grants, barrier replies)
    void encode_intervals(Wr& w, const VC& from, const VC& to);
    // client side (releases, barrier arrivals): inline when they fit, else pushed to `home` first
    // in acked kHNotices chunks and none inline
    bool push_intervals(Wr& w, const VC& from, const VC& to, uint16_t home, RtEndpoint& ep);
    // inline when they fit, else into `ahead` as kHNotices chunks (to go first) and none inline
    void split_intervals(Wr& w, const VC& from, const VC& to, std::vector<Wr>& ahead);
    // as many intervals from `cur` on as fit in `limit` bytes of w; true when (from, to] is done
    bool encode_intervals_chunk(Wr& w, const VC& from, const VC& to, NoticeCursor& cur, size_t limit);
    size_t intervals_bytes(const VC& from, const VC& to);
    // the intervals of a reply: stored, or pulled from `home` in chunks when it sent the marker
    bool receive_intervals(Rd& r, uint16_t home, RtEndpoint& ep);
    // stores the intervals read from r (no invalidation)
    bool store_intervals(Rd& r);
    VC snapshot_vc();
    // `from` raised to what `home` is known to hold (never beyond `to`); and learning what it holds.
    VC from_for_home(uint16_t home, VC from, const VC& to);
    void home_holds(uint16_t home, const VC& v);
    // dsm_sync.cpp
    // Barrier manager (its service thread): the pages written by exactly one cluster in (since, to],
    // by it in (lf, to], that are not its home pages and have moved fewer than kMaxHomeMoves
    // times, nor in `kept` (sorted), with that cluster, in page order; at most `most` of them.
    std::vector<std::pair<uint32_t, uint16_t>> home_moves(const VC& since, const VC& lf, const VC& to,
                                                          const std::vector<uint32_t>& kept, size_t most);
    // Every cluster, at the barrier's reply (all its bound threads in the barrier): the moves take
    // effect; the old home write-protects what it left writable. Takes coh_mu. `deferred`: the
    // flush's pages left writable (flush_locked's defer_ro); those that move here as the only copy
    // stay writable with no mprotect and leave the list.
    void apply_moves(const std::vector<std::pair<uint32_t, uint16_t>>& moves, RtEndpoint& ep,
                     std::vector<uint32_t>& deferred);
    DsmStatus release(uint32_t id);  // lock 0's release (no token: dsm_sync.cpp)
    // LOCK and UNLOCK outside the parallel section: the lock marked held here, no token, no message.
    DsmStatus lock_outside_parallel(uint32_t id);
    DsmStatus unlock_outside_parallel(uint32_t id);
    // CREATE: false (with `err`) when a lock taken before it is still held.
    bool locks_free_at_create(std::string& err);
    // From the home; lock_vc: its time; granted_ahead: the ids whose tokens came with the grant.
    DsmStatus request_lock(uint32_t id, RtEndpoint& ep, VC& lock_vc, std::vector<uint32_t>& granted_ahead);
    // The messages that give token `id` back to its home (notices that do not fit go ahead, then
    // the kHLockRel); the token leaves this cluster. tok_mu held. `own_interval` (non-zero): the
    // interval of this cluster the token carries is that one, closed by a flush not yet acked
    // (flush_locked's early return), not this cluster's vc.
    TokenReturn token_return(uint32_t id, LockToken& t, uint32_t own_interval = 0);
    // With a recalled token `id` given back at once: the idle tokens of the next ids of its home
    // (kTokensAhead of them) that go home too. tok_mu held.
    std::vector<TokenReturn> tokens_ahead(uint32_t id, uint64_t now);
    // The token of `id` leaves this cluster: its state here reset (token_return's, no message).
    void token_leaves(LockToken& t);
    // The tokens granted ahead with a grant whose time was `lock_vc` (applied): here and free. One
    // already recalled goes back at once (sent with `g`, tok_mu, released and taken again).
    void take_granted_ahead(const std::vector<uint32_t>& ids, const VC& lock_vc, RtEndpoint& ep,
                            std::unique_lock<std::mutex>& g);
    // `behind_diffs`: to the home's service thread whatever the recall named, behind this
    // endpoint's diffs to it (dsm_diff.cpp, send_diffs_with_tokens).
    void send_token_return(RtEndpoint& ep, TokenReturn& ret, bool behind_diffs = false);
    // After a flush: every recalled idle token it covers goes back (from the endpoint that flushed).
    void return_covered_tokens(RtEndpoint& ep);
    void tokens_changed();  // tok_gen, and the waiting threads woken
    // A compute thread at a sync operation or waiting: the flush a recalled idle token waits for.
    void serve_recalls();
    // serve_recalls, but not while every recalled idle token is in its grace (LOCK, UNLOCK: a
    // thread that goes on without waiting for another cluster).
    void serve_recalls_after_grace();
    // Under tok_mu: `id` enters recalled_idle, due at `due_ns` (0: now).
    void want_return(uint32_t id, uint64_t due_ns);
    // A recalled token's grace end counted from `from_ns` (its recall, or a release in its grace):
    // the idle end after it (kGraceIdleGaps of its smoothed reuse gap, at least
    // DsmConfig::lock_grace_idle_us), never past the whole grace.
    uint64_t grace_idle_end(const LockToken& t, uint64_t from_ns) const;
    // Under tok_mu: the earliest grace end of the free tokens in recalled_idle (0: one is due now;
    // UINT64_MAX: none is free, and a held one's UNLOCK sets its own).
    uint64_t earliest_grace_end();
    // Before a thread blocks on another cluster (WAITPAUSE, a condition variable): a flush when a
    // lock was released here since the last one, so every idle token can leave while it waits (the
    // service thread gives them back). A LOCK's wait flushes only when a recall needs it (request_lock).
    void flush_if_released();
    // dsm.cpp
    void register_handlers();
    bool map_pages(std::string& err);  // the page records (see `pages`)
    // dsm_start.cpp
    bool share_globals(std::string& err);  // each area of globals onto DSM memory in place
    // The start-up exchange (region and globals compared at cluster 0); `differing`: the pages of
    // globals whose bytes differ between clusters. kMismatch etc. with set_error.
    DsmStatus start_exchange(RtEndpoint& ep, uint64_t used, std::vector<uint32_t>& differing);
    // Which words of those pages differ, agreed by every cluster (into private_words).
    DsmStatus agree_private_words(RtEndpoint& ep, const std::vector<uint32_t>& differing);
    void fix_homes(uint64_t used);  // the home table of block policies
};

// The fence lock's home's side of a fence (dsm_fence.cpp), run by h_lock_acq for kFenceExchange.
void fence_exchange(DsmNode::Impl& I, RtEndpoint& self, const AmMsg& m, Rd& r);
RtEndpoint& bound_or_die(DsmNode& n, const char* what);
// dsm_fault.cpp: the node joins (leaves) the registry the SIGSEGV handler searches, and the
// handler is installed; false with `err` when 64 nodes are registered or sigaction fails.
bool fault_path_register(DsmNode* node, int& slot, std::string& err);
void fault_path_unregister(int slot);
// The home-side handlers of each part (dsm_fault.cpp, ..., dsm_sync.cpp), set by register_handlers.
void register_fault_handlers(DsmNode::Impl& I);
void register_diff_handlers(DsmNode::Impl& I);
void register_notice_handlers(DsmNode::Impl& I);
void register_alloc_handlers(DsmNode::Impl& I);
void register_start_handlers(DsmNode::Impl& I);
void register_sync_handlers(DsmNode::Impl& I);
void register_cond_handlers(DsmNode::Impl& I);  // dsm_conds.cpp: GETSUB, flags, condition variables
void register_barrier_handlers(DsmNode::Impl& I);
// A sync id within max_sync_ids, else false with set_error naming `what` (dsm_sync.cpp).
bool check_id(const DsmNode& n, uint32_t id, const char* what);
[[noreturn]] void fatal(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
using iccs::now_ns;  // the one clock (stack/clock.hpp)
void set_error(const std::string& e);
// Wait for pred() while running the endpoint's handlers (short spin, then short sleeps).
template <class P> void spin_wait(RtEndpoint* ep, P pred) {
    for (unsigned i = 0; !pred(); i++) {
        if (ep) ep->poll();
        if (i > 64) {
            struct timespec ts {0, 20000};
            nanosleep(&ts, nullptr);
        }
    }
}

}  // namespace iccs::dsm
