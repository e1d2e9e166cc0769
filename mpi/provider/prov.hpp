// prov.hpp: the libfabric objects of the `iccs` provider (libiccs-fi.so; mpi/provider/README.md,
// "What the provider offers"), over one rank's engine (rank_engine.hpp).
//
// Each object starts with its libfabric fid struct, so a fid pointer is ours by a cast: none of
// them has a base class or a virtual function (which would put a vtable pointer first). A process
// is one rank: its first domain attaches it to the domain's agent (agent_link.hpp) and builds the
// engine; the endpoint, CQs and AV are views onto that one attachment. Progress is manual: every
// CQ read (and every post) moves the engine. Under FI_THREAD_SAFE one mutex per domain orders
// every call; under FI_THREAD_DOMAIN the application does.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent_link.hpp"
#include "mpi_machine.hpp"
#include "rank_engine.hpp"

namespace iccs::mpi {

extern fi_provider g_iccs_prov;

inline constexpr uint32_t kProvVersion = FI_VERSION(1, 0);
inline constexpr const char* kFabricName = "iccs";
inline constexpr const char* kDomainName = "iccs";
inline constexpr uint64_t kPrimaryCaps = FI_TAGGED | FI_MSG | FI_SEND | FI_RECV;
inline constexpr uint64_t kSecondaryCaps = FI_DIRECTED_RECV | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM;
inline constexpr uint64_t kTxOpFlags = FI_COMPLETION | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE;
inline constexpr uint64_t kRxOpFlags = FI_COMPLETION;
inline constexpr size_t kDefaultCqSize = 1024;
inline constexpr uint32_t kIdleReadsPerYield = 16;
// A rank that runs its cluster's proxies (InRankLink) on a host with a core for each rank: the
// threads it waits for run in its own loop or on another core, so it gives the core away this
// seldom (for the host's other work; a yield was ~15% of its wait loop: mpi/provider/SPEED.md).
inline constexpr uint32_t kIdleReadsPerYieldOwnCore = 256;
// A wait loop (empty CQ reads, each within kWaitLoopGapNs of the last) polls kWaitSpinNs, then
// blocks on the rank's doorbell at most kWaitBlockUs at a time (mpi/provider/README.md, "Waiting").
inline constexpr uint64_t kWaitLoopGapNs = 5'000;
inline constexpr uint64_t kWaitSpinNs = 50'000;
inline constexpr uint64_t kWaitBlockUs = 1'000;  // success entries a CQ holds when attr->size is 0
// All 64 tag bits are the application's (fi_endpoint(3): a format whose top bit is set leaves the
// high bits free; Open MPI's MTL counts them for its communicator ids). The value libfabric's
// older headers named FI_TAG_GENERIC.
inline constexpr uint64_t kMemTagFormat = 0xAAAAAAAAAAAAAAAAull;

// An endpoint's address (fi_getname, fi_av_insert): the rank in its run.
struct IccsAddr {
    uint32_t magic;  // kAddrMagic
    uint32_t rank;
    uint64_t run_hash;
};
inline constexpr uint32_t kAddrMagic = 0x49434641;  // "ICFA"
static_assert(sizeof(IccsAddr) == 16);

// An address of a rank of this run (not of another run, not a stray value).
inline bool iccs_addr_valid(const IccsAddr& a, const MpiMachine& m) {
    return a.magic == kAddrMagic && a.run_hash == m.run_hash && a.rank < m.world;
}

// What a node/service pair names (prov_names.cpp; fi_getinfo(3), fi_av_insertsvc): a rank, or
// only this host (a node and no service).
struct NamedRank {
    bool named = false;
    uint32_t rank = 0;
};
// "" and `out`, or why the names name nothing of this run (the caller answers -FI_ENODATA):
// service is a rank in decimal; node is NULL, a name or address of this host (FI_NUMERICHOST in
// flags: numeric only), or "iccs://rank/N" with service NULL.
std::string resolve_rank_name(const MpiMachine& m, const char* node, const char* service, uint64_t flags,
                              NamedRank& out);
// fi_av_insertsym's next node or service name: the number it ends with plus one ("" if none).
std::string next_symmetric_name(const std::string& name);

// A cluster of one rank under `[cluster] polling = "inline"`: its agent runs in the rank's own
// process (libiccs-mpi-inrank.so, loaded then only), and the rank's thread steps its bridge, which
// runs the proxies inline, from every progress call: no thread hand-off between the rank and the
// fabric (mpi/provider/README.md, "Why an agent process").
class InRankLink {
   public:
    // Load the module, bring the cluster up here, map its region. False with err (one line).
    bool start(const MpiMachine& m, Region& region, std::string& err);
    bool active() const { return handle_ != nullptr; }
    // One step of the bridge: the records it moved.
    uint32_t step() { return handle_ != nullptr ? step_(handle_) : 0; }
    // The rank is done (finished) or going: flush, end the cluster, report, clean up.
    int end(bool finished);
    // The engine and the bridge hand records to each other directly, no ring between, while both
    // run on the rank's thread (RankEngine's DirectOut and take_direct). Off with
    // ICCS_MPI_IN_RANK_DIRECT=0, or with a module that does not offer it.
    void connect(RankEngine& engine);

