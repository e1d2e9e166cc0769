// The set-up converges whatever the order and the loss (issue 37): two endpoints on an in-memory
// wire that loses, delays (so reorders) and duplicates frames; either side's endpoint opens late
// (af_packet start-up order, a cluster seconds late under load), either side is not run for a
// while (its receive ring fills and overflows, its timers fire late and all at once), and an
// earlier run's frames (its SYNs alone, or all of them) are replayed into the set-up and after
// it. Each schedule comes from a fixed seed, so a failure names the seed that reproduces it.
// After the set-up both sides send and every message must arrive exactly once, in order, with
// nobody taken for restarted. A tentative peer that a later SYN could not replace wedges the
// replay case at its first seed (tried); nothing on the branch did, in 2000 seeds of each case.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "mem_wire.hpp"
#include "security_link.hpp"
#include "slidwin_endpoint.hpp"
#include "stack.hpp"

using namespace iccs;

namespace {

constexpr uint16_t kPort = 9410;
// Schedules per case and key mode; ICCS_HANDSHAKE_SEEDS=N sweeps more (2000 each passed here).
uint32_t seeds() {
    const char* v = std::getenv("ICCS_HANDSHAKE_SEEDS");
    return v != nullptr && std::atoi(v) > 0 ? static_cast<uint32_t>(std::atoi(v)) : 24;
}
using Frame = std::vector<uint8_t>;

// Records each message's index (its first 4 bytes) and checks they come in order.
struct OrderedSink : SlidwinSink {
    uint32_t next = 0;
    uint32_t out_of_order = 0;
    uint32_t restarts = 0;
    bool on_message(SubConnection&, PktBuf* m) override {
        uint8_t w[4];
        pkt_read(m, 0, 4, w);
        uint32_t idx;
        std::memcpy(&idx, w, 4);
        if (idx != next) ++out_of_order;
        next = idx + 1;
        pkt_free(m);
        return true;
    }
    void on_peer_restarted(SubConnection&, uint64_t) override { ++restarts; }
};

// What the wire does to frames, and when each side starts.
struct Schedule {
    double loss = 0;            // each frame lost with this probability
    double dup = 0;             // ... else delivered twice with this one
    uint64_t max_delay_ns = 0;  // each copy delayed uniformly in [0, max_delay_ns]: reordering
    uint64_t start_a_ns = 0;    // a's endpoint opens then (frames before go nowhere)
    uint64_t start_b_ns = 0;
    std::vector<Frame> replay;  // frames injected into b (from a's address) ...
    uint64_t replay_every_ns = 0;  // ... all of them this often, from time 0 ...
    uint64_t replay_until_ns = 0;  // ... until then
    // A side not run for a while (a process given no core for seconds, issue 21): what reaches
    // it meanwhile waits in its receive ring (kRxRing frames, the rest lost), its timers do not
    // fire, and when it runs again it takes the ring in bursts and its timers all at once.
    uint64_t pause_from_ns[2] = {0, 0}, pause_to_ns[2] = {0, 0};  // [a, b]
};

constexpr size_t kRxRing = 512;

// Two stacks on the wire of a Schedule, each with one sub-connection to the other.
struct Net {
    HeapPktPool pool_a{4096, 2048}, pool_b{4096, 2048};
    std::unique_ptr<Stack> a_ = std::make_unique<Stack>(mem_wire_host(1), pool_a);
    std::unique_ptr<Stack> b_ = std::make_unique<Stack>(mem_wire_host(2), pool_b);
    Stack& a = *a_;
    Stack& b = *b_;
    TimerWheel wheel_a{10'000, 1024, 0}, wheel_b{10'000, 1024, 0};
    OrderedSink sink_a, sink_b;
    SlidwinConfig cfg;
    Schedule sched;
    std::unique_ptr<SlidwinEndpoint> ep_a, ep_b;
    SubConnection* sa = nullptr;
    SubConnection* sb = nullptr;
    uint64_t now = 0;
    uint64_t next_replay_ns = 0;
    std::mt19937_64 rng;
    struct Flying {
        uint64_t at;
        uint64_t order;  // ties keep the order of sending
        bool to_b;
        Frame f;
    };
    std::vector<Flying> wire;
    std::vector<Frame> ring[2];  // [a, b]: frames waiting while that side is not run
    uint64_t sent_order = 0;
    std::vector<Frame>* record_a_to_b = nullptr;

