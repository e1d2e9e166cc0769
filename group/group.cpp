// group.cpp: the World, a thread's message layer (segments, tagged mailbox,
// time-outs, argument checks) and the collectives' entry points, which check their arguments and
// hand over to flat.cpp or hier.cpp.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "clock.hpp"
#include "group_impl.hpp"

namespace iccs::group {

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}
uint64_t mix_counts(uint64_t h, std::span<const uint32_t> c) {
    for (uint32_t x : c) h = mix(h, x);
    return mix(h, c.size());
}

void on_segment_am(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto* w = static_cast<World::Impl*>(ctx);
    const uint16_t t = self.self().thread;
    if (t >= w->th.size() || m.data.size() < sizeof(SegHdr)) return;  // never addressed so by this layer
    SegHdr h;
    std::memcpy(&h, m.data.data(), sizeof h);
    w->th[t]->on_segment(h, m.data.data() + sizeof h, m.data.size() - sizeof h);
}

}  // namespace

// --- World ----------------------------------------------------------------------------------------

World::World(Runtime& rt, const Topology& topo, const Options& o) : impl_(std::make_unique<Impl>(rt.threads())) {
    impl_->rt = &rt;
    impl_->topo = topo;
    impl_->opt = o;
    const uint32_t limit = rt.max_message() - static_cast<uint32_t>(sizeof(SegHdr));
    impl_->seg_payload = std::max<uint32_t>(1, std::min<uint32_t>(o.segment_bytes ? o.segment_bytes : limit, limit));
    impl_->max_payload = limit;
    for (uint16_t t = 0; t < rt.threads(); ++t) {
        auto g = std::make_unique<GroupImpl>();
        g->w = impl_.get();
        g->ep = &rt.endpoint(t);
        g->cluster = rt.cluster();
        g->thread = t;
        g->me = uint32_t{rt.cluster()} * rt.threads() + t;
        g->ctr.sites = topo.sites;
        g->ctr.link.assign(size_t{topo.sites} * topo.sites, {});
        g->api.impl_ = g.get();
        impl_->th.push_back(std::move(g));
    }
    rt.set_handler(o.handler_base, on_segment_am, impl_.get());
}
World::~World() = default;
Group& World::group(uint16_t thread) { return impl_->th.at(thread)->api; }
const Topology& World::topology() const { return impl_->topo; }
const Options& World::options() const { return impl_->opt; }
Counters World::counters() const {
    Counters c;
    c.sites = impl_->topo.sites;
    c.link.assign(size_t{c.sites} * c.sites, {});
    for (const auto& g : impl_->th) c.add(g->ctr);
    return c;
}

size_t World::pending_messages() const {
    size_t n = 0;
    for (const auto& g : impl_->th) n += g->mailbox.size();
    return n;
}
uint64_t World::bad_segments() const {
    uint64_t n = 0;
    for (const auto& g : impl_->th) n += g->bad_segments;
    return n;
}

// --- a thread's message layer ---------------------------------------------------------------------

const Topology& GroupImpl::topo() const { return w->topo; }
ClusterLocal& GroupImpl::local() { return w->local; }
std::string GroupImpl::who(uint32_t rank) const {
    const uint16_t T = w->topo.threads;
    return "thread " + std::to_string(rank / T) + "." + std::to_string(rank % T);
}
std::string GroupImpl::call_name() const { return std::string(to_string(kind)) + " (call " + std::to_string(call) + ")"; }

bool GroupImpl::fail(const std::string& why) {
    if (err.empty()) err = "group: " + call_name() + " on " + who(me) + ": " + why;
    return false;
}

bool GroupImpl::begin(Coll k, uint64_t chk, uint64_t wan_min) {
    if (!err.empty()) return false;
    ++call;
    kind = k;
    check = mix(chk, static_cast<uint64_t>(k));
    hops_in = 0;
    deadline_ns = now_ns() + w->opt.timeout_ms * 1'000'000;
    ++cc().calls;
    cc().wan_bytes_min += wan_min;
    Slot& s = local().slot[thread];
    s.kind = static_cast<uint8_t>(k);
    s.check = check;
    s.call.store(call);
    return true;
}

std::vector<uint8_t> GroupImpl::take(size_t n) {
    std::vector<uint8_t> v;
    if (!spare.empty()) {
        v = std::move(spare.back());
        spare.pop_back();
    }
    v.resize(n);
    return v;
}
void GroupImpl::recycle(std::vector<uint8_t>&& v) {
    if (spare.size() < 64 && v.capacity() != 0) spare.push_back(std::move(v));
}

