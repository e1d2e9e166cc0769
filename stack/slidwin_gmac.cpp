// slidwin_gmac.cpp: see slidwin_gmac.hpp.
#include "slidwin_gmac.hpp"

#include <algorithm>
#include <cstring>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace iccs {

#if defined(__x86_64__)

bool slidwin_gmac_available() {
    static const bool has =
        __builtin_cpu_supports("aes") && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("ssse3");
    return has;
}

namespace {

// Byte order reversed: GCM's blocks in the form the multiplication below works on.
[[gnu::target("ssse3")]] inline __m128i block_reflect(__m128i x) {
    return _mm_shuffle_epi8(x, _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}

inline __m128i block_load(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline void block_store(uint8_t* p, __m128i x) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), x); }

// A 256-bit carry-less product, its middle terms kept apart until the reduction: products
// summed here (XOR) are reduced once (the reduction is linear).
struct ClmulProduct {
    __m128i lo = _mm_setzero_si128(), mid = _mm_setzero_si128(), hi = _mm_setzero_si128();
};

[[gnu::target("pclmul")]] inline void clmul_add(ClmulProduct& w, __m128i a, __m128i b) {
    w.lo = _mm_xor_si128(w.lo, _mm_clmulepi64_si128(a, b, 0x00));
    w.hi = _mm_xor_si128(w.hi, _mm_clmulepi64_si128(a, b, 0x11));
    w.mid = _mm_xor_si128(w.mid, _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x01), _mm_clmulepi64_si128(a, b, 0x10)));
}

// The product modulo x^128 + x^7 + x^2 + x + 1, bit-reflected: the 256 bits shifted left by one,
// then the two-phase reduction (the white paper's Algorithm 5, its gfmul after the multiplies).
inline __m128i ghash_reduce(const ClmulProduct& w) {
    __m128i lo = _mm_xor_si128(w.lo, _mm_slli_si128(w.mid, 8));
    __m128i hi = _mm_xor_si128(w.hi, _mm_srli_si128(w.mid, 8));
    __m128i c_lo = _mm_srli_epi32(lo, 31), c_hi = _mm_srli_epi32(hi, 31);
    lo = _mm_slli_epi32(lo, 1);
    hi = _mm_slli_epi32(hi, 1);
    const __m128i carry_out = _mm_srli_si128(c_lo, 12);
    hi = _mm_or_si128(_mm_or_si128(hi, _mm_slli_si128(c_hi, 4)), carry_out);
    lo = _mm_or_si128(lo, _mm_slli_si128(c_lo, 4));
    __m128i t = _mm_xor_si128(_mm_xor_si128(_mm_slli_epi32(lo, 31), _mm_slli_epi32(lo, 30)), _mm_slli_epi32(lo, 25));
    const __m128i t_hi = _mm_srli_si128(t, 4);
    lo = _mm_xor_si128(lo, _mm_slli_si128(t, 12));
    __m128i u = _mm_xor_si128(_mm_xor_si128(_mm_srli_epi32(lo, 1), _mm_srli_epi32(lo, 2)), _mm_srli_epi32(lo, 7));
    u = _mm_xor_si128(u, t_hi);
    return _mm_xor_si128(hi, _mm_xor_si128(lo, u));
}

[[gnu::target("pclmul")]] inline __m128i ghash_mul(__m128i a, __m128i b) {
    ClmulProduct w;
    clmul_add(w, a, b);
    return ghash_reduce(w);
}

// k blocks (1..kSlidwinGmacPowers) at once: (y ^ X1) H^k ^ X2 H^(k-1) ^ ... ^ Xk H, the
// multiplications independent, one reduction. h_pow[i] is H^(i+1).
[[gnu::target("pclmul,ssse3")]] inline __m128i ghash_fold(__m128i y, const uint8_t* p, uint32_t k,
                                                          const uint8_t (*h_pow)[16]) {
    ClmulProduct w;
    clmul_add(w, _mm_xor_si128(y, block_reflect(block_load(p))), block_load(h_pow[k - 1]));
    for (uint32_t i = 1; i < k; ++i) clmul_add(w, block_reflect(block_load(p + 16 * i)), block_load(h_pow[k - 1 - i]));
    return ghash_reduce(w);
}

[[gnu::target("aes")]] inline __m128i aes128_block(__m128i x, const uint8_t* round_keys) {
    x = _mm_xor_si128(x, block_load(round_keys));
    for (int r = 1; r < 10; ++r) x = _mm_aesenc_si128(x, block_load(round_keys + 16 * r));
    return _mm_aesenclast_si128(x, block_load(round_keys + 160));
}

// One step of the key expansion (FIPS-197 §5.2): the next round key from the last and
// AESKEYGENASSIST's word (RotWord, SubWord and the round constant in one instruction).
template <int kRcon>
[[gnu::target("aes")]] __m128i aes128_expand_step(__m128i key) {
    const __m128i assist = _mm_shuffle_epi32(_mm_aeskeygenassist_si128(key, kRcon), 0xff);
    key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
    key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
    key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
    return _mm_xor_si128(key, assist);
}

}  // namespace

