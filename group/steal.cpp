// steal.cpp: spawn/sync, the deques, the three stealing policies and termination (steal.hpp).
#include "steal.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "clock.hpp"
#include "steal_wire.hpp"

namespace iccs::group {

const char* to_string(StealPolicy p) {
    switch (p) {
        case StealPolicy::kRs: return "rs";
        case StealPolicy::kChs: return "chs";
        case StealPolicy::kCrs: return "crs";
    }
    return "?";
}

bool parse_steal_policy(std::string_view s, StealPolicy& out) {
    if (s == "rs") out = StealPolicy::kRs;
    else if (s == "chs") out = StealPolicy::kChs;
    else if (s == "crs") out = StealPolicy::kCrs;
    else return false;
    return true;
}

void StealCounters::add(const StealCounters& o) {
    uint64_t a[kWords], b[kWords];
    to_words(a);
    o.to_words(b);
    for (size_t i = 0; i < kWords; ++i) a[i] = i == 7 ? std::max(a[i], b[i]) : a[i] + b[i];
    from_words(a);
}

void StealCounters::to_words(uint64_t* w) const {
    const uint64_t v[kWords] = {jobs_spawned, jobs_run,    local_attempts,        local_successes,   wan_attempts,
                                wan_successes, idle_ns,    max_outstanding_wan,   wan_steals_cluster_busy,
                                wan_steals_traced, result_msgs, result_bytes, stolen_job_bytes, failed_threads};
    std::memcpy(w, v, sizeof v);
}

void StealCounters::from_words(const uint64_t* w) {
    jobs_spawned = w[0], jobs_run = w[1], local_attempts = w[2], local_successes = w[3], wan_attempts = w[4];
    wan_successes = w[5], idle_ns = w[6], max_outstanding_wan = w[7], wan_steals_cluster_busy = w[8];
    wan_steals_traced = w[9], result_msgs = w[10], result_bytes = w[11], stolen_job_bytes = w[12];
    failed_threads = w[13];
}

namespace {

struct Child {
    std::atomic<uint8_t> done{0};
    std::vector<uint8_t> result;
    uint64_t id = 0;
};

struct Job {
    Child* child = nullptr;  // the owner's record when the owner is in this process, else nullptr
    uint16_t owner_cluster = 0, owner_thread = 0;
    uint64_t child_id = 0;
    uint32_t depth = 0;  // frame of the owner's stack that spawned it (own deque only)
    uint16_t kind = 0;
    std::vector<uint8_t> args;
};

struct Frame {
    std::vector<std::unique_ptr<Child>> kids;
    size_t first_pending = 0;  // kids before it are done
};

// What thieves touch (under mu), per thread.
struct Shared {
    std::mutex mu;
    std::deque<Job> dq;                           // bottom = back (owner), top = front (thieves)
    std::unordered_map<uint64_t, Child*> lent;    // children stolen by another cluster, by id
    std::atomic<bool> idle{false};                // no job of its own to run
    std::atomic<uint32_t> queued{0};              // dq.size(), readable without mu
};

// Only the owning thread (and handlers run on its endpoint) touch it.
struct Own {
    std::vector<Frame> frames;
    uint64_t rng = 0;
    uint64_t next_id = 1;
    StealCounters c;
    std::deque<Job> inbox;        // jobs from asynchronous steal replies (CRS)
    uint32_t async_out = 0;       // asynchronous WAN steal requests outstanding
    uint32_t chs_next = 0;        // CHS: next tree neighbour to ask
    uint32_t sib_next = 0;        // CHS: next sibling to try
    uint64_t idle_since = 0;      // 0: not idle
    uint32_t backoff_us = 0;
    std::vector<RtAddr> all, site, remote;  // every other thread; of this site; of other sites
    std::vector<uint16_t> tree;             // CHS: neighbour clusters in the tree (children, parent)
    std::unique_ptr<Worker> w;
};

uint64_t next_rand(uint64_t& s) {
    s += 0x9E3779B97F4A7C15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

}  // namespace

struct Stealer::Impl {
    Runtime& rt;
    const Topology& topo;
    const StealOptions& o;
    std::vector<JobFn> kinds;
    uint16_t me = 0, T = 0;
    std::unique_ptr<Shared[]> sh;
    std::vector<Own> own;
    std::atomic<bool> done{false}, failed{false}, abort_sent{false};
    std::atomic<uint32_t> any_next{0};  // CHS requests: thread to start looking at
    mutable std::mutex err_mu;
    std::string err;
    std::atomic<uint64_t> drops{0};

