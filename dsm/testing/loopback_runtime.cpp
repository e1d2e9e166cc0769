// loopback_runtime.cpp: C simulated clusters in one process: every message goes straight into
// the destination's mailbox; the barrier is a generation counter (see the header).
#include "loopback_runtime.hpp"

#include "mailbox.hpp"

namespace iccs::testing {

struct LoopbackWorld::Impl final : Router {
    uint16_t nclusters, nthreads;
    uint32_t max_msg = 16u << 20;
    std::vector<std::unique_ptr<MbCluster>> cl;
    std::mutex bar_mu;
    uint64_t bar_gen = 0;
    uint32_t bar_arrived = 0;
    std::vector<std::vector<std::vector<uint8_t>>> bar_parts;  // [cluster][thread]
    std::vector<std::vector<uint8_t>> bar_result;              // of the generation just ended
    std::atomic<uint64_t> bar_done_gen{0};

    Impl(uint16_t c, uint16_t t) : nclusters(c), nthreads(t) {
        bar_parts.assign(c, std::vector<std::vector<uint8_t>>(t));
        for (uint16_t i = 0; i < c; i++) cl.push_back(std::make_unique<MbCluster>(*this, i));
        for (auto& x : cl) x->start();
    }
    uint16_t clusters() const override { return nclusters; }
    uint16_t threads() const override { return nthreads; }
    uint32_t max_message() const override { return max_msg; }
    void route(Msg&& m) override { cl[m.dst.cluster]->ep(m.dst.thread).deliver(std::move(m)); }

    RtStatus barrier_gather(MbEndpoint& ep, std::span<const uint8_t> mine, std::vector<std::vector<uint8_t>>& by_cluster,
                            uint64_t timeout_us) override {
        uint64_t gen;
        {
            std::lock_guard<std::mutex> g(bar_mu);
            gen = bar_gen;
            bar_parts[ep.self().cluster][ep.self().thread].assign(mine.begin(), mine.end());
            if (++bar_arrived == uint32_t(nclusters) * nthreads) {
                bar_result.assign(nclusters, {});
                for (uint16_t c = 0; c < nclusters; c++)
                    for (uint16_t t = 0; t < nthreads; t++) {
                        auto& p = bar_parts[c][t];
                        bar_result[c].insert(bar_result[c].end(), p.begin(), p.end());
                    }
                bar_arrived = 0;
                bar_gen++;
                bar_done_gen.store(bar_gen);
            }
        }
        RtStatus s = ep.wait_until([&] { return bar_done_gen.load() > gen; }, timeout_us);
        if (s != RtStatus::kOk) return s;
        // Generation gen+1's result stays until the next generation completes, which needs this
        // thread's arrival.
        std::lock_guard<std::mutex> g(bar_mu);
        by_cluster = bar_result;
        return RtStatus::kOk;
    }
};

LoopbackWorld::LoopbackWorld(uint16_t clusters, uint16_t threads, uint32_t max_message)
    : impl_(std::make_unique<Impl>(clusters, threads)) {
    impl_->max_msg = max_message;
}

LoopbackWorld::~LoopbackWorld() { stop(); }

Runtime& LoopbackWorld::runtime(uint16_t cluster) { return *impl_->cl.at(cluster); }

void LoopbackWorld::stop() {
    for (auto& c : impl_->cl) c->stop();
}

}  // namespace iccs::testing
