// dsm_conds.cpp: GETSUB counters, flags (PAUSE) and condition variables: their managers at the id's
// home (id mod C, run by its service thread, or on the calling thread when the home is its own
// cluster) and the calls of the PARMACS macros. The locks they use are dsm_sync.cpp's.
#include <cstring>
#include <string>

#include "dsm_impl.hpp"

namespace iccs::dsm {

namespace {

void h_getsub(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto& I = *static_cast<DsmNode::Impl*>(ctx);
    Rd r(m.data.data(), m.data.size());
    const uint32_t id = r.get<uint32_t>();
    const int64_t last = r.get<int64_t>(), nproc = r.get<int64_t>();
    std::lock_guard<std::mutex> hg(I.home_mu);
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

// What a flag or condition message names: its sync id and the operation.
struct IdOp {
    uint32_t id;
    uint8_t op;
};
IdOp id_and_op(const AmMsg& m) {
    Rd r(m.data.data(), m.data.size());
    const uint32_t id = r.get<uint32_t>();
    return {id, r.get<uint8_t>()};
}

void h_flag(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto& I = *static_cast<DsmNode::Impl*>(ctx);
    const auto [id, op] = id_and_op(m);
    std::lock_guard<std::mutex> hg(I.home_mu);
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
    const auto [id, op] = id_and_op(m);
    std::lock_guard<std::mutex> hg(I.home_mu);
    SyncObj& o = I.objs[id];
    auto& ws = o.cond;
    switch (op) {
        case 0:  // register (before the waiter releases its lock, so no signal is lost)
            ws.push_back(CondWaiter{m.src, false, false, {}});
            if (m.req_id) self.reply(m.token(), {});  // made on the home itself (cond_here): no reply
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
            if (m.req_id) self.reply(m.token(), {});  // a signal is one-way (DsmNode::cond_signal)
        }
    }
}

}  // namespace

void register_cond_handlers(DsmNode::Impl& I) {
    I.rt.set_handler(I.h(kHGetsub), h_getsub, &I);
    I.rt.set_handler(I.h(kHFlag), h_flag, &I);
    I.rt.set_handler(I.h(kHCond), h_cond, &I);
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

// A condition variable's register or signal whose home is this cluster runs on the home's manager
// here, under home_mu, on the calling thread (as a lock's request does: "A lock homed at the
// thread's own cluster"), instead of a message to this cluster's own service thread and a wake-up
// of it (barnes broadcasts once per cell it finishes and waits for the other cluster's cells: half
// of those ids are homed at each cluster). Neither needs an answer: the registration is in the
// home's list once this returns, before the waiter releases its lock, and a signal reaches every
// waiter registered before it (a blocked one is answered from this thread's endpoint, as any
// endpoint of the cluster that received its request may). False when the home is elsewhere.
bool cond_here(DsmNode::Impl& I, RtEndpoint& ep, uint32_t cv, uint8_t op) {
    if (I.home_of_sync(cv) != I.n.cluster()) return false;
    Wr w;
    w.put<uint32_t>(cv);
    w.put<uint8_t>(op);
    const AmMsg m{ep.self(), I.h(kHCond), 0, std::span<const uint8_t>(w.b.data(), w.b.size())};
    h_cond(ep, m, &I);
    return true;
}
}  // namespace

// A flag's value lives at the id's home; the id's lock orders the data around it: set = release,
// wait = (flag seen, then) acquire.
// SETPAUSE publishes: it flushes after its release, so the waiter's acquire of the id's lock gets
// the token back from the service thread at once.
namespace {
// SETPAUSE (value 1) and CLEARPAUSE (0): the value set at the home under the id's lock, then the
// release flushed.
DsmStatus flag_write(DsmNode& n, DsmNode::Impl& I, uint32_t id, uint8_t value, const char* what) {
    if (!check_id(n, id, (std::string(what) + " flag").c_str())) return DsmStatus::kBadArg;
    DsmStatus s = n.lock(id);
    if (s == DsmStatus::kOk) s = simple_req(n, I, kHFlag, id, value, what);
    DsmStatus u = n.unlock(id);
    if (u == DsmStatus::kOk) u = n.flush();
    return s != DsmStatus::kOk ? s : u;
}
}  // namespace

DsmStatus DsmNode::flag_set(uint32_t id) { return flag_write(*this, *impl_, id, 1, "SETPAUSE"); }

DsmStatus DsmNode::flag_clear(uint32_t id) { return flag_write(*this, *impl_, id, 0, "CLEARPAUSE"); }

DsmStatus DsmNode::flag_wait(uint32_t id) {
    if (!check_id(*this, id, "WAITPAUSE flag")) return DsmStatus::kBadArg;
    impl_->flush_if_released();  // the setter may wait for a lock released here
    DsmStatus s = simple_req(*this, *impl_, kHFlag, id, 2, "WAITPAUSE");
    if (s != DsmStatus::kOk) return s;
    // The setter released the id's lock after setting: acquiring it brings the setter's writes.
    s = lock(id);
    if (s != DsmStatus::kOk) return s;
    return unlock(id);
}

DsmStatus DsmNode::cond_wait(uint32_t cv, uint32_t lk) {
    if (!check_id(*this, cv, "condition variable") || !check_id(*this, lk, "lock")) return DsmStatus::kBadArg;
    DsmStatus s = DsmStatus::kOk;
    if (!cond_here(*impl_, bound_or_die(*this, "CONDVARWAIT"), cv, 0) &&
        (s = simple_req(*this, *impl_, kHCond, cv, 0, "CONDVARWAIT")) != DsmStatus::kOk)
        return s;
    if ((s = unlock(lk)) != DsmStatus::kOk) return s;
    impl_->flush_if_released();  // the signaller may wait for a lock released here (lk among them)
    if ((s = simple_req(*this, *impl_, kHCond, cv, 1, "CONDVARWAIT")) != DsmStatus::kOk) return s;
    ctr_.cond_ops.fetch_add(2, std::memory_order_relaxed);
    return lock(lk);
}

// One-way: the signaller does not wait for the home (barnes broadcasts once per cell of its tree,
// with the cell's lock held: a round trip each, about 5,900 a cluster a run). No waiter misses it:
// a waiter's registration is acked before it releases the lock the signaller holds, so it is at
// the home first. A thread that registers after the signal (in the lock's order) may get there
// before it and be woken by it: a spurious wakeup, which condition variables allow (pthreads too:
// the waiter re-checks its condition in a loop).
DsmStatus DsmNode::cond_signal(uint32_t cv, bool all) {
    if (!check_id(*this, cv, "condition variable")) return DsmStatus::kBadArg;
    const char* what = all ? "CONDVARBCAST" : "CONDVARSIGNAL";
    RtEndpoint& ep = bound_or_die(*this, what);
    Impl& I = *impl_;
    ctr_.cond_ops.fetch_add(1, std::memory_order_relaxed);
    if (cond_here(I, ep, cv, all ? 3 : 2)) return DsmStatus::kOk;
    Wr w;
    w.put<uint32_t>(cv);
    w.put<uint8_t>(all ? 3 : 2);
    if (ep.send(I.service(I.home_of_sync(cv)), I.h(kHCond), RtBytes{w.b.data(), uint32_t(w.b.size())}) !=
        RtStatus::kOk) {
        set_error(std::string(what) + " " + std::to_string(cv) + ": message to its home cluster failed: " +
                  ep.last_error());
        return DsmStatus::kRuntime;
    }
    return DsmStatus::kOk;
}

}  // namespace iccs::dsm
