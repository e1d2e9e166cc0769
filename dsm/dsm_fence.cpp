// dsm_fence.cpp: fences (RELEASE_FENCE, ACQUIRE_FENCE, FULL_FENCE): one exchange with the home of
// the reserved fence lock (sync id 0), which orders the fences' releases and acquires; no lock
// is taken (dsm/PROTOCOL.md, "Fences").
#include <algorithm>
#include <cstdio>

#include "dsm_impl.hpp"

namespace iccs::dsm {

namespace {

// A fence at the fence lock's home (DsmNode::fence): the sender's notices merged into the fence
// lock's knowledge when it releases; that knowledge and the notices the sender lacks into `reply`
// when it acquires (else `reply` stays empty). The fence lock's holder, if any, is not waited for:
// its release is not ordered before this fence. False when the fence is malformed.
bool fence_at_home(DsmNode::Impl& I, Rd& r, Wr& reply) {
    const uint8_t bits = r.get<uint8_t>();
    const VC v = I.decode_vc(r);
    if (!I.store_intervals(r) || r.bad || v.size() != I.n.clusters()) return false;
    std::lock_guard<std::mutex> hg(I.home_mu);
    SyncObj& o = I.objs[kFenceLock];
    if (o.vc.empty()) o.vc.assign(I.n.clusters(), 0);
    if (bits & kFenceRelease)
        for (size_t c = 0; c < o.vc.size(); c++) o.vc[c] = std::max(o.vc[c], v[c]);
    if (!(bits & kFenceAcquire)) return true;
    I.encode_vc(reply, o.vc);
    VC from = v;
    for (size_t c = 0; c < from.size(); c++) from[c] = std::min(from[c], o.vc[c]);
    I.encode_intervals(reply, from, o.vc);
    return true;
}
}  // namespace

// Another cluster's fence (a request to this home's service thread).
void fence_exchange(DsmNode::Impl& I, RtEndpoint& self, const AmMsg& m, Rd& r) {
    Wr w;
    if (!fence_at_home(I, r, w))
        fprintf(stderr, "iccs dsm: cluster %u: malformed fence from cluster %u\n", unsigned(I.n.cluster()),
                unsigned(m.src.cluster));  // the empty reply: the sender reports a reply it cannot read
    self.reply(m.token(), RtBytes{w.b.data(), uint32_t(w.b.size())});
}

// A fence is one exchange with the fence lock's home and takes no lock: fences need no mutual
// exclusion, only an order of their releases and acquires, which the home's service thread gives
// (a release fence acked before an acquire fence's request arrives is in that acquire's reply).
// Before: an acquire and a release of the fence lock, two round trips, and every fence, an acquire
// fence too, flushed; barnes takes a RELEASE_FENCE inside a cell lock at every leaf it splits
// (about 1,650 a cluster a run), each holding that lock over both round trips.
DsmStatus DsmNode::fence(Fence kind) {
    RtEndpoint& ep = bound_or_die(*this, "FENCE");
    Impl& I = *impl_;
    const auto bits = uint8_t(kind);
    const bool releases = (bits & kFenceRelease) != 0, acquires = (bits & kFenceAcquire) != 0;
    if (releases) {
        if (flush() != DsmStatus::kOk) return DsmStatus::kRuntime;
    } else {
        I.serve_recalls();  // a thread spinning on acquire fences still lets a recalled token go
    }
    const uint16_t home = I.home_of_sync(kFenceLock);
    const VC mine = I.snapshot_vc();
    Wr w;
    w.put<uint32_t>(kFenceExchange);
    w.put<uint8_t>(bits);
    I.encode_vc(w, mine);
    if (!I.push_intervals(w, releases ? I.from_for_home(home, VC(clusters_, 0), mine) : mine, mine, home, ep)) {
        set_error("FENCE: " + DsmNode::error());
        return DsmStatus::kRuntime;
    }
    std::vector<uint8_t> reply;
    if (home == cluster_) {
        // The fence lock's home is this cluster: its manager runs the fence here, under home_mu, as
        // its service thread would (a lock's request does the same, "A lock homed at the thread's
        // own cluster"): not a round trip to this cluster's own service thread, two wake-ups, while
        // barnes holds a cell lock over its RELEASE_FENCE. A fence of another cluster ordered
        // before this one (acked) is in the fence lock's knowledge already; one after it sees it.
        Rd r(w.b.data() + sizeof(uint32_t), w.b.size() - sizeof(uint32_t));  // past kFenceExchange
        Wr here;
        if (!fence_at_home(I, r, here)) {
            set_error("FENCE: malformed on its own home cluster");
            return DsmStatus::kRuntime;
        }
        reply = std::move(here.b);
    } else if (ep.request(I.service(home), I.h(kHLockAcq), RtBytes{w.b.data(), uint32_t(w.b.size())}, {}, reply) !=
               RtStatus::kOk) {
        set_error("FENCE: exchange with the fence lock's home cluster failed: " + ep.last_error());
        return DsmStatus::kRuntime;
    }
    if (releases) I.home_holds(home, mine);  // acked: stored at the home
    if (acquires) {
        Rd r(reply.data(), reply.size());
        const VC fence_vc = I.decode_vc(r);
        if (r.bad || fence_vc.size() != clusters_) {
            set_error("FENCE: malformed reply from the fence lock's home cluster");
            return DsmStatus::kRuntime;
        }
        if (!I.apply(fence_vc, r, ep, home)) return DsmStatus::kRuntime;
        I.home_holds(home, fence_vc);  // the reply came from the home's store
    }
    ctr_.fences.fetch_add(1, std::memory_order_relaxed);
    return DsmStatus::kOk;
}

}  // namespace iccs::dsm