bool GroupImpl::send_wan(uint32_t dst, uint16_t step, const void* p, size_t n, size_t items) {
    const auto& helpers = topo().clusters_of[topo().site_of_rank(dst)];
    const bool spread_it = spread && helpers.size() >= 2 && n > seg_now;
    return send_segments(dst, step, p, n, items, spread_it ? &helpers : nullptr);
}

bool GroupImpl::send_segments(uint32_t dst, uint16_t step, const void* p, size_t n, size_t items,
                              const std::vector<uint16_t>* via_clusters) {
    const Topology& T = topo();
    if (n > UINT32_MAX) return fail("a message of " + std::to_string(n) + " bytes (4 GiB at most)");
    const bool wan = T.site_of_rank(dst) != T.site_of_rank(me);
    SegHdr h;
    h.call = call;
    h.step = step;
    h.kind = static_cast<uint8_t>(kind);
    h.hops = static_cast<uint8_t>(hops_in + (wan ? 1 : 0));
    h.src = me;
    h.total = static_cast<uint32_t>(n);
    h.check = check;
    const auto* b = static_cast<const uint8_t*>(p);
    uint64_t segs = 0;
    size_t off = 0;
    do {
        const uint32_t len = static_cast<uint32_t>(std::min<size_t>(seg_now, n - off));
        // spread: segment i goes to the leader of the i-th cluster of dst's site, which relays it
        const uint32_t via = via_clusters ? (*via_clusters)[segs % via_clusters->size()] * uint32_t{T.threads} : dst;
        h.offset = static_cast<uint32_t>(off);
        h.relay = via == dst ? 0 : dst + 1;
        const RtAddr to{T.cluster_of_rank(via), static_cast<uint16_t>(via % T.threads)};
        const RtStatus s = ep->send(to, w->opt.handler_base, RtBytes{&h, sizeof h}, RtBytes{b + off, len});
        if (s != RtStatus::kOk)
            return fail(std::string("send to ") + who(via) + " failed: " + iccs::to_string(s) + " (" + ep->last_error() + ")");
        off += len;
        ++segs;
    } while (off < n);
    CollCounters& c = cc();
    c.msgs += segs;
    c.bytes += n;
    if (wan) {
        c.wan_msgs += segs;
        c.wan_bytes += items;
        c.wan_hops_max = std::max<uint64_t>(c.wan_hops_max, h.hops);
        LinkCounters& l = ctr.link[size_t{T.site_of_rank(me)} * T.sites + T.site_of_rank(dst)];
        l.msgs += segs;
        l.bytes += items;
    }
    return true;
}

void GroupImpl::item_arrived(uint16_t from_site, uint64_t item) {
    ++cc().items_crossed;
    ++ctr.link[size_t{from_site} * topo().sites + topo().site_of_rank(me)].items;
    arrived.push_back(uint64_t{from_site} << 48 ^ item);
}

void GroupImpl::items_audit() {
    if (arrived.empty()) return;
    std::sort(arrived.begin(), arrived.end());
    uint64_t run = 1, most = 1;
    for (size_t i = 1; i < arrived.size(); ++i) {
        run = arrived[i] == arrived[i - 1] ? run + 1 : 1;
        most = std::max(most, run);
    }
    cc().item_crossings_max = std::max(cc().item_crossings_max, most);
    arrived.clear();
}

bool GroupImpl::want_len(uint32_t src, size_t got, size_t want) {
    if (got == want) return true;
    return fail(who(src) + " sent " + std::to_string(got) + " bytes where " + std::to_string(want) +
                " were expected (mismatched sizes or counts)");
}

void GroupImpl::on_segment(const SegHdr& h, const uint8_t* p, size_t n) {
    if (h.src >= topo().ranks() || uint64_t{h.offset} + n > h.total || h.relay > topo().ranks()) {
        ++bad_segments;
        return;
    }
    if (h.relay != 0) {  // a spread WAN segment: on to its coordinator over the LAN
        SegHdr f = h;
        f.relay = 0;
        const uint32_t dst = h.relay - 1;
        const RtAddr to{topo().cluster_of_rank(dst), static_cast<uint16_t>(dst % topo().threads)};
        if (ep->send(to, w->opt.handler_base, RtBytes{&f, sizeof f}, RtBytes{p, static_cast<uint32_t>(n)}) == RtStatus::kOk)
            ++ctr.of(static_cast<Coll>(std::min<uint8_t>(h.kind, static_cast<uint8_t>(Coll::kCount) - 1))).relayed;
        else
            ++bad_segments;
        return;
    }
    const Key key{h.call, h.step, h.src};
    size_t i = find_mail(key);
    if (i == SIZE_MAX) {
        mailbox.push_back(Mail{key, Entry{}});
        i = mailbox.size() - 1;
    }
    Entry& e = mailbox[i].e;
    if (e.data.size() != h.total || e.got == 0) {
        if (e.got != 0) {  // a segment that disagrees with the first one's length
            ++bad_segments;
            return;
        }
        e.data = take(h.total);
        e.kind = h.kind;
        e.check = h.check;
    }
    if (n) std::memcpy(e.data.data() + h.offset, p, n);
    e.got += static_cast<uint32_t>(n);
    e.hops = std::max(e.hops, h.hops);
    if (h.total == 0) e.got = 0;  // complete() holds: got == size == 0
    if (e.kind != h.kind || e.check != h.check) e.check = ~h.check;  // segments of different calls: reported
}

