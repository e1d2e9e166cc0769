// config_views.cpp: what the other parts get from a MachineConfig (config.hpp): the stack's,
// convergence's and the WAN stage's settings, the names of its values, and the dump of every key.

// GCC 12 at -O2/-O3 warns -Wrestrict inside libstdc++ on `"literal" + std::string`, a false
// positive (GCC bug 105329); this file builds its messages that way.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include "config_keys.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>

#include "conv_hdr.hpp"
#include "convergence.hpp"
#include "wan_script.hpp"

namespace iccs {

using namespace config_detail;

// The stack's defaults are the config's defaults (one truth, two units).
static_assert(SlidwinSection{}.snd_buf_datagrams == SlidwinConfig{}.snd_buf_datagrams);
static_assert(SlidwinSection{}.rcv_buf_datagrams == SlidwinConfig{}.rcv_buf_datagrams);
static_assert(SlidwinSection{}.rto_initial_us * 1000 == SlidwinConfig{}.rto_initial_ns);
static_assert(SlidwinSection{}.rto_min_us * 1000 == SlidwinConfig{}.rto_min_ns);
static_assert(SlidwinSection{}.rto_max_us * 1000 == SlidwinConfig{}.rto_max_ns);
static_assert(SlidwinSection{}.delack_us * 1000 == SlidwinConfig{}.delack_ns);
static_assert(SlidwinSection{}.persist_us * 1000 == SlidwinConfig{}.persist_ns);
static_assert(SlidwinSection{}.ack_every == SlidwinConfig{}.ack_every);
static_assert(ReassemblySection{}.max_datagrams == ReassemblyConfig{}.max_datagrams);
static_assert(ReassemblySection{}.max_bytes == ReassemblyConfig{}.max_bytes);
static_assert(ReassemblySection{}.timeout_ms * 1'000'000 == ReassemblyConfig{}.timeout_ns);

std::string_view to_string(Fabric f) {
    switch (f) {
        case Fabric::kMemif: return "memif";
        case Fabric::kAfPacket: return "af_packet";
        case Fabric::kPci: return "pci";
        case Fabric::kUdp: return "udp";
    }
    return "?";
}

std::string_view to_string(UdpChecksum c) { return c == UdpChecksum::kOffOnMemif ? "off-on-memif" : "on"; }

const char* to_string(CollFamily f) { return f == CollFamily::kFlat ? "flat" : "hier"; }

std::string_view to_string(Polling p) {
    switch (p) {
        case Polling::kBusy: return "busy";
        case Polling::kAdaptive: return "adaptive";
        case Polling::kInline: return "inline";
    }
    return "?";
}


uint32_t resolve_proxies(uint32_t proxies_setting, uint32_t compute_threads) {
    if (proxies_setting != kProxiesAuto) return proxies_setting;
    uint32_t p = 1;
    while (p * p < compute_threads) ++p;  // ceil(sqrt), exactly
    return p;
}

void resolve(MachineConfig& cfg) {
    cfg.cluster.proxies_resolved = resolve_proxies(cfg.cluster.proxies, cfg.cluster.compute_threads);
}

uint32_t host_core_count() {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n > 0) return static_cast<uint32_t>(n);
    const unsigned h = std::thread::hardware_concurrency();
    return h > 0 ? h : 1;
}

SlidwinConfig to_slidwin_config(const SlidwinSection& s) {
    SlidwinConfig c;
    c.snd_buf_datagrams = s.snd_buf_datagrams;
    c.rcv_buf_datagrams = s.rcv_buf_datagrams;
    c.rto_initial_ns = s.rto_initial_us * 1000;
    c.rto_min_ns = s.rto_min_us * 1000;
    c.rto_max_ns = s.rto_max_us * 1000;
    c.delack_ns = s.delack_us * 1000;
    c.persist_ns = s.persist_us * 1000;
    c.ack_every = s.ack_every;
    return c;
}

ReassemblyConfig to_reassembly_config(const ReassemblySection& r) {
    ReassemblyConfig c;
    c.max_datagrams = r.max_datagrams;
    c.max_bytes = r.max_bytes;
    c.timeout_ns = r.timeout_ms * 1'000'000;
    return c;
}

