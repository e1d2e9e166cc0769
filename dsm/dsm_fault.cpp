// dsm_fault.cpp: the SIGSEGV fault path. A process-wide registry of nodes lets the handler find
// the node owning a faulting address without locks; a read of an invalid page fetches it from its
// home, the first write of an interval makes a twin; the home serves fetches (h_fetch).
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>

#include "dsm_impl.hpp"

namespace iccs::dsm {

namespace {

// Process-wide registry: the fault handler finds the node owning an address without locks.
constexpr int kMaxNodes = 64;
std::atomic<DsmNode*> g_nodes[kMaxNodes];
std::mutex g_reg_mu;
struct sigaction g_prev_segv;
bool g_installed = false;

// mprotect failing with ENOMEM: every page with its own protection is a mapping of its own, and
// the kernel caps mappings per process.
[[noreturn]] void mprotect_failed() {
    const int e = errno;
    if (e == ENOMEM) {
        long max = -1;
        if (FILE* f = fopen("/proc/sys/vm/max_map_count", "r")) {
            if (fscanf(f, "%ld", &max) != 1) max = -1;
            fclose(f);
        }
        fatal("mprotect: %s: the process reached the kernel's limit of mappings (vm.max_map_count = %ld; each "
              "shared page with its own protection is one): raise it, e.g. sysctl -w vm.max_map_count=1048576, or "
              "use larger DSM pages (ICCS_DSM_PAGE)", strerror(e), max);
    }
    fatal("mprotect: %s", strerror(e));
}

}  // namespace

struct FaultDispatch {
    static void on_segv(int sig, siginfo_t* si, void* uctx) {
        const uintptr_t a = reinterpret_cast<uintptr_t>(si->si_addr);
        for (auto& slot : g_nodes) {
            DsmNode* node = slot.load(std::memory_order_acquire);
            if (!node) continue;
            const uint64_t p = node->impl_->page_at(a);
            if (p == UINT64_MAX) continue;
            if (!node->parallel()) break;  // read-write before start: not ours to fix
            int write = -1;
#if defined(__x86_64__)
            // Page-fault error code bit 1: the access was a write.
            write = (static_cast<ucontext_t*>(uctx)->uc_mcontext.gregs[REG_ERR] & 2) ? 1 : 0;
#endif
            // The interrupted code may be about to read errno (the fault is synchronous, at any
            // access): the protocol's system calls must not change it.
            const int saved_errno = errno;
            node->impl_->on_fault(a, p, write);
            errno = saved_errno;
            return;
        }
        // Not a shared address: the program's own crash. Hand it to the previous handler, or
        // restore the default action and return, so the faulting instruction faults again and
        // the process dies of SIGSEGV as it would have without us.
        if ((g_prev_segv.sa_flags & SA_SIGINFO) && g_prev_segv.sa_sigaction) {
            g_prev_segv.sa_sigaction(sig, si, uctx);
            return;
        }
        if (g_prev_segv.sa_handler != SIG_DFL && g_prev_segv.sa_handler != SIG_IGN) {
            g_prev_segv.sa_handler(sig);
            return;
        }
        signal(SIGSEGV, SIG_DFL);
    }
};

void DsmNode::Impl::on_fault(uintptr_t addr, uint64_t p, int write) {
    RtEndpoint* bound = n.bound_endpoint();
    if (!bound)
        fatal("cluster %u: a thread that is not a compute thread of this DSM touched shared address %p "
              "(bind_thread first; PARMACS: only CREATEd threads and main between CREATE and WAIT_FOR_END)",
              unsigned(n.cluster_), reinterpret_cast<void*>(addr));
    RtEndpoint& ep = *bound;
    Page& pg = pages[p];
    const uint8_t st = pg.state.load(std::memory_order_acquire);
    if (write == 1 || (write == -1 && st == kReadOnly)) {
        n.ctr_.write_faults.fetch_add(1, std::memory_order_relaxed);
        make_writable(p, ep);
    } else {
        if (st == kInvalid) n.ctr_.read_faults.fetch_add(1, std::memory_order_relaxed);
        fetch(p, ep);  // nothing to do when another thread of the cluster fetched it meanwhile
    }
}

void DsmNode::Impl::fetch(uint64_t p, RtEndpoint& ep) {
    Page& pg = pages[p];
    // Per thread and reused: the fault path allocates no buffer once warm.
    thread_local std::vector<uint8_t> reply;
    // The end of this thread's last fetched run and its length: a read fault on the page right
    // after it (a thread reading through another cluster's pages in order) doubles the run, up to
    // kFetchPagesWritten pages ("Page state per cluster", sequential runs).
    thread_local const Impl* seq_node = nullptr;
    thread_local uint64_t seq_next = UINT64_MAX;
    thread_local uint32_t seq_len = 0;
    for (;;) {
        std::unique_lock<std::mutex> g(pg.mu);
        if (pg.state.load() != kInvalid) return;
        if (pg.fetching.load()) {
            g.unlock();
            spin_wait(&ep, [&] { return !pg.fetching.load(std::memory_order_acquire); });
            continue;
        }
        pg.fetching.store(true);
        const uint32_t e = pg.epoch;
        g.unlock();
        // The following pages of the region with the same home that are invalid here and not being
        // fetched come in the same reply (as ArgoDSM loads 8 pages a miss; beyond kFetchPages only
        // pages this cluster changed lately, kFetchPagesWritten): claimed as p is, each with its own
        // epoch. A page whose lock is busy ends the run.
        const uint16_t home = home_of_page(p);
        const uint32_t most = p < npages ? uint32_t(std::min<uint64_t>(kFetchPagesWritten, rt.max_message() / page)) : 1;
        const uint32_t seq = flush_seq.load(std::memory_order_relaxed);
        const uint32_t read_run = seq_node == this && p == seq_next ? std::min(2 * seq_len, kFetchPagesWritten) : kFetchPages;
        uint32_t epochs[kFetchPagesWritten];
        uint32_t count = 1;
        for (uint64_t q = p + 1; count < most && q < npages && home_of_page(q) == home; q++, count++) {
            Page& nq = pages[q];
            std::unique_lock<std::mutex> gq(nq.mu, std::try_to_lock);
            if (!gq.owns_lock() || nq.state.load() != kInvalid || nq.fetching.load()) break;
            if (count >= read_run && !nq.written_lately(seq)) break;
            nq.fetching.store(true);
            epochs[count] = nq.epoch;
        }
        const uint64_t t0 = now_ns();
        const uint32_t ask[2] = {uint32_t(p), count};
        RtStatus s = ep.request(service(home), h(kHFetch), RtBytes{ask, sizeof ask}, {}, reply);
        if (s != RtStatus::kOk || reply.size() != uint64_t(count) * page_len(p))
            fatal("cluster %u: fetching page %" PRIu64 " (and %u after it) from its home cluster %u failed: %s",
                  unsigned(n.cluster_), p, count - 1, unsigned(home), s != RtStatus::kOk ? ep.last_error().c_str() : "short reply");
        n.ctr_.page_fetches.fetch_add(1, std::memory_order_relaxed);
        n.ctr_.page_fetch_ns.fetch_add(now_ns() - t0, std::memory_order_relaxed);
        seq_node = this;
        seq_next = p + count;
        seq_len = std::max(count, kFetchPages);
        // The reply's pages locked together in page order (as for_each_page_run), so those still
        // wanted (not invalidated meanwhile) turn read-only in one mprotect per run of consecutive
        // pages, not one each; those this cluster changed at one of its last two flushes turn
        // writable instead, twinned from the fetched copy, as make_writable would at their next
        // write (PROTOCOL.md, "Fetch for write"). A page so made writable and not written costs a
        // compare at the release, and sends no diff and no notice (`ahead`).
        uint32_t run[kFetchPagesWritten];
        for (uint32_t k = 0; k < count; k++) {
            run[k] = uint32_t(p + k);
            pages[p + k].mu.lock();
        }
        bool install[kFetchPagesWritten], writable[kFetchPagesWritten];
        for (uint32_t k = 0; k < count; k++) {
            Page& nq = pages[p + k];
            nq.fetching.store(false, std::memory_order_release);
            // Invalidated meanwhile: p's copy may predate the notice (fetched again below), a
            // neighbour stays invalid.
            install[k] = k == 0 ? nq.epoch == e : nq.epoch == epochs[k] && nq.state.load() == kInvalid;
            writable[k] = false;
            if (!install[k]) continue;
            // Words of globals that differ between the clusters keep this cluster's values (a page
            // of globals comes alone: count is 1).
            if (const std::vector<uint32_t>* keep = k == 0 ? private_of(p) : nullptr)
                for (uint32_t off : *keep) std::memcpy(reply.data() + off, page_priv(p) + off, 8);
            std::memcpy(page_priv(p + k), reply.data() + uint64_t(k) * page, page_len(p + k));
            // Not one still dirty: an invalidation sent its diff and its notice is to come (an
            // unchanged `ahead` page would be named in none).
            writable[k] = !nq.dirty && nq.written_lately(seq) && home_of_page(p + k) != n.cluster_;
            if (writable[k]) {
                std::memcpy(page_twin(p + k), page_priv(p + k), page_len(p + k));
                nq.twin = true;
                nq.ahead = true;
            }
        }
        uint32_t fetched_writable = 0;
        {
            std::lock_guard<std::mutex> d(dirty_mu);
            for (uint32_t k = 0; k < count; k++) {
                if (!install[k] || !writable[k]) continue;
                fetched_writable++;
                pages[p + k].dirty = true;
                dirty_list.push_back(uint32_t(p + k));
            }
        }
        protect_runs(run, count, PROT_READ | PROT_WRITE, kWritable, [&](uint32_t q) { return install[q - p] && writable[q - p]; });
        protect_runs(run, count, PROT_READ, kReadOnly, [&](uint32_t q) { return install[q - p] && !writable[q - p]; });
        if (fetched_writable) n.ctr_.pages_fetched_writable.fetch_add(fetched_writable, std::memory_order_relaxed);
        const bool done = install[0];
        for (uint32_t k = count; k-- > 0;) pages[p + k].mu.unlock();
        if (done) return;
    }
}

void DsmNode::Impl::make_writable(uint64_t p, RtEndpoint& ep) {
    Page& pg = pages[p];
    for (;;) {
        std::unique_lock<std::mutex> g(pg.mu);
        const uint8_t st = pg.state.load();
        if (st == kWritable) return;
        if (st == kInvalid) {
            g.unlock();
            fetch(p, ep);
            continue;
        }
        const bool home = home_of_page(p) == n.cluster_;
        if (!home) {
            std::memcpy(page_twin(p), page_priv(p), page_len(p));
            pg.twin = true;
        }
        // Write-ahead (kWriteAhead): the pages after p that this cluster's last two flushes found
        // changed, read-only here and homed where p is (elsewhere, or here under block homes: home
        // pages another cluster's fetch protected), locked without waiting (page order: no
        // deadlock with a release's runs), are twinned and unprotected with p. A home page's twin
        // only tells the release whether it changed (it sends no diff).
        std::unique_lock<std::mutex> ahead[kWriteAhead - 1];
        uint32_t count = 1;
        const uint32_t seq = flush_seq.load(std::memory_order_relaxed);
        const bool may_ahead = !home || untracked_homes();
        for (uint64_t q = p + 1; may_ahead && count < kWriteAhead && valid_page(q); q++, count++) {
            Page& nq = pages[q];
            std::unique_lock<std::mutex> gq(nq.mu, std::try_to_lock);
            // A home page a fetch protected was written here untracked, its `wrote_at` stale.
            if (!gq.owns_lock() || nq.state.load() != kReadOnly || nq.dirty ||
                !(nq.written_lately(seq) || (home && nq.served_protected)) || (home_of_page(q) == n.cluster_) != home)
                break;
            std::memcpy(page_twin(q), page_priv(q), page_len(q));
            nq.twin = true;
            nq.ahead = true;
            ahead[count - 1] = std::move(gq);
        }
        {
            std::lock_guard<std::mutex> d(dirty_mu);
            for (uint32_t k = 0; k < count; k++) {
                Page& w = pages[p + k];
                if (w.dirty) continue;
                w.dirty = true;
                dirty_list.push_back(uint32_t(p + k));
            }
        }
        protect(uint32_t(p), count, PROT_READ | PROT_WRITE);
        for (uint32_t k = 0; k < count; k++) {
            pages[p + k].served_protected = false;
            pages[p + k].state.store(kWritable, std::memory_order_release);
        }
        if (count > 1) n.ctr_.pages_written_ahead.fetch_add(count - 1, std::memory_order_relaxed);
        return;
    }
}

void DsmNode::Impl::protect(uint32_t first, uint32_t count, int prot) {
    // A run of consecutive numbers lies in one area (the region, or one range of globals).
    if (mprotect(page_app(first), uint64_t(count) * page_len(first), prot) != 0) mprotect_failed();
    n.ctr_.protection_changes.fetch_add(1, std::memory_order_relaxed);
}

bool fault_path_register(DsmNode* node, int& slot, std::string& err) {
    std::lock_guard<std::mutex> g(g_reg_mu);
    for (int i = 0; i < kMaxNodes; i++)
        if (!g_nodes[i].load()) {
            slot = i;
            break;
        }
    if (slot < 0) {
        err = "dsm: more than 64 DSM nodes in one process";
        return false;
    }
    g_nodes[slot].store(node, std::memory_order_release);
    // (Re)install when SIGSEGV is not ours: a handler installed after the last attach (a
    // test framework's, the program's) becomes the one we chain to.
    struct sigaction cur;
    sigaction(SIGSEGV, nullptr, &cur);
    if (!g_installed || !(cur.sa_flags & SA_SIGINFO) || cur.sa_sigaction != FaultDispatch::on_segv) {
        struct sigaction sa;
        std::memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = FaultDispatch::on_segv;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGSEGV, &sa, &g_prev_segv) != 0) {
            err = std::string("dsm: sigaction(SIGSEGV): ") + strerror(errno);
            return false;
        }
        g_installed = true;
    }
    return true;
}

