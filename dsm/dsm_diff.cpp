// dsm_diff.cpp: twins and diffs. A release write-protects the cluster's dirty pages, diffs each
// twinned page against its twin at byte grain, sends the diffs to the homes in messages of at
// most max_message() and waits for their acks, then closes an interval; the home applies them
// (h_diff).
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>

#include "dsm_impl.hpp"

namespace iccs::dsm {

namespace {
// Bit k set: byte k of x is not zero (for x = new ^ old: the bytes a write changed).
inline uint8_t changed_bytes(uint64_t x) {
    uint64_t t = (((x & 0x7f7f7f7f7f7f7f7full) + 0x7f7f7f7f7f7f7f7full) | x) & 0x8080808080808080ull;
    return uint8_t((t * 0x0002040810204081ull) >> 56);
}
// Stores the bytes of the word `d` that `mask` names (bit k: byte k) at `at`, and no other byte
// (another thread may be writing them), a run of consecutive named bytes at a time in stores of 4, 2
// and 1 bytes: a changed double mostly keeps its sign and exponent bytes (mask 0x3f), so a byte at a
// time was a store and a branch a byte (SPLASH-3 lu-nc: 4.7 % of a run's CPU samples in h_diff).
inline void put_masked(uint8_t* at, const uint8_t* d, uint32_t mask) {
    while (mask != 0) {
        const uint32_t b = uint32_t(__builtin_ctz(mask));
        const uint32_t len = uint32_t(__builtin_ctz(~(mask >> b)));
        mask &= ~(((1u << len) - 1) << b);
        uint32_t k = b;
        if (len == 8) {
            std::memcpy(at, d, 8);
            continue;
        }
        if (k + 4 <= b + len) {
            std::memcpy(at + k, d + k, 4);
            k += 4;
        }
        if (k + 2 <= b + len) {
            std::memcpy(at + k, d + k, 2);
            k += 2;
        }
        if (k < b + len) at[k] = d[k];
    }
}
inline uint64_t word(const uint8_t* p, uint32_t k) {
    uint64_t w;
    std::memcpy(&w, p + 8 * k, 8);
    return w;
}

// Diff of `cur` against `old` at byte grain: out(off, cur + off, old + off, len, masked) for
// every run of 8-byte words with a changed byte; `masked` when some word of the run is only
// partly changed, whose unchanged bytes must not be sent as data: another cluster may have
// written them in the same interval (two clusters writing different bytes of one word, both
// writes kept). A byte equal to its twin is never sent: if this cluster wrote it, it wrote the
// value the home had, and in a race-free program no other cluster wrote it meanwhile.
template <class Out> void diff_page(const uint8_t* cur, const uint8_t* old, uint32_t len, Out&& out) {
    const uint32_t words = len / 8;
    uint32_t i = 0;
    while (i < words) {
        // Unchanged words four at a time (most of a page is): one test, not four compares and
        // branches (SPLASH-3 lu-nc's releases scan ~12,600 pages a run).
        while (i + 4 <= words && ((word(cur, i) ^ word(old, i)) | (word(cur, i + 1) ^ word(old, i + 1)) |
                                  (word(cur, i + 2) ^ word(old, i + 2)) | (word(cur, i + 3) ^ word(old, i + 3))) == 0)
            i += 4;
        if (i >= words) break;
        if (word(cur, i) == word(old, i)) {
            i++;
            continue;
        }
        uint32_t j = i;
        bool masked = false;
        for (uint64_t x; j < words && (x = word(cur, j) ^ word(old, j)) != 0; j++) masked |= changed_bytes(x) != 0xff;
        out(8 * i, cur + 8 * i, old + 8 * i, 8 * (j - i), masked);
        i = j;
    }
}

// The diffs of one release to one home, cut into kHDiff messages of at most `limit` bytes each
// ({u32 count, {u32 page, u32 runs, {u32 off, u32 len | kRunMasked, bytes, [mask]}}}, off and len
// multiples of 8; a masked run ends in one byte a word, bit k: byte k is data): a page's runs
// continue in an entry of the same page in the next message, and a run longer than a message is
// cut at a word, so any release fits any max_message() (a jacobi paper release is 8 MB for one
// home).
constexpr uint32_t kRunMasked = 0x80000000u;
// A release's messages are written into buffers kept from the releases before
// (Impl::spare_diff_buffers, under coh_mu, as every release; at most kSpareDiffBuffers), with their
// capacity: a new buffer grew by doubling to its size (SPLASH-3 lu-nc: ~200 KB to one home at each
// of its 69 releases), the allocator took each size's fresh pages from the kernel (a page fault and
// a zeroed page each) and trimmed them again after the send.
constexpr size_t kSpareDiffBuffers = 4;
// A release's diffs to one home go out as they are made, in messages of at most this many bytes
// (DiffBatch::ship, one-way; the last one is the request whose ack says all are applied), so the
// home applies the first while the releaser still diffs the rest. Made whole first and sent as one
// request, SPLASH-3 lu-nc's cluster 1 diffed ~200 pages (~220 KB) at each barrier and then waited
// while cluster 0's service thread applied them: of its 50 ms a run in the flush, 27 ms diffing and
// 23 ms in the request, 14 ms of it the home applying (timeline stamps, dsm/SPLASH3-SHORT.md).
constexpr size_t kDiffShipBytes = 64u << 10;
struct DiffBatch {
    size_t limit;
    std::vector<std::vector<uint8_t>>* spare;  // the node's kept buffers (coh_mu held)
    std::vector<Wr> msgs;
    uint32_t cnt = 0, runs = 0, page = 0;
    size_t runs_at = 0;
    bool open = false;  // an entry of `page` is open in msgs.back()
    uint32_t shipped = 0;  // messages already sent one-way by ship()

