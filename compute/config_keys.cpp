// config_keys.cpp: the key table (config_keys.hpp): one row per key, and the lookups and messages
// built on it.

// GCC 12 at -O2/-O3 warns -Wrestrict inside libstdc++ on `"literal" + std::string`, a false
// positive (GCC bug 105329); this file builds its messages that way.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include "config_keys.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "conv_hdr.hpp"
#include "convergence.hpp"

namespace iccs {

namespace config_detail {

// ---- values as text ----------------------------------------------------------------------------

std::string quote(std::string_view s) { return json_quote(s); }

std::string double_text(double v) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    std::string s(buf, r.ptr);
    if (s == "inf" || s == "-inf" || s == "nan" || s == "-nan") return s;
    if (s.find_first_of(".e") == std::string::npos) s += ".0";  // a TOML float, not an integer
    return s;
}

// A node as it would be written in TOML (values in messages, and the dump).
std::string value_text(const toml::node& n) {
    if (auto v = n.as_integer()) return std::to_string(v->get());
    if (auto v = n.as_floating_point()) return double_text(v->get());
    if (auto v = n.as_string()) return quote(v->get());
    if (auto v = n.as_boolean()) return v->get() ? "true" : "false";
    if (auto a = n.as_array()) {
        std::string s = "[";
        for (size_t i = 0; i < a->size(); ++i) {
            if (i > 0) s += ", ";
            s += value_text(*a->get(i));
        }
        return s + "]";
    }
    if (n.is_table()) return "{...} (a table)";
    std::ostringstream os;  // dates and times
    if (auto v = n.as_date()) os << *v;
    if (auto v = n.as_time()) os << *v;
    if (auto v = n.as_date_time()) os << *v;
    return os.str();
}

std::string ipv4_text(Ipv4Addr a) {
    return std::to_string(a.v >> 24) + "." + std::to_string((a.v >> 16) & 0xff) + "." +
           std::to_string((a.v >> 8) & 0xff) + "." + std::to_string(a.v & 0xff);
}

// Dotted quad, each part 0..255 in decimal without leading zeros (no octal surprises).
bool parse_ipv4_strict(std::string_view s, Ipv4Addr& out) {
    uint32_t v = 0;
    for (int part = 0; part < 4; ++part) {
        if (part > 0) {
            if (s.empty() || s[0] != '.') return false;
            s.remove_prefix(1);
        }
        size_t n = 0;
        while (n < s.size() && n < 4 && s[n] >= '0' && s[n] <= '9') ++n;
        if (n == 0 || n > 3 || (n > 1 && s[0] == '0')) return false;
        const uint32_t x = static_cast<uint32_t>(std::stoul(std::string(s.substr(0, n))));
        if (x > 255) return false;
        v = (v << 8) | x;
        s.remove_prefix(n);
    }
    if (!s.empty()) return false;
    out.v = v;
    return true;
}

bool is_hex(std::string_view s) {
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

// DPDK's PCI address: [domain:]bus:device.function, e.g. "0000:03:00.0" or "03:00.0".
bool is_pci_address(std::string_view s) {
    if (s.size() == 12) {
        if (!is_hex(s.substr(0, 4)) || s[4] != ':') return false;
        s.remove_prefix(5);
    }
    return s.size() == 7 && is_hex(s.substr(0, 2)) && s[2] == ':' && is_hex(s.substr(3, 2)) && s[5] == '.' &&
           s[6] >= '0' && s[6] <= '7';
}

bool parse_int(std::string_view s, int64_t& out) {
    if (!s.empty() && s[0] == '+') s.remove_prefix(1);
    const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
    return r.ec == std::errc{} && r.ptr == s.data() + s.size() && !s.empty();
}

bool parse_double(std::string_view s, double& out) {
    const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
    return r.ec == std::errc{} && r.ptr == s.data() + s.size() && !s.empty();
}

size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diag = up;
        }
    }
    return row[b.size()];
}

bool close_enough(std::string_view typed, std::string_view known) {
    const size_t limit = typed.size() <= 4 ? 1 : typed.size() <= 8 ? 2 : 3;
    return edit_distance(typed, known) <= limit;
}

// ---- the key table -----------------------------------------------------------------------------

Problem problem_at(const toml::node& n, std::string text) {
    return Problem{n.source().begin.line, n.source().begin.column, std::move(text)};
}

template <class S>
using SectionOf = S MachineConfig::*;

std::string int_allowed(int64_t lo, int64_t hi, bool pow2) {
    return std::string(pow2 ? "a power of two" : "an integer") + " from " + std::to_string(lo) + " to " +
           std::to_string(hi);
}

