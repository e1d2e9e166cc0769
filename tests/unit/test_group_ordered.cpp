// test_group_ordered.cpp: group/ordered.hpp over the in-process loopback runtime: under
// concurrent senders every thread delivers the same sequence (every message once, each sender's
// in its order), for the three sequencer policies and several shapes; replicated objects end
// identical on every cluster.
#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "loopback_runtime.hpp"
#include "ordered.hpp"

using namespace iccs;
using namespace iccs::group;

namespace {

struct Item {
    uint16_t c, t;
    uint32_t i;
    bool operator==(const Item&) const = default;
};

Topology topo_of(const std::vector<uint16_t>& sites, uint16_t threads) {
    Topology t;
    std::string err;
    REQUIRE(make_topology(static_cast<uint16_t>(sites.size()), threads, sites, t, err));
    return t;
}

}  // namespace

TEST_CASE("group: ordered broadcast: every thread delivers the same sequence under concurrent senders", "[group]") {
    const std::vector<std::pair<std::vector<uint16_t>, uint16_t>> shapes = {
        {{0}, 3}, {{0, 1}, 2}, {{0, 0, 1, 1}, 2}, {{0, 1, 2}, 1}, {{0, 1, 0, 2}, 2}};
    for (Sequencer pol : {Sequencer::kCentral, Sequencer::kRotating, Sequencer::kMigrating})
        for (const auto& [sites, T] : shapes) {
            INFO("policy " << to_string(pol) << ", " << sites.size() << " clusters of " << T << " threads");
            const auto C = static_cast<uint16_t>(sites.size());
            const Topology topo = topo_of(sites, T);
            iccs::testing::LoopbackWorld lw(C, T);
            std::vector<std::unique_ptr<OrderedBcast>> ob;
            for (uint16_t c = 0; c < C; ++c) ob.push_back(std::make_unique<OrderedBcast>(lw.runtime(c), topo, pol));
            constexpr uint32_t K = 40;
            const size_t N = size_t{C} * T * K;
            std::vector<std::vector<Item>> seen(size_t{C} * T);
            std::vector<std::string> errs(size_t{C} * T);
            std::vector<std::thread> th;
            for (uint16_t c = 0; c < C; ++c)
                for (uint16_t t = 0; t < T; ++t)
                    th.emplace_back([&, c, t] {
                        auto& mine = seen[size_t{c} * T + t];
                        std::vector<uint8_t> buf;
                        RtAddr from;
                        for (uint32_t i = 0; i < K; ++i) {
                            const Item it{c, t, i};
                            std::vector<uint8_t> body(sizeof it + (i * 37) % 300, static_cast<uint8_t>(i));
                            std::memcpy(body.data(), &it, sizeof it);
                            if (!ob[c]->send(t, body.data(), body.size())) return void(errs[size_t{c} * T + t] = ob[c]->last_error());
                            if (i % 3 == 0 && mine.size() < N) {  // interleave delivering with sending
                                if (!ob[c]->deliver(t, buf, &from)) return void(errs[size_t{c} * T + t] = ob[c]->last_error());
                                Item got;
                                std::memcpy(&got, buf.data(), sizeof got);
                                mine.push_back(got);
                            }
                        }
                        while (mine.size() < N) {
                            if (!ob[c]->deliver(t, buf, &from)) return void(errs[size_t{c} * T + t] = ob[c]->last_error());
                            Item got;
                            std::memcpy(&got, buf.data(), sizeof got);
                            if (from.cluster != got.c || from.thread != got.t || buf.size() != sizeof got + (got.i * 37) % 300)
                                return void(errs[size_t{c} * T + t] = "a message with the wrong sender or length");
                            mine.push_back(got);
                        }
                    });
            for (auto& x : th) x.join();
            lw.stop();
            for (const auto& e : errs) CHECK(e == "");
            for (const auto& s : seen) CHECK(s == seen[0]);  // the same total order everywhere
            std::vector<uint32_t> next(size_t{C} * T, 0);
            bool fifo = true;
            for (const Item& it : seen[0]) fifo = fifo && it.i == next[size_t{it.c} * T + it.t]++;
            CHECK(fifo);  // each sender's messages once, in its order
            CHECK(seen[0].size() == N);
            uint64_t sequenced = 0;
            for (auto& o : ob) sequenced += o->counters().sequenced_here;
            CHECK(sequenced == N);
            if (pol == Sequencer::kCentral) CHECK(ob[0]->counters().sequenced_here == N);
            uint16_t sequencers = 0;  // clusters that numbered messages
            uint64_t passes = 0;
            for (auto& o : ob) {
                sequencers += o->counters().sequenced_here > 0;
                passes += o->counters().token_passes;
            }
            const Topology& tp = topo;
            if (pol != Sequencer::kCentral && tp.sites > 1) {
                CHECK(passes > 0);  // the token moved to the sites that sent
                CHECK(sequencers == tp.sites);  // every site's sequencer numbered some
            }
            if (pol == Sequencer::kCentral) CHECK(sequencers == 1);
        }
}

