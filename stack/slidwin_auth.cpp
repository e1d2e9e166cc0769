// slidwin_auth.cpp: see slidwin_auth.hpp. No cryptography of our own: libcrypto's AES-128-GCM,
// HKDF (EVP_KDF) and HMAC-SHA256.
#include "slidwin_auth.hpp"

#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace iccs {

namespace {
constexpr uint32_t kTextFrom = kSlidwinHdrLen + kSlidwinAuthLen;
constexpr char kExtractSalt[] = "iccs slidwin v3";
constexpr char kExpandLabel[] = "iccs slidwin v3 key";

void put_be64(uint8_t* p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
}

void iv_of(uint8_t iv[12], uint64_t counter) {
    std::memset(iv, 0, 4);
    put_be64(iv + 4, counter);
}

// HKDF-Extract (RFC 5869 §2.2) through EVP_KDF.
bool hkdf_extract(const uint8_t* ikm, size_t n, uint8_t prk[32]) {
    EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
    EVP_KDF_CTX* ctx = kdf != nullptr ? EVP_KDF_CTX_new(kdf) : nullptr;
    EVP_KDF_free(kdf);
    int mode = EVP_KDF_HKDF_MODE_EXTRACT_ONLY;
    char digest[] = "SHA256";
    const OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
        OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<uint8_t*>(ikm), n),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<char*>(kExtractSalt),
                                          sizeof kExtractSalt - 1),
        OSSL_PARAM_construct_end()};
    const bool ok = ctx != nullptr && EVP_KDF_derive(ctx, prk, 32, params) == 1;
    EVP_KDF_CTX_free(ctx);  // clears its copy of the key
    return ok;
}

std::string mode_of(mode_t m) {
    char s[8];
    std::snprintf(s, sizeof s, "%04o", static_cast<unsigned>(m & 07777));
    return s;
}
}  // namespace

SlidwinAuthKey::~SlidwinAuthKey() { OPENSSL_cleanse(prk.data(), prk.size()); }

std::shared_ptr<const SlidwinAuthKey> slidwin_key_from_bytes(const uint8_t* bytes, size_t n, bool encrypt,
                                                             const std::string& name, std::string& err) {
    if (n < kSlidwinKeyMinBytes) {
        err = "key file " + name + ": " + std::to_string(n) + " bytes; at least " +
              std::to_string(kSlidwinKeyMinBytes) + " random bytes are needed (e.g. head -c 32 /dev/urandom > " +
              name + ")";
        return nullptr;
    }
    auto key = std::make_shared<SlidwinAuthKey>();
    if (!hkdf_extract(bytes, n, key->prk.data())) {
        err = "key file " + name + ": libcrypto refused HKDF-SHA256";
        return nullptr;
    }
    key->encrypt = encrypt;
    key->path = name;
    return key;
}

std::shared_ptr<const SlidwinAuthKey> slidwin_load_key_fd(int fd, const std::string& path, bool encrypt,
                                                          std::string& err) {
    struct stat st{};
    if (::fstat(fd, &st) != 0) {
        err = "key file " + path + ": " + std::strerror(errno);
        return nullptr;
    }
    if (!S_ISREG(st.st_mode)) {
        err = "key file " + path + ": not a regular file";
        return nullptr;
    }
    if (st.st_uid != ::geteuid()) {
        err = "key file " + path + ": owned by UID " + std::to_string(st.st_uid) + ", not by this user (UID " +
              std::to_string(::geteuid()) + "): a key file must be its user's own";
        return nullptr;
    }
    if ((st.st_mode & 077) != 0) {
        err = "key file " + path + ": group or others have access (mode " + mode_of(st.st_mode) + "): chmod 600 " +
              path;
        return nullptr;
    }
    if (st.st_size > static_cast<off_t>(kSlidwinKeyMaxBytes)) {
        err = "key file " + path + ": " + std::to_string(st.st_size) + " bytes, more than a key file holds (" +
              std::to_string(kSlidwinKeyMinBytes) + ".." + std::to_string(kSlidwinKeyMaxBytes) + " random bytes)";
        return nullptr;
    }
    // Read from the descriptor that was checked (pread: wherever the caller left its offset).
    uint8_t buf[kSlidwinKeyMaxBytes + 1];
    size_t n = 0;
    while (n < sizeof buf) {
        const ssize_t r = ::pread(fd, buf + n, sizeof buf - n, static_cast<off_t>(n));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            OPENSSL_cleanse(buf, n);
            err = "key file " + path + ": cannot read it: " + std::strerror(errno);
            return nullptr;
        }
        if (r == 0) break;
        n += static_cast<size_t>(r);
    }
    std::shared_ptr<const SlidwinAuthKey> key;
    if (n > kSlidwinKeyMaxBytes)
        err = "key file " + path + ": grew past " + std::to_string(kSlidwinKeyMaxBytes) + " bytes while being read";
    else
        key = slidwin_key_from_bytes(buf, n, encrypt, path, err);
    OPENSSL_cleanse(buf, sizeof buf);
    return key;
}

