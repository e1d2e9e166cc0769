// dpdk_pool.cpp: see dpdk_pool.hpp.
#include "dpdk_pool.hpp"

#include <rte_errno.h>

#include <new>

namespace iccs {

static_assert(sizeof(rte_mbuf_ext_shared_info) <= sizeof(PktBuf::dev_scratch));

namespace {
constexpr uint32_t kObjHdr = (sizeof(PktBuf) + 63) & ~63u;  // PktBuf, then data on a cache line
}

std::unique_ptr<MempoolPktPool> MempoolPktPool::create(const std::string& name, uint32_t n, uint32_t room_bytes,
                                                       std::string& err) {
    rte_mempool* mp = rte_mempool_create(name.c_str(), n, kObjHdr + room_bytes, 256, 0, nullptr, nullptr, nullptr,
                                         nullptr, SOCKET_ID_ANY, 0);
    if (mp == nullptr) {
        err = "cannot create mempool " + name + " (" + std::to_string(n) + " x " + std::to_string(kObjHdr + room_bytes) +
              " bytes): " + rte_strerror(rte_errno) + "; raise the memory size (-m)";
        return nullptr;
    }
    return std::unique_ptr<MempoolPktPool>(new MempoolPktPool(mp, n, room_bytes));
}

MempoolPktPool::~MempoolPktPool() { rte_mempool_free(mp_); }

PktBuf* MempoolPktPool::seg_alloc(uint32_t headroom) {
    void* obj = nullptr;
    if (headroom > room_ || rte_mempool_get(mp_, &obj) != 0) return nullptr;
    PktBuf* s = new (obj) PktBuf();
    s->buf = static_cast<uint8_t*>(obj) + kObjHdr;
    s->buf_iova = rte_mempool_virt2iova(obj) + kObjHdr;
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

uint16_t rx_priv_size() { return static_cast<uint16_t>(RTE_ALIGN(sizeof(PktBuf), RTE_MBUF_PRIV_ALIGN)); }

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
    // The descriptor pool belongs to this proxy's thread alone: checking first means a frame is
    // either lent whole or left untouched.
    if (rte_mempool_avail_count(desc_pool) < frame->nb_segs) return nullptr;
    rte_mbuf* head = nullptr;
    rte_mbuf* tail = nullptr;
    for (PktBuf* s = frame; s != nullptr;) {
        PktBuf* next = s->next;
        rte_mbuf* d = rte_pktmbuf_alloc(desc_pool);
        auto* shinfo = reinterpret_cast<rte_mbuf_ext_shared_info*>(s->dev_scratch);
        shinfo->free_cb = tx_done;
        shinfo->fcb_opaque = s;
        rte_mbuf_ext_refcnt_set(shinfo, 1);
        rte_pktmbuf_attach_extbuf(d, s->buf, s->buf_iova, static_cast<uint16_t>(s->buf_len), shinfo);
        d->data_off = static_cast<uint16_t>(s->data_off);
        d->data_len = static_cast<uint16_t>(s->data_len);
        if (tail == nullptr) {
            head = d;
            head->pkt_len = 0;
            head->nb_segs = 0;
        } else {
            tail->next = d;
        }
        head->pkt_len += s->data_len;
        ++head->nb_segs;
        tail = d;
        s = next;
    }
    return head;
}

void tx_unlend(PktBuf* frame, rte_mbuf* m) {
    pkt_ref(frame);       // the descriptors' free callbacks give these back ...
    rte_pktmbuf_free(m);  // ... and the frame keeps the references it had before tx_lend
}

}  // namespace iccs
