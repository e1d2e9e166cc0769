// wan_emu.cpp: see wan_emu.hpp.
#include "wan_emu.hpp"

#include <algorithm>
#include <cmath>

namespace iccs {

namespace {
constexpr uint32_t kSegBytes = 2048;  // a held buffer's footprint, charged against the hold limit
}

const char* to_string(WanMode m) {
    switch (m) {
        case WanMode::kConstant: return "constant";
        case WanMode::kScript: return "script";
        case WanMode::kSeries: return "series";
        case WanMode::kLive: return "live";
    }
    return "?";
}

WanTopology WanTopology::uniform(uint32_t sites, const WanLinkParams& p) {
    WanTopology t;
    t.sites = sites;
    t.params.assign(size_t{sites} * sites, p);
    return t;
}

std::vector<uint32_t> WanTopology::path(uint32_t from, uint32_t to) const {
    if (from == to || from >= sites || to >= sites) return {};
    // Breadth-first from `from`; sites visited in increasing id, so ties go to the lowest.
    std::vector<int32_t> prev(sites, -1);
    std::vector<uint32_t> frontier{from};
    prev[from] = static_cast<int32_t>(from);
    while (!frontier.empty() && prev[to] < 0) {
        std::vector<uint32_t> next;
        for (const uint32_t u : frontier)
            for (uint32_t v = 0; v < sites; ++v)
                if (v != u && prev[v] < 0 && at(u, v).present) {
                    prev[v] = static_cast<int32_t>(u);
                    next.push_back(v);
                }
        frontier = std::move(next);
    }
    if (prev[to] < 0) return {};
    std::vector<uint32_t> links;
    for (uint32_t v = to; v != from; v = static_cast<uint32_t>(prev[v]))
        links.push_back(static_cast<uint32_t>(prev[v]) * sites + v);
    std::reverse(links.begin(), links.end());
    return links;
}

std::string WanTopology::unreachable() const {
    for (uint32_t a = 0; a < sites; ++a)
        for (uint32_t b = 0; b < sites; ++b)
            if (a != b && path(a, b).empty())
                return "site " + std::to_string(b) + " cannot be reached from site " + std::to_string(a) +
                       " (every link towards it is cut)";
    return {};
}

WanEmulator_st::WanEmulator_st(const WanConfig& cfg, uint16_t my_cluster, uint64_t now_ns)
    : cfg_(cfg), my_site_(0), start_ns_(now_ns), topo_(cfg.topo) {
    my_site_ = my_cluster < cfg_.site_of_cluster.size() ? cfg_.site_of_cluster[my_cluster] : 0;
    rng_state_ = cfg_.loss_seed * 0x9E3779B97F4A7C15ull + my_cluster + 1;
    const size_t n = size_t{topo_.sites} * topo_.sites;
    state_.assign(n, LinkState{});
    ctr_.assign(n, WanLinkCounters{});
    queues_.resize(topo_.sites);
    last_arrival_.assign(topo_.sites, 0);
    const auto& ppc = cfg_.proxies_per_cluster;
    uint32_t remote_max = 0, d = 0;
    for (size_t c = 0; c < ppc.size(); ++c)
        if (site_of(static_cast<uint16_t>(c)) != my_site_) remote_max = std::max<uint32_t>(remote_max, ppc[c]);
    for (size_t c = 0; c < ppc.size(); ++c)
        if (site_of(static_cast<uint16_t>(c)) == my_site_) d += std::min<uint32_t>(ppc[c], remote_max);
    share_divisor_ = std::max<uint32_t>(d, 1);
    recompute_paths();
    if (!cfg_.script.empty())
        set_mode(WanMode::kScript, now_ns);
    else if (!cfg_.series.empty())
        set_mode(WanMode::kSeries, now_ns);
}

void WanEmulator_st::recompute_paths() {
    paths_.assign(topo_.sites, {});
    for (uint32_t s = 0; s < topo_.sites; ++s) paths_[s] = topo_.path(s, my_site_);
    lossy_ = false;
    for (const auto& p : paths_)
        for (const uint32_t id : p) lossy_ |= topo_.params[id].loss > 0;
}

double WanEmulator_st::unit_draw() {
    uint64_t z = (rng_state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
}

bool WanEmulator_st::lose(uint16_t src_site) {
    if (src_site >= paths_.size()) return false;
    for (const uint32_t id : paths_[src_site]) {
        const double p = topo_.params[id].loss;
        if (p > 0 && unit_draw() < p) {
            ++ctr_[id].dropped;
            return true;
        }
    }
    return false;
}

uint64_t WanEmulator_st::arrival(uint16_t src_site, uint32_t len, uint64_t now_ns) {
    uint64_t t = now_ns;
    if (src_site >= paths_.size()) return t;
    for (const uint32_t id : paths_[src_site]) {
        const WanLinkParams& p = topo_.params[id];
        LinkState& st = state_[id];
        WanLinkCounters& c = ctr_[id];
        const uint64_t start = std::max(t, st.free_at);
        const uint64_t ser =
            p.bw_bytes_per_s > 0
                ? static_cast<uint64_t>(std::llround(double(len) * 1e9 * share_divisor_ / p.bw_bytes_per_s))
                : 0;
        st.free_at = start + ser;
        const uint64_t out = std::max(st.free_at + p.latency_ns, st.last_out);
        st.last_out = out;
        ++c.msgs;
        c.bytes += len;
        c.queue_ns_sum += start - t;
        c.queue_ns_max = std::max(c.queue_ns_max, start - t);
        t = out;
    }
    t = std::max(t, last_arrival_[src_site]);  // FIFO per source, also across a change of path
    last_arrival_[src_site] = t;
    return t;
}

bool WanEmulator_st::hold(uint16_t src_site, void* item, uint32_t len, uint32_t segs, uint64_t now_ns) {
    if (src_site >= queues_.size()) src_site = my_site_;
    if (held_msgs_ > 0 && (held_segs_ + segs) * uint64_t{kSegBytes} > cfg_.hold_limit_bytes) return false;
    const uint64_t at = arrival(src_site, len, now_ns);
    queues_[src_site].push_back(Held{at, item, len, segs});
    ++held_msgs_;
    held_bytes_ += len;
    held_segs_ += segs;
    return true;
}

void* WanEmulator_st::peek_due(uint64_t now_ns, uint16_t& src_site) const {
    void* best = nullptr;
    uint64_t best_at = UINT64_MAX;
    for (size_t s = 0; s < queues_.size(); ++s)
        if (!queues_[s].empty() && queues_[s].front().at_ns <= now_ns && queues_[s].front().at_ns < best_at) {
            best_at = queues_[s].front().at_ns;
            best = queues_[s].front().item;
            src_site = static_cast<uint16_t>(s);
        }
    return best;
}

void WanEmulator_st::pop(uint16_t src_site) {
    std::deque<Held>& q = queues_[src_site];
    if (q.empty()) return;
    --held_msgs_;
    held_bytes_ -= q.front().len;
    held_segs_ -= q.front().segs;
    q.pop_front();
}

uint64_t WanEmulator_st::next_event_ns() const {
    uint64_t t = next_step_ns_;
    for (const auto& q : queues_)
        if (!q.empty()) t = std::min(t, q.front().at_ns);
    return t;
}

void WanEmulator_st::log_change(uint32_t a, uint32_t b, const WanLinkParams& p, uint64_t now_ns) {
    ++ctr_[size_t{a} * topo_.sites + b].changes;
    changes_.push_back(WanChange{now_ns - start_ns_, a, b, p});
    if (changes_.size() > kChangeLog) changes_.pop_front();
}

void WanEmulator_st::set_link(uint32_t a, uint32_t b, const WanLinkParams& p, uint64_t now_ns) {
    if (a >= topo_.sites || b >= topo_.sites || a == b) return;
    const bool repath = topo_.at(a, b).present != p.present || topo_.at(a, b).loss != p.loss;
    topo_.at(a, b) = p;
    log_change(a, b, p, now_ns);
    if (repath) recompute_paths();
}

void WanEmulator_st::set_all(const WanTopology& t, uint64_t now_ns) {
    if (t.sites != topo_.sites) return;
    for (uint32_t a = 0; a < t.sites; ++a)
        for (uint32_t b = 0; b < t.sites; ++b)
            if (a != b && !(topo_.at(a, b) == t.at(a, b))) {
                topo_.at(a, b) = t.at(a, b);
                log_change(a, b, t.at(a, b), now_ns);
            }
    recompute_paths();
}

bool WanEmulator_st::set_mode(WanMode m, uint64_t now_ns) {
    const WanProgram* prog = m == WanMode::kScript ? &cfg_.script : m == WanMode::kSeries ? &cfg_.series : nullptr;
    if (prog != nullptr && prog->empty()) return false;
    mode_ = m;
    prog_ = prog;
    pc_ = 0;
    next_step_ns_ = prog_ != nullptr ? now_ns : UINT64_MAX;
    if (m == WanMode::kConstant) set_all(cfg_.topo, now_ns);
    if (prog_ != nullptr) drive(now_ns);
    return true;
}

void WanEmulator_st::restart(uint64_t now_ns) {
    start_ns_ = now_ns;
    changes_.clear();
    for (WanLinkCounters& c : ctr_) c.changes = 0;
    set_mode(mode_, now_ns);
}

void WanEmulator_st::drive(uint64_t now_ns) {
    // Bounded: a program always sleeps inside a loop (the parser refuses one that does not).
    for (uint32_t steps = 0; prog_ != nullptr && now_ns >= next_step_ns_ && steps < 1'000'000; ++steps) {
        if (pc_ >= prog_->ops.size()) {  // the end: the last values stay
            prog_ = nullptr;
            next_step_ns_ = UINT64_MAX;
            break;
        }
        const WanOp& op = prog_->ops[pc_++];
        switch (op.kind) {
            case WanOp::kSleep: next_step_ns_ += op.ns; break;  // from the scheduled time: no drift
            case WanOp::kSet: {
                WanLinkParams p = op.params;
                if (!op.with_loss) p.loss = topo_.at(op.a, op.b).loss;
                set_link(op.a, op.b, p, now_ns);
                break;
            }
            case WanOp::kLoss: {
                WanLinkParams p = topo_.at(op.a, op.b);
                p.loss = op.params.loss;
                set_link(op.a, op.b, p, now_ns);
                break;
            }
            case WanOp::kScenario: set_all(prog_->scenarios[op.scenario], now_ns); break;
            case WanOp::kJump: pc_ = op.target; break;
        }
    }
}

std::vector<std::pair<uint32_t, uint32_t>> WanEmulator_st::used_links() const {
    std::vector<uint32_t> ids;
    for (const auto& p : paths_) ids.insert(ids.end(), p.begin(), p.end());
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    std::vector<std::pair<uint32_t, uint32_t>> out;
    for (const uint32_t id : ids) out.emplace_back(id / topo_.sites, id % topo_.sites);
    return out;
}

}  // namespace iccs
