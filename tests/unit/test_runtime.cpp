// The cluster runtime (compute/runtime.hpp): launch discovery from the variables of our launcher,
// Slurm, Open MPI and PMI (set by hand), and the direct/delay transports between two clusters in
// one process (the same shared-memory region a run's processes map).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "rt_core.hpp"
#include "runtime_launch.hpp"

using namespace iccs;

namespace {

struct Env {
    std::map<std::string, std::string> vars;
    std::function<const char*(const char*)> get() const {
        return [this](const char* n) -> const char* {
            auto it = vars.find(n);
            return it == vars.end() ? nullptr : it->second.c_str();
        };
    }
};

std::string write_config(const std::string& text) {
    const std::string path = "/tmp/iccs-unit-rt-" + std::to_string(getpid()) + ".toml";
    FILE* f = std::fopen(path.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
    return path;
}

const char* kUdpMachine =
    "[machine]\nclusters = 2\nfabric = \"udp\"\nudp_port = 9410\nudp_addresses = [\"10.1.0.1\", \"10.1.0.2\"]\n"
    "[cluster]\ncompute_threads = 3\nproxies = 2\n";

}  // namespace

TEST_CASE("rank discovery: our launcher, Slurm, Open MPI, PMI, PMIx, in the documented order", "[runtime]") {
    RtRank r;
    std::string err;
    Env none;
    REQUIRE(rt_discover_rank(none.get(), r, err));
    CHECK_FALSE(r.found);

    Env slurm{{{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}}};
    REQUIRE(rt_discover_rank(slurm.get(), r, err));
    CHECK(r.found);
    CHECK(r.rank == 1);
    CHECK(r.size == 4);
    CHECK(r.source == "SLURM_PROCID");

    Env ompi{{{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "3"}}};
    REQUIRE(rt_discover_rank(ompi.get(), r, err));
    CHECK(r.rank == 2);
    CHECK(r.size == 3);
    CHECK(r.source == "OMPI_COMM_WORLD_RANK");

    Env pmi{{{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}}};
    REQUIRE(rt_discover_rank(pmi.get(), r, err));
    CHECK(r.rank == 0);
    CHECK(r.size == 2);
    CHECK(r.source == "PMI_RANK");

    Env pmix{{{"PMIX_RANK", "1"}}};
    REQUIRE(rt_discover_rank(pmix.get(), r, err));
    CHECK(r.rank == 1);
    CHECK(r.size == 0);  // PMIx gives no size variable: the machine file's clusters count

    // Slurm before Open MPI before PMI (srun under an MPI module sets several); ours first of all
    Env both{{{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"SLURM_PROCID", "1"},
              {"SLURM_NTASKS", "2"}, {"PMI_RANK", "0"}, {"PMI_SIZE", "2"}}};
    REQUIRE(rt_discover_rank(both.get(), r, err));
    CHECK(r.source == "SLURM_PROCID");
    CHECK(r.rank == 1);
    both.vars["ICCS_CLUSTER"] = "0";
    both.vars["ICCS_CLUSTERS"] = "2";
    REQUIRE(rt_discover_rank(both.get(), r, err));
    CHECK(r.source == "ICCS_CLUSTER");
    CHECK(r.rank == 0);
}

TEST_CASE("rank discovery: bad values are named", "[runtime]") {
    RtRank r;
    std::string err;
    Env e1{{{"OMPI_COMM_WORLD_RANK", "one"}, {"OMPI_COMM_WORLD_SIZE", "2"}}};
    CHECK_FALSE(rt_discover_rank(e1.get(), r, err));
    CHECK(err.find("OMPI_COMM_WORLD_RANK=\"one\"") != std::string::npos);
    Env e2{{{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "2"}}};
    CHECK_FALSE(rt_discover_rank(e2.get(), r, err));
    CHECK(err.find("SLURM_PROCID=\"2\"") != std::string::npos);
    CHECK(err.find("SLURM_NTASKS") != std::string::npos);
    Env e3{{{"PMI_RANK", "0"}, {"PMI_SIZE", "0"}}};
    CHECK_FALSE(rt_discover_rank(e3.get(), r, err));
    CHECK(err.find("PMI_SIZE=\"0\"") != std::string::npos);
    Env e4{{{"SLURM_PROCID", "0"}}};
    CHECK_FALSE(rt_discover_rank(e4.get(), r, err));
    CHECK(err.find("SLURM_NTASKS") != std::string::npos);
    Env e5{{{"OMPI_COMM_WORLD_RANK", "-1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}};
    CHECK_FALSE(rt_discover_rank(e5.get(), r, err));
    CHECK(err.find("OMPI_COMM_WORLD_RANK") != std::string::npos);
}

TEST_CASE("mpirun / srun: the rank becomes the cluster id, peers come from the machine file", "[runtime]") {
    const std::string cfg = write_config(kUdpMachine);
    RtSpec s;
    std::string err;
    Env ompi{{{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"ICCS_CONFIG", cfg}}};
    REQUIRE(rt_spec_from_env(ompi.get(), s, err));
    CHECK(s.cluster == 1);
    CHECK(s.clusters == 2);
    CHECK(s.threads == 3);
    CHECK(s.transport == RtTransport::kIccs);
    CHECK(s.plan.cluster_id == 1);
    CHECK(s.plan.fabric == "udp");
    auto peers = rt_peer_addresses(s.plan);
    REQUIRE(peers.size() == 2);
    CHECK(peers[0] == std::vector<std::string>{"10.1.0.1:9410", "10.1.0.1:9411"});
    CHECK(peers[1] == std::vector<std::string>{"10.1.0.2:9474", "10.1.0.2:9475"});

    Env slurm{{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "4711"}, {"ICCS_CONFIG", cfg}}};
    REQUIRE(rt_spec_from_env(slurm.get(), s, err));
    CHECK(s.cluster == 0);
    CHECK(s.plan.cluster_id == 0);
    CHECK(s.run_id == "4711");
    Env longid{{{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"PMIX_NAMESPACE", "prterun-host-12345@1"}, {"ICCS_CONFIG", cfg}}};
    REQUIRE(rt_spec_from_env(longid.get(), s, err));
    CHECK(s.cluster == 1);
    CHECK(s.run_id.size() == 8);  // DPDK names are short: a long job id is hashed
    CHECK(rt_peer_addresses(s.plan)[1][0] == "10.1.0.2:9474");

    // the launcher's size must be the machine's clusters
    Env three{{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "3"}, {"ICCS_CONFIG", cfg}}};
    CHECK_FALSE(rt_spec_from_env(three.get(), s, err));
    CHECK(err.find("SLURM_NTASKS=3") != std::string::npos);
    CHECK(err.find("[machine] clusters = 2") != std::string::npos);
    // no machine file
    Env nofile{{{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}}};
    CHECK_FALSE(rt_spec_from_env(nofile.get(), s, err));
    CHECK(err.find("ICCS_CONFIG") != std::string::npos);
    // not started by any launcher
    Env none;
    CHECK_FALSE(rt_spec_from_env(none.get(), s, err));
    CHECK(err.find("OMPI_COMM_WORLD_RANK") != std::string::npos);
    // a wrong transport is named
    Env badt{{{"ICCS_CLUSTER", "0"}, {"ICCS_CLUSTERS", "2"}, {"ICCS_TRANSPORT", "fast"}}};
    CHECK_FALSE(rt_spec_from_env(badt.get(), s, err));
    CHECK(err.find("ICCS_TRANSPORT=\"fast\"") != std::string::npos);
    std::remove(cfg.c_str());
}

namespace {

// Two clusters of one compute thread each in this process, over direct or delay.
struct TwoClusters {
    std::unique_ptr<Runtime> rt[2];
    std::string run_id;
    TwoClusters(RtTransport t, uint64_t delay_ns) {
        run_id = "unit" + std::to_string(getpid()) + std::to_string(int(t));
        RtSpec s;
        s.clusters = 2;
        s.threads = 1;
        s.transport = t;
        s.delay_ns = delay_ns;
        s.run_id = run_id;
        rt_shm_remove(run_id);
        std::string err;
        for (uint16_t c = 0; c < 2; ++c) {
            s.cluster = c;
            rt[c] = make_runtime(s, err);
            INFO(err);
            REQUIRE(rt[c] != nullptr);
        }
    }
    ~TwoClusters() {
        rt[0].reset();
        rt[1].reset();
        rt_shm_remove(run_id);
    }
};

struct Arrivals {
    std::vector<uint64_t> held_ns;  // receive time - send time, per message
    std::vector<uint32_t> seq;
    uint64_t bytes = 0;
};
void on_timed(RtEndpoint&, const AmMsg& m, void* ctx) {
    auto* a = static_cast<Arrivals*>(ctx);
    uint64_t sent = 0;
    uint32_t seq = 0;
    std::memcpy(&sent, m.data.data(), 8);
    std::memcpy(&seq, m.data.data() + 8, 4);
    a->held_ns.push_back(now_ns() - sent);
    a->seq.push_back(seq);
    a->bytes += m.data.size();
}
void on_echo(RtEndpoint& self, const AmMsg& m, void*) {
    self.reply(m.token(), RtBytes{m.data.data(), static_cast<uint32_t>(m.data.size())});
}

void exercise(TwoClusters& tc, Arrivals& arr, uint32_t n, uint32_t big) {
    tc.rt[1]->set_handler(1, on_timed, &arr);
    for (auto& r : tc.rt) r->set_handler(2, on_echo, nullptr);
    std::atomic<bool> ok0{true}, ok1{true};
    std::vector<std::vector<uint8_t>> g0, g1;
    std::thread t1([&] {
        RtEndpoint& ep = tc.rt[1]->endpoint(0);
        const uint8_t mine[] = {7, 8};
        if (ep.barrier_gather(mine, g1, 30'000'000) != RtStatus::kOk) ok1 = false;
        if (ep.wait_until([&] { return arr.seq.size() >= n; }, 60'000'000) != RtStatus::kOk) ok1 = false;
        if (ep.barrier(30'000'000) != RtStatus::kOk) ok1 = false;
    });
    RtEndpoint& ep = tc.rt[0]->endpoint(0);
    const uint8_t mine[] = {1};
    if (ep.barrier_gather(mine, g0, 30'000'000) != RtStatus::kOk) ok0 = false;
    std::vector<uint8_t> body(big, 0xab);
    for (uint32_t i = 0; i < n; ++i) {
        uint8_t hdr[12];
        const uint64_t now = now_ns();
        std::memcpy(hdr, &now, 8);
        std::memcpy(hdr + 8, &i, 4);
        const uint32_t len = i == n - 1 ? big : i % 97;  // the last one is max_message() - 12
        REQUIRE(ep.send(RtAddr{1, 0}, 1, RtBytes{hdr, 12}, RtBytes{body.data(), len}) == RtStatus::kOk);
    }
    std::vector<uint8_t> reply;
    const uint8_t q[] = {1, 2, 3};
    CHECK(ep.request(RtAddr{1, kRtService}, 2, RtBytes{q, 3}, {}, reply, 30'000'000) == RtStatus::kOk);
    CHECK(reply == std::vector<uint8_t>{1, 2, 3});
    // too big, bad address, reserved handler: refused with the reason
    std::vector<uint8_t> huge(tc.rt[0]->max_message() + 1);
    CHECK(ep.send(RtAddr{1, 0}, 1, RtBytes{huge.data(), static_cast<uint32_t>(huge.size())}) == RtStatus::kTooBig);
    CHECK(ep.send(RtAddr{2, 0}, 1, RtBytes{q, 1}) == RtStatus::kBadAddr);
    CHECK(ep.last_error().find("cluster 2") != std::string::npos);
    CHECK(ep.send(RtAddr{1, 0}, 200, RtBytes{q, 1}) == RtStatus::kBadAddr);
    if (ep.barrier(30'000'000) != RtStatus::kOk) ok0 = false;
    t1.join();
    CHECK(ok0);
    CHECK(ok1);
    REQUIRE(g0.size() == 2);
    CHECK(g0[0] == std::vector<uint8_t>{1});
    CHECK(g0[1] == std::vector<uint8_t>{7, 8});
    CHECK(g1 == g0);
    REQUIRE(arr.seq.size() == n);
    for (uint32_t i = 0; i < n; ++i) CHECK(arr.seq[i] == i);  // exactly once, in order
}

}  // namespace

TEST_CASE("direct: messages (up to max_message), request/reply, barrier_gather between two clusters", "[runtime]") {
    TwoClusters tc(RtTransport::kDirect, 0);
    CHECK(tc.rt[0]->max_message() >= (1u << 20));
    Arrivals arr;
    exercise(tc, arr, 2000, tc.rt[0]->max_message() - 12);
}

TEST_CASE("delay: every message is held at least the configured time", "[runtime]") {
    constexpr uint64_t kDelayNs = 3'000'000;  // 3 ms
    TwoClusters tc(RtTransport::kDelay, kDelayNs);
    Arrivals arr;
    exercise(tc, arr, 50, 100'000);
    std::vector<uint64_t> h = arr.held_ns;
    std::sort(h.begin(), h.end());
    INFO("held min " << h.front() << " ns, median " << h[h.size() / 2] << " ns, max " << h.back() << " ns");
    CHECK(h.front() >= kDelayNs);                    // the lower bound, strictly
    CHECK(h[h.size() / 2] < kDelayNs + 50'000'000);  // the upper bound, generously (a noisy 2-core host)
}

namespace {

// Bytes of the direct transport's shared memory that some process touched (tmpfs allocates a page
// at its first touch; the region is sparse until then).
uint64_t shm_touched_bytes(const std::string& run_id) {
    struct stat st {};
    if (stat(("/dev/shm" + rt_shm_name(run_id)).c_str(), &st) != 0) return ~uint64_t{0};
    return uint64_t(st.st_blocks) * 512;
}

// Requests of 4 KiB answered with their bytes, each waited for (a DSM page fetch's pattern):
// 12 MiB each way, six laps of the 2 MiB rings of the two pairs of endpoints.
void echo_laps(TwoClusters& tc) {
    for (auto& r : tc.rt) r->set_handler(2, on_echo, nullptr);
    RtEndpoint& ep = tc.rt[0]->endpoint(0);
    std::vector<uint8_t> page(4096), reply;
    for (uint32_t i = 0; i < 3072; ++i) {
        for (size_t k = 0; k < page.size(); ++k) page[k] = static_cast<uint8_t>(i * 7 + k);
        REQUIRE(ep.request(RtAddr{1, kRtService}, 2, RtBytes{page.data(), 4096}, {}, reply, 30'000'000) ==
                RtStatus::kOk);
        REQUIRE(reply == page);  // every answer whole and its own, across the pads
    }
}

}  // namespace

TEST_CASE("direct and delay: request/reply traffic keeps each ring's working set at its lap's start", "[runtime]") {
    for (const auto& [t, d] : {std::pair{RtTransport::kDirect, uint64_t{0}}, std::pair{RtTransport::kDelay, uint64_t{2'000}}}) {
        TwoClusters tc(t, d);
        echo_laps(tc);
        // Going round the whole ring, the two rings alone were 4 MiB of touched pages (the
        // region held 4.0 MiB after this test on main); restarting at the lap's start keeps
        // each within 64 KiB and a record.
        INFO(to_string(t) << ": " << shm_touched_bytes(tc.run_id) << " bytes of the region touched");
        CHECK(shm_touched_bytes(tc.run_id) < (1u << 20));
    }
}

namespace {

// The cores the calling thread may run on, as a bit mask (cores 0..63).
uint64_t own_cores() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    uint64_t mask = 0;
    for (unsigned c = 0; c < 64; ++c)
        if (CPU_ISSET(c, &set)) mask |= uint64_t{1} << c;
    return mask;
}
void on_where(RtEndpoint& self, const AmMsg& m, void*) {
    const uint64_t mask = own_cores();
    self.reply(m.token(), RtBytes{&mask, sizeof mask});
}

}  // namespace

TEST_CASE("direct, one compute thread a cluster, placement asked for: each cluster's service thread runs on the "
          "core of the other's compute thread, and each compute thread has a core of its own", "[runtime]") {
    if (host_core_count() < 2) {
        WARN("one core: nothing to place");
        return;
    }
    cpu_set_t saved;
    REQUIRE(sched_getaffinity(0, sizeof saved, &saved) == 0);
    RtSpec s;
    s.clusters = 2;
    s.threads = 1;
    s.transport = RtTransport::kDirect;
    s.run_id = "unitplace" + std::to_string(getpid());
    rt_shm_remove(s.run_id);
    // Not placed: a run over the proxies, two compute threads a cluster, or switched off.
    RtSpec over_proxies = s, two_threads = s, not_asked = s;
    over_proxies.transport = RtTransport::kIccs;
    two_threads.threads = 2;
    unsetenv("ICCS_PLACE_THREADS");
    CHECK_FALSE(place_on_host(not_asked, host_core_count()));
    setenv("ICCS_PLACE_THREADS", "1", 1);
    CHECK_FALSE(place_on_host(over_proxies, host_core_count()));
    CHECK_FALSE(place_on_host(two_threads, host_core_count()));
    for (const RtSpec* not_placed : {&over_proxies, &two_threads, &not_asked}) CHECK(not_placed->service_core == -1);
    CHECK(own_cores() == [&] {
        uint64_t m = 0;
        for (unsigned c = 0; c < 64; ++c)
            if (CPU_ISSET(c, &saved)) m |= uint64_t{1} << c;
        return m;
    }());  // the caller not pinned either
    std::unique_ptr<Runtime> rt[2];
    std::string err;
    for (uint16_t c = 0; c < 2; ++c) {
        RtSpec mine = s;
        mine.cluster = c;
        REQUIRE(place_on_host(mine, host_core_count()));
        CHECK(own_cores() == uint64_t{1} << c);  // the compute thread (the caller): core c
        CHECK(mine.service_core == 1 - c);
        rt[c] = make_runtime(mine, err);
        INFO(err);
        REQUIRE(rt[c] != nullptr);
        rt[c]->set_handler(3, on_where, nullptr);
    }
    sched_setaffinity(0, sizeof saved, &saved);  // this test process's thread as it was
    RtEndpoint& ep = rt[0]->endpoint(0);
    for (uint16_t c = 0; c < 2; ++c) {
        std::vector<uint8_t> reply;
        REQUIRE(ep.request(RtAddr{c, kRtService}, 3, {}, {}, reply, 30'000'000) == RtStatus::kOk);
        uint64_t mask = 0;
        REQUIRE(reply.size() == sizeof mask);
        std::memcpy(&mask, reply.data(), sizeof mask);
        INFO("cluster " << c << "'s service thread may run on cores (mask) " << mask);
        CHECK(mask == uint64_t{1} << (1 - c));  // the other cluster's compute core
    }
    rt[0].reset();
    rt[1].reset();
    rt_shm_remove(s.run_id);
    unsetenv("ICCS_PLACE_THREADS");
}

namespace {

// The thread a handler ran on, for the tests of a compute thread serving its service endpoint.
struct RanOn {
    std::atomic<std::thread::id> server{};  // the compute thread that calls serve_service()
    std::atomic<uint32_t> on_server{0}, elsewhere{0};
};
void on_which_thread(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto* r = static_cast<RanOn*>(ctx);
    (std::this_thread::get_id() == r->server.load() ? r->on_server : r->elsewhere).fetch_add(1);
    self.reply(m.token(), RtBytes{m.data.data(), static_cast<uint32_t>(m.data.size())});
}
// Both clusters' runtimes with serve_service's promise lasting `window_ns` and the bound `bound_ns`.
void serving(TwoClusters& tc, uint64_t window_ns, uint64_t bound_ns) {
    for (auto& r : tc.rt) {
        auto* core = dynamic_cast<RtCore*>(r.get());
        REQUIRE(core != nullptr);
        core->set_service_serving(window_ns, bound_ns);
    }
}
constexpr uint64_t kIdleForServiceSleepMs = 30;  // the service thread sleeps after 20 us idle

}  // namespace

TEST_CASE("direct and delay: a request to a cluster whose compute thread serves its service endpoint is run by that "
          "thread, its doorbell left unrung (the service thread not woken), counted", "[runtime]") {
    for (const auto& [t, d] : {std::pair{RtTransport::kDirect, uint64_t{0}}, std::pair{RtTransport::kDelay, uint64_t{50'000}}}) {
        TwoClusters tc(t, d);
        // A promise of 1 s and a bound of 1 s: on a loaded host neither ends within a request, so
        // every request finds the promise and nothing rings the doorbell late.
        serving(tc, 1'000'000'000, 1'000'000'000);
        RanOn ran;
        for (auto& r : tc.rt) r->set_handler(3, on_which_thread, &ran);
        std::atomic<bool> stop{false};
        std::thread server([&] {
            ran.server = std::this_thread::get_id();
            RtEndpoint& ep = tc.rt[1]->endpoint(0);
            while (!stop.load()) ep.serve_service();
        });
        while (ran.server.load() == std::thread::id{}) std::this_thread::yield();
        std::this_thread::sleep_for(std::chrono::milliseconds(kIdleForServiceSleepMs));
        RtEndpoint& ep = tc.rt[0]->endpoint(0);
        constexpr uint32_t kRequests = 50;
        for (uint32_t i = 0; i < kRequests; ++i) {
            std::vector<uint8_t> reply;
            REQUIRE(ep.request(RtAddr{1, kRtService}, 3, RtBytes{&i, 4}, {}, reply, 5'000'000) == RtStatus::kOk);
            REQUIRE(reply.size() == 4);
            uint32_t back = 0;
            std::memcpy(&back, reply.data(), 4);
            CHECK(back == i);
        }
        stop = true;
        server.join();
        const RtEndpointCounters& sender = ep.counters();
        const RtEndpointCounters& compute1 = tc.rt[1]->endpoint(0).counters();
        INFO(to_string(t) << ": on the serving thread " << ran.on_server.load() << ", elsewhere " << ran.elsewhere.load()
                          << "; doorbells rung " << sender.bells_rung << ", skipped " << sender.bells_skipped
                          << ", rung late " << sender.bells_rung_late << "; service messages run by the compute thread "
                          << compute1.service_msgs_served);
        // The service thread wakes by itself at most every 100 ms (it may take one or two then).
        CHECK(ran.on_server.load() >= kRequests - 5);
        CHECK(compute1.service_msgs_served >= kRequests - 5);
        // A send that finds the service thread asleep leaves its doorbell unrung; one that finds it
        // still awake (just back from its own wake-up, or not yet asleep on a loaded host: CI saw
        // 40 of 50 skipped) has nothing to ring. None may wake it, early or late.
        CHECK(sender.bells_rung == 0);
        CHECK(sender.bells_rung_late == 0);
        CHECK(sender.bells_skipped >= kRequests / 2);
    }
}

TEST_CASE("direct and delay: a compute thread that promised to serve and went away strands no request: its sender "
          "rings the service thread after the bound and the reply comes", "[runtime]") {
    for (const auto& [t, d] : {std::pair{RtTransport::kDirect, uint64_t{0}}, std::pair{RtTransport::kDelay, uint64_t{50'000}}}) {
        TwoClusters tc(t, d);
        serving(tc, 1'000'000'000, 30'000);  // the promise outlives the thread; the bound is 30 us
        RanOn ran;
        for (auto& r : tc.rt) r->set_handler(3, on_which_thread, &ran);
        std::thread([&] {
            ran.server = std::this_thread::get_id();
            tc.rt[1]->endpoint(0).serve_service();  // promises for 1 s, then ends: off computing
        }).join();
        std::this_thread::sleep_for(std::chrono::milliseconds(kIdleForServiceSleepMs));
        RtEndpoint& ep = tc.rt[0]->endpoint(0);
        std::vector<uint8_t> reply;
        const uint32_t q = 77;
        const uint64_t t0 = now_ns();
        REQUIRE(ep.request(RtAddr{1, kRtService}, 3, RtBytes{&q, 4}, {}, reply, 5'000'000) == RtStatus::kOk);
        const uint64_t took = now_ns() - t0;
        CHECK(reply.size() == 4);
        const RtEndpointCounters& sender = ep.counters();
        INFO(to_string(t) << ": took " << took << " ns; doorbells skipped " << sender.bells_skipped << ", rung late "
                          << sender.bells_rung_late);
        CHECK(sender.bells_skipped == 1);
        CHECK(sender.bells_rung_late == 1);
        CHECK(ran.elsewhere.load() == 1);  // the service thread ran it
        CHECK(took < 90'000'000);  // rung, not found by the service thread's own 100 ms look
    }
}