   private:
    using StepFn = uint32_t (*)(void*);
    using EndFn = int (*)(void*, int);
    using SendFn = int (*)(void*, uint32_t, const iovec*, uint32_t, uint32_t, int);
    using DeliverToFn = void (*)(void*, void*, int (*)(void*, const iovec*, uint32_t, uint32_t));
    void* handle_ = nullptr;
    StepFn step_ = nullptr;
    EndFn end_ = nullptr;
    SendFn send_ = nullptr;
    DeliverToFn deliver_to_ = nullptr;
};
// This run's cluster of this rank is one to run in the rank (InRankLink).
bool in_rank_wanted(const MpiMachine& m);

// The process's rank, attached to its agent: made by the first domain, ended by the last close.
struct Attachment {
    MpiMachine machine;
    AgentLink link;
    InRankLink in_rank;  // active: the agent is this process (link.sock stays -1)
    std::unique_ptr<RankEngine> engine;
    uint64_t next_agent_check_ns = 0;
    bool said_agent_error = false;  // the agent's reason (region) printed once
    // How long a wait loop polls before it blocks on the doorbell (UINT64_MAX: never; [cluster]
    // polling = "busy"): ICCS_MPI_SPIN_US, else kWaitSpinNs.
    uint64_t spin_ns = 0;
    // Empty reads of a wait between two yields: kIdleReadsPerYield, or
    // kIdleReadsPerYieldOwnCore for an in-rank rank that has a core of its own.
    uint32_t reads_per_yield = kIdleReadsPerYield;
};

struct IccsFabric {
    fid_fabric fab;
    std::shared_ptr<const MpiMachine> machine;
};

struct IccsDomain {
    fid_domain dom;
    IccsFabric* fabric = nullptr;
    fi_info* info = nullptr;  // a copy of the info it was opened with
    bool thread_safe = true;
    std::mutex mu;
    std::shared_ptr<Attachment> att;
    uint32_t refs = 0;  // endpoints, CQs, AVs open on it
    bool ep_open = false;
    // Progress of the engine and the agent check; the caller holds the lock. Returns the work done.
    uint32_t progress();
    // A CQ read found nothing: the caller polls in a loop (MPI's progress). Every reads_per_yield
    // such reads in a row give the core away once (sched_yield), so the threads this rank waits for
    // (its cluster's bridge and proxies, the peer rank) run on a host with fewer cores than
    // threads; on an idle core the yield returns at once. Reads that come back to back (each
    // within kWaitLoopGapNs of the last: a wait loop, not a program computing between tests) and
    // found nothing for longer than att->spin_ns make the caller block: the return is how long
    // it may sleep on the rank's doorbell (microseconds, outside the domain's lock), 0 to poll on.
    uint64_t idle_read();
    // The caller slept (idle_read's answer): the wait loop goes on.
    void idle_slept();
    // An operation was posted: under FI_THREAD_SAFE another thread may sleep in a CQ read, and
    // what the post completed at once is its to read (one load when nobody sleeps).
    void posted() {
        if (thread_safe) att->engine->wake_self();
    }
    uint32_t idle_reads = 0;
    uint64_t idle_since_ns = 0;  // the first empty read of this wait
    uint64_t last_idle_ns = 0;   // the last empty read
};

// The domain's lock, taken only under FI_THREAD_SAFE.
class DomainLock {
   public:
    explicit DomainLock(IccsDomain* d) : d_(d) {
        if (d_->thread_safe) d_->mu.lock();
    }
    ~DomainLock() {
        if (d_->thread_safe) d_->mu.unlock();
    }
    DomainLock(const DomainLock&) = delete;
    DomainLock& operator=(const DomainLock&) = delete;