    Impl(Runtime& r, const Topology& tp, const StealOptions& op, std::vector<JobFn> k)
        : rt(r), topo(tp), o(op), kinds(std::move(k)), me(r.cluster()), T(r.threads()), sh(new Shared[r.threads()]),
          own(r.threads()) {}

    uint16_t site(uint16_t cluster) const { return topo.site_of[cluster]; }
    uint16_t h(uint16_t k) const { return static_cast<uint16_t>(o.handler_base + k); }

    void fail(const std::string& why) {
        {
            std::lock_guard<std::mutex> lk(err_mu);
            if (err.empty()) err = "steal (cluster " + std::to_string(me) + "): " + why;
        }
        failed.store(true);
        for (uint16_t t = 0; t < T; ++t) rt.endpoint(t).notify();
    }

    // ---- deques

    // The top job of thread v (or, v == kAnyThread, of the first thread with one) for a thief; a
    // thief in another cluster gets the child registered as lent.
    bool take_top(uint16_t v, bool remote, Job& out) {
        const uint16_t n = v == wire::kAnyThread ? T : 1;
        const uint16_t start = v == wire::kAnyThread ? static_cast<uint16_t>(any_next.fetch_add(1) % T) : v;
        for (uint16_t i = 0; i < n; ++i) {
            const uint16_t x = static_cast<uint16_t>((start + i) % T);
            Shared& s = sh[x];
            if (s.queued.load(std::memory_order_relaxed) == 0) continue;
            std::lock_guard<std::mutex> lk(s.mu);
            if (s.dq.empty()) continue;
            out = std::move(s.dq.front());
            s.dq.pop_front();
            s.queued.store(static_cast<uint32_t>(s.dq.size()));  // seq_cst: after the thief's idle flag (cluster_idle)
            if (remote) s.lent.emplace(out.child_id, out.child);
            return true;
        }
        return false;
    }

    bool pop_bottom(uint16_t t, uint32_t depth, Job& out) {
        Shared& s = sh[t];
        if (s.queued.load(std::memory_order_relaxed) == 0) return false;
        std::lock_guard<std::mutex> lk(s.mu);
        if (s.dq.empty() || s.dq.back().depth != depth) return false;
        sh[t].idle.store(false);  // before the job leaves the deque: cluster_idle never sees it nowhere
        out = std::move(s.dq.back());
        s.dq.pop_back();
        s.queued.store(static_cast<uint32_t>(s.dq.size()));
        return true;
    }

    // ---- running jobs

    void idle_begin(uint16_t t) {
        Own& m = own[t];
        if (m.idle_since == 0) {
            m.idle_since = now_ns();
            sh[t].idle.store(true);
        }
    }
    void idle_end(uint16_t t) {
        Own& m = own[t];
        if (m.idle_since != 0) {
            m.c.idle_ns += now_ns() - m.idle_since;
            m.idle_since = 0;
            sh[t].idle.store(false);
        }
        m.backoff_us = 0;
    }

    void execute(uint16_t t, Job& j) {
        idle_end(t);
        Own& m = own[t];
        if (j.kind >= kinds.size() || kinds[j.kind] == nullptr) {
            fail("a job of unknown kind " + std::to_string(j.kind) + " from " + std::to_string(j.owner_cluster) + "." +
                 std::to_string(j.owner_thread));
            return;
        }
        m.frames.emplace_back();
        std::vector<uint8_t> result;
        kinds[j.kind](*m.w, j.args, result);
        sync_top(t);  // the implicit sync: no job returns before its children
        m.frames.pop_back();
        ++m.c.jobs_run;
        deliver(t, j, std::move(result));
    }