std::shared_ptr<const SlidwinAuthKey> slidwin_load_key(const std::string& path, bool encrypt, std::string& err) {
    // O_NONBLOCK: a FIFO planted at the name must not block the open (fstat then refuses it).
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        err = errno == ELOOP ? "key file " + path + ": a symlink (refused: name the file itself)"
                             : "key file " + path + ": " + std::strerror(errno);
        return nullptr;
    }
    auto key = slidwin_load_key_fd(fd, path, encrypt, err);
    ::close(fd);
    return key;
}

uint64_t slidwin_subconn_token(uint64_t run_token, uint16_t local_id, uint16_t remote_id) {
    static constexpr char kLabel[] = "iccs subconn token";
    uint8_t k[8], msg[sizeof kLabel - 1 + 4], out[32];
    put_be64(k, run_token);
    std::memcpy(msg, kLabel, sizeof kLabel - 1);
    msg[sizeof kLabel - 1] = static_cast<uint8_t>(local_id >> 8);
    msg[sizeof kLabel] = static_cast<uint8_t>(local_id);
    msg[sizeof kLabel + 1] = static_cast<uint8_t>(remote_id >> 8);
    msg[sizeof kLabel + 2] = static_cast<uint8_t>(remote_id);
    unsigned int len = sizeof out;
    if (HMAC(EVP_sha256(), k, sizeof k, msg, sizeof msg, out, &len) == nullptr) {
        // Start-up only (a sub-connection opens): without HMAC-SHA256 there is no libcrypto to speak of.
        std::fprintf(stderr, "iccs: libcrypto refused HMAC-SHA256 (sub-connection token)\n");
        std::abort();
    }
    uint64_t t = 0;
    for (int i = 0; i < 8; ++i) t = t << 8 | out[i];
    OPENSSL_cleanse(k, sizeof k);
    return t != 0 ? t : 1;
}

SlidwinKdf::SlidwinKdf(const SlidwinAuthKey& key) {
    EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
    ctx_ = kdf != nullptr ? EVP_KDF_CTX_new(kdf) : nullptr;
    EVP_KDF_free(kdf);
    if (ctx_ == nullptr) return;
    int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY;
    char digest[] = "SHA256";
    const OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
        OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<uint8_t*>(key.prk.data()), key.prk.size()),
        OSSL_PARAM_construct_end()};
    if (EVP_KDF_CTX_set_params(ctx_, params) != 1) {
        EVP_KDF_CTX_free(ctx_);
        ctx_ = nullptr;
    }
}

SlidwinKdf::~SlidwinKdf() { EVP_KDF_CTX_free(ctx_); }

bool SlidwinKdf::derive(uint8_t out[16], SlidwinKeyUse use, uint32_t epoch, uint64_t sender_token,
                        uint64_t receiver_token, uint16_t subconn_field, uint16_t sender_id) {
    uint8_t info[sizeof kExpandLabel - 1 + 1 + 4 + 8 + 8 + 2 + 2];
    uint8_t* p = info;
    std::memcpy(p, kExpandLabel, sizeof kExpandLabel - 1);
    p += sizeof kExpandLabel - 1;
    *p++ = static_cast<uint8_t>(use);
    for (int i = 0; i < 4; ++i) *p++ = static_cast<uint8_t>(epoch >> (24 - 8 * i));
    put_be64(p, sender_token);
    put_be64(p + 8, receiver_token);
    p += 16;
    *p++ = static_cast<uint8_t>(subconn_field >> 8);
    *p++ = static_cast<uint8_t>(subconn_field);
    *p++ = static_cast<uint8_t>(sender_id >> 8);
    *p++ = static_cast<uint8_t>(sender_id);
    // Only the info changes from key to key: the context keeps the digest, mode and PRK (and
    // copies the info into a buffer of its own: no allocation here).
    const OSSL_PARAM params[] = {OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, sizeof info),
                                 OSSL_PARAM_construct_end()};
    return ctx_ != nullptr && EVP_KDF_derive(ctx_, out, 16, params) == 1;
}

SlidwinCipher::SlidwinCipher() : ctx_(EVP_CIPHER_CTX_new()) {
    if (ctx_ != nullptr && EVP_CipherInit_ex(ctx_, EVP_aes_128_gcm(), nullptr, nullptr, nullptr, 1) != 1) {
        EVP_CIPHER_CTX_free(ctx_);
        ctx_ = nullptr;
    }
}

SlidwinCipher::~SlidwinCipher() { EVP_CIPHER_CTX_free(ctx_); }

bool SlidwinCipher::set_key(const uint8_t key[16]) {
    return ctx_ != nullptr && EVP_CipherInit_ex(ctx_, nullptr, nullptr, key, nullptr, -1) == 1;
}

bool SlidwinCipher::start(uint64_t counter, int enc) {
    uint8_t iv[12];
    iv_of(iv, counter);
    return EVP_CipherInit_ex(ctx_, nullptr, nullptr, nullptr, iv, enc) == 1;
}

