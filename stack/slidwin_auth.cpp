// slidwin_auth.cpp: see slidwin_auth.hpp. libcrypto's AES-128-GCM (its provider's; MAC-only
// datagrams through SlidwinGmac, slidwin_gmac.hpp), HKDF (EVP_KDF) and HMAC-SHA256.
#include "slidwin_auth.hpp"

#include <fcntl.h>
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/provider.h>
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
    std::string why;
    if (!slidwin_gcm_available(why)) {  // every seal would fail: say so now, not as drops later
        err = "key file " + name + ": " + why;
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
    // Only the info changes from key to key: the context keeps the digest, mode and PRK.
    const OSSL_PARAM params[] = {OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, sizeof info),
                                 OSSL_PARAM_construct_end()};
    return ctx_ != nullptr && EVP_KDF_derive(ctx_, out, 16, params) == 1;
}

namespace {
// AES-128-GCM as the provider that EVP would pick implements it (the default provider, or
// whichever the library context is configured with), called through that provider's dispatch
// table: the same code EVP_CIPHER_CTX runs, without what OpenSSL 3.0's EVP layer adds to every
// call. Measured (`bench stack --key`, its per-stage table): each IV-only re-init asks the
// provider for the IV length through an OSSL_PARAM query, and each tag get or set through
// EVP_CIPHER_CTX_ctrl builds and parses another; together about half of a small datagram's
// seal. Here the IV goes straight to the provider's init and the tag through one prebuilt
// parameter.
struct GcmProvider {
    EVP_CIPHER* fetched = nullptr;  // held for the process's life: keeps the provider loaded
    void* provctx = nullptr;
    OSSL_FUNC_cipher_newctx_fn* newctx = nullptr;
    OSSL_FUNC_cipher_freectx_fn* freectx = nullptr;
    OSSL_FUNC_cipher_encrypt_init_fn* encrypt_init = nullptr;
    OSSL_FUNC_cipher_decrypt_init_fn* decrypt_init = nullptr;
    OSSL_FUNC_cipher_update_fn* update = nullptr;
    OSSL_FUNC_cipher_final_fn* final = nullptr;
    OSSL_FUNC_cipher_get_ctx_params_fn* get_ctx_params = nullptr;
    OSSL_FUNC_cipher_set_ctx_params_fn* set_ctx_params = nullptr;
    bool ok() const {
        return newctx && freectx && encrypt_init && decrypt_init && update && final && get_ctx_params &&
               set_ctx_params;
    }
};

bool names_include(const char* names, const char* name) {
    const size_t n = std::strlen(name);
    for (const char* p = names; p != nullptr && *p != 0;) {
        const char* end = std::strchr(p, ':');
        const size_t len = end != nullptr ? static_cast<size_t>(end - p) : std::strlen(p);
        if (len == n && OPENSSL_strncasecmp(p, name, n) == 0) return true;
        p = end != nullptr ? end + 1 : nullptr;
    }
    return false;
}

GcmProvider find_gcm_provider() {
    GcmProvider g;
    g.fetched = EVP_CIPHER_fetch(nullptr, "AES-128-GCM", nullptr);
    const OSSL_PROVIDER* prov = g.fetched != nullptr ? EVP_CIPHER_get0_provider(g.fetched) : nullptr;
    if (prov == nullptr) return g;
    int no_store = 0;
    const OSSL_ALGORITHM* algs =
        OSSL_PROVIDER_query_operation(const_cast<OSSL_PROVIDER*>(prov), OSSL_OP_CIPHER, &no_store);
    for (const OSSL_ALGORITHM* a = algs; a != nullptr && a->algorithm_names != nullptr; ++a) {
        if (!names_include(a->algorithm_names, "AES-128-GCM")) continue;
        for (const OSSL_DISPATCH* d = a->implementation; d->function_id != 0; ++d) switch (d->function_id) {
                case OSSL_FUNC_CIPHER_NEWCTX: g.newctx = OSSL_FUNC_cipher_newctx(d); break;
                case OSSL_FUNC_CIPHER_FREECTX: g.freectx = OSSL_FUNC_cipher_freectx(d); break;
                case OSSL_FUNC_CIPHER_ENCRYPT_INIT: g.encrypt_init = OSSL_FUNC_cipher_encrypt_init(d); break;
                case OSSL_FUNC_CIPHER_DECRYPT_INIT: g.decrypt_init = OSSL_FUNC_cipher_decrypt_init(d); break;
                case OSSL_FUNC_CIPHER_UPDATE: g.update = OSSL_FUNC_cipher_update(d); break;
                case OSSL_FUNC_CIPHER_FINAL: g.final = OSSL_FUNC_cipher_final(d); break;
                case OSSL_FUNC_CIPHER_GET_CTX_PARAMS: g.get_ctx_params = OSSL_FUNC_cipher_get_ctx_params(d); break;
                case OSSL_FUNC_CIPHER_SET_CTX_PARAMS: g.set_ctx_params = OSSL_FUNC_cipher_set_ctx_params(d); break;
                default: break;
            }
        break;
    }
    if (algs != nullptr) OSSL_PROVIDER_unquery_operation(const_cast<OSSL_PROVIDER*>(prov), OSSL_OP_CIPHER, algs);
    g.provctx = OSSL_PROVIDER_get0_provider_ctx(prov);
    return g;
}

const GcmProvider& gcm() {
    static const GcmProvider g = find_gcm_provider();  // thread-safe, once
    return g;
}
}  // namespace

