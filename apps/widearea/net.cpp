// net.cpp: the counted messaging of the wide-area programs (widearea.hpp, Net and Traffic).
#include <algorithm>
#include <iterator>

#include "ordered.hpp"
#include "widearea.hpp"

namespace iccs::widearea {

namespace {
constexpr const char* kVariantNames[] = {"original", "optimized", "grid", "exact-halo", "async-bcast"};
constexpr const char* kGridNames[] = {"tree-sync", "rings", "polling", "grain", "autoflush"};
}  // namespace

const char* to_string(Variant v) { return kVariantNames[static_cast<size_t>(v)]; }

bool parse_variant(std::string_view name, Variant& out) {
    for (size_t k = 0; k < std::size(kVariantNames); ++k)
        if (name == kVariantNames[k]) {
            out = static_cast<Variant>(k);
            return true;
        }
    return false;
}

bool parse_grid_opts(const std::string& s, uint32_t& out, std::string& err) {
    if (s == "all" || s == "none") {
        out = s == "all" ? uint32_t{kGridAll} : 0u;
        return true;
    }
    out = 0;
    size_t at = 0;
    while (at <= s.size()) {
        const size_t end = std::min(s.find(',', at), s.size());
        const std::string w = s.substr(at, end - at);
        uint32_t bit = 0;
        for (uint32_t k = 0; k < 5; ++k)
            if (w == kGridNames[k]) bit = 1u << k;
        if (bit == 0) {
            err = "unknown grid option '" + w + "' (allowed: tree-sync, rings, polling, grain, autoflush, or all, none)";
            return false;
        }
        out |= bit;
        at = end + 1;
    }
    return true;
}

std::string grid_opts_string(uint32_t opts) {
    std::string r;
    for (uint32_t k = 0; k < 5; ++k)
        if (opts & (1u << k)) r += std::string(r.empty() ? "" : ",") + kGridNames[k];
    return r.empty() ? "none" : r;
}
const char* to_string(Size s) { return s == Size::kTest ? "test" : "paper"; }
const char* to_string(SorRule r) { return r == SorRule::kOrca ? "orca" : "tight"; }

void Traffic::add(const Traffic& o) {
    if (link.empty()) {
        sites = o.sites;
        link.assign(o.link.size(), {});
    }
    msgs += o.msgs;
    bytes += o.bytes;
    wan_rpcs += o.wan_rpcs;
    wan_rpc_bytes += o.wan_rpc_bytes;
    wan_bcasts += o.wan_bcasts;
    wan_bcast_bytes += o.wan_bcast_bytes;
    for (size_t i = 0; i < link.size() && i < o.link.size(); ++i) {
        link[i].rpcs += o.link[i].rpcs;
        link[i].rpc_bytes += o.link[i].rpc_bytes;
        link[i].bcasts += o.link[i].bcasts;
        link[i].bcast_bytes += o.link[i].bcast_bytes;
    }
}

std::vector<uint64_t> Traffic::to_words() const {
    std::vector<uint64_t> w = {sites, msgs, bytes, wan_rpcs, wan_rpc_bytes, wan_bcasts, wan_bcast_bytes};
    for (const LinkTraffic& l : link) w.insert(w.end(), {l.rpcs, l.rpc_bytes, l.bcasts, l.bcast_bytes});
    return w;
}

bool Traffic::from_words(std::span<const uint64_t> w) {
    if (w.size() < 7 || w[0] > 64 || w.size() != 7 + 4 * w[0] * w[0]) return false;
    sites = static_cast<uint16_t>(w[0]);
    msgs = w[1];
    bytes = w[2];
    wan_rpcs = w[3];
    wan_rpc_bytes = w[4];
    wan_bcasts = w[5];
    wan_bcast_bytes = w[6];
    link.assign(size_t{sites} * sites, {});
    for (size_t i = 0; i < link.size(); ++i) link[i] = {w[7 + 4 * i], w[8 + 4 * i], w[9 + 4 * i], w[10 + 4 * i]};
    return true;
}

Net::Net(Runtime& rt, const group::Topology& topo) : rt_(rt), topo_(topo) {
    Traffic t;
    t.sites = topo.sites;
    t.link.assign(size_t{topo.sites} * topo.sites, {});
    slots_.assign(rt.threads() + 2u, t);
}

Traffic& Net::slot(const RtEndpoint& from) {
    const uint16_t t = from.self().thread;
    return slots_[t == kRtService ? rt_.threads() : std::min<uint16_t>(t, rt_.threads())];
}

void Net::count(Traffic& s, uint16_t from_cluster, uint16_t to_cluster, uint64_t bytes, bool rpc) {
    s.msgs += 1;
    s.bytes += bytes;
    if (!crosses_wan(from_cluster, to_cluster)) return;
    LinkTraffic& l = s.link[size_t{site_of(from_cluster)} * topo_.sites + site_of(to_cluster)];
    if (rpc) {
        ++l.rpcs;
        ++s.wan_rpcs;
    }
    l.rpc_bytes += bytes;
    s.wan_rpc_bytes += bytes;
}

RtStatus Net::send(RtEndpoint& from, RtAddr dst, uint16_t handler, RtBytes a, RtBytes b) {
    count(slot(from), rt_.cluster(), dst.cluster, uint64_t{a.len} + b.len, true);
    return from.send(dst, handler, a, b);
}

RtStatus Net::request(RtEndpoint& from, RtAddr dst, uint16_t handler, RtBytes a, RtBytes b,
                      std::vector<uint8_t>& reply, uint64_t timeout_us) {
    count(slot(from), rt_.cluster(), dst.cluster, uint64_t{a.len} + b.len, true);
    return from.request(dst, handler, a, b, reply, timeout_us);
}

RtStatus Net::reply(RtEndpoint& from, const ReplyToken& to, RtBytes a, RtBytes b) {
    count(slot(from), rt_.cluster(), to.to.cluster, uint64_t{a.len} + b.len, false);
    return from.reply(to, a, b);
}

RtStatus Net::send_reply(RtEndpoint& from, RtAddr dst, uint16_t handler, RtBytes a, RtBytes b) {
    count(slot(from), rt_.cluster(), dst.cluster, uint64_t{a.len} + b.len, false);
    return from.send(dst, handler, a, b);
}

RtStatus Net::bcast(RtEndpoint& from, uint16_t handler, RtBytes a, RtBytes b) {
    Traffic& s = slot(from);
    const uint64_t n = uint64_t{a.len} + b.len;
    const RtAddr me = from.self();
    std::vector<bool> reached(topo_.sites, false);
    RtStatus st = RtStatus::kOk;
    for (uint16_t c = 0; c < topo_.clusters && st == RtStatus::kOk; ++c)
        for (uint16_t t = 0; t < topo_.threads && st == RtStatus::kOk; ++t) {
            const RtAddr dst{c, t};
            if (dst == me) continue;
            s.msgs += 1;
            s.bytes += n;
            reached[site_of(c)] = true;
            st = from.send(dst, handler, a, b);
        }
    count_bcast(s, site_of(me.cluster), reached, n);
    return st;
}

void Net::count_bcast(Traffic& s, uint16_t src, const std::vector<bool>& reached, uint64_t bytes) {
    for (uint16_t d = 0; d < topo_.sites; ++d) {
        if (d == src || !reached[d]) continue;
        LinkTraffic& l = s.link[size_t{src} * topo_.sites + d];
        ++l.bcasts;
        l.bcast_bytes += bytes;
        ++s.wan_bcasts;
        s.wan_bcast_bytes += bytes;
    }
}

void Net::note_bcast(RtEndpoint& from, uint64_t bytes) {
    count_bcast(slot(from), site_of(from.self().cluster), std::vector<bool>(topo_.sites, true), bytes);
}

void Net::add_group(const group::Counters& c) {
    Traffic& t = slots_.back();
    for (size_t k = 0; k < static_cast<size_t>(group::Coll::kCount); ++k) {
        t.msgs += c.coll[k].msgs;
        t.bytes += c.coll[k].bytes;
    }
    for (size_t i = 0; i < c.link.size() && i < t.link.size(); ++i) {
        t.link[i].bcasts += c.link[i].msgs;
        t.link[i].bcast_bytes += c.link[i].bytes;
        t.wan_bcasts += c.link[i].msgs;
        t.wan_bcast_bytes += c.link[i].bytes;
    }
}

void Net::add_rpcs(uint16_t from_site, uint16_t to_site, uint64_t rpcs, uint64_t bytes) {
    Traffic& t = slots_.back();
    t.msgs += rpcs;
    t.bytes += bytes;
    if (from_site == to_site) return;
    LinkTraffic& l = t.link[size_t{from_site} * topo_.sites + to_site];
    l.rpcs += rpcs;
    l.rpc_bytes += bytes;
    t.wan_rpcs += rpcs;
    t.wan_rpc_bytes += bytes;
}

void Net::add_ordered(const group::OrderedCounters& c) {
    Traffic& t = slots_.back();
    const uint16_t src = site_of(rt_.cluster());
    t.msgs += c.sent + c.wan_msgs;
    t.bytes += c.wan_bytes;
    for (uint16_t d = 0; d < c.to_site.size() && d < topo_.sites; ++d) {
        if (d == src) continue;
        const auto& x = c.to_site[d];
        LinkTraffic& l = t.link[size_t{src} * topo_.sites + d];
        l.bcasts += x.msgs;
        l.bcast_bytes += x.bytes;
        t.wan_bcasts += x.msgs;
        t.wan_bcast_bytes += x.bytes;
    }
}

Traffic Net::traffic() const {
    Traffic sum;
    sum.sites = topo_.sites;
    sum.link.assign(size_t{topo_.sites} * topo_.sites, {});
    for (const Traffic& s : slots_) sum.add(s);
    return sum;
}

}  // namespace iccs::widearea