bool GroupImpl::recv(uint32_t src, uint16_t step, std::vector<uint8_t>& out) {
    const Key key{call, step, src};
    // An empty message is complete as soon as its (only) segment made the entry.
    auto have = [&] {
        const size_t i = find_mail(key);
        return i != SIZE_MAX && mailbox[i].e.complete();
    };
    if (!have()) {
        const uint64_t now = now_ns();
        const uint64_t left_us = deadline_ns > now ? (deadline_ns - now) / 1000 : 0;
        const RtStatus s = ep->wait_until(have, left_us);
        if (s != RtStatus::kOk || !have())
            return fail("timed out after " + std::to_string(w->opt.timeout_ms) + " ms waiting for " + who(src) +
                        " (step " + std::to_string(step) + "): " + who(src) +
                        " did not call it, called another collective, or failed");
    }
    const size_t i = find_mail(key);
    Entry& e = mailbox[i].e;
    if (e.kind != static_cast<uint8_t>(kind) || e.check != check) {
        const std::string what = e.kind != static_cast<uint8_t>(kind)
                                     ? std::string("called ") + to_string(static_cast<Coll>(std::min<uint8_t>(e.kind, 10)))
                                     : "called it with different arguments (root, size, counts or operation)";
        recycle(std::move(e.data));
        drop_mail(i);
        return fail(who(src) + " " + what + " in the same place");
    }
    hops_in = std::max(hops_in, e.hops);
    out = std::move(e.data);
    drop_mail(i);
    return true;
}

bool GroupImpl::local_sync() {
    ClusterLocal& L = local();
    const uint16_t T = topo().threads;
    if (T == 1) return true;
    uint64_t g0;
    {
        std::lock_guard<std::mutex> lk(L.mu);
        g0 = L.gen.load();
        if (++L.arrived == T) {
            L.arrived = 0;
            L.gen.store(g0 + 1);
            for (uint16_t t = 0; t < T; ++t)
                if (t != thread) w->rt->endpoint(t).notify();
            return true;
        }
    }
    const uint64_t now = now_ns();
    const uint64_t left_us = deadline_ns > now ? (deadline_ns - now) / 1000 : 0;
    if (ep->wait_until([&] { return L.gen.load() != g0; }, left_us) == RtStatus::kOk) return true;
    std::string missing;
    for (uint16_t t = 0; t < T; ++t)
        if (L.slot[t].call.load() < call) missing += (missing.empty() ? "" : ", ") + who(uint32_t{cluster} * T + t);
    return fail("timed out after " + std::to_string(w->opt.timeout_ms) + " ms waiting for the threads of cluster " +
                std::to_string(cluster) + (missing.empty() ? std::string(" (a thread failed)") : ": " + missing + " did not call it"));
}

// --- the entry points -----------------------------------------------------------------------------

uint32_t Group::rank() const { return impl_->me; }
uint32_t Group::ranks() const { return impl_->topo().ranks(); }
const Topology& Group::topology() const { return impl_->topo(); }
const std::string& Group::last_error() const { return impl_->err; }
const Counters& Group::counters() const { return impl_->ctr; }

namespace {
// The family of this call; the hierarchical one cuts long messages into segments (spread over the
// proxies by the transport), the flat one sends each message whole (up to the runtime's limit).
bool hier(GroupImpl& g, Family f) {
    const bool h = (f == Family::kDefault ? g.w->opt.family : f) == Family::kHier;
    g.seg_now = h ? g.w->seg_payload : g.w->max_payload;
    // spreading needs every leader of a receiving site to wait in the call (to relay): in gather
    // and reduce the root site's other leaders wait for a release from the root's leader
    g.spread = h && g.kind != Coll::kBarrier;
    return h;
}
}  // namespace

