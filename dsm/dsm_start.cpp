// dsm_start.cpp: start-up of the parallel section. At CREATE every cluster's region is compared
// by hash at cluster 0 (a non-deterministic prefix stops the run), the homes of the used pages are
// fixed and the region turns coherent; before it, replay gives every cluster cluster 0's values of
// the prefix's non-deterministic inputs (CLOCK).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>

#include "dsm_impl.hpp"

namespace iccs::dsm {

namespace {

// FNV-1a over 8-byte words (the region is page-aligned, pages are multiples of 8 bytes).
uint64_t hash_words(uint64_t h, const uint8_t* p, uint64_t n) {
    for (uint64_t i = 0; i < n; i += 8) {
        uint64_t w;
        std::memcpy(&w, p + i, 8);
        h = (h ^ w) * 1099511628211ull;
    }
    return h;
}

bool all_zero(const uint8_t* p, uint64_t n) {
    for (uint64_t i = 0; i < n; i += 8) {
        uint64_t w;
        std::memcpy(&w, p + i, 8);
        if (w) return false;
    }
    return true;
}

// The region's contents as the clusters compare them at CREATE: every page of [0, used) that holds
// a non-zero byte, with its index, read through `view`. The memfd's holes (pages never written)
// are skipped without being read (a read would allocate them: a 2 GiB G_MALLOC the prefix never
// fills costs nothing), and so are pages of zeros, so two replays that touched a zero page
// differently still agree.
uint64_t region_hash(int fd, const uint8_t* view, uint64_t used, uint64_t page) {
    uint64_t h = 1469598103934665603ull, next = 0;  // next: the first page not hashed yet
    while (next * page < used) {
        const off_t d = lseek(fd, off_t(next * page), SEEK_DATA);
        if (d < 0 || uint64_t(d) >= used) break;  // ENXIO: no data after it
        off_t e = lseek(fd, d, SEEK_HOLE);
        const uint64_t end = e < 0 ? used : std::min<uint64_t>(uint64_t(e), used);
        for (uint64_t p = std::max<uint64_t>(next, uint64_t(d) / page); p * page < end; p++) {
            const uint64_t len = std::min<uint64_t>(page, used - p * page + 7) & ~7ull;
            if (all_zero(view + p * page, len)) continue;
            h = (h ^ p) * 1099511628211ull;
            h = hash_words(h, view + p * page, len);
        }
        next = (end + page - 1) / page;
    }
    return h;
}

}  // namespace

namespace {
void h_start(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto* I = static_cast<DsmNode::Impl*>(ctx);
    Rd r(m.data.data(), m.data.size());
    std::array<uint64_t, 4> v{r.get<uint64_t>(), r.get<uint64_t>(), r.get<uint32_t>(), r.get<uint64_t>()};
    I->start_arrived.push_back({m.token(), v});
    if (I->start_arrived.size() < I->n.clusters()) return;
    // In cluster order, whatever the order of arrival: cluster 0's copy is the reference the
    // message names ("cluster 1's shared region differs from cluster 0's").
    std::sort(I->start_arrived.begin(), I->start_arrived.end(),
              [](const auto& a, const auto& b) { return a.first.to.cluster < b.first.to.cluster; });
    std::string why;
    const auto& ref = I->start_arrived.front();
    for (const auto& [tok, x] : I->start_arrived) {
        if (x[3] != ref.second[3]) {
            why = "cluster " + std::to_string(tok.to.cluster) + "'s shared region is " + std::to_string(x[3]) +
                  " bytes, cluster " + std::to_string(ref.first.to.cluster) + "'s " + std::to_string(ref.second[3]) +
                  " (ICCS_DSM_SIZE, or its default from each host's memory): set the same ICCS_DSM_SIZE everywhere";
            break;
        }
        if (x != ref.second) {
            char line[256];
            snprintf(line, sizeof line,
                     "cluster %u's shared region differs from cluster %u's at CREATE (used %" PRIu64 " vs %" PRIu64
                     " bytes, hash %016" PRIx64 " vs %016" PRIx64 ", sync ids %" PRIu64 " vs %" PRIu64
                     "): the sequential prefix of main is not deterministic (fixed seeds, same input)",
                     unsigned(tok.to.cluster), unsigned(ref.first.to.cluster), x[1], ref.second[1], x[0],
                     ref.second[0], x[2], ref.second[2]);
            why = line;
            break;
        }
    }
    Wr w;
    w.put<uint8_t>(why.empty() ? 1 : 0);
    w.bytes(why.data(), why.size());
    // Other clusters first: on a mismatch this cluster's main exits as soon as it has its answer.
    for (const auto& [tok, x] : I->start_arrived)
        if (tok.to.cluster != I->n.cluster()) self.reply(tok, RtBytes{w.b.data(), uint32_t(w.b.size())});
    for (const auto& [tok, x] : I->start_arrived)
        if (tok.to.cluster == I->n.cluster()) self.reply(tok, RtBytes{w.b.data(), uint32_t(w.b.size())});
    I->start_arrived.clear();
}
void h_replay(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto* I = static_cast<DsmNode::Impl*>(ctx);
    Rd r(m.data.data(), m.data.size());
    const uint64_t k = r.get<uint64_t>();
    std::lock_guard<std::mutex> g(I->replay_mu);
    if (k < I->replay_log.size()) self.reply(m.token(), RtBytes{&I->replay_log[k], 8});
    else I->replay_waiting.emplace_back(k, m.token());  // cluster 0's prefix has not got there yet
}
}  // namespace

uint64_t DsmNode::replay_value(uint64_t mine) {
    if (parallel() || clusters_ == 1) return mine;
    Impl& I = *impl_;
    RtEndpoint& ep = bound_or_die(*this, "CLOCK before CREATE");
    if (cluster_ == 0) {
        std::lock_guard<std::mutex> g(I.replay_mu);
        I.replay_log.push_back(mine);
        const uint64_t k = I.replay_log.size() - 1;
        for (size_t i = 0; i < I.replay_waiting.size();) {
            if (I.replay_waiting[i].first == k) {
                ep.reply(I.replay_waiting[i].second, RtBytes{&I.replay_log[k], 8});
                I.replay_waiting.erase(I.replay_waiting.begin() + long(i));
            } else {
                i++;
            }
        }
        return mine;
    }
    const uint64_t k = I.replay_next++;
    std::vector<uint8_t> reply;
    if (ep.request(I.service(0), I.h(kHReplay), RtBytes{&k, 8}, {}, reply) != RtStatus::kOk || reply.size() != 8)
        fatal("cluster %u: replaying prefix value %llu from cluster 0 failed: %s", unsigned(cluster_),
              static_cast<unsigned long long>(k), ep.last_error().c_str());
    uint64_t v;
    std::memcpy(&v, reply.data(), 8);
    return v;
}

DsmStatus DsmNode::start_parallel() {
    RtEndpoint& ep = bound_or_die(*this, "start_parallel (CREATE)");
    if (parallel()) return DsmStatus::kOk;  // coherent since the first call
    Impl& I = *impl_;
    const uint64_t used = used_.load();
    Wr w;
    w.put<uint64_t>(region_hash(I.memfd, I.priv, used, I.page));
    w.put<uint64_t>(used);
    w.put<uint32_t>(next_sync_.load());
    w.put<uint64_t>(cfg_.region_bytes);
    std::vector<uint8_t> reply;
    RtStatus s = ep.request(I.service(0), I.h(kHStart), RtBytes{w.b.data(), uint32_t(w.b.size())}, {}, reply);
    if (s != RtStatus::kOk || reply.empty()) {
        set_error("CREATE: start-up exchange with cluster 0 failed: " + ep.last_error());
        return DsmStatus::kRuntime;
    }
    if (reply[0] != 1) {
        set_error(std::string(reinterpret_cast<const char*>(reply.data() + 1), reply.size() - 1));
        return DsmStatus::kMismatch;
    }
    // Every page is valid everywhere (identical copies): read-only (every record is, from the
    // start), so the first write of the parallel section makes a twin. One cluster has nobody to
    // keep coherent: its pages stay writable and never fault. (A write fault there cost ~17 us, a
    // signal and an mprotect whose TLB flush interrupts every core running another of the
    // process's threads: gauss, 1 cluster of 2 threads, paper size, 4.4 s; now 0.04 s.)
    const uint64_t used_pages = (used + I.page - 1) / I.page;
    // The homes of the pages used at CREATE (later ones go round-robin). Every cluster replayed
    // the same allocations (the start-up exchange compared the used part), so every cluster
    // computes the same table.
    if (cfg_.home != HomePolicy::kRoundRobin) {
        I.homes.resize(used_pages);
        if (cfg_.home == HomePolicy::kBlock) {  // the used part in C blocks
            const uint64_t per = std::max<uint64_t>(1, (used_pages + clusters_ - 1) / clusters_);
            for (uint64_t p = 0; p < used_pages; p++) I.homes[p] = uint16_t(p / per);
        } else {  // each allocation in C blocks; one of fewer than C pages round-robin; a page two
                  // allocations share goes with the later one
            for (uint64_t p = 0; p < used_pages; p++) I.homes[p] = uint16_t(p % clusters_);
            for (const auto& [off, bytes] : I.pre_allocs) {
                const uint64_t first = off / I.page, end = (off + bytes + I.page - 1) / I.page;
                const uint64_t np = end - first;
                if (bytes == 0 || np < clusters_) continue;
                for (uint64_t k = 0; k < np; k++) I.homes[first + k] = uint16_t(k * clusters_ / np);
            }
            std::vector<std::pair<uint64_t, uint64_t>>().swap(I.pre_allocs);
        }
    }
    if (clusters_ > 1 && mprotect(I.app, cfg_.region_bytes, PROT_READ) != 0) {
        set_error(std::string("CREATE: mprotect of the shared region: ") + strerror(errno));
        return DsmStatus::kRuntime;
    }
    parallel_.store(true, std::memory_order_release);
    return DsmStatus::kOk;
}

void register_start_handlers(DsmNode::Impl& I) {
    I.rt.set_handler(I.h(kHStart), h_start, &I);
    I.rt.set_handler(I.h(kHReplay), h_replay, &I);
}

}  // namespace iccs::dsm
