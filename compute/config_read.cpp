// config_read.cpp: a MachineConfig from a TOML file and command-line flags (config.hpp), checked
// key by key against the key table (config_keys.hpp), then as a whole once (validate).

// GCC 12 at -O2/-O3 warns -Wrestrict inside libstdc++ on `"literal" + std::string`, a false
// positive (GCC bug 105329); this file builds its messages that way.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include "config_keys.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <tuple>

namespace iccs {

using namespace config_detail;

namespace {

Problem problem_at_key(const toml::key& k, std::string text) {
    return Problem{k.source().begin.line, k.source().begin.column, std::move(text)};
}

// Every key of the document into cfg; every problem found.
std::vector<Problem> read_document(MachineConfig& cfg, const toml::table& root) {
    std::vector<Problem> out;
    for (auto&& [sk, sv] : root) {
        const std::string_view section = sk.str();
        if (sv.is_array_of_tables()) {
            out.push_back(problem_at_key(
                sk, "[[" + std::string(section) + "]]: " +
                        (is_section(section) ? "[" + std::string(section) + "] is a single section, not an array"
                                             : unknown_section_text(section))));
            continue;
        }
        const toml::table* tbl = sv.as_table();
        if (!tbl) {
            out.push_back(problem_at_key(sk, is_section(section) ? "[" + std::string(section) + "] = " +
                                                                       value_text(sv) + ": expected a section"
                                                                 : top_level_text(section)));
            continue;
        }
        if (!is_section(section)) {
            out.push_back(problem_at_key(sk, unknown_section_text(section)));
            continue;
        }
        for (auto&& [k, v] : *tbl) {
            const Key* key = find_key(section, k.str());
            if (!key) {
                out.push_back(problem_at_key(k, unknown_key_text(section, k.str())));
                continue;
            }
            if (auto p = key->set(cfg, v)) out.push_back(std::move(*p));
        }
    }
    std::stable_sort(out.begin(), out.end(), [](const Problem& a, const Problem& b) {
        return std::tie(a.line, a.column) < std::tie(b.line, b.column);
    });
    return out;
}

std::string error_line(const std::string& source, const Problem& p) {
    std::string s = "config error: " + source;
    if (p.line > 0) s += ":" + std::to_string(p.line);
    return s + ": " + p.text;
}

// A flag's text as the TOML node the file would have held.
toml::array override_array(std::string_view text, bool ints) {
    auto trim = [](std::string_view s) {
        while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
        while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
        return s;
    };
    text = trim(text);
    if (text.size() >= 2 && text.front() == '[' && text.back() == ']') text = trim(text.substr(1, text.size() - 2));
    toml::array a;
    while (!text.empty()) {
        const size_t comma = text.find(',');
        std::string_view item = trim(text.substr(0, comma));
        text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
        if (item.size() >= 2 && item.front() == '"' && item.back() == '"') item = item.substr(1, item.size() - 2);
        int64_t i = 0;
        if (ints && parse_int(item, i))
            a.push_back(i);
        else
            a.push_back(std::string(item));
    }
    return a;
}

std::optional<Problem> set_from_text(const Key& key, MachineConfig& cfg, const std::string& value) {
    std::string_view text = value;
    int64_t i = 0;
    double d = 0;
    switch (key.kind) {
        case Kind::kInt:
        case Kind::kProxies:
            if (parse_int(text, i)) return key.set(cfg, toml::value<int64_t>(i));
            return key.set(cfg, toml::value<std::string>(value));
        case Kind::kProbability:
        case Kind::kNumber:
            if (parse_int(text, i)) return key.set(cfg, toml::value<int64_t>(i));
            if (parse_double(text, d)) return key.set(cfg, toml::value<double>(d));
            return key.set(cfg, toml::value<std::string>(value));
        case Kind::kEnum:
        case Kind::kIpv4:
        case Kind::kPath:
            if (text.size() >= 2 && text.front() == '"' && text.back() == '"') text = text.substr(1, text.size() - 2);
            return key.set(cfg, toml::value<std::string>(std::string(text)));
        case Kind::kCoreArray:
        case Kind::kSiteArray: return key.set(cfg, override_array(text, true));
        case Kind::kLinkArray: {  // ";" separates links on the command line (they contain no comma)
            toml::array a;
            std::string_view rest = text;
            while (!rest.empty()) {
                const size_t semi = rest.find(';');
                std::string item(rest.substr(0, semi));
                rest = semi == std::string_view::npos ? std::string_view{} : rest.substr(semi + 1);
                while (!item.empty() && item.front() == ' ') item.erase(item.begin());
                while (!item.empty() && item.back() == ' ') item.pop_back();
                if (!item.empty()) a.push_back(item);
            }
            return key.set(cfg, a);
        }
        case Kind::kString:
            if (text.size() >= 2 && text.front() == '"' && text.back() == '"') text = text.substr(1, text.size() - 2);
            return key.set(cfg, toml::value<std::string>(std::string(text)));
        case Kind::kPciArray:
        case Kind::kIpv4Array: return key.set(cfg, override_array(text, false));
    }
    return std::nullopt;
}

ConfigResult fail(std::string error) { return ConfigResult{std::nullopt, std::move(error)}; }

// Parse and per-key checks; no cross-field validation (that runs once, after the flags).
ConfigResult read_text(const std::string& toml_text, const std::string& source_name) {
    toml::table root;
    try {
        root = toml::parse(toml_text, source_name);
    } catch (const toml::parse_error& e) {
        std::string what(e.description());
        if (what.find("could not determine value type") != std::string::npos)
            what += " (text values need quotes, e.g. polling = \"busy\")";
        return fail("config error: " + source_name + ":" + std::to_string(e.source().begin.line) + ":" +
                    std::to_string(e.source().begin.column) + ": " + what);
    }
    MachineConfig cfg;
    const std::vector<Problem> problems = read_document(cfg, root);
    if (!problems.empty()) {
        std::string all;
        for (const Problem& p : problems) {
            if (!all.empty()) all += '\n';
            all += error_line(source_name, p);
        }
        return fail(all);
    }
    resolve(cfg);
    return ConfigResult{cfg, {}};
}

ConfigResult read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return fail("config error: cannot read " + path + ": " + std::strerror(errno));
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) return fail("config error: cannot read " + path + ": " + std::strerror(errno));
    return read_text(text.str(), path);
}