bool Group::barrier(Family f) {
    GroupImpl& g = *impl_;
    if (!g.begin(Coll::kBarrier, 0, 0)) return false;
    return hier(g, f) ? hier_barrier(g) : flat_barrier(g);
}

bool Group::bcast_bytes(void* buf, size_t n, uint32_t root, Family f) {
    GroupImpl& g = *impl_;
    const Topology& T = g.topo();
    const uint64_t min = g.me == root ? uint64_t{T.sites - 1u} * n : 0;
    if (!g.begin(Coll::kBcast, mix(mix(root, n), 1), min)) return false;
    if (root >= T.ranks()) return g.fail("root " + std::to_string(root) + " is not a rank (0.." + std::to_string(T.ranks() - 1) + ")");
    if (T.ranks() == 1) return true;
    return hier(g, f) ? hier_bcast(g, static_cast<uint8_t*>(buf), n, root) : flat_bcast(g, static_cast<uint8_t*>(buf), n, root);
}

bool Group::reduce_bytes(Coll kind, const void* in, void* out, size_t count, size_t out_count, const Reduction& r,
                         uint32_t root, Family f) {
    GroupImpl& g = *impl_;
    const Topology& T = g.topo();
    const size_t bytes = count * r.elem;
    uint64_t min = 0;
    if (g.me == 0) {
        const uint64_t S = T.sites;
        if (kind == Coll::kReduce) min = (S - 1) * bytes;
        // every site's partial to every other site: MagPIe's items, no floor (README.md, "Counters and MagPIe's rule")
        else if (kind == Coll::kAllreduce) min = S * (S - 1) * bytes;
        else  // scan: each site needs the partial of every cluster of another site before its last cluster
            for (uint16_t s = 0; s < S; ++s)
                for (uint16_t c = 0; c < T.clusters_of[s].back(); ++c)
                    if (T.site_of[c] != s) min += bytes;
    }
    if (!g.begin(kind, mix(mix(mix(count, r.elem), r.op_id), kind == Coll::kReduce ? root : 0), min)) return false;
    if (kind == Coll::kReduce && root >= T.ranks())
        return g.fail("root " + std::to_string(root) + " is not a rank (0.." + std::to_string(T.ranks() - 1) + ")");
    const bool gets = kind != Coll::kReduce || g.me == root;
    if (gets && out_count < count)
        return g.fail("the output holds " + std::to_string(out_count) + " elements, the input " + std::to_string(count));
    if (r.fn == nullptr || r.elem == 0) return g.fail("no reduction function");
    RedArgs a{kind, static_cast<const uint8_t*>(in), static_cast<uint8_t*>(out), bytes, {}, r, root};
    if (T.ranks() == 1) {
        if (bytes) std::memmove(out, in, bytes);
        return true;
    }
    return hier(g, f) ? hier_reduce(g, a) : flat_reduce(g, a);
}

bool Group::reduce_scatter_bytes(const void* in, size_t in_count, void* out, size_t out_count,
                                 std::span<const uint32_t> counts, const Reduction& r, Family f) {
    GroupImpl& g = *impl_;
    const Topology& T = g.topo();
    const uint64_t total = std::accumulate(counts.begin(), counts.end(), uint64_t{0});
    const uint64_t min = g.me == 0 ? uint64_t{T.sites - 1u} * total * r.elem : 0;
    if (!g.begin(Coll::kReduceScatter, mix(mix_counts(r.elem, counts), r.op_id), min)) return false;
    if (counts.size() != T.ranks())
        return g.fail("counts has " + std::to_string(counts.size()) + " entries for " + std::to_string(T.ranks()) + " ranks");
    if (in_count != total)
        return g.fail("the input holds " + std::to_string(in_count) + " elements, the counts add up to " + std::to_string(total));
    if (out_count < counts[g.me])
        return g.fail("the output holds " + std::to_string(out_count) + " elements, counts[" + std::to_string(g.me) +
                      "] is " + std::to_string(counts[g.me]));
    if (r.fn == nullptr || r.elem == 0) return g.fail("no reduction function");
    RedArgs a{Coll::kReduceScatter, static_cast<const uint8_t*>(in), static_cast<uint8_t*>(out), total * r.elem, {}, r, 0};
    for (uint32_t c : counts) a.block_bytes.push_back(size_t{c} * r.elem);
    if (T.ranks() == 1) {
        if (a.bytes) std::memmove(out, in, a.bytes);
        return true;
    }
    return hier(g, f) ? hier_reduce(g, a) : flat_reduce(g, a);
}

