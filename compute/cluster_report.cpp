// cluster_report.cpp: print_report() (cluster.hpp), what one cluster process counted: its PASS|FAIL
// line, then per proxy its traffic, faults, foreign frames, polling, direct path, combining,
// capture and WAN stage, and per compute thread its convergence counters.
#include <cstdio>
#include <string>

#include "cluster.hpp"

namespace iccs {

void print_report(const ClusterPlan& plan, const ClusterReport& r, FILE* out) {
    std::fprintf(out, "cluster %u: %s  sent %llu, received %llu, missing %llu, duplicated %llu, corrupt %llu, %.2f s%s%s\n",
                plan.cluster_id, r.ok ? "PASS" : "FAIL", static_cast<unsigned long long>(r.sent),
                static_cast<unsigned long long>(r.received), static_cast<unsigned long long>(r.missing),
                static_cast<unsigned long long>(r.duplicates), static_cast<unsigned long long>(r.corrupt), r.seconds,
                r.error.empty() ? "" : "  error: ", r.error.c_str());
    if (r.ended)  // how the run's end went (cluster.cpp, end_together)
        std::fprintf(out, "  end %u: lingered %.1f ms for the others' last retransmissions, %s\n", plan.cluster_id,
                     r.linger_ms,
                     r.linger_cut ? "until every other cluster said idle"
                                  : "the whole limit (an idle status of ours or theirs was not heard in time)");
    for (size_t i = 0; i < r.proxies.size(); ++i) {
        const ProxySnapshot& s = r.proxies[i];
        const double util = s.proxy.total_ns ? static_cast<double>(s.proxy.busy_ns) / s.proxy.total_ns : 0.0;
        const double qlen = s.proxy.total_ns ? static_cast<double>(s.proxy.queue_ns_sum) / s.proxy.total_ns : 0.0;
        std::fprintf(out, "  proxy %u.%zu: msgs tx %llu rx %llu, frames tx %llu rx %llu (tx ring full %llu), retx %llu, dup %llu, "
                    "csum drops %llu, reass drops %llu, window stalls %llu, ring full %llu, util %.2f, queue %.2f, "
                    "msg time mean %.1f us (p50 < %.1f, p99 < %.1f)\n",
                    plan.cluster_id, i, static_cast<unsigned long long>(s.proxy.msgs_tx),
                    static_cast<unsigned long long>(s.proxy.msgs_rx), static_cast<unsigned long long>(s.port_tx),
                    static_cast<unsigned long long>(s.port_rx), static_cast<unsigned long long>(s.port_tx_ring_full),
                    static_cast<unsigned long long>(s.slidwin.tx_retx),
                    static_cast<unsigned long long>(s.slidwin.rx_dup),
                    static_cast<unsigned long long>(s.stack.drop_ip_csum + s.stack.drop_udp_csum),
                    static_cast<unsigned long long>(s.stack.drop_reass_overlap + s.stack.drop_reass_timeout +
                                                    s.stack.drop_reass_cap + s.stack.drop_reass_oversize),
                    static_cast<unsigned long long>(s.slidwin.window_stalls),
                    static_cast<unsigned long long>(s.proxy.ring_full), util, qlen,
                    s.proxy.msg_time_count ? static_cast<double>(s.proxy.msg_time_sum_ns) / s.proxy.msg_time_count / 1000.0
                                           : 0.0,
                    static_cast<double>(msg_time_quantile_ns(s.proxy, 0.50)) / 1000.0,
                    static_cast<double>(msg_time_quantile_ns(s.proxy, 0.99)) / 1000.0);
        // What the retransmissions were (issue 35): the timer's (RTO) or the selective acks'; and frames
        // dropped at the stack's own TX queue. On a lossless fabric (memif) every one of them is a
        // copy the peer already had (its dup) unless drop_tx_full moved: timers that expired while
        // the proxies got no core (proxy/README.md, "Retransmissions on a lossless fabric").
        if (s.slidwin.tx_retx + s.stack.drop_tx_full != 0)
            std::fprintf(out, "  retransmissions %u.%zu: %llu after %llu timer expirations, %llu on selective acks; "
                         "frames dropped at the TX queue %llu\n",
                         plan.cluster_id, i, static_cast<unsigned long long>(s.slidwin.tx_rto_retx),
                         static_cast<unsigned long long>(s.slidwin.rto_expired),
                         static_cast<unsigned long long>(s.slidwin.tx_fast_retx),
                         static_cast<unsigned long long>(s.stack.drop_tx_full));
        // Fault injection ([test] drop, duplicate): what it did to the frames this proxy received,
        // so that a test sees the knob took effect (retransmissions alone also come from load).
        if (plan.impair.drop > 0 || plan.impair.duplicate > 0)
            std::fprintf(out, "  faults %u.%zu: dropped %llu and duplicated %llu of %llu frames received (drop %g, "
                         "duplicate %g)\n",
                         plan.cluster_id, i, static_cast<unsigned long long>(s.proxy.impair_dropped),
                         static_cast<unsigned long long>(s.proxy.impair_duplicated),
                         static_cast<unsigned long long>(s.port_rx), plan.impair.drop, plan.impair.duplicate);
        // Frames that were not the run's own (issues 17, 37), by reason; only when there were some.
        const SlidwinCounters& w = s.slidwin;
        if (w.drop_token + w.drop_out_of_window + w.drop_unsynced + w.drop_unknown_subconn + w.drop_auth +
                w.drop_replay + w.drop_handshake_rate + w.tentative_replaced + w.restart_challenges +
                s.proxy.peers_restarted != 0)
            std::fprintf(out, "  foreign %u.%zu: drop_token %llu, drop_out_of_window %llu, drop_unsynced %llu, "
                        "drop_unknown_subconn %llu, drop_auth %llu, drop_replay %llu, drop_handshake_rate %llu, "
                        "tentative_replaced %llu, restart_challenges %llu, challenge_failed %llu, peers_restarted %llu\n",
                        plan.cluster_id, i, static_cast<unsigned long long>(w.drop_token),
                        static_cast<unsigned long long>(w.drop_out_of_window),
                        static_cast<unsigned long long>(w.drop_unsynced),
                        static_cast<unsigned long long>(w.drop_unknown_subconn),
                        static_cast<unsigned long long>(w.drop_auth),
                        static_cast<unsigned long long>(w.drop_replay),
                        static_cast<unsigned long long>(w.drop_handshake_rate),
                        static_cast<unsigned long long>(w.tentative_replaced),
                        static_cast<unsigned long long>(w.restart_challenges),
                        static_cast<unsigned long long>(w.challenge_failed),
                        static_cast<unsigned long long>(s.proxy.peers_restarted));
        if (plan.polling == Polling::kAdaptive)  // who ran the iterations, how often the thread slept
            std::fprintf(out, "  polling %u.%zu: adaptive, %llu iterations with work run by compute threads (assists), "
                        "%llu sleeps, %llu doorbells rung\n",
                        plan.cluster_id, i, static_cast<unsigned long long>(s.proxy.assists),
                        static_cast<unsigned long long>(s.proxy.sleeps),
                        static_cast<unsigned long long>(s.proxy.bell_rings));
        if (plan.polling == Polling::kAdaptive && s.kernel_udp)  // the assist's direct path (uring_udp.hpp)
            std::fprintf(out, "  direct %u.%zu: compute threads took %llu datagrams from the socket (%llu recvmmsg, %llu "
                        "empty) and sent %llu (%llu sendmmsg, %llu refused for now)\n",
                        plan.cluster_id, i, static_cast<unsigned long long>(s.uring.rx_direct_datagrams),
                        static_cast<unsigned long long>(s.uring.rx_direct_calls),
                        static_cast<unsigned long long>(s.uring.rx_direct_empty),
                        static_cast<unsigned long long>(s.uring.tx_direct_datagrams),
                        static_cast<unsigned long long>(s.uring.tx_direct_calls),
                        static_cast<unsigned long long>(s.uring.tx_direct_again));
        if (s.proxy.combined_dgrams + s.proxy.bundles_rx + s.proxy.bad_bundle > 0)  // message combining
            std::fprintf(out, "  combining %u.%zu: sent %llu messages in %llu bundles (%.1f per datagram), received %llu "
                        "messages in %llu bundles, bad bundles %llu\n",
                        plan.cluster_id, i, static_cast<unsigned long long>(s.proxy.combined_msgs),
                        static_cast<unsigned long long>(s.proxy.combined_dgrams),
                        s.proxy.combined_dgrams ? static_cast<double>(s.proxy.combined_msgs) / s.proxy.combined_dgrams
                                                : 0.0,
                        static_cast<unsigned long long>(s.proxy.bundle_msgs_rx),
                        static_cast<unsigned long long>(s.proxy.bundles_rx),
                        static_cast<unsigned long long>(s.proxy.bad_bundle));
        if (s.proxy.bundle_nobuf > 0)
            std::fprintf(out, "  combining %u.%zu: unpacking waited for buffers %llu times\n", plan.cluster_id, i,
                         static_cast<unsigned long long>(s.proxy.bundle_nobuf));
        if (!plan.pcap_dir.empty()) {
            const std::string file = pcap_path(plan, plan.cluster_id, static_cast<uint16_t>(i));
            std::fprintf(out, "  capture %u.%zu: %s: %llu frames", plan.cluster_id, i, file.c_str(),
                        static_cast<unsigned long long>(s.proxy.capture_frames));
            if (s.proxy.capture_missed != 0)
                std::fprintf(out, ", stopped at [machine] pcap_max_bytes = %llu: %llu frames missed",
                            static_cast<unsigned long long>(plan.pcap_max_bytes),
                            static_cast<unsigned long long>(s.proxy.capture_missed));
            std::fprintf(out, "\n");
        }
        if (i < r.wan.size() && r.wan[i].on)  // WAN stage: per link it emulates, what it carried and lost
            for (const WanView::Link& l : r.wan[i].links)
                std::fprintf(out, "  wan %u.%zu: link %u->%u msgs %llu bytes %llu dropped %llu (loss %g)\n", plan.cluster_id, i,
                            l.a, l.b, static_cast<unsigned long long>(l.counters.msgs),
                            static_cast<unsigned long long>(l.counters.bytes),
                            static_cast<unsigned long long>(l.counters.dropped), l.params.loss);
    }
    const size_t nprox = plan.proxies_per_cluster.empty() ? 0 : plan.proxies_per_cluster[plan.cluster_id];
    for (size_t t = 0; t < r.threads.size(); ++t) {
        const ConvCounters& c = r.threads[t];
        std::string per;
        for (size_t q = 0; q < nprox && q < ConvCounters::kProxiesCounted; ++q) {
            if (q) per += ' ';
            per += std::to_string(c.to_proxy[q]);
        }
        std::fprintf(out, "  thread %u.%zu: msgs sent %llu received %llu, pieces sent %llu, to proxies [%s], waits: ring %llu "
                    "buffers %llu window %llu, credits %llu, stale %llu\n",
                    plan.cluster_id, t, static_cast<unsigned long long>(c.msgs_sent),
                    static_cast<unsigned long long>(c.msgs_received), static_cast<unsigned long long>(c.pieces_sent),
                    per.c_str(), static_cast<unsigned long long>(c.ring_full_waits),
                    static_cast<unsigned long long>(c.pool_empty_waits), static_cast<unsigned long long>(c.window_waits),
                    static_cast<unsigned long long>(c.credits_sent), static_cast<unsigned long long>(c.stale));
    }
    std::fflush(stdout);
}

}  // namespace iccs
