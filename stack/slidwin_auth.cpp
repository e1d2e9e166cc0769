// slidwin_auth.cpp: see slidwin_auth.hpp. No cryptography of our own: libcrypto's AES-128-GCM
// and HMAC-SHA256.
#include "slidwin_auth.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

namespace iccs {

namespace {
constexpr uint32_t kTextFrom = kSlidwinHdrLen + kSlidwinAuthLen;

void put_be64(uint8_t* p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
}

void iv_of(uint8_t iv[12], uint64_t counter) {
    std::memset(iv, 0, 4);
    put_be64(iv + 4, counter);
}
}  // namespace

std::shared_ptr<const SlidwinAuthKey> slidwin_load_key(const std::string& path, bool encrypt, std::string& err) {
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0) {
        err = "key file " + path + ": " + std::strerror(errno);
        return nullptr;
    }
    if (!S_ISREG(st.st_mode)) {
        err = "key file " + path + ": not a regular file";
        return nullptr;
    }
    if ((st.st_mode & 077) != 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        err = "key file " + path + ": readable by others (mode " + mode + "): chmod 600 " + path;
        return nullptr;
    }
    std::ifstream in(path, std::ios::binary);
    auto key = std::make_shared<SlidwinAuthKey>();
    key->secret.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
        err = "key file " + path + ": cannot read it";
        return nullptr;
    }
    if (key->secret.size() < 16) {
        err = "key file " + path + ": " + std::to_string(key->secret.size()) +
              " bytes; at least 16 random bytes are needed (e.g. head -c 32 /dev/urandom > " + path + ")";
        return nullptr;
    }
    key->encrypt = encrypt;
    key->path = path;
    return key;
}

SlidwinCipher::SlidwinCipher(const SlidwinAuthKey& key, SlidwinKeyUse use, uint64_t sender_token,
                             uint64_t receiver_token, uint16_t subconn_field, uint16_t sender_id)
    : ctx_(EVP_CIPHER_CTX_new()), encrypt_(key.encrypt) {
    static constexpr char kLabel[] = "iccs slidwin v2";
    uint8_t msg[sizeof kLabel - 1 + 1 + 8 + 8 + 2 + 2];
    uint8_t* p = msg;
    std::memcpy(p, kLabel, sizeof kLabel - 1);
    p += sizeof kLabel - 1;
    *p++ = static_cast<uint8_t>(use);
    put_be64(p, sender_token);
    put_be64(p + 8, receiver_token);
    p += 16;
    *p++ = static_cast<uint8_t>(subconn_field >> 8);
    *p++ = static_cast<uint8_t>(subconn_field);
    *p++ = static_cast<uint8_t>(sender_id >> 8);
    *p++ = static_cast<uint8_t>(sender_id);
    uint8_t k[32];
    unsigned int k_len = sizeof k;
    const bool ok = HMAC(EVP_sha256(), key.secret.data(), static_cast<int>(key.secret.size()), msg, sizeof msg, k,
                         &k_len) != nullptr &&
                    ctx_ != nullptr && EVP_CipherInit_ex(ctx_, EVP_aes_128_gcm(), nullptr, k, nullptr, 1) == 1;
    OPENSSL_cleanse(k, sizeof k);
    if (!ok) {
        // Start-up only: a libcrypto without AES-GCM or HMAC cannot run an authenticated machine.
        std::fprintf(stderr, "iccs: libcrypto refused AES-128-GCM / HMAC-SHA256 (key file %s)\n", key.path.c_str());
        std::abort();
    }
}

SlidwinCipher::~SlidwinCipher() { EVP_CIPHER_CTX_free(ctx_); }

bool SlidwinCipher::update(PktBuf* dgram, uint32_t from, bool as_text) {
    uint32_t skip = from;
    for (PktBuf* s = dgram; s != nullptr; s = s->next) {
        uint32_t len = s->data_len;
        uint8_t* d = s->data();
        if (skip >= len) {
            skip -= len;
            continue;
        }
        d += skip;
        len -= skip;
        skip = 0;
        int n = 0;
        if (EVP_CipherUpdate(ctx_, as_text ? d : nullptr, &n, d, static_cast<int>(len)) != 1) return false;
    }
    return true;
}

bool SlidwinCipher::seal(PktBuf* dgram, uint64_t counter) {
    uint8_t* h = dgram->data();
    uint8_t* blk = h + kSlidwinHdrLen;
    uint8_t iv[12];
    int n = 0;
    if (encrypt_) {
        // A retransmission: the payload is still the ciphertext of the last counter. CTR undoes it.
        uint64_t old = 0;
        for (int i = 0; i < 8; ++i) old = old << 8 | blk[i];
        if (old != 0) {
            iv_of(iv, old);
            if (EVP_CipherInit_ex(ctx_, nullptr, nullptr, nullptr, iv, 1) != 1 || !update(dgram, kTextFrom, true))
                return false;
        }
    }
    put_be64(blk, counter);
    iv_of(iv, counter);
    uint8_t fin[16];
    return EVP_CipherInit_ex(ctx_, nullptr, nullptr, nullptr, iv, 1) == 1 &&
           EVP_CipherUpdate(ctx_, nullptr, &n, h, kSlidwinHdrLen + 8) == 1 &&
           update(dgram, kTextFrom, encrypt_) && EVP_CipherFinal_ex(ctx_, fin, &n) == 1 &&
           EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_GET_TAG, kSlidwinAuthTagLen, blk + 8) == 1;
}

bool SlidwinCipher::open(PktBuf* dgram) {
    uint8_t scratch[kTextFrom];
    const uint8_t* h = pkt_contig(dgram, 0, kTextFrom, scratch);
    if (h == nullptr) return false;
    uint8_t tag[kSlidwinAuthTagLen];
    std::memcpy(tag, h + kSlidwinHdrLen + 8, sizeof tag);
    uint64_t counter = 0;
    for (int i = 0; i < 8; ++i) counter = counter << 8 | h[kSlidwinHdrLen + i];
    uint8_t iv[12];
    iv_of(iv, counter);
    int n = 0;
    uint8_t fin[16];
    return EVP_CipherInit_ex(ctx_, nullptr, nullptr, nullptr, iv, 0) == 1 &&
           EVP_CipherUpdate(ctx_, nullptr, &n, h, kSlidwinHdrLen + 8) == 1 &&
           update(dgram, kTextFrom, encrypt_) &&
           EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_SET_TAG, kSlidwinAuthTagLen, tag) == 1 &&
           EVP_CipherFinal_ex(ctx_, fin, &n) == 1;
}

}  // namespace iccs
