// config.hpp: the configuration of a machine (DESIGN.md §5): one typed struct, its defaults, and
// the start-up path that fills it from a TOML file and command-line flags.
//
// The one idea: every key is described once (in config.cpp's key table: section, name, range or
// allowed values, one line of documentation), and that table drives everything else: reading the
// file, applying a flag, re-checking a config built in code, printing the effective config, and
// the messages. A wrong key or value stops start-up with one line that names the place, the key,
// the value and what is allowed:
//
//   config error: iccs.toml:4: [cluster] polling = "fast": allowed values are busy, adaptive, inline
//   config error: iccs.toml:7: unknown key [cluster] proxy_core (did you mean proxy_cores?)
//   config error: command line: [machine] clusters = "two": expected an integer from 1 to 64
//
// The defaults are the member initializers below; iccs.example.toml at the repository root lists
// every key with its default, unit and allowed values (a unit test checks that it loads to exactly
// these defaults). Start-up only: this file allocates, throws and catches inside; nothing here is
// for the data path.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipv4_hdr.hpp"
#include "ipv4_reassemble.hpp"
#include "polling.hpp"  // proxy/: enum class Polling, shared with the proxy loop
#include "dispatch.hpp"
#include "wan_emu.hpp"  // proxy/: the WAN emulation stage this section configures
#include "slidwin.hpp"
#include "runtime.hpp"  // enum class RtTransport ([runtime] transport)

