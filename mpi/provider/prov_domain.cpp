// prov_domain.cpp: fabric and domain objects; the domain attaches the process (one rank) to its
// agent and builds its engine.
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "clock.hpp"
#include "prov.hpp"

namespace iccs::mpi {

namespace {

uint64_t coarse_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

// A count from the environment (unit: what it counts, for the warning), or dflt.
uint64_t env_count(const char* name, const char* unit, uint64_t dflt, uint64_t lo, uint64_t hi) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return dflt;
    char* end = nullptr;
    const unsigned long long x = std::strtoull(v, &end, 10);
    if (*end != '\0' || x < lo || x > hi) {
        prov_warn(name, std::string(name) + "=\"" + v + "\": expected " + unit + " from " + std::to_string(lo) + " to " +
                            std::to_string(hi) + "; using " + std::to_string(dflt));
        return dflt;
    }
    return x;
}

// How long a wait loop polls before it blocks (IccsDomain::idle_read). Polling pays only while
// the threads the rank waits for have cores of their own: its ranks, a bridge per rank and the
// proxies of every cluster (the bridges run them under inline polling) on this host. With fewer
// cores, every microsecond the rank polls is one its bridge, a proxy or the peer does not run
// (measured: 2 x 1 ranks on 2 cores, 8 B ping-pong, 50 us of polling 283 us one way, none 93 us,
// mpi/provider/README.md "Waiting"), so the rank blocks at once.
uint64_t default_spin_ns(const MpiMachine& m) {
    uint64_t threads = m.world;
    if (m.bridged()) {
        threads += m.world;
        if (m.config->cluster.polling != Polling::kInline)
            threads += uint64_t{m.clusters} * m.config->cluster.proxies_resolved;
    }
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 && threads <= static_cast<uint64_t>(cores) ? kWaitSpinNs : 0;
}

// The process's one attachment: shared by its domains, ended with the last.
std::mutex g_att_mu;
std::weak_ptr<Attachment> g_att;

std::shared_ptr<Attachment> attach(const fi_info* info, std::string& err) {
    std::lock_guard<std::mutex> lk(g_att_mu);
    if (auto a = g_att.lock()) return a;
    const std::shared_ptr<const MpiMachine> m = prov_machine(err);
    if (!m) return nullptr;
    if (!m->rank_known) {
        err = "this process has no rank: start it with mpirun (or set ICCS_RANK and ICCS_RANKS)";
        return nullptr;
    }
    auto a = std::make_shared<Attachment>();
    a->machine = *m;
    const uint32_t timeout_ms = 60'000;
    if (in_rank_wanted(a->machine)) {
        if (!a->in_rank.start(a->machine, a->link.region, err)) return nullptr;
    } else if (!agent_connect(a->machine, prov_agent_path(), timeout_ms, a->link, err)) {
        return nullptr;
    }
    EngineConfig ec;
    ec.my_rank = m->rank;
    ec.world = m->world;
    ec.cluster_size = m->cluster_size;
    ec.bridged = m->bridged();
    ec.delay_ns = m->transport == RtTransport::kDelay ? m->delay_ns : 0;
    ec.tx_size = info->tx_attr ? info->tx_attr->size : ec.tx_size;
    ec.rx_size = info->rx_attr ? info->rx_attr->size : ec.rx_size;
    ec.local_chunk = env_count("ICCS_MPI_LOCAL_CHUNK", "bytes", ec.local_chunk, 4096, 16u << 20);
    ec.remote_chunk = env_count("ICCS_MPI_REMOTE_CHUNK", "bytes", ec.remote_chunk, 4096, 16u << 20);
    a->engine = std::make_unique<RankEngine>(a->link.region, ec);
    a->in_rank.connect(*a->engine);
    // A rank whose thread runs its cluster's proxies (in_rank) never sleeps: nobody else would
    // take a frame off the fabric for it.
    a->spin_ns = m->config->cluster.polling == Polling::kBusy || a->in_rank.active()
                     ? UINT64_MAX
                     : env_count("ICCS_MPI_SPIN_US", "microseconds", default_spin_ns(*m) / 1000, 0, 10'000'000) * 1000;
    // In the rank, the busy threads are the ranks alone (no bridge or proxy threads run beside).
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (a->in_rank.active() && cores > 0 && m->world <= static_cast<uint64_t>(cores))
        a->reads_per_yield = kIdleReadsPerYieldOwnCore;
    g_att = a;
    return a;
}

int fabric_close(fid* f) {
    delete reinterpret_cast<IccsFabric*>(f);
    return 0;
}

fi_ops g_fabric_fi_ops = {sizeof(fi_ops), fabric_close, iccs_no_bind, iccs_no_control, iccs_no_ops_open, nullptr, nullptr};

int no_passive_ep(fid_fabric*, fi_info*, fid_pep**, void*) { return -FI_ENOSYS; }
int no_wait_open(fid_fabric*, fi_wait_attr*, fid_wait**) { return -FI_ENOSYS; }
int domain2(fid_fabric* f, fi_info* info, fid_domain** d, uint64_t flags, void* ctx) {
    if (flags != 0) return -FI_EBADFLAGS;
    return iccs_domain_open(f, info, d, ctx);
}

fi_ops_fabric g_fabric_ops = {sizeof(fi_ops_fabric), iccs_domain_open, no_passive_ep, iccs_eq_open,
                              no_wait_open,          iccs_trywait,     domain2};

int domain_close(fid* f) {
    auto* d = reinterpret_cast<IccsDomain*>(f);
    {
        DomainLock lk(d);
        if (d->refs != 0) return -FI_EBUSY;
    }
    if (d->att) {
        std::lock_guard<std::mutex> lk(g_att_mu);
        if (d->att.use_count() == 1) {
            // The last domain of the process: what is in the rings stays for the readers (the
            // region is theirs too); say goodbye so the agent knows this was no crash. An agent in
            // this process ends here: what the rank left goes out, then its cluster ends.
            d->att->link.bye();
            (void)d->att->in_rank.end(true);
        }
        d->att.reset();
    }
    fi_freeinfo(d->info);
    delete d;
    return 0;
}

fi_ops g_domain_fi_ops = {sizeof(fi_ops), domain_close, iccs_no_bind, iccs_no_control, iccs_no_ops_open, nullptr, nullptr};

int no_scalable_ep(fid_domain*, fi_info*, fid_ep**, void*) { return -FI_ENOSYS; }
int no_cntr_open(fid_domain*, fi_cntr_attr*, fid_cntr**, void*) { return -FI_ENOSYS; }
int no_poll_open(fid_domain*, fi_poll_attr*, fid_poll**) { return -FI_ENOSYS; }
int no_stx_ctx(fid_domain*, fi_tx_attr*, fid_stx**, void*) { return -FI_ENOSYS; }
int no_srx_ctx(fid_domain*, fi_rx_attr*, fid_ep**, void*) { return -FI_ENOSYS; }
int no_query_atomic(fid_domain*, fi_datatype, fi_op, fi_atomic_attr*, uint64_t) { return -FI_ENOSYS; }
int no_query_collective(fid_domain*, fi_collective_op, fi_collective_attr*, uint64_t) { return -FI_ENOSYS; }
int endpoint2(fid_domain* d, fi_info* info, fid_ep** ep, uint64_t flags, void* ctx) {
    if (flags != 0) return -FI_EBADFLAGS;
    return iccs_ep_open(d, info, ep, ctx);
}

fi_ops_domain g_domain_ops = {sizeof(fi_ops_domain), iccs_av_open,   iccs_cq_open,    iccs_ep_open,
                              no_scalable_ep,        no_cntr_open,   no_poll_open,    no_stx_ctx,
                              no_srx_ctx,            no_query_atomic, no_query_collective, endpoint2};

// Memory registration is never needed (mr_mode 0): registering is not supported.
int no_mr_reg(fid*, const void*, size_t, uint64_t, uint64_t, uint64_t, uint64_t, fid_mr**, void*) { return -FI_ENOSYS; }
int no_mr_regv(fid*, const iovec*, size_t, uint64_t, uint64_t, uint64_t, uint64_t, fid_mr**, void*) { return -FI_ENOSYS; }
int no_mr_regattr(fid*, const fi_mr_attr*, uint64_t, fid_mr**) { return -FI_ENOSYS; }
fi_ops_mr g_mr_ops = {sizeof(fi_ops_mr), no_mr_reg, no_mr_regv, no_mr_regattr};

}  // namespace

