// slidwin_gmac.hpp: AES-128-GCM with no text to encrypt (a GMAC: everything is authenticated
// data), over the AES-NI and PCLMULQDQ instructions, for slidwin's MAC-only datagrams (issue 37).
//
// Why our own: a MAC-only datagram went through libcrypto's GCM mode (CRYPTO_gcm128_*) over
// AES-NI rounds of ours: four calls into libcrypto a datagram (set-up of the IV, which runs the
// block function through a pointer for E(K, J0), the authenticated data piece by piece, the
// tag), a context on the heap apart from the round keys, and GHASH code that is cold between two
// datagrams of a poll loop. In the cluster a seal or open took 150-250 ns against 67-103 ns in a
// loop (perf/README.md). Here a key is one cache-aligned block (round keys, H^1..H^8), a pass is
// a few registers' worth of state, and GHASH folds up to eight blocks at a time with the powers
// of H (one reduction per piece of up to eight blocks, the multiplications independent; the last
// partial block and the lengths block together), while E(K, J0) runs beside it. GCM as NIST SP 800-38D defines it with a 96-bit IV (J0 = IV || 0^31 || 1); the carry-less
// multiplication and its reduction in the bit-reflected form of Intel's white paper (Gueron and
// Kounavis, "Intel Carry-Less Multiplication Instruction and its Usage for Computing the GCM
// Mode", rev. 2.02, Algorithm 5). Checked byte for byte against EVP's AES-128-GCM over random
// keys and counters and every length 0..9000 in segment chains (tests/unit/test_security_gmac.cpp).
//
// Used only where the CPU has AES-NI, PCLMULQDQ and SSSE3 (slidwin_gmac_available()); elsewhere
// SlidwinCipher takes libcrypto's GCM. No allocation, no exception.
#pragma once

#include <cstdint>

namespace iccs {

// Powers of H kept per key: up to this many blocks are folded with one reduction.
inline constexpr uint32_t kSlidwinGmacPowers = 8;

// The CPU has what SlidwinGmac runs on (x86-64 with AES-NI, PCLMULQDQ and SSSE3).
bool slidwin_gmac_available();

class alignas(64) SlidwinGmac {
   public:
    // The key schedule and the powers of H: at a key set-up only.
    void set_key(const uint8_t key[16]);
    // A datagram's pass: the GCM nonce is 0^32 || counter (big-endian), as slidwin's.
    void begin(uint64_t counter);
    // The next n bytes of the authenticated data (any split: pieces are joined as one stream).
    void add(const uint8_t* p, uint32_t n);
    // The 16-byte tag of what was added.
    void tag(uint8_t out[16]);
    // Compare with the expected tag in constant time; true if equal.
    bool check(const uint8_t expected[16]);
    // Wipe the key material (the destructor does too).
    void wipe();
    ~SlidwinGmac() { wipe(); }

   private:
    // The key, read by every datagram: one block of four cache lines.
    alignas(16) uint8_t round_keys_[11 * 16] = {};
    alignas(16) uint8_t h_pow_[kSlidwinGmacPowers][16] = {};  // H^1..H^8, byte-reflected (the multiplication's form)
    // A pass: the GHASH accumulator (byte-reflected), E(K, J0), the partial block and the length.
    alignas(16) uint8_t acc_[16] = {};
    alignas(16) uint8_t ek0_[16] = {};
    alignas(16) uint8_t part_[16] = {};
    uint32_t part_n_ = 0;
    uint64_t len_ = 0;
};

}  // namespace iccs
