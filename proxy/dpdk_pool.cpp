// dpdk_pool.cpp: see dpdk_pool.hpp.
#include "dpdk_pool.hpp"

#include "dpdk_env.hpp"
#include "clock.hpp"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_mbuf_pool_ops.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

namespace iccs {

static_assert(sizeof(rte_mbuf_ext_shared_info) <= sizeof(PktBuf::dev_scratch));

namespace {
constexpr uint32_t kObjHdr = (sizeof(PktBuf) + 63) & ~63u;  // PktBuf, then data on a cache line
}

// hugepages_available() is what eal_args() chose --no-huge by: the same answer before the EAL is
// up (the launcher's figures) and after.
unsigned pool_flags() { return hugepages_available() ? 0u : RTE_MEMPOOL_F_NO_IOVA_CONTIG; }

uint32_t pool_obj_bytes(uint32_t elt_bytes) {
    rte_mempool_objsz sz{};
    return rte_mempool_calc_obj_size(elt_bytes, pool_flags(), &sz);
}

uint32_t mbuf_elt_bytes(uint16_t priv_bytes, uint16_t data_room) {
    return static_cast<uint32_t>(sizeof(rte_mbuf)) + priv_bytes + data_room;
}

rte_mempool* mbuf_pool_create(const std::string& name, uint32_t n, uint32_t cache, uint16_t priv_bytes,
                              uint16_t data_room, std::string& err) {
    // rte_pktmbuf_pool_create's steps (it takes no flags).
    rte_mempool* mp = rte_mempool_create_empty(name.c_str(), n, mbuf_elt_bytes(priv_bytes, data_room), cache,
                                               sizeof(rte_pktmbuf_pool_private), SOCKET_ID_ANY, pool_flags());
    int rc = mp == nullptr ? -rte_errno : rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), nullptr);
    if (rc == 0) {
        rte_pktmbuf_pool_private priv{};
        priv.mbuf_priv_size = priv_bytes;
        priv.mbuf_data_room_size = data_room;
        rte_pktmbuf_pool_init(mp, &priv);
        rc = rte_mempool_populate_default(mp);
        rc = rc < 0 ? rc : 0;
    }
    if (rc != 0) {
        err = "cannot create mbuf pool " + name + " (" + std::to_string(n) + " x " +
              std::to_string(pool_obj_bytes(mbuf_elt_bytes(priv_bytes, data_room))) + " bytes): " + rte_strerror(-rc);
        if (mp != nullptr) rte_mempool_free(mp);
        return nullptr;
    }
    rte_mempool_obj_iter(mp, rte_pktmbuf_init, nullptr);
    return mp;
}

namespace {

struct Populator {
    PopulateResult res;
    uintptr_t page = 4096;
    void range(void* addr, size_t len) {
        if (addr == nullptr || len == 0) return;
        const uintptr_t lo = reinterpret_cast<uintptr_t>(addr) & ~(page - 1);
        const uintptr_t hi = (reinterpret_cast<uintptr_t>(addr) + len + page - 1) & ~(page - 1);
        if (res.fallback.empty() && madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_POPULATE_WRITE) == 0) {
            res.bytes += hi - lo;
            return;
        }
        if (res.fallback.empty())
            res.fallback = std::string("madvise(MADV_POPULATE_WRITE): ") + std::strerror(errno) + ": pages read instead";
        // A read, not a write: a peer may already write into a shared page (memif's regions, a
        // zero-copy memif's lent buffers), and a read fault maps a page of a memfd writable.
        for (uintptr_t a = lo; a < hi; a += page) (void)*reinterpret_cast<volatile const uint8_t*>(a);
        res.bytes += hi - lo;
    }
};

void populate_pool(rte_mempool* mp, void* arg) {
    rte_mempool_mem_iter(
        mp,
        [](rte_mempool*, void* a, rte_mempool_memhdr* h, unsigned) { static_cast<Populator*>(a)->range(h->addr, h->len); },
        arg);
}

