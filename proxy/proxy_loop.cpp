// proxy_loop.cpp: a proxy's loop (proxy.hpp): one iteration drains the rings, polls the ports,
// runs timers and the WAN stage, flushes transmit bursts; run() repeats it on the proxy's lcore
// (busy or adaptive polling), try_poll_inline() from a compute thread; the status pass tells the
// other clusters this one is alive and whether it is done.
#include "proxy_impl.hpp"

#include <rte_ring.h>
#include <sched.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "conv_hdr.hpp"
#include "stamps.hpp"

namespace iccs {

namespace {
constexpr uint64_t kWanSpinNs = 100'000;  // adaptive: spin, not sleep, this close to a WAN event
constexpr uint64_t kAssistRecentNs = 10'000'000;  // adaptive: compute threads assisted this lately ...
constexpr uint64_t kAssistSleepNs = 1'000'000;    // ... then the proxy thread sleeps at most this long
// A memif ring holds 1024 frames, 32 bursts: the timers wait at most that many iterations for a
// port's backlog to be read (poll_once).
constexpr uint32_t kMaxTimerDeferrals = 32;
constexpr uint64_t kOwnStallNs = 500'000'000;   // status passes further apart than this (+ the longest sleep): not run
}  // namespace

void Proxy::status_pass(uint64_t now_ns) {
    const bool done = rings_.local_done();
    const bool idle = rings_.local_idle();
    const bool due = now_ns - last_status_ns_ >= uint64_t{cfg_.keepalive_ms} * 1'000'000;
    if (due || (done && !sent_done_) || (idle && !sent_idle_)) {
        last_status_ns_ = now_ns;
        sent_done_ = done;
        sent_idle_ = idle;
        for (Route& r : routes_) {
            if (r.sc == nullptr || rings_.cluster_down(r.cluster)) continue;
            // Behind a long backlog a status message adds nothing but a wait; the keepalive
            // frame below speaks for us there.
            if (r.backlog.size() <= 64) {
                PktBuf* m = pkt_alloc(pool_);
                if (m == nullptr) break;
                ConvHdr h{};
                h.src_cluster = be16::of(cfg_.cluster);
                h.dst_cluster = be16::of(r.cluster);
                h.type = static_cast<uint8_t>(ConvType::kProxyStatus);
                h.flags = static_cast<uint8_t>((done ? kStatusDone : 0) | (idle ? kStatusIdle : 0));
                h.piece_cnt = be16::of(1);
                store_hdr(pkt_append(m, kConvHdrLen), h);
                ++ctr_.status_tx;
                route_send(r.cluster, m, now_ns);
            }
            // What did not leave now waits for the peer's window (closed, or held by a hole
            // whose retransmission backs off up to rto_max): a bare ack tells the peer we are
            // alive meanwhile, so a stalled window never looks like silence.
            if ((!r.backlog.empty() || r.sc->snd_sent() != r.sc->snd_nxt()) && slidwin_keepalive(*r.sc, now_ns))
                ++ctr_.keepalive_acks;
        }
        if (idle) said_idle_.store(true, std::memory_order_release);
    }
    // Heard: any datagram of the cluster's sub-connections that slidwin took as its confirmed
    // peer's (authenticated with a key; slidwin.hpp, last_valid_rx_ns), not only what we could
    // deliver: a peer whose data waits behind a hole, a closed window or our full ring is alive.
    for (const Heard& f : heard_from_) {
        uint64_t& h = last_heard_ns_[f.cluster];
        const uint64_t rx = f.sc->last_valid_rx_ns();
        if (h == 0 || rx == 0) continue;
        h = heard_once_[f.cluster] ? std::max(h, rx) : rx;  // the first word ends the start grace
        heard_once_[f.cluster] = 1;
    }
    // A pass long after the last one: this proxy was not run meanwhile (a host that stopped the
    // process or gave it no core for seconds: perf/README.md, issue 21), so it did not listen;
    // that time does not count as the peers' silence. Else a run stopped as a whole (SIGSTOP, a
    // paused VM) reports every peer down the moment it resumes, before it reads their frames.
    const uint64_t longest_sleep_ns = uint64_t{std::max(cfg_.sleep_us, cfg_.woken_sleep_us)} * 1000;
    if (last_pass_ns_ != 0 && now_ns - last_pass_ns_ > kOwnStallNs + longest_sleep_ns) {
        const uint64_t gap = now_ns - last_pass_ns_;
        for (uint64_t& h : last_heard_ns_)  // (what this iteration heard is already at now_ns)
            if (h != 0) h = std::min(h + gap, now_ns);
        ++ctr_.own_stalls;
        // Inline polling runs the loop only when compute threads call in: long gaps are normal there.
        if (cfg_.polling != Polling::kInline)
            std::fprintf(stderr, "proxy %u.%u: this proxy was not run for %.1f s (its process stopped, or given no core); "
                         "that time is not counted as the other clusters' silence\n", cfg_.cluster, cfg_.index, gap * 1e-9);
    }
    last_pass_ns_ = now_ns;
    if (cfg_.peer_timeout_ms == 0) return;
    const uint64_t timeout_ns = uint64_t{cfg_.peer_timeout_ms} * 1'000'000;
    // A cluster that never said a word may not have started yet: it gets the start grace.
    const uint32_t grace_ms = std::max(cfg_.start_grace_ms, cfg_.peer_timeout_ms);
    for (size_t c = 0; c < routes_.size(); ++c) {
        const bool never = !heard_once_[c];
        const uint64_t limit_ns = never ? uint64_t{grace_ms} * 1'000'000 : timeout_ns;
        if (routes_[c].sc == nullptr || last_heard_ns_[c] == 0 || now_ns < last_heard_ns_[c] + limit_ns) continue;
        const auto why = never ? ClusterRings::DownReason::kNeverCame : ClusterRings::DownReason::kSilent;
        if (rings_.mark_cluster_down(static_cast<uint32_t>(c), why)) {
            ++ctr_.peers_down;
            if (never)
                std::fprintf(stderr, "proxy %u.%u: cluster %zu never answered (nothing heard from it in the %u ms "
                             "since this proxy started): reported to the compute threads\n", cfg_.cluster, cfg_.index,
                             c, grace_ms);
            else if (!rings_.cluster_done(static_cast<uint32_t>(c)))
                std::fprintf(stderr, "proxy %u.%u: cluster %zu stopped answering (nothing heard for %u ms): "
                             "reported to the compute threads\n", cfg_.cluster, cfg_.index, c, cfg_.peer_timeout_ms);
            for (uint32_t t = 0; t < rings_.threads(); ++t) rings_.thread_waker(t).wake();
            if (!rings_.cluster_done(static_cast<uint32_t>(c))) report_pools();
        }
        last_heard_ns_[c] = 0;  // reported once
    }
}

uint32_t Proxy::poll_once(uint64_t now_ns) {
    // inline polling: threads read the clock before they take the lock, so a later iteration can
    // bring an earlier time; never let the proxy's clock go back.
    now_ns = std::max(now_ns, last_iter_ns_);
    iter_now_ns_ = now_ns;
    uint32_t work = 0;
    drain_rings(now_ns, work);
    // What the threads handed over leaves now, not after the receive and the housekeeping below
    // (a ping-pong's send waited for an empty rx_burst and the timers: perf/README.md, issue 21).
    // Fabric udp flushes once, at the end: a flush there is a system call.
    if (!udp_ && stack_.tx_queued() > 0) flush_tx();
    // The housekeeping comes before the receive, so a frame delivered below reaches its thread
    // (under inline polling: the caller, right after this returns) without waiting for it.
    // What the receive leaves for it (refusals, a full thread ring) waits one iteration.
    for (auto [cluster, m] : refusals_) route_send(cluster, m, now_ns);
    refusals_.clear();
    if (!blocked_.empty()) {
        blocked_prev_.swap(blocked_);
        blocked_.clear();
        for (SubConnection* sc : blocked_prev_) slidwin_deliver_pending(*sc, now_ns);
    } else {
        blocked_prev_.clear();
    }
    if (wan_) work += wan_poll(now_ns);
    if (now_ns - last_timers_ns_ >= 1'000'000) {
        stack_.timers(now_ns);
        status_pass(now_ns);
        last_timers_ns_ = now_ns;
        if (capture_ && now_ns - capture_flush_ns_ >= 100'000'000) {  // readable while the run goes on
            capture_->flush();
            capture_flush_ns_ = now_ns;
        }
    }
    PktBuf* frames[kBurst * 2];
    bool backlog = false;  // a port gave a whole burst: more may wait in it
    for (size_t p = 0; p < ports_.size(); ++p) {
        if (port_state_[p] == kGone) continue;
        uint32_t n = ports_[p]->rx_burst(frames, kBurst);
        backlog |= n == kBurst;
        // A peer that hung up: what it sent before it went is read to the last frame (its "done",
        // its last acks), then the port is left. Looked at only when the link is empty.
        if (n == 0 && port_hangup_[p].load(std::memory_order_acquire)) {
            if (port_state_[p] == kDraining) leave_port(p);
            else port_state_[p] = kDraining;  // one more look: it may have written after this one
            continue;
        }
        if (n > 0) stamps::stamp(stamps::kFabricRx);
        if (capture_) capture_rx(p, frames, n);  // what the port delivered, before fault injection
        work += n;
        if (impair_on_) n = impair_burst(frames, n);
        if (wan_ && wan_->lossy()) n = wan_lose_burst(frames, n, false);
        if (n > 0) stack_.input_burst(frames, n, now_ns);
    }
    if (udp_) {  // fabric udp: datagrams, fault injection as for frames, straight to the endpoint
        uint32_t n = udp_->rx_burst(frames, kBurst);
        backlog |= n == kBurst;
        work += n;
        if (impair_on_) n = impair_burst(frames, n);
        if (wan_ && wan_->lossy()) n = wan_lose_burst(frames, n, true);
        if (n > 0) udp_->input_burst(frames, n, now_ns);
        udp_->sample_kernel_drops(now_ns);
    }
    // The timers run after the receive, and while a port still holds frames (a whole burst came)
    // they wait for it to be read, up to kMaxTimerDeferrals iterations: a retransmission timer
    // judged before reading the acks that wait in the port resends what the peer already has.
    // After any pause of this proxy longer than the RTO (a host that gave it no core) that was a
    // burst of up to max_retx_burst spurious copies: most retransmissions on memif (issue 35;
    // proxy/README.md, "Retransmissions on a lossless fabric").
    if (!backlog || ++timers_deferred_ >= kMaxTimerDeferrals) {
        timers_deferred_ = 0;
        wheel_.advance(now_ns);
    }
    if (udp_)
        work += udp_->flush();  // one system call at most; completions it produced keep us awake
    else
        flush_tx();
    // accounting: utilization and time-weighted ring occupancy (the rings' occupancy sampled
    // every 16th iteration, weighted by the time since the last sample: reading every ring's
    // head and tail was a tenth of an idle iteration)
    if (last_iter_ns_ != 0) {
        const uint64_t dt = now_ns - last_iter_ns_;
        ctr_.total_ns += dt;
        if (work > 0) ctr_.busy_ns += dt;
        queue_dt_ns_ += dt;
        if (++queue_sample_ % 16 == 0) {
            uint64_t q = 0;
            for (uint32_t t = 0; t < rings_.threads(); ++t) q += rte_ring_count(rings_.to_proxy(t, cfg_.index));
            ctr_.queue_ns_sum += q * queue_dt_ns_;
            queue_dt_ns_ = 0;
        }
    }
    last_iter_ns_ = now_ns;
    if (work > 0 && cfg_.impair.slow_us > 0 && cfg_.impair.slow_proxy == cfg_.index) {
        const timespec ts{0, static_cast<long>(cfg_.impair.slow_us) * 1000};
        nanosleep(&ts, nullptr);
    }
    if (now_ns - last_publish_ns_ >= 1'000'000) {
        publish();
        last_publish_ns_ = now_ns;
    }
    return work;
}

uint32_t Proxy::try_poll_inline(uint64_t now_ns) {
    // One poller at a time. A test-and-set flag: a std::mutex's try-lock and unlock were 13% of
    // the inline spin (perf/README.md, issue 21).
    const bool assist = cfg_.polling != Polling::kInline;
    if (assist && !thread_polled_.load(std::memory_order_acquire)) return 0;
    if (!take_poller()) return 0;
    return owned_iteration(now_ns, assist);
}

void Proxy::wait_for_poller(uint32_t& turns) {
    if (++turns <= 16) {
        sched_yield();
        return;
    }
    const timespec nap{0, 50'000};
    nanosleep(&nap, nullptr);
}

bool Proxy::sleep_while_watched() {
    // Over memif (the doorbell wakes a sleeper; no port fd to sleep in) only: fabric udp has work
    // only this thread may do, which a holder of the flag hands over by waking it.
    if (cfg_.polling != Polling::kAdaptive || udp_wait_ || !poll_fds_.empty()) return false;
    Waker& waker = rings_.proxy_waker(cfg_.index);
    if (waker.watchers() == 0) return false;
    waker.prepare_sleep(Waker::kOnFutex);
    // Looked at after saying we sleep: the last watcher to leave polls once itself only when it
    // sees us asleep (Waker::watch_leave), so a leave before this line must not be slept on.
    if (waker.watchers() == 0 || stop_.load(std::memory_order_acquire)) {
        waker.cancel_sleep();
        return false;
    }
    ++ctr_.sleeps;
    waker.sleep(static_cast<uint32_t>(kAssistSleepNs / 1000));
    waker.cancel_sleep();
    return true;
}

uint32_t Proxy::poll_leaving(bool to_sleep) {
    const Waker& w = rings_.proxy_waker(cfg_.index);
    for (uint32_t turns = 0; !take_poller();) {
        if (!w.sleeping()) return 0;  // the proxy thread is up: it polls
        wait_for_poller(turns);       // the holder's iteration may have looked before the frame came
    }
    bool timers = false;
    const uint32_t work = owned_iteration(now_ns(), true, &timers);
    // The proxy thread slept past its timers while watched (run()): the last watcher, about to
    // sleep, hands them back; a wake only when one is armed, once per wait that ended in a
    // sleep. A wait that ended with its message does not wake: its thread comes back to wait or
    // send soon, and the proxy thread's sleep, begun while watched, lasts at most 1 ms.
    // Fabric udp: a proxy thread that went to sleep watched sleeps on its futex (run()), where no
    // datagram wakes it: the last watcher about to sleep sends it to its ring.
    if (to_sleep && (timers || (udp_wait_ && w.sleeping_on_futex())) && w.sleeping())
        rings_.proxy_waker(cfg_.index).wake();
    return work;
}

uint32_t Proxy::owned_iteration(uint64_t now_ns, bool assist, bool* timers_armed) {
    const uint32_t work = poll_once(now_ns);
    if (timers_armed != nullptr) *timers_armed = wheel_.next_expiry() != UINT64_MAX;  // still the poller
    if (assist && work > 0) {
        ++ctr_.assists;
        last_assist_ns_ = iter_now_ns_;
    }
    // Fabric udp: what only the proxy thread can do waits (a receive the kernel ended, sends
    // the socket refused), or datagrams are left for the next burst: a sleeping proxy thread
    // must come (its ring wakes it for none of these).
    const bool owner_needed = assist && udp_ && udp_->owner_needed();
    give_poller();
    if (owner_needed) rings_.proxy_waker(cfg_.index).wake();
    return work;
}

void Proxy::run() {
    // Sleeps of tens of microseconds: the default 50 us timer slack would double them.
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    Waker& waker = rings_.proxy_waker(cfg_.index);
    const uint64_t spin_ns = uint64_t{cfg_.spin_before_sleep_us} * 1000;
    uint64_t last_work = now_ns();
    uint32_t turns = 0;  // waits in a row for a compute thread's iteration
    while (!stop_.load(std::memory_order_acquire)) {
        const uint64_t now = now_ns();
        // A compute thread runs the iteration now (the assist): leave it the core.
        if (!take_poller()) {
            if (sleep_while_watched()) {
                turns = 0;
                continue;
            }
            wait_for_poller(turns);
            continue;
        }
        turns = 0;
        if (poll_once(now) > 0) {
            give_poller();
            thread_polled_.store(true, std::memory_order_release);
            last_work = now;
            continue;
        }
        thread_polled_.store(true, std::memory_order_release);
        if (cfg_.polling == Polling::kBusy) {
            give_poller();
            continue;
        }
        // Spin while our own iterations found work lately, unless a compute thread watches: it
        // polls our work itself, so we sleep and leave it the core (a spinning proxy thread on
        // the waiting thread's core is what a round trip waited for).
        const bool watched = waker.watchers() > 0;
        if (!watched && now - last_work < spin_ns) {
            give_poller();
            // Adaptive spin: let a thread that was just woken on this core run now, instead of
            // after our time slice (CFS would not preempt us for it).
            sched_yield();
            continue;
        }
        // A held WAN message (or a script step) due soon: spin for it, since a futex sleep here
        // wakes some 50 us late, which the emulated latency would gain.
        const uint64_t wan_next = wan_ ? wan_->next_event_ns() : UINT64_MAX;
        if (wan_next <= now + kWanSpinNs) {
            give_poller();
            sched_yield();
            continue;
        }
        // Fabric udp, watched: sleep on the futex, not in the ring, whose every datagram would
        // wake us (its receive's completion work is ours) while the watcher takes it itself.
        const bool in_ring = udp_wait_ && !watched;
        // Adaptive: say we sleep, look once more, then sleep until woken, a timer, or sleep_us.
        waker.prepare_sleep(in_ring || !poll_fds_.empty() ? Waker::kOnEventfd : Waker::kOnFutex);
        bool pending = false;
        for (uint32_t t = 0; t < rings_.threads() && !pending; ++t)
            pending = rte_ring_count(rings_.to_proxy(t, cfg_.index)) > 0;
        if (pending || stop_.load(std::memory_order_acquire)) {
            waker.cancel_sleep();
            give_poller();
            continue;
        }
        // With a doorbell, look at the ports once more after saying we sleep: a peer that sent
        // before it could see our word did not ring (doorbell.hpp, ordering).
        if ((bell_ || !poll_fds_.empty()) && poll_once(now_ns()) > 0) {
            waker.cancel_sleep();
            give_poller();
            last_work = now;
            continue;
        }
        // Woken on arrival, the long sleep is safe only while all our work comes with a wake:
        // a compute thread's ring that was full (blocked_) drains without telling us, and a
        // port's TX ring frees slots as the peer reads. Then the short sleep, as without wakes.
        bool waits_unwoken = !blocked_.empty();
        for (const auto& q : txq_) waits_unwoken |= !q.empty();
        const bool long_sleep = (bell_ || udp_wait_ || !poll_fds_.empty()) && !waits_unwoken;
        uint64_t sleep_ns = uint64_t{long_sleep ? cfg_.woken_sleep_us : cfg_.sleep_us} * 1000;
        // What an assisting compute thread leaves after we looked (a timer it armed, a full ring
        // or TX queue) comes with no wake: while compute threads assist, sleep at most
        // kAssistSleepNs, so that waits that long at most.
        if (watched || last_assist_ns_ + kAssistRecentNs > now) sleep_ns = std::min(sleep_ns, kAssistSleepNs);
        uint64_t next = wheel_.next_expiry();
        if (wan_next != UINT64_MAX) next = std::min(next, wan_next - kWanSpinNs);  // never oversleep a held message
        // Watched, the timers are the watchers': their assists run them (poll_once), and the
        // last one to leave wakes us when one is armed (poll_leaving). Waking for a timer here
        // (the delayed ack's 50 us) took the core from the waiting thread on every round trip's
        // tail: p99 27 us against a 1.7 us median, 2.7 us without (perf/README.md, issue 21).
        if (next != UINT64_MAX && !watched) sleep_ns = next > now ? std::min(sleep_ns, next - now) : 0;
        if (sleep_ns < 1000) {
            waker.cancel_sleep();
            give_poller();
            continue;
        }
        ++ctr_.sleeps;
        // The sleep runs unowned, so compute threads can poll meanwhile; with fabric udp too:
        // they take the port's direct path, which leaves the ring (whose wait this is) alone.
        if (in_ring) {
            udp_->wait_prepare();
            give_poller();
            udp_->wait(sleep_ns);
            waker.cancel_sleep();
            continue;
        }
        give_poller();
        if (!poll_fds_.empty()) {
            const timespec ts{static_cast<time_t>(sleep_ns / 1'000'000'000),
                              static_cast<long>(sleep_ns % 1'000'000'000)};
            ppoll(poll_fds_.data(), poll_fds_.size(), &ts, nullptr);
            waker.cancel_sleep();
            if (poll_fds_.back().revents & POLLIN) {  // a compute thread's wake: consume it
                uint64_t v;
                [[maybe_unused]] const ssize_t r = read(poll_fds_.back().fd, &v, sizeof v);
            }
        } else {
            waker.sleep(static_cast<uint32_t>(sleep_ns / 1000));
        }
    }
    // Wait out an assisting compute thread's iteration, then publish.
    for (uint32_t t = 0; !take_poller();) wait_for_poller(t);
    publish();
    if (wan_) wan_publish();  // the run's report reads the final link counters
    give_poller();
}

}  // namespace iccs