    DiffBatch(size_t lim, std::vector<std::vector<uint8_t>>& kept) : limit(lim), spare(&kept) {}
    DiffBatch(const DiffBatch&) = default;
    DiffBatch& operator=(const DiffBatch&) = delete;
    ~DiffBatch() {
        for (Wr& w : msgs) {
            if (spare->size() >= kSpareDiffBuffers) break;
            w.b.clear();
            spare->push_back(std::move(w.b));
        }
    }
    // A new message, in a kept buffer when there is one (else one with room for a whole message).
    void new_msg() {
        msgs.emplace_back();
        if (!spare->empty()) {
            msgs.back().b = std::move(spare->back());
            spare->pop_back();
        } else {
            msgs.back().b.reserve(std::min<size_t>(limit, size_t(1) << 20));
        }
    }
    void start_page(uint32_t p) {
        close_entry();
        page = p;
    }
    void close_entry() {
        if (open) std::memcpy(msgs.back().b.data() + runs_at, &runs, 4);
        open = false;
    }
    void close_msg() {
        close_entry();
        if (!msgs.empty()) std::memcpy(msgs.back().b.data(), &cnt, 4);
    }
    // Returns the bytes it added (run headers, data and masks), for the diff_bytes counter.
    size_t run(uint32_t off, const uint8_t* d, const uint8_t* o, uint32_t len, bool masked) {
        size_t added = 0;
        while (len) {
            // Room for an entry header (if none is open), a run header and one word (and its mask).
            if (msgs.empty() || msgs.back().b.size() + (open ? 0 : 8) + 8 + 9 > limit) {
                close_msg();
                new_msg();
                msgs.back().put<uint32_t>(0);
                cnt = 0;
            }
            Wr& w = msgs.back();
            if (!open) {
                w.put<uint32_t>(page);
                runs_at = w.b.size();
                w.put<uint32_t>(0);
                runs = 0;
                cnt++;
                open = true;
            }
            const size_t room = limit - w.b.size() - 8;
            const uint32_t take = uint32_t(std::min<size_t>(len, (masked ? room / 9 * 8 : room) & ~size_t(7)));
            w.put<uint32_t>(off);
            w.put<uint32_t>(take | (masked ? kRunMasked : 0));
            w.bytes(d, take);
            if (masked) {  // one resize for the run's masks, not one a word
                const size_t at = w.b.size();
                w.b.resize(at + take / 8);
                for (uint32_t k = 0; k < take / 8; k++) w.b[at + k] = changed_bytes(word(d, k) ^ word(o, k));
            }
            runs++;
            added += 8 + take + (masked ? take / 8 : 0);
            off += take;
            d += take;
            o += take;
            len -= take;
        }
        return added;
    }
    // Sends every complete message (all but the last, still being filled) one-way to `home`, and
    // keeps their buffers. Not under a page's lock (flush_locked calls it between runs of pages).
    bool ship(DsmNode::Impl& I, RtEndpoint& ep, uint16_t home) {
        if (msgs.size() < 2) return true;
        for (size_t k = 0; k + 1 < msgs.size(); k++) {
            Wr& w = msgs[k];
            if (ep.send(I.service(home), I.h(kHDiff), RtBytes{w.b.data(), uint32_t(w.b.size())}) != RtStatus::kOk) {
                set_error("sending diffs to cluster " + std::to_string(home) + ": " + ep.last_error());
                return false;
            }
            shipped++;
            if (spare->size() < kSpareDiffBuffers) {
                w.b.clear();
                spare->push_back(std::move(w.b));
            }
        }
        msgs.erase(msgs.begin(), msgs.end() - 1);
        return true;
    }
    size_t diff(uint32_t p, const uint8_t* cur, const uint8_t* old, uint32_t len) {
        start_page(p);
        size_t added = 0;
        diff_page(cur, old, len, [&](uint32_t off, const uint8_t* d, const uint8_t* o, uint32_t l, bool m) {
            added += run(off, d, o, l, m);
        });
        close_entry();
        return added;
    }
};

// Sends the messages of `b` that ship() has not sent to `home`, all but the last one-way, and waits
// for the last one's ack: the runtime runs one endpoint's messages to one endpoint in the order
// sent, so that ack says the home applied every diff of the release (complete only then).
bool send_diffs(DsmNode::Impl& I, RtEndpoint& ep, uint16_t home, DiffBatch& b) {
    b.close_msg();
    if (!b.ship(I, ep, home)) return false;
    std::vector<uint8_t> reply;
    Wr& w = b.msgs.back();
    if (ep.request(I.service(home), I.h(kHDiff), RtBytes{w.b.data(), uint32_t(w.b.size())}, {}, reply) != RtStatus::kOk) {
        set_error("sending diffs to cluster " + std::to_string(home) + ": " + ep.last_error());
        return false;
    }
    return true;
}
// A flush whose diffs all go to one home, `home`, while tokens of locks homed there wait for it
// (recalled, free, last released before the flush began): their returns follow the diffs on the
// same endpoint, before the acks, and one request behind them collects the acks. The runtime runs
// one endpoint's messages to one endpoint in the order sent, so the home has applied every diff
// of the interval before it reads the return and grants the lock: an acquirer that fetches a page
// the interval wrote gets it from that home, current. Before, the token waited for the acks: a
// round trip between the clusters more per transfer (with two clusters every diff goes to the
// other one, so every lock homed there is such a lock). The interval enters this cluster's vc
// only once acked: until then nothing else this cluster sends (another token given back by the
// service thread, a barrier arrival) names it, since its diffs may still be on the way; only these
// returns do, by number (token_return's own_interval). False, and nothing sent, when no token
// qualifies (flush_locked then sends as usual). `covers`: flush_locked's; coh_mu held.
bool send_diffs_with_tokens(DsmNode::Impl& I, RtEndpoint& ep, uint16_t home, DiffBatch& b,
                            const std::vector<uint32_t>& list, uint64_t covers) {
    auto& n = I.n;
    uint32_t idx;
    {
        std::lock_guard<std::mutex> k(I.know_mu);
        idx = I.vc[n.cluster()] + 1;
    }
    std::vector<TokenReturn> out;
    {
        std::lock_guard<std::mutex> g(I.tok_mu);
        std::vector<uint32_t> keep;
        for (uint32_t id : I.recalled_idle) {
            LockToken& t = I.tokens[id];
            if (!t.here || t.held || !t.recalled) continue;  // gone, or its holder's release gives it back
            if (I.home_of_sync(id) == home && t.released <= covers) {
                if (out.empty()) {
                    std::lock_guard<std::mutex> k(I.know_mu);
                    I.store[n.cluster()][idx] = list;  // named by the returns (beyond vc: nothing else reads it)
                }
                out.push_back(I.token_return(id, t, idx));
            } else {
                keep.push_back(id);
            }
        }
        if (out.empty()) return false;
        I.recalled_idle.swap(keep);
        I.flush_wanted.store(!I.recalled_idle.empty(), std::memory_order_seq_cst);
    }
    b.close_msg();
    for (Wr& w : b.msgs)
        if (ep.send(I.service(home), I.h(kHDiff), RtBytes{w.b.data(), uint32_t(w.b.size())}) != RtStatus::kOk)
            fatal("cluster %u: sending diffs to cluster %u failed: %s", unsigned(n.cluster()), unsigned(home),
                  ep.last_error().c_str());
    for (TokenReturn& ret : out) I.send_token_return(ep, ret, true);
    n.counters().lock_returns_early.fetch_add(out.size(), std::memory_order_relaxed);
    const uint32_t none = 0;  // an empty diff: its ack says every diff before it is applied
    std::vector<uint8_t> ack;
    if (ep.request(I.service(home), I.h(kHDiff), RtBytes{&none, sizeof none}, {}, ack) != RtStatus::kOk)
        fatal("cluster %u: the acks of diffs to cluster %u failed: %s", unsigned(n.cluster()), unsigned(home),
              ep.last_error().c_str());
    {
        std::lock_guard<std::mutex> k(I.know_mu);
        I.vc[n.cluster()] = idx;
    }
    n.counters().intervals.fetch_add(1, std::memory_order_relaxed);
    return true;
}

}  // namespace

// Downgrade every page written in this interval, diff the twinned ones into messages per home
// (as many as max_message() needs), wait for the homes' acks, and close the interval. coh_mu held.
bool DsmNode::Impl::flush_locked(RtEndpoint& ep, std::vector<uint32_t>* defer_ro) {
    // Every lock released before this point wrote only pages that are in the list taken below or
    // were in an earlier flush (complete: flushes run under coh_mu): once this one is done, their
    // tokens may leave the cluster (LockToken).
    const uint64_t covers = rel_clock.load();
    auto covered = [&] {
        uint64_t f = flushed_clock.load();
        while (f < covers && !flushed_clock.compare_exchange_weak(f, covers)) {
        }
    };
    std::vector<uint32_t> list;
    {
        std::lock_guard<std::mutex> d(dirty_mu);
        list.swap(dirty_list);
    }
    if (list.empty()) {
        covered();
        return true;
    }
    std::vector<DiffBatch> per_home(n.clusters_, DiffBatch(std::min<size_t>(rt.max_message(), kDiffShipBytes),
                                                           spare_diff_buffers));
    bool shipped_ok = true;
    // In page order, a run of consecutive pages at a time: its pages locked together, so one
    // mprotect covers every writable page of the run (one per page was most of a release's cost:
    // each splits the mapping and flushes the TLB of every core running a thread of the process).
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
    // Flushes run one at a time (coh_mu): this one is flush_seq + 1, made so below unless every page
    // of it was twinned by a served fetch and found unchanged (such a flush changed nothing here).
    const uint32_t seq = flush_seq.load(std::memory_order_relaxed) + 1;
    bool advance = false;
    std::vector<uint32_t> noticed, kept;
    noticed.reserve(list.size());
    for_each_page_run(list, [&](const uint32_t* run, size_t len) {
        // Protect a twinned page before diffing it, so no write of another thread slips between
        // diff and twin drop. Under block homes a home page stays writable, untracked (see
        // h_fetch); under round-robin homes it is protected too: left writable, every other page
        // would stay a mapping of its own (vm.max_map_count), and a run's one mprotect would
        // become one per page (measured slower: perf/README.md, sixth pass).
        // A home page made writable ahead (make_writable, "Write-ahead") and changed is noticed
        // and stays writable, as any home page with a notice out. One equal to its twin is
        // protected too (a fetch had protected it: copies of it may be out, and no notice will
        // invalidate them) and compared again below (another thread's write may have come between).
        // Such pages exist only under block homes, where the pages above are never home pages: the
        // two sets are apart, and one pass gives a run of both kinds one mprotect.
        bool same[kPageRun] = {};
        for (size_t k = 0; k < len; k++) {
            const uint32_t p = run[k];
            same[k] = pages[p].dirty && pages[p].twin && pages[p].ahead && home_of_page(p) == n.cluster_ &&
                      std::memcmp(page_priv(p), page_twin(p), page_len(p)) == 0;
        }
        // At a barrier every bound thread of the cluster is in (`defer_ro`), no thread writes
        // before the reply is applied: a non-home page is diffed writable and protected after it
        // (protect_deferred), or never when it moves here as the only copy ("Protection deferred
        // to the barrier's reply").
        bool defer[kPageRun] = {};
        for (size_t k = 0; defer_ro && k < len; k++) {
            const uint32_t p = run[k];
            defer[k] = pages[p].state.load() == kWritable && home_of_page(p) != n.cluster_;
            if (defer[k]) defer_ro->push_back(p);
        }
        // A page of another home that changed at this cluster's last flush and has changed again
        // ("A page written at every release stays writable"): diffed from a copy taken now, which
        // becomes its twin, and left writable. Threads of the cluster may write it meanwhile:
        // whatever the copy missed differs from the new twin and goes with the next flush. One
        // unchanged since its twin stays so with nothing sent, until it has not changed for
        // kKeepFlushes flushes: then it is protected as before.
        bool keep[kPageRun] = {}, changed[kPageRun] = {};
        uint8_t* copy = nullptr;
        for (size_t k = 0; !defer_ro && n.cfg_.keep_written && k < len; k++) {
            const uint32_t p = run[k];
            const Page& pg = pages[p];
            if (!(pg.dirty && pg.twin && pg.wrote_at != 0 && pg.wrote_at + kKeepFlushes >= seq &&
                  pg.state.load() == kWritable && home_of_page(p) != n.cluster_))
                continue;
            keep[k] = true;
            leave_out_private(p);
            // Unchanged since its twin: nothing to copy or send (a write after this compare is
            // for the next flush, the page staying in the dirty list).
            if (std::memcmp(page_priv(p), page_twin(p), page_len(p)) == 0) continue;
            if (copy == nullptr) copy = kept_copy();
            std::memcpy(copy + k * page, page_priv(p), page_len(p));
            changed[k] = true;
        }
        protect_runs(run, len, PROT_READ, kReadOnly, [&](uint32_t p) {
            const size_t k = size_t(std::lower_bound(run, run + len, p) - run);
            if (same[k]) return true;
            return !defer[k] && !keep[k] && pages[p].state.load() == kWritable &&
                   (home_of_page(p) != n.cluster_ || !untracked_homes());
        });
        for (size_t k = 0; k < len; k++) {
            const uint32_t p = run[k];
            Page& pg = pages[p];
            // A page made writable ahead of a write that did not come (kWriteAhead: its diff is
            // empty, or an invalidation found it unchanged and cleared `dirty`) changed nothing:
            // no write notice names it.
            bool noticed_page = pg.dirty;
            const bool home_page = home_of_page(p) == n.cluster_;
            if (pg.dirty && pg.twin && home_page) {
                // A home page written ahead: the home sends itself no diff; unchanged, no notice.
                if (same[k] && std::memcmp(page_priv(p), page_twin(p), page_len(p)) == 0) {
                    noticed_page = false;
                    n.ctr_.written_ahead_unchanged.fetch_add(1, std::memory_order_relaxed);
                }
                if (noticed_page) pg.wrote_at = seq;
            } else if (pg.dirty && home_page) {
                pg.wrote_at = seq;
            } else if (pg.dirty && pg.twin && keep[k]) {
                // Kept writable, twinned and in the dirty list, maybe unchanged: as a page written
                // ahead (an unchanged one sends no diff and is named in no notice).
                kept.push_back(p);
                pg.ahead = true;
                pg.served_twin = false;
                if (!changed[k]) continue;
                const size_t bytes = per_home[home_of_page(p)].diff(p, copy + k * page, page_twin(p), page_len(p));
                if (bytes == 0) continue;
                std::memcpy(page_twin(p), copy + k * page, page_len(p));
                pg.wrote_at = seq;
                n.ctr_.diff_bytes.fetch_add(bytes, std::memory_order_relaxed);
                n.ctr_.diffs_sent.fetch_add(1, std::memory_order_relaxed);
                n.ctr_.pages_kept_writable.fetch_add(1, std::memory_order_relaxed);
                noticed.push_back(p);
                advance = true;
                continue;
            } else if (pg.dirty && pg.twin) {
                leave_out_private(p);
                const size_t bytes = per_home[home_of_page(p)].diff(p, page_priv(p), page_twin(p), page_len(p));
                if (bytes != 0) pg.wrote_at = seq;
                if (bytes == 0 && pg.ahead) {
                    noticed_page = false;
                    n.ctr_.written_ahead_unchanged.fetch_add(1, std::memory_order_relaxed);
                } else {
                    n.ctr_.diff_bytes.fetch_add(bytes, std::memory_order_relaxed);
                    n.ctr_.diffs_sent.fetch_add(1, std::memory_order_relaxed);
                }
            }
            if (noticed_page) noticed.push_back(p);
            if (noticed_page || !pg.served_twin) advance = true;
            pg.twin = false;
            pg.ahead = false;
            pg.dirty = false;
            pg.served_twin = false;
        }
    }, [&] {  // the run's pages unlocked: the complete messages go now (the home applies them meanwhile)
        for (uint16_t c = 0; c < n.clusters_ && shipped_ok; c++) shipped_ok = per_home[c].ship(*this, ep, c);
    });
    if (!shipped_ok) return false;
    if (!kept.empty()) {  // still dirty: the next flush compares them with their new twins
        std::lock_guard<std::mutex> d(dirty_mu);
        dirty_list.insert(dirty_list.end(), kept.begin(), kept.end());
    }
    if (advance) flush_seq.store(seq, std::memory_order_relaxed);
    if (noticed.empty()) {
        covered();
        return true;
    }
    note_writers(n.cluster_, noticed.data(), noticed.size());
    list.swap(noticed);
    uint16_t only = UINT16_MAX;  // the one home every diff of this flush goes to, if there is one
    for (uint16_t c = 0; c < n.clusters_; c++)
        if (!per_home[c].msgs.empty()) only = only == UINT16_MAX ? c : uint16_t(UINT16_MAX - 1);
    if (only < n.clusters_ && flush_wanted.load(std::memory_order_seq_cst) &&
        send_diffs_with_tokens(*this, ep, only, per_home[only], list, covers)) {
        covered();
        return true;
    }
    for (uint16_t c = 0; c < n.clusters_; c++)
        if (!per_home[c].msgs.empty() && !send_diffs(*this, ep, c, per_home[c])) return false;
    {
        std::lock_guard<std::mutex> k(know_mu);
        const uint32_t idx = ++vc[n.cluster_];
        store[n.cluster_][idx] = std::move(list);
    }
    n.ctr_.intervals.fetch_add(1, std::memory_order_relaxed);
    covered();
    return true;
}

void DsmNode::Impl::protect_deferred(const std::vector<uint32_t>& deferred, RtEndpoint& ep) {
    if (deferred.empty()) return;
    lock_coh(ep);
    // Still writable: not invalidated by the reply (PROT_NONE already) nor moved here as the only
    // copy (left out by apply_moves); a page moved here with its old home's copy kept is tracked.
    for_each_page_run(deferred, [&](const uint32_t* run, size_t len) {
        protect_runs(run, len, PROT_READ, kReadOnly, [&](uint32_t p) { return pages[p].state.load() == kWritable; });
    });
    coh_mu.unlock();
}

// One twinned page's diff home now (an invalidation found it twinned again since the flush). Its
// page lock held. False: a page made writable ahead (kWriteAhead) that did not change (nothing sent).
bool DsmNode::Impl::send_page_diff(uint32_t p, RtEndpoint& ep) {
    protect(p, 1, PROT_READ);
    leave_out_private(p);
    DiffBatch b(rt.max_message(), spare_diff_buffers);
    const size_t bytes = b.diff(p, page_priv(p), page_twin(p), page_len(p));
    if (bytes == 0 && pages[p].ahead) return false;
    n.ctr_.diffs_sent.fetch_add(1, std::memory_order_relaxed);
    n.ctr_.diff_bytes.fetch_add(bytes, std::memory_order_relaxed);
    if (!b.msgs.empty() && !send_diffs(*this, ep, home_of_page(p), b))
        fatal("cluster %u: sending the diff of page %u home failed: %s", unsigned(n.cluster_), p,
              ep.last_error().c_str());
    return true;
}

// A twinned page's words that stay this cluster's own (private_words): equal in the twin, so no
// diff carries them.
void DsmNode::Impl::leave_out_private(uint64_t p) {
    if (const std::vector<uint32_t>* keep = private_of(p))
        for (uint32_t off : *keep) std::memcpy(page_twin(p) + off, page_priv(p) + off, 8);
}

void DsmNode::Impl::lock_coh(RtEndpoint& ep) {
    // Waiting threads keep running their endpoint's handlers (the runtime's inline polling
    // makes progress through them).
    spin_wait(&ep, [&] { return coh_mu.try_lock(); });
}

DsmStatus DsmNode::flush() {
    RtEndpoint& ep = bound_or_die(*this, "a release");
    bool ok = true;
    if (parallel()) {
        impl_->lock_coh(ep);
        ok = impl_->flush_locked(ep);
        impl_->coh_mu.unlock();
    } else {
        impl_->flushed_clock.store(impl_->rel_clock.load());  // the prefix: every cluster writes its own copy
    }
    if (ok) impl_->return_covered_tokens(ep);
    return ok ? DsmStatus::kOk : DsmStatus::kRuntime;
}

namespace {
void h_diff(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto* I = static_cast<DsmNode::Impl*>(ctx);
    Rd r(m.data.data(), m.data.size());
    const uint32_t cnt = r.get<uint32_t>();
    for (uint32_t j = 0; j < cnt && !r.bad; j++) {
        const uint32_t p = r.get<uint32_t>();
        const uint32_t runs = r.get<uint32_t>();
        // A home page written ahead here has a twin (make_writable): the diff goes into it too, so
        // the release compares only this cluster's own writes and does not name the page for
        // another cluster's (lu-nc's pages hold blocks of both clusters: named so, their other
        // writer refetched them, 714 -> 1,163 fetches a run). Under the page's lock, so the twin
        // is made either before the diff (and copies it) or after it.
        std::unique_lock<std::mutex> g;
        if (!r.bad && I->valid_page(p)) g = std::unique_lock<std::mutex>(I->pages[p].mu);
        uint8_t* twin = g.owns_lock() && I->pages[p].twin ? I->page_twin(p) : nullptr;
        for (uint32_t k = 0; k < runs && !r.bad; k++) {
            const uint32_t off = r.get<uint32_t>();
            const uint32_t len_flags = r.get<uint32_t>();
            const uint32_t len = len_flags & ~kRunMasked;
            const bool masked = (len_flags & kRunMasked) != 0;
            const uint8_t* d = r.take(len);
            const uint8_t* mask = masked ? r.take(len / 8) : nullptr;
            if (r.bad || !I->valid_page(p) || uint64_t(off) + len > I->page_len(p) || (off | len) % 8) {
                r.bad = true;
                break;
            }
            // Only the changed bytes are written: home threads, and other clusters' diffs, may be
            // writing other bytes of the page, even of the same word.
            for (uint8_t* base : {I->page_priv(p), twin}) {
                if (!base) continue;
                uint8_t* at = base + off;
                if (!masked) {
                    std::memcpy(at, d, len);
                    continue;
                }
                for (uint32_t w = 0; w < len / 8; w++) put_masked(at + 8 * w, d + 8 * w, mask[w]);
            }
        }
        I->n.counters().diffs_applied.fetch_add(1, std::memory_order_relaxed);
    }
    if (r.bad) fprintf(stderr, "iccs dsm: cluster %u: malformed diff from cluster %u dropped\n",
                       unsigned(I->n.cluster()), unsigned(m.src.cluster));
    if (m.req_id) self.reply(m.token(), {});  // sent one-way ahead of a token (send_diffs_with_tokens)
}

}  // namespace

void register_diff_handlers(DsmNode::Impl& I) { I.rt.set_handler(I.h(kHDiff), h_diff, &I); }

}  // namespace iccs::dsm
