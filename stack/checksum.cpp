// checksum.cpp: see checksum.hpp.
#include "checksum.hpp"

#include <algorithm>
#include <cstring>

namespace iccs {

namespace {

// The native 16-bit words of p summed in 32-bit lanes of kBytes-wide vectors (GCC's vector
// extension: the instructions are those of the target of the function it is inlined into, below):
// each step adds the low and the high halves of its lanes (two words each) to two accumulators,
// steps taking turns between two such pairs. A lane grows by at most 0xffff a step, so over a
// block of 2^14 steps (512 KiB at 32 bytes a step) the four accumulators' lanes stay below 2^30
// each and their sum below 2^32; blocks add up in 64 bits. The 0..kBytes-1 bytes after the last
// step, lane-aligned (whole steps keep the byte lanes), are csum_native_words'.
typedef uint32_t Lanes32 __attribute__((vector_size(32)));
typedef uint32_t Lanes64 __attribute__((vector_size(64)));

template <class Lanes, bool kCopy>
[[gnu::always_inline]] inline uint64_t csum_lanes_impl(uint8_t* dst, const uint8_t* p, size_t len) {
    constexpr size_t kBytes = sizeof(Lanes);
    constexpr size_t kBlockSteps = size_t{1} << 14;
    uint64_t total = 0;
    while (len >= kBytes) {
        const size_t steps = std::min(len / kBytes, kBlockSteps);
        Lanes lo_a{}, hi_a{}, lo_b{}, hi_b{};
        size_t i = 0;
        for (; i + 2 <= steps; i += 2) {
            Lanes v, w;
            std::memcpy(&v, p, kBytes);
            std::memcpy(&w, p + kBytes, kBytes);
            if constexpr (kCopy) {  // each vector stored where it is summed: one read of the bytes
                std::memcpy(dst, &v, kBytes);
                std::memcpy(dst + kBytes, &w, kBytes);
            }
            lo_a += v & 0xffffu;
            hi_a += v >> 16;
            lo_b += w & 0xffffu;
            hi_b += w >> 16;
            p += 2 * kBytes;
            if constexpr (kCopy) dst += 2 * kBytes;
        }
        if (i < steps) {
            Lanes v;
            std::memcpy(&v, p, kBytes);
            if constexpr (kCopy) std::memcpy(dst, &v, kBytes);
            lo_a += v & 0xffffu;
            hi_a += v >> 16;
            p += kBytes;
            if constexpr (kCopy) dst += kBytes;
        }
        len -= steps * kBytes;
        const Lanes sum = lo_a + hi_a + lo_b + hi_b;  // no lane carries out (above)
        for (size_t k = 0; k < kBytes / 4; ++k) total += sum[k];
    }
    if constexpr (kCopy) std::memcpy(dst, p, len);
    total += csum_native_words(p, len);
    total = (total & 0xffffffffu) + (total >> 32);
    return (total & 0xffffffffu) + (total >> 32);
}

template <class Lanes>
[[gnu::always_inline]] inline uint64_t csum_lanes(const uint8_t* p, size_t len) {
    return csum_lanes_impl<Lanes, false>(nullptr, p, len);
}

// csum_lanes while copying: every vector loaded from src is stored to dst and summed, the same
// lanes in the same blocks, so the result is csum_lanes(src, len)'s to the bit.
template <class Lanes>
[[gnu::always_inline]] inline uint64_t csum_copy_lanes(uint8_t* dst, const uint8_t* p, size_t len) {
    return csum_lanes_impl<Lanes, true>(dst, p, len);
}

// Measured: stack/README.md.
[[gnu::target("avx2")]] uint64_t csum_avx2(const uint8_t* p, size_t len) { return csum_lanes<Lanes32>(p, len); }
[[gnu::target("avx512bw")]] uint64_t csum_avx512(const uint8_t* p, size_t len) { return csum_lanes<Lanes64>(p, len); }
[[gnu::target("avx2")]] uint64_t csum_copy_avx2(uint8_t* dst, const uint8_t* p, size_t len) {
    return csum_copy_lanes<Lanes32>(dst, p, len);
}
[[gnu::target("avx512bw")]] uint64_t csum_copy_avx512(uint8_t* dst, const uint8_t* p, size_t len) {
    return csum_copy_lanes<Lanes64>(dst, p, len);
}

CsumPath best_path() {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512bw")) return CsumPath::kAvx512;
    if (__builtin_cpu_supports("avx2")) return CsumPath::kAvx2;
    return CsumPath::kWords;
}

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

CsumPath csum_wide_path() {
    static const CsumPath path = best_path();
    return path;
}

bool csum_path_supported(CsumPath path) {
    csum_wide_path();  // the CPU's features read (__builtin_cpu_init)
    switch (path) {
        case CsumPath::kAvx512: return __builtin_cpu_supports("avx512bw");
        case CsumPath::kAvx2: return __builtin_cpu_supports("avx2");
        case CsumPath::kWords: break;
    }
    return true;
}

uint64_t csum_native_by(CsumPath path, const uint8_t* p, size_t len) {
    switch (path) {
        case CsumPath::kAvx512: return csum_avx512(p, len);
        case CsumPath::kAvx2: return csum_avx2(p, len);
        case CsumPath::kWords: break;
    }
    return csum_native_words(p, len);
}

uint64_t csum_native_wide(const uint8_t* p, size_t len) { return csum_native_by(csum_wide_path(), p, len); }

uint64_t csum_copy_by(CsumPath path, uint8_t* dst, const uint8_t* src, size_t len) {
    switch (path) {
        case CsumPath::kAvx512: return csum_copy_avx512(dst, src, len);
        case CsumPath::kAvx2: return csum_copy_avx2(dst, src, len);
        case CsumPath::kWords: break;
    }
    std::memcpy(dst, src, len);
    return csum_native_words(dst, len);
}

uint64_t csum_copy_wide(uint8_t* dst, const uint8_t* src, size_t len) {
    return csum_copy_by(csum_wide_path(), dst, src, len);
}

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
