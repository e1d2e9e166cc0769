// pktbuf.cpp: chain operations on PktBuf; see pktbuf.hpp.
#include "pktbuf.hpp"

#include "checksum.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace iccs {

HeapPktPool::HeapPktPool(uint32_t nsegs, uint32_t seg_bytes)
    : nsegs_(nsegs),
      seg_bytes_(seg_bytes),
      storage_(new uint8_t[static_cast<size_t>(nsegs) * seg_bytes]),
      segs_(new PktBuf[nsegs]) {
    free_.reset(new PktBuf*[nsegs]);
    for (uint32_t i = nsegs; i-- > 0;) {
        PktBuf& s = segs_[i];
        s.buf = storage_.get() + static_cast<size_t>(i) * seg_bytes;
        s.buf_iova = reinterpret_cast<uintptr_t>(s.buf);  // heap memory: IOVA as VA
        s.buf_len = seg_bytes;
        s.pool = this;
        free_[nfree_++] = &s;
    }
}

PktBuf* HeapPktPool::seg_alloc(uint32_t headroom) {
    if (nfree_ == 0 || headroom > seg_bytes_) {
        ++alloc_failures_;
        return nullptr;
    }
    PktBuf* s = free_[--nfree_];
    const size_t idx = static_cast<size_t>(s - segs_.get());
    s->buf = storage_.get() + idx * seg_bytes_;
    s->buf_iova = reinterpret_cast<uintptr_t>(s->buf);
    s->buf_len = seg_bytes_;
    s->next = nullptr;
    s->direct = nullptr;
    s->data_off = headroom;
    s->data_len = 0;
    s->pkt_len = 0;
    s->nb_segs = 1;
    s->refcnt = 1;
    s->meta = 0;
    s->ts_ns = 0;
    s->sum_len = 0;
    return s;
}

void HeapPktPool::seg_release(PktBuf* seg) {
    if (nfree_ == nsegs_) std::abort();  // more releases than segments: one was released twice
    free_[nfree_++] = seg;
}

void pkt_seg_put(PktBuf* s) {
    if (--s->refcnt != 0) return;
    if (s->direct != nullptr) {
        PktBuf* d = s->direct;
        s->direct = nullptr;
        pkt_seg_put(d);
    }
    s->pool->seg_release(s);
}

bool pkt_shared(const PktBuf* head) {
    for (const PktBuf* s = head; s != nullptr; s = s->next)
        if (s->refcnt > 1 || s->direct != nullptr) return true;
    return false;
}

bool pkt_trim_to(PktBuf* head, uint32_t new_len) {
    if (new_len > head->pkt_len) return false;
    uint32_t left = new_len;
    PktBuf* s = head;
    uint16_t segs = 0;
    for (;;) {
        ++segs;
        if (s->data_len >= left || s->next == nullptr) {
            s->data_len = std::min(s->data_len, left);
            pkt_free(s->next);
            s->next = nullptr;
            break;
        }
        left -= s->data_len;
        s = s->next;
    }
    head->pkt_len = new_len;
    head->nb_segs = segs;
    return true;
}

static PktBuf* last_seg(PktBuf* head) {
    PktBuf* s = head;
    while (s->next != nullptr) s = s->next;
    return s;
}

uint8_t* pkt_append_slow(PktBuf* head, uint32_t len) {
    PktBuf* t = last_seg(head);
    if (t->direct != nullptr || t->tailroom() < len) return nullptr;
    uint8_t* p = t->data() + t->data_len;
    t->data_len += len;
    head->pkt_len += len;
    return p;
}

bool pkt_write(PktBuf* head, PktPool& pool, const void* src, uint32_t len, PktSum sums) {
    const uint8_t* in = static_cast<const uint8_t*>(src);
    PktBuf* t = last_seg(head);
    while (len > 0) {
        uint32_t room = t->direct != nullptr ? 0 : t->tailroom();
        if (room == 0) {
            PktBuf* n = pool.seg_alloc(0);
            if (n == nullptr) return false;
            t->next = n;
            t = n;
            ++head->nb_segs;
            room = t->tailroom();
        }
        const uint32_t k = std::min(room, len);
        uint8_t* to = t->data() + t->data_len;
        // Small writes are not kept: the proxy's one-segment checksum reads them as fast. Kept
        // ones are summed as they are copied (one read of the bytes, csum_copy_native).
        if (sums == PktSum::kKeep && k >= kPktSumMinBytes)
            csum_keep_copy(t, t->data_off + t->data_len, to, in, k);
        else
            std::memcpy(to, in, k);
        t->data_len += k;
        head->pkt_len += k;
        in += k;
        len -= k;
    }
    return true;
}