namespace iccs {

// What carries frames between proxies (DESIGN.md §1 "fabric").
enum class Fabric {
    kMemif,     // "memif": DPDK net_memif shared-memory links (one host; the default)
    kAfPacket,  // "af_packet": DPDK net_af_packet on veth/bridge in network namespaces
    kPci,       // "pci": real NIC ports bound to DPDK, listed in [machine] pci_addresses
    kUdp,       // "udp": kernel UDP sockets driven by io_uring (no DPDK port; any host)
};
// How a proxy waits for work (DESIGN.md §2 "Polling"): enum class Polling, in proxy/polling.hpp.

// Whether the proxies' stacks sum their UDP datagrams (stack/README.md "UDP checksum").
enum class UdpChecksum {
    kOn,          // "on": every datagram carries its checksum and is checked (the default)
    kOffOnMemif,  // "off-on-memif": fabric memif only (shared memory, no wire to corrupt a frame),
                  // datagrams go with checksum 0 (RFC 768: none) and such datagrams are not checked
};
std::string_view to_string(UdpChecksum c);

// How a compute thread picks its local proxy (DESIGN.md §1 "dispatch"): enum class Dispatch,
// in convergence/dispatch.hpp.
std::string_view to_string(Fabric f);
std::string_view to_string(Polling p);
// fabric af_packet: the largest IP packet its kernel ring's frames hold (framesz 2048 bytes in
// cluster.cpp, the Ethernet header written 66 bytes in); a larger mtu_bytes is refused.
inline constexpr uint32_t kAfPacketMaxMtuBytes = 1968;

// [cluster] proxies as written: 1..64, or this value for "auto".
inline constexpr uint32_t kProxiesAuto = 0;
// "auto" = ceil(sqrt(compute_threads)): 1 -> 1, 2..4 -> 2, 5..9 -> 3, 10..16 -> 4, ...
uint32_t resolve_proxies(uint32_t proxies_setting, uint32_t compute_threads);

struct MachineSection {
    uint32_t clusters = 2;                     // clusters in the machine (1..64)
    Fabric fabric = Fabric::kMemif;            // what joins the proxies
    uint32_t mtu_bytes = 1500;                 // IPv4 MTU: largest IP packet on the fabric [bytes] (576..9000)
    Ipv4Addr base_ip{0x0a000000};              // 10.0.0.0: proxy p of cluster c is base + 256*c + p + 1
    uint16_t udp_port = 9410;                  // UDP port the proxies' stacks use (1..65535); fabric udp:
                                               // proxy p of cluster c binds udp_port + 64*c + p
    std::vector<Ipv4Addr> udp_addresses{};     // fabric udp: socket addresses: none (127.0.0.1), one per
                                               // cluster, or one per proxy of all clusters; else ignored
    bool udp_sqpoll = false;                   // fabric udp: SQPOLL rings (a kernel thread polls each; needs a spare core)
    bool memif_zero_copy = false;              // fabric memif: each link's client end receives into (and
                                               // sends from) its own buffers, which its peer copies to
                                               // and from: one copy a frame instead of two
    UdpChecksum udp_checksum = UdpChecksum::kOn;  // "off-on-memif": no UDP checksum on memif links
    std::vector<std::string> pci_addresses{};  // NIC ports for fabric = pci ("0000:03:00.0"); else ignored
    std::string pcap_dir{};                    // capture every proxy's frames to DIR/cluster<C>-proxy<P>.pcapng
                                               // ("" = off; DPDK fabrics only, not udp)
    uint64_t pcap_max_bytes = 64ull << 20;     // size limit of each capture file [bytes]; capture stops there
    friend bool operator==(const MachineSection&, const MachineSection&) = default;
};

struct ClusterSection {
    uint32_t compute_threads = 2;           // application threads per cluster (1..256)
    uint32_t proxies = kProxiesAuto;        // proxies per cluster as set: 1..64 or kProxiesAuto
    uint32_t proxies_resolved = 2;          // proxies per cluster the run uses (see resolve())
    std::vector<uint32_t> proxy_cores{};    // proxy p of a cluster on core proxy_cores[p]; rest spread
    Polling polling = Polling::kAdaptive;   // how proxies wait for work
    Dispatch dispatch = Dispatch::kRoundRobin;  // how a compute thread picks its proxy
    uint32_t ring_entries = 1024;           // each compute-thread <-> proxy ring [entries] (2^n, 64..65536)
    uint32_t mempool_mbufs = 8192;          // packet buffers per proxy [mbufs] (1024..1048576)
    uint32_t peer_timeout_ms = 5000;        // a cluster silent this long is reported down [ms] (0 = never)
    uint32_t combine_max_bytes = 256;       // messages up to this size (header included) that meet in a
                                            // ring burst for the same remote proxy share a datagram (0 = off)
    bool assist = true;                     // adaptive: waiting compute threads run their proxies' loop
                                            // themselves (proxy/README.md "Polling")
    friend bool operator==(const ClusterSection&, const ClusterSection&) = default;
};

// The sliding-window protocol of every sub-connection (stack/slidwin.hpp; there in ns, here in us).
struct SlidwinSection {
    uint32_t snd_buf_datagrams = 1024;  // sent but unacked datagrams held [datagrams] (2^n, 16..32768)
    uint32_t rcv_buf_datagrams = 1024;  // receive buffer = largest window [datagrams] (2^n, 16..32768)
    uint64_t rto_initial_us = 10'000;   // retransmission timeout before the first RTT sample [us]
    uint64_t rto_min_us = 1'000;        // smallest retransmission timeout [us]
    uint64_t rto_max_us = 1'000'000;    // backoff stops doubling here [us]
    uint64_t delack_us = 50;            // longest an ack waits for data to ride on [us]
    uint64_t persist_us = 10'000;       // zero-window probe interval [us]
    uint32_t ack_every = 2;             // ack at once after this many in-order datagrams (1..256)
    friend bool operator==(const SlidwinSection&, const SlidwinSection&) = default;
};

// IPv4 reassembly bounds of every stack (stack/ipv4_reassemble.hpp).
struct ReassemblySection {
    uint32_t max_datagrams = 64;       // partial datagrams held at once (1..65536)
    uint32_t max_bytes = 4u << 20;     // fragment storage held [bytes] (65536..1073741824)
    uint64_t timeout_ms = 1000;        // a partial datagram is dropped after this [ms] (1..60000)
    friend bool operator==(const ReassemblySection&, const ReassemblySection&) = default;
};


// Parallel connections (convergence/convergence.hpp): defaults of every compute thread's module.
enum class Order { kOrdered, kUnordered };
std::string_view to_string(Order o);
struct ConvergenceSection {
    Order order = Order::kOrdered;           // "ordered" | "unordered" delivery
    uint32_t window_bytes = 8u << 20;        // bytes a receiver holds unconsumed per connection [bytes]
    uint32_t window_msgs = 4096;             // messages a receiver holds unconsumed per connection
    uint32_t stripe_threshold_bytes = 0;     // larger messages are cut into pieces [bytes]; 0 = one MTU's payload
    uint32_t accept_backlog = 64;            // connections a listener holds before accept()
    uint32_t connect_timeout_ms = 5000;      // connect() gives up after this [ms]
    friend bool operator==(const ConvergenceSection&, const ConvergenceSection&) = default;
};

// Fault injection on the proxy's receive path, for tests (0 = off).
struct TestSection {
    double drop = 0.0;            // probability a received frame is dropped (0..1)
    double duplicate = 0.0;       // probability a received frame is delivered twice (0..1)
    uint32_t reorder_window = 0;  // frames held back and released out of order (0..1024)
    uint64_t seed = 0;            // seed of the injected faults: same seed, same faults
    uint32_t slow_proxy = 0;      // which proxy of every cluster slow_proxy_us slows
    uint32_t slow_proxy_us = 0;   // that proxy pauses this long after each busy iteration [us] (0 = off)
    friend bool operator==(const TestSection&, const TestSection&) = default;
};

// WAN emulation (DESIGN.md §10, proxy/wan_emu.hpp): clusters grouped into sites; a receiving
// proxy holds each message from another site until its emulated arrival. Off (no cost but one
// branch) while every link has latency 0, bandwidth 0 (unlimited), no loss, none is cut, and there
// is no script or series.
struct WanSection {
    std::vector<uint32_t> sites{};            // site of each cluster (0..63); [] = every cluster its own site
    double latency_ms = 0.0;                  // one-way latency of every inter-site link [ms]
    uint64_t bandwidth_bytes_per_s = 0;       // bandwidth of every inter-site link [bytes/s] (0 = unlimited)
    double loss = 0.0;                        // probability that a frame on an inter-site link is lost
    std::vector<std::string> links{};         // per-link overrides: "A->B BW LAT_MS [LOSS]",
                                              // "A<->B BW LAT_MS [LOSS]", "A->B cut", "A<->B cut"
    std::string script{};                     // path of a script driving the parameters ("" = none)
    std::string series{};                     // path of a measured time series replayed ("" = none)
    uint64_t hold_limit_bytes = 8u << 20;     // buffers a proxy holds for the WAN stage [bytes]
    friend bool operator==(const WanSection&, const WanSection&) = default;
};

// The cluster runtime (compute/runtime.hpp): defaults of `iccs run exchange|ping|PATH` and of
// processes started by mpirun/srun; --transport / --delay-us and ICCS_TRANSPORT override them.
const char* to_string(RtTransport t);
struct RuntimeSection {
    RtTransport transport = RtTransport::kIccs;  // "iccs" | "direct" | "delay"
    uint64_t delay_us = 0;                       // transport delay: every message held this long [us]
    friend bool operator==(const RuntimeSection&, const RuntimeSection&) = default;
};

// Only the run's own peers get in (issue 17; stack/slidwin_auth.hpp). Without a key, run tokens
// and random sequence numbers keep out whoever cannot see the traffic; with one, every datagram
// is authenticated (and, with encrypt, its payload hidden). ICCS_KEY_FILE overrides key_file.
struct SecuritySection {
    std::string key_file{};  // shared key: a file of 32..4096 random bytes, mode 0600 ("" = none)
    bool encrypt = false;    // with a key: AES-GCM hides the payload too (else a MAC only)
    friend bool operator==(const SecuritySection&, const SecuritySection&) = default;
};

// group/'s collectives (group/README.md): the family a call that names none uses, and the segment
// size of long messages. group::options_from_config() turns this into group::Options.
enum class CollFamily : uint8_t { kHier, kFlat };
const char* to_string(CollFamily f);  // "hier" | "flat"
struct GroupSection {
    CollFamily family = CollFamily::kHier;  // "hier" (MagPIe: cluster, site, WAN) | "flat" (grid-unaware)
    uint32_t segment_bytes = 64u << 10;     // longer messages go as segments of this size [bytes]
    friend bool operator==(const GroupSection&, const GroupSection&) = default;
};

struct MachineConfig {
    MachineSection machine;
    ClusterSection cluster;
    SlidwinSection slidwin;
    ReassemblySection reassembly;
    ConvergenceSection convergence;
    TestSection test;
    WanSection wan;
    RuntimeSection runtime;
    SecuritySection security;
    GroupSection group;
    friend bool operator==(const MachineConfig&, const MachineConfig&) = default;
};

// Either a config or one error line ("config error: ...").
struct ConfigResult {
    std::optional<MachineConfig> config;
    std::string error;
    bool ok() const { return config.has_value(); }
};

// The start-up path of a command: the file at `path` (the defaults when `path` is empty), then
// each flag in order (dotted key, value; see apply_override), then validate(). Flags override
// the file; the cross-field checks run once, on the result.
ConfigResult configure(const std::string& path,
                       const std::vector<std::pair<std::string, std::string>>& overrides = {});

// Reads TOML text: every key checked, unknown sections and keys refused, proxies resolved, then
// validate(). `source_name` is what messages call the text (a path, "iccs.toml").
ConfigResult load_config(const std::string& toml_text, const std::string& source_name);
// The same for a file; a missing or unreadable file is an error naming the path.
ConfigResult load_config_file(const std::string& path);

// Sets one key from a command-line flag: `dotted_key` is "section.key" ("cluster.polling"), or a
// bare key name that belongs to one section only ("polling"); `value` is the flag's text ("busy",
// "3", "auto", "0.01", and for arrays "1,2" or "[1, 2]"). The same checks and messages as the file;
// `source` starts the message ("command line", or the flag as typed: "--polling"). On an error
// `cfg` is unchanged. Re-resolves proxies; the cross-field checks are validate()'s, run after the
// last flag.
std::optional<std::string> apply_override(MachineConfig& cfg, const std::string& dotted_key, const std::string& value,
                                          const std::string& source = "command line");

// Recomputes the derived fields (cluster.proxies_resolved) after fields were set in code.
void resolve(MachineConfig& cfg);

// Every key re-checked against its range (so a config built in code is held to the file's rules),
// then the rules between keys:
//   - cluster.proxies_resolved matches proxies and compute_threads (call resolve() after edits);
//   - slidwin: rto_min_us <= rto_initial_us <= rto_max_us, delack_us < rto_min_us (an ack must come
//     before the peer's shortest timeout), ack_every <= rcv_buf_datagrams;
//   - machine.base_ip: every proxy address (base + 256*c + p + 1) stays in base's /24 per cluster,
//     below 224.0.0.0 (no multicast);
//   - fabric = "pci": pci_addresses has one entry per proxy of one cluster (proxies_resolved: one
//     cluster per host) or of all clusters (clusters * proxies_resolved: all on this host, cluster c
//     proxy p takes entry c * proxies_resolved + p), with no address twice;
//   - fabric = "udp": udp_addresses has 0 entries (every proxy on 127.0.0.1), one per cluster, or
//     one per proxy of all clusters (cluster c proxy p takes entry c * proxies_resolved + p), and
//     the last socket port, udp_port + 64 * (clusters - 1) + proxies_resolved - 1, is <= 65535.
// proxy_cores may have any length: proxy p of a cluster is pinned to proxy_cores[p] (the list is
// the same for every cluster on the host); proxies beyond the list are spread over the host's
// cores, entries beyond the proxies are unused. Returns the first error, as one line.
std::optional<std::string> validate(const MachineConfig& cfg);

// The effective configuration as TOML: every key of every section, in the order of the example
// file, with resolved values in comments (`proxies = "auto"  # = 2`). load_config(dump_config(c))
// gives back c for any valid c.
std::string dump_config(const MachineConfig& cfg);

// The key table, for help texts and tests: section, key, what is allowed, one line of doc.
struct ConfigKeyDoc {
    std::string_view section;
    std::string_view key;
    std::string_view allowed;
    std::string_view doc;
};
const std::vector<ConfigKeyDoc>& config_key_docs();

// Cores of this host (online processors): proxy_cores entries must be below this.
uint32_t host_core_count();

// Proxy p of cluster c (both from 0): machine.base_ip + 256*c + p + 1.
inline Ipv4Addr proxy_ip(const MachineConfig& cfg, uint32_t cluster, uint32_t proxy) {
    return Ipv4Addr{cfg.machine.base_ip.v + 256u * cluster + proxy + 1u};
}

// fabric udp: the socket of proxy p of cluster c. Its port is udp_port + 64*c + p (distinct on
// one host: at most 64 proxies per cluster); its address is 127.0.0.1 when udp_addresses is
// empty, udp_addresses[c] with one entry per cluster, udp_addresses[c * proxies + p] with one per proxy.
inline uint16_t udp_socket_port(uint16_t udp_port, uint32_t cluster, uint32_t proxy) {
    return static_cast<uint16_t>(udp_port + 64u * cluster + proxy);
}
inline Ipv4Addr udp_socket_ip(const std::vector<Ipv4Addr>& addresses, uint32_t clusters, uint32_t proxies,
                              uint32_t cluster, uint32_t proxy) {
    // One index and one bounds check at the one read: with a guarded read per layout, GCC 12 inlined
    // this into a caller holding 3 entries and warned (-Warray-bounds) of the per-proxy read at [5],
    // on a path that needs size() == 6 and so never runs there.
    const size_t n = addresses.size();
    const size_t i = n == clusters                     ? size_t{cluster}
                     : n == size_t{clusters} * proxies ? size_t{cluster} * proxies + proxy
                                                       : n;  // none given (validate() refuses other counts)
    return i < n ? addresses[i] : Ipv4Addr{0x7f000001};
}

// The WAN stage's setup: sites, constant parameters, the script or series read and compiled
// (their errors name file and line). `out` stays null when the stage is off (see WanSection).
// Reads files: start-up only. False with err.
bool to_wan_config(const MachineConfig& c, std::shared_ptr<const WanConfig>& out, std::string& err);
// `s` as a JSON (and TOML basic) string literal: quotes, backslashes and control characters escaped.
std::string json_quote(std::string_view s);

// The site of every cluster ([wan] sites, or the cluster id), and the number of sites.
std::vector<uint16_t> wan_sites(const MachineConfig& c, uint32_t& sites);

// The stack's own config structs, from the sections (us and ms become ns).
SlidwinConfig to_slidwin_config(const SlidwinSection& s);
ReassemblyConfig to_reassembly_config(const ReassemblySection& r);
// The convergence modules' settings (dispatch comes from [cluster]).
struct ConvConfig;
ConvConfig to_conv_config(const MachineConfig& c);

}  // namespace iccs
