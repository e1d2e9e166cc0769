// checksum.cpp: see checksum.hpp.
#include "checksum.hpp"

namespace iccs {

namespace {

// The folded sum of the k bytes of s from its data offset off: from what s keeps (PktBuf::sum)
// when those bytes hold the kept ones, the bytes before and after them read.
uint16_t seg_sum(const PktBuf* s, uint32_t off, uint32_t k) {
    const uint8_t* p = s->data() + off;
    const uint32_t from = s->data_off + off;  // in s's buffer
    if (s->sum_len == 0 || s->sum_at < from || s->sum_at + s->sum_len > from + k) return csum_fold(csum_add(0, p, k));
    const uint32_t before = s->sum_at - from, kept_end = before + s->sum_len;
    uint64_t t = csum_add(0, p, before) + csum_lane(s->sum, before & 1u);
    t += csum_lane(csum_fold(csum_add(0, p + kept_end, k - kept_end)), kept_end & 1u);
    return csum_fold(t);
}

}  // namespace

uint64_t csum_chain_slow(const PktBuf* head, uint32_t off, uint32_t len, uint64_t sum) {
    bool odd = false;  // has an odd number of bytes been summed so far?
    for (const PktBuf* s = head; s != nullptr && len > 0; s = s->next) {
        if (off >= s->data_len) {
            off -= s->data_len;
            continue;
        }
        const uint32_t k = s->data_len - off < len ? s->data_len - off : len;
        sum += csum_lane(seg_sum(s, off, k), odd);  // an odd start: the piece's bytes in the other lane
        if (k & 1u) odd = !odd;
        len -= k;
        off = 0;
    }
    return sum;
}

}  // namespace iccs