void pkt_chain(PktBuf* head, PktBuf* tail) {
    if (tail == nullptr) return;
    last_seg(head)->next = tail;
    head->pkt_len += tail->pkt_len;
    head->nb_segs = static_cast<uint16_t>(head->nb_segs + tail->nb_segs);
}

uint32_t pkt_read(const PktBuf* head, uint32_t off, uint32_t len, void* dst) {
    uint8_t* out = static_cast<uint8_t*>(dst);
    uint32_t done = 0;
    for (const PktBuf* s = head; s != nullptr && done < len; s = s->next) {
        if (off >= s->data_len) {
            off -= s->data_len;
            continue;
        }
        const uint32_t k = std::min(s->data_len - off, len - done);
        std::memcpy(out + done, s->data() + off, k);
        done += k;
        off = 0;
    }
    return done;
}

const uint8_t* pkt_contig_slow(const PktBuf* head, uint32_t off, uint32_t len, uint8_t* scratch) {
    if (static_cast<uint64_t>(off) + len > head->pkt_len) return nullptr;
    uint32_t rel = off;
    for (const PktBuf* s = head; s != nullptr; s = s->next) {
        if (rel < s->data_len) {
            if (s->data_len - rel >= len) return s->data() + rel;
            break;
        }
        rel -= s->data_len;
    }
    pkt_read(head, off, len, scratch);  // spans segments: gather
    return scratch;
}

void pkt_recount(PktBuf* head) {
    uint32_t len = 0;
    uint16_t n = 0;
    for (PktBuf* s = head; s != nullptr; s = s->next) {
        len += s->data_len;
        ++n;
    }
    head->pkt_len = len;
    head->nb_segs = n;
}

PktBuf* pkt_slice(PktPool& pool, const PktBuf* src, uint32_t off, uint32_t len, uint32_t headroom) {
    if (static_cast<uint64_t>(off) + len > src->pkt_len) return nullptr;
    PktBuf* head = nullptr;
    PktBuf* tail = nullptr;
    if (headroom > 0) {
        head = pool.seg_alloc(headroom);
        if (head == nullptr) return nullptr;
        tail = head;
    }
    const PktBuf* s = src;
    while (s != nullptr && off >= s->data_len) {
        off -= s->data_len;
        s = s->next;
    }
    while (len > 0 && s != nullptr) {
        const uint32_t k = std::min(s->data_len - off, len);
        if (k == 0) {  // an empty segment in the middle of src: nothing to view
            s = s->next;
            off = 0;
            continue;
        }
        PktBuf* v = pool.seg_alloc(0);
        if (v == nullptr) {
            pkt_free(head);
            return nullptr;
        }
        // View the storage of the segment that owns it (an indirect of an indirect views the root).
        PktBuf* owner = s->direct != nullptr ? s->direct : const_cast<PktBuf*>(s);
        ++owner->refcnt;
        v->direct = owner;
        v->buf = s->buf;
        v->buf_iova = s->buf_iova;
        v->buf_len = s->buf_len;
        v->data_off = s->data_off + off;
        v->data_len = k;
        if (tail == nullptr) {
            head = v;
        } else {
            tail->next = v;
        }
        tail = v;
        len -= k;
        off = 0;
        s = s->next;
    }
    if (head == nullptr) {  // len == 0 and no headroom: an empty packet still needs a segment
        head = pool.seg_alloc(0);
        if (head == nullptr) return nullptr;
    }
    pkt_recount(head);
    return head;
}

PktBuf* pkt_copy(PktPool& pool, const PktBuf* src, uint32_t headroom) {
    PktBuf* head = pool.seg_alloc(headroom);
    if (head == nullptr) return nullptr;
    if (src->next == nullptr && head->tailroom() >= src->data_len) {  // the common case: one frame, one copy
        std::memcpy(head->data(), src->data(), src->data_len);
        head->data_len = head->pkt_len = src->data_len;
        return head;
    }
    for (const PktBuf* s = src; s != nullptr; s = s->next) {
        if (!pkt_write(head, pool, s->data(), s->data_len)) {
            pkt_free(head);
            return nullptr;
        }
    }
    return head;
}

}  // namespace iccs