    void deliver(uint16_t t, Job& j, std::vector<uint8_t>&& result) {
        if (j.child != nullptr) {  // the owner is in this process
            j.child->result = std::move(result);
            j.child->done.store(1, std::memory_order_release);
            if (j.owner_thread != t) rt.endpoint(j.owner_thread).notify();
            return;
        }
        wire::ResultHdr hdr;
        hdr.owner_thread = j.owner_thread;
        hdr.child_id = j.child_id;
        RtEndpoint& ep = rt.endpoint(t);
        const RtStatus st = ep.send(RtAddr{j.owner_cluster, kRtService}, h(3), RtBytes{&hdr, sizeof hdr},
                                    RtBytes{result.data(), static_cast<uint32_t>(result.size())});
        if (st != RtStatus::kOk)
            return fail("sending a result to cluster " + std::to_string(j.owner_cluster) + ": " + ep.last_error());
        ++own[t].c.result_msgs;
        own[t].c.result_bytes += result.size();
    }

    // Waits for every child of the top frame of thread t.
    bool sync_top(uint16_t t) {
        Own& m = own[t];
        const uint32_t depth = static_cast<uint32_t>(m.frames.size() - 1);
        auto all_done = [&] {
            Frame& f = m.frames[depth];
            while (f.first_pending < f.kids.size() && f.kids[f.first_pending]->done.load(std::memory_order_acquire))
                ++f.first_pending;
            return f.first_pending == f.kids.size();
        };
        RtEndpoint& ep = rt.endpoint(t);
        uint32_t polls = 0;
        const uint64_t since = now_ns();
        while (!all_done()) {
            if (failed.load(std::memory_order_relaxed)) return false;
            if (now_ns() - since > o.timeout_ms * 1'000'000) {
                fail("thread " + std::to_string(t) + " waited " + std::to_string(o.timeout_ms) +
                     " ms in sync for its stolen jobs");
                return false;
            }
            Job j;
            if (pop_bottom(t, depth, j)) {
                if ((++polls & 63) == 0) ep.poll();  // asynchronous replies and notifications
                execute(t, j);
                continue;
            }
            idle_begin(t);
            if (take_inbox(t, j) || steal_once(t, j)) {
                execute(t, j);
                continue;
            }
            backoff(t, all_done);
        }
        idle_end(t);
        return !failed.load();
    }

    bool take_inbox(uint16_t t, Job& j) {
        Own& m = own[t];
        if (m.inbox.empty()) return false;
        j = std::move(m.inbox.front());
        m.inbox.pop_front();
        return true;
    }

    // Nothing found: wait a little (longer each time, at most 1 ms) for a reply, a result or the end.
    template <class Extra>
    void backoff(uint16_t t, const Extra& extra) {
        Own& m = own[t];
        m.backoff_us = m.backoff_us == 0 ? 20 : std::min<uint32_t>(m.backoff_us * 2, 1000);
        rt.endpoint(t).wait_until(
            [&] { return done.load(std::memory_order_relaxed) || failed.load(std::memory_order_relaxed) ||
                         !m.inbox.empty() || extra(); },
            m.backoff_us);
    }

    // ---- stealing

    void count_attempt(uint16_t t, uint16_t victim_cluster, bool ok) {
        StealCounters& c = own[t].c;
        if (site(victim_cluster) == site(me)) {
            ++c.local_attempts;
            c.local_successes += ok;
        } else {
            ++c.wan_attempts;
            c.wan_successes += ok;
            c.max_outstanding_wan = std::max<uint64_t>(c.max_outstanding_wan, own[t].async_out + 1);
        }
    }

