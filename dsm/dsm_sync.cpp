// dsm_sync.cpp: release-consistent synchronization. Every sync id has a home cluster (id mod C)
// whose service thread runs its manager: a lock queue whose grant carries the lock's knowledge
// (a vector time and the write notices the acquirer lacks), barriers that merge the arriving
// clusters' notices, get-next-index counters, flags and condition variables.
#include <cinttypes>
#include <cstdio>

#include "dsm_impl.hpp"

namespace iccs::dsm {

namespace {

bool check_id(const DsmNode& n, uint32_t id, const char* what) {
    if (id < n.config().max_sync_ids) return true;
    set_error(std::string(what) + " id " + std::to_string(id) + " is out of range (0 .. " +
              std::to_string(n.config().max_sync_ids - 1) + ")");
    return false;
}

// ---- home side ---------------------------------------------------------------------------------

void grant(DsmNode::Impl& I, RtEndpoint& self, SyncObj& o, const ReplyToken& tok, const VC& acq) {
    Wr w;
    VC lock_vc = o.vc.empty() ? VC(I.n.clusters(), 0) : o.vc;
    I.encode_vc(w, lock_vc);
    VC from = acq;
    for (size_t c = 0; c < from.size(); c++)
        if (from[c] > lock_vc[c]) from[c] = lock_vc[c];
    I.encode_intervals(w, from, lock_vc);
    o.held = true;
    self.reply(tok, RtBytes{w.b.data(), uint32_t(w.b.size())});
}

void h_lock_acq(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto& I = *static_cast<DsmNode::Impl*>(ctx);
    Rd r(m.data.data(), m.data.size());
    const uint32_t id = r.get<uint32_t>();
    VC acq = I.decode_vc(r);
    SyncObj& o = I.objs[id];
    if (o.held) o.queue.emplace_back(m.token(), std::move(acq));
    else grant(I, self, o, m.token(), acq);
}

void h_lock_rel(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto& I = *static_cast<DsmNode::Impl*>(ctx);
    Rd r(m.data.data(), m.data.size());
    const uint32_t id = r.get<uint32_t>();
    VC rel = I.decode_vc(r);
    if (!I.store_intervals(r)) {
        fprintf(stderr, "iccs dsm: cluster %u: malformed release of lock %u from cluster %u\n", unsigned(I.n.cluster()),
                id, unsigned(m.src.cluster));
    }
    SyncObj& o = I.objs[id];
    if (o.vc.empty()) o.vc.assign(I.n.clusters(), 0);
    for (size_t c = 0; c < o.vc.size(); c++) o.vc[c] = std::max(o.vc[c], rel[c]);
    o.held = false;
    if (m.req_id) self.reply(m.token(), {});  // a fence's release: the releaser waits for this
    if (!o.queue.empty()) {
        auto [tok, acq] = std::move(o.queue.front());
        o.queue.pop_front();
        grant(I, self, o, tok, acq);
    }
}

void h_barrier(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto& I = *static_cast<DsmNode::Impl*>(ctx);
    Rd r(m.data.data(), m.data.size());
    const uint32_t id = r.get<uint32_t>();
    const uint16_t expect = r.get<uint16_t>();
    VC v = I.decode_vc(r);
    I.store_intervals(r);
    SyncObj& o = I.objs[id];
    if (o.bar_vc.empty()) o.bar_vc.assign(I.n.clusters(), 0);
    if (o.bar_arrived.empty()) o.bar_expect = expect;
    else if (o.bar_expect != expect)
        fprintf(stderr, "iccs dsm: barrier %u: cluster %u expects %u clusters, an earlier one %u\n", id,
                unsigned(m.src.cluster), unsigned(expect), unsigned(o.bar_expect));
    for (size_t c = 0; c < v.size(); c++) o.bar_vc[c] = std::max(o.bar_vc[c], v[c]);
    o.bar_arrived.emplace_back(m.token(), std::move(v));
    if (o.bar_arrived.size() < o.bar_expect) return;
    for (auto& [tok, arr] : o.bar_arrived) {
        Wr w;
        I.encode_vc(w, o.bar_vc);
        I.encode_intervals(w, arr, o.bar_vc);
        self.reply(tok, RtBytes{w.b.data(), uint32_t(w.b.size())});
    }
    o.bar_arrived.clear();
}

void h_getsub(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto& I = *static_cast<DsmNode::Impl*>(ctx);
    Rd r(m.data.data(), m.data.size());
    const uint32_t id = r.get<uint32_t>();
    const int64_t last = r.get<int64_t>(), nproc = r.get<int64_t>();
    SyncObj& o = I.objs[id];
    int64_t s;
    if (o.sub <= last) {
        s = o.sub++;
    } else {
        s = -1;
        // Every participant saw the end: the counter is reusable (SPLASH-2's GETSUB resets too).
        if (++o.seen_exhausted >= nproc) {
            o.sub = 0;
            o.seen_exhausted = 0;
        }
    }
    self.reply(m.token(), RtBytes{&s, sizeof s});
}

void h_flag(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto& I = *static_cast<DsmNode::Impl*>(ctx);
    Rd r(m.data.data(), m.data.size());
    const uint32_t id = r.get<uint32_t>();
    const uint8_t op = r.get<uint8_t>();
    SyncObj& o = I.objs[id];
    if (op == 2) {  // wait
        if (o.flag) self.reply(m.token(), {});
        else o.flag_waiters.push_back(m.token());
        return;
    }
    o.flag = (op == 1);
    if (o.flag) {
        for (auto& t : o.flag_waiters) self.reply(t, {});
        o.flag_waiters.clear();
    }
    self.reply(m.token(), {});
}

void h_cond(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto& I = *static_cast<DsmNode::Impl*>(ctx);
    Rd r(m.data.data(), m.data.size());
    const uint32_t id = r.get<uint32_t>();
    const uint8_t op = r.get<uint8_t>();
    SyncObj& o = I.objs[id];
    auto& ws = o.cond;
    switch (op) {
        case 0:  // register (before the waiter releases its lock, so no signal is lost)
            ws.push_back(CondWaiter{m.src, false, false, {}});
            self.reply(m.token(), {});
            return;
        case 1: {  // block until signaled
            for (size_t i = 0; i < ws.size(); i++) {
                if (!(ws[i].who == m.src) || ws[i].blocked) continue;
                if (ws[i].signaled) {
                    ws.erase(ws.begin() + long(i));
                    self.reply(m.token(), {});
                } else {
                    ws[i].blocked = true;
                    ws[i].tok = m.token();
                }
                return;
            }
            self.reply(m.token(), {});  // not registered: do not hang
            return;
        }
        default: {  // 2 signal one, 3 broadcast
            for (size_t i = 0; i < ws.size();) {
                if (ws[i].signaled) {
                    i++;
                    continue;
                }
                if (ws[i].blocked) {
                    self.reply(ws[i].tok, {});
                    ws.erase(ws.begin() + long(i));
                } else {
                    ws[i].signaled = true;
                    i++;
                }
                if (op == 2) break;
            }
            self.reply(m.token(), {});
        }
    }
}

}  // namespace

void register_sync_handlers(DsmNode::Impl& I) {
    I.rt.set_handler(I.h(kHLockAcq), h_lock_acq, &I);
    I.rt.set_handler(I.h(kHLockRel), h_lock_rel, &I);
    I.rt.set_handler(I.h(kHBarrier), h_barrier, &I);
    I.rt.set_handler(I.h(kHGetsub), h_getsub, &I);
    I.rt.set_handler(I.h(kHFlag), h_flag, &I);
    I.rt.set_handler(I.h(kHCond), h_cond, &I);
}

// ---- client side -------------------------------------------------------------------------------

DsmStatus DsmNode::lock(uint32_t id) {
    if (!check_id(*this, id, "lock")) return DsmStatus::kBadArg;
    RtEndpoint& ep = bound_or_die(*this, "LOCK");
    Impl& I = *impl_;
    const uint64_t t0 = now_ns();
    Wr w;
    w.put<uint32_t>(id);
    I.encode_vc(w, I.snapshot_vc());
    std::vector<uint8_t> reply;
    if (ep.request(I.service(I.home_of_sync(id)), I.h(kHLockAcq), RtBytes{w.b.data(), uint32_t(w.b.size())}, {},
                   reply) != RtStatus::kOk) {
        set_error("LOCK " + std::to_string(id) + ": request to its home cluster failed: " + ep.last_error());
        return DsmStatus::kRuntime;
    }
    Rd r(reply.data(), reply.size());
    VC lock_vc = I.decode_vc(r);
    if (!I.apply(lock_vc, r, ep, I.home_of_sync(id))) return DsmStatus::kRuntime;
    I.home_holds(I.home_of_sync(id), lock_vc);  // the grant came from the home's store
    {
        std::lock_guard<std::mutex> g(I.held_mu);
        I.held[id] = std::move(lock_vc);
    }
    ctr_.lock_acquires.fetch_add(1, std::memory_order_relaxed);
    ctr_.lock_wait_ns.fetch_add(now_ns() - t0, std::memory_order_relaxed);
    return DsmStatus::kOk;
}

DsmStatus DsmNode::unlock(uint32_t id) { return impl_->release(id, false); }

// `wait`: the release is a request, done when the home has the notices (fences need this: a
// thread that sees a value written after the fence and then acquires must get them).
DsmStatus DsmNode::Impl::release(uint32_t id, bool wait) {
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
    const RtBytes msg{w.b.data(), uint32_t(w.b.size())};
    std::vector<uint8_t> ack;
    const RtStatus st = wait ? ep.request(I.service(I.home_of_sync(id)), I.h(kHLockRel), msg, {}, ack)
                             : ep.send(I.service(I.home_of_sync(id)), I.h(kHLockRel), msg);
    if (st != RtStatus::kOk) {
        set_error("UNLOCK " + std::to_string(id) + ": message to its home cluster failed: " + ep.last_error());
        return DsmStatus::kRuntime;
    }
    if (wait) I.home_holds(home, mine);  // acked: stored at the home
    return DsmStatus::kOk;
}

DsmStatus DsmNode::barrier(uint32_t id, uint16_t local, uint16_t nclusters) {
    if (!check_id(*this, id, "barrier")) return DsmStatus::kBadArg;
    RtEndpoint& ep = bound_or_die(*this, "BARRIER");
    Impl& I = *impl_;
    if (local == 0) local = I.rt.threads();
    if (nclusters == 0) nclusters = clusters_;
    const uint64_t t0 = now_ns();
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
        // The cluster's threads are all here: one flush and one exchange for all of them.
        if (flush() != DsmStatus::kOk) st = DsmStatus::kRuntime;
        if (b->last.empty()) b->last.assign(clusters_, 0);
        Wr w;
        w.put<uint32_t>(id);
        w.put<uint16_t>(nclusters);
        const VC mine = I.snapshot_vc();
        I.encode_vc(w, mine);
        VC from = b->last;
        for (size_t c = 0; c < from.size(); c++) from[c] = std::min(from[c], mine[c]);
        if (st == DsmStatus::kOk && !I.push_intervals(w, I.from_for_home(I.home_of_sync(id), from, mine), mine,
                                                      I.home_of_sync(id), ep)) {
            set_error("BARRIER " + std::to_string(id) + ": " + DsmNode::error());
            st = DsmStatus::kRuntime;
        }
        std::vector<uint8_t> reply;
        if (st == DsmStatus::kOk &&
            ep.request(I.service(I.home_of_sync(id)), I.h(kHBarrier), RtBytes{w.b.data(), uint32_t(w.b.size())}, {},
                       reply) != RtStatus::kOk) {
            set_error("BARRIER " + std::to_string(id) + ": exchange with its home cluster failed: " + ep.last_error());
            st = DsmStatus::kRuntime;
        }
        if (st == DsmStatus::kOk) {
            Rd r(reply.data(), reply.size());
            VC merged = I.decode_vc(r);
            if (!I.apply(merged, r, ep, I.home_of_sync(id))) st = DsmStatus::kRuntime;
            I.home_holds(I.home_of_sync(id), merged);  // the reply came from the home's store
            b->last = std::move(merged);
        }
        b->gen.fetch_add(1, std::memory_order_release);
    } else {
        spin_wait(&ep, [&] { return b->gen.load(std::memory_order_acquire) != gen; });
    }
    ctr_.barriers.fetch_add(1, std::memory_order_relaxed);
    ctr_.barrier_wait_ns.fetch_add(now_ns() - t0, std::memory_order_relaxed);
    return st;
}

