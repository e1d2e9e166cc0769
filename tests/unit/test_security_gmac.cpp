// SlidwinGmac (issue 37, second pass: slidwin's MAC-only datagrams over AES-NI and PCLMULQDQ)
// against EVP's AES-128-GCM: the same tag for random keys and counters and every length of
// authenticated data 0..9000, added in pieces of any size (a datagram's segments), and a tag with
// any bit changed refused.
#include <catch2/catch.hpp>

#include <openssl/evp.h>

#include <cstring>
#include <random>
#include <vector>

#include "slidwin_gmac.hpp"

using namespace iccs;

namespace {

// AES-128-GCM through EVP with a 96-bit nonce 0^32 || counter, `aad` all authenticated data, no text.
void evp_gmac(const uint8_t key[16], uint64_t counter, const std::vector<uint8_t>& aad, uint8_t tag[16]) {
    uint8_t iv[12] = {};
    for (int i = 0; i < 8; ++i) iv[4 + i] = static_cast<uint8_t>(counter >> (56 - 8 * i));
    EVP_CIPHER_CTX* c = EVP_CIPHER_CTX_new();
    REQUIRE(c != nullptr);
    int n = 0;
    uint8_t fin[16];
    REQUIRE(EVP_EncryptInit_ex(c, EVP_aes_128_gcm(), nullptr, key, iv) == 1);
    if (!aad.empty()) REQUIRE(EVP_EncryptUpdate(c, nullptr, &n, aad.data(), static_cast<int>(aad.size())) == 1);
    REQUIRE(EVP_EncryptFinal_ex(c, fin, &n) == 1);
    REQUIRE(EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, tag) == 1);
    EVP_CIPHER_CTX_free(c);
}

}  // namespace

TEST_CASE("SlidwinGmac's tag is EVP's AES-128-GCM tag for every length 0..9000, added in any pieces", "[security]") {
    if (!slidwin_gmac_available()) {
        WARN("this CPU lacks AES-NI, PCLMULQDQ or SSSE3: slidwin takes libcrypto's GCM, SlidwinGmac is not used");
        return;
    }
    std::mt19937_64 rng(37);
    SlidwinGmac g;
    uint8_t key[16];
    for (uint32_t len = 0; len <= 9000; ++len) {
        if (len % 50 == 0) {  // a new random key every 50 lengths (180 keys)
            for (uint8_t& b : key) b = static_cast<uint8_t>(rng());
            g.set_key(key);
        }
        std::vector<uint8_t> aad(len);
        for (uint8_t& b : aad) b = static_cast<uint8_t>(rng());
        const uint64_t counter = len % 7 == 0 ? len : rng();
        uint8_t want[16], got[16];
        evp_gmac(key, counter, aad, want);
        // In pieces: one whole, or sizes drawn from 0..2100 (segments and their odd ends), or bytes.
        g.begin(counter);
        const int split = static_cast<int>(len % 3);
        for (uint32_t at = 0; at < len;) {
            uint32_t piece = split == 0 ? len : split == 1 ? static_cast<uint32_t>(rng() % 2101) : 1 + rng() % 17;
            piece = std::min(piece, len - at);
            g.add(aad.data() + at, piece);
            at += piece;
        }
        g.tag(got);
        INFO("length " << len << " split " << split << " counter " << counter);
        REQUIRE(std::memcmp(got, want, 16) == 0);
        // check(): EVP's tag passes, the tag with one bit changed does not.
        g.begin(counter);
        g.add(aad.data(), len);
        REQUIRE(g.check(want));
        want[len % 16] ^= static_cast<uint8_t>(1u << (len % 8));
        g.begin(counter);
        g.add(aad.data(), len);
        REQUIRE(!g.check(want));
    }
}