std::string kv(std::string_view section, std::string_view name, const std::string& value) {
    return "[" + std::string(section) + "] " + std::string(name) + " = " + value;
}

}  // namespace

ConfigResult load_config(const std::string& toml_text, const std::string& source_name) {
    ConfigResult r = read_text(toml_text, source_name);
    if (!r.ok()) return r;
    if (auto e = validate(*r.config)) return fail(*e);
    return r;
}

ConfigResult load_config_file(const std::string& path) {
    ConfigResult r = read_file(path);
    if (!r.ok()) return r;
    if (auto e = validate(*r.config)) return fail(*e);
    return r;
}

ConfigResult configure(const std::string& path, const std::vector<std::pair<std::string, std::string>>& overrides) {
    ConfigResult r = path.empty() ? ConfigResult{MachineConfig{}, {}} : read_file(path);
    if (!r.ok()) return r;
    for (const auto& [key, value] : overrides)
        if (auto e = apply_override(*r.config, key, value)) return fail(*e);
    if (auto e = validate(*r.config)) return fail(*e);
    return r;
}

std::optional<std::string> apply_override(MachineConfig& cfg, const std::string& dotted_key, const std::string& value,
                                          const std::string& source) {
    const std::string prefix = "config error: " + source + ": ";
    const Key* key = nullptr;
    const size_t dot = dotted_key.find('.');
    if (dot == std::string::npos) {  // a bare key name: the one section that has it
        for (const Key& k : keys())
            if (k.name == dotted_key) key = &k;
        if (!key) {
            for (const Key& k : keys())
                if (close_enough(dotted_key, k.name))
                    return prefix + "unknown key " + dotted_key + " (did you mean " + std::string(k.section) + "." +
                           std::string(k.name) + "?)";
            return prefix + "unknown key " + dotted_key + " (keys are written section.key, e.g. cluster.polling)";
        }
    } else {
        const std::string section = dotted_key.substr(0, dot), name = dotted_key.substr(dot + 1);
        if (!is_section(section)) return prefix + unknown_section_text(section);
        key = find_key(section, name);
        if (!key) return prefix + unknown_key_text(section, name);
    }
    MachineConfig next = cfg;
    if (auto p = set_from_text(*key, next, value)) return prefix + p->text;
    resolve(next);
    cfg = std::move(next);
    return std::nullopt;
}

