// ordered.cpp: totally ordered broadcast (see ordered.hpp). Every handler here runs on a
// cluster's service endpoint; the sequencer state lives with the cluster that holds it (cluster 0
// for central, each site's first cluster for rotating and migrating).
#include "ordered.hpp"

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>

namespace iccs::group {

namespace {

struct DataHdr {
    uint16_t cluster, thread;
};
struct OrdHdr {
    uint64_t seq;
    uint16_t cluster, thread;
    uint32_t fwd;  // 1: to a site coordinator, which passes it to the other clusters of its site
};
struct ReqHdr {
    uint64_t site;
    uint64_t req_no;
};
static_assert(sizeof(OrdHdr) == 16 && sizeof(ReqHdr) == 16);

}  // namespace

const char* to_string(Sequencer s) {
    return s == Sequencer::kCentral ? "central" : s == Sequencer::kRotating ? "rotating" : "migrating";
}
bool parse_sequencer(const std::string& s, Sequencer& out) {
    if (s == "central") out = Sequencer::kCentral;
    else if (s == "rotating") out = Sequencer::kRotating;
    else if (s == "migrating") out = Sequencer::kMigrating;
    else return false;
    return true;
}

struct OrderedBcast::Impl {
    Runtime* rt = nullptr;
    Topology topo;
    Sequencer pol = Sequencer::kCentral;
    uint16_t hb = 0;
    std::function<void(const OrderedMsg&)> apply;
    uint16_t me = 0, site = 0;
    mutable std::mutex err_mu;
    std::string err;  // the first error (under err_mu: any thread may fail)
    void set_err(const std::string& e) {
        std::lock_guard<std::mutex> lk(err_mu);
        if (err.empty()) err = e;
    }

    struct Msg {
        uint64_t seq = 0;
        RtAddr from;
        std::vector<uint8_t> data;
    };
    mutable std::mutex mu;
    std::map<uint64_t, Msg> reorder;
    std::deque<Msg> log;  // sequence numbers log_base ..
    uint64_t log_base = 0, next_in = 0;
    std::vector<uint64_t> cursor;
    std::unique_ptr<std::atomic<uint64_t>[]> applied_from;
    std::atomic<uint64_t> delivered{0};

    // sequencer (service thread only)
    uint64_t next_central = 0;
    bool have_token = false, requested = false;
    uint64_t tok_next = 0, my_req = 0;
    std::vector<uint64_t> served, wanted;  // by site
    std::deque<Msg> pending;

    std::atomic<uint64_t> c_sent{0}, c_wan_msgs{0}, c_wan_bytes{0}, c_passes{0}, c_reqs{0}, c_seq{0};
    // per destination site: WAN messages, bytes, and of those the sequenced ones (msgs, bytes)
    std::unique_ptr<std::atomic<uint64_t>[]> c_link;

    uint16_t coord(uint16_t s) const { return topo.clusters_of[s].front(); }
    uint16_t sequencer_cluster() const { return pol == Sequencer::kCentral ? 0 : coord(site); }
    void count(uint16_t dst_cluster, size_t bytes, bool sequenced = false) {
        const uint16_t ds = topo.site_of[dst_cluster];
        if (ds != site) {
            c_wan_msgs.fetch_add(1, std::memory_order_relaxed);
            c_wan_bytes.fetch_add(bytes, std::memory_order_relaxed);
            c_link[4 * ds].fetch_add(1, std::memory_order_relaxed);
            c_link[4 * ds + 1].fetch_add(bytes, std::memory_order_relaxed);
            if (sequenced) {
                c_link[4 * ds + 2].fetch_add(1, std::memory_order_relaxed);
                c_link[4 * ds + 3].fetch_add(bytes, std::memory_order_relaxed);
            }
        }
    }
    // A handler's send (service thread). A failure cannot be handed back to anyone: it is kept
    // (send_failures, last_send_error) and named by the time-out of every thread that waits.
    std::atomic<uint64_t> send_failures{0};
    std::string last_send_error;  // under mu
    RtStatus send(RtEndpoint& ep, uint16_t dst, uint16_t h, RtBytes a, RtBytes b = {}, bool sequenced = false) {
        count(dst, size_t{a.len} + b.len, sequenced);
        const RtStatus st = ep.send(RtAddr{dst, kRtService}, h, a, b);
        if (st != RtStatus::kOk) {
            send_failures.fetch_add(1);
            std::lock_guard<std::mutex> lk(mu);
            last_send_error = std::string("a sequencer's send to cluster ") + std::to_string(dst) + " failed: " +
                              iccs::to_string(st) + " (" + ep.last_error() + ")";
        }
        return st;
    }
    // Why a wait ended in vain: the wait, and the handlers' failed sends if any.
    std::string waited(uint16_t t, const std::string& what, uint64_t timeout_us) {
        std::string e = "ordered broadcast: thread " + std::to_string(me) + "." + std::to_string(t) + " waited " +
                        std::to_string(timeout_us / 1000) + " ms for " + what + " in vain";
        std::lock_guard<std::mutex> lk(mu);
        if (send_failures.load() != 0)
            e += "; " + std::to_string(send_failures.load()) + " sends from handlers failed, the last: " + last_send_error;
        return e;
    }