[[gnu::target("aes,pclmul,ssse3")]] void SlidwinGmac::set_key(const uint8_t key[16]) {
    __m128i rk[11];
    rk[0] = block_load(key);
    rk[1] = aes128_expand_step<0x01>(rk[0]);
    rk[2] = aes128_expand_step<0x02>(rk[1]);
    rk[3] = aes128_expand_step<0x04>(rk[2]);
    rk[4] = aes128_expand_step<0x08>(rk[3]);
    rk[5] = aes128_expand_step<0x10>(rk[4]);
    rk[6] = aes128_expand_step<0x20>(rk[5]);
    rk[7] = aes128_expand_step<0x40>(rk[6]);
    rk[8] = aes128_expand_step<0x80>(rk[7]);
    rk[9] = aes128_expand_step<0x1b>(rk[8]);
    rk[10] = aes128_expand_step<0x36>(rk[9]);
    for (int r = 0; r < 11; ++r) block_store(round_keys_ + 16 * r, rk[r]);
    const __m128i h = block_reflect(aes128_block(_mm_setzero_si128(), round_keys_));  // H = E(K, 0^128)
    __m128i p = h;
    for (uint32_t i = 0; i < kSlidwinGmacPowers; ++i) {
        block_store(h_pow_[i], p);
        p = ghash_mul(p, h);
    }
    std::memset(rk, 0, sizeof rk);
}

[[gnu::target("aes")]] void SlidwinGmac::begin(uint64_t counter) {
    // J0 = 0^32 || counter (big-endian) || 0^31 1, built in a register (not stored byte by byte
    // and loaded whole: a store-forwarding stall).
    const uint64_t be = __builtin_bswap64(counter);
    const __m128i j0 = _mm_set_epi64x(static_cast<int64_t>((uint64_t{1} << 56) | (be >> 32)), static_cast<int64_t>(be << 32));
    block_store(ek0_, aes128_block(j0, round_keys_));
    block_store(acc_, _mm_setzero_si128());
    block_store(part_, _mm_setzero_si128());  // zero past part_n_, always (tag() reads it whole)
    part_n_ = 0;
    len_ = 0;
}

[[gnu::target("pclmul,ssse3")]] void SlidwinGmac::add(const uint8_t* p, uint32_t n) {
    len_ += n;
    if (part_n_ + n < 16) {  // still short of a block
        std::memcpy(part_ + part_n_, p, n);
        part_n_ += n;
        return;
    }
    __m128i y = block_load(acc_);
    if (part_n_ > 0) {
        const uint32_t take = 16 - part_n_;
        std::memcpy(part_ + part_n_, p, take);
        y = ghash_fold(y, part_, 1, h_pow_);
        p += take;
        n -= take;
        part_n_ = 0;
    }
    for (; n >= 16; ) {  // up to kSlidwinGmacPowers blocks a reduction
        const uint32_t k = std::min<uint32_t>(n / 16, kSlidwinGmacPowers);
        y = ghash_fold(y, p, k, h_pow_);
        p += 16 * k;
        n -= 16 * k;
    }
    block_store(acc_, y);
    block_store(part_, _mm_setzero_si128());
    std::memcpy(part_, p, n);
    part_n_ = n;
}

[[gnu::target("pclmul,ssse3")]] void SlidwinGmac::tag(uint8_t out[16]) {
    // The last partial block (part_ is zero past part_n_) and the lengths block, bit-reflected:
    // the authenticated data's bits high, the text's (none) low; one reduction for both.
    const __m128i lengths = _mm_set_epi64x(static_cast<int64_t>(len_ * 8), 0);
    __m128i y = block_load(acc_);
    ClmulProduct w;
    if (part_n_ > 0) {
        clmul_add(w, _mm_xor_si128(y, block_reflect(block_load(part_))), block_load(h_pow_[1]));
        clmul_add(w, lengths, block_load(h_pow_[0]));
    } else {
        clmul_add(w, _mm_xor_si128(y, lengths), block_load(h_pow_[0]));
    }
    y = ghash_reduce(w);
    block_store(part_, _mm_setzero_si128());
    part_n_ = 0;
    block_store(out, _mm_xor_si128(block_reflect(y), block_load(ek0_)));
}

bool SlidwinGmac::check(const uint8_t expected[16]) {
    uint8_t t[16];
    tag(t);
    uint8_t diff = 0;  // every byte compared, whatever differs first
    for (int i = 0; i < 16; ++i) diff |= static_cast<uint8_t>(t[i] ^ expected[i]);
    explicit_bzero(t, sizeof t);
    return diff == 0;
}

#else

bool slidwin_gmac_available() { return false; }
// Never called where slidwin_gmac_available() is false (SlidwinCipher takes libcrypto's GCM).
void SlidwinGmac::set_key(const uint8_t*) {}
void SlidwinGmac::begin(uint64_t) {}
void SlidwinGmac::add(const uint8_t*, uint32_t) {}
void SlidwinGmac::tag(uint8_t out[16]) { std::memset(out, 0, 16); }
bool SlidwinGmac::check(const uint8_t*) { return false; }

#endif

void SlidwinGmac::wipe() {
    explicit_bzero(round_keys_, sizeof round_keys_);
    explicit_bzero(h_pow_, sizeof h_pow_);
    explicit_bzero(acc_, sizeof acc_);
    explicit_bzero(ek0_, sizeof ek0_);
    explicit_bzero(part_, sizeof part_);
}

}  // namespace iccs