bool Group::move_bytes(Coll kind, const void* in, size_t in_bytes, void* out, size_t out_bytes,
                       std::span<const uint32_t> sendcounts, std::span<const uint32_t> recvcounts, size_t elem,
                       uint32_t root, Family f) {
    GroupImpl& g = *impl_;
    const Topology& T = g.topo();
    const uint32_t P = T.ranks();
    const bool v = !sendcounts.empty() || !recvcounts.empty();
    MoveArgs a{kind, static_cast<const uint8_t*>(in), in_bytes, static_cast<uint8_t*>(out), out_bytes, {}, {}, {}, root};
    uint64_t chk = mix(mix(elem, root), v);
    std::string bad;
    auto need = [&](const char* what, size_t have, size_t want) {
        if (bad.empty() && have < want)
            bad = std::string(what) + " holds " + std::to_string(have) + " bytes, " + std::to_string(want) + " needed";
    };
    auto sum = [](const std::vector<size_t>& x) { return std::accumulate(x.begin(), x.end(), size_t{0}); };
    if (v && (sendcounts.size() != P || recvcounts.size() != P))
        bad = "counts have " + std::to_string(sendcounts.size()) + " entries for " + std::to_string(P) + " ranks";
    if (kind != Coll::kAlltoall && kind != Coll::kAllgather && root >= P && bad.empty())
        bad = "root " + std::to_string(root) + " is not a rank (0.." + std::to_string(P - 1) + ")";
    uint64_t min = 0;
    const uint16_t my_site = T.site_of_rank(g.me);
    if (bad.empty()) switch (kind) {
            case Coll::kGather:
            case Coll::kScatter:
            case Coll::kAllgather: {
                const size_t mine = kind == Coll::kScatter ? out_bytes : in_bytes;
                if (v) {
                    for (uint32_t c : sendcounts) a.all_bytes.push_back(size_t{c} * elem);
                    chk = mix_counts(chk, sendcounts);
                    if (a.all_bytes[g.me] != mine && bad.empty())
                        bad = std::string(kind == Coll::kScatter ? "the output" : "the input") + " holds " +
                              std::to_string(mine) + " bytes, counts[" + std::to_string(g.me) + "] says " +
                              std::to_string(a.all_bytes[g.me]);
                } else {
                    a.all_bytes.assign(P, mine);
                    chk = mix(chk, mine);
                }
                const size_t total = sum(a.all_bytes);
                if (kind == Coll::kGather && g.me == root) need("the output", out_bytes, total);
                if (kind == Coll::kScatter && g.me == root) need("the input", in_bytes, total);
                if (kind == Coll::kAllgather) need("the output", out_bytes, total);
                if (kind == Coll::kGather && my_site != T.site_of_rank(root)) min = a.all_bytes[g.me];
                if (kind == Coll::kScatter && g.me == root)
                    for (uint32_t r = 0; r < P; ++r)
                        if (T.site_of_rank(r) != my_site) min += a.all_bytes[r];
                if (kind == Coll::kAllgather) min = uint64_t{T.sites - 1u} * a.all_bytes[g.me];
                break;
            }
            case Coll::kAlltoall:
                if (v) {
                    for (uint32_t r = 0; r < P; ++r) {
                        a.send_bytes.push_back(size_t{sendcounts[r]} * elem);
                        a.recv_bytes.push_back(size_t{recvcounts[r]} * elem);
                    }
                } else {
                    if (in_bytes % P != 0 && bad.empty())
                        bad = "the input's " + std::to_string(in_bytes) + " bytes are not " + std::to_string(P) + " equal blocks";
                    a.send_bytes.assign(P, in_bytes / P);
                    a.recv_bytes.assign(P, in_bytes / P);
                    chk = mix(chk, in_bytes);
                }
                need("the input", in_bytes, sum(a.send_bytes));
                need("the output", out_bytes, sum(a.recv_bytes));
                for (uint32_t r = 0; r < P; ++r)
                    if (T.site_of_rank(r) != my_site) min += a.send_bytes[r];
                break;
            default:
                bad = "not a data-moving collective";
        }
    if (!g.begin(kind, chk, bad.empty() ? min : 0)) return false;
    if (!bad.empty()) return g.fail(bad);
    if (P == 1) {
        if (kind == Coll::kAlltoall) std::memmove(out, in, a.send_bytes[0]);
        else std::memmove(out, in, a.all_bytes[0]);
        return true;
    }
    return hier(g, f) ? hier_move(g, a) : flat_move(g, a);
}

}  // namespace iccs::group
