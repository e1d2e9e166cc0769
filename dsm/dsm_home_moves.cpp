// dsm_home_moves.cpp: homes that move to their only writer at a full barrier (dsm/PROTOCOL.md, "Homes
// move to their only writer"): which pages move, from the intervals the barrier's home knows, and
// the move applied by every cluster after the barrier's invalidations (dsm_barrier.cpp).
#include <sys/mman.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "dsm_impl.hpp"

namespace iccs::dsm {

// Why a page may move at a full barrier (every bound thread of every cluster in it, so no thread
// touches shared memory and every diff of the epoch is at its home, acked): after it every valid
// copy is current, and the writer's copy is valid (it wrote the page after the last full barrier,
// whose notices it had applied, and nobody else wrote it since). Writes the old home made without
// a notice (an untracked home page) are no exception: another cluster's valid copy of such a page
// was fetched after the home's last notice of it (the fetch protected it: the home's later writes
// are noticed) or is invalidated by that notice at the latest at this barrier.
// A page moves when one cluster alone wrote it in the last kMoveEpochs epochs (since the oldest
// of the last kMoveEpochs full barriers), and it did in the last one. Pages whose writer changes
// from epoch to epoch (LU's blocks sharing pages) moved back and forth at every barrier, each move
// turning the epochs its old home wrote it in into diffs (lu-nc 3.9x slower with one epoch): a
// page moves at most kMaxHomeMoves times, and with two epochs lu-nc's pages still moved (written
// by one cluster in two phases of a step, by both in the third), leaving its homes interleaved
// (1.24x slower); three cover a step. Requiring the writer in every epoch instead stopped ocean's
// grids, which their owners write every other epoch, from moving at all (ocean 1.7x slower).
// A home page written while untracked (writable after its notice, "Untracked home pages") is named
// in no notice: when the other cluster fetched it only after those writes, the epochs showed that
// cluster as its only writer, and pages both clusters write every step moved (lu-nc: 257-850 a
// run, varying with timing), each move turning its old home's later writes into diffs. The fetch
// that protected such a page is what this cluster knows of those writes: its home names the page
// in its barrier arrivals for kMoveEpochs epochs after (`kept`), and it stays.
std::vector<std::pair<uint32_t, uint16_t>> DsmNode::Impl::home_moves(const VC& since, const VC& lf, const VC& to,
                                                                     const std::vector<uint32_t>& kept, size_t most) {
    constexpr uint16_t kSeveral = UINT16_MAX;
    struct Writes {
        uint16_t who;     // its one writer, or kSeveral
        uint8_t epochs;   // bit 0: written in (since, lf], bit 1: in (lf, to]
    };
    std::unordered_map<uint32_t, Writes> writer;
    {
        std::lock_guard<std::mutex> k(know_mu);
        for (uint16_t c = 0; c < n.clusters_; c++)
            for (uint32_t i = since[c] + 1; i <= to[c] && since[c] < to[c]; i++) {
                auto it = store[c].find(i);
                if (it == store[c].end()) return {};  // not known here: no page moves
                const uint8_t epoch = i <= lf[c] ? 1 : 2;
                for (uint32_t p : it->second) {
                    auto [w, fresh] = writer.emplace(p, Writes{c, epoch});
                    if (!fresh && w->second.who != c) w->second.who = kSeveral;
                    w->second.epochs |= epoch;
                }
            }
    }
    // Whether a stored notice ever named the page's home as its writer (clusters from 63 on: as if).
    auto old_home_wrote = [&](uint32_t p) {
        const uint16_t h = home_of_page(p);
        return h >= 63 || (pages[p].writers.load(std::memory_order_relaxed) >> h & 1) != 0;
    };
    std::vector<std::pair<uint32_t, uint16_t>> moves;
    for (const auto& [p, w] : writer)
        if (w.who != kSeveral && (w.epochs & 2) && home_of_page(p) != w.who &&
            pages[p].home_moves.load(std::memory_order_relaxed) < kMaxHomeMoves &&
            !std::binary_search(kept.begin(), kept.end(), p))
            moves.emplace_back(p, uint16_t(w.who | (old_home_wrote(p) ? 0 : kMoveSoleCopy)));
    std::sort(moves.begin(), moves.end());
    if (moves.size() > most) moves.resize(most);
    return moves;
}

void DsmNode::Impl::apply_moves(const std::vector<std::pair<uint32_t, uint16_t>>& moves, RtEndpoint& ep,
                                std::vector<uint32_t>& deferred) {
    lock_coh(ep);
    std::vector<uint32_t> list;
    list.reserve(moves.size());
    for (const auto& mv : moves) list.push_back(mv.first);
    const uint16_t me = n.cluster_;
    // A page its old home never wrote (kMoveSoleCopy), under block homes: every cluster but the new
    // home drops its copy here, and the new home leaves the page writable and untracked, as a home
    // page whose notice is out (protect_served): its writes fault nowhere until another cluster
    // fetches it. Left read-only, each moved page cost its new home a write fault at its next write
    // (ocean-nc: 5,024 of its 17,800 a run: pages of one cluster's grids homed at the other). A page
    // its old home wrote (radix's keys, which the other cluster's permutation wrote last and the
    // old home reads next) keeps every copy: dropped, the old home fetched them back (radix: page
    // fetches 689 -> 818-915 a run). The old home protects it if it had left it writable (its next
    // write makes a twin), and the new home's next write faults and is noticed. Under round-robin
    // homes every move keeps every copy.
    std::vector<uint8_t> stays_writable(deferred.size());
    auto dest = [&](size_t i) { return uint16_t(moves[i].second & ~kMoveSoleCopy); };
    auto sole = [&](size_t i) { return untracked_homes() && (moves[i].second & kMoveSoleCopy) != 0; };
    for_each_page_run(list, [&](const uint32_t* run, size_t len) {
        const size_t at = size_t(run - list.data());
        auto index = [&](uint32_t p) { return at + size_t(std::lower_bound(run, run + len, p) - run); };
        for (size_t k = 0; k < len; k++) {
            const uint32_t p = run[k];
            Page& pg = pages[p];
            if (dest(at + k) == me && (pg.state.load() == kInvalid || pg.twin || pg.dirty))
                fatal("cluster %u: page %u moves here at a barrier but its copy is %s (protocol bug)", unsigned(me), p,
                      pg.state.load() == kInvalid ? "invalid" : "not flushed");
            if (sole(at + k) && dest(at + k) != me) {
                pg.epoch++;  // no fetch is in flight at a full barrier; the epoch says it all the same
                if (pg.state.load() != kInvalid) n.ctr_.invalidations.fetch_add(1, std::memory_order_relaxed);
            }
        }
        protect_runs(run, len, PROT_NONE, kInvalid, [&](uint32_t p) { return sole(index(p)) && dest(index(p)) != me; });
        protect_runs(run, len, PROT_READ, kReadOnly, [&](uint32_t p) {
            return !sole(index(p)) && home_of_page(p) == me && pages[p].state.load() == kWritable;
        });
        protect_runs(run, len, PROT_READ | PROT_WRITE, kWritable, [&](uint32_t p) {
            return sole(index(p)) && dest(index(p)) == me && !pages[p].served_unhomed && pages[p].state.load() == kReadOnly;
        });
        // Written here in the epoch and left writable by the barrier's flush (flush_locked's
        // defer_ro): one that comes here as the only copy, not served meanwhile, stays so with no
        // mprotect (not protected at the flush and unprotected here: two calls a page, ocean-nc's
        // 7,300 of its 30,000 a run); every other stays in `deferred`, protected after.
        for (size_t k = 0; k < len && !deferred.empty(); k++) {
            const uint32_t p = run[k];
            if (!sole(at + k) || dest(at + k) != me || pages[p].served_unhomed || pages[p].state.load() != kWritable)
                continue;
            auto it = std::lower_bound(deferred.begin(), deferred.end(), p);
            if (it != deferred.end() && *it == p) stays_writable[size_t(it - deferred.begin())] = 1;
        }
        for (size_t k = 0; k < len; k++) {
            Page& pg = pages[run[k]];
            pg.served_unhomed = false;
            pg.moved_home.store(uint16_t(dest(at + k) + 1), std::memory_order_release);
            pg.home_moves.fetch_add(1, std::memory_order_relaxed);
        }
    });
    size_t kept = 0;
    for (size_t i = 0; i < deferred.size(); i++)
        if (!stays_writable[i]) deferred[kept++] = deferred[i];
    deferred.resize(kept);
    n.ctr_.homes_moved.fetch_add(moves.size(), std::memory_order_relaxed);
    coh_mu.unlock();
}

}  // namespace iccs::dsm
