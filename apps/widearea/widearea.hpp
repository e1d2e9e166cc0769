// widearea.hpp: the wide-area application suite's framework (issue 19): programs of Bal, Plaat et
// al. (1997-98) on the cluster runtime (compute/runtime.hpp) and group/, each in two variants
// (original, cluster-aware "optimized"), with counted inter-site traffic and a check against a
// sequential computation made in the same run.
//
// The one idea: a program is an `Instance` per cluster process and variant; the framework starts
// it on every compute thread (`run(Ctx&)`), times the parallel section between barriers, has
// every cluster check its own part of the result against the sequential computation (each
// cluster computes it: no result crosses the emulated WAN), and sums the `Net` counters of every
// cluster: every message a program sends goes through `Net`, which counts it as inter-site
// traffic when its source and destination clusters are in different sites ([wan] sites).
//
// Vocabulary of the study -> iccs: the study's "cluster" is a WAN site; its "processes" are
// compute threads (ranks = cluster * threads + thread). By default each cluster process is its
// own site (`--sites` groups them).
//
// Adding a program: one file defining `std::unique_ptr<Instance> make_NAME(const Setup&)` and one
// entry in the table of registry.cpp (README.md, "Adding a program").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "group.hpp"
#include "runtime.hpp"

namespace iccs::group {
struct OrderedCounters;
}

namespace iccs::widearea {

// The variants of the suite, by name (`--variant NAME`). Which a program has is its registry
// entry's list (Program::variants): original (the program as the study ran it first), optimized
// (the study's own cluster-aware change, where it made one), and our own ideas under their own
// names beside them: exact-halo (sor), async-bcast (acp); grid (ra: Awari's grid changes, issue
// 20, switched by Options::grid_opts).
enum class Variant : uint8_t { kOriginal, kOptimized, kGrid, kExactHalo, kAsyncBcast };
const char* to_string(Variant v);  // "original" | "optimized" | "grid" | "exact-halo" | "async-bcast"
bool parse_variant(std::string_view name, Variant& out);
enum class Size : uint8_t { kTest, kPaper };
const char* to_string(Size s);     // "test" | "paper"
// SOR's stopping rule (`--sor-rule`): the Orca program's (its grid, omega and loose tolerance) or
// our tight one (README.md, "SOR").
enum class SorRule : uint8_t { kOrca, kTight };
const char* to_string(SorRule r);  // "orca" | "tight"

// ---- inter-site traffic counters ---------------------------------------------------------------
//
// Counted the study's way (Orca's RPCs and broadcasts). RPC: a request or a one-way message from
// one thread (or service endpoint) to another; its bytes are the message's payload bytes, plus the
// reply's (counted on the reply's own direction, not as another RPC). Broadcast: every WAN message
// that carries a broadcast: a logical broadcast counts one on each WAN link (site pair) it crosses
// (as a site's gateway forwards it once), with its payload bytes; group/'s ordered broadcast counts
// every WAN message of its protocol (to the sequencer, the sequenced fan-out, a sequencer's
// requests and token passes: the sequencer is part of the broadcast); a collective of group/ counts
// its WAN messages. The totals are the sums over the links. Only traffic between clusters of
// different sites is WAN traffic; `msgs`/`bytes` count every message a program sent (LAN, WAN,
// in-cluster).
struct LinkTraffic {
    uint64_t rpcs = 0, rpc_bytes = 0, bcasts = 0, bcast_bytes = 0;
};
struct Traffic {
    uint16_t sites = 0;
    uint64_t msgs = 0, bytes = 0;                                   // every message sent
    uint64_t wan_rpcs = 0, wan_rpc_bytes = 0, wan_bcasts = 0, wan_bcast_bytes = 0;
    std::vector<LinkTraffic> link;  // [from * sites + to], site indices (group::Topology)
    void add(const Traffic& o);
    std::vector<uint64_t> to_words() const;  // for barrier_gather
    bool from_words(std::span<const uint64_t> w);
};

// One per cluster process and variant: the counted messaging every program uses. Thread-safe in
// the runtime's sense: each endpoint counts into its own slot (compute threads and the service
// endpoint), so a call is made by the thread that owns `from` (a handler passes its `self`).
class Net {
public:
    Net(Runtime& rt, const group::Topology& topo);
    Runtime& runtime() const { return rt_; }
    const group::Topology& topology() const { return topo_; }
    uint16_t site_of(uint16_t cluster) const { return topo_.site_of[cluster]; }
    bool crosses_wan(uint16_t from_cluster, uint16_t to_cluster) const {
        return topo_.site_of[from_cluster] != topo_.site_of[to_cluster];
    }