uint64_t IccsDomain::idle_read() {
    if (att->spin_ns == UINT64_MAX) {
        // A wait that never blocks (busy polling, a rank that runs its cluster's proxies) needs
        // no clock: a read per empty CQ read was a sixth of an in-rank rank's wait loop (perf).
        if (++idle_reads % att->reads_per_yield == 0) sched_yield();
        return 0;
    }
    const uint64_t now = now_ns();
    if (idle_reads == 0 || now - last_idle_ns > kWaitLoopGapNs) idle_since_ns = now;  // a new wait
    last_idle_ns = now;
    if (++idle_reads % kIdleReadsPerYield == 0) sched_yield();
    // The first empty read of a wait never blocks: it is often the one that ends a drain of the
    // CQ (Open MPI reads until -FI_EAGAIN after every completion). Block only when an arrival or
    // a ring of ours can end the wait: a send that waits for room in a pair ring is moved on by
    // this loop's progress (a peer rank that reads it rings nobody), but one that waits for room
    // in the agent ring may sleep: the bridge rings the doorbell after it takes records. (A
    // sending rank that polled meanwhile took the core from the bridge and proxies that free the
    // room: OSU's osu_mbw_mr, 2 x 2 ranks on 2 cores, starved a proxy for seconds.)
    if (idle_reads < 2 || now - idle_since_ns < att->spin_ns || !att->engine->sends_wait_only_for_agent()) return 0;
    return kWaitBlockUs;
}

