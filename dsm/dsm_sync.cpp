// dsm_sync.cpp: release-consistent locks. Every sync id has a home cluster (id mod C) whose service
// thread runs its manager: a lock queue whose grant carries the lock's knowledge (a vector time and
// the write notices the acquirer lacks). Get-next-index counters, flags and condition variables:
// dsm_conds.cpp; barriers: dsm_barrier.cpp; fences: dsm_fence.cpp.
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "dsm_impl.hpp"

namespace iccs::dsm {

bool check_id(const DsmNode& n, uint32_t id, const char* what) {
    if (id < n.config().max_sync_ids) return true;
    set_error(std::string(what) + " id " + std::to_string(id) + " is out of range (0 .. " +
              std::to_string(n.config().max_sync_ids - 1) + ")");
    return false;
}

namespace {

// ---- home side ---------------------------------------------------------------------------------

// Grants ahead: for a cluster whose requests walk this home's ids (LockWaiter::walk), the next ids
// of this home in the walk's direction (id +- C, +- 2C, ... up to kGrantsAhead of them) whose locks
// are in use (a token that went out once), with nobody queued or recalled, and whose token is here at
// the home (owner -1) or at this cluster idle (free, not in a burst of use here: the grace's test,
// asked for by no thread here, its last release covered by a flush): each is granted to `to` with its
// own. Their times join the grant's (`lock_vc` grows to cover them): the acquirer applies one time
// that covers every lock it is given. barnes's centre-of-mass pass takes the lock of each of its
// leaves and cells in reverse order, the two clusters' ids the same (`seqnum % 2048`, each cluster's
// numbers a multiple of 2,048 apart): a request a lock, half of them to the other cluster's home.
// home_mu held; takes tok_mu (never held by a thread taking home_mu).
std::vector<uint32_t> grants_ahead(DsmNode::Impl& I, uint32_t id, const LockWaiter& to, VC& lock_vc) {
    std::vector<uint32_t> out;
    const uint32_t ahead = I.n.config().grants_ahead;  // 0 (the default): none
    if (ahead == 0 || to.walk == 0 || to.local || id == kFenceLock) return out;
    const uint32_t C = I.n.clusters();
    const int32_t here = int32_t(I.n.cluster());
    const uint64_t grace = uint64_t(I.n.config().lock_grace_us) * 1000, now = now_ns();
    std::unique_lock<std::mutex> g(I.tok_mu, std::defer_lock);
    VC mine;
    for (uint32_t k = 1; k <= ahead; k++) {
        const int64_t next = int64_t(id) + int64_t(to.walk) * int64_t(k) * C;
        if (next <= int64_t(kFenceLock) || next >= int64_t(I.n.config().max_sync_ids)) break;
        auto oit = I.objs.find(uint32_t(next));
        if (oit == I.objs.end()) continue;
        SyncObj& oj = oit->second;
        if (!oj.queue.empty() || oj.recalling || (oj.owner < 0 && oj.vc.empty())) continue;
        if (oj.owner == here) {
            if (!g.owns_lock()) {
                g.lock();
                mine = I.snapshot_vc();
            }
            auto tit = I.tokens.find(uint32_t(next));
            if (tit == I.tokens.end()) continue;
            LockToken& t = tit->second;
            const bool in_use = t.reuse_gap_ns < grace && now - t.acquired_ns < grace;
            if (!t.here || t.held || t.recalled || t.requesting || t.waiters > 0 || in_use ||
                t.released > I.flushed_clock.load())
                continue;
            // Given back to this home in place: the lock's time takes this cluster's, which covers
            // every release of it here (flushed, so those intervals are in `mine`).
            I.token_leaves(t);
            if (oj.vc.empty()) oj.vc.assign(C, 0);
            for (size_t c = 0; c < C; c++) oj.vc[c] = std::max(oj.vc[c], mine[c]);
        } else if (oj.owner >= 0) {
            continue;
        }
        // A token that came home ahead and now goes out ahead is no sample of the gauge of tokens
        // home ahead (ahead_welcome): counted as wasted when it goes back to the cluster that sent it,
        // it turned that off in a walk both clusters make (dsm-lock-array: 791 recalls a run answered
        // to a waiting thread instead of about 60).
        oj.ahead_from = -1;
        oj.owner = to.tok.to.cluster;
        for (size_t c = 0; c < C && c < oj.vc.size(); c++) lock_vc[c] = std::max(lock_vc[c], oj.vc[c]);
        out.push_back(uint32_t(next));
    }
    if (g.owns_lock() && !out.empty()) I.tokens_changed();
    return out;
}

// The token to `to`: the lock's time and the intervals the acquirer lacks, then the ids granted with
// it (grants_ahead). A waiter of this cluster that acted on the home itself (LockWaiter::local) finds
// the grant left for it and is woken; another cluster's gets a kHLockGrant message (its request was
// one-way). home_mu held.
void grant(DsmNode::Impl& I, RtEndpoint& self, uint32_t id, SyncObj& o, LockWaiter& to) {
    I.count_ahead_use(o, to.tok.to.cluster);  // it came home ahead: was that of use?
    Wr w;
    VC lock_vc = o.vc.empty() ? VC(I.n.clusters(), 0) : o.vc;
    o.owner = to.tok.to.cluster;  // before grants_ahead, which looks at other ids only
    const std::vector<uint32_t> ahead = grants_ahead(I, id, to, lock_vc);
    I.encode_vc(w, lock_vc);
    VC from = to.acq;
    for (size_t c = 0; c < from.size(); c++)
        if (from[c] > lock_vc[c]) from[c] = lock_vc[c];
    // A waiter of this cluster reads the intervals from the home's store, which is its own: the
    // lock's time is all it needs (its acquire invalidates what that time names beyond its own).
    if (to.local) from = lock_vc;
    I.encode_intervals(w, from, lock_vc);
    w.put<uint16_t>(uint16_t(ahead.size()));
    for (uint32_t a : ahead) w.put<uint32_t>(a);
    if (to.local) {
        to.local->bytes = std::move(w.b);
        to.local->ready.store(true, std::memory_order_release);  // its waiter may return at once
        I.rt.endpoint(to.tok.to.thread).notify();
        return;
    }
    if (self.send(to.tok.to, I.h(kHLockGrant), RtBytes{w.b.data(), uint32_t(w.b.size())}) != RtStatus::kOk)
        fprintf(stderr, "iccs dsm: cluster %u: granting lock to cluster %u failed: %s\n", unsigned(I.n.cluster()),
                unsigned(to.tok.to.cluster), self.last_error().c_str());
}

// A grant (kHLockGrant) at the thread that asked, run in its wait: left in its slot.
void h_lock_grant(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto& I = *static_cast<DsmNode::Impl*>(ctx);
    const uint16_t t = self.self().thread;
    if (t >= I.rt.threads()) {
        fprintf(stderr, "iccs dsm: cluster %u: a lock grant from cluster %u reached the service thread (dropped)\n",
                unsigned(I.n.cluster()), unsigned(m.src.cluster));
        return;
    }
    LocalGrant& g = I.grants[t];
    g.bytes.assign(m.data.begin(), m.data.end());
    g.ready.store(true, std::memory_order_release);
}

// A cluster waits for a token that is out: ask its cluster for it, once per tenure. The fence
// lock's token always comes back at its release. `awaited`: sent by the thread that waits for the
// token (request_lock on its own home), which rings the other cluster's service doorbell itself if
// that cluster's compute thread, serving it, has not run the recall within the runtime's bound.
void recall(DsmNode::Impl& I, RtEndpoint& self, uint32_t id, SyncObj& o, bool awaited = false) {
    if (id == kFenceLock || o.queue.empty() || o.owner < 0 || o.recalling) return;
    o.recalling = true;
    // The token comes back to the thread that waits for it when that thread is of this cluster (a
    // request made on the home itself: it runs the return's handler while it waits), so this
    // cluster's service thread is not woken for it; else to the service thread.
    Wr w;
    w.put<uint32_t>(id);
    w.put<uint16_t>(o.queue.front().local ? o.queue.front().tok.to.thread : kRtService);
    w.put<uint8_t>(I.ahead_welcome(o.owner) ? 1 : 0);
    const RtBytes bytes{w.b.data(), uint32_t(w.b.size())};
    if (awaited) self.send_awaited(I.service(uint16_t(o.owner)), I.h(kHLockRecall), bytes);
    else self.send(I.service(uint16_t(o.owner)), I.h(kHLockRecall), bytes);
}

void h_lock_recall(RtEndpoint& self, const AmMsg& m, void* ctx);

// The token's cluster may ask again before its token is back (its request and the token come from
// different endpoints, which the runtime does not order): it queues like any other.
void h_lock_acq(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto& I = *static_cast<DsmNode::Impl*>(ctx);
    Rd r(m.data.data(), m.data.size());
    const uint32_t id = r.get<uint32_t>();
    if (id == kFenceExchange) {
        fence_exchange(I, self, m, r);
        return;
    }
    LockWaiter w{m.token(), I.decode_vc(r)};
    if (r.bad || id >= I.n.config().max_sync_ids || m.src.cluster >= I.n.clusters()) {
        fprintf(stderr, "iccs dsm: cluster %u: malformed lock request from cluster %u (dropped)\n",
                unsigned(I.n.cluster()), unsigned(m.src.cluster));
        return;
    }
    Wr own;  // a recall of a token this cluster holds: run below, not sent to this very thread
    {
        std::lock_guard<std::mutex> hg(I.home_mu);
        // A walk: this request and the two before it from that cluster step the same way through
        // this home's ids, each step at most kGrantsAhead + 1 of them (a walk past its last grants
        // ahead steps that far).
        std::array<uint32_t, 2>& last = I.last_requests_from[m.src.cluster];
        const int64_t span = int64_t(kGrantsAhead + 1) * I.n.clusters();
        const int64_t d1 = int64_t(id) - int64_t(last[1]), d0 = int64_t(last[1]) - int64_t(last[0]);
        if (d1 != 0 && d0 != 0 && (d1 > 0) == (d0 > 0) && std::abs(d1) <= span && std::abs(d0) <= span)
            w.walk = d1 > 0 ? 1 : -1;
        last = {last[1], id};
        SyncObj& o = I.objs[id];
        if (o.owner < 0) {
            grant(I, self, id, o, w);
            return;
        }
        o.queue.push_back(std::move(w));
        if (id != kFenceLock && o.owner == I.n.cluster() && !o.recalling) {
            o.recalling = true;
            own.put<uint32_t>(id);
            own.put<uint16_t>(kRtService);
            own.put<uint8_t>(0);  // this cluster's own tokens: none goes ahead to itself
        } else {
            recall(I, self, id, o);
        }
    }
    // The home's own cluster holds the token: its recall is handled here, as the message to this
    // service thread would have been right after this one (a trip through its ring and loop saved;
    // water-nsquared's molecule locks: half its ~2,000 lock transfers a cluster a run). home_mu is
    // released first: giving the token back takes it (send_token_return, h_lock_rel).
    if (!own.b.empty()) {
        const AmMsg rm{self.self(), I.h(kHLockRecall), 0, std::span<const uint8_t>(own.b.data(), own.b.size())};
        h_lock_recall(self, rm, &I);
    }
}

// The token back: the lock's knowledge grows by the releaser's, and the next waiter gets it.
// `ahead`: unasked, with a recalled token of the same cluster (tokens_ahead).
void lock_back(DsmNode::Impl& I, RtEndpoint& self, const AmMsg& m, bool ahead) {
    Rd r(m.data.data(), m.data.size());
    const uint32_t id = r.get<uint32_t>();
    VC rel = I.decode_vc(r);
    if (!I.store_intervals(r)) {
        fprintf(stderr, "iccs dsm: cluster %u: malformed release of lock %u from cluster %u\n", unsigned(I.n.cluster()),
                id, unsigned(m.src.cluster));
    }
    if (m.req_id) self.reply(m.token(), {});  // nothing of ours asks (lock 0's release is one-way); a request is answered
    std::lock_guard<std::mutex> hg(I.home_mu);
    SyncObj& o = I.objs[id];
    if (o.vc.empty()) o.vc.assign(I.n.clusters(), 0);
    for (size_t c = 0; c < o.vc.size(); c++) o.vc[c] = std::max(o.vc[c], rel[c]);
    o.owner = -1;
    o.recalling = false;
    o.ahead_from = ahead ? int32_t(m.src.cluster) : -1;
    if (!o.queue.empty()) {
        LockWaiter next = std::move(o.queue.front());
        o.queue.pop_front();
        grant(I, self, id, o, next);
        recall(I, self, id, o);
    }
}

void h_lock_rel(RtEndpoint& self, const AmMsg& m, void* ctx) {
    lock_back(*static_cast<DsmNode::Impl*>(ctx), self, m, false);
}

void h_lock_ahead(RtEndpoint& self, const AmMsg& m, void* ctx) {
    lock_back(*static_cast<DsmNode::Impl*>(ctx), self, m, true);
}

// At the token's cluster (its service thread): give it back now if it is free and a flush covers
// its last release here; if it is held, its release gives it back; if it is free but not yet
// covered, the cluster's next sync operation flushes (the service thread must not wait for acks).
void h_lock_recall(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto& I = *static_cast<DsmNode::Impl*>(ctx);
    Rd r(m.data.data(), m.data.size());
    const uint32_t id = r.get<uint32_t>();
    const uint16_t to = r.get<uint16_t>();
    const bool ahead_welcome = r.get<uint8_t>() != 0;  // the home still takes tokens ahead from here
    if (r.bad || (to != kRtService && to >= I.rt.threads())) {
        fprintf(stderr, "iccs dsm: cluster %u: malformed recall from cluster %u (dropped)\n", unsigned(I.n.cluster()),
                unsigned(m.src.cluster));
        return;
    }
    TokenReturn ret;
    std::vector<TokenReturn> ahead;
    {
        std::lock_guard<std::mutex> g(I.tok_mu);
        LockToken& t = I.tokens[id];
        // Neither here nor asked for: it went home ahead (tokens_ahead) before this recall arrived,
        // and the home gives it to the waiter from there; or it was granted here ahead (grants_ahead)
        // and that grant is still on the way: it goes back when it comes (recall_unmatched).
        if (!t.here && !t.requesting) {
            t.recall_unmatched = true;
            return;
        }
        t.recalled = true;  // also when its grant is still on the way here
        t.return_to = to;
        // In a burst of use here (its last LOCK here called within the grace of the release before
        // it, and the lock held, acquired within the grace, or its grant on the way): this cluster
        // may take it again until the grace ends (a cell lock of barnes's tree build, which both
        // clusters take at every body they insert, moved at nearly every insert). A lock taken here
        // now and then (a work queue another cluster steals from) leaves at once, as before.
        const uint64_t grace = uint64_t(I.n.config().lock_grace_us) * 1000, now = now_ns();
        const bool in_use =
            t.reuse_gap_ns < grace && (t.held || !t.here || now - t.acquired_ns < grace);
        // Asked for back soon after it left here, asked for by the other cluster soon after it came
        // (or while its grant is on the way), and in a burst of use here: both clusters keep asking
        // for it, so it stays longer at each crossing (LockToken::grace_doublings). Any other recall:
        // a lock quiet for a while, or used by one cluster at a time, gets the configured grace.
        const bool both_ask = t.back_soon && (!t.here || now - std::min(now, t.arrived_ns) < grace);
        t.grace_doublings =
            in_use && both_ask ? uint8_t(std::min<unsigned>(t.grace_doublings + 1u, kMaxGraceDoublings)) : 0;
        t.grace_full_until_ns = grace && I.n.parallel() && in_use ? now + (grace << t.grace_doublings) : 0;
        t.grace_until_ns = I.grace_idle_end(t, now);
        if (t.here && !t.held) {
            if (!I.n.parallel() || t.released <= I.flushed_clock.load()) {
                ret = I.token_return(id, t);
            } else {
                I.want_return(id, t.grace_until_ns);  // a flush (after its grace, if any) gives it back
                // A flush ending meanwhile may have covered the release and looked at flush_wanted
                // before the store above (return_covered_tokens: then it returned nothing), and its
                // thread may now wait in a BARRIER, where nothing flushes again: the token would
                // stay here for good (seen once: ocean, 2 x 1 over direct, cluster 0 in LOCK,
                // cluster 1 in the BARRIER after its UNLOCK). So look at the flush again.
                if (t.released <= I.flushed_clock.load(std::memory_order_seq_cst)) {
                    I.recalled_idle.pop_back();
                    I.flush_wanted.store(!I.recalled_idle.empty(), std::memory_order_seq_cst);
                    ret = I.token_return(id, t);
                } else {
                    I.tokens_changed();  // a thread waiting here for a token flushes
                }
            }
        }
        if (t.grace_full_until_ns && ret.msgs.empty()) {
            t.graced_at_ns = now;
            I.n.counters().lock_graces.fetch_add(1, std::memory_order_relaxed);
        }
        if (m.src.cluster != I.n.cluster()) {
            // Ahead only along a walk (this home's previous recall here was of one of its ids at most
            // kTokensAhead + 1 of them back) and while the home says they are of use there
            // (ahead_welcome: barnes's cell locks, walked too, asked for nearly every one back).
            uint32_t& last = I.last_recall_from[m.src.cluster];
            const bool walk = id > last && id - last <= (kTokensAhead + 1) * I.n.clusters();
            last = id;
            if (!ret.msgs.empty() && walk && ahead_welcome) ahead = I.tokens_ahead(id, now);
        }
    }
    if (!ret.msgs.empty()) I.send_token_return(self, ret);
    for (TokenReturn& a : ahead) I.send_token_return(self, a);
}

}  // namespace

void register_sync_handlers(DsmNode::Impl& I) {
    I.last_recall_from.assign(I.n.clusters(), UINT32_MAX);  // before any recall can come
    I.last_requests_from.assign(I.n.clusters(), {UINT32_MAX, UINT32_MAX});
    I.ahead_useful.assign(I.n.clusters(), 0);
    I.ahead_wasted.assign(I.n.clusters(), 0);
    I.rt.set_handler(I.h(kHLockAhead), h_lock_ahead, &I);
    I.rt.set_handler(I.h(kHLockAcq), h_lock_acq, &I);
    I.rt.set_handler(I.h(kHLockRel), h_lock_rel, &I);
    I.rt.set_handler(I.h(kHLockRecall), h_lock_recall, &I);
    I.rt.set_handler(I.h(kHLockGrant), h_lock_grant, &I);
    I.grants = std::make_unique<LocalGrant[]>(I.rt.threads());
    register_cond_handlers(I);
}

// ---- client side -------------------------------------------------------------------------------

TokenReturn DsmNode::Impl::token_return(uint32_t id, LockToken& t, uint32_t own_interval) {
    VC mine = snapshot_vc();
    if (own_interval) mine[n.cluster_] = own_interval;
    const uint16_t home = home_of_sync(id);
    TokenReturn ret{id, t.return_to, {}};
    std::vector<Wr>& msgs = ret.msgs;
    Wr w;
    w.put<uint32_t>(id);
    encode_vc(w, mine);
    split_intervals(w, from_for_home(home, t.at_grant, mine), mine, msgs);
    msgs.push_back(std::move(w));
    token_leaves(t);
    tokens_changed();  // its local waiters ask the home now
    n.ctr_.lock_returns.fetch_add(1, std::memory_order_relaxed);
    return ret;
}

void DsmNode::Impl::token_leaves(LockToken& t) {
    if (t.graced_at_ns) n.ctr_.lock_grace_hold_ns.fetch_add(now_ns() - t.graced_at_ns, std::memory_order_relaxed);
    t.graced_at_ns = 0;
    t.grace_reused = false;
    t.here = false;
    t.recalled = false;
    t.passed = false;
    t.passes = 0;
    t.grace_until_ns = 0;
    t.grace_full_until_ns = 0;
    t.left_ns = now_ns();
    t.came_ahead = false;
    t.return_to = kRtService;
}

// A recall from another cluster's home that finds its token free here: the next ids homed there
// (id + C, id + 2C, ...) whose tokens are here, free, idle (not in a burst of use here: the grace's
// test), covered by a flush and wanted by no thread of this cluster go home with it. A lock array
// that two clusters walk in turn (water-nsquared's molecule locks: each cluster takes every one
// once a step, half a turn apart) then costs the walker nothing for them (its acquires on its own
// home find the tokens there) instead of a recall and a return each. tok_mu held.
std::vector<TokenReturn> DsmNode::Impl::tokens_ahead(uint32_t id, uint64_t now) {
    std::vector<TokenReturn> out;
    const uint64_t grace = uint64_t(n.config().lock_grace_us) * 1000;
    const uint64_t flushed = flushed_clock.load();
    for (uint32_t k = 1; k <= kTokensAhead; k++) {
        const uint64_t next = uint64_t(id) + uint64_t(k) * n.clusters_;
        if (next >= n.config().max_sync_ids) break;
        auto it = tokens.find(uint32_t(next));
        if (it == tokens.end()) continue;
        LockToken& t = it->second;
        const bool in_use = t.reuse_gap_ns < grace && now - t.acquired_ns < grace;
        if (!t.here || t.held || t.recalled || t.requesting || t.waiters > 0 || in_use || t.released > flushed)
            continue;
        out.push_back(token_return(uint32_t(next), t));
        out.back().ahead = true;
    }
    n.ctr_.lock_returns_ahead.fetch_add(out.size(), std::memory_order_relaxed);
    return out;
}

void DsmNode::Impl::take_granted_ahead(const std::vector<uint32_t>& ids, const VC& lock_vc, RtEndpoint& ep,
                                       std::unique_lock<std::mutex>& g) {
    if (ids.empty()) return;
    std::vector<TokenReturn> back;
    for (uint32_t a : ids) {
        LockToken& t = tokens[a];
        if (t.here) continue;  // the home had it elsewhere: not so
        t.here = true;
        t.at_grant = lock_vc;
        t.came_ahead = true;
        n.ctr_.lock_grants_ahead.fetch_add(1, std::memory_order_relaxed);
        // Recalled before it came (its recall found it neither here nor asked for), or while a thread
        // here asked for it: it goes back now, free (its last release here was flushed before it
        // left), as a recall finding it free would send it.
        if (!t.recall_unmatched && !t.recalled) continue;
        if (t.recall_unmatched) t.return_to = kRtService;  // the waiter it named may be gone
        t.recall_unmatched = false;
        t.recalled = true;
        if (t.released <= flushed_clock.load()) back.push_back(token_return(a, t));
        else want_return(a, 0);
    }
    tokens_changed();
    if (back.empty()) return;
    g.unlock();
    for (TokenReturn& ret : back) send_token_return(ep, ret);
    g.lock();
}

void DsmNode::Impl::send_token_return(RtEndpoint& ep, TokenReturn& ret, bool behind_diffs) {
    const uint32_t id = ret.id;
    std::vector<Wr>& msgs = ret.msgs;
    const uint16_t home = home_of_sync(id);
    if (home == n.cluster_ && msgs.size() == 1) {
        // The home is this cluster: its manager takes the token back on this thread, under home_mu,
        // and grants the next waiter from here. A message to this cluster's service thread cost a
        // wake-up of it (barnes: a quarter of its lock transfers' wake-ups). Nothing sent earlier
        // from here must reach the home first: this cluster's diffs never go to itself.
        const AmMsg m{ep.self(), h(kHLockRel), 0, std::span<const uint8_t>(msgs[0].b.data(), msgs[0].b.size())};
        h_lock_rel(ep, m, this);
        n.ctr_.lock_returns_here.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    // To the thread of the home that waits for it, when the recall named one: its handler runs
    // there, in that thread's wait (no wake-up of the home's service thread).
    const RtAddr to = behind_diffs || ret.to == kRtService ? service(home) : RtAddr{home, ret.to};
    if (to.thread != kRtService) n.ctr_.lock_returns_to_thread.fetch_add(1, std::memory_order_relaxed);
    for (size_t k = 0; k < msgs.size(); k++) {
        const Wr& w = msgs[k];
        const uint16_t handler = h(k + 1 < msgs.size() ? kHNotices : ret.ahead ? kHLockAhead : kHLockRel);
        if (ep.send(to, handler, RtBytes{w.b.data(), uint32_t(w.b.size())}) != RtStatus::kOk)
            fatal("cluster %u: giving lock %u back to its home cluster %u failed: %s", unsigned(n.cluster_), id,
                  unsigned(home), ep.last_error().c_str());
    }
}

void DsmNode::Impl::return_covered_tokens(RtEndpoint& ep) {
    // seq_cst with h_lock_recall's store and its second look at flushed_clock: one of the two sees
    // the other's write, so a recall arriving as a flush ends is served by one of them.
    if (!flush_wanted.load(std::memory_order_seq_cst)) return;
    std::vector<TokenReturn> out;
    {
        std::lock_guard<std::mutex> g(tok_mu);
        std::vector<uint32_t> keep;
        for (uint32_t id : recalled_idle) {
            LockToken& t = tokens[id];
            if (!t.here || t.held || !t.recalled) continue;  // gone, or its holder's release gives it back
            if (t.released <= flushed_clock.load()) out.push_back(token_return(id, t));
            else keep.push_back(id);
        }
        recalled_idle.swap(keep);
        flush_wanted.store(!recalled_idle.empty(), std::memory_order_release);
    }
    for (TokenReturn& ret : out) send_token_return(ep, ret);
}

void DsmNode::Impl::tokens_changed() {
    tok_gen.fetch_add(1, std::memory_order_acq_rel);
    if (tok_waiters.load() > 0)
        for (uint16_t t = 0; t < rt.threads(); t++) rt.endpoint(t).notify();
}

void DsmNode::Impl::serve_recalls() {
    if (flush_wanted.load(std::memory_order_acquire)) n.flush();
}

void DsmNode::Impl::serve_recalls_after_grace() {
    if (flush_wanted.load(std::memory_order_acquire) && now_ns() >= grace_end_ns.load(std::memory_order_acquire))
        n.flush();
}

void LockToken::taken(uint64_t t0_ns) {
    reuse_gap_ns = t0_ns - std::min(t0_ns, released_ns);
    if (released_ns) {  // not its first acquire here
        const uint64_t gap = std::min(reuse_gap_ns, kReuseGapCapNs);
        reuse_gap_avg_ns = reuse_gap_avg_ns ? reuse_gap_avg_ns - reuse_gap_avg_ns / 4 + gap / 4 : gap;
    }
    acquired_ns = t0_ns;
}

uint64_t DsmNode::Impl::grace_idle_end(const LockToken& t, uint64_t from_ns) const {
    // No gap known yet (never released here before), or a grace grown because both clusters keep
    // asking for the lock (raytrace's ray-id lock): the whole grace.
    if (!t.grace_full_until_ns || !t.reuse_gap_avg_ns || t.grace_doublings) return t.grace_full_until_ns;
    const uint64_t least = uint64_t(n.config().lock_grace_idle_us) * 1000;
    return std::min(t.grace_full_until_ns, from_ns + std::max(least, kGraceIdleGaps * t.reuse_gap_avg_ns));
}

uint64_t DsmNode::Impl::earliest_grace_end() {
    uint64_t due = UINT64_MAX;
    for (uint32_t id : recalled_idle)
        if (const LockToken& t = tokens[id]; !t.held) due = std::min(due, t.grace_until_ns);  // a held one: its UNLOCK
    return due;
}

void DsmNode::Impl::want_return(uint32_t id, uint64_t due_ns) {
    if (recalled_idle.empty() || due_ns < grace_end_ns.load(std::memory_order_relaxed))
        grace_end_ns.store(due_ns, std::memory_order_release);
    recalled_idle.push_back(id);
    flush_wanted.store(true, std::memory_order_seq_cst);
}

void DsmNode::Impl::flush_if_released() {
    if (rel_clock.load() > flushed_clock.load()) n.flush();
}

// Outside the parallel section (the replayed prefix before CREATE, and after the run has ended
// collectively) one thread runs in each cluster process, on that process's own copy of the
// region: a lock orders nothing across clusters, and its token is left where it is. Before, a
// prefix's LOCK took the token from its home as in the parallel section, so the clusters, each
// replaying the same prefix, passed the token back and forth at every LOCK: SPLASH-3 raytrace's
// hierarchy build (26,000 GlobalMallocs under one lock before CREATE, 2 x 1 over direct) made
// 380-6,800 lock requests a cluster a run, up to 140 ms of its prefix.
DsmStatus DsmNode::Impl::lock_outside_parallel(uint32_t id) {
    std::lock_guard<std::mutex> g(tok_mu);
    if (std::find(held_outside_parallel.begin(), held_outside_parallel.end(), id) != held_outside_parallel.end()) {
        set_error("LOCK of lock " + std::to_string(id) + ", which this thread already holds (before CREATE)");
        return DsmStatus::kBadArg;
    }
    held_outside_parallel.push_back(id);
    n.ctr_.lock_acquires.fetch_add(1, std::memory_order_relaxed);
    return DsmStatus::kOk;
}

DsmStatus DsmNode::Impl::unlock_outside_parallel(uint32_t id) {
    std::lock_guard<std::mutex> g(tok_mu);
    auto it = std::find(held_outside_parallel.begin(), held_outside_parallel.end(), id);
    if (it == held_outside_parallel.end()) {
        set_error("UNLOCK of lock " + std::to_string(id) + ", which no thread of cluster " +
                  std::to_string(n.cluster()) + " holds");
        return DsmStatus::kBadArg;
    }
    held_outside_parallel.erase(it);
    return DsmStatus::kOk;
}

bool DsmNode::Impl::locks_free_at_create(std::string& err) {
    std::lock_guard<std::mutex> g(tok_mu);
    if (held_outside_parallel.empty()) return true;
    // Every cluster's prefix holds it (each replays main): no one cluster could be given its token.
    err = "lock " + std::to_string(held_outside_parallel.front()) +
          " is held at CREATE (taken before it and not released): release it before CREATE";
    return false;
}

DsmStatus DsmNode::lock(uint32_t id) {
    if (!check_id(*this, id, "lock")) return DsmStatus::kBadArg;
    if (!parallel() && id != kFenceLock) return impl_->lock_outside_parallel(id);
    RtEndpoint& ep = bound_or_die(*this, "LOCK");
    Impl& I = *impl_;
    const uint64_t t0 = now_ns();
    // This thread holds none of the DSM's locks here: it runs what waits at this cluster's service
    // endpoint (a request or recall from the other cluster for a free, flushed token is answered
    // without waking the service thread; the runtime's serve_service).
    ep.serve_service();
    std::vector<uint32_t> granted_ahead;
    if (id == kFenceLock) {
        VC lock_vc;
        if (const DsmStatus st = I.request_lock(id, ep, lock_vc, granted_ahead); st != DsmStatus::kOk) return st;
        std::lock_guard<std::mutex> g(I.held_mu);
        I.held[id] = std::move(lock_vc);
    } else {
        std::unique_lock<std::mutex> g(I.tok_mu);
        for (;;) {
            LockToken& t = I.tokens[id];  // a node of the map: stays put while others are added
            // Here and free: no message (a recalled one leaves first, unless passed to us or in its
            // grace: the whole grace, for the idle end counts the cluster's other work, not a pause
            // of this thread, which a loaded host's scheduler makes at any time).
            if (t.here && !t.held && (!t.recalled || t.passed || now_ns() < t.grace_full_until_ns)) {
                if (t.recalled && !t.passed) {
                    t.grace_reused = true;
                    ctr_.lock_grace_reuses.fetch_add(1, std::memory_order_relaxed);
                }
                t.held = true;
                t.passed = false;
                if (t.came_ahead) {
                    t.came_ahead = false;
                    ctr_.lock_grants_ahead_used.fetch_add(1, std::memory_order_relaxed);
                }
                t.taken(t0);
                break;
            }
            if (!t.here && !t.requesting) {
                t.requesting = true;
                t.back_soon = t.left_ns && t0 - std::min(t0, t.left_ns) < uint64_t(I.n.config().lock_grace_us) * 1000;
                g.unlock();
                VC lock_vc;
                const DsmStatus st = I.request_lock(id, ep, lock_vc, granted_ahead);
                g.lock();
                t.requesting = false;
                I.tokens_changed();
                if (st != DsmStatus::kOk) return st;
                t.here = t.held = true;
                t.arrived_ns = now_ns();
                t.recall_unmatched = false;
                t.at_grant = lock_vc;
                I.take_granted_ahead(granted_ahead, lock_vc, ep, g);
                t.taken(t0);
                break;
            }
            // Held by another thread of this cluster, on its way here, or leaving: sleep on this
            // endpoint until the tokens change (tokens_changed wakes it), running its handlers and
            // the flush a recalled token may wait for. (Spinning here starved the proxies of a
            // loaded host: a cluster's proxies not run for 5 s, its peers declared it down.)
            const uint64_t seen = I.tok_gen.load(std::memory_order_acquire);
            I.tok_waiters.fetch_add(1);
            t.waiters++;
            g.unlock();
            I.serve_recalls();
            ep.wait_until([&] {
                ep.serve_service();  // tok_mu released above: none of the DSM's locks held
                return I.tok_gen.load(std::memory_order_acquire) != seen ||
                       I.flush_wanted.load(std::memory_order_acquire);
            }, 2000);
            I.tok_waiters.fetch_sub(1);
            g.lock();
            t.waiters--;
        }
    }
    // A recalled token past its grace (or idle end) leaves with this flush: after the acquire, so
    // that a LOCK of the recalled lock itself takes it first.
    I.serve_recalls_after_grace();
    ctr_.lock_acquires.fetch_add(1, std::memory_order_relaxed);
    ctr_.lock_wait_ns.fetch_add(now_ns() - t0, std::memory_order_relaxed);
    return DsmStatus::kOk;
}

// One request to the lock's home; the grant's notices applied. The thread does not flush first:
// while it waits, it flushes only when a recall waits for a token released here and not yet
// covered by a flush (flush_wanted: the cluster waiting for that token may hold the one asked for
// here). Before, it flushed whenever a lock had been released here since the last flush, a round
// trip for the diffs' acks ahead of the request itself (barnes: most of its remote requests).
DsmStatus DsmNode::Impl::request_lock(uint32_t id, RtEndpoint& ep, VC& lock_vc,
                                      std::vector<uint32_t>& granted_ahead) {
    const uint16_t home = home_of_sync(id);
    LocalGrant& mine = grants[ep.self().thread];
    mine.ready.store(false, std::memory_order_relaxed);
    LockWaiter w{ReplyToken{ep.self(), 0}, snapshot_vc(), nullptr};
    if (home == n.cluster_ && id != kFenceLock) {
        // The home is this cluster: act on its manager here, under home_mu, as its service thread
        // would on a request (a grant at once, or a place in the queue and a recall from this
        // endpoint), instead of a request to that thread and a wake-up of it. The grant is the
        // bytes a message would carry; whoever takes the token back leaves it and wakes this thread.
        w.local = &mine;
        std::lock_guard<std::mutex> hg(home_mu);
        SyncObj& o = objs[id];
        if (o.owner < 0) {
            grant(*this, ep, id, o, w);
        } else {
            o.queue.push_back(std::move(w));
            recall(*this, ep, id, o, true);  // this thread waits for the token below
        }
        n.ctr_.lock_requests_here.fetch_add(1, std::memory_order_relaxed);
    } else {
        Wr req;
        req.put<uint32_t>(id);
        encode_vc(req, w.acq);
        // Awaited: this thread waits for the grant below.
        if (ep.send_awaited(service(home), h(kHLockAcq), RtBytes{req.b.data(), uint32_t(req.b.size())}) !=
            RtStatus::kOk) {
            set_error("LOCK " + std::to_string(id) + ": request to its home cluster failed: " + ep.last_error());
            return DsmStatus::kRuntime;
        }
    }
    tok_waiters.fetch_add(1);  // a recall waiting for a flush wakes this thread (tokens_changed)
    RtStatus st = RtStatus::kOk;
    // The grant is a one-way message: if the home cluster dies, nothing comes. Look now and then
    // (every 10 ms, as barrier() does: a syscall over direct), and fail as a request would have.
    bool home_down = false;
    uint64_t next_down_check = now_ns() + 10'000'000;
    // The grant usually comes within tens of microseconds: wait for it awake, yielding, up to
    // lock_spin_us (0 by default: not told apart on a loaded host), before wait_until (whose own
    // spin is 20 us) puts the thread to sleep. A grant
    // to a sleeping thread costs a futex wake and the wait for a core: in barnes (2 x 1 over
    // direct, a scratch build timing each stage) the median hand-off took 20 us, so about half of
    // them found the thread asleep, and the grant's last leg took 32-80 us on average (load 7-19)
    // against a median of 5 us (dsm/SPLASH3.md, session 18).
    if (const uint64_t spin = uint64_t(n.config().lock_spin_us) * 1000; spin) {
        const uint64_t until = now_ns() + spin;
        while (!mine.ready.load(std::memory_order_acquire) && !flush_wanted.load(std::memory_order_acquire) &&
               now_ns() < until)
            if (ep.poll() == 0 && ep.serve_service() == 0) sched_yield();
    }
    while (!mine.ready.load(std::memory_order_acquire)) {
        if (flush_wanted.load(std::memory_order_acquire)) {
            // The grant may come meanwhile: its handler runs in the flush's waits.
            if (n.flush() != DsmStatus::kOk) {
                tok_waiters.fetch_sub(1);
                return DsmStatus::kRuntime;  // the flush said why
            }
            continue;
        }
        st = ep.wait_until([&] {
            ep.serve_service();  // no DSM lock held in this wait (the flush above is outside it)
            if (mine.ready.load(std::memory_order_acquire) || flush_wanted.load(std::memory_order_acquire)) return true;
            if (home == n.cluster_) return false;
            if (const uint64_t now = now_ns(); now >= next_down_check) {
                next_down_check = now + 10'000'000;
                home_down = ep.cluster_down(home);
            }
            return home_down;
        });
        if (st != RtStatus::kOk || home_down) break;
    }
    tok_waiters.fetch_sub(1);
    if (st != RtStatus::kOk || (home_down && !mine.ready.load(std::memory_order_acquire))) {
        set_error("LOCK " + std::to_string(id) + ": waiting for its grant failed: " +
                  (st != RtStatus::kOk ? ep.last_error() : "its home cluster " + std::to_string(home) + " is down"));
        return DsmStatus::kRuntime;
    }
    std::vector<uint8_t> reply = std::move(mine.bytes);
    Rd r(reply.data(), reply.size());
    lock_vc = decode_vc(r);
    if (!apply(lock_vc, r, ep, home)) return DsmStatus::kRuntime;
    home_holds(home, lock_vc);  // the grant came from the home's store
    // The tokens granted with it (grants_ahead): `lock_vc` covers their times, applied above.
    const uint16_t nahead = r.get<uint16_t>();
    for (uint16_t k = 0; k < nahead && !r.bad; k++) {
        const uint32_t a = r.get<uint32_t>();
        if (!r.bad && a != kFenceLock && a < n.config().max_sync_ids && home_of_sync(a) == home)
            granted_ahead.push_back(a);
    }
    if (r.bad) {
        set_error("LOCK " + std::to_string(id) + ": a malformed grant from cluster " + std::to_string(home));
        return DsmStatus::kRuntime;
    }
    n.ctr_.lock_requests.fetch_add(1, std::memory_order_relaxed);
    return DsmStatus::kOk;
}

// A release sends nothing while no other cluster waits: the token stays here, and so do the
// writes (no flush). When the home recalled it, the release flushes and the flush gives it back.
// (Tried: a lock whose recall once had to wait for its cluster's next sync operation flushing at
// every release from then on, so that the service thread could answer its recalls at once:
// raytrace 12.6 s instead of 1.8 s, barnes 24.3 s instead of 15.0 s, 2 x 1 over direct.)
DsmStatus DsmNode::unlock(uint32_t id) {
    if (id == kFenceLock) return impl_->release(id);
    if (!check_id(*this, id, "unlock")) return DsmStatus::kBadArg;
    if (!parallel()) return impl_->unlock_outside_parallel(id);
    bound_or_die(*this, "UNLOCK").serve_service();  // as at LOCK: no DSM lock held yet
    Impl& I = *impl_;
    bool flush_now = false;
    {
        std::lock_guard<std::mutex> g(I.tok_mu);
        auto it = I.tokens.find(id);
        if (it == I.tokens.end() || !it->second.held) {
            set_error("UNLOCK of lock " + std::to_string(id) + ", which no thread of cluster " +
                      std::to_string(cluster()) + " holds");
            return DsmStatus::kBadArg;
        }
        LockToken& t = it->second;
        t.held = false;
        t.released = ++I.rel_clock;
        t.released_ns = now_ns();
        I.tokens_changed();
        bool kept = false;
        if (t.recalled && t.grace_full_until_ns > t.released_ns) {
            // Taken again in its grace: in use here, so it stays the whole grace (the idle end is
            // for a grace nobody uses; moved on at each release, it cut the stays of a lock two
            // clusters take in loops whenever the scheduler paused the holder for longer). Held at
            // the recall and not taken since: the idle end from this release. Listed once however
            // often it is taken (a flush drops it from the list while held).
            t.grace_until_ns = t.grace_reused ? t.grace_full_until_ns : I.grace_idle_end(t, t.released_ns);
            if (std::find(I.recalled_idle.begin(), I.recalled_idle.end(), id) == I.recalled_idle.end())
                I.want_return(id, t.grace_until_ns);
            else
                I.grace_end_ns.store(I.earliest_grace_end(), std::memory_order_release);
            kept = true;
        } else if (t.recalled && t.waiters > 0 && t.passes < kMaxLocalPasses) {
            t.passes++;  // to a thread of this cluster (it takes it in LOCK): no flush, no message
            t.passed = true;
        } else if (t.recalled) {
            I.want_return(id, 0);
        }
        flush_now = t.recalled && !t.passed && !kept;
    }
    if (flush_now) return flush();
    I.serve_recalls_after_grace();  // a token kept in its grace that is due now
    return DsmStatus::kOk;
}

// Lock 0's release (it keeps no token: a request at every LOCK, its notices sent back at every
// UNLOCK). Fences used it once and waited for the home's ack here; they are their own exchange now
// (DsmNode::fence), so the release is one-way, as a token's is.
DsmStatus DsmNode::Impl::release(uint32_t id) {
    DsmNode& self = n;
    if (!check_id(self, id, "unlock")) return DsmStatus::kBadArg;
    RtEndpoint& ep = bound_or_die(self, "UNLOCK");
    Impl& I = *this;
    VC at_grant;
    {
        std::lock_guard<std::mutex> g(I.held_mu);
        auto it = I.held.find(id);
        if (it == I.held.end()) {
            set_error("UNLOCK of lock " + std::to_string(id) + ", which no thread of cluster " +
                      std::to_string(self.cluster()) + " holds");
            return DsmStatus::kBadArg;
        }
        at_grant = std::move(it->second);
        I.held.erase(it);
    }
    if (self.flush() != DsmStatus::kOk) return DsmStatus::kRuntime;
    Wr w;
    w.put<uint32_t>(id);
    const VC mine = I.snapshot_vc();
    const uint16_t home = I.home_of_sync(id);
    I.encode_vc(w, mine);
    if (!I.push_intervals(w, I.from_for_home(home, at_grant, mine), mine, home, ep)) {
        set_error("UNLOCK " + std::to_string(id) + ": " + DsmNode::error());
        return DsmStatus::kRuntime;
    }
    if (ep.send(I.service(home), I.h(kHLockRel), RtBytes{w.b.data(), uint32_t(w.b.size())}) != RtStatus::kOk) {
        set_error("UNLOCK " + std::to_string(id) + ": message to its home cluster failed: " + ep.last_error());
        return DsmStatus::kRuntime;
    }
    return DsmStatus::kOk;
}

}  // namespace iccs::dsm