    // A steal from thread `v` of cluster `c` (v may be kAnyThread for another cluster), waiting for
    // the answer.
    bool steal_sync(uint16_t t, uint16_t c, uint16_t v, Job& j) {
        if (c == me) {
            // Not idle while it may hold a job it took (before the deque shows it gone).
            const bool was_idle = sh[t].idle.exchange(false);
            const bool ok = take_top(v, false, j);
            if (!ok && was_idle) sh[t].idle.store(true);
            count_attempt(t, c, ok);
            return ok;
        }
        wire::StealReq req;
        req.victim = v;
        req.thief = t;
        RtEndpoint& ep = rt.endpoint(t);
        std::vector<uint8_t> reply;
        const RtStatus st = ep.request(RtAddr{c, kRtService}, h(0), RtBytes{&req, sizeof req}, {}, reply, o.timeout_ms * 1000);
        if (st != RtStatus::kOk) {
            fail("steal request to cluster " + std::to_string(c) + ": " + ep.last_error());
            return false;
        }
        const bool ok = parse_job(t, reply, j);
        count_attempt(t, c, ok);
        return ok;
    }

    bool parse_job(uint16_t t, std::span<const uint8_t> b, Job& j) {
        wire::JobHdr hdr;
        if (b.size() < sizeof hdr) {
            ++drops;
            fail("a steal reply of " + std::to_string(b.size()) + " bytes (at least 16 expected)");
            return false;
        }
        std::memcpy(&hdr, b.data(), sizeof hdr);
        if (!hdr.has_job) return false;
        if (hdr.owner_cluster >= topo.clusters || hdr.owner_thread >= T) {
            ++drops;
            fail("a steal reply naming owner " + std::to_string(hdr.owner_cluster) + "." + std::to_string(hdr.owner_thread));
            return false;
        }
        j = Job{};
        j.owner_cluster = hdr.owner_cluster;
        j.owner_thread = hdr.owner_thread;
        j.child_id = hdr.child_id;
        j.kind = hdr.kind;
        j.args.assign(b.begin() + sizeof hdr, b.end());
        own[t].c.stolen_job_bytes += j.args.size();
        return true;
    }

    bool steal_once(uint16_t t, Job& j) {
        Own& m = own[t];
        switch (o.policy) {
            case StealPolicy::kRs: {
                if (m.all.empty()) return false;
                const RtAddr v = m.all[next_rand(m.rng) % m.all.size()];
                return steal_sync(t, v.cluster, v.thread, j);
            }
            case StealPolicy::kCrs: {
                if (m.async_out == 0 && !m.remote.empty()) {
                    const RtAddr v = m.remote[next_rand(m.rng) % m.remote.size()];
                    wire::StealReq req;
                    req.victim = v.thread;
                    req.thief = t;
                    RtEndpoint& ep = rt.endpoint(t);
                    if (ep.send(RtAddr{v.cluster, kRtService}, h(1), RtBytes{&req, sizeof req}) != RtStatus::kOk) {
                        fail("asynchronous steal request to cluster " + std::to_string(v.cluster) + ": " + ep.last_error());
                        return false;
                    }
                    ++m.async_out;
                    ++m.c.wan_attempts;
                    m.c.max_outstanding_wan = std::max<uint64_t>(m.c.max_outstanding_wan, m.async_out);
                }
                if (m.site.empty()) return false;
                const RtAddr v = m.site[next_rand(m.rng) % m.site.size()];
                return steal_sync(t, v.cluster, v.thread, j);
            }
            case StealPolicy::kChs: {
                for (uint16_t i = 1; i < T; ++i) {  // the cluster's other threads first
                    const uint16_t v = static_cast<uint16_t>((t + (m.sib_next++ % (T - 1)) + 1) % T);
                    if (steal_sync(t, me, v, j)) return true;
                }
                if (t != 0 || m.tree.empty() || !cluster_idle(t)) return false;
                const uint16_t c = m.tree[m.chs_next++ % m.tree.size()];
                if (site(c) != site(me)) {  // the trace check: the cluster's deques when a WAN steal leaves
                    ++m.c.wan_steals_traced;
                    // Busy = a job waiting in a deque of this cluster (work CHS must take locally first).
                    // Not the idle flags: a thread waiting in sync resumes when a result arrives from
                    // another cluster, legitimately, between the decision above and this read (a loaded
                    // CI run counted one such steal as busy).
                    if (!deques_empty()) ++m.c.wan_steals_cluster_busy;
                }
                return steal_sync(t, c, wire::kAnyThread, j);
            }
        }
        return false;
    }