   private:
    IccsDomain* d_;
};

struct IccsAv;

// A CQ as the engine sees it (a member, so that IccsCq stays standard-layout: its fid_cq is at
// offset 0 and a fid pointer converts back to it).
struct IccsCq;
struct CqSink final : CompletionSink {
    IccsCq* cq = nullptr;
    bool has_room() const override;
    void push(const Completion& c) override;
};

struct IccsCq {
    fid_cq cq;
    IccsDomain* domain = nullptr;
    fi_cq_format format = FI_CQ_FORMAT_CONTEXT;
    size_t capacity = 0;      // success entries held at most (attr->size)
    size_t successes = 0;     // success entries in q
    std::deque<Completion> q;
    std::string err_text;     // the last error's words (err_data until the next read)
    uint32_t binds = 0;       // endpoints bound to it
    IccsAv* av = nullptr;     // the bound endpoint's AV (fi_cq_readfrom's addresses)
    std::atomic<bool> signaled{false};  // fi_cq_signal: the next sread returns at once
    CqSink sink;
};

inline bool CqSink::has_room() const { return cq->successes < cq->capacity; }
inline void CqSink::push(const Completion& c) {
    if (c.err == 0) ++cq->successes;
    cq->q.push_back(c);
}

struct IccsAv {
    fid_av av;
    IccsDomain* domain = nullptr;
    fi_av_type type = FI_AV_MAP;
    std::vector<uint32_t> ranks;      // table: fi_addr -> rank (UINT32_MAX: removed)
    std::vector<fi_addr_t> by_rank;   // table: rank -> first fi_addr that holds it (readfrom)
    uint32_t binds = 0;
    // The rank an fi_addr names, or kAnyRank when it names none.
    uint32_t rank_of(fi_addr_t a) const;
    fi_addr_t addr_of(uint32_t rank) const;
};

struct IccsEq {
    fid_eq eq;
    IccsFabric* fabric = nullptr;
    // FI_WAIT_FD: an eventfd readable while q holds an event (fi_control FI_GETWAIT hands it out,
    // fi_trywait looks at q); -1 otherwise. sread waits on `filled`.
    int fd = -1;
    std::condition_variable filled;
    std::mutex mu;
    struct Entry {
        uint32_t event;
        std::vector<uint8_t> bytes;
    };
    std::deque<Entry> q;
};

struct IccsEp {
    fid_ep ep;
    IccsDomain* domain = nullptr;
    IccsAv* av = nullptr;
    IccsCq* tx_cq = nullptr;
    IccsCq* rx_cq = nullptr;
    bool tx_selective = false, rx_selective = false;
    uint64_t tx_op_flags = 0, rx_op_flags = 0;
    uint64_t caps = 0;
    bool enabled = false;
};

// Objects' constructors (prov_*.cpp).
int iccs_fabric_open(fi_fabric_attr* attr, fid_fabric** fabric, void* context);
int iccs_domain_open(fid_fabric* fabric, fi_info* info, fid_domain** dom, void* context);
int iccs_eq_open(fid_fabric* fabric, fi_eq_attr* attr, fid_eq** eq, void* context);
// fi_trywait for the fabric: FI_SUCCESS when every fid is an EQ with a wait fd and none holds an
// event, -FI_EAGAIN when one does, -FI_EINVAL for a fid without a wait fd (prov_eq.cpp).
int iccs_trywait(fid_fabric* fabric, fid** fids, int count);
int iccs_cq_open(fid_domain* domain, fi_cq_attr* attr, fid_cq** cq, void* context);
int iccs_av_open(fid_domain* domain, fi_av_attr* attr, fid_av** av, void* context);
int iccs_ep_open(fid_domain* domain, fi_info* info, fid_ep** ep, void* context);

// The machine of this process's run (read once from the environment); nullptr with err.
std::shared_ptr<const MpiMachine> prov_machine(std::string& err);
// A file that comes with the provider: the environment's `env`, else `name` beside this library
// (access() `mode`), else where `meson install` put it.
std::string prov_companion_path(const char* env, const char* name, int mode, const char* installed);
// The agent program: ICCS_MPI_AGENT, else iccs-mpi-agent beside this library, else the one
// `meson install` put in libexecdir.
std::string prov_agent_path();
// A warning through libfabric's log (FI_LOG_LEVEL=warn shows it), and on standard error once per
// process when the user asked for this provider by name (mpi/provider/README.md, "Errors at
// start"): by one process of the run for what every rank finds the same (a bad machine file), by
// any rank for its own failure.
void prov_warn(const char* what, const std::string& line, bool every_rank = false);

// Operation tables whose every entry returns -FI_ENOSYS (prov_noops.cpp): an endpoint's RMA,
// atomics and collectives, which this provider does not offer (fi_read() on it must not crash).
extern fi_ops_rma g_no_rma;
extern fi_ops_atomic g_no_atomic;
extern fi_ops_collective g_no_collective;

// fi_ops entries that say "not supported here".
int iccs_no_control(fid* f, int command, void* arg);
int iccs_no_ops_open(fid* f, const char* name, uint64_t flags, void** ops, void* context);
int iccs_no_bind(fid* f, fid* bf, uint64_t flags);

}  // namespace iccs::mpi