// memif's regions are the PMD's own (it exposes no address): the memfds it names memif_region_N.
void populate_memif_regions(Populator& p) {
    FILE* f = std::fopen("/proc/self/maps", "r");
    if (f == nullptr) return;
    char line[512];
    while (std::fgets(line, sizeof line, f) != nullptr) {
        if (std::strstr(line, "/memfd:memif_region_") == nullptr) continue;
        unsigned long lo = 0, hi = 0;
        char perms[8] = {};
        if (std::sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || hi <= lo || perms[0] != 'r' || perms[1] != 'w')
            continue;
        p.range(reinterpret_cast<void*>(lo), hi - lo);
    }
    std::fclose(f);
}

}  // namespace

PopulateResult populate_dpdk_memory() {
    Populator p;
    const long ps = sysconf(_SC_PAGESIZE);
    if (ps > 0) p.page = static_cast<uintptr_t>(ps);
    const uint64_t t0 = now_ns();
    if (!hugepages_available()) rte_mempool_walk(populate_pool, &p);
    populate_memif_regions(p);
    p.res.ns = now_ns() - t0;
    return p.res;
}

uint32_t MempoolPktPool::elt_bytes(uint32_t room_bytes) { return kObjHdr + room_bytes; }

std::unique_ptr<MempoolPktPool> MempoolPktPool::create(const std::string& name, uint32_t n, uint32_t room_bytes,
                                                       std::string& err, uint32_t cache) {
    rte_mempool* mp = rte_mempool_create(name.c_str(), n, kObjHdr + room_bytes, cache, 0, nullptr, nullptr, nullptr,
                                         nullptr, SOCKET_ID_ANY, pool_flags());
    if (mp == nullptr) {
        err = "cannot create mempool " + name + " (" + std::to_string(n) + " x " + std::to_string(kObjHdr + room_bytes) +
              " bytes): " + rte_strerror(rte_errno) + "; raise the memory size (-m)";
        return nullptr;
    }
    return std::unique_ptr<MempoolPktPool>(new MempoolPktPool(mp, n, room_bytes, rte_eal_iova_mode() == RTE_IOVA_VA));
}

MempoolPktPool::~MempoolPktPool() { rte_mempool_free(mp_); }

PktBuf* MempoolPktPool::seg_alloc(uint32_t headroom) {
    void* obj = nullptr;
    if (headroom > room_ || rte_mempool_get(mp_, &obj) != 0) return nullptr;
    PktBuf* s = new (obj) PktBuf();
    s->buf = static_cast<uint8_t*>(obj) + kObjHdr;
    s->buf_iova = iova_is_va_ ? reinterpret_cast<uintptr_t>(s->buf) : rte_mempool_virt2iova(obj) + kObjHdr;
    s->buf_len = room_;
    s->data_off = headroom;
    s->pool = this;
    s->backing = obj;
    return s;
}

void MempoolPktPool::seg_release(PktBuf* seg) { rte_mempool_put(mp_, seg->backing); }

uint32_t MempoolPktPool::in_use() const { return rte_mempool_in_use_count(mp_); }

void RxMbufPool::seg_release(PktBuf* seg) {
    rte_mbuf* m = static_cast<rte_mbuf*>(seg->backing);
    m->next = nullptr;
    m->nb_segs = 1;
    rte_pktmbuf_free_seg(m);
}

// A cache line, not DPDK's 8 bytes: the data then starts on a cache line (the PktBuf of 120 B put
// it 8 bytes off 16, and DPDK's rte_memcpy, memif's receive copy into these mbufs, took its
// shuffling path for a source and destination of different alignment: palignr in the profile).
uint16_t rx_priv_size() { return static_cast<uint16_t>(RTE_ALIGN(sizeof(PktBuf), RTE_CACHE_LINE_SIZE)); }

