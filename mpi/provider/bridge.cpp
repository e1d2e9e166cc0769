// bridge.cpp: one rank's bridge thread in its cluster's agent (agent.hpp): the rank's records for
// other clusters go from its ring to a parallel connection (one per destination rank: ordered,
// so MPI's order between a pair of ranks holds), and the records from other clusters go from the
// connections into the rank's ring. It sleeps on one futex word that both the proxies (a
// delivery) and the rank (a record written) ring, and rings the rank's doorbell after records.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "agent.hpp"
#include "clock.hpp"
#include "dpdk_env.hpp"
#include "mpi_wire.hpp"

namespace iccs::mpi {

void BridgeShared::fail(const std::string& e) {
    std::lock_guard<std::mutex> lk(mu);
    if (error.empty()) error = e;
    failed = true;
}

namespace {

constexpr uint32_t kConnectTimeoutMs = 30'000;  // every agent of the run starts within this
constexpr int64_t kCloseFlushUs = 2'000'000;    // at the end: what the peers have not taken
// The most segments of a record handed to the rank's engine in place (in-rank): a record of
// 64 KiB at MTU 9000 arrives as 8 frames of ~5 receive buffers of 2 KiB. More: through the ring.
constexpr uint32_t kDeliverPiecesMax = 64;

struct Inbound {
    Connection* conn = nullptr;
    uint16_t cluster = 0;
};

class Bridge {
   public:
    Bridge(ComputeEnv& env, BridgeShared& sh)
        : env_(env),
          sh_(sh),
          m_(*sh.machine),
          region_(*sh.region),
          member_(env.thread),
          rank_(m_.domain_first(sh.cluster) + env.thread),
          slot_(region_.slot(member_)),
          ctr_(sh.counters[member_]) {}

    // The loop of the agent's bridge thread: start, step until the stop, finish.
    bool run();
    // Listen, connect to and accept every bridge of the other clusters (false: failed, said).
    bool start();
    // One pass: the proxies' news, lost clusters, the rank's records out, arrivals in, the rank's
    // doorbell. work: records moved. False on a failure (said in sh_). by_rank: the step runs on
    // the rank's own thread (in-rank), so arrivals may go straight into its engine.
    bool step(uint32_t& work, bool poll_proxies = false, bool by_rank = false);
    // In-rank, from the rank's thread: the rank's record to rank dst onto its connection now, no
    // ring, copied from where its pieces lie (its header, the user's buffer) straight into the
    // packet buffers it leaves in: one buffer (convergence's zero-copy send) when it fits one,
    // else a chain (the gather send: bulk buffers, one datagram at jumbo frames, the sums kept
    // while copying). 1 it went; -1 not now (the window is full or no buffer is free: the rank
    // tries again after progress); 0 the ring must carry it (forward_out then meets whatever
    // stopped it here: a lost peer, the rank's death).
    int send_direct(uint32_t dst, std::span<const iovec> rec, uint32_t len, bool of_several);
    // The end: what the rank left goes out, the connections close once the peers took it.
    void finish();

   private:
    bool open_connections();
    bool forward_out(uint32_t& work);
    bool forward_in(uint32_t& work, bool by_rank);
    bool deliver(const RecvMsg& msg);
    void on_control(const MpiRecHdr& h);
    void cluster_lost(uint16_t c);
    std::string why_lost(uint16_t c) const;
    void announce_death();
    bool rank_dead() const {
        return slot_.state.load(std::memory_order_acquire) == static_cast<uint32_t>(RankState::kDead);
    }
    bool fail(const std::string& what, ConvError e) {
        sh_.fail("bridge of rank " + std::to_string(rank_) + ": " + what + ": " + conv_strerror(e) + " (" +
                 env_.conv.last_error() + ")");
        return false;
    }