std::optional<std::string> validate(const MachineConfig& cfg) {
    // Each key against its own rule, as if it had been read from a file.
    for (const Key& k : keys()) {
        toml::table t;
        k.put(cfg, t);
        MachineConfig scratch = cfg;
        if (auto p = k.set(scratch, *t.get(k.name))) return "config error: " + p->text;
    }
    const auto& c = cfg.cluster;
    const uint32_t proxies = resolve_proxies(c.proxies, c.compute_threads);
    if (c.proxies_resolved != proxies)
        return "config error: [cluster] proxies_resolved = " + std::to_string(c.proxies_resolved) +
               " does not match [cluster] proxies = " +
               (c.proxies == kProxiesAuto ? std::string("\"auto\"") : std::to_string(c.proxies)) +
               " with compute_threads = " + std::to_string(c.compute_threads) + " (= " + std::to_string(proxies) +
               "): call resolve() after setting fields";

    const auto& s = cfg.slidwin;
    if (s.rto_min_us > s.rto_initial_us || s.rto_initial_us > s.rto_max_us)
        return "config error: " + kv("slidwin", "rto_min_us", std::to_string(s.rto_min_us)) +
               ", rto_initial_us = " + std::to_string(s.rto_initial_us) + ", rto_max_us = " +
               std::to_string(s.rto_max_us) + ": need rto_min_us <= rto_initial_us <= rto_max_us";
    if (s.delack_us >= s.rto_min_us)
        return "config error: " + kv("slidwin", "delack_us", std::to_string(s.delack_us)) +
               ": must be below [slidwin] rto_min_us = " + std::to_string(s.rto_min_us) +
               " (a delayed ack must leave before the peer's shortest retransmission timeout)";
    if (s.ack_every > s.rcv_buf_datagrams)
        return "config error: " + kv("slidwin", "ack_every", std::to_string(s.ack_every)) +
               ": must be at most [slidwin] rcv_buf_datagrams = " + std::to_string(s.rcv_buf_datagrams);

    const auto& m = cfg.machine;
    const uint32_t low = m.base_ip.v & 0xff;
    if (low + proxies > 254)
        return "config error: " + kv("machine", "base_ip", quote(ipv4_text(m.base_ip))) + " with " +
               std::to_string(proxies) + " proxies per cluster: proxy addresses would leave the cluster's /24 " +
               "(need last byte of base_ip + proxies <= 254, e.g. base_ip = \"10.0.0.0\")";
    const uint64_t last = uint64_t{m.base_ip.v} + 256ull * (m.clusters - 1) + proxies;
    if (last >= 0xe0000000ull)
        return "config error: " + kv("machine", "base_ip", quote(ipv4_text(m.base_ip))) + " with clusters = " +
               std::to_string(m.clusters) +
               ": proxy addresses would reach 224.0.0.0 (multicast); choose a lower base_ip";

    if (m.fabric == Fabric::kPci) {
        const size_t n = m.pci_addresses.size(), one = proxies, all = size_t{proxies} * m.clusters;
        if (n != one && n != all)
            return "config error: " + kv("machine", "fabric", "\"pci\"") + " needs [machine] pci_addresses with " +
                   std::to_string(one) + " entries (one per proxy, one cluster per host) or " + std::to_string(all) +
                   " (" + std::to_string(m.clusters) + " clusters x " + std::to_string(proxies) +
                   " proxies, all on this host); it has " + std::to_string(n);
        for (size_t i = 0; i < n; ++i)
            for (size_t j = 0; j < i; ++j)
                if (m.pci_addresses[i] == m.pci_addresses[j])
                    return "config error: [machine] pci_addresses[" + std::to_string(i) + "] = " +
                           quote(m.pci_addresses[i]) + ": already used by pci_addresses[" + std::to_string(j) +
                           "] (one port per proxy)";
    }
    // fabric af_packet: the PMD's kernel ring has frames of framesz = 2048 bytes (cluster.cpp) and the
    // kernel writes a frame's Ethernet header 66 bytes into one, so an IP packet of more than 1968
    // bytes arrives cut short: such a run hung, every large datagram dropped and resent for ever.
    if (m.fabric == Fabric::kAfPacket && m.mtu_bytes > kAfPacketMaxMtuBytes)
        return "config error: " + kv("machine", "mtu_bytes", std::to_string(m.mtu_bytes)) +
               " (--mtu) with fabric = \"af_packet\": the kernel ring's frames hold IP packets of at most " +
               std::to_string(kAfPacketMaxMtuBytes) + " bytes; use mtu_bytes <= " + std::to_string(kAfPacketMaxMtuBytes) +
               ", or fabric memif or udp for larger packets";
    if (m.fabric == Fabric::kUdp && !m.pcap_dir.empty())
        return "config error: " + kv("machine", "pcap_dir", quote(m.pcap_dir)) +
               " with fabric = \"udp\": capture records the frames of DPDK ports (memif, af_packet, pci); "
               "fabric udp has kernel sockets and no frames (capture those with tcpdump -i lo)";
    if (m.fabric == Fabric::kUdp) {
        const size_t n = m.udp_addresses.size(), all = size_t{proxies} * m.clusters;
        if (n != 0 && n != m.clusters && n != all)
            return "config error: " + kv("machine", "fabric", "\"udp\"") + " needs [machine] udp_addresses with 0 " +
                   "entries (every proxy on 127.0.0.1), " + std::to_string(m.clusters) + " (one per cluster) or " +
                   std::to_string(all) + " (" + std::to_string(m.clusters) + " clusters x " + std::to_string(proxies) +
                   " proxies); it has " + std::to_string(n);
        const uint32_t last = m.udp_port + 64u * (m.clusters - 1) + proxies - 1;
        if (last > 65535)
            return "config error: " + kv("machine", "udp_port", std::to_string(m.udp_port)) +
                   " with fabric = \"udp\", " +
                   std::to_string(m.clusters) + " clusters and " + std::to_string(proxies) +
                   " proxies: the last socket port (udp_port + 64*c + p) would be " + std::to_string(last) +
                   "; need udp_port <= " + std::to_string(65535 - 64u * (m.clusters - 1) - (proxies - 1));
    }

    const auto& w = cfg.wan;
    if (!w.sites.empty() && w.sites.size() != m.clusters)
        return "config error: [wan] sites has " + std::to_string(w.sites.size()) + " entries: need one per cluster (" +
               std::to_string(m.clusters) + ", [machine] clusters) or none (every cluster its own site)";
    if (!w.script.empty() && !w.series.empty())
        return "config error: [wan] script = " + quote(w.script) + " and series = " + quote(w.series) +
               ": choose one (both drive the same links)";
    if (w.sites.empty() && m.clusters > kWanMaxSites &&
        (w.latency_ms > 0 || w.bandwidth_bytes_per_s > 0 || w.loss > 0 || !w.links.empty() || !w.script.empty() || !w.series.empty()))
        return "config error: [wan] sites = []: " + std::to_string(m.clusters) + " clusters would be " +
               std::to_string(m.clusters) + " sites, at most " + std::to_string(kWanMaxSites) +
               " are emulated: group the clusters into sites";
    uint32_t nsites = 0;
    const std::vector<uint16_t> site_of = wan_sites(cfg, nsites);
    for (size_t i = 0; i < w.links.size(); ++i) {
        LinkSpec l;
        parse_link_spec(w.links[i], l);
        for (const uint32_t s : {l.a, l.b})
            if (std::find(site_of.begin(), site_of.end(), s) == site_of.end())
                return "config error: [wan] links[" + std::to_string(i) + "] = " + quote(w.links[i]) + ": site " +
                       std::to_string(s) + " has no cluster (sites of the clusters: " +
                       (w.sites.empty() ? std::string("the cluster ids 0..") + std::to_string(m.clusters - 1)
                                        : std::string("[wan] sites")) + ")";
    }
    return std::nullopt;
}

}  // namespace iccs