PktBuf* rx_wrap(rte_mbuf* m, RxMbufPool& owner) {
    PktBuf* head = nullptr;
    PktBuf* tail = nullptr;
    for (rte_mbuf* s = m; s != nullptr; s = s->next) {
        PktBuf* w = new (rte_mbuf_to_priv(s)) PktBuf();
        w->buf = static_cast<uint8_t*>(s->buf_addr);
        w->buf_iova = s->buf_iova;
        w->buf_len = s->buf_len;
        w->data_off = s->data_off;
        w->data_len = s->data_len;
        w->pool = &owner;
        w->backing = s;
        if (tail == nullptr) head = w; else tail->next = w;
        tail = w;
    }
    pkt_recount(head);
    return head;
}

static void tx_done(void* /*addr*/, void* opaque) { pkt_seg_put(static_cast<PktBuf*>(opaque)); }

rte_mbuf* tx_lend(PktBuf* frame, rte_mempool* desc_pool) {
    // One descriptor per segment, all taken before any is used (a frame is either lent whole or
    // left untouched): one bulk get for up to kBulk segments, else one get each, given back on a
    // shortage. Not rte_mempool_avail_count first (as before): it sums the per-lcore caches of
    // every possible lcore (RTE_MAX_LCORE cache lines) and cost ~80 ns per frame here.
    constexpr uint32_t kBulk = 16;
    uint32_t n = 0, len = 0;
    for (const PktBuf* s = frame; s != nullptr; s = s->next) {  // the chain itself, not a cached count
        ++n;
        len += s->data_len;
    }
    rte_mbuf* bulk[kBulk];
    std::vector<rte_mbuf*> many;  // a frame of more than kBulk segments: rare, off the fast path
    rte_mbuf** d = bulk;
    if (n <= kBulk) {
        if (rte_pktmbuf_alloc_bulk(desc_pool, d, n) != 0) return nullptr;
    } else {
        many.resize(n);
        d = many.data();
        if (rte_pktmbuf_alloc_bulk(desc_pool, d, n) != 0) return nullptr;
    }
    uint32_t i = 0;
    for (PktBuf* s = frame; s != nullptr; s = s->next, ++i) {
        auto* shinfo = reinterpret_cast<rte_mbuf_ext_shared_info*>(s->dev_scratch);
        shinfo->free_cb = tx_done;
        shinfo->fcb_opaque = s;
        rte_mbuf_ext_refcnt_set(shinfo, 1);
        rte_pktmbuf_attach_extbuf(d[i], s->buf, s->buf_iova, static_cast<uint16_t>(s->buf_len), shinfo);
        d[i]->data_off = static_cast<uint16_t>(s->data_off);
        d[i]->data_len = static_cast<uint16_t>(s->data_len);
        if (i > 0) d[i - 1]->next = d[i];
    }
    rte_mbuf* head = d[0];
    head->nb_segs = static_cast<uint16_t>(n);
    head->pkt_len = len;
    return head;
}

void tx_unlend(PktBuf* frame, rte_mbuf* m) {
    pkt_ref(frame);       // the descriptors' free callbacks give these back ...
    rte_pktmbuf_free(m);  // ... and the frame keeps the references it had before tx_lend
}

std::string mempool_state(const rte_mempool* mp) {
    const uint32_t free_total = rte_mempool_avail_count(mp);
    uint32_t cached = 0;
    std::string caches;
    if (mp->cache_size != 0)
        for (unsigned l = 0; l < RTE_MAX_LCORE; ++l)
            if (const uint32_t len = mp->local_cache[l].len; len != 0) {
                cached += len;
                caches += (caches.empty() ? " l" : ", l") + std::to_string(l) + " " + std::to_string(len);
            }
    return std::string(mp->name) + ": " + std::to_string(free_total) + " of " + std::to_string(mp->size) +
           " free (" + std::to_string(free_total - std::min(free_total, cached)) + " in its ring" +
           (caches.empty() ? std::string() : ", in lcore caches:" + caches) + ")";
}

}  // namespace iccs