    ComputeEnv& env_;
    BridgeShared& sh_;
    const MpiMachine& m_;
    Region& region_;
    uint32_t member_, rank_;
    RankSlot& slot_;
    BridgeCounters& ctr_;
    std::vector<Connection*> out_;  // by global rank (nullptr: a rank of this cluster, or lost)
    std::vector<Inbound> in_;
    std::vector<uint8_t> lost_;     // by cluster: its agent is gone
    ShmRingConsumer to_agent_;
    ShmRingProducer from_agent_;
    RecvMsg pending_;               // an arrival waiting for room in the rank's ring
    bool has_pending_ = false;
    bool announced_ = false;
    size_t next_in_ = 0;
    uint64_t idle_since_ = 0;       // in the rank: the first step of this idle stretch (0: work)
    const std::function<bool()> no_other_work_ = [] { return false; };
    SendBuffer direct_buf_;  // send_direct's record of one packet buffer
};

bool Bridge::open_connections() {
    Convergence& conv = env_.conv;
    const uint16_t port = static_cast<uint16_t>(kBridgePortBase + member_);
    // A test seam (tests/mpi/fi_conformance.py --sent-and-left): the bridge listens this much
    // later, so the other clusters' bridges meet a cluster that answers but refuses them.
    if (const char* d = std::getenv("ICCS_MPI_TEST_LISTEN_DELAY_MS"); d != nullptr)
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(std::strtoul(d, nullptr, 10), 10'000ul)));
    if (const ConvError e = conv.listen(port); e != ConvError::kOk) return fail("listen on port " + std::to_string(port), e);
    out_.assign(m_.world, nullptr);
    lost_.assign(m_.clusters, 0);
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kConnectTimeoutMs);
    // The agent may stop before this bridge is connected (its rank sent and left while the
    // cluster came up). What the rank left in its ring still goes out: the connections are made
    // as if no stop had come (the peers' agents start within kConnectTimeoutMs). A rank that left
    // nothing is waited for kCloseFlushUs after the stop at most (the bound of the end's flush).
    auto stop_seen = std::chrono::steady_clock::time_point::max();
    const auto deadline = [&] {
        if (stop_seen == std::chrono::steady_clock::time_point::max() && sh_.stop.load(std::memory_order_acquire))
            stop_seen = std::chrono::steady_clock::now();
        if (stop_seen == std::chrono::steady_clock::time_point::max() || to_agent_.maybe_nonempty()) return until;
        return std::min(until, stop_seen + std::chrono::microseconds(kCloseFlushUs));
    };
    uint32_t remote = 0;
    for (uint32_t r = 0; r < m_.world; ++r) {
        if (m_.cluster_of(r) == sh_.cluster) continue;
        ++remote;
        const Endpoint to{static_cast<uint16_t>(m_.cluster_of(r)),
                          static_cast<uint16_t>(kBridgePortBase + r % m_.cluster_size)};
        ConnOptions o;
        o.order = ConnOptions::Order::kOrdered;
        while (true) {
            // One handshake waits for the whole time left, not connect_timeout_ms: a cluster whose
            // rank enters MPI_Init late starts its agent late, and its proxies take the handshake
            // when they come (proxy.hpp, start_grace_ms, ends the wait for one that never does).
            // A handshake given up and sent again would reach it as a stale one besides.
            const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline() - std::chrono::steady_clock::now());
            const ConvError e = conv.connect(to, out_[r], o, std::max<int64_t>(left.count(), 1000));
            if (e == ConvError::kOk) break;
            if (e != ConvError::kRefused || std::chrono::steady_clock::now() > deadline())
                return fail("connect to the bridge of rank " + std::to_string(r), e);
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
    }
    for (uint32_t i = 0; i < remote; ++i) {
        Connection* c = nullptr;
        const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline() - std::chrono::steady_clock::now());
        const ConvError e = conv.accept(port, c, std::max<int64_t>(left.count(), 0));
        if (e != ConvError::kOk) return fail("accept the bridges of the other clusters (" + std::to_string(i) + " of " +
                                                 std::to_string(remote) + " came)",
                                             e);
        in_.push_back(Inbound{c, c->remote().cluster});
    }
    return true;
}

// Why cluster c counts as gone, as this cluster's proxies saw it: the words the ranks print. A
// silence is not always a cluster that is gone: on a host whose cores are all busy its proxies
// may not have run for the peer timeout (IMB's Uniband, 2 x 2 ranks on 2 loaded cores).
std::string Bridge::why_lost(uint16_t c) const {
    switch (env_.rings->down_reason(c)) {
        case ClusterRings::DownReason::kSilent:
            return "its proxies said nothing for " + std::to_string(m_.config->cluster.peer_timeout_ms) +
                   " ms ([cluster] peer_timeout_ms): its agent was stopped or killed, or this host gave its proxies no "
                   "core that long (ICCS_MPI_AGENT_LOG=FILE keeps their 'not run' lines; a larger peer_timeout_ms "
                   "rides out a loaded host)";
        case ClusterRings::DownReason::kHungUp: return "its agent ended (its memif link hung up) while this rank needed it";
        case ClusterRings::DownReason::kRestarted: return "its agent came back as a new incarnation (not merged)";
        case ClusterRings::DownReason::kNeverCame:
            return "its proxies never answered (its ranks did not start, or not within the 20 s a cluster's start is "
                   "waited for)";
        case ClusterRings::DownReason::kUp: break;
    }
    return "its proxies stopped answering, or its agent ended";
}

void Bridge::cluster_lost(uint16_t c) {
    if (c >= lost_.size() || lost_[c]) return;
    lost_[c] = 1;
    region_.set_agent_error("cluster " + std::to_string(c) + " is unreachable: " + why_lost(c) + ": its ranks count as dead");
    // Every rank of that cluster is unreachable: the ranks of this domain fail what involves them.
    for (uint32_t r = c * m_.cluster_size; r < (c + 1u) * m_.cluster_size; ++r) {
        region_.dead_flag(r).store(1, std::memory_order_release);
        out_[r] = nullptr;
    }
    region_.bump_epoch();
    for (uint32_t k = 0; k < region_.hdr().members; ++k) futex_wake_shared(&region_.slot(k).doorbell);
}

void Bridge::on_control(const MpiRecHdr& h) {
    if (h.type != static_cast<uint8_t>(RecType::kRankDown)) return;
    const uint32_t r = h.src_rank.get();
    if (r >= m_.world || region_.is_member(r)) return;
    if (region_.dead_flag(r).exchange(1, std::memory_order_acq_rel) == 0) {
        region_.bump_epoch();
        for (uint32_t k = 0; k < region_.hdr().members; ++k) futex_wake_shared(&region_.slot(k).doorbell);
    }
}

void Bridge::announce_death() {
    // Tell the bridge of every rank of the other clusters (its agent marks this rank dead there).
    announced_ = true;
    MpiRecHdr h{};
    h.version = kMpiWireVersion;
    h.type = static_cast<uint8_t>(RecType::kRankDown);
    h.src_rank.set(rank_);
    for (uint32_t r = 0; r < m_.world; ++r) {
        if (out_[r] == nullptr) continue;
        h.dst_rank.set(r);
        (void)env_.conv.send(out_[r], &h, kMpiRecHdrLen, 100'000);
    }
}

bool Bridge::forward_out(uint32_t& work) {
    Convergence& conv = env_.conv;
    for (uint32_t budget = 64; budget > 0; --budget) {
        uint32_t len = 0;
        const uint8_t* rec = to_agent_.peek(len);
        if (rec == nullptr) return true;
        MpiRecHdr h;
        if (len < kMpiRecHdrLen) {
            to_agent_.pop();
            continue;
        }
        std::memcpy(&h, rec, kMpiRecHdrLen);
        const uint32_t dst = h.dst_rank.get();
        if (dst >= m_.world || out_[dst] == nullptr || region_.dead_flag(dst).load(std::memory_order_acquire)) {
            ++ctr_.dropped;  // a rank of this cluster (never routed here), or one that is gone
            to_agent_.pop();
            continue;
        }
        const ConvError e = conv.send(out_[dst], rec, len, 0);
        if (e == ConvError::kWouldBlock) {
            ++ctr_.window_waits;
            return true;  // the window is full: try again after progress
        }
        if (e == ConvError::kPeerDown || e == ConvError::kClosed) {
            cluster_lost(static_cast<uint16_t>(m_.cluster_of(dst)));
        } else if (e != ConvError::kOk) {
            return fail("send a record to rank " + std::to_string(dst), e);
        } else {
            ++ctr_.records_out;
            ctr_.bytes_out += len;
        }
        to_agent_.pop();
        ++work;
    }
    return true;
}

int Bridge::send_direct(uint32_t dst, std::span<const iovec> rec, uint32_t len, bool of_several) {
    if (len < kMpiRecHdrLen || rank_dead()) return 0;
    if (dst >= m_.world || out_[dst] == nullptr || region_.dead_flag(dst).load(std::memory_order_acquire)) return 0;
    Convergence& conv = env_.conv;
    Connection* c = out_[dst];
    const bool one_buffer = len <= conv.contiguous_send_max();
    ConvError e;
    if (one_buffer) {
        e = conv.alloc_send_buffer(c, len, direct_buf_, 0);
        if (e == ConvError::kOk) {
            uint8_t* at = direct_buf_.data();
            for (const iovec& v : rec) {
                if (v.iov_len != 0) std::memcpy(at, v.iov_base, v.iov_len);
                at += v.iov_len;
            }
            e = conv.send_buffer(c, direct_buf_, 0);
            direct_buf_.reset();  // the buffer of a record that did not go (one that went is consumed)
        }
    } else {
        e = conv.sendv(c, rec, 0);
    }
    if (e == ConvError::kWouldBlock) {
        ++ctr_.window_waits;
        return -1;
    }
    if (e != ConvError::kOk) return 0;
    // A record of a message of several: out now, one pass of the proxies, before the engine
    // copies the next (RankEngine::push_out sends them all in one call): the peer takes and copies
    // this one while we copy that, where before nothing left until the last record was copied
    // (a 1 MiB ping-pong: the copies of both sides one after the other).
    if (of_several) {
        if (idle_since_ == 0) idle_since_ = now_ns();
        (void)conv.idle(idle_since_, UINT64_MAX, no_other_work_);
    }
    ++ctr_.records_out;
    ++ctr_.direct_out;
    if (one_buffer) ++ctr_.direct_out_zero_copy;
    if (of_several) ++ctr_.direct_out_multi;
    ctr_.bytes_out += len;
    return 1;
}

bool Bridge::deliver(const RecvMsg& msg) {
    const uint32_t len = msg.size();
    uint8_t* at = from_agent_.reserve(len);
    if (at == nullptr) return false;
    msg.copy_to(at, len);
    from_agent_.commit();
    ++ctr_.records_in;
    ctr_.bytes_in += len;
    return true;
}

bool Bridge::forward_in(uint32_t& work, bool by_rank) {
    Convergence& conv = env_.conv;
    const bool dead = rank_dead() || slot_.state.load(std::memory_order_acquire) ==
                                         static_cast<uint32_t>(RankState::kFinished);
    if (has_pending_) {
        if (!dead && !deliver(pending_)) {
            ++ctr_.ring_full;
            return true;  // the rank has not taken enough yet
        }
        pending_.reset();
        has_pending_ = false;
        ++work;
    }
    for (size_t k = 0; k < in_.size(); ++k) {
        Inbound& in = in_[(next_in_ + k) % in_.size()];
        if (in.conn == nullptr) continue;
        for (uint32_t budget = 64; budget > 0; --budget) {
            RecvMsg msg;
            const ConvError e = conv.recv_msg(in.conn, msg, 0);
            if (e == ConvError::kWouldBlock) break;
            if (e == ConvError::kPeerDown || e == ConvError::kEndOfStream || e == ConvError::kClosed) {
                if (e == ConvError::kPeerDown) cluster_lost(in.cluster);
                in.conn = nullptr;
                break;
            }
            if (e != ConvError::kOk) return fail("receive a record", e);
            ++work;
            MpiRecHdr h;
            if (msg.copy_to(&h, kMpiRecHdrLen) < kMpiRecHdrLen || h.version != kMpiWireVersion) {
                ++ctr_.dropped;  // not a record of this provider
                continue;
            }
            if (h.type != static_cast<uint8_t>(RecType::kData)) {
                on_control(h);
                continue;
            }
            if (dead) {
                ++ctr_.dropped;
                continue;
            }
            // In-rank, on the rank's thread, with nothing of ours waiting in its ring (order): the
            // engine matches the record where the proxy received it (one segment, or the chain of
            // a datagram of several frames), no copy into the ring.
            const InRankBridge& ir = sh_.in_rank;
            if (by_rank && ir.deliver != nullptr && from_agent_.drained()) {
                iovec pieces[kDeliverPiecesMax];
                if (const uint32_t n = msg.segments(pieces, kDeliverPiecesMax);
                    n != 0 && ir.deliver(ir.engine, pieces, n, msg.size()) != 0) {
                    ++ctr_.records_in;
                    ++ctr_.direct_in;
                    if (n > 1) ++ctr_.direct_in_chained;
                    ctr_.bytes_in += msg.size();
                    continue;
                }
            }
            if (!deliver(msg)) {
                ++ctr_.ring_full;
                pending_ = std::move(msg);
                has_pending_ = true;
                next_in_ = (next_in_ + k) % in_.size();
                return true;
            }
        }
    }
    if (!in_.empty()) next_in_ = (next_in_ + 1) % in_.size();
    return true;
}

bool Bridge::start() {
    // One futex word for both wakers of this thread: the proxies delivering to it, and the rank
    // writing its ring (RankEngine: futex_wake_shared on bridge_word).
    env_.rings->thread_waker(static_cast<uint16_t>(member_)).share(&slot_.bridge_word, &slot_.bridge_watch);
    to_agent_ = ShmRingConsumer(region_.base(), region_.to_agent_ring(member_));
    if (!open_connections()) return false;
    from_agent_ = ShmRingProducer(region_.base(), region_.from_agent_ring(member_));
    sh_.ready.fetch_add(1);
    return true;
}

bool Bridge::step(uint32_t& work, bool poll_proxies, bool by_rank) {
    Convergence& conv = env_.conv;
    // In the rank's thread under inline polling (InRankBridge) a pass of the proxies comes first
    // (what arrived is taken below), and again after records went out: they leave now, not at
    // the rank's next call. (One pass of the wait under inline polling: it never sleeps.)
    // The wait's clock: read when a step after work begins an idle stretch, then by the spin's
    // own count (Convergence::spin_clock). A read a step was a sixth of the rank's wait loop.
    if (poll_proxies) {
        if (idle_since_ == 0) idle_since_ = now_ns();
        (void)conv.idle(idle_since_, UINT64_MAX, no_other_work_);
    }
    conv.progress();
    for (uint16_t c = 0; c < m_.clusters; ++c)
        if (c != sh_.cluster && !lost_[c] && env_.rings->cluster_down(c)) cluster_lost(c);
    if (rank_dead() && !announced_) announce_death();
    uint32_t taken = 0, arrived = 0;
    if (!rank_dead() && !forward_out(taken)) return false;
    if (poll_proxies && taken != 0) (void)conv.idle(idle_since_, UINT64_MAX, no_other_work_);
    if (!forward_in(arrived, by_rank)) return false;
    work = taken + arrived;
    if (work != 0) {
        idle_since_ = 0;
        // The rank may sleep in a CQ read (its wait blocks: mpi/provider/README.md, "Waiting"):
        // for an arrival, or for room after what we took only when it said so (kDoorbellRoom;
        // a rank that sent and sleeps for the answer is left asleep). Woken, it often waits
        // for this core (the agent runs where its first rank was bound): give the core to it
        // now rather than after this thread's spin. (In the rank's own thread, sh_.in_rank,
        // nobody sleeps on the doorbell.)
        if (futex_wake_shared(&slot_.doorbell, arrived != 0 ? ~0u : kDoorbellRoom)) sched_yield();
        conv.idle_end();
    }
    return true;
}

bool Bridge::run() {
    if (!start()) return false;
    Convergence& conv = env_.conv;
    const auto other_work = [this] {
        return to_agent_.maybe_nonempty() || sh_.stop.load(std::memory_order_relaxed) ||
               (rank_dead() && !announced_);
    };
    uint64_t idle_since = 0;
    while (!sh_.stop.load(std::memory_order_acquire)) {
        uint32_t work = 0;
        if (!step(work)) return false;
        if (work != 0) {
            idle_since = 0;
            continue;
        }
        const uint64_t now = now_ns();
        if (idle_since == 0) idle_since = now;
        // A pending arrival waits for the rank to take records: it does not ring us, so the
        // sleep stays short (the wait's own bound) while one is held.
        conv.idle(idle_since, has_pending_ ? now + 200'000 : UINT64_MAX, other_work);
    }
    conv.idle_end();
    finish();
    return true;
}

void Bridge::finish() {
    Convergence& conv = env_.conv;
    // The end: every rank of the cluster is gone. Records it left for other clusters go out, and
    // the connections close once the peers took what was sent (bounded: a peer may be gone).
    uint32_t work = 0;
    if (!rank_dead()) (void)forward_out(work);
    // A rank that died just before the end (its cluster's last) is announced all the same: else
    // the other clusters' ranks would learn it only when this cluster's proxies fall silent.
    if (rank_dead() && !announced_) announce_death();
    for (Connection*& c : out_)
        if (c != nullptr) {
            (void)conv.close(c, kCloseFlushUs);
            c = nullptr;
        }
}

}  // namespace

bool bridge_program(ComputeEnv& env, BridgeShared& sh) {
    Bridge b(env, sh);
    if (b.run()) return true;
    env.result.error = sh.error;
    return false;
}

bool bridge_program_in_rank(ComputeEnv& env, BridgeShared& sh) {
    Bridge b(env, sh);
    InRankBridge& ir = sh.in_rank;
    const bool started = b.start();
    eal_thread_flush_caches();  // the rank's thread holds the pools' one counted cache
    {
        std::lock_guard<std::mutex> lk(ir.mu);
        if (started) {
            ir.step = [&b](uint32_t& work) { return b.step(work, true, true); };
            ir.send = [&b](uint32_t dst, std::span<const iovec> rec, uint32_t len, bool of_several) {
                return b.send_direct(dst, rec, len, of_several);
            };
        }
        ir.up = started ? 1 : 2;
    }
    ir.state_changed.notify_all();
    if (!started) {
        env.result.error = sh.error;
        return false;
    }
    // The rank's thread steps the bridge from its provider calls. This thread only stands in when
    // the rank has not called in for InRankBridge::kStandInMs (it computes): the proxies then
    // still answer the peers (acks, status), and a compute phase longer than the peer time-out
    // does not make the other clusters count this one as gone.
    bool ok = true;
    std::unique_lock<std::mutex> lk(ir.mu);
    uint64_t steps_seen = ir.steps.load(std::memory_order_relaxed);
    while (!sh.stop.load(std::memory_order_acquire)) {
        ir.state_changed.wait_for(lk, std::chrono::milliseconds(InRankBridge::kStandInMs));
        if (sh.stop.load(std::memory_order_acquire)) break;
        const uint64_t steps = ir.steps.load(std::memory_order_relaxed);
        if (steps != steps_seen) {  // the rank stepped since the last look
            steps_seen = steps;
            continue;
        }
        lk.unlock();
        {
            std::unique_lock<std::mutex> step_lk(ir.step_mu, std::try_to_lock);
            uint32_t work = 0;
            if (step_lk.owns_lock() && !b.step(work, true)) ok = false;
            eal_thread_flush_caches();  // the rank's thread holds the pools' one counted cache
        }
        lk.lock();
        if (!ok) break;
    }
    ir.up = 3;  // no more steps: the rank's calls find the bridge gone
    lk.unlock();
    std::lock_guard<std::mutex> step_lk(ir.step_mu);  // a step of the rank's still running ends first
    if (ok) b.finish();
    if (!ok) env.result.error = sh.error;
    return ok;
}

int bridge_send_in_rank(BridgeShared& sh, uint32_t dst, std::span<const iovec> rec, uint32_t len, bool of_several) {
    InRankBridge& ir = sh.in_rank;
    if (ir.up.load(std::memory_order_acquire) != 1) return 0;
    // The record goes into the bridge's convergence, which the stand-in's steps use too (and the
    // end waits for step_mu before it finishes the bridge).
    std::lock_guard<std::mutex> lk(ir.step_mu);
    return ir.up.load(std::memory_order_relaxed) == 1 ? ir.send(dst, rec, len, of_several) : 0;
}

uint32_t bridge_step_in_rank(BridgeShared& sh) {
    InRankBridge& ir = sh.in_rank;
    if (ir.up.load(std::memory_order_acquire) != 1) return 0;
    std::lock_guard<std::mutex> lk(ir.step_mu);
    if (ir.up.load(std::memory_order_relaxed) != 1) return 0;
    ir.steps.store(ir.steps.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // under step_mu
    uint32_t work = 0;
    if (!ir.step(work)) {
        ir.up.store(3, std::memory_order_release);
        ir.state_changed.notify_all();
    }
    return work;
}

}  // namespace iccs::mpi
