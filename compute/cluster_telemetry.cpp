// cluster_telemetry.cpp: see cluster_telemetry.hpp.
#include "cluster_telemetry.hpp"

#include <rte_telemetry.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "wan_script.hpp"

namespace iccs {

namespace {

// ---- /iccs/proxies and /iccs/proxy/stats,<n> (DESIGN.md §6)
std::vector<std::unique_ptr<Proxy>>* g_proxies = nullptr;
std::mutex g_proxies_mu;  // telemetry callbacks run on DPDK's control thread, teardown on main

int tel_proxies(const char*, const char*, rte_tel_data* d) {
    std::lock_guard<std::mutex> lock(g_proxies_mu);
    rte_tel_data_start_array(d, RTE_TEL_INT_VAL);
    if (g_proxies != nullptr)
        for (size_t i = 0; i < g_proxies->size(); ++i) rte_tel_data_add_array_int(d, static_cast<int>(i));
    return 0;
}

int tel_proxy_stats(const char*, const char* params, rte_tel_data* d) {
    std::lock_guard<std::mutex> lock(g_proxies_mu);
    if (g_proxies == nullptr || params == nullptr) return -1;
    char* end = nullptr;
    const long n = std::strtol(params, &end, 10);
    if (end == params || n < 0 || static_cast<size_t>(n) >= g_proxies->size()) return -1;
    const Proxy& px = *(*g_proxies)[static_cast<size_t>(n)];
    const ProxySnapshot s = px.snapshot();
    rte_tel_data_start_dict(d);
    rte_tel_data_add_dict_u64(d, "cluster", px.config().cluster);
    rte_tel_data_add_dict_u64(d, "proxy", px.config().index);
    auto add = [d](const char* name, const char*, uint64_t v) { rte_tel_data_add_dict_u64(d, name, v); };
    s.proxy.for_each(add);
    s.slidwin.for_each(add);
    s.stack.for_each(add);
    // message time (DESIGN.md §6): mean, quantile bounds, and the log2 histogram's non-empty buckets
    rte_tel_data_add_dict_u64(d, "msg_time_mean_ns",
                              s.proxy.msg_time_count ? s.proxy.msg_time_sum_ns / s.proxy.msg_time_count : 0);
    rte_tel_data_add_dict_u64(d, "msg_time_p50_below_ns", msg_time_quantile_ns(s.proxy, 0.50));
    rte_tel_data_add_dict_u64(d, "msg_time_p99_below_ns", msg_time_quantile_ns(s.proxy, 0.99));
    for (uint32_t b = 0; b < kMsgTimeBuckets; ++b)
        if (s.proxy.msg_time_hist[b] != 0)
            rte_tel_data_add_dict_u64(d, ("msg_time_hist_lt_" + std::to_string(uint64_t{2} << b) + "_ns").c_str(),
                                      s.proxy.msg_time_hist[b]);
    rte_tel_data_add_dict_u64(d, "port_rx_frames", s.port_rx);
    rte_tel_data_add_dict_u64(d, "port_tx_frames", s.port_tx);
    rte_tel_data_add_dict_u64(d, "port_tx_ring_full", s.port_tx_ring_full);
    if (s.kernel_udp) {  // fabric udp: the io_uring socket's own counters
        s.uring.for_each([d](const char* name, const char*, uint64_t v) {
            rte_tel_data_add_dict_u64(d, ("uring_" + std::string(name)).c_str(), v);
        });
    }
    return 0;
}

// ---- /iccs/wan/links,<n>, /iccs/wan/set, /iccs/wan/mode (proxy/wan_emu.hpp)
// links: a flat dict (DPDK 22.11 names are [A-Za-z0-9_/], dict containers hold arrays only):
// mode, hold counters, link_<A>_<B>_<counter> per link this proxy emulates (bw_bytes_per_s,
// lat_ns, present, msgs, bytes, queue_ns_sum, queue_ns_mean, queue_ns_max, changes, loss_ppm:
// the loss probability in parts per million, dropped: frames lost), and the
// recent changes as parallel arrays change_at_us, change_a, change_b, change_bw, change_lat_ns.
int tel_wan_links(const char*, const char* params, rte_tel_data* d) {
    std::lock_guard<std::mutex> lock(g_proxies_mu);
    if (g_proxies == nullptr || params == nullptr) return -1;
    char* end = nullptr;
    const long n = std::strtol(params, &end, 10);
    if (end == params || n < 0 || static_cast<size_t>(n) >= g_proxies->size()) return -1;
    const WanView v = (*g_proxies)[static_cast<size_t>(n)]->wan_view();
    rte_tel_data_start_dict(d);
    rte_tel_data_add_dict_string(d, "mode", v.on ? to_string(v.mode) : "off");
    if (!v.on) return 0;
    rte_tel_data_add_dict_u64(d, "site", v.my_site);
    rte_tel_data_add_dict_u64(d, "sites", v.sites);
    rte_tel_data_add_dict_u64(d, "held_msgs", v.held_msgs);
    rte_tel_data_add_dict_u64(d, "held_bytes", v.held_bytes);
    rte_tel_data_add_dict_u64(d, "held_max_msgs", v.held_max_msgs);
    rte_tel_data_add_dict_u64(d, "hold_full", v.hold_full);
    rte_tel_data_add_dict_u64(d, "released", v.released);
    size_t entries = 7;
    for (const WanView::Link& l : v.links) {
        if (entries + 11 > RTE_TEL_MAX_DICT_ENTRIES - 8) break;  // the dict's limit (the change arrays follow)
        entries += 11;
        const std::string k = "link_" + std::to_string(l.a) + "_" + std::to_string(l.b) + "_";
        const WanLinkCounters& c = l.counters;
        rte_tel_data_add_dict_u64(d, (k + "bw_bytes_per_s").c_str(), static_cast<uint64_t>(l.params.bw_bytes_per_s));
        rte_tel_data_add_dict_u64(d, (k + "lat_ns").c_str(), l.params.latency_ns);
        rte_tel_data_add_dict_u64(d, (k + "present").c_str(), l.params.present ? 1 : 0);
        rte_tel_data_add_dict_u64(d, (k + "msgs").c_str(), c.msgs);
        rte_tel_data_add_dict_u64(d, (k + "bytes").c_str(), c.bytes);
        rte_tel_data_add_dict_u64(d, (k + "queue_ns_sum").c_str(), c.queue_ns_sum);
        rte_tel_data_add_dict_u64(d, (k + "queue_ns_mean").c_str(), c.msgs ? c.queue_ns_sum / c.msgs : 0);
        rte_tel_data_add_dict_u64(d, (k + "queue_ns_max").c_str(), c.queue_ns_max);
        rte_tel_data_add_dict_u64(d, (k + "changes").c_str(), c.changes);
        rte_tel_data_add_dict_u64(d, (k + "loss_ppm").c_str(), static_cast<uint64_t>(std::llround(l.params.loss * 1e6)));
        rte_tel_data_add_dict_u64(d, (k + "dropped").c_str(), c.dropped);
    }
    const char* names[] = {"change_at_us", "change_a", "change_b", "change_bw", "change_lat_ns"};
    for (int f = 0; f < 5; ++f) {
        rte_tel_data* arr = rte_tel_data_alloc();
        if (arr == nullptr) return -1;
        rte_tel_data_start_array(arr, RTE_TEL_U64_VAL);
        for (const WanChange& ch : v.changes) {
            const uint64_t x = f == 0   ? ch.at_ns / 1000
                               : f == 1 ? ch.a
                               : f == 2 ? ch.b
                               : f == 3 ? static_cast<uint64_t>(ch.params.bw_bytes_per_s)
                                        : ch.params.latency_ns;
            rte_tel_data_add_array_u64(arr, x);
        }
        rte_tel_data_add_dict_container(d, names[f], arr, 0);
    }
    return 0;
}

// {"result": "ok"} or {"result": "error: ..."} (a telemetry string holds at most 127 characters).
void add_result(rte_tel_data* d, const std::string& err) {
    std::string r = err.empty() ? std::string("ok") : "error: " + err;
    if (r.size() >= RTE_TEL_MAX_STRING_LEN) r.resize(RTE_TEL_MAX_STRING_LEN - 1);
    rte_tel_data_add_dict_string(d, "result", r.c_str());
}

// /iccs/wan/set and /iccs/wan/loss: "A,B,VALUES...[,sym]" changes link A -> B (and B -> A with
// sym) on every proxy of this cluster; `parse` reads the values (after A and B) into `c`.
int tel_wan_link_change(const char* params, rte_tel_data* d, WanCommand c,
                        bool (*parse)(const std::string&, uint32_t, WanCommand&, std::string&)) {
    std::lock_guard<std::mutex> lock(g_proxies_mu);
    if (g_proxies == nullptr || g_proxies->empty() || params == nullptr) return -1;
    std::string args(params);
    bool sym = false;
    if (args.size() > 4 && args.compare(args.size() - 4, 4, ",sym") == 0) {
        sym = true;
        args.resize(args.size() - 4);
    }
    for (char& ch : args)
        if (ch == ',') ch = ' ';
    rte_tel_data_start_dict(d);
    const WanView v = (*g_proxies)[0]->wan_view();
    std::string err;
    if (!v.on) {
        err = "the WAN stage is off in this run (start it with a [wan] key)";
    } else if (parse(args, v.sites, c, err)) {
        for (auto& px : *g_proxies) {
            px->wan_post(c);
            if (sym) {
                WanCommand r = c;
                std::swap(r.a, r.b);
                px->wan_post(r);
            }
        }
    }
    add_result(d, err);
    return 0;
}

// /iccs/wan/set,A,B,BW,LAT_S[,sym]: bandwidth and latency of a link.
int tel_wan_set(const char*, const char* params, rte_tel_data* d) {
    return tel_wan_link_change(params, d, WanCommand{}, [](const std::string& a, uint32_t sites, WanCommand& c,
                                                            std::string& err) {
        return wan_parse_link_values(a, sites, c.a, c.b, c.params, err);
    });
}

// /iccs/wan/loss,A,B,P[,sym]: the link loses frames with probability P.
int tel_wan_loss(const char*, const char* params, rte_tel_data* d) {
    WanCommand c;
    c.kind = WanCommand::kLoss;
    return tel_wan_link_change(params, d, c, [](const std::string& a, uint32_t sites, WanCommand& cmd,
                                                 std::string& err) {
        return wan_parse_loss_values(a, sites, cmd.a, cmd.b, cmd.params.loss, err);
    });
}

// /iccs/wan/mode,constant|script|series|live
int tel_wan_mode(const char*, const char* params, rte_tel_data* d) {
    std::lock_guard<std::mutex> lock(g_proxies_mu);
    if (g_proxies == nullptr || g_proxies->empty() || params == nullptr) return -1;
    const std::string m(params);
    WanCommand c;
    c.kind = WanCommand::kMode;
    std::string err;
    if (m == "constant") c.mode = WanMode::kConstant;
    else if (m == "script") c.mode = WanMode::kScript;
    else if (m == "series") c.mode = WanMode::kSeries;
    else if (m == "live") c.mode = WanMode::kLive;
    else err = "mode '" + m + "': allowed values are constant, script, series, live";
    const WanConfig* wc = nullptr;
    if (err.empty()) {
        if (!(*g_proxies)[0]->config().wan) err = "the WAN stage is off in this run";
        else wc = (*g_proxies)[0]->config().wan.get();
    }
    if (err.empty() && ((c.mode == WanMode::kScript && wc->script.empty()) ||
                        (c.mode == WanMode::kSeries && wc->series.empty())))
        err = "no [wan] " + m + " was given to this run";
    if (err.empty())
        for (auto& px : *g_proxies) px->wan_post(c);
    rte_tel_data_start_dict(d);
    add_result(d, err);
    return 0;
}

}  // namespace

void serve_proxy_telemetry(std::vector<std::unique_ptr<Proxy>>* proxies) {
    {
        std::lock_guard<std::mutex> lock(g_proxies_mu);
        g_proxies = proxies;
    }
    rte_telemetry_register_cmd("/iccs/proxies", tel_proxies, "Proxies of this cluster. No parameters");
    rte_telemetry_register_cmd("/iccs/proxy/stats", tel_proxy_stats,
                               "Counters of one proxy. Parameter: proxy index");
    rte_telemetry_register_cmd("/iccs/wan/links", tel_wan_links,
                               "WAN emulation of one proxy: the links it emulates (parameters, counters) "
                               "and the recent changes. Parameter: proxy index");
    rte_telemetry_register_cmd("/iccs/wan/set", tel_wan_set,
                               "WAN emulation: set link A -> B. Parameters: A,B,BW_BYTES_PER_S,LAT_S[,sym]");
    rte_telemetry_register_cmd("/iccs/wan/loss", tel_wan_loss,
                               "WAN emulation: loss of link A -> B. Parameters: A,B,PROBABILITY[,sym]");
    rte_telemetry_register_cmd("/iccs/wan/mode", tel_wan_mode,
                               "WAN emulation: what drives the links. Parameter: constant, script, series, live");
}

void unserve_proxy_telemetry() {
    std::lock_guard<std::mutex> lock(g_proxies_mu);
    g_proxies = nullptr;
}

}  // namespace iccs
