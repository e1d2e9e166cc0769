// checksum.cpp: see checksum.hpp.
#include "checksum.hpp"

namespace iccs {

uint64_t csum_chain_slow(const PktBuf* head, uint32_t off, uint32_t len, uint64_t sum) {
    bool odd = false;  // has an odd number of bytes been summed so far?
    for (const PktBuf* s = head; s != nullptr && len > 0; s = s->next) {
        if (off >= s->data_len) {
            off -= s->data_len;
            continue;
        }
        const uint32_t k = s->data_len - off < len ? s->data_len - off : len;
        uint16_t part = csum_fold(csum_add(0, s->data() + off, k));
        if (odd) part = __builtin_bswap16(part);  // this piece starts in the low byte lane
        sum += part;
        if (k & 1u) odd = !odd;
        len -= k;
        off = 0;
    }
    return sum;
}

}  // namespace iccs
