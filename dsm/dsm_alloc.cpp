// dsm_alloc.cpp: allocation of shared memory and of sync ids. Before CREATE a local bump
// allocator and id counter (every replaying cluster gets the same addresses and ids); after it,
// requests to cluster 0, which owns both (h_alloc, h_sync_ids).
#include <cstdlib>

#include "dsm_impl.hpp"

namespace iccs::dsm {

void DsmNode::alloc_commit(uint64_t new_used) { used_.store(new_used); }

uint32_t DsmNode::take_sync_ids(uint32_t k) {
    uint32_t cur = next_sync_.load();
    for (;;) {
        if (uint64_t(cur) + k > cfg_.max_sync_ids) return cfg_.max_sync_ids;
        if (next_sync_.compare_exchange_weak(cur, cur + k)) return cur;
    }
}

// Why a G_MALLOC did not fit: the size asked, and what bounds the region.
std::string DsmNode::region_full(uint64_t bytes, uint64_t used) const {
    const bool dflt = getenv("ICCS_DSM_SIZE") == nullptr;
    return "G_MALLOC(" + std::to_string(bytes) + " bytes): the shared region is full (" + std::to_string(used) + " of " +
           std::to_string(cfg_.region_bytes) + " bytes used; the region's size is " +
           (dflt ? "the default, 64 GiB or this host's memory plus swap" : "ICCS_DSM_SIZE") +
           ": raise ICCS_DSM_SIZE; a page costs memory only when touched)";
}

void* DsmNode::alloc(uint64_t bytes, uint64_t align) {
    if (align == 0 || (align & (align - 1))) {
        set_error("G_MALLOC alignment " + std::to_string(align) + " is not a power of two");
        return nullptr;
    }
    if (!parallel()) {
        const uint64_t used = used_.load();
        const uint64_t off = (used + align - 1) & ~(align - 1);
        if (off + bytes > cfg_.region_bytes || off + bytes < off) {
            set_error(region_full(bytes, used));
            return nullptr;
        }
        used_.store(off + bytes);
        if (cfg_.home == HomePolicy::kAllocBlock) impl_->pre_allocs.emplace_back(off, bytes);
        return impl_->app + off;
    }
    RtEndpoint& ep = bound_or_die(*this, "G_MALLOC after CREATE");
    Wr w;
    w.put<uint64_t>(bytes);
    w.put<uint64_t>(align);
    std::vector<uint8_t> reply;
    RtStatus s = ep.request(impl_->service(0), impl_->h(kHAlloc), RtBytes{w.b.data(), uint32_t(w.b.size())}, {}, reply);
    if (s != RtStatus::kOk) {
        set_error("G_MALLOC: request to cluster 0 failed: " + ep.last_error());
        return nullptr;
    }
    ctr_.remote_allocs.fetch_add(1, std::memory_order_relaxed);
    Rd r(reply.data(), reply.size());
    const uint8_t ok = r.get<uint8_t>();
    const uint64_t off = r.get<uint64_t>(), used = r.get<uint64_t>();
    if (r.bad || !ok) {
        set_error(region_full(bytes, used));
        return nullptr;
    }
    return impl_->app + off;
}

uint32_t DsmNode::alloc_sync_ids(uint32_t k) {
    if (!parallel()) return take_sync_ids(k);
    RtEndpoint& ep = bound_or_die(*this, "allocating a lock, barrier or counter after CREATE");
    std::vector<uint8_t> reply;
    if (ep.request(impl_->service(0), impl_->h(kHSyncIds), RtBytes{&k, 4}, {}, reply) != RtStatus::kOk ||
        reply.size() != 4) {
        set_error("sync id request to cluster 0 failed: " + ep.last_error());
        return cfg_.max_sync_ids;
    }
    uint32_t first;
    std::memcpy(&first, reply.data(), 4);
    return first;
}

uint32_t DsmNode::take_sync_ids_for(uint64_t object, uint32_t k) {
    std::lock_guard<std::mutex> lk(objects_mu_);
    auto it = object_ids_.find(object);
    if (it != object_ids_.end() && it->second.second == k) return it->second.first;
    const uint32_t first = take_sync_ids(k);
    if (first < cfg_.max_sync_ids) object_ids_[object] = {first, k};
    return first;
}

uint32_t DsmNode::alloc_sync_ids_for(const void* object, uint32_t k) {
    const uint64_t key = reinterpret_cast<uintptr_t>(object);
    // Before CREATE every cluster replays the same inits: the local map is the same everywhere.
    // After, cluster 0 owns the map; a cluster asks once per object and remembers the answer.
    if (!parallel() || cluster_ == 0) return take_sync_ids_for(key, k);
    {
        std::lock_guard<std::mutex> lk(objects_mu_);
        auto it = object_ids_.find(key);
        if (it != object_ids_.end() && it->second.second == k) return it->second.first;
    }
    RtEndpoint& ep = bound_or_die(*this, "allocating a lock, barrier or counter after CREATE");
    Wr w;
    w.put<uint32_t>(k);
    w.put<uint64_t>(key);
    std::vector<uint8_t> reply;
    if (ep.request(impl_->service(0), impl_->h(kHSyncIds), RtBytes{w.b.data(), uint32_t(w.b.size())}, {}, reply) !=
            RtStatus::kOk ||
        reply.size() != 4) {
        set_error("sync id request to cluster 0 failed: " + ep.last_error());
        return cfg_.max_sync_ids;
    }
    uint32_t first;
    std::memcpy(&first, reply.data(), 4);
    if (first < cfg_.max_sync_ids) {
        std::lock_guard<std::mutex> lk(objects_mu_);
        object_ids_[key] = {first, k};
    }
    return first;
}

namespace {
void h_alloc(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto* I = static_cast<DsmNode::Impl*>(ctx);
    Rd r(m.data.data(), m.data.size());
    const uint64_t bytes = r.get<uint64_t>(), align = r.get<uint64_t>();
    Wr w;
    // Only this (service) thread moves the bump pointer once the run is parallel.
    const uint64_t used = I->n.used_bytes();
    const uint64_t off = (used + align - 1) & ~(align - 1);
    if (!r.bad && off + bytes <= I->n.config().region_bytes && off + bytes >= off) {
        I->n.alloc_commit(off + bytes);
        w.put<uint8_t>(1);
        w.put<uint64_t>(off);
    } else {
        w.put<uint8_t>(0);
        w.put<uint64_t>(0);
    }
    w.put<uint64_t>(used);
    self.reply(m.token(), RtBytes{w.b.data(), uint32_t(w.b.size())});
}

void h_sync_ids(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto* I = static_cast<DsmNode::Impl*>(ctx);
    Rd r(m.data.data(), m.data.size());
    const uint32_t k = r.get<uint32_t>();
    const uint64_t object = m.data.size() >= 12 ? r.get<uint64_t>() : 0;
    const uint32_t first = object != 0 ? I->n.take_sync_ids_for(object, k) : I->n.take_sync_ids(k);
    self.reply(m.token(), RtBytes{&first, 4});
}

}  // namespace

void register_alloc_handlers(DsmNode::Impl& I) {
    I.rt.set_handler(I.h(kHAlloc), h_alloc, &I);
    I.rt.set_handler(I.h(kHSyncIds), h_sync_ids, &I);
}

}  // namespace iccs::dsm