void IccsDomain::idle_slept() { last_idle_ns = now_ns(); }

uint32_t IccsDomain::progress() {
    Attachment& a = *att;
    // In the rank (InRankLink): the bridge first, so what the proxies took is in the ring to take.
    uint32_t work = a.in_rank.step();
    work += a.engine->progress();
    if (work != 0) idle_reads = 0;
    if (!a.said_agent_error && a.engine->peers_lost()) {
        if (const std::string why = a.link.region.agent_error(); !why.empty()) {
            a.said_agent_error = true;
            prov_warn("agent", "rank " + std::to_string(a.machine.rank) + ": " + why, true);
        }
    }
    // Is the agent still there? A poll() of its socket, at most every 100 ms. (In the rank there
    // is no socket, and no clock read: one a progress call was 1-2% of its wait loop.)
    if (a.link.sock < 0) return work;
    const uint64_t now = coarse_ns();
    if (now >= a.next_agent_check_ns) {
        a.next_agent_check_ns = now + 100'000'000;
        if (a.link.agent_gone()) {
            prov_warn("progress",
                      "rank " + std::to_string(a.machine.rank) + ": the agent of its " +
                          (a.machine.bridged() ? "cluster" : "run") + " is gone: messages to ranks outside it fail from now on",
                      true);
            close(a.link.sock);
            a.link.sock = -1;
            a.engine->agent_lost();
        }
    }
    return work;
}

int iccs_fabric_open(fi_fabric_attr* attr, fid_fabric** fabric, void* context) {
    if (attr != nullptr && attr->name != nullptr && std::strcmp(attr->name, kFabricName) != 0) return -FI_ENODATA;
    std::string err;
    auto m = prov_machine(err);
    if (!m) {
        prov_warn("fi_fabric", err);
        return -FI_ENODATA;
    }
    auto* f = new IccsFabric{};
    f->fab.fid.fclass = FI_CLASS_FABRIC;
    f->fab.fid.context = context;
    f->fab.fid.ops = &g_fabric_fi_ops;
    f->fab.ops = &g_fabric_ops;
    f->fab.api_version = attr ? attr->api_version : FI_VERSION(1, 5);
    f->machine = std::move(m);
    *fabric = &f->fab;
    return 0;
}

int iccs_domain_open(fid_fabric* fabric, fi_info* info, fid_domain** dom, void* context) {
    if (info == nullptr || info->domain_attr == nullptr) return -FI_EINVAL;
    if (info->domain_attr->name != nullptr && std::strcmp(info->domain_attr->name, kDomainName) != 0) return -FI_EINVAL;
    std::string err;
    std::shared_ptr<Attachment> att = attach(info, err);
    if (!att) {
        const MpiMachine& m = *reinterpret_cast<IccsFabric*>(fabric)->machine;
        prov_warn("fi_domain", (m.rank_known ? "rank " + std::to_string(m.rank) + ": " : std::string()) + err, true);
        return -FI_EIO;
    }
    auto* d = new IccsDomain{};
    d->dom.fid.fclass = FI_CLASS_DOMAIN;
    d->dom.fid.context = context;
    d->dom.fid.ops = &g_domain_fi_ops;
    d->dom.ops = &g_domain_ops;
    d->dom.mr = &g_mr_ops;
    d->fabric = reinterpret_cast<IccsFabric*>(fabric);
    d->info = fi_dupinfo(info);
    d->thread_safe = info->domain_attr->threading != FI_THREAD_DOMAIN;
    d->att = std::move(att);
    *dom = &d->dom;
    return 0;
}

}  // namespace iccs::mpi