std::string_view to_string(Order o) { return o == Order::kOrdered ? "ordered" : "unordered"; }

ConvConfig to_conv_config(const MachineConfig& m) {
    ConvConfig c;
    c.dispatch = m.cluster.dispatch;
    c.ordered = m.convergence.order == Order::kOrdered;
    c.window_bytes = m.convergence.window_bytes;
    c.window_msgs = m.convergence.window_msgs;
    c.stripe_threshold_bytes = m.convergence.stripe_threshold_bytes;
    c.accept_backlog = m.convergence.accept_backlog;
    c.connect_timeout_ms = m.convergence.connect_timeout_ms;
    return c;
}

std::string json_quote(std::string_view s) {
    std::string out = "\"";
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += ch;
        } else if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += ch;
        }
    }
    return out + "\"";
}

std::vector<uint16_t> wan_sites(const MachineConfig& c, uint32_t& sites) {
    std::vector<uint16_t> out;
    sites = 0;
    for (uint32_t i = 0; i < c.machine.clusters; ++i) {
        out.push_back(static_cast<uint16_t>(c.wan.sites.empty() ? i : c.wan.sites[i]));
        sites = std::max<uint32_t>(sites, out.back() + 1u);
    }
    return out;
}

bool to_wan_config(const MachineConfig& c, std::shared_ptr<const WanConfig>& out, std::string& err) {
    out.reset();
    const WanSection& w = c.wan;
    if (w.latency_ms <= 0 && w.bandwidth_bytes_per_s == 0 && w.loss <= 0 && w.links.empty() && w.script.empty() &&
        w.series.empty())
        return true;  // off
    auto cfg = std::make_shared<WanConfig>();
    uint32_t sites = 0;
    cfg->site_of_cluster = wan_sites(c, sites);
    WanLinkParams def;
    def.bw_bytes_per_s = static_cast<double>(w.bandwidth_bytes_per_s);
    def.latency_ns = static_cast<uint64_t>(std::llround(w.latency_ms * 1e6));
    def.loss = w.loss;
    cfg->topo = WanTopology::uniform(sites, def);
    cfg->loss_seed = c.test.seed + 1;  // [test] seed: same seed, same losses
    for (const std::string& s : w.links) {
        LinkSpec l;
        parse_link_spec(s, l);  // validate() checked it
        WanLinkParams p;
        p.present = !l.cut;
        if (!l.cut) {
            p.bw_bytes_per_s = l.bw;
            p.latency_ns = static_cast<uint64_t>(std::llround(l.lat_ms * 1e6));
            p.loss = l.has_loss ? l.loss : w.loss;
        }
        cfg->topo.at(l.a, l.b) = p;
        if (l.both) cfg->topo.at(l.b, l.a) = p;
    }
    if (std::string u = cfg->topo.unreachable(); !u.empty()) {
        err = "config error: [wan] links: " + u;
        return false;
    }
    if (!w.script.empty() && !wan_load_script(w.script, cfg->topo, cfg->script, err)) {
        err = "wan script error: " + err;
        return false;
    }
    if (!w.series.empty() && !wan_load_series(w.series, cfg->topo, cfg->series, err)) {
        err = "wan series error: " + err;
        return false;
    }
    cfg->hold_limit_bytes = w.hold_limit_bytes;
    out = std::move(cfg);
    return true;
}

std::string dump_config(const MachineConfig& cfg) {
    std::string out = "# iccs: the effective configuration (every key; iccs.example.toml says what each means)\n";
    for (const auto section : kSections) {
        out += "\n[" + std::string(section) + "]\n";
        for (const Key& k : keys()) {
            if (k.section != section) continue;
            toml::table t;
            k.put(cfg, t);
            std::string line = std::string(k.name) + " = " + value_text(*t.get(k.name));
            if (k.note)
                if (const std::string note = k.note(cfg); !note.empty()) line += "  # " + note;
            out += line + "\n";
        }
    }
    return out;
}

}  // namespace iccs