DsmStatus DsmNode::getsub(uint32_t id, int64_t last, int64_t nproc, int64_t& s) {
    if (!check_id(*this, id, "GETSUB counter")) return DsmStatus::kBadArg;
    RtEndpoint& ep = bound_or_die(*this, "GETSUB");
    Impl& I = *impl_;
    Wr w;
    w.put<uint32_t>(id);
    w.put<int64_t>(last);
    w.put<int64_t>(nproc);
    std::vector<uint8_t> reply;
    // Ordered: the id's lock (same home) around the request, so the indices are handed out in the
    // lock's FIFO order and each taker acquires what the earlier takers released.
    if (cfg_.getsub_orders)
        if (const DsmStatus st = lock(id); st != DsmStatus::kOk) return st;
    if (ep.request(I.service(I.home_of_sync(id)), I.h(kHGetsub), RtBytes{w.b.data(), uint32_t(w.b.size())}, {}, reply) !=
            RtStatus::kOk ||
        reply.size() != 8) {
        set_error("GETSUB " + std::to_string(id) + ": request to its home cluster failed: " + ep.last_error());
        return DsmStatus::kRuntime;
    }
    std::memcpy(&s, reply.data(), 8);
    if (cfg_.getsub_orders)
        if (const DsmStatus st = unlock(id); st != DsmStatus::kOk) return st;
    ctr_.getsubs.fetch_add(1, std::memory_order_relaxed);
    return DsmStatus::kOk;
}

