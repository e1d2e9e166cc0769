// agent.cpp: the agent's life (agent.hpp): region, cluster, socket, ranks, end.
#include "agent.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "agent_link.hpp"
#include "cluster.hpp"
#include "cluster_memory.hpp"
#include "dpdk_env.hpp"
#include "ipv4_frag.hpp"
#include "mpi_wire.hpp"
#include "runtime_launch.hpp"
#include "udp_hdr.hpp"

namespace iccs::mpi {

std::atomic<bool> g_agent_stop{false};

namespace {

constexpr uint32_t kAttachWaitMs = 60'000;  // no rank at all came within this: give up
constexpr uint32_t kLingerMs = 1000;        // the last rank left: a process may reattach this long

uint64_t env_ring_bytes(const char* name, uint64_t dflt) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return dflt;
    uint64_t x = 0;
    if (!env_uint(v, 1ull << 30, x) || x < (64u << 10) || (x & (x - 1)) != 0) {
        std::fprintf(stderr, "iccs-mpi-agent: %s=\"%s\": expected a power of two from 65536 to 1073741824; using %" PRIu64 "\n",
                     name, v, dflt);
        return dflt;
    }
    return x;
}

// A frame lost loses its whole datagram (slidwin sends it again): a datagram of more fragments
// than this is not worth the pieces it saves.
constexpr uint32_t kMaxFragmentsPerRecord = 8;

// The agent's stripe threshold: with none set in the machine file, a record to another cluster
// goes as one datagram (kMpiDatagramRecordMax) when that is at most kMaxFragmentsPerRecord frames
// at the fabric's MTU (MPI runs on memif get 9000: 8 frames), else pieces of one frame as for
// any cluster. One datagram a record spares the receiving bridge a copy of every byte (the
// pieces' assembly into a heap buffer, and that buffer's page faults) and the stack a header,
// a sequence number and an ack per frame: osu_bw 1 MiB 713 -> 890 MB/s, osu_latency 1 MiB 1725 ->
// 1483 us (2 x 1 on memif, medians of 3 alternated pairs; mpi/provider/README.md, "Speed").
uint32_t agent_stripe_threshold(const MachineConfig& cfg, uint32_t planned) {
    if (cfg.convergence.stripe_threshold_bytes != 0) return planned;
    const uint32_t datagram = kUdpHdrLen + kSlidwinHdrLen + kSlidwinAuthLen + kConvHdrLen + kMpiDatagramRecordMax;
    return ipv4_fragment_count(datagram, cfg.machine.mtu_bytes) <= kMaxFragmentsPerRecord ? kMpiDatagramRecordMax
                                                                                          : planned;
}

int listen_on(const std::string& path, std::string& err) {
    const int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0) {
        err = std::string("socket: ") + std::strerror(errno);
        return -1;
    }
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (path.size() >= sizeof a.sun_path) {
        err = path + ": too long for a Unix socket";
        close(s);
        return -1;
    }
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    ::unlink(path.c_str());  // a stale socket of a crashed run with the same id
    if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(s, 256) != 0) {
        err = path + ": " + std::strerror(errno);
        close(s);
        return -1;
    }
    return s;
}

// Fabric udp binds fixed ports (udp_port + 64*c + p). The agents of the run before on this host
// hold this cluster's until they end, about 1 s after their last rank left (the linger, then the
// end's flush), while mpirun returns as soon as the ranks exited: the README's mpirun line run
// twice in a row over udp failed the second run ("Address already in use", test
// mpi-again-2x1-udp). Wait for them a while; a port still taken then (another run that goes on)
// is the proxy's bind's to say, with the address and the advice.
constexpr uint32_t kUdpPortWaitMs = 4'000;

bool udp_port_taken(Ipv4Addr ip, uint16_t port) {
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(ip.v);
    a.sin_port = htons(port);
    const bool taken = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno == EADDRINUSE;
    close(fd);
    return taken;
}