bool SlidwinCipher::update(const PktBuf* src, uint32_t from, PktBuf* dst, uint32_t dst_from) {
    // Walk src from `from` (and dst from `dst_from`, in step) in the largest pieces both allow.
    const PktBuf* s = src;
    uint32_t s_off = from;
    PktBuf* d = dst;
    uint32_t d_off = dst_from;
    auto settle = [](auto*& seg, uint32_t& off) {
        while (seg != nullptr && off >= seg->data_len) {
            off -= seg->data_len;
            seg = seg->next;
        }
    };
    for (;;) {
        settle(s, s_off);
        if (s == nullptr) return true;
        uint32_t len = s->data_len - s_off;
        uint8_t* out = nullptr;
        if (dst != nullptr) {
            settle(d, d_off);
            if (d == nullptr) return false;
            len = std::min(len, d->data_len - d_off);
            out = d->buf + d->data_off + d_off;
            d_off += len;
        }
        int n = 0;
        if (EVP_CipherUpdate(ctx_, out, &n, s->data() + s_off, static_cast<int>(len)) != 1) return false;
        s_off += len;
    }
}

bool SlidwinCipher::seal(PktBuf* dgram, uint64_t counter, bool encrypt) {
    uint8_t* h = dgram->data();
    uint8_t* blk = h + kSlidwinHdrLen;
    put_be64(blk, counter);
    int n = 0;
    uint8_t fin[16];
    return ctx_ != nullptr && start(counter, 1) && EVP_CipherUpdate(ctx_, nullptr, &n, h, kSlidwinHdrLen + 8) == 1 &&
           update(dgram, kTextFrom, encrypt ? dgram : nullptr, kTextFrom) && EVP_CipherFinal_ex(ctx_, fin, &n) == 1 &&
           EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_GET_TAG, kSlidwinAuthTagLen, blk + 8) == 1;
}

PktBuf* SlidwinCipher::seal_copy(const PktBuf* dgram, uint64_t counter, PktPool& pool, uint32_t headroom) {
    if (ctx_ == nullptr || dgram->data_len < kTextFrom) return nullptr;
    PktBuf* c = pkt_copy(pool, dgram, headroom);
    if (c == nullptr) return nullptr;
    // The copy is ours alone: undo the last transmission's encryption in it (CTR: the same key
    // stream again), then seal it as a first transmission.
    const uint8_t* blk = dgram->data() + kSlidwinHdrLen;
    uint64_t old = 0;
    for (int i = 0; i < 8; ++i) old = old << 8 | blk[i];
    if ((old != 0 && !(start(old, 1) && update(c, kTextFrom, c, kTextFrom))) || !seal(c, counter, true)) {
        pkt_free(c);
        return nullptr;
    }
    return c;
}

bool SlidwinCipher::open(PktBuf* dgram, uint64_t counter, bool encrypt) {
    uint8_t scratch[kTextFrom];
    const uint8_t* h = pkt_contig(dgram, 0, kTextFrom, scratch);
    if (h == nullptr || ctx_ == nullptr) return false;
    uint8_t tag[kSlidwinAuthTagLen];
    std::memcpy(tag, h + kSlidwinHdrLen + 8, sizeof tag);
    int n = 0;
    uint8_t fin[16];
    return start(counter, 0) && EVP_CipherUpdate(ctx_, nullptr, &n, h, kSlidwinHdrLen + 8) == 1 &&
           update(dgram, kTextFrom, encrypt ? dgram : nullptr, kTextFrom) &&
           EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_SET_TAG, kSlidwinAuthTagLen, tag) == 1 &&
           EVP_CipherFinal_ex(ctx_, fin, &n) == 1;
}

SlidwinReplayWindow::SlidwinReplayWindow(uint32_t bits) {
    uint32_t b = 64;
    while (b < bits && b < (1u << 30)) b <<= 1;
    nwords_ = b / 64;
    words_.reset(new uint64_t[nwords_]());
}

void SlidwinReplayWindow::reset() {
    std::fill(words_.get(), words_.get() + nwords_, 0);
    top_ = 0;
}

bool SlidwinReplayWindow::fresh(uint64_t c) const {
    if (c == 0) return false;
    if (c > top_) return true;
    // The ring keeps bits() counters; the word holding top_ may hold ones just above it too
    // (cleared as top_ passes them), so one word less than the ring counts as "within".
    if (top_ - c >= static_cast<uint64_t>(nwords_ - 1) * 64) return false;
    return (words_[(c / 64) & (nwords_ - 1)] >> (c % 64) & 1) == 0;
}

void SlidwinReplayWindow::mark(uint64_t c) {
    if (c > top_) {
        // Clear the words the new highest passes into (all of them at most once).
        const uint64_t from = top_ / 64 + 1, to = c / 64;
        for (uint64_t w = from; w <= to && w - from < nwords_; ++w) words_[w & (nwords_ - 1)] = 0;
        top_ = c;
    }
    words_[(c / 64) & (nwords_ - 1)] |= uint64_t{1} << (c % 64);
}

}  // namespace iccs