    // A one-way message (an RPC without reply).
    RtStatus send(RtEndpoint& from, RtAddr dst, uint16_t handler, RtBytes a, RtBytes b = {});
    // A request and its reply (one RPC).
    RtStatus request(RtEndpoint& from, RtAddr dst, uint16_t handler, RtBytes a, RtBytes b,
                     std::vector<uint8_t>& reply, uint64_t timeout_us = kRtForever);
    RtStatus reply(RtEndpoint& from, const ReplyToken& to, RtBytes a, RtBytes b = {});
    // A one-way message that answers an earlier one (a fetch answered by a send): its bytes count
    // with the RPCs', but it is no RPC of its own.
    RtStatus send_reply(RtEndpoint& from, RtAddr dst, uint16_t handler, RtBytes a, RtBytes b = {});
    // One logical broadcast from `from` to every compute thread of every cluster but `from`
    // itself (sent as one message to each; counted once per WAN link it crosses).
    RtStatus bcast(RtEndpoint& from, uint16_t handler, RtBytes a, RtBytes b = {});
    // A logical broadcast carried another way (group/'s ordered broadcast): counted as if from
    // `from`'s site to every other site, `bytes` payload.
    void note_bcast(RtEndpoint& from, uint64_t bytes);
    // Traffic of group/'s collectives (World::counters() of this process) and of group's ordered
    // broadcast carried as RPCs: added to this process's part.
    void add_group(const group::Counters& c);
    void add_rpcs(uint16_t from_site, uint16_t to_site, uint64_t rpcs, uint64_t bytes);
    // group/'s totally ordered broadcast (OrderedBcast::counters() of this process): every WAN
    // message of it is broadcast traffic (to a sequencer, the sequenced fan-out, requests, token
    // passes), as Orca counted its sequencer's messages with its broadcasts.
    void add_ordered(const group::OrderedCounters& c);

    // This process's counters (every slot summed; read when the threads are between calls).
    Traffic traffic() const;

private:
    Traffic& slot(const RtEndpoint& from);
    void count(Traffic& s, uint16_t from_cluster, uint16_t to_cluster, uint64_t bytes, bool rpc);
    // One logical broadcast from site `src` that reached the sites marked in `reached`.
    void count_bcast(Traffic& s, uint16_t src, const std::vector<bool>& reached, uint64_t bytes);
    Runtime& rt_;
    const group::Topology& topo_;
    std::vector<Traffic> slots_;  // threads() compute slots, then the service's, then add_*'s
};

// ---- programs ----------------------------------------------------------------------------------

// The grid variant's changes (`--grid-opts`), a bit each.
enum GridOpt : uint32_t {
    kGridTreeSync = 1, kGridRings = 2, kGridPolling = 4, kGridGrain = 8, kGridAutoflush = 16, kGridAll = 31
};
// "tree-sync,rings,polling,grain,autoflush" (any subset, any order), "all" or "none"; false with
// `err` naming the bad word.
bool parse_grid_opts(const std::string& s, uint32_t& out, std::string& err);
std::string grid_opts_string(uint32_t opts);  // "tree-sync,rings,..." or "none"

struct Options {
    std::vector<Variant> variants{Variant::kOriginal};  // --variant NAME[,NAME...]|both|all
    Size size = Size::kTest;
    bool inject_error = false;     // corrupt the parallel result before the check (it must FAIL)
    uint64_t seed = 1;             // inputs are generated from it, the same in every cluster
    uint64_t timeout_ms = 120'000; // a wait (message, barrier) longer than this fails the run
    std::string result_file;       // cluster 0 writes one JSON object per variant, one a line
    uint32_t grid_opts = kGridAll; // the grid variant's changes (GridOpt bits)
    SorRule sor_rule = SorRule::kOrca;  // sor's grid, omega and stopping rule
};

// What a program's factory gets (per cluster process and variant). Handler ids: the program's
// own are handler_base .. handler_base + 19; a group::World takes group_base (group_base .. +1), an
// OrderedBcast ordered_base (.. +3), a Replicated replicated_base (.. +3): each variant of a launch
// has its own block (run_cluster). Make handlers and group objects in the factory: it runs before
// the run's first barrier.
struct Setup {
    Runtime& rt;
    Net& net;
    const group::Topology& topo;
    const Options& opt;
    Variant variant;
    uint16_t handler_base, group_base, ordered_base, replicated_base;
    // The same slot for every variant of this process: a program may keep its sequential
    // reference here (computed once, shared by `--variant both`).
    std::shared_ptr<void>& shared;
    // A shape the program cannot run (more ranks than rows, ...): say why here; every cluster
    // decides the same from the same inputs, and the run ends before it starts (FAIL, exit 1).
    std::string& refuse;
};

// Thread t's view of the run, given to Instance::run.
struct Ctx {
    Runtime& rt;
    RtEndpoint& ep;
    Net& net;
    const group::Topology& topo;
    const Options& opt;
    Variant variant;
    uint16_t cluster, thread, threads, clusters;
    uint32_t rank, ranks;  // rank = cluster * threads + thread

