// dsm_barrier.cpp: barriers. The threads of a cluster meet first; the last of them flushes and
// makes the cluster's one exchange with the barrier's home (id mod C), whose manager merges the
// arriving clusters' notices and, at a barrier every bound thread is in, moves homes
// (dsm_home_moves.cpp). The home cluster's own arrival is made on that manager in place.
#include <algorithm>
#include <cstdio>

#include "dsm_impl.hpp"

namespace iccs::dsm {

namespace {

// An arrival: u32 id, u16 clusters, u8 full, VC the latest and VC the oldest of the last
// kMoveEpochs full barriers' times, VC, u32 n, {u32 page} (home pages of the arriving cluster a
// served fetch protected while untracked in those epochs: they keep their home), intervals. The reply:
// VC merged, u8 full (every cluster came with all its bound threads, from the same last full
// barrier), u32 n, {u32 page, u16 new home} (the same list for every cluster), intervals.
// Run by the home's service thread for a kHBarrier request, or by the home cluster's own arriving
// thread on the bytes its request would carry (`local`: its reply is left there, "A barrier homed
// at the arriving cluster"); `self` answers every waiter when the last arrives.
void barrier_arrival(DsmNode::Impl& I, RtEndpoint& self, Rd& r, ReplyToken tok, LocalGrant* local, uint16_t from) {
    const uint32_t id = r.get<uint32_t>();
    const uint16_t expect = r.get<uint16_t>();
    const bool full = r.get<uint8_t>() != 0;
    VC lf = I.decode_vc(r), since = I.decode_vc(r);
    VC v = I.decode_vc(r);
    const uint32_t nkept = r.get<uint32_t>();
    std::vector<uint32_t> kept(r.bad || nkept > (r.n - r.o) / 4 ? 0 : nkept);
    for (uint32_t& p : kept) p = r.get<uint32_t>();
    I.store_intervals(r);
    std::lock_guard<std::mutex> hg(I.home_mu);
    SyncObj& o = I.objs[id];
    if (o.bar_vc.empty()) o.bar_vc.assign(I.n.clusters(), 0);
    if (o.bar_arrived.empty()) {
        o.bar_kept.clear();
        o.bar_expect = expect;
        o.bar_full = true;
        o.bar_lf = lf;
        o.bar_since = since;
    } else if (o.bar_expect != expect) {
        fprintf(stderr, "iccs dsm: barrier %u: cluster %u expects %u clusters, an earlier one %u\n", id,
                unsigned(from), unsigned(expect), unsigned(o.bar_expect));
    }
    o.bar_full = o.bar_full && full && !r.bad && lf == o.bar_lf && since == o.bar_since;
    for (size_t c = 0; c < v.size(); c++) o.bar_vc[c] = std::max(o.bar_vc[c], v[c]);
    for (uint32_t p : kept)
        if (I.valid_page(p) && I.home_of_page(p) == from) o.bar_kept.push_back(p);
    o.bar_arrived.push_back(SyncObj::BarArrival{tok, std::move(v), local});
    if (o.bar_arrived.size() < o.bar_expect) return;
    const bool all = o.bar_full && o.bar_expect == I.n.clusters();
    std::vector<std::pair<uint32_t, uint16_t>> moves;
    std::sort(o.bar_kept.begin(), o.bar_kept.end());
    // A sixth of a message at most (6 bytes a page): the rest move at a later barrier.
    if (all && I.n.config().migrate_homes)
        moves = I.home_moves(o.bar_since, o.bar_lf, o.bar_vc, o.bar_kept, I.rt.max_message() / 36);
    o.bar_kept.clear();
    for (SyncObj::BarArrival& a : o.bar_arrived) {
        Wr w;
        I.encode_vc(w, o.bar_vc);
        w.put<uint8_t>(all);
        w.put<uint32_t>(uint32_t(moves.size()));
        for (const auto& [p, h] : moves) {
            w.put<uint32_t>(p);
            w.put<uint16_t>(h);
        }
        I.encode_intervals(w, a.vc, o.bar_vc);
        if (a.local) {
            a.local->bytes = std::move(w.b);
            a.local->ready.store(true, std::memory_order_release);  // its waiter may return at once
            I.rt.endpoint(a.tok.to.thread).notify();
        } else {
            self.reply(a.tok, RtBytes{w.b.data(), uint32_t(w.b.size())});
        }
    }
    o.bar_arrived.clear();
}

void h_barrier(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto& I = *static_cast<DsmNode::Impl*>(ctx);
    Rd r(m.data.data(), m.data.size());
    barrier_arrival(I, self, r, m.token(), nullptr, m.src.cluster);
}

}  // namespace

// The arrival's pages that keep their home here: those a served fetch protected while untracked in
// the last kMoveEpochs epochs and still homed here, sorted, at most a sixteenth of a message (a
// page left out may move: moves are safe either way).
void DsmNode::Impl::encode_served_untracked(Wr& w) {
    std::vector<uint32_t> kept;
    {
        std::lock_guard<std::mutex> g(served_untracked_mu);
        for (const std::vector<uint32_t>& epoch : served_untracked) kept.insert(kept.end(), epoch.begin(), epoch.end());
    }
    std::sort(kept.begin(), kept.end());
    kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
    std::erase_if(kept, [&](uint32_t p) { return home_of_page(p) != n.cluster_; });
    if (kept.size() > rt.max_message() / 64) kept.resize(rt.max_message() / 64);
    w.put<uint32_t>(uint32_t(kept.size()));
    for (uint32_t p : kept) w.put<uint32_t>(p);
}

void register_barrier_handlers(DsmNode::Impl& I) { I.rt.set_handler(I.h(kHBarrier), h_barrier, &I); }

DsmStatus DsmNode::barrier(uint32_t id, uint16_t local, uint16_t nclusters) {
    if (!check_id(*this, id, "barrier")) return DsmStatus::kBadArg;
    RtEndpoint& ep = bound_or_die(*this, "BARRIER");
    Impl& I = *impl_;
    if (local == 0) local = I.rt.threads();
    if (nclusters == 0) nclusters = clusters_;
    const uint64_t t0 = now_ns();
    I.serve_recalls();
    LocalBarrier* b;
    uint64_t gen;
    bool last = false;
    {
        std::lock_guard<std::mutex> g(I.bar_mu);
        b = &I.bars[id];
        gen = b->gen.load();
        if (++b->arrived >= local) {
            b->arrived = 0;
            last = true;
        }
    }
    DsmStatus st = DsmStatus::kOk;
    if (last) {
        // The cluster's threads are all here: one flush and one exchange for all of them. When
        // every bound thread of the cluster is (none writes until the reply is applied), the
        // flush leaves the pages it diffs writable and they are protected after the reply, but
        // those that then move here as the only copy (PROTOCOL.md, "Protection deferred to the
        // barrier's reply").
        std::vector<uint32_t> deferred;
        if (local == I.bound_threads.load() && parallel()) {
            I.lock_coh(ep);
            const bool ok = I.flush_locked(ep, &deferred);
            I.coh_mu.unlock();
            if (ok) I.return_covered_tokens(ep);
            else st = DsmStatus::kRuntime;
        } else if (flush() != DsmStatus::kOk) {
            st = DsmStatus::kRuntime;
        }
        if (b->last.empty()) b->last.assign(clusters_, 0);
        Wr w;
        w.put<uint32_t>(id);
        w.put<uint16_t>(nclusters);
        // Every thread of this cluster that may touch shared memory is here (home pages may move).
        w.put<uint8_t>(local == I.bound_threads.load() && nclusters == clusters_);
        {
            std::lock_guard<std::mutex> k(I.know_mu);
            I.encode_vc(w, I.last_full.front());
            I.encode_vc(w, I.last_full.back());
        }
        const VC mine = I.snapshot_vc();
        I.encode_vc(w, mine);
        I.encode_served_untracked(w);
        VC from = b->last;
        for (size_t c = 0; c < from.size(); c++) from[c] = std::min(from[c], mine[c]);
        if (st == DsmStatus::kOk && !I.push_intervals(w, I.from_for_home(I.home_of_sync(id), from, mine), mine,
                                                      I.home_of_sync(id), ep)) {
            set_error("BARRIER " + std::to_string(id) + ": " + DsmNode::error());
            st = DsmStatus::kRuntime;
        }
        std::vector<uint8_t> reply;
        if (st == DsmStatus::kOk && I.home_of_sync(id) == cluster_) {
            // The home is this cluster: its manager runs here, on the bytes the request would carry,
            // not on a request to this cluster's service thread (a wake-up of it and of this thread
            // for its reply: ocean's barriers, nearly all homed at one cluster, 900 a run). The
            // arrival that completes the barrier answers the others from this endpoint; otherwise
            // the service thread, at the last arrival, leaves this one's reply in its slot.
            LocalGrant& mine = I.grants[ep.self().thread];
            mine.ready.store(false, std::memory_order_relaxed);
            Rd arrival(w.b.data(), w.b.size());
            barrier_arrival(I, ep, arrival, ReplyToken{ep.self(), 0}, &mine, cluster_);
            bool down = false;
            uint64_t next_down_check = now_ns() + 10'000'000;
            const RtStatus ws = ep.wait_until([&] {
                ep.serve_service();  // no DSM lock held in this wait (coh_mu released above)
                if (mine.ready.load(std::memory_order_acquire)) return true;
                if (const uint64_t now = now_ns(); now >= next_down_check) {
                    next_down_check = now + 10'000'000;
                    for (uint16_t c = 0; c < clusters_ && !down; c++) down = ep.cluster_down(c);
                }
                return down;
            });
            if (ws != RtStatus::kOk || !mine.ready.load(std::memory_order_acquire)) {
                set_error("BARRIER " + std::to_string(id) + ": waiting for the other clusters failed: " +
                          (ws != RtStatus::kOk ? ep.last_error() : std::string("a cluster is down")));
                st = DsmStatus::kRuntime;
            } else {
                reply = std::move(mine.bytes);
                ctr_.barriers_here.fetch_add(1, std::memory_order_relaxed);
            }
        } else if (st == DsmStatus::kOk &&
                   ep.request(I.service(I.home_of_sync(id)), I.h(kHBarrier), RtBytes{w.b.data(), uint32_t(w.b.size())},
                              {}, reply) != RtStatus::kOk) {
            set_error("BARRIER " + std::to_string(id) + ": exchange with its home cluster failed: " + ep.last_error());
            st = DsmStatus::kRuntime;
        }
        if (st == DsmStatus::kOk) {
            Rd r(reply.data(), reply.size());
            VC merged = I.decode_vc(r);
            const bool all = r.get<uint8_t>() != 0;
            const uint32_t nmoves = r.get<uint32_t>();
            std::vector<std::pair<uint32_t, uint16_t>> moves(r.bad || nmoves > (r.n - r.o) / 6 ? 0 : nmoves);
            for (auto& mv : moves) {
                mv.first = r.get<uint32_t>();
                mv.second = r.get<uint16_t>();
                if (r.bad || !I.valid_page(mv.first) || (mv.second & ~kMoveSoleCopy) >= clusters_ ||
                    (&mv != moves.data() && mv.first <= (&mv - 1)->first)) {
                    set_error("BARRIER " + std::to_string(id) + ": malformed reply from its home cluster");
                    st = DsmStatus::kRuntime;
                    break;
                }
            }
            // Invalidations first, under the homes as they were; then the moves take effect.
            if (st == DsmStatus::kOk && !I.apply(merged, r, ep, I.home_of_sync(id))) st = DsmStatus::kRuntime;
            if (st == DsmStatus::kOk && all) {
                if (!moves.empty()) I.apply_moves(moves, ep, deferred);
                std::lock_guard<std::mutex> k(I.know_mu);
                std::move_backward(I.last_full.begin(), I.last_full.end() - 1, I.last_full.end());
                I.last_full.front() = merged;
                I.full_flush_seq[1].store(I.full_flush_seq[0].load(std::memory_order_relaxed), std::memory_order_relaxed);
                I.full_flush_seq[0].store(I.flush_seq.load(std::memory_order_relaxed), std::memory_order_relaxed);
                std::lock_guard<std::mutex> g(I.served_untracked_mu);
                std::rotate(I.served_untracked.rbegin(), I.served_untracked.rbegin() + 1, I.served_untracked.rend());
                I.served_untracked.front().clear();
            }
            I.home_holds(I.home_of_sync(id), merged);  // the reply came from the home's store
            b->last = std::move(merged);
        }
        I.protect_deferred(deferred, ep);  // before any thread of the cluster leaves the barrier
        b->gen.fetch_add(1, std::memory_order_release);
    } else {
        spin_wait(&ep, [&] {
            I.serve_recalls();  // a thread of this cluster not in this barrier may have released a lock
            return b->gen.load(std::memory_order_acquire) != gen;
        });
    }
    ctr_.barriers.fetch_add(1, std::memory_order_relaxed);
    ctr_.barrier_wait_ns.fetch_add(now_ns() - t0, std::memory_order_relaxed);
    return st;
}

}  // namespace iccs::dsm