    Net(const SlidwinConfig& c, Schedule s, uint64_t seed) : cfg(c), sched(std::move(s)), rng(seed) {
        a.arp().add_static(b.config().ip, b.config().mac);
        b.arp().add_static(a.config().ip, a.config().mac);
    }
    ~Net() {
        ep_a.reset();
        ep_b.reset();
        drain(a);
        drain(b);
        a_.reset();
        b_.reset();
        CHECK(pool_a.in_use() == 0);
        CHECK(pool_b.in_use() == 0);
    }
    static void drain(Stack& s) {
        PktBuf* f[32];
        while (uint32_t n = s.tx_take(f, 32))
            for (uint32_t i = 0; i < n; ++i) pkt_free(f[i]);
    }
    double uniform() { return std::uniform_real_distribution<double>(0, 1)(rng); }
    void put(bool to_b, const Frame& f) {
        if (uniform() < sched.loss) return;
        const int copies = uniform() < sched.dup ? 2 : 1;
        for (int i = 0; i < copies; ++i) {
            const uint64_t delay = sched.max_delay_ns ? rng() % (sched.max_delay_ns + 1) : 0;
            wire.push_back(Flying{now + delay, sent_order++, to_b, f});
        }
    }
    void take(Stack& from, bool to_b) {
        PktBuf* f[32];
        while (uint32_t n = from.tx_take(f, 32)) {
            for (uint32_t i = 0; i < n; ++i) {
                Frame v(f[i]->pkt_len);
                pkt_read(f[i], 0, f[i]->pkt_len, v.data());
                pkt_free(f[i]);
                if (to_b && record_a_to_b != nullptr) record_a_to_b->push_back(v);
                put(to_b, v);
            }
        }
    }
    void inject(Stack& to, PktPool& pool, const Frame& f) {
        PktBuf* p = pkt_alloc(pool);
        REQUIRE(p != nullptr);
        REQUIRE(pkt_write(p, pool, f.data(), static_cast<uint32_t>(f.size())));
        to.input_burst(&p, 1, now);
    }
    void open_due() {
        if (!ep_a && now >= sched.start_a_ns) {
            ep_a = std::make_unique<SlidwinEndpoint>(a, wheel_a, kPort, cfg, sink_a);
            sa = ep_a->open(0, b.config().ip, kPort, 0, now);
        }
        if (!ep_b && now >= sched.start_b_ns) {
            ep_b = std::make_unique<SlidwinEndpoint>(b, wheel_b, kPort, cfg, sink_b);
            sb = ep_b->open(0, a.config().ip, kPort, 0, now);
        }
    }
    bool paused(int side) const { return now >= sched.pause_from_ns[side] && now < sched.pause_to_ns[side]; }
    void arrive(int side, const Frame& f) {
        if (ring[side].size() < kRxRing) ring[side].push_back(f);
    }
    void step(uint64_t dt_ns) {
        open_due();
        if (!sched.replay.empty() && now < sched.replay_until_ns && now >= next_replay_ns) {
            for (const Frame& f : sched.replay) arrive(1, f);
            next_replay_ns = now + sched.replay_every_ns;
        }
        // What is due arrives, in order of arrival, in the receive rings.
        std::stable_sort(wire.begin(), wire.end(),
                         [](const Flying& x, const Flying& y) { return x.at != y.at ? x.at < y.at : x.order < y.order; });
        size_t due = 0;
        while (due < wire.size() && wire[due].at <= now) ++due;
        for (size_t i = 0; i < due; ++i) arrive(wire[i].to_b ? 1 : 0, wire[i].f);
        wire.erase(wire.begin(), wire.begin() + static_cast<long>(due));
        // Each side that runs takes its ring in bursts of 32, then its timers.
        for (int side = 0; side < 2; ++side) {
            if (paused(side)) continue;
            Stack& st = side ? b : a;
            PktPool& pool = side ? pool_b : pool_a;
            SlidwinEndpoint* ep = (side ? ep_b : ep_a).get();
            for (size_t i = 0; i < ring[side].size(); ++i) {
                inject(st, pool, ring[side][i]);
                if (ep != nullptr && (i % 32 == 31 || i + 1 == ring[side].size())) ep->end_of_burst(now);
            }
            ring[side].clear();
            (side ? wheel_b : wheel_a).advance(now);
            st.timers(now);
            take(st, side == 0);
        }
        now += dt_ns;
    }
    bool established() const { return sa && sb && sa->established() && sb->established(); }
    // Run until both ends are established, or limit_ns after the later one opened.
    bool set_up(uint64_t limit_ns) {
        const uint64_t end = std::max({sched.start_a_ns, sched.start_b_ns, sched.pause_to_ns[0], sched.pause_to_ns[1]}) + limit_ns;
        while (now < end && !established()) step(20'000);
        return established();
    }
    // n messages each way (index in the first 4 bytes), then until all arrived or limit_ns.
    void exchange(uint32_t n, uint64_t limit_ns) {
        uint32_t sent_a = 0, sent_b = 0;
        const uint64_t end = now + limit_ns;
        while (now < end && (sink_a.next < n || sink_b.next < n)) {
            for (int k = 0; k < 4; ++k) {
                sent_a += send(*sa, pool_a, sent_a, n, now);
                sent_b += send(*sb, pool_b, sent_b, n, now);
            }
            step(20'000);
        }
    }
    static uint32_t send(SubConnection& sc, PktPool& pool, uint32_t idx, uint32_t n, uint64_t now_ns) {
        if (idx >= n || sc.send_space() == 0) return 0;
        PktBuf* m = pkt_alloc(pool);
        if (m == nullptr) return 0;
        uint8_t* d = pkt_append(m, 64);
        std::memset(d, 0, 64);
        std::memcpy(d, &idx, 4);
        if (slidwin_send(sc, m, now_ns) != SlidwinSendResult::kOk) {
            pkt_free(m);
            return 0;
        }
        return 1;
    }
};

// The frames a sends to b in a whole earlier run (set-up and some data) under cfg.
std::vector<Frame> earlier_run(const SlidwinConfig& cfg) {
    std::vector<Frame> capture;
    Net run1{cfg, Schedule{}, 1};
    run1.record_a_to_b = &capture;
    REQUIRE(run1.set_up(1'000'000'000));
    run1.exchange(20, 1'000'000'000);
    REQUIRE(run1.sink_b.next == 20);
    return capture;
}

std::string nonzero(const SubConnection* sc) {
    if (sc == nullptr) return "";
    std::string out;
    sc->counters().for_each([&](const char* name, const char*, uint64_t v) {
        if (v != 0) out += std::string(" ") + name + " " + std::to_string(v);
    });
    return out;
}

bool is_syn(const Frame& f) { return (f[42 + 1] & kSwSyn) != 0; }

void check_run(Net& net, uint32_t seed) {
    INFO("pauses a " << net.sched.pause_from_ns[0] / 1000 << ".." << net.sched.pause_to_ns[0] / 1000 << " us, b "
                     << net.sched.pause_from_ns[1] / 1000 << ".." << net.sched.pause_to_ns[1] / 1000 << " us");
    INFO("seed " << seed << ": a opens at " << net.sched.start_a_ns / 1000 << " us, b at "
                 << net.sched.start_b_ns / 1000 << " us, loss " << net.sched.loss << ", max delay "
                 << net.sched.max_delay_ns / 1000 << " us, " << net.sched.replay.size() << " frames replayed");
    // The SYNs back off to syn_max_interval_ns (100 ms): 10 s after the later start (or the end
    // of a pause) is ~100 tries; at 50% loss each way one try in four gets its answer back, so a
    // set-up that has not converged by then is wedged, not unlucky (3 s did run out once in 8000).
    const bool up = net.set_up(10'000'000'000);
    INFO("a: " << (net.sa ? net.sa->to_string() : "not open") << nonzero(net.sa) << "; b: "
               << (net.sb ? net.sb->to_string() : "not open") << nonzero(net.sb));
    REQUIRE(up);
    REQUIRE(net.sb->peer_token() == net.sa->local_token());
    REQUIRE(net.sa->peer_token() == net.sb->local_token());
    net.exchange(200, 20'000'000'000);
    REQUIRE(net.sink_b.next == 200);
    REQUIRE(net.sink_a.next == 200);
    REQUIRE(net.sink_a.out_of_order == 0);
    REQUIRE(net.sink_b.out_of_order == 0);
    REQUIRE(net.sink_a.restarts == 0);
    REQUIRE(net.sink_b.restarts == 0);
}

Schedule draw(std::mt19937_64& r) {
    Schedule s;
    const double losses[] = {0, 0.1, 0.3, 0.5};
    s.loss = losses[r() % 4];
    s.dup = (r() % 3 == 0) ? 0.1 : 0;
    s.max_delay_ns = (r() % 4) * 700'000;  // up to 2.1 ms: SYNs and their answers cross and reorder
    // One side late by up to 2 s (af_packet start-up order, load), either side.
    const uint64_t late = (r() % 2) ? r() % 2'000'000'000 : r() % 30'000'000;
    (r() % 2 ? s.start_a_ns : s.start_b_ns) = late;
    // Either side (or neither) not run for 0.2..3 s, starting within the first 2 s.
    const int who = static_cast<int>(r() % 3);
    if (who < 2) {
        s.pause_from_ns[who] = r() % 2'000'000'000;
        s.pause_to_ns[who] = s.pause_from_ns[who] + 200'000'000 + r() % 2'800'000'000;
    }
    return s;
}

}  // namespace

TEST_CASE("the handshake converges whatever the start order, loss, delay and duplication", "[security][handshake]") {
    const SlidwinAuthKey key = security_test::test_key(false);
    for (const SlidwinAuthKey* k : {static_cast<const SlidwinAuthKey*>(nullptr), &key}) {  // no key, a key
        SlidwinConfig cfg;
        cfg.auth = k;
        for (uint32_t seed = 1; seed <= seeds(); ++seed) {
            INFO((k != nullptr ? "with a key" : "no key"));
            std::mt19937_64 r(seed);
            Net net{cfg, draw(r), seed};
            check_run(net, seed);
        }
    }
}

TEST_CASE("an earlier run's frames replayed during and after the set-up never wedge a new run",
          "[security][handshake]") {
    const SlidwinAuthKey key = security_test::test_key(false);
    for (const SlidwinAuthKey* k : {static_cast<const SlidwinAuthKey*>(nullptr), &key}) {
        SlidwinConfig cfg;
        cfg.auth = k;
        const std::vector<Frame> capture = earlier_run(cfg);
        std::vector<Frame> syns;
        for (const Frame& f : capture)
            if (is_syn(f)) syns.push_back(f);
        REQUIRE(!syns.empty());
        for (uint32_t seed = 1; seed <= seeds(); ++seed) {
            INFO((k != nullptr ? "with a key" : "no key"));
            std::mt19937_64 r(seed * 7919);
            Schedule s = draw(r);
            s.replay = (seed % 2) ? syns : capture;  // the SYNs alone, or every frame of the run
            s.replay_every_ns = 2'000'000 + (r() % 4) * 1'000'000;
            s.replay_until_ns = std::max(s.start_a_ns, s.start_b_ns) + (r() % 3) * 500'000'000;
            Net net{cfg, std::move(s), seed};
            check_run(net, seed);
        }
    }
}