namespace {
DsmStatus simple_req(DsmNode& n, DsmNode::Impl& I, uint16_t handler, uint32_t id, uint8_t op, const char* what) {
    RtEndpoint& ep = bound_or_die(n, what);
    Wr w;
    w.put<uint32_t>(id);
    w.put<uint8_t>(op);
    std::vector<uint8_t> reply;
    if (ep.request(I.service(I.home_of_sync(id)), I.h(handler), RtBytes{w.b.data(), uint32_t(w.b.size())}, {}, reply) !=
        RtStatus::kOk) {
        set_error(std::string(what) + " " + std::to_string(id) + ": request to its home cluster failed: " +
                  ep.last_error());
        return DsmStatus::kRuntime;
    }
    return DsmStatus::kOk;
}
}  // namespace

// A flag's value lives at the id's home; the id's lock orders the data around it: set = release,
// wait = (flag seen, then) acquire.
DsmStatus DsmNode::flag_set(uint32_t id) {
    if (!check_id(*this, id, "SETPAUSE flag")) return DsmStatus::kBadArg;
    DsmStatus s = lock(id);
    if (s == DsmStatus::kOk) s = simple_req(*this, *impl_, kHFlag, id, 1, "SETPAUSE");
    DsmStatus u = unlock(id);
    return s != DsmStatus::kOk ? s : u;
}