namespace {
struct Account {
    int64_t balance = 0;
    std::vector<uint32_t> history;  // order-sensitive: the writes in the order applied
};
void deposit(Account& a, std::span<const uint8_t> args) {
    uint32_t v = 0;
    std::memcpy(&v, args.data(), std::min<size_t>(4, args.size()));
    a.balance += v;
    a.history.push_back(v);
}
void halve(Account& a, std::span<const uint8_t>) {
    a.balance /= 2;
    a.history.push_back(0);
}
}  // namespace

TEST_CASE("group: replicated objects: writes in one order on every replica, reads local", "[group]") {
    for (Sequencer pol : {Sequencer::kCentral, Sequencer::kRotating, Sequencer::kMigrating}) {
        INFO("policy " << to_string(pol));
        const std::vector<uint16_t> sites{0, 0, 1, 2};
        const uint16_t T = 2, C = 4;
        const Topology topo = topo_of(sites, T);
        iccs::testing::LoopbackWorld lw(C, T);
        std::vector<std::unique_ptr<Replicated<Account>>> obj;
        for (uint16_t c = 0; c < C; ++c)
            obj.push_back(std::make_unique<Replicated<Account>>(lw.runtime(c), topo, pol, Account{},
                                                                std::vector<Replicated<Account>::WriteFn>{deposit, halve}));
        constexpr uint32_t K = 30;
        std::vector<std::string> errs(size_t{C} * T);
        std::vector<std::thread> th;
        for (uint16_t c = 0; c < C; ++c)
            for (uint16_t t = 0; t < T; ++t)
                th.emplace_back([&, c, t] {
                    for (uint32_t i = 0; i < K; ++i) {
                        const uint32_t v = 1000u * c + 100u * t + i;
                        const bool ok = i % 7 == 6 ? obj[c]->write(t, 1, {})
                                                   : obj[c]->write(t, 0, std::span<const uint8_t>(
                                                                             reinterpret_cast<const uint8_t*>(&v), 4));
                        if (!ok) return void(errs[size_t{c} * T + t] = obj[c]->bcast().last_error());
                        // read-your-writes: this replica already has the write
                        const bool seen = obj[c]->read([&](const Account& a) {
                            return i % 7 == 6 || std::find(a.history.begin(), a.history.end(), v) != a.history.end();
                        });
                        if (!seen) return void(errs[size_t{c} * T + t] = "a write not visible to its writer");
                    }
                });
        for (auto& x : th) x.join();
        const uint64_t total = uint64_t{C} * T * K;
        for (uint16_t c = 0; c < C; ++c) REQUIRE(obj[c]->bcast().wait_delivered(0, total));
        lw.stop();
        for (const auto& e : errs) CHECK(e == "");
        const Account a0 = obj[0]->read([](const Account& a) { return a; });
        CHECK(a0.history.size() == total);
        for (uint16_t c = 1; c < C; ++c) {
            const Account a = obj[c]->read([](const Account& x) { return x; });
            CHECK(a.balance == a0.balance);
            CHECK(a.history == a0.history);
        }
    }
}