    // Every other thread of this cluster idle and every deque empty (thread t is idle, its deque
    // too). A thread clears its idle flag before it takes a job out of a deque, so reading the flags,
    // then the deques, then the flags again finds a job that moved meanwhile in one of the reads.
    bool cluster_idle(uint16_t t) const {
        auto all_idle = [&] {
            for (uint16_t x = 0; x < T; ++x)
                if (x != t && !sh[x].idle.load()) return false;
            return true;
        };
        if (!all_idle()) return false;
        if (!deques_empty()) return false;
        return all_idle();
    }
    bool deques_empty() const {
        for (uint16_t x = 0; x < T; ++x)
            if (sh[x].queued.load() != 0) return false;
        return true;
    }

    // ---- handlers

    static void on_steal(RtEndpoint& self, const AmMsg& msg, void* ctx) {
        auto* im = static_cast<Impl*>(ctx);
        wire::StealReq req;
        wire::JobHdr hdr;
        Job j;
        bool got = false;
        if (msg.data.size() == sizeof req) {
            std::memcpy(&req, msg.data.data(), sizeof req);
            if (req.victim == wire::kAnyThread || req.victim < im->T) got = im->take_top(req.victim, true, j);
        } else {
            ++im->drops;
        }
        if (got) {
            hdr.has_job = 1;
            hdr.kind = j.kind;
            hdr.owner_cluster = j.owner_cluster;
            hdr.owner_thread = j.owner_thread;
            hdr.child_id = j.child_id;
        }
        const RtBytes a{&hdr, sizeof hdr}, b{j.args.data(), static_cast<uint32_t>(j.args.size())};
        RtStatus st;
        if (msg.handler == im->h(0)) {
            st = self.reply(msg.token(), a, b);
        } else {
            if (!got && msg.data.size() != sizeof req) return;
            st = self.send(RtAddr{msg.src.cluster, req.thief}, im->h(2), a, b);
        }
        if (st != RtStatus::kOk) im->fail("answering a steal request of cluster " + std::to_string(msg.src.cluster) + ": " + self.last_error());
    }

    static void on_async_reply(RtEndpoint& self, const AmMsg& msg, void* ctx) {
        auto* im = static_cast<Impl*>(ctx);
        const uint16_t t = self.self().thread;
        if (t >= im->T) return;
        Own& m = im->own[t];
        if (m.async_out > 0) --m.async_out;
        Job j;
        if (im->parse_job(t, msg.data, j)) {
            ++m.c.wan_successes;
            m.inbox.push_back(std::move(j));
        }
    }

    static void on_result(RtEndpoint&, const AmMsg& msg, void* ctx) {
        auto* im = static_cast<Impl*>(ctx);
        wire::ResultHdr hdr;
        if (msg.data.size() < sizeof hdr) {
            ++im->drops;
            return im->fail("a result of " + std::to_string(msg.data.size()) + " bytes from cluster " + std::to_string(msg.src.cluster));
        }
        std::memcpy(&hdr, msg.data.data(), sizeof hdr);
        Child* c = nullptr;
        if (hdr.owner_thread < im->T) {
            Shared& s = im->sh[hdr.owner_thread];
            std::lock_guard<std::mutex> lk(s.mu);
            auto it = s.lent.find(hdr.child_id);
            if (it != s.lent.end()) {
                c = it->second;
                s.lent.erase(it);
            }
        }
        if (c == nullptr) {
            ++im->drops;
            return im->fail("a result from cluster " + std::to_string(msg.src.cluster) + " for job #" +
                            std::to_string(hdr.child_id) + " of thread " + std::to_string(hdr.owner_thread) + ", which lent no such job");
        }
        c->result.assign(msg.data.begin() + sizeof hdr, msg.data.end());
        c->done.store(1, std::memory_order_release);
        im->rt.endpoint(hdr.owner_thread).notify();
    }