void fault_path_unregister(int slot) {
    std::lock_guard<std::mutex> g(g_reg_mu);
    g_nodes[slot].store(nullptr);
}

namespace {

// Under block homes, home pages are not write-protected at a release (flush_locked): once its write
// notice is out, a home page stays writable and its later writes are not tracked. That is safe
// while every valid copy elsewhere predates that notice: a cluster ordered after such a write has
// applied the notice (a later release of this cluster carries it) and refetches. So a copy handed
// out now makes the page tracked again first. Not by protecting it (its next write would be a fault
// and an mprotect here, and the serve an mprotect too), but by a twin: the page is copied into its
// twin, marked dirty and written ahead (`ahead`), and the copy handed out is the twin's bytes. The
// next release compares the page with its twin, as for a home page written ahead: changed (a write
// came after the copy), it is named in the release's notice and stays writable; unchanged, it is
// protected there and named in none (PROTOCOL.md, "A served home page is twinned, not protected").
// A page a serve twinned earlier, served again before the release, hands out its twin's bytes too:
// the writes since the twin was made belong to no release yet (a release would have compared it and
// dropped the twin), and any of them that the copy lacks makes the page differ from its twin at the
// next release, which names it. (A page written since its last release, dirty, needs nothing: the
// notice to come covers later writes; one written ahead, its twin made at a fault, is handed out as
// it is now, as before.) A run of more than kFetchPages pages has its untracked pages protected
// instead, one mprotect, as before.
//
// A page that moves here at a barrier and that its old home never wrote is left writable too
// (apply_moves: every other cluster drops its copy there). A cluster that applied that barrier's
// moves before this one may already ask
// it here: served before the move is applied here (not yet a home page here), the page is marked,
// and apply_moves leaves it protected. Both under the page's lock, so either the copy goes out
// before the move (marked) or after it (protected first).
//
// Returns whether the reply must be taken from `out` (some page's bytes are its twin's), filled
// while the run's pages are locked; otherwise the pages are read from the protocol view.
bool serve_run(DsmNode::Impl& I, uint32_t first, uint32_t count, std::vector<uint8_t>& out) {
    // The run's pages locked together, in page order (as for_each_page_run: no other path holds two
    // and waits).
    for (uint32_t k = 0; k < count; k++) I.pages[first + k].mu.lock();
    for (uint32_t k = 0; k < count; k++)
        if (I.home_of_page(first + k) != I.n.cluster()) I.pages[first + k].served_unhomed = true;
    uint32_t untracked_pages[kFetchPagesWritten];
    uint32_t untracked_count = 0;
    bool from_twins = false;
    // A run longer than kFetchPages (a reader going through pages in order, or pages it wrote
    // lately) is protected, one mprotect for its untracked pages, as before: twinned, each page
    // costs a copy and a compare, and most such pages were not written again before the release
    // (SPLASH-3 lu-nc: 4,900 pages twinned a run in runs of about 25, 86 % found unchanged, the run
    // slower in 7 of 10 pairs).
    const bool by_twin = count <= kFetchPages;
    bool protect_it[kFetchPagesWritten] = {};
    uint32_t run[kFetchPagesWritten];
    for (uint32_t k = 0; k < count; k++) {
        const uint32_t p = first + k;
        Page& pg = I.pages[p];
        run[k] = p;
        const bool home = I.home_of_page(p) == I.n.cluster();
        if (home && pg.state.load() == kWritable && !pg.dirty) {
            pg.served_protected = true;
            // A page left writable through a whole epoch since its last notice (wrote_at not after
            // the flush of the full barrier before the last) may have been written here in the
            // window of home_moves with no notice naming it: it keeps its home here for kMoveEpochs
            // epochs. One noticed later may be unwritten since its notice's flush left it writable:
            // not listed.
            if (pg.wrote_at <= I.full_flush_seq[1].load(std::memory_order_relaxed))
                untracked_pages[untracked_count++] = p;
            if (!by_twin) {
                protect_it[k] = true;
                continue;
            }
            // Dirty (in the list the next flush takes) before the twin is copied: a write that the
            // copy missed is then either before that flush's list was taken (and the flush compares
            // this page, once this serve lets go of its lock) or after it (the next one does).
            {
                std::lock_guard<std::mutex> d(I.dirty_mu);
                pg.dirty = true;
                I.dirty_list.push_back(p);
            }
            std::memcpy(I.page_twin(p), I.page_priv(p), I.page_len(p));
            pg.twin = true;
            pg.ahead = true;
            pg.served_twin = true;
            I.n.counters().pages_served_twinned.fetch_add(1, std::memory_order_relaxed);
        }
        if (home && pg.served_twin) from_twins = true;
    }
    I.protect_runs(run, count, PROT_READ, kReadOnly, [&](uint32_t p) { return protect_it[p - first]; });
    if (from_twins) {
        out.resize(uint64_t(count) * I.page_len(first));
        for (uint32_t k = 0; k < count; k++) {
            const uint32_t p = first + k;
            const Page& pg = I.pages[p];
            const bool twin = I.home_of_page(p) == I.n.cluster() && pg.served_twin;
            std::memcpy(out.data() + uint64_t(k) * I.page_len(first), twin ? I.page_twin(p) : I.page_priv(p),
                        I.page_len(p));
        }
    }
    for (uint32_t k = count; k-- > 0;) I.pages[first + k].mu.unlock();
    if (untracked_count != 0) {
        std::lock_guard<std::mutex> g(I.served_untracked_mu);
        I.served_untracked.front().insert(I.served_untracked.front().end(), untracked_pages,
                                          untracked_pages + untracked_count);
    }
    return from_twins;
}

// A request names page `first` and how many pages from it (1, or up to kFetchPagesWritten of the region;
// a request of the page alone, as start-up's, means 1); the reply is their bytes in order.
void h_fetch(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto* I = static_cast<DsmNode::Impl*>(ctx);
    Rd r(m.data.data(), m.data.size());
    const uint32_t first = r.get<uint32_t>();
    const uint32_t count = m.data.size() >= 2 * sizeof(uint32_t) ? r.get<uint32_t>() : 1;  // start-up asks one
    const bool run_ok = count == 1 || (count > 1 && count <= kFetchPagesWritten && uint64_t(first) + count <= I->npages &&
                                       uint64_t(count) * I->page <= I->rt.max_message());
    if (r.bad || !I->valid_page(first) || !run_ok) {
        self.reply(m.token(), {});
        return;
    }
    thread_local std::vector<uint8_t> copy;  // per thread and reused (the service thread's)
    if (serve_run(*I, first, count, copy))
        self.reply(m.token(), RtBytes{copy.data(), uint32_t(copy.size())});
    else
        self.reply(m.token(), RtBytes{I->page_priv(first), count * I->page_len(first)});
}

}  // namespace

void register_fault_handlers(DsmNode::Impl& I) { I.rt.set_handler(I.h(kHFetch), h_fetch, &I); }

}  // namespace iccs::dsm