void wait_for_udp_ports(const ClusterPlan& plan, uint16_t cluster, size_t proxies) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kUdpPortWaitMs);
    for (size_t p = 0; p < proxies; ++p) {
        const auto proxy = static_cast<uint16_t>(p);
        while (udp_port_taken(udp_ip(plan, cluster, proxy), udp_port(plan, cluster, proxy)) &&
               std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

}  // namespace

Agent::~Agent() {
    if (listen_ >= 0) close(listen_);
    for (Member& mb : members_)
        if (mb.sock >= 0) close(mb.sock);
    for (int s : pending_) close(s);
    if (cluster_.joinable()) {
        shared_.stop = true;
        cluster_.join();
    }
}

bool Agent::start(std::string& err) {
    if (!start_region(err)) return false;
    if (m_.bridged() && !start_cluster(err)) return false;
    listen_ = listen_on(m_.agent_socket(domain_), err);
    return listen_ >= 0;
}

bool Agent::start_in_rank(uint32_t pid, std::string& err) {
    in_rank_ = true;
    if (!start_region(err) || !start_cluster(err)) return false;
    members_[0].ever = true;
    RankSlot& slot = region_.slot(0);
    slot.pid.store(pid);
    slot.state.store(static_cast<uint32_t>(RankState::kAlive), std::memory_order_release);
    region_.bump_epoch();
    return true;
}

uint32_t Agent::step_in_rank() {
    const uint32_t work = bridge_step_in_rank(shared_);
    if (shared_.failed.load(std::memory_order_relaxed)) say_bridge_failure();
    return work;
}

int Agent::end_in_rank(bool finished) {
    RankSlot& slot = region_.slot(0);
    const RankState state = finished ? RankState::kFinished : RankState::kDead;
    slot.state.store(static_cast<uint32_t>(state), std::memory_order_release);
    region_.bump_epoch();
    return finish();
}

bool Agent::start_region(std::string& err) {
    RegionGeometry g;
    g.members = m_.domain_members();
    g.first_rank = m_.domain_first(domain_);
    g.world = m_.world;
    g.cluster_size = m_.cluster_size;
    g.bridged = m_.bridged();
    g.pair_ring_bytes = env_ring_bytes("ICCS_MPI_RING_BYTES", g.pair_ring_bytes);
    g.agent_ring_bytes = env_ring_bytes("ICCS_MPI_AGENT_RING_BYTES", g.agent_ring_bytes);
    region_layout(g);
    if (!region_.create(g, static_cast<uint32_t>(m_.transport), m_.transport == RtTransport::kDelay ? m_.delay_ns : 0,
                        m_.run_hash, err))
        return false;
    members_.assign(g.members, Member{});
    return true;
}

bool Agent::start_cluster(std::string& err) {
    // The cluster, as `iccs run` brings one up, with a compute thread per rank: the bridges.
    if (!plan_from_config(*m_.config, static_cast<uint16_t>(domain_), plan_, err)) return false;
    plan_.threads = static_cast<uint16_t>(m_.cluster_size);
    plan_.conv.stripe_threshold_bytes = agent_stripe_threshold(*m_.config, plan_.conv.stripe_threshold_bytes);
    // The receiving proxies' buffers are counted for a full receive window of the largest
    // datagram (cluster_memory.cpp): a record's, not the 9000 B of `iccs run`'s own programs.
    plan_.max_size = plan_.conv.stripe_threshold_bytes;
    // The bridges are not pinned (the proxies are): a bridge pinned to a proxy's core kept
    // that proxy off it for seconds on a 2-core host (OSU's osu_mbw_mr, 2 clusters x 2 ranks:
    // a proxy unrun for the 5 s peer time-out, its cluster reported down; 2 of 3 runs failed
    // pinned, 3 of 3 passed unpinned with no "not run" line). The ranks are not pinned by us
    // either; the scheduler places the bridges beside them. (An empty compute_cores gives the
    // bridges the process's cores: run_cluster undoes the EAL's pinning of its own thread.)
    plan_.compute_cores.clear();
    // Unless the machine file names proxy_cores, each cluster's proxies start on another core
    // (cluster c's proxy p on core (c * P + p + 1) mod cores; (c + p + 1) when P is a multiple of
    // the cores, so that the first proxies still differ): the agents of one host all
    // had theirs on core 1 (rt_launch's default, made for a cluster per host), so a frame for
    // cluster 0 woke its proxy on the core where cluster 1's bridge was running. osu_latency
    // 2 x 1 over memif, 8 B, 4 alternated pairs and one more run after, load 2.7-4: 39.2 -> 30.3
    // us (medians, faster in 4 of 4); osu_bw 64 KiB 577 -> 797 MB/s in one pair.
    if (m_.config->cluster.proxy_cores.empty()) {
        const size_t cores = std::max(1u, host_core_count()), nprox = plan_.proxy_cores.size();
        const size_t offset = nprox % cores == 0 ? domain_ : domain_ * nprox;  // moves with every cluster
        for (size_t p = 0; p < nprox; ++p) plan_.proxy_cores[p] = static_cast<unsigned>((offset + p + 1) % cores);
    }
    plan_.run_id = m_.run_id;
    plan_.sock_dir = m_.run_dir;
    if (plan_.fabric == "udp") wait_for_udp_ports(plan_, static_cast<uint16_t>(domain_), plan_.proxy_cores.size());
    // The process ends after (the agent _exit()s; a rank soon after its MPI_Finalize).
    plan_.exit_without_teardown = true;
    plan_.quiet = true;
    shared_.machine = &m_;
    shared_.region = &region_;
    shared_.cluster = domain_;
    shared_.counters.assign(m_.cluster_size, BridgeCounters{});
    if (in_rank_)
        plan_.program = [this](ComputeEnv& env) { return bridge_program_in_rank(env, shared_); };
    else
        plan_.program = [this](ComputeEnv& env) { return bridge_program(env, shared_); };
    cluster_ = std::thread([this] {
        cluster_report_ = run_cluster(plan_);
        if (!cluster_report_.ok && !cluster_report_.error.empty()) shared_.fail(cluster_report_.error);
        cluster_ended_ = true;
    });
    // The ranks attach at once: what they send to other clusters waits in their rings until
    // the bridges' connections are open; a cluster that cannot come up makes every rank of
    // the other clusters unreachable (serve()), so the ranks get errors, not a hang.
    return true;
}

void Agent::on_hello(int sock) {
    LinkHello h;
    const long n = link_recv(sock, &h, sizeof h);
    LinkReply r;
    r.kind = LinkMsg::kRefused;
    auto refuse = [&](const std::string& why) {
        std::snprintf(r.why, sizeof r.why, "%s", why.c_str());
        (void)link_send_reply(sock, r, -1);
        close(sock);
    };
    if (n != static_cast<long>(sizeof h) || h.magic != kLinkMagic || h.kind != LinkMsg::kHello)
        return refuse("not a hello of this provider");
    if (h.version != kLinkVersion) return refuse("the provider and the agent come from different builds");
    if (h.run_hash != m_.run_hash || h.world != m_.world || h.clusters != m_.clusters ||
        h.cluster_size != m_.cluster_size || h.transport != static_cast<uint32_t>(m_.transport))
        return refuse("the rank computed another run (run id, machine file or transport differ from the agent's: " +
                      std::to_string(h.world) + " ranks, " + std::to_string(h.clusters) + " clusters, against " +
                      std::to_string(m_.world) + " and " + std::to_string(m_.clusters) + ")");
    if (!region_.is_member(h.rank)) return refuse("rank " + std::to_string(h.rank) + " is not served by this agent");
    const uint32_t mb = region_.member_of(h.rank);
    RankSlot& slot = region_.slot(mb);
    // A rank attaches once; the same process may come back after closing its last domain (a
    // program that opens libfabric again), its rings as it left them.
    const uint32_t state = slot.state.load();
    const bool again = state == static_cast<uint32_t>(RankState::kFinished) && slot.pid.load() == h.pid;
    if (state != static_cast<uint32_t>(RankState::kUnborn) && !again)
        return refuse("rank " + std::to_string(h.rank) + " attached before (process " + std::to_string(slot.pid.load()) +
                      ")");
    slot.pid.store(h.pid);
    slot.state.store(static_cast<uint32_t>(RankState::kAlive), std::memory_order_release);
    region_.bump_epoch();
    r.kind = LinkMsg::kWelcome;
    if (!link_send_reply(sock, r, region_.fd())) {
        slot.state.store(static_cast<uint32_t>(RankState::kDead), std::memory_order_release);
        close(sock);
        return;
    }
    members_[mb].sock = sock;
    members_[mb].ever = true;
}

void Agent::mark_dead(uint32_t mb) {
    RankSlot& slot = region_.slot(mb);
    slot.state.store(static_cast<uint32_t>(RankState::kDead), std::memory_order_release);
    region_.bump_epoch();
    for (uint32_t k = 0; k < region_.hdr().members; ++k) futex_wake_shared(&region_.slot(k).doorbell);
    futex_wake_shared(&slot.bridge_word);  // its bridge tells the other clusters
}

void Agent::on_member_event(uint32_t mb) {
    Member& me = members_[mb];
    LinkBye b;
    const long n = link_recv(me.sock, &b, sizeof b);
    RankSlot& slot = region_.slot(mb);
    if (n == static_cast<long>(sizeof b) && b.magic == kLinkMagic && b.kind == LinkMsg::kBye) {
        slot.state.store(static_cast<uint32_t>(RankState::kFinished), std::memory_order_release);
        region_.bump_epoch();
    } else {
        // A hang-up without goodbye: the rank's process ended (crash, kill, exit without closing).
        mark_dead(mb);
    }
    close(me.sock);
    me.sock = -1;
}

int Agent::serve() {
    const auto started = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point empty_since{};
    bool any = false;
    while (!g_agent_stop) {
        std::vector<pollfd> fds;
        fds.push_back(pollfd{listen_, POLLIN, 0});
        for (int s : pending_) fds.push_back(pollfd{s, POLLIN, 0});
        std::vector<uint32_t> who;
        for (uint32_t i = 0; i < members_.size(); ++i)
            if (members_[i].sock >= 0) {
                fds.push_back(pollfd{members_[i].sock, POLLIN, 0});
                who.push_back(i);
            }
        const int rc = poll(fds.data(), fds.size(), 100);
        if (rc < 0 && errno != EINTR) break;
        if (rc > 0) {
            // fds: the listener, then pending_ as it was, then the members in `who`.
            const size_t npending = pending_.size();
            std::vector<int> still;
            for (size_t i = 0; i < npending; ++i) {
                if (fds[1 + i].revents != 0) on_hello(pending_[i]);
                else still.push_back(pending_[i]);
            }
            for (size_t i = 0; i < who.size(); ++i)
                if (fds[1 + npending + i].revents != 0) on_member_event(who[i]);
            if (fds[0].revents & POLLIN) {
                const int s = accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
                if (s >= 0) still.push_back(s);
            }
            pending_ = std::move(still);
        }
        uint32_t alive = 0;
        for (uint32_t i = 0; i < members_.size(); ++i) {
            any = any || members_[i].ever;
            if (members_[i].sock >= 0) ++alive;
        }
        // Every rank that came has gone: end, after a short while in which a rank that closed
        // its last domain may still come back (agent.hpp).
        if (any && alive == 0 && pending_.empty()) {
            if (empty_since == std::chrono::steady_clock::time_point{}) empty_since = std::chrono::steady_clock::now();
            if (std::chrono::steady_clock::now() - empty_since > std::chrono::milliseconds(kLingerMs)) break;
        } else {
            empty_since = {};
        }
        if (!any && std::chrono::steady_clock::now() - started > std::chrono::milliseconds(kAttachWaitMs)) {
            std::fprintf(stderr, "iccs-mpi-agent: no rank of %s %u attached within %u s: ending\n",
                         m_.bridged() ? "cluster" : "the run's domain", domain_, kAttachWaitMs / 1000);
            break;
        }
        if (shared_.failed && m_.bridged()) say_bridge_failure();
    }
    // Ranks still attached when a signal ended the agent: they learn it from the hang-up.
    for (Member& mb : members_)
        if (mb.sock >= 0) {
            close(mb.sock);
            mb.sock = -1;
        }
    return finish();
}

void Agent::say_bridge_failure() {
    std::lock_guard<std::mutex> lk(shared_.mu);
    // In a rank's process standard error is the rank's: the rank says it (the region's error).
    if (!in_rank_) std::fprintf(stderr, "iccs-mpi-agent: cluster %u: %s\n", domain_, shared_.error.c_str());
    region_.set_agent_error("the agent of cluster " + std::to_string(domain_) + " lost the other clusters: " + shared_.error);
    // The bridges are what reach the other clusters: without them every rank of this
    // cluster is cut off from them, as if the other clusters were gone.
    for (uint32_t r = 0; r < m_.world; ++r)
        if (!region_.is_member(r)) region_.dead_flag(r).store(1);
    region_.bump_epoch();
    for (uint32_t k = 0; k < region_.hdr().members; ++k) futex_wake_shared(&region_.slot(k).doorbell);
    shared_.failed = false;  // said once
}

// Whether the cluster may be left unjoined at the end (finish()): an agent process whose bridges
// never all connected (a peer cluster that never came: its memif link, or its answer over udp,
// is waited for 20 s) and whose ranks left nothing for them to take. Then nothing is lost by not
// waiting for it: the process _exit()s, and DPDK's memory and threads go with it.
bool Agent::may_leave_cluster() const {
    if (in_rank_ || !m_.bridged() || shared_.ready.load() >= region_.hdr().members) return false;
    for (uint32_t k = 0; k < region_.hdr().members; ++k)
        if (ShmRingConsumer(region_.base(), region_.to_agent_ring(k)).maybe_nonempty()) return false;
    return true;
}

// The end, once every rank is finished or dead: stop the bridges, end the cluster, report, clean up.
int Agent::finish() {
    bool ok = true, left = false;
    if (cluster_.joinable()) {
        shared_.stop = true;
        for (uint32_t k = 0; k < region_.hdr().members; ++k) futex_wake_shared(&region_.slot(k).bridge_word);
        {
            std::lock_guard<std::mutex> lk(shared_.in_rank.mu);
            shared_.in_rank.state_changed.notify_all();  // the stand-in's sleep
        }
        // A one-process program on a machine file of two clusters ended at once, and its agent
        // waited 22 s more for the cluster that never came (fi_dom_test): that wait ends after
        // [cluster] peer_timeout_ms, as for a peer that went silent.
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(m_.config->cluster.peer_timeout_ms);
        while (!cluster_ended_ && may_leave_cluster() && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        left = !cluster_ended_ && may_leave_cluster();
        if (left) {
            std::fprintf(stderr, "iccs-mpi-agent: cluster %u: its ranks are gone and a peer cluster never answered: "
                         "ending without waiting for its bridges (%u ms, [cluster] peer_timeout_ms)\n",
                         domain_, m_.config->cluster.peer_timeout_ms);
            cluster_.detach();  // the process _exit()s (agent_main.cpp) with the thread still in its wait
            // The EAL's runtime directory, which the cluster thread removes at its end, goes now
            // (left, /var/run/dpdk/<prefix> stayed behind every such run).
            eal_remove_runtime_dir(eal_prefix(plan_, static_cast<uint16_t>(domain_)));
            ok = false;
        } else {
            cluster_.join();
            ok = cluster_report_.ok;
        }
    }
    for (uint32_t k = 0; k < region_.hdr().members; ++k)
        if (region_.slot(k).state.load() == static_cast<uint32_t>(RankState::kDead)) ok = false;
    report(ok, !left);
    cleanup();
    return ok ? 0 : 1;
}

void Agent::report(bool ok, bool with_proxies) {
    const char* base = std::getenv("ICCS_REPORT");
    if (base == nullptr || *base == '\0') return;
    const std::string path = std::string(base) + ".mpi.c" + std::to_string(domain_);
    FILE* out = std::fopen(path.c_str(), "w");
    if (out == nullptr) return;
    unsigned zero_copy_links = 0;
    if (m_.config->machine.fabric == Fabric::kMemif)
        for (uint16_t d = 0; d < domain_; ++d) zero_copy_links += memif_zero_copy_link(plan_, static_cast<uint16_t>(domain_), d);
    // "agent": where the domain's agent ran: its own process, or its only rank's (the rank's
    // thread ran the bridge and the proxies: InRankBridge), with that process's id;
    // "memif_zero_copy_links": the memif links whose client end it was that ran in DPDK's
    // zero-copy mode ([machine] memif_zero_copy: memif_zero_copy_link); "rank_lcore": in-rank, the
    // lcore id the rank's thread registered as with the EAL (mempool caches of its own), -1 none.
    std::fprintf(out,
                 "{\"domain\":%u,\"ok\":%s,\"transport\":\"%s\",\"agent\":\"%s\",\"agent_pid\":%d,"
                 "\"memif_zero_copy_links\":%u,\"rank_lcore\":%d,\"ranks\":[",
                 domain_, ok ? "true" : "false", to_string(m_.transport), in_rank_ ? "in-rank" : "process",
                 static_cast<int>(getpid()), zero_copy_links, rank_lcore_);
    for (uint32_t k = 0; k < region_.hdr().members; ++k) {
        const RankSlot& s = region_.slot(k);
        std::fprintf(out, "%s{\"rank\":%u,\"state\":%u,\"pid\":%u", k ? "," : "", region_.hdr().first_rank + k,
                     s.state.load(), s.pid.load());
#define ICCS_X(name) std::fprintf(out, ",\"" #name "\":%" PRIu64, s.counters.name.load(std::memory_order_relaxed));
        ICCS_MPI_RANK_COUNTERS(ICCS_X)
#undef ICCS_X
        if (k < shared_.counters.size()) {
            const BridgeCounters& b = shared_.counters[k];
            std::fprintf(out,
                         ",\"bridge\":{\"records_out\":%" PRIu64 ",\"bytes_out\":%" PRIu64 ",\"records_in\":%" PRIu64
                         ",\"bytes_in\":%" PRIu64 ",\"window_waits\":%" PRIu64 ",\"ring_full\":%" PRIu64
                         ",\"dropped\":%" PRIu64 ",\"direct_out\":%" PRIu64 ",\"direct_out_zero_copy\":%" PRIu64
                         ",\"direct_out_multi\":%" PRIu64 ",\"direct_in\":%" PRIu64 ",\"direct_in_chained\":%" PRIu64 "}",
                         b.records_out, b.bytes_out, b.records_in, b.bytes_in, b.window_waits, b.ring_full, b.dropped,
                         b.direct_out, b.direct_out_zero_copy, b.direct_out_multi, b.direct_in, b.direct_in_chained);
        }
        std::fprintf(out, "}");
    }
    std::fprintf(out, "],\"proxies\":[");
    for (size_t i = 0; with_proxies && i < cluster_report_.proxies.size(); ++i) {  // (still running: not read)
        const ProxyCounters& p = cluster_report_.proxies[i].proxy;
        const SlidwinCounters& w = cluster_report_.proxies[i].slidwin;
        // What the retransmissions were (decided by the timer or by selective acks; one whose last
        // copy was still queued is skipped, so these may add up to more), the copies this proxy
        // received of what it had (rx_dup: on a lossless fabric, the peer's spurious
        // retransmissions), and datagrams dropped for a wrong UDP checksum (issue 35); the doorbells
        // it rang (a peer proxy's thread woken: nobody of that cluster watched its ports) and its
        // own thread's sleeps.
        std::fprintf(out,
                     "%s{\"cluster\":%u,\"proxy\":%zu,\"msgs_tx\":%" PRIu64 ",\"msgs_rx\":%" PRIu64 ",\"bytes_tx\":%" PRIu64
                     ",\"bytes_rx\":%" PRIu64 ",\"retransmissions\":%" PRIu64 ",\"retx_timer\":%" PRIu64
                     ",\"rto_expired\":%" PRIu64 ",\"retx_sack\":%" PRIu64 ",\"rx_dup\":%" PRIu64
                     ",\"drop_udp_csum\":%" PRIu64 ",\"bell_rings\":%" PRIu64 ",\"sleeps\":%" PRIu64
                     ",\"utilization\":%.4f}",
                     i ? "," : "", domain_, i, p.msgs_tx, p.msgs_rx, p.bytes_tx, p.bytes_rx, w.tx_retx, w.tx_rto_retx,
                     w.rto_expired, w.tx_fast_retx, w.rx_dup, cluster_report_.proxies[i].stack.drop_udp_csum,
                     p.bell_rings, p.sleeps, p.total_ns ? double(p.busy_ns) / double(p.total_ns) : 0.0);
    }
    std::fprintf(out, "]}\n");
    std::fclose(out);
}

// A doorbell of another cluster that has no agent (none started, or it ended): this cluster's
// proxies made it to ring that cluster (either side creates it, proxy/doorbell.cpp), and nobody
// else would remove it (a one-process program on a machine file of two clusters left
// bell-c1p0 behind).
bool Agent::orphan_bell(const std::string& name) const {
    unsigned d = 0, p = 0;
    char tail = 0;
    if (std::sscanf(name.c_str(), "bell-c%up%u%c", &d, &p, &tail) != 2 || d == domain_) return false;
    std::error_code ec;
    return !std::filesystem::exists(m_.agent_lock(d), ec) && !std::filesystem::exists(m_.agent_socket(d), ec);
}

void Agent::cleanup() {
    std::error_code ec;
    std::filesystem::remove(m_.agent_socket(domain_), ec);
    std::filesystem::remove(m_.agent_lock(domain_), ec);
    if (m_.bridged()) {
        // This cluster's files of the run directory: its proxies' doorbells and the memif
        // sockets it served (the lower cluster of a link serves it).
        const std::string bell = "bell-c" + std::to_string(domain_) + "p";
        const std::string memif = "memif-" + std::to_string(domain_) + ".";
        for (const auto& e : std::filesystem::directory_iterator(m_.run_dir, ec)) {
            const std::string name = e.path().filename().string();
            if (name.rfind(bell, 0) == 0 || name.rfind(memif, 0) == 0 || orphan_bell(name))
                std::filesystem::remove(e.path(), ec);
        }
    }
    // The last agent out takes the directory (it fails while another agent's files are there).
    ::rmdir(m_.run_dir.c_str());
}

}  // namespace iccs::mpi