    // Empty: the run is over. Otherwise an abort: another cluster failed, the reason follows.
    static void on_done(RtEndpoint&, const AmMsg& msg, void* ctx) {
        auto* im = static_cast<Impl*>(ctx);
        if (!msg.data.empty()) {
            const size_t n = std::min<size_t>(msg.data.size(), 512);
            im->abort_sent.store(true);  // it came from the cluster that failed: no need to pass it on
            return im->fail("cluster " + std::to_string(msg.src.cluster) + " failed: " +
                            std::string(reinterpret_cast<const char*>(msg.data.data()), n));
        }
        im->done.store(true);
        for (uint16_t t = 0; t < im->T; ++t) im->rt.endpoint(t).notify();
    }
};

Stealer::Stealer(Runtime& rt, const Topology& topo, const StealOptions& o, std::vector<JobFn> kinds)
    : topo_(topo), o_(o), impl_(std::make_unique<Impl>(rt, topo_, o_, std::move(kinds))) {
    Impl& im = *impl_;
    const uint16_t me = im.me, T = im.T;
    for (uint16_t t = 0; t < T; ++t) {
        Own& m = im.own[t];
        m.rng = o.seed * 0x100000001B3ull + (uint64_t{me} << 20) + t + 1;
        m.w.reset(new Worker(*this, t));
        for (uint16_t c = 0; c < topo_.clusters; ++c)
            for (uint16_t x = 0; x < T; ++x) {
                if (c == me && x == t) continue;
                const RtAddr a{c, x};
                m.all.push_back(a);
                (topo_.site_of[c] == topo_.site_of[me] ? m.site : m.remote).push_back(a);
            }
        for (uint32_t c : {2u * me + 1, 2u * me + 2})
            if (c < topo_.clusters) m.tree.push_back(static_cast<uint16_t>(c));
        if (me > 0) m.tree.push_back(static_cast<uint16_t>((me - 1) / 2));
    }
    rt.set_handler(im.h(0), &Impl::on_steal, &im);
    rt.set_handler(im.h(1), &Impl::on_steal, &im);
    rt.set_handler(im.h(2), &Impl::on_async_reply, &im);
    rt.set_handler(im.h(3), &Impl::on_result, &im);
    rt.set_handler(im.h(4), &Impl::on_done, &im);
}

Stealer::~Stealer() = default;

bool Stealer::run(uint16_t t, uint16_t root_kind, std::span<const uint8_t> root_args, std::vector<uint8_t>* root_result,
                  uint64_t* elapsed_ns) {
    Impl& im = *impl_;
    RtEndpoint& ep = im.rt.endpoint(t);
    if (ep.barrier(o_.timeout_ms * 1000) != RtStatus::kOk) {
        im.fail("first barrier: " + ep.last_error());
        return false;
    }
    Own& m = im.own[t];
    const uint64_t t0 = now_ns();
    if (im.me == 0 && t == 0) {
        Child root;
        Job j;
        j.child = &root;
        j.owner_thread = 0;
        j.kind = root_kind;
        j.args.assign(root_args.begin(), root_args.end());
        im.execute(t, j);
        if (elapsed_ns != nullptr) *elapsed_ns = now_ns() - t0;
        if (root_result != nullptr) *root_result = std::move(root.result);
        for (uint16_t c = 0; c < topo_.clusters; ++c)
            if (ep.send(RtAddr{c, kRtService}, im.h(4), RtBytes{}) != RtStatus::kOk)
                im.fail("telling cluster " + std::to_string(c) + " the run is over: " + ep.last_error());
    } else {
        while (!im.done.load() && !im.failed.load()) {
            Job j;
            im.idle_begin(t);
            if (im.take_inbox(t, j) || im.steal_once(t, j)) {
                im.execute(t, j);
                continue;
            }
            if (now_ns() - t0 > o_.timeout_ms * 1'000'000) {
                im.fail("thread " + std::to_string(t) + " found no end of the run in " + std::to_string(o_.timeout_ms) + " ms");
                break;
            }
            im.backoff(t, [] { return false; });
        }
        im.idle_end(t);
    }
    // An outstanding asynchronous request is always answered: wait for it, so no reply comes to a
    // thread that left.
    ep.wait_until([&] { return m.async_out == 0 || im.failed.load(); }, o_.timeout_ms * 1000);
    if (im.failed.load() && !im.abort_sent.exchange(true)) {  // tell the others, so none waits for us
        const std::string why = error();
        for (uint16_t c = 0; c < topo_.clusters; ++c)
            if (c != im.me)
                (void)ep.send(RtAddr{c, kRtService}, im.h(4), RtBytes{why.data(), static_cast<uint32_t>(why.size())});
    }
    return !im.failed.load();
}

const StealCounters& Stealer::counters(uint16_t t) const { return impl_->own[t].c; }

StealCounters Stealer::cluster_counters() const {
    StealCounters s;
    for (const Own& m : impl_->own) s.add(m.c);
    return s;
}

std::string Stealer::error() const {
    std::lock_guard<std::mutex> lk(impl_->err_mu);
    return impl_->err;
}

Worker::Handle Worker::spawn(uint16_t kind, std::span<const uint8_t> a, std::span<const uint8_t> b) {
    Stealer::Impl& im = *s_.impl_;
    Own& m = im.own[t_];
    Frame& f = m.frames.back();
    f.kids.push_back(std::make_unique<Child>());
    Child* c = f.kids.back().get();
    c->id = m.next_id++;
    Job j;
    j.child = c;
    j.owner_cluster = im.me;
    j.owner_thread = t_;
    j.child_id = c->id;
    j.depth = static_cast<uint32_t>(m.frames.size() - 1);
    j.kind = kind;
    j.args.reserve(a.size() + b.size());
    j.args.insert(j.args.end(), a.begin(), a.end());
    j.args.insert(j.args.end(), b.begin(), b.end());
    ++m.c.jobs_spawned;
    Shared& s = im.sh[t_];
    {
        std::lock_guard<std::mutex> lk(s.mu);
        s.dq.push_back(std::move(j));
        s.queued.store(static_cast<uint32_t>(s.dq.size()), std::memory_order_relaxed);
    }
    return static_cast<Handle>(f.kids.size() - 1);
}

bool Worker::sync() { return s_.impl_->sync_top(t_); }

const std::vector<uint8_t>& Worker::result(Handle h) const { return s_.impl_->own[t_].frames.back().kids.at(h)->result; }

uint16_t Worker::cluster() const { return s_.impl_->me; }

bool gather_steal_counters(RtEndpoint& ep, const Stealer& s, StealCounters& sum, std::string& err) {
    StealCounters mine = s.counters(ep.self().thread);
    mine.failed_threads = s.error().empty() ? 0 : 1;
    std::vector<uint8_t> b(StealCounters::kWords * 8);
    uint64_t w[StealCounters::kWords];
    mine.to_words(w);
    std::memcpy(b.data(), w, b.size());
    std::vector<std::vector<uint8_t>> by;
    if (ep.barrier_gather(b, by, s.timeout_ms() * 1000) != RtStatus::kOk) {
        err = "barrier_gather of the steal counters: " + ep.last_error();
        return false;
    }
    sum = StealCounters{};
    for (size_t c = 0; c < by.size(); ++c) {
        if (by[c].size() % b.size() != 0) {
            err = "cluster " + std::to_string(c) + " sent steal counters of " + std::to_string(by[c].size()) + " bytes";
            return false;
        }
        for (size_t off = 0; off < by[c].size(); off += b.size()) {
            std::memcpy(w, by[c].data() + off, b.size());
            StealCounters one;
            one.from_words(w);
            sum.add(one);
        }
    }
    return true;
}

}  // namespace iccs::group
