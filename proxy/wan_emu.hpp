// wan_emu.hpp: the wide-area emulation stage of a receiving proxy (DESIGN.md §10, the Panda WAN
// emulator), as pure logic: no DPDK, no clock of its own (every call takes `now`), so the timing
// is unit-tested with an injected clock.
//
// The one idea: clusters are grouped into sites; a message from a cluster of another site is held
// until its emulated arrival time and only then delivered. Per directed site link (a -> b):
//
//   start     = max(t, link.free_at)              the link is busy with earlier messages (queueing)
//   link.free_at = start + len / bandwidth_share  serialization: messages queue on the link
//   out       = max(link.free_at + latency, link.last_out)   clamped: a link is FIFO, also when
//   link.last_out = out                                       its latency drops at run time
//
// with t = now for the first hop. A missing link (cut) routes through other sites: the path from
// site s to our site is the fewest-hop path over present links, and the hops apply in turn (t = the
// previous hop's out), so relayed traffic congests the links it crosses *as this proxy sees them*.
// Held messages wait in one FIFO per source site (their arrivals are monotone: clamped per source),
// so a sub-connection's messages stay in order.
//
// Approximation (documented in proxy/README.md): every receiving proxy emulates the links with its
// own traffic only, at bandwidth / share_divisor (the number of proxies of this site that receive
// inter-site traffic); exact for one proxy per site, fair when the load spreads evenly.
// Length charged: the application's payload of a message (the convergence header is not charged).
// Loss: a per-link probability applied to frames before slidwin (see lose()).
// Threading: `_st`: only the proxy thread that owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace iccs {

inline constexpr uint32_t kWanMaxSites = 64;

struct WanLinkParams {
    double bw_bytes_per_s = 0;  // 0: unlimited (no serialization delay)
    uint64_t latency_ns = 0;    // one way
    bool present = true;        // false: the link is cut; traffic routes through other sites
    double loss = 0;            // probability that a frame crossing the link is lost (0..1)
    friend bool operator==(const WanLinkParams&, const WanLinkParams&) = default;
};

// Every directed link between sites: params[a * sites + b] (a == b unused).
struct WanTopology {
    uint32_t sites = 1;
    std::vector<WanLinkParams> params;
    WanLinkParams& at(uint32_t a, uint32_t b) { return params[size_t{a} * sites + b]; }
    const WanLinkParams& at(uint32_t a, uint32_t b) const { return params[size_t{a} * sites + b]; }
    // All links set to `p`.
    static WanTopology uniform(uint32_t sites, const WanLinkParams& p);
    // Fewest-hop path of link ids (a * sites + b) from `from` to `to` over present links, ties to
    // the lowest intermediate site; empty when from == to or when `to` cannot be reached.
    std::vector<uint32_t> path(uint32_t from, uint32_t to) const;
    // "" when every site reaches every other, else which pair does not.
    std::string unreachable() const;
};

// One step of a driver program (script or measured series: wan_script.hpp compiles both to this).
struct WanOp {
    enum Kind : uint8_t {
        kSleep,     // wait `ns` from the previous step's scheduled time
        kSet,       // link a -> b gets `params` (its loss only when with_loss: else it keeps its own)
        kLoss,      // link a -> b gets params.loss; bandwidth and latency stay
        kScenario,  // every link gets `topo` (a scenario file: config defaults + its lines)
        kJump,      // go to op `target` (forever)
    } kind = kSleep;
    uint64_t ns = 0;
    uint32_t a = 0, b = 0;
    WanLinkParams params;
    uint32_t target = 0;
    uint32_t scenario = 0;  // index into WanProgram::scenarios
    bool with_loss = false;
};

struct WanProgram {
    std::vector<WanOp> ops;
    std::vector<WanTopology> scenarios;
    std::string source;  // the file it came from (for messages and telemetry)
    bool empty() const { return ops.empty(); }
};

// How the parameters are driven (switchable at run time).
enum class WanMode : uint8_t { kConstant, kScript, kSeries, kLive };
const char* to_string(WanMode m);

struct WanConfig {
    std::vector<uint16_t> site_of_cluster;  // by cluster id
    WanTopology topo;                       // the constant parameters (config)
    WanProgram script, series;              // empty: none
    uint64_t hold_limit_bytes = 8u << 20;   // held messages' buffers (2 KiB a segment) at most
    uint64_t loss_seed = 1;  // seed of the loss draws (mixed with the cluster and proxy index)
    // Proxies of every cluster: a receiving proxy emulates bandwidth / D, D = the proxies of its
    // site that receive inter-site traffic (sum over its site's clusters of min(their proxies, the
    // most proxies of a cluster elsewhere): proxy p sends to remote proxy p mod their count).
    std::vector<uint16_t> proxies_per_cluster;  // empty: D = 1
};

// Per link, as counted by one receiving proxy.
struct WanLinkCounters {
    uint64_t msgs = 0, bytes = 0;
    uint64_t queue_ns_sum = 0, queue_ns_max = 0;  // waiting for the link to be free (per hop)
    uint64_t changes = 0;                          // parameter changes applied
    uint64_t dropped = 0;                          // frames lost on this link (loss), before slidwin
};

