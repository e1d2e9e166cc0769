// bundle.cpp: building and unpacking BUNDLE messages (bundle.hpp).
#include "bundle.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "be.hpp"
#include "conv_hdr.hpp"

namespace iccs {

bool bundle_add(OpenBundle& o, PktBuf* m, uint32_t limit, uint32_t below) {
    if (o.b == nullptr) {
        o.b = m;
        o.n = 1;
        return true;
    }
    if (o.b->pkt_len + kBundleRecLen + m->pkt_len > limit) return false;
    if (o.n == 1) {
        // The first message becomes the bundle, in its own buffer: the outer header and its
        // record's length go in front (its headroom), the others are copied behind it. Only a
        // buffer that is ours alone, in one segment, with room both ways.
        PktBuf* f = o.b;
        if (f->nb_segs != 1 || pkt_shared(f) || f->data_off < kConvHdrLen + kBundleRecLen + below ||
            f->tailroom() < kBundleRecLen + m->pkt_len)
            return false;
        const uint16_t len = static_cast<uint16_t>(f->pkt_len);
        const ConvHdr inner = load_hdr<ConvHdr>(f->data());
        uint8_t* at = pkt_prepend(f, kConvHdrLen + kBundleRecLen);
        ConvHdr h{};
        h.src_cluster = inner.src_cluster;
        h.dst_cluster = inner.dst_cluster;
        h.type = static_cast<uint8_t>(ConvType::kBundle);
        h.piece_cnt.set(1);
        h.msg_len.set(1);
        std::memcpy(at, &h, sizeof h);
        const be16 rl = be16::of(len);
        std::memcpy(at + kConvHdrLen, &rl, kBundleRecLen);
    }
    uint8_t* w = pkt_append(o.b, kBundleRecLen + m->pkt_len);
    if (w == nullptr) return false;  // no room left in the buffer: m goes on its own
    const be16 rl = be16::of(static_cast<uint16_t>(m->pkt_len));
    std::memcpy(w, &rl, kBundleRecLen);
    pkt_read(m, 0, m->pkt_len, w + kBundleRecLen);
    pkt_free(m);
    ++o.n;
    const be32 cnt = be32::of(o.n);
    std::memcpy(o.b->data() + offsetof(ConvHdr, msg_len), &cnt, 4);
    return true;
}

bool is_bundle(const PktBuf* msg) {
    return msg->data_len >= kConvHdrLen && msg->data()[offsetof(ConvHdr, type)] == static_cast<uint8_t>(ConvType::kBundle);
}

uint32_t bundle_resume(const PktBuf* b, bool& first) {
    const uint32_t off = load_be32(b->data() + offsetof(ConvHdr, conn_seq));
    first = off == 0;
    return first ? kConvHdrLen : off;
}

void bundle_keep(PktBuf* b, uint32_t off) {
    const be32 at = be32::of(off);
    std::memcpy(b->data() + offsetof(ConvHdr, conn_seq), &at, 4);
}

BundleStep bundle_take(PktPool& pool, const PktBuf* b, uint32_t off, PktBuf*& out, uint32_t& next) {
    if (off >= b->pkt_len) return BundleStep::kDone;
    uint8_t lb[kBundleRecLen];
    const uint8_t* l = pkt_contig(b, off, kBundleRecLen, lb);
    const uint32_t len = l == nullptr ? 0 : load_be16(l);
    uint8_t tb[1];
    const uint8_t* t = len >= kConvHdrLen ? pkt_contig(b, off + kBundleRecLen + offsetof(ConvHdr, type), 1, tb) : nullptr;
    if (t == nullptr || off + kBundleRecLen + len > b->pkt_len || *t == 0 || *t > kConvTypeMax ||
        *t == static_cast<uint8_t>(ConvType::kBundle))
        return BundleStep::kBad;
    // A copy, not a view (bundle.hpp): the message goes to another thread.
    PktBuf* one = pool.seg_alloc(kPktHeadroom);
    if (one == nullptr) return BundleStep::kNoBuf;
    if (one->tailroom() >= len) {  // the common case: small records, one segment
        pkt_read(b, off + kBundleRecLen, len, pkt_append(one, len));
    } else {
        uint8_t chunk[256];
        for (uint32_t done = 0; done < len;) {
            const uint32_t k = std::min<uint32_t>(len - done, sizeof chunk);
            pkt_read(b, off + kBundleRecLen + done, k, chunk);
            if (!pkt_write(one, pool, chunk, k)) {
                pkt_free(one);
                return BundleStep::kNoBuf;
            }
            done += k;
        }
    }
    out = one;
    next = off + kBundleRecLen + len;
    return BundleStep::kMsg;
}

}  // namespace iccs