template <class S, class T>
Key int_key(std::string_view section, std::string_view name, SectionOf<S> sec, T S::*field, int64_t lo, int64_t hi,
            std::string_view doc, bool pow2 = false) {
    Key k{section, name, Kind::kInt, int_allowed(lo, hi, pow2), doc, {}, {}, {}};
    k.set = [k_head = k.head(), lo, hi, pow2, sec, field, allowed = k.allowed](
                MachineConfig& c, const toml::node& n) -> std::optional<Problem> {
        const auto v = n.as_integer();
        if (!v || v->get() < lo || v->get() > hi || (pow2 && (v->get() & (v->get() - 1)) != 0))
            return problem_at(n, k_head + " = " + value_text(n) + ": expected " + allowed);
        (c.*sec).*field = static_cast<T>(v->get());
        return std::nullopt;
    };
    k.put = [name, sec, field](const MachineConfig& c, toml::table& t) {
        t.insert_or_assign(name, static_cast<int64_t>((c.*sec).*field));
    };
    return k;
}

// true / false (a TOML boolean, or the string from --set SECTION.NAME=true).
template <class S>
Key bool_key(std::string_view section, std::string_view name, SectionOf<S> sec, bool S::*field, std::string_view doc) {
    Key k{section, name, Kind::kEnum, "true, false", doc, {}, {}, {}};
    k.set = [k, sec, field](MachineConfig& c, const toml::node& n) -> std::optional<Problem> {
        if (const auto b = n.as_boolean()) {
            (c.*sec).*field = b->get();
            return std::nullopt;
        }
        if (const auto v = n.as_string(); v && (v->get() == "true" || v->get() == "false")) {
            (c.*sec).*field = v->get() == "true";
            return std::nullopt;
        }
        return k.wrong(n);
    };
    k.put = [name, sec, field](const MachineConfig& c, toml::table& t) { t.insert_or_assign(name, (c.*sec).*field); };
    return k;
}

template <class S, class E>
Key enum_key(std::string_view section, std::string_view name, SectionOf<S> sec, E S::*field,
             std::vector<std::pair<std::string_view, E>> values, std::string_view doc) {
    std::string allowed;
    for (const auto& [text, e] : values) {
        if (!allowed.empty()) allowed += ", ";
        allowed += text;
    }
    Key k{section, name, Kind::kEnum, allowed, doc, {}, {}, {}};
    k.set = [k, values, sec, field](MachineConfig& c, const toml::node& n) -> std::optional<Problem> {
        if (const auto v = n.as_string())
            for (const auto& [text, e] : values)
                if (v->get() == text) {
                    (c.*sec).*field = e;
                    return std::nullopt;
                }
        return k.wrong(n);
    };
    k.put = [name, sec, field](const MachineConfig& c, toml::table& t) {
        t.insert_or_assign(name, std::string(to_string((c.*sec).*field)));
    };
    return k;
}

Key probability_key(std::string_view name, double TestSection::*field, std::string_view doc) {
    Key k{"test", name, Kind::kProbability, "a probability from 0.0 to 1.0", doc, {}, {}, {}};
    k.set = [k, field](MachineConfig& c, const toml::node& n) -> std::optional<Problem> {
        double v = -1;
        if (const auto f = n.as_floating_point()) v = f->get();
        if (const auto i = n.as_integer()) v = static_cast<double>(i->get());  // drop = 0 is fine
        if (!(v >= 0.0 && v <= 1.0)) return k.wrong(n);
        c.test.*field = v;
        return std::nullopt;
    };
    k.put = [name, field](const MachineConfig& c, toml::table& t) { t.insert_or_assign(name, c.test.*field); };
    return k;
}

// [wan] links entry (config_keys.hpp).
bool parse_link_spec(std::string_view text, LinkSpec& out) {
    std::istringstream in{std::string(text)};
    std::string pair, w2, w3, extra;
    if (!(in >> pair)) return false;
    const size_t arrow = pair.find("->");
    if (arrow == std::string::npos || arrow == 0) return false;
    out.both = pair[arrow - 1] == '<';
    int64_t a = -1, b = -1;
    if (!parse_int(std::string_view(pair).substr(0, arrow - (out.both ? 1 : 0)), a) ||
        !parse_int(std::string_view(pair).substr(arrow + 2), b) || a < 0 || b < 0 || a >= kWanMaxSites ||
        b >= kWanMaxSites || a == b)
        return false;
    out.a = static_cast<uint32_t>(a);
    out.b = static_cast<uint32_t>(b);
    if (!(in >> w2)) return false;
    if (w2 == "cut") {
        out.cut = true;
        return !(in >> extra);
    }
    if (!(in >> w3)) return false;
    if (in >> extra) {  // the optional loss probability
        std::string more;
        if (in >> more || !parse_double(extra, out.loss) || !(out.loss >= 0 && out.loss <= 1)) return false;
        out.has_loss = true;
    }
    return parse_double(w2, out.bw) && out.bw >= 0 && out.bw <= 1e12 && parse_double(w3, out.lat_ms) &&
           out.lat_ms >= 0 && out.lat_ms <= 100'000;
}