bool slidwin_gcm_available(std::string& err) {
    const GcmProvider& g = gcm();
    if (g.ok()) return true;
    err = g.fetched == nullptr ? "libcrypto has no AES-128-GCM (EVP_CIPHER_fetch failed)"
                               : "libcrypto's provider of AES-128-GCM lacks a cipher function slidwin needs";
    return false;
}

SlidwinCipher::SlidwinCipher(Engine engine) {
    const GcmProvider& g = gcm();
    if (g.ok()) ctx_ = g.newctx(g.provctx);
    use_gmac_ = ctx_ != nullptr && engine == Engine::kFastest && slidwin_gmac_available();
}

SlidwinCipher::~SlidwinCipher() {
    if (ctx_ != nullptr) gcm().freectx(ctx_);  // the provider cleanses the key schedule
}  // gmac_ wipes its own

bool SlidwinCipher::set_key(const uint8_t key[16]) {
    if (ctx_ == nullptr || gcm().encrypt_init(ctx_, key, 16, nullptr, 0, nullptr) != 1) return false;
    if (use_gmac_) gmac_.set_key(key);  // round keys and the powers of H; no allocation
    return true;
}

bool SlidwinCipher::start(uint64_t counter, int enc, bool mac) {
    uint8_t iv[12];
    iv_of(iv, counter);
    on_gmac_ = mac && use_gmac_;
    if (on_gmac_) {
        gmac_.begin(counter);
        return true;
    }
    const GcmProvider& g = gcm();
    return (enc ? g.encrypt_init : g.decrypt_init)(ctx_, nullptr, 0, iv, sizeof iv, nullptr) == 1;
}

bool SlidwinCipher::add(uint8_t* out, const uint8_t* in, uint32_t len) {
    if (len == 0) return true;
    if (on_gmac_) {
        if (out != nullptr) return false;  // a MAC: no text
        gmac_.add(in, len);
        return true;
    }
    size_t n = 0;
    return gcm().update(ctx_, out, &n, len, in, len) == 1;
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
            pkt_sum_forget(d);  // its bytes change here (PktBuf::sum)
            d_off += len;
        }
        if (!add(out, s->data() + s_off, len)) return false;
        s_off += len;
    }
}

bool SlidwinCipher::finish_tag(uint8_t tag[kSlidwinAuthTagLen]) {
    if (on_gmac_) {
        gmac_.tag(tag);
        return true;
    }
    const GcmProvider& g = gcm();
    size_t n = 0;
    OSSL_PARAM p[] = {OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, tag, kSlidwinAuthTagLen),
                      OSSL_PARAM_construct_end()};
    return g.final(ctx_, nullptr, &n, 0) == 1 && g.get_ctx_params(ctx_, p) == 1;
}

bool SlidwinCipher::check_tag(const uint8_t tag[kSlidwinAuthTagLen]) {
    if (on_gmac_) return gmac_.check(tag);  // constant time
    const GcmProvider& g = gcm();
    size_t n = 0;
    OSSL_PARAM p[] = {OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, const_cast<uint8_t*>(tag),
                                                        kSlidwinAuthTagLen),
                      OSSL_PARAM_construct_end()};
    return g.set_ctx_params(ctx_, p) == 1 && g.final(ctx_, nullptr, &n, 0) == 1;  // final: the tags compared
}

bool SlidwinCipher::seal(PktBuf* dgram, uint64_t counter, bool encrypt) {
    uint8_t* h = dgram->data();
    uint8_t* blk = h + kSlidwinHdrLen;
    put_be64(blk, counter);
    // No text to encrypt (a MAC, or an ack-only datagram): GCM is then a GMAC, which gmac_ runs.
    return ctx_ != nullptr && start(counter, 1, !encrypt || dgram->pkt_len == kTextFrom) &&
           add(nullptr, h, kSlidwinHdrLen + 8) &&
           update(dgram, kTextFrom, encrypt ? dgram : nullptr, kTextFrom) && finish_tag(blk + 8);
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
    if ((old != 0 && !(start(old, 1, false) && update(c, kTextFrom, c, kTextFrom))) || !seal(c, counter, true)) {
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
    return start(counter, 0, !encrypt || dgram->pkt_len == kTextFrom) && add(nullptr, h, kSlidwinHdrLen + 8) &&
           update(dgram, kTextFrom, encrypt ? dgram : nullptr, kTextFrom) && check_tag(tag);
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
