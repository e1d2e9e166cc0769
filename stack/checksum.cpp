// checksum.cpp: see checksum.hpp.
#include "checksum.hpp"

#include <cstring>

namespace iccs {

// Sums native-order 32-bit words into 64 bits; the result is byte-swapped at the end on
// little-endian hosts (the one's-complement sum commutes with byte order, RFC 1071 §2(B)).
static uint64_t sum_native(const uint8_t* p, size_t len) {
    uint64_t s = 0;
    while (len >= 32) {
        uint32_t w[8];
        std::memcpy(w, p, 32);
        s += uint64_t{w[0]} + w[1] + w[2] + w[3] + w[4] + w[5] + w[6] + w[7];
        p += 32;
        len -= 32;
    }
    while (len >= 4) {
        uint32_t w;
        std::memcpy(&w, p, 4);
        s += w;
        p += 4;
        len -= 4;
    }
    if (len >= 2) {
        uint16_t w;
        std::memcpy(&w, p, 2);
        s += w;
        p += 2;
        len -= 2;
    }
    if (len == 1) s += *p;  // native little-endian: a lone byte is the low byte of its word
    return s;
}

uint16_t csum_fold(uint64_t sum) {
    sum = (sum & 0xffffffffu) + (sum >> 32);
    sum = (sum & 0xffffffffu) + (sum >> 32);
    sum = (sum & 0xffffu) + (sum >> 16);
    sum = (sum & 0xffffu) + (sum >> 16);
    return static_cast<uint16_t>(sum);
}

uint64_t csum_add(uint64_t sum, const void* p, size_t len) {
    const uint16_t native = csum_fold(sum_native(static_cast<const uint8_t*>(p), len));
    return sum + __builtin_bswap16(native);  // to big-endian word order
}

uint64_t csum_chain(const PktBuf* head, uint32_t off, uint32_t len, uint64_t sum) {
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