Key wan_latency_key() {
    Key k{"wan", "latency_ms", Kind::kNumber, "a number of milliseconds from 0 to 100000",
          "one-way latency of every inter-site link [ms]", {}, {}, {}};
    k.set = [k](MachineConfig& c, const toml::node& n) -> std::optional<Problem> {
        double v = -1;
        if (const auto f = n.as_floating_point()) v = f->get();
        if (const auto i = n.as_integer()) v = static_cast<double>(i->get());
        if (!(v >= 0.0 && v <= 100'000.0)) return k.wrong(n);
        c.wan.latency_ms = v;
        return std::nullopt;
    };
    k.put = [](const MachineConfig& c, toml::table& t) { t.insert_or_assign("latency_ms", c.wan.latency_ms); };
    return k;
}

Key wan_loss_key() {
    Key k{"wan", "loss", Kind::kProbability, "a probability from 0.0 to 1.0",
          "probability that a frame on an inter-site link is lost (slidwin retransmits it)", {}, {}, {}};
    k.set = [k](MachineConfig& c, const toml::node& n) -> std::optional<Problem> {
        double v = -1;
        if (const auto f = n.as_floating_point()) v = f->get();
        if (const auto i = n.as_integer()) v = static_cast<double>(i->get());
        if (!(v >= 0.0 && v <= 1.0)) return k.wrong(n);
        c.wan.loss = v;
        return std::nullopt;
    };
    k.put = [](const MachineConfig& c, toml::table& t) { t.insert_or_assign("loss", c.wan.loss); };
    return k;
}

// An array of strings, each checked by `valid`; a wrong one named with its index.
template <class S>
Key string_array_key(std::string_view section, std::string_view name, Kind kind, SectionOf<S> sec,
                     std::vector<std::string> S::*field, std::function<bool(const std::string&)> valid,
                     const std::string& element, const std::string& allowed, std::string_view doc) {
    Key k{section, name, kind, allowed, doc, {}, {}, {}};
    k.set = [k, sec, field, valid, element](MachineConfig& c, const toml::node& n) -> std::optional<Problem> {
        const auto a = n.as_array();
        if (!a) return k.wrong(n);
        std::vector<std::string> out;
        for (size_t i = 0; i < a->size(); ++i) {
            const toml::node& e = *a->get(i);
            const auto v = e.as_string();
            if (!v || !valid(v->get()))
                return problem_at(e, k.head() + "[" + std::to_string(i) + "] = " + value_text(e) + ": expected " +
                                         element);
            out.push_back(v->get());
        }
        (c.*sec).*field = std::move(out);
        return std::nullopt;
    };
    k.put = [sec, field, name](const MachineConfig& c, toml::table& t) {
        toml::array a;
        for (const auto& v : (c.*sec).*field) a.push_back(v);
        t.insert_or_assign(name, std::move(a));
    };
    return k;
}

// An array of small unsigned integers, each below `limit` (core numbers, site ids): every element
// checked, and a wrong one named with its index.
template <class S>
Key uint_array_key(std::string_view section, std::string_view name, Kind kind, SectionOf<S> sec,
                   std::vector<uint32_t> S::*field, uint32_t limit, const std::string& element,
                   const std::string& allowed, std::string_view doc, const std::string& empty_note) {
    Key k{section, name, kind, allowed + "; each " + element, doc, {}, {}, {}};
    k.set = [k, sec, field, limit, element](MachineConfig& c, const toml::node& n) -> std::optional<Problem> {
        const auto a = n.as_array();
        if (!a) return k.wrong(n);
        std::vector<uint32_t> out;
        for (size_t i = 0; i < a->size(); ++i) {
            const toml::node& e = *a->get(i);
            const auto v = e.as_integer();
            if (!v || v->get() < 0 || v->get() >= static_cast<int64_t>(limit))
                return problem_at(e, k.head() + "[" + std::to_string(i) + "] = " + value_text(e) + ": expected " +
                                         element);
            out.push_back(static_cast<uint32_t>(v->get()));
        }
        (c.*sec).*field = std::move(out);
        return std::nullopt;
    };
    k.put = [sec, field, name](const MachineConfig& c, toml::table& t) {
        toml::array a;
        for (const uint32_t v : (c.*sec).*field) a.push_back(static_cast<int64_t>(v));
        t.insert_or_assign(name, std::move(a));
    };
    k.note = [sec, field, empty_note](const MachineConfig& c) {
        return ((c.*sec).*field).empty() ? empty_note : std::string();
    };
    return k;
}

Key wan_sites_key() {
    return uint_array_key<WanSection>(
        "wan", "sites", Kind::kSiteArray, &MachineConfig::wan, &WanSection::sites, kWanMaxSites,
        "a site id from 0 to " + std::to_string(kWanMaxSites - 1), "an array with the site of each cluster, e.g. [0, 0, 1, 1]",
        "site of each cluster; [] = every cluster its own site (links inside a site are not emulated)",
        "empty: every cluster its own site");
}

Key wan_links_key() {
    const std::string element = "\"A->B BW LAT_MS [LOSS]\", \"A<->B BW LAT_MS [LOSS]\", \"A->B cut\" or \"A<->B cut\" "
                                "(A, B: site ids 0.." + std::to_string(kWanMaxSites - 1) +
                                ", A != B; BW: bytes/s 0..1e12, 0 = unlimited; LAT_MS: 0..100000; LOSS: 0..1)";
    return string_array_key<WanSection>(
        "wan", "links", Kind::kLinkArray, &MachineConfig::wan, &WanSection::links,
        [](const std::string& v) {
            LinkSpec spec;
            return parse_link_spec(v, spec);
        },
        element, "an array of link strings, e.g. [\"0<->1 1e6 10\"]; each " + element,
        "per-link overrides of bandwidth, latency and loss, or a cut link (traffic routes through other sites)");
}

Key wan_path_key(std::string_view name, std::string WanSection::*field, std::string_view doc) {
    Key k{"wan", name, Kind::kString, "a file path, or \"\" for none", doc, {}, {}, {}};
    k.set = [k, field](MachineConfig& c, const toml::node& n) -> std::optional<Problem> {
        const auto s = n.as_string();
        if (!s) return k.wrong(n);
        c.wan.*field = s->get();
        return std::nullopt;
    };
    k.put = [name, field](const MachineConfig& c, toml::table& t) { t.insert_or_assign(name, c.wan.*field); };
    return k;
}

Key base_ip_key() {
    Key k{"machine", "base_ip", Kind::kIpv4,
          "an IPv4 unicast address like \"10.0.0.0\" (not 0.x.x.x, 127.x.x.x, or 224.0.0.0 and above)",
          "proxy p of cluster c gets base_ip + 256*c + p + 1 (one host)", {}, {}, {}};
    k.set = [k](MachineConfig& c, const toml::node& n) -> std::optional<Problem> {
        Ipv4Addr a;
        const auto s = n.as_string();
        if (!s || !parse_ipv4_strict(s->get(), a)) return k.wrong(n);
        const uint32_t first = a.v >> 24;
        if (first == 0 || first == 127 || first >= 224) return k.wrong(n);
        c.machine.base_ip = a;
        return std::nullopt;
    };
    k.put = [](const MachineConfig& c, toml::table& t) { t.insert_or_assign("base_ip", ipv4_text(c.machine.base_ip)); };
    k.note = [](const MachineConfig& c) {
        const uint32_t last_cluster = c.machine.clusters > 0 ? c.machine.clusters - 1 : 0;
        const uint32_t last_proxy = c.cluster.proxies_resolved > 0 ? c.cluster.proxies_resolved - 1 : 0;
        return "proxies " + ipv4_text(proxy_ip(c, 0, 0)) + " .. " + ipv4_text(proxy_ip(c, last_cluster, last_proxy));
    };
    return k;
}

Key proxies_key() {
    Key k{"cluster", "proxies", Kind::kProxies, "an integer from 1 to 64, or \"auto\"",
          "proxies per cluster; \"auto\" = ceil(sqrt(compute_threads))", {}, {}, {}};
    k.set = [k](MachineConfig& c, const toml::node& n) -> std::optional<Problem> {
        if (const auto s = n.as_string(); s && s->get() == "auto") {
            c.cluster.proxies = kProxiesAuto;
            return std::nullopt;
        }
        if (const auto i = n.as_integer(); i && i->get() >= 1 && i->get() <= 64) {
            c.cluster.proxies = static_cast<uint32_t>(i->get());
            return std::nullopt;
        }
        return k.wrong(n);
    };
    k.put = [](const MachineConfig& c, toml::table& t) {
        if (c.cluster.proxies == kProxiesAuto)
            t.insert_or_assign("proxies", "auto");
        else
            t.insert_or_assign("proxies", static_cast<int64_t>(c.cluster.proxies));
    };
    k.note = [](const MachineConfig& c) {
        return c.cluster.proxies == kProxiesAuto
                   ? "= " + std::to_string(resolve_proxies(kProxiesAuto, c.cluster.compute_threads))
                   : std::string();
    };
    return k;
}

Key proxy_cores_key() {
    const uint32_t cores = host_core_count();
    return uint_array_key<ClusterSection>(
        "cluster", "proxy_cores", Kind::kCoreArray, &MachineConfig::cluster, &ClusterSection::proxy_cores, cores,
        "a core number from 0 to " + std::to_string(cores - 1) + " (this host has " + std::to_string(cores) +
            (cores == 1 ? " core)" : " cores)"),
        "an array of core numbers, e.g. [1]",
        "proxy p of a cluster is pinned to proxy_cores[p]; proxies beyond the list are spread",
        "empty: spread over the host's cores");
}

Key pci_addresses_key() {
    Key k = string_array_key<MachineSection>(
        "machine", "pci_addresses", Kind::kPciArray, &MachineConfig::machine, &MachineSection::pci_addresses,
        is_pci_address, "a PCI address like \"0000:03:00.0\"", "an array of PCI addresses, e.g. [\"0000:03:00.0\"]",
        "NIC ports for fabric = \"pci\", one per proxy (ignored by the other fabrics)");
    k.note = [](const MachineConfig& c) {
        return c.machine.fabric != Fabric::kPci && !c.machine.pci_addresses.empty()
                   ? std::string("ignored: fabric is not \"pci\"")
                   : std::string();
    };
    return k;
}

Key udp_checksum_key() {
    using M = MachineConfig;
    Key k = enum_key("machine", "udp_checksum", &M::machine, &MachineSection::udp_checksum,
                     {{"on", UdpChecksum::kOn}, {"off-on-memif", UdpChecksum::kOffOnMemif}},
                     "\"off-on-memif\": on memif links (shared memory of one host) datagrams go with UDP "
                     "checksum 0 (RFC 768: none) and are not checked; other fabrics always sum");
    k.note = [](const MachineConfig& c) {
        return c.machine.udp_checksum == UdpChecksum::kOffOnMemif && c.machine.fabric != Fabric::kMemif
                   ? std::string("ignored: fabric is not \"memif\" (checksums stay on)")
                   : std::string();
    };
    return k;
}

Key pcap_dir_key() {
    Key k{"machine", "pcap_dir", Kind::kPath, "a directory path (a string; \"\" = off)",
          "capture every proxy's frames to pcap_dir/cluster<C>-proxy<P>.pcapng (\"\" = off; not fabric udp)",
          {}, {}, {}};
    k.set = [k](MachineConfig& c, const toml::node& n) -> std::optional<Problem> {
        const auto v = n.as_string();
        if (!v || v->get().find('\0') != std::string::npos) return k.wrong(n);
        c.machine.pcap_dir = v->get();
        return std::nullopt;
    };
    k.put = [](const MachineConfig& c, toml::table& t) { t.insert_or_assign("pcap_dir", c.machine.pcap_dir); };
    k.note = [](const MachineConfig& c) { return c.machine.pcap_dir.empty() ? std::string("off") : std::string(); };
    return k;
}

Key udp_addresses_key() {
    const std::string element = "an IPv4 unicast address like \"127.0.0.1\" (not 0.x.x.x, or 224.0.0.0 and above)";
    Key k{"machine", "udp_addresses", Kind::kIpv4Array, "an array of IPv4 addresses, e.g. [\"10.1.0.1\", \"10.1.0.2\"]",
          "fabric = \"udp\": socket addresses: [] = 127.0.0.1, one per cluster, or one per proxy (else ignored)",
          {}, {}, {}};
    k.set = [k, element](MachineConfig& c, const toml::node& n) -> std::optional<Problem> {
        const auto a = n.as_array();
        if (!a) return k.wrong(n);
        std::vector<Ipv4Addr> out;
        for (size_t i = 0; i < a->size(); ++i) {
            const toml::node& e = *a->get(i);
            const auto s = e.as_string();
            Ipv4Addr ip;
            if (!s || !parse_ipv4_strict(s->get(), ip) || (ip.v >> 24) == 0 || (ip.v >> 24) >= 224)
                return problem_at(e, k.head() + "[" + std::to_string(i) + "] = " + value_text(e) + ": expected " +
                                         element);
            out.push_back(ip);
        }
        c.machine.udp_addresses = std::move(out);
        return std::nullopt;
    };
    k.put = [](const MachineConfig& c, toml::table& t) {
        toml::array a;
        for (const Ipv4Addr ip : c.machine.udp_addresses) a.push_back(ipv4_text(ip));
        t.insert_or_assign("udp_addresses", std::move(a));
    };
    k.note = [](const MachineConfig& c) {
        if (c.machine.fabric != Fabric::kUdp)
            return c.machine.udp_addresses.empty() ? std::string() : std::string("ignored: fabric is not \"udp\"");
        const uint32_t last_c = c.machine.clusters > 0 ? c.machine.clusters - 1 : 0;
        const uint32_t last_p = c.cluster.proxies_resolved > 0 ? c.cluster.proxies_resolved - 1 : 0;
        return std::string(c.machine.udp_addresses.empty() ? "empty: 127.0.0.1; " : "") + "ports " +
               std::to_string(udp_socket_port(c.machine.udp_port, 0, 0)) + " .. " +
               std::to_string(udp_socket_port(c.machine.udp_port, last_c, last_p));
    };
    return k;
}

Key security_key_file_key() {
    Key k{"security", "key_file", Kind::kString, "a file path, or \"\" for none",
          "shared key (32..4096 random bytes, yours, mode 0600, not a symlink): authenticate every datagram; ICCS_KEY_FILE overrides",
          {}, {}, {}};
    k.set = [k](MachineConfig& c, const toml::node& n) -> std::optional<Problem> {
        const auto s = n.as_string();
        if (!s || s->get().find('\0') != std::string::npos) return k.wrong(n);
        c.security.key_file = s->get();
        return std::nullopt;
    };
    k.put = [](const MachineConfig& c, toml::table& t) { t.insert_or_assign("key_file", c.security.key_file); };
    k.note = [](const MachineConfig& c) { return c.security.key_file.empty() ? std::string("none") : std::string(); };
    return k;
}

std::vector<Key> make_keys() {
    using M = MachineConfig;
    std::vector<Key> t;
    // [machine]
    t.push_back(int_key("machine", "clusters", &M::machine, &MachineSection::clusters, 1, 64,
                        "clusters in the machine (one process each on one host)"));
    t.push_back(enum_key("machine", "fabric", &M::machine, &MachineSection::fabric,
                         {{"memif", Fabric::kMemif},
                          {"af_packet", Fabric::kAfPacket},
                          {"pci", Fabric::kPci},
                          {"udp", Fabric::kUdp}},
                         "what carries frames between proxies"));
    t.push_back(int_key("machine", "mtu_bytes", &M::machine, &MachineSection::mtu_bytes, 576, 9000,
                        "IPv4 MTU: largest IP packet on the fabric [bytes]"));
    t.push_back(base_ip_key());
    t.push_back(int_key("machine", "udp_port", &M::machine, &MachineSection::udp_port, 1, 65535,
                        "UDP port the proxies' stacks use; fabric udp: proxy p of cluster c binds "
                        "udp_port + 64*c + p"));
    t.push_back(udp_addresses_key());
    t.push_back(bool_key("machine", "udp_sqpoll", &M::machine, &MachineSection::udp_sqpoll,
                         "fabric udp: a kernel thread polls each proxy's io_uring (IORING_SETUP_SQPOLL), "
                         "so sends need no system call; it takes a core of its own while busy"));
    t.push_back(bool_key("machine", "memif_zero_copy", &M::machine, &MachineSection::memif_zero_copy,
                         "fabric memif: the client end of each link (the higher cluster id) lends its own "
                         "buffers to the link (DPDK's zero-copy=yes), so its peer copies each frame once, "
                         "straight into or out of them; the peer maps all of that cluster's DPDK memory"));
    t.push_back(udp_checksum_key());
    t.push_back(pci_addresses_key());
    t.push_back(pcap_dir_key());
    t.push_back(int_key("machine", "pcap_max_bytes", &M::machine, &MachineSection::pcap_max_bytes, 65536,
                        int64_t{1} << 40, "size limit of each capture file [bytes]; capture stops there"));
    // [cluster]
    t.push_back(int_key("cluster", "compute_threads", &M::cluster, &ClusterSection::compute_threads, 1, 256,
                        "application threads per cluster"));
    t.push_back(proxies_key());
    t.push_back(proxy_cores_key());
    t.push_back(enum_key("cluster", "polling", &M::cluster, &ClusterSection::polling,
                         {{"busy", Polling::kBusy}, {"adaptive", Polling::kAdaptive}, {"inline", Polling::kInline}},
                         "how proxies wait for work"));
    t.push_back(enum_key("cluster", "dispatch", &M::cluster, &ClusterSection::dispatch,
                         {{"fixed", Dispatch::kFixed},
                          {"round-robin", Dispatch::kRoundRobin},
                          {"least-loaded", Dispatch::kLeastLoaded}},
                         "how a compute thread picks its proxy"));
    t.push_back(int_key("cluster", "ring_entries", &M::cluster, &ClusterSection::ring_entries, 64, 65536,
                        "each compute-thread <-> proxy ring [entries]", true));
    t.push_back(int_key("cluster", "mempool_mbufs", &M::cluster, &ClusterSection::mempool_mbufs, 1024, 1 << 20,
                        "packet buffers per proxy [mbufs]"));
    t.push_back(int_key("cluster", "peer_timeout_ms", &M::cluster, &ClusterSection::peer_timeout_ms, 0, 3'600'000,
                        "a cluster silent this long is reported down to the compute threads [ms] (0 = never)"));
    t.push_back(int_key("cluster", "combine_max_bytes", &M::cluster, &ClusterSection::combine_max_bytes, 0, 1400,
                        "messages up to this size (convergence header included) that meet in one ring burst "
                        "for the same remote proxy travel in one datagram up to the MTU [bytes] (0 = off)"));
    t.push_back(bool_key("cluster", "assist", &M::cluster, &ClusterSection::assist,
                         "adaptive polling: a waiting compute thread runs its proxies' loop itself (not over "
                         "fabric udp)"));
    // [slidwin]
    t.push_back(int_key("slidwin", "snd_buf_datagrams", &M::slidwin, &SlidwinSection::snd_buf_datagrams, 16, 32768,
                        "sent but unacked datagrams a sub-connection holds [datagrams]", true));
    t.push_back(int_key("slidwin", "rcv_buf_datagrams", &M::slidwin, &SlidwinSection::rcv_buf_datagrams, 16, 32768,
                        "receive buffer = largest window a sub-connection advertises [datagrams]", true));
    t.push_back(int_key("slidwin", "rto_initial_us", &M::slidwin, &SlidwinSection::rto_initial_us, 10, 60'000'000,
                        "retransmission timeout before the first RTT sample [us]"));
    t.push_back(int_key("slidwin", "rto_min_us", &M::slidwin, &SlidwinSection::rto_min_us, 10, 60'000'000,
                        "smallest retransmission timeout [us]"));
    t.push_back(int_key("slidwin", "rto_max_us", &M::slidwin, &SlidwinSection::rto_max_us, 10, 60'000'000,
                        "largest retransmission timeout: backoff stops doubling here [us]"));
    t.push_back(int_key("slidwin", "delack_us", &M::slidwin, &SlidwinSection::delack_us, 0, 1'000'000,
                        "longest an ack waits for data to ride on [us]"));
    t.push_back(int_key("slidwin", "persist_us", &M::slidwin, &SlidwinSection::persist_us, 100, 60'000'000,
                        "zero-window probe interval [us]"));
    t.push_back(int_key("slidwin", "ack_every", &M::slidwin, &SlidwinSection::ack_every, 1, 256,
                        "ack at once after this many in-order datagrams"));
    // [reassembly]
    t.push_back(int_key("reassembly", "max_datagrams", &M::reassembly, &ReassemblySection::max_datagrams, 1, 65536,
                        "partial IPv4 datagrams held at once"));
    t.push_back(int_key("reassembly", "max_bytes", &M::reassembly, &ReassemblySection::max_bytes, 65536, 1 << 30,
                        "fragment storage held [bytes]"));
    t.push_back(int_key("reassembly", "timeout_ms", &M::reassembly, &ReassemblySection::timeout_ms, 1, 60'000,
                        "a partial datagram is dropped after this [ms]"));
    // [convergence]
    t.push_back(enum_key("convergence", "order", &M::convergence, &ConvergenceSection::order,
                         {{"ordered", Order::kOrdered}, {"unordered", Order::kUnordered}},
                         "delivery of a connection's messages: in send order, or as each completes"));
    t.push_back(int_key("convergence", "window_bytes", &M::convergence, &ConvergenceSection::window_bytes, 4096,
                        1 << 30, "bytes a receiver holds unconsumed per connection [bytes]"));
    t.push_back(int_key("convergence", "window_msgs", &M::convergence, &ConvergenceSection::window_msgs, 16, 1 << 20,
                        "messages a receiver holds unconsumed per connection", true));
    t.push_back(int_key("convergence", "stripe_threshold_bytes", &M::convergence,
                        &ConvergenceSection::stripe_threshold_bytes, 0, kSlidwinMaxMsg - kConvHdrLen,
                        "larger messages are cut into pieces sent over several proxies [bytes] (0 = one MTU's payload)"));
    t.push_back(int_key("convergence", "accept_backlog", &M::convergence, &ConvergenceSection::accept_backlog, 1,
                        65536, "connections a listening port holds before accept()"));
    t.push_back(int_key("convergence", "connect_timeout_ms", &M::convergence,
                        &ConvergenceSection::connect_timeout_ms, 1, 3'600'000, "connect() gives up after this [ms]"));
    // [test]
    t.push_back(probability_key("drop", &TestSection::drop, "probability a received frame is dropped"));
    t.push_back(probability_key("duplicate", &TestSection::duplicate,
                                "probability a received frame is delivered twice"));
    t.push_back(int_key("test", "reorder_window", &M::test, &TestSection::reorder_window, 0, 1024,
                        "frames held back and released out of order (0 = off)"));
    t.push_back(int_key("test", "seed", &M::test, &TestSection::seed, 0, INT64_MAX,
                        "seed of the injected faults: same seed, same faults"));
    t.push_back(int_key("test", "slow_proxy", &M::test, &TestSection::slow_proxy, 0, 63,
                        "which proxy of every cluster slow_proxy_us slows"));
    t.push_back(int_key("test", "slow_proxy_us", &M::test, &TestSection::slow_proxy_us, 0, 1'000'000,
                        "that proxy pauses this long after each busy iteration [us] (0 = off)"));
    // [wan]
    t.push_back(wan_sites_key());
    t.push_back(wan_latency_key());
    t.push_back(int_key("wan", "bandwidth_bytes_per_s", &M::wan, &WanSection::bandwidth_bytes_per_s, 0,
                        1'000'000'000'000, "bandwidth of every inter-site link [bytes/s] (0 = unlimited)"));
    t.push_back(wan_loss_key());
    t.push_back(wan_links_key());
    t.push_back(wan_path_key("script", &WanSection::script,
                             "script driving the link parameters (read, sleep, set, set_sym, forever); \"\" = none"));
    t.push_back(wan_path_key("series", &WanSection::series,
                             "measured series replayed: lines TIME_S A B BW LAT_S; \"\" = none"));
    t.push_back(int_key("wan", "hold_limit_bytes", &M::wan, &WanSection::hold_limit_bytes, 65536, 1 << 30,
                        "buffers a proxy holds for the WAN stage at most [bytes]; beyond, slidwin waits"));
    // [runtime]
    t.push_back(enum_key("runtime", "transport", &M::runtime, &RuntimeSection::transport,
                         {{"iccs", RtTransport::kIccs}, {"direct", RtTransport::kDirect}, {"delay", RtTransport::kDelay}},
                         "how the runtime's messages travel: the proxies, shared memory, or shared memory + delay_us"));
    t.push_back(int_key("runtime", "delay_us", &M::runtime, &RuntimeSection::delay_us, 0, 60'000'000,
                        "transport delay: every message is held this long before its handler runs [us]"));
    // [security]
    t.push_back(security_key_file_key());
    t.push_back(bool_key("security", "encrypt", &M::security, &SecuritySection::encrypt,
                         "with a key: encrypt payloads too (AES-GCM), not only authenticate them"));
    // [group]
    t.push_back(enum_key("group", "family", &M::group, &GroupSection::family,
                         {{"hier", CollFamily::kHier}, {"flat", CollFamily::kFlat}},
                         "collectives of group/ that name no family: hier (MagPIe: threads of a cluster, clusters of "
                         "a site, one coordinator per site over the WAN) or flat (binomial, recursive doubling, ring)"));
    t.push_back(int_key("group", "segment_bytes", &M::group, &GroupSection::segment_bytes, 64, 1 << 20,
                        "collective messages longer than this travel as segments of this size [bytes]"));
    return t;
}

const std::vector<Key>& keys() {
    static const std::vector<Key> table = make_keys();
    return table;
}

const Key* find_key(std::string_view section, std::string_view name) {
    for (const Key& k : keys())
        if (k.section == section && k.name == name) return &k;
    return nullptr;
}

bool is_section(std::string_view s) {
    return std::find(std::begin(kSections), std::end(kSections), s) != std::end(kSections);
}

std::string section_list() {
    std::string s;
    for (const auto sec : kSections) {
        if (!s.empty()) s += ", ";
        s.append("[").append(sec).append("]");
    }
    return s;
}

std::string keys_of(std::string_view section) {
    std::string s;
    for (const Key& k : keys())
        if (k.section == section) {
            if (!s.empty()) s += ", ";
            s += k.name;
        }
    return s;
}

// "unknown key [cluster] proxy_core (did you mean proxy_cores?)"
std::string unknown_key_text(std::string_view section, std::string_view name) {
    std::string s = "unknown key [" + std::string(section) + "] " + std::string(name);
    const Key* best = nullptr;
    size_t best_d = SIZE_MAX;
    for (const Key& k : keys())
        if (k.section == section && close_enough(name, k.name) && edit_distance(name, k.name) < best_d) {
            best = &k;
            best_d = edit_distance(name, k.name);
        }
    if (best) return s + " (did you mean " + std::string(best->name) + "?)";
    for (const Key& k : keys())  // the right key in the wrong section
        if (k.name == name || close_enough(name, k.name))
            return s + " (did you mean [" + std::string(k.section) + "] " + std::string(k.name) + "?)";
    return s + " (keys of [" + std::string(section) + "] are " + keys_of(section) + ")";
}

std::string unknown_section_text(std::string_view section) {
    std::string s = "unknown section [" + std::string(section) + "]";
    for (const auto known : kSections)
        if (close_enough(section, known)) return s + " (did you mean [" + std::string(known) + "]?)";
    return s + " (sections are " + section_list() + ")";
}

std::string top_level_text(std::string_view name) {
    std::string s = "key " + std::string(name) + " outside any section";
    for (const Key& k : keys())
        if (k.name == name || close_enough(name, k.name))
            return s + " (did you mean [" + std::string(k.section) + "] " + std::string(k.name) + "?)";
    return s + " (keys belong in a section: " + section_list() + ")";
}

}  // namespace config_detail

using namespace config_detail;

const std::vector<ConfigKeyDoc>& config_key_docs() {
    static const std::vector<ConfigKeyDoc> docs = [] {
        std::vector<ConfigKeyDoc> d;
        for (const Key& k : keys()) d.push_back(ConfigKeyDoc{k.section, k.name, k.allowed, k.doc});
        return d;
    }();
    return docs;
}

}  // namespace iccs