    // message buffers for reuse (under mu): no allocation per message once warm
    std::vector<std::vector<uint8_t>> spare;
    std::vector<uint8_t> copy_of(std::span<const uint8_t> d) {  // mu held
        std::vector<uint8_t> v;
        if (!spare.empty()) {
            v = std::move(spare.back());
            spare.pop_back();
        }
        v.assign(d.begin(), d.end());
        return v;
    }
    void give_back(std::vector<uint8_t>&& v) {  // mu held
        if (spare.size() < 256) spare.push_back(std::move(v));
    }
    // message seq is next in this cluster's order (mu held)
    void append(uint64_t seq, RtAddr from, std::span<const uint8_t> data) {
        if (apply) apply(OrderedMsg{seq, from, data});
        else log.push_back(Msg{seq, from, copy_of(data)});
        if (from.cluster == me && from.thread < topo.threads) applied_from[from.thread].fetch_add(1);
        ++next_in;
        delivered.fetch_add(1);
    }

    // a sequenced message reaches this cluster
    void on_ord(RtEndpoint& self, const OrdHdr& h, std::span<const uint8_t> data) {
        if (h.fwd) {
            OrdHdr f = h;
            f.fwd = 0;
            for (uint16_t c : topo.clusters_of[site])
                if (c != me) send(self, c, hb + 1, RtBytes{&f, sizeof f}, RtBytes{data.data(), static_cast<uint32_t>(data.size())});
        }
        {
            std::lock_guard<std::mutex> lk(mu);
            if (h.seq < next_in || reorder.count(h.seq)) return;  // never: the runtime delivers once
            if (h.seq == next_in) append(h.seq, RtAddr{h.cluster, h.thread}, data);  // the usual case: in order
            else reorder.emplace(h.seq, Msg{h.seq, RtAddr{h.cluster, h.thread}, copy_of(data)});
            while (!reorder.empty() && reorder.begin()->first == next_in) {
                Msg m = std::move(reorder.begin()->second);
                reorder.erase(reorder.begin());
                append(m.seq, m.from, m.data);
                give_back(std::move(m.data));
            }
        }
        for (uint16_t t = 0; t < topo.threads; ++t) rt->endpoint(t).notify();
    }
    // give the next number and send the message to every site's coordinator
    void number(RtEndpoint& self, RtAddr from, std::span<const uint8_t> data, uint64_t seq) {
        c_seq.fetch_add(1, std::memory_order_relaxed);
        const OrdHdr h{seq, from.cluster, from.thread, 1};
        const RtBytes body{data.data(), static_cast<uint32_t>(data.size())};
        for (uint16_t s = 0; s < topo.sites; ++s)
            if (s != site) send(self, coord(s), hb + 1, RtBytes{&h, sizeof h}, body, true);
        on_ord(self, h, data);  // this site: its coordinator is the sequencer's cluster
    }
    bool outstanding() const {
        for (uint16_t s = 0; s < topo.sites; ++s)
            if (wanted[s] > served[s]) return true;
        return false;
    }
    void pass_token(RtEndpoint& self) {
        if (!have_token || !outstanding()) return;
        uint16_t to = static_cast<uint16_t>((site + 1) % topo.sites);
        if (pol == Sequencer::kMigrating)  // straight to the first site (in ring order) that asked
            for (uint16_t k = 1; k <= topo.sites; ++k) {
                const auto s = static_cast<uint16_t>((site + k) % topo.sites);
                if (wanted[s] > served[s]) {
                    to = s;
                    break;
                }
            }
        if (to == site) return;
        have_token = false;
        c_passes.fetch_add(1, std::memory_order_relaxed);
        std::vector<uint64_t> t(1 + topo.sites);
        t[0] = tok_next;
        std::copy(served.begin(), served.end(), t.begin() + 1);
        send(self, coord(to), hb + 3, RtBytes{t.data(), static_cast<uint32_t>(t.size() * 8)});
    }
};

namespace {

using Impl = OrderedBcast::Impl;

void on_data(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto& I = *static_cast<Impl*>(ctx);
    if (m.data.size() < sizeof(DataHdr)) return;
    DataHdr h;
    std::memcpy(&h, m.data.data(), sizeof h);
    const RtAddr from{h.cluster, h.thread};
    const std::span<const uint8_t> body = m.data.subspan(sizeof h);
    if (I.pol == Sequencer::kCentral) return I.number(self, from, body, I.next_central++);
    if (I.have_token) return I.number(self, from, body, I.tok_next++);
    {
        std::lock_guard<std::mutex> lk(I.mu);
        I.pending.push_back(Impl::Msg{0, from, I.copy_of(body)});
    }
    if (!I.requested) {
        I.requested = true;
        const ReqHdr r{I.site, ++I.my_req};
        I.wanted[I.site] = r.req_no;
        for (uint16_t s = 0; s < I.topo.sites; ++s)
            if (s != I.site) {
                I.c_reqs.fetch_add(1, std::memory_order_relaxed);
                I.send(self, I.coord(s), I.hb + 2, RtBytes{&r, sizeof r});
            }
    }
}
void on_ord(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto& I = *static_cast<Impl*>(ctx);
    if (m.data.size() < sizeof(OrdHdr)) return;
    OrdHdr h;
    std::memcpy(&h, m.data.data(), sizeof h);
    I.on_ord(self, h, m.data.subspan(sizeof h));
}
void on_req(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto& I = *static_cast<Impl*>(ctx);
    if (m.data.size() < sizeof(ReqHdr)) return;
    ReqHdr r;
    std::memcpy(&r, m.data.data(), sizeof r);
    if (r.site >= I.topo.sites) return;
    I.wanted[r.site] = std::max(I.wanted[r.site], r.req_no);
    I.pass_token(self);
}
void on_token(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto& I = *static_cast<Impl*>(ctx);
    if (m.data.size() != (1u + I.topo.sites) * 8u) return;
    std::vector<uint64_t> t(1 + I.topo.sites);
    std::memcpy(t.data(), m.data.data(), m.data.size());
    I.have_token = true;
    I.tok_next = t[0];
    for (uint16_t s = 0; s < I.topo.sites; ++s) I.served[s] = std::max(I.served[s], t[1 + s]);
    while (!I.pending.empty()) {
        Impl::Msg msg = std::move(I.pending.front());
        I.pending.pop_front();
        I.number(self, msg.from, msg.data, I.tok_next++);
        std::lock_guard<std::mutex> lk(I.mu);
        I.give_back(std::move(msg.data));
    }
    if (I.requested) {
        I.served[I.site] = I.my_req;
        I.requested = false;
    }
    I.pass_token(self);
}

}  // namespace

OrderedBcast::OrderedBcast(Runtime& rt, const Topology& topo, Sequencer policy, uint16_t handler_base,
                           std::function<void(const OrderedMsg&)> apply)
    : impl_(std::make_unique<Impl>()) {
    Impl& I = *impl_;
    I.rt = &rt;
    I.topo = topo;
    I.pol = policy;
    I.hb = handler_base;
    I.apply = std::move(apply);
    I.me = rt.cluster();
    I.site = topo.site_of[I.me];
    I.cursor.assign(topo.threads, 0);
    I.applied_from = std::make_unique<std::atomic<uint64_t>[]>(topo.threads);
    I.served.assign(topo.sites, 0);
    I.wanted.assign(topo.sites, 0);
    I.c_link = std::make_unique<std::atomic<uint64_t>[]>(size_t{4} * topo.sites);
    for (size_t i = 0; i < size_t{4} * topo.sites; ++i) I.c_link[i] = 0;
    I.have_token = policy != Sequencer::kCentral && I.me == I.coord(0);  // site 0's sequencer starts with it
    rt.set_handler(handler_base, on_data, &I);
    rt.set_handler(handler_base + 1, on_ord, &I);
    rt.set_handler(handler_base + 2, on_req, &I);
    rt.set_handler(handler_base + 3, on_token, &I);
}
OrderedBcast::~OrderedBcast() = default;

bool OrderedBcast::send(uint16_t t, const void* p, size_t n) {
    Impl& I = *impl_;
    if (n + 64 > I.rt->max_message()) {
        I.set_err("ordered broadcast: a message of " + std::to_string(n) + " bytes (at most " +
                std::to_string(I.rt->max_message() - 64) + ")");
        return false;
    }
    const DataHdr h{I.me, t};
    const uint16_t dst = I.sequencer_cluster();
    I.count(dst, sizeof h + n);
    I.c_sent.fetch_add(1, std::memory_order_relaxed);
    RtEndpoint& ep = I.rt->endpoint(t);
    const RtStatus s = ep.send(RtAddr{dst, kRtService}, I.hb, RtBytes{&h, sizeof h}, RtBytes{p, static_cast<uint32_t>(n)});
    if (s != RtStatus::kOk) {
        I.set_err(std::string("ordered broadcast: send to the sequencer (cluster ") + std::to_string(dst) + ") failed: " +
                iccs::to_string(s) + " (" + ep.last_error() + ")");
        return false;
    }
    return true;
}

bool OrderedBcast::deliver(uint16_t t, std::vector<uint8_t>& out, RtAddr* from, uint64_t* seq, uint64_t timeout_us) {
    Impl& I = *impl_;
    RtEndpoint& ep = I.rt->endpoint(t);
    auto ready = [&] {
        std::lock_guard<std::mutex> lk(I.mu);
        return I.cursor[t] < I.next_in;
    };
    if (!ready() && (ep.wait_until(ready, timeout_us) != RtStatus::kOk || !ready())) {
        I.set_err(I.waited(t, "message " + std::to_string(I.cursor[t]), timeout_us));
        return false;
    }
    std::lock_guard<std::mutex> lk(I.mu);
    if (I.apply) {
        I.set_err("ordered broadcast: deliver() on an instance whose messages are applied (a replicated object)");
        return false;
    }
    const Impl::Msg& m = I.log[I.cursor[t] - I.log_base];
    out = m.data;
    if (from) *from = m.from;
    if (seq) *seq = m.seq;
    ++I.cursor[t];
    const uint64_t low = *std::min_element(I.cursor.begin(), I.cursor.end());
    while (I.log_base < low) {  // every thread has read it
        I.give_back(std::move(I.log.front().data));
        I.log.pop_front();
        ++I.log_base;
    }
    return true;
}

bool OrderedBcast::wait_delivered(uint16_t t, uint64_t count, uint64_t timeout_us) {
    Impl& I = *impl_;
    if (I.rt->endpoint(t).wait_until([&] { return I.delivered.load() >= count; }, timeout_us) == RtStatus::kOk) return true;
    I.set_err(I.waited(t, std::to_string(count) + " messages at this cluster (" + std::to_string(I.delivered.load()) + " came)",
                     timeout_us));
    return false;
}
uint64_t OrderedBcast::applied_from(uint16_t t) const { return impl_->applied_from[t].load(); }
Sequencer OrderedBcast::policy() const { return impl_->pol; }
std::string OrderedBcast::last_error() const {
    std::lock_guard<std::mutex> lk(impl_->err_mu);
    return impl_->err;
}
OrderedCounters OrderedBcast::counters() const {
    const Impl& I = *impl_;
    OrderedCounters c;
    c.sent = I.c_sent.load();
    c.delivered_to_cluster = I.delivered.load();
    c.wan_msgs = I.c_wan_msgs.load();
    c.wan_bytes = I.c_wan_bytes.load();
    c.token_passes = I.c_passes.load();
    c.requests = I.c_reqs.load();
    c.sequenced_here = I.c_seq.load();
    c.to_site.resize(I.topo.sites);
    for (uint16_t d = 0; d < I.topo.sites; ++d)
        c.to_site[d] = {I.c_link[4 * d].load(), I.c_link[4 * d + 1].load(), I.c_link[4 * d + 2].load(),
                        I.c_link[4 * d + 3].load()};
    return c;
}

bool OrderedBcast::wait_applied(uint16_t t, uint64_t want, uint64_t timeout_us) {
    Impl& I = *impl_;
    if (I.rt->endpoint(t).wait_until([&] { return I.applied_from[t].load() >= want; }, timeout_us) == RtStatus::kOk)
        return true;
    I.set_err(I.waited(t, "its message " + std::to_string(want) + " to be applied here", timeout_us));
    return false;
}

}  // namespace iccs::group