DsmStatus DsmNode::flag_clear(uint32_t id) {
    if (!check_id(*this, id, "CLEARPAUSE flag")) return DsmStatus::kBadArg;
    DsmStatus s = lock(id);
    if (s == DsmStatus::kOk) s = simple_req(*this, *impl_, kHFlag, id, 0, "CLEARPAUSE");
    DsmStatus u = unlock(id);
    return s != DsmStatus::kOk ? s : u;
}

DsmStatus DsmNode::flag_wait(uint32_t id) {
    if (!check_id(*this, id, "WAITPAUSE flag")) return DsmStatus::kBadArg;
    DsmStatus s = simple_req(*this, *impl_, kHFlag, id, 2, "WAITPAUSE");
    if (s != DsmStatus::kOk) return s;
    // The setter released the id's lock after setting: acquiring it brings the setter's writes.
    s = lock(id);
    if (s != DsmStatus::kOk) return s;
    return unlock(id);
}

DsmStatus DsmNode::cond_wait(uint32_t cv, uint32_t lk) {
    if (!check_id(*this, cv, "condition variable") || !check_id(*this, lk, "lock")) return DsmStatus::kBadArg;
    DsmStatus s = simple_req(*this, *impl_, kHCond, cv, 0, "CONDVARWAIT");
    if (s != DsmStatus::kOk) return s;
    if ((s = unlock(lk)) != DsmStatus::kOk) return s;
    if ((s = simple_req(*this, *impl_, kHCond, cv, 1, "CONDVARWAIT")) != DsmStatus::kOk) return s;
    return lock(lk);
}

DsmStatus DsmNode::cond_signal(uint32_t cv, bool all) {
    if (!check_id(*this, cv, "condition variable")) return DsmStatus::kBadArg;
    return simple_req(*this, *impl_, kHCond, cv, all ? 3 : 2, all ? "CONDVARBCAST" : "CONDVARSIGNAL");
}

DsmStatus DsmNode::fence() {
    DsmStatus s = lock(0);
    if (s != DsmStatus::kOk) return s;
    return impl_->release(0, true);
}

}  // namespace iccs::dsm