    bool optimized() const { return variant == Variant::kOptimized; }
    RtAddr addr_of(uint32_t r) const { return RtAddr{static_cast<uint16_t>(r / threads), static_cast<uint16_t>(r % threads)}; }
    uint16_t site() const { return topo.site_of[cluster]; }
    uint16_t site_of_rank(uint32_t r) const { return topo.site_of_rank(r); }
    // Counted sends from this thread.
    RtStatus send(RtAddr dst, uint16_t handler, RtBytes a, RtBytes b = {}) { return net.send(ep, dst, handler, a, b); }
    RtStatus request(RtAddr dst, uint16_t handler, RtBytes a, RtBytes b, std::vector<uint8_t>& reply) {
        return net.request(ep, dst, handler, a, b, reply, opt.timeout_ms * 1000);
    }
    RtStatus bcast(uint16_t handler, RtBytes a, RtBytes b = {}) { return net.bcast(ep, handler, a, b); }
    // Waits (running this thread's handlers) until done(); false after Options::timeout_ms, with
    // the reason recorded by fail("waiting for WHAT: ...").
    bool wait(const std::function<bool()>& done, const char* what);
    bool barrier();  // every compute thread of every cluster; false (and fail) on time-out
    // The first failure of this thread ("" when none). A failing thread returns from run() false.
    bool fail(const std::string& why);
    std::string error;
};

// A program's check of this cluster's part of the result.
struct Check {
    bool ok = true;
    std::string what;     // every comparison made: what, the error found, the tolerance ("; "-separated)
    std::string failure;  // on failure: what differed (the element, its value and the reference's)
    double error = 0;     // the largest error found (for the report)
};

class Instance {
public:
    virtual ~Instance() = default;
    // Thread ctx.thread's share of the parallel run; every compute thread of every cluster calls
    // it between two barriers (the timed parallel section). False: ctx.fail said why.
    virtual bool run(Ctx& ctx) = 0;
    // The sequential computation of the same problem (on thread 0 of each cluster, after the run;
    // cluster 0's is timed: the speedup's base). Keep it in Setup::shared to compute it once.
    virtual void sequential() = 0;
    // This cluster's part of the parallel result against the sequential one (thread 0, after
    // sequential()).
    virtual Check check() = 0;
    // --inject-error: corrupt this cluster's part of the parallel result so that check() fails
    // (called on cluster 0 only, before check()).
    virtual void inject_error() = 0;
    // Called on thread 0 after the run, before the traffic is read: add traffic carried outside
    // Net (group/ collectives: net.add_group(world.counters())).
    virtual void account(Net& net) { (void)net; }
    // JSON members (without braces, e.g. "\"n\":130,\"iterations\":412") describing the problem
    // and how the run went, from cluster 0; and one line of words for the text report.
    virtual std::string stats_json() const { return ""; }
    virtual std::string problem() const = 0;
};

// One variant a program has: which, and one line on what it does (the registry's, for --help).
struct VariantInfo {
    Variant id;
    const char* help;
};

struct Program {
    const char* name;   // iccs run NAME
    const char* help;   // one line: the communication pattern
    const char* sizes;  // one line: test and paper sizes
    std::unique_ptr<Instance> (*make)(const Setup& s);
    std::span<const VariantInfo> variants;  // the first is original; `--variant all` runs every one but grid
    // Why `optimized` is not among the variants (the study made no change to this program), or "".
    const char* no_optimized = "";
    // A caveat for tables beside the study's (water-wa: the communication pattern only), or "".
    const char* caveat = "";
    bool has(Variant v) const;
};

// The registered programs (registry.cpp), in table order.
std::span<const Program> programs();
const Program* find_program(std::string_view name);

// The part of `iccs run NAME` that runs in every cluster process (a runtime built-in program):
// every variant of o.variants in turn on every compute thread, then the checks and the counters
// summed over the clusters; cluster 0 prints the report and writes o.result_file. Returns
// runtime_finish's status (0 only when every variant of every cluster passed).
int run_cluster(std::unique_ptr<Runtime> rt, const group::Topology& topo, const Program& p, const Options& o);

}  // namespace iccs::widearea
