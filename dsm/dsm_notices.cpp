// dsm_notices.cpp: intervals and write notices. Vector times, the notices on the wire (inline
// when they fit a message, else pushed ahead in acked chunks or pulled by the acquirer), and the
// acquire that invalidates every page another cluster's new interval names.
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>

#include "dsm_impl.hpp"

namespace iccs::dsm {

void DsmNode::Impl::encode_vc(Wr& w, const VC& v) {
    w.put<uint16_t>(uint16_t(v.size()));
    for (uint32_t x : v) w.put<uint32_t>(x);
}

VC DsmNode::Impl::decode_vc(Rd& r) {
    const uint16_t k = r.get<uint16_t>();
    VC v(n.clusters_, 0);
    for (uint16_t i = 0; i < k; i++) {
        const uint32_t x = r.get<uint32_t>();
        if (i < v.size()) v[i] = x;
    }
    return v;
}

VC DsmNode::Impl::snapshot_vc() {
    std::lock_guard<std::mutex> k(know_mu);
    return vc;
}

VC DsmNode::Impl::from_for_home(uint16_t home, VC from, const VC& to) {
    std::lock_guard<std::mutex> k(know_mu);
    for (size_t c = 0; c < from.size(); c++) from[c] = std::min(std::max(from[c], home_has[home][c]), to[c]);
    return from;
}

void DsmNode::Impl::home_holds(uint16_t home, const VC& v) {
    std::lock_guard<std::mutex> k(know_mu);
    for (size_t c = 0; c < v.size(); c++) home_has[home][c] = std::max(home_has[home][c], v[c]);
}

// Write notices on the wire: {u32 count, {u16 cluster, u32 interval, u32 pages, u32 page...}}, or
// the count kNoticesPull followed by VC from, VC to: "too many for this message, pull (from, to]
// from my store" (home -> acquirer). The other direction pushes them ahead (push_intervals). So
// no history makes a sync message outgrow max_message(); only one interval's own page list must
// fit one message (4 bytes a page: about 262000 pages written by one cluster in one interval).
bool DsmNode::Impl::encode_intervals_chunk(Wr& w, const VC& from, const VC& to, NoticeCursor& cur, size_t limit) {
    std::lock_guard<std::mutex> k(know_mu);
    const size_t at = w.b.size();
    w.put<uint32_t>(0);
    if (!cur.started) {
        cur = NoticeCursor{0, from[0] + 1, true};
    }
    uint32_t cnt = 0;
    bool done = true;
    for (; cur.c < n.clusters_ && done; cur.c++, cur.i = cur.c < n.clusters_ ? from[cur.c] + 1 : 0) {
        for (; cur.i <= to[cur.c]; cur.i++) {
            auto it = store[cur.c].find(cur.i);
            if (it == store[cur.c].end())
                fatal("cluster %u: write notices of interval %u of cluster %u are not known here (protocol bug)",
                      unsigned(n.cluster_), cur.i, unsigned(cur.c));
            const size_t need = 10 + it->second.size() * 4;
            if (w.b.size() + need > limit) {
                if (cnt == 0)
                    fatal("cluster %u: the write notices of interval %u of cluster %u (%zu pages) do not fit one "
                          "message of the runtime's max_message() %zu bytes (use a larger ICCS_DSM_PAGE)",
                          unsigned(n.cluster_), cur.i, unsigned(cur.c), it->second.size(), limit);
                done = false;
                break;
            }
            w.put<uint16_t>(cur.c);
            w.put<uint32_t>(cur.i);
            w.put<uint32_t>(uint32_t(it->second.size()));
            w.bytes(it->second.data(), it->second.size() * 4);
            cnt++;
        }
        if (!done) break;
    }
    std::memcpy(w.b.data() + at, &cnt, 4);
    return done;
}

size_t DsmNode::Impl::intervals_bytes(const VC& from, const VC& to) {
    std::lock_guard<std::mutex> k(know_mu);
    size_t b = 4;
    for (uint16_t c = 0; c < n.clusters_; c++)
        for (uint32_t i = from[c] + 1; i <= to[c]; i++) {
            auto it = store[c].find(i);
            b += 10 + (it == store[c].end() ? 0 : it->second.size() * 4);
        }
    return b;
}

void DsmNode::Impl::encode_intervals(Wr& w, const VC& from, const VC& to) {
    const size_t limit = rt.max_message();
    if (w.b.size() + intervals_bytes(from, to) <= limit) {
        NoticeCursor cur;
        encode_intervals_chunk(w, from, to, cur, SIZE_MAX);
        return;
    }
    w.put<uint32_t>(kNoticesPull);
    encode_vc(w, from);
    encode_vc(w, to);
}

void DsmNode::Impl::split_intervals(Wr& w, const VC& from, const VC& to, std::vector<Wr>& ahead) {
    const size_t limit = rt.max_message();
    NoticeCursor cur;
    if (w.b.size() + intervals_bytes(from, to) <= limit) {
        encode_intervals_chunk(w, from, to, cur, SIZE_MAX);
        return;
    }
    for (bool done = false; !done;) done = encode_intervals_chunk(ahead.emplace_back(), from, to, cur, limit);
    w.put<uint32_t>(0);
}

bool DsmNode::Impl::push_intervals(Wr& w, const VC& from, const VC& to, uint16_t home, RtEndpoint& ep) {
    // Ahead of the message, in acked chunks: the home stores them before the message needs them.
    std::vector<Wr> ahead;
    split_intervals(w, from, to, ahead);
    std::vector<uint8_t> ack;
    for (Wr& q : ahead)
        if (ep.request(service(home), h(kHNotices), RtBytes{q.b.data(), uint32_t(q.b.size())}, {}, ack) !=
            RtStatus::kOk) {
            set_error("pushing write notices to cluster " + std::to_string(home) + ": " + ep.last_error());
            return false;
        }
    return true;
}

bool DsmNode::Impl::receive_intervals(Rd& r, uint16_t home, RtEndpoint& ep) {
    Rd peek = r;
    if (peek.get<uint32_t>() != kNoticesPull) {
        if (store_intervals(r)) return true;
        set_error("malformed write notices from cluster " + std::to_string(home));
        return false;
    }
    r.get<uint32_t>();
    const VC from = decode_vc(r), to = decode_vc(r);
    if (r.bad) {
        set_error("malformed write notices from cluster " + std::to_string(home));
        return false;
    }
    NoticeCursor cur;
    std::vector<uint8_t> reply;
    for (;;) {
        Wr q;
        encode_vc(q, from);
        encode_vc(q, to);
        q.put<uint8_t>(cur.started);
        q.put<uint16_t>(cur.c);
        q.put<uint32_t>(cur.i);
        if (ep.request(service(home), h(kHPull), RtBytes{q.b.data(), uint32_t(q.b.size())}, {}, reply) !=
            RtStatus::kOk) {
            set_error("pulling write notices from cluster " + std::to_string(home) + ": " + ep.last_error());
            return false;
        }
        Rd a(reply.data(), reply.size());
        const bool stored = store_intervals(a);
        const uint8_t done = a.get<uint8_t>();
        cur.c = a.get<uint16_t>();
        cur.i = a.get<uint32_t>();
        cur.started = true;
        if (!stored || a.bad) {
            set_error("malformed write notices pulled from cluster " + std::to_string(home));
            return false;
        }
        if (done) return true;
    }
}

void DsmNode::Impl::note_writers(uint16_t c, const uint32_t* list, size_t count) {
    const uint64_t bit = uint64_t(1) << std::min<uint16_t>(c, 63);
    for (size_t k = 0; k < count; k++)
        if (valid_page(list[k])) pages[list[k]].writers.fetch_or(bit, std::memory_order_relaxed);
}

bool DsmNode::Impl::store_intervals(Rd& r) {
    const uint32_t cnt = r.get<uint32_t>();
    std::lock_guard<std::mutex> k(know_mu);
    for (uint32_t j = 0; j < cnt && !r.bad; j++) {
        const uint16_t c = r.get<uint16_t>();
        const uint32_t i = r.get<uint32_t>();
        const uint32_t np = r.get<uint32_t>();
        const uint8_t* d = r.take(size_t(np) * 4);
        if (r.bad || c >= n.clusters_) return false;
        auto& slot = store[c][i];
        if (slot.empty() && np) {
            slot.resize(np);
            std::memcpy(slot.data(), d, size_t(np) * 4);
            note_writers(c, slot.data(), slot.size());
        }
    }
    return !r.bad;
}

// Acquire: learn the intervals in `r`, then invalidate every page named by an interval of another
// cluster this cluster has not applied yet, up to `target`.
bool DsmNode::Impl::apply(const VC& target, Rd& r, RtEndpoint& ep, uint16_t home) {
    if (!receive_intervals(r, home, ep)) return false;  // it said why
    lock_coh(ep);
    std::vector<uint32_t> inval;
    VC upto;
    {
        std::lock_guard<std::mutex> k(know_mu);
        upto = vc;
        for (uint16_t c = 0; c < n.clusters_; c++) {
            if (c == n.cluster_ || target[c] <= vc[c]) continue;
            for (uint32_t i = vc[c] + 1; i <= target[c]; i++) {
                auto it = store[c].find(i);
                if (it == store[c].end())
                    fatal("cluster %u: interval %u of cluster %u missing from the notices received (protocol bug)",
                          unsigned(n.cluster_), i, unsigned(c));
                for (uint32_t p : it->second)
                    if (home_of_page(p) != n.cluster_) inval.push_back(p);
                n.ctr_.write_notices_received.fetch_add(it->second.size(), std::memory_order_relaxed);
            }
            upto[c] = target[c];
        }
    }
    bool ok = true;
    if (!inval.empty()) {
        // Own writes to a page about to be invalidated go home first (they would be lost). A page
        // made writable ahead (kWriteAhead) and still equal to its twin has none.
        bool any_twin = false;
        for (uint32_t p : inval) {
            std::lock_guard<std::mutex> g(pages[p].mu);
            if (pages[p].twin && (!pages[p].ahead || std::memcmp(page_priv(p), page_twin(p), page_len(p)) != 0)) {
                any_twin = true;
                break;
            }
        }
        if (any_twin) ok = flush_locked(ep);
        std::sort(inval.begin(), inval.end());
        inval.erase(std::unique(inval.begin(), inval.end()), inval.end());
        for_each_page_run(inval, [&](const uint32_t* run, size_t len) {
            for (size_t k = 0; k < len; k++) {
                const uint32_t p = run[k];
                Page& pg = pages[p];
                if (pg.twin) {
                    // Written again since the flush above: send this page's diff now, before the
                    // home copy can be fetched back. Written ahead and unchanged: no notice either.
                    if (!send_page_diff(p, ep)) pg.dirty = false;
                    pg.twin = false;
                    pg.ahead = false;
                }
                pg.epoch++;
                if (pg.state.load() != kInvalid) n.ctr_.invalidations.fetch_add(1, std::memory_order_relaxed);
            }
            // Every page of the chunk (an invalid page is PROT_NONE already, so no need to skip it).
            protect_runs(run, len, PROT_NONE, kInvalid, [](uint32_t) { return true; });
        });
    }
    {
        std::lock_guard<std::mutex> k(know_mu);
        for (uint16_t c = 0; c < n.clusters_; c++)
            if (c != n.cluster_ && upto[c] > vc[c]) vc[c] = upto[c];
    }
    coh_mu.unlock();
    return ok;
}

namespace {
// Notices pushed ahead of a release or barrier arrival that could not carry them all: acked
// requests, or one-way from a service thread giving a lock token back (which cannot wait for an
// ack; its messages to the home arrive in the order sent, the token's last).
void h_notices(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto* I = static_cast<DsmNode::Impl*>(ctx);
    Rd r(m.data.data(), m.data.size());
    if (!I->store_intervals(r))
        fprintf(stderr, "iccs dsm: cluster %u: malformed write notices from cluster %u dropped\n",
                unsigned(I->n.cluster()), unsigned(m.src.cluster));
    if (m.req_id) self.reply(m.token(), {});
}

// One chunk of the notices (from, to] a grant or barrier reply left out (kNoticesPull).
void h_pull(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto* I = static_cast<DsmNode::Impl*>(ctx);
    Rd r(m.data.data(), m.data.size());
    const VC from = I->decode_vc(r), to = I->decode_vc(r);
    NoticeCursor cur;
    cur.started = r.get<uint8_t>() != 0;
    cur.c = r.get<uint16_t>();
    cur.i = r.get<uint32_t>();
    Wr w;
    bool done = true;
    if (r.bad) w.put<uint32_t>(0);
    else done = I->encode_intervals_chunk(w, from, to, cur, I->rt.max_message() - 7);
    w.put<uint8_t>(done);
    w.put<uint16_t>(cur.c);
    w.put<uint32_t>(cur.i);
    self.reply(m.token(), RtBytes{w.b.data(), uint32_t(w.b.size())});
}

}  // namespace

void register_notice_handlers(DsmNode::Impl& I) {
    I.rt.set_handler(I.h(kHNotices), h_notices, &I);
    I.rt.set_handler(I.h(kHPull), h_pull, &I);
}

}  // namespace iccs::dsm