// A parameter change, for the change log (telemetry: when a script's steps took effect).
struct WanChange {
    uint64_t at_ns = 0;  // since the emulator started
    uint32_t a = 0, b = 0;
    WanLinkParams params;
};

class WanEmulator_st {
   public:
    WanEmulator_st(const WanConfig& cfg, uint16_t my_cluster, uint64_t now_ns);

    uint16_t site_of(uint16_t cluster) const {
        return cluster < cfg_.site_of_cluster.size() ? cfg_.site_of_cluster[cluster] : my_site_;
    }
    uint16_t my_site() const { return my_site_; }
    // True when a message from `cluster` crosses an emulated link.
    bool remote(uint16_t cluster) const { return site_of(cluster) != my_site_; }

    // Hold `item` (len payload bytes, `segs` buffers) from a cluster of site `src_site` arriving
    // now. False, with nothing changed, when the hold limit is reached (retry later: backpressure).
    bool hold(uint16_t src_site, void* item, uint32_t len, uint32_t segs, uint64_t now_ns);
    // The emulated arrival a message would get (and the link state it would leave): the timing
    // alone, for tests and hold().
    uint64_t arrival(uint16_t src_site, uint32_t len, uint64_t now_ns);

    // Loss (WanLinkParams::loss): decided per frame (or datagram, fabric udp) *below* slidwin, so a
    // lost frame is never acked and slidwin's retransmission recovers the datagram, as on a real
    // lossy link (the hold stage above sits after slidwin's ack: dropping there would lose data).
    // Each hop of the path from `src_site` draws once; the first hop that loses it counts it in its
    // `dropped`. lossy(): some link into this site loses (else the proxy skips the per-frame look).
    bool lossy() const { return lossy_; }
    bool lose(uint16_t src_site);

    // The oldest held message that is due at now_ns (nullptr: none); pop_due() takes it.
    void* peek_due(uint64_t now_ns, uint16_t& src_site) const;
    void pop(uint16_t src_site);
    // Earliest time something is due: the first held arrival or the driver's next step; UINT64_MAX: none.
    uint64_t next_event_ns() const;
    uint64_t held_msgs() const { return held_msgs_; }
    uint64_t held_bytes() const { return held_bytes_; }
    // Everything still held (teardown frees them).
    template <typename Fn>
    void drain_all(Fn&& fn) {
        for (auto& q : queues_)
            for (const Held& h : q) fn(h.item);
        for (auto& q : queues_) q.clear();
        held_msgs_ = held_bytes_ = held_segs_ = 0;
    }

    // Parameters: a live change, or a driver step. Paths are recomputed when a link is cut or
    // comes back.
    void set_link(uint32_t a, uint32_t b, const WanLinkParams& p, uint64_t now_ns);
    void set_all(const WanTopology& t, uint64_t now_ns);
    // Switch what drives the parameters: constant (back to the config's values, no driver),
    // script / series (restart that program from its first step), live (keep the values, no driver).
    // False when the program is not configured.
    bool set_mode(WanMode m, uint64_t now_ns);
    WanMode mode() const { return mode_; }
    // The clock starts again at now_ns (change times count from here) and the driver restarts
    // from its first step: the proxy calls it when its links are up and its loop begins.
    void restart(uint64_t now_ns);
    // Run the driver's steps that are due.
    void drive(uint64_t now_ns);

    const WanTopology& topology() const { return topo_; }
    const WanLinkCounters& counters(uint32_t a, uint32_t b) const { return ctr_[size_t{a} * topo_.sites + b]; }
    // Links this proxy emulates (on a path into its site), as (a, b).
    std::vector<std::pair<uint32_t, uint32_t>> used_links() const;
    const std::deque<WanChange>& changes() const { return changes_; }
    static constexpr size_t kChangeLog = 64;  // most recent changes kept
    const WanConfig& config() const { return cfg_; }
    uint32_t share_divisor() const { return share_divisor_; }

   private:
    struct Held {
        uint64_t at_ns;
        void* item;
        uint32_t len, segs;
    };
    struct LinkState {
        uint64_t free_at = 0, last_out = 0;
    };
    void recompute_paths();  // also recomputes lossy_
    double unit_draw();      // uniform in [0, 1) (splitmix64: cheap, seeded, reproducible)
    void log_change(uint32_t a, uint32_t b, const WanLinkParams& p, uint64_t now_ns);

    WanConfig cfg_;
    uint16_t my_site_;
    uint32_t share_divisor_ = 1;
    uint64_t start_ns_;
    WanTopology topo_;
    std::vector<LinkState> state_;
    std::vector<WanLinkCounters> ctr_;
    std::vector<std::vector<uint32_t>> paths_;  // by source site: link ids into my site
    std::vector<std::deque<Held>> queues_;      // by source site
    std::vector<uint64_t> last_arrival_;        // by source site (FIFO clamp)
    uint64_t held_msgs_ = 0, held_bytes_ = 0, held_segs_ = 0;
    std::deque<WanChange> changes_;
    WanMode mode_ = WanMode::kConstant;
    const WanProgram* prog_ = nullptr;  // the running driver (script or series), or none
    uint32_t pc_ = 0;
    uint64_t next_step_ns_ = UINT64_MAX;
    bool lossy_ = false;
    uint64_t rng_state_ = 0;
};

}  // namespace iccs
