// slidwin_auth.hpp: optional per-datagram authentication, and encryption, of slidwin (issues 17
// and 37).
//
// With a shared key ([security] key_file, ICCS_KEY_FILE) every slidwin datagram carries an auth
// block after its 40-byte header: a 64-bit transmission counter and a 16-byte AES-128-GCM tag
// over the header, the counter and the payload (MAC only: all of it is authenticated data; with
// `encrypt`, the payload is the GCM plaintext and goes out encrypted).
//
// Keys. The key file is read once (slidwin_load_key: one descriptor, opened without following a
// symlink and checked with fstat), and all that is kept of it is HKDF-Extract of its bytes (the
// bytes are wiped). Each datagram's key is HKDF-Expand of that over a label, the use, the key
// epoch, the sender's and receiver's sub-connection tokens and the two sub-connection ids, so a
// frame captured in one run verifies in no other. A plain SYN (sent before the peer's token is
// known) uses a key of the sender's token alone; a SYN|ACK and everything after the handshake
// use the data key of both tokens, which is what makes a peer's token believed (slidwin.hpp).
//
// Counters. A sub-connection's counter counts every datagram it seals, whatever the key, so a
// (key, counter) pair, the GCM nonce, is never used twice. The receiver keeps, per key, the
// highest counter it accepted and a bitmap of the ones below (RFC 4303 §3.4.3, as RFC 6479
// lays the bitmap out): a counter seen before, or too far below the highest, is a replay
// (drop_replay), whatever slidwin's 32-bit sequence window would say after it wrapped. The
// counter's high bits are the key epoch (SlidwinConfig::auth_epoch_shift, 32: 2^32 datagrams a
// key): both ends move to the next epoch's keys before the low bits wrap.
//
// Why OpenSSL's libcrypto and AES-GCM (not libsodium): our datagrams are chains of segments
// (zero copy: headers in headroom, striped payloads, IP fragments as views), and libcrypto's GCM takes
// the authenticated data and the plaintext in as many pieces as there are segments, in place or
// into another chain; libsodium's AEADs are one-shot over one contiguous buffer, which would cost
// a copy per datagram. Measured by `./iccs bench stack --key FILE` (perf/README.md).
//
// Threading: a SlidwinKdf, SlidwinCipher and SlidwinReplayWindow belong to the thread that owns
// the endpoint (_st); a SlidwinAuthKey is immutable and shared.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "pktbuf.hpp"
#include "slidwin_gmac.hpp"
#include "slidwin_hdr.hpp"

typedef struct evp_kdf_ctx_st EVP_KDF_CTX;

namespace iccs {

inline constexpr uint32_t kSlidwinAuthLen = 24;  // counter (8) + GCM tag (16), after the header
inline constexpr uint32_t kSlidwinAuthTagLen = 16;
inline constexpr uint32_t kSlidwinKeyMinBytes = 32;    // a key file shorter than this is refused
inline constexpr uint32_t kSlidwinKeyMaxBytes = 4096;  // ... and one longer (not a key file)

// The shared key of a machine: HKDF-Extract of its key file's bytes.
struct SlidwinAuthKey {
    std::array<uint8_t, 32> prk{};  // HKDF-Extract(salt "iccs slidwin v3", the file's bytes)
    bool encrypt = false;           // AEAD: hide the payload too
    std::string path;               // for messages
    SlidwinAuthKey() = default;
    SlidwinAuthKey(const SlidwinAuthKey&) = default;
    SlidwinAuthKey& operator=(const SlidwinAuthKey&) = default;
    ~SlidwinAuthKey();  // wipes prk
};

// Read a key file: opened once (O_NOFOLLOW|O_CLOEXEC: a symlink is refused), then checked on that
// descriptor (fstat: a regular file, owned by this user, no group or other permission bits),
// read from it (32..4096 bytes), and wiped once derived. Returns null with err naming the file
// and what is wrong.
std::shared_ptr<const SlidwinAuthKey> slidwin_load_key(const std::string& path, bool encrypt, std::string& err);
// The same checks and read on a descriptor the caller opened (not closed here): what is checked
// is what is read, whatever happens to the name meanwhile.
std::shared_ptr<const SlidwinAuthKey> slidwin_load_key_fd(int fd, const std::string& path, bool encrypt,
                                                          std::string& err);
// The same derivation from bytes in memory (tests, benchmarks); at least kSlidwinKeyMinBytes.
std::shared_ptr<const SlidwinAuthKey> slidwin_key_from_bytes(const uint8_t* bytes, size_t n, bool encrypt,
                                                             const std::string& name, std::string& err);

// A sub-connection's token: HMAC-SHA256 keyed with its cluster's run token (never sent) over the
// two ids, 64 bits of it (never 0). Seeing one sub-connection's token tells nothing of another's.
uint64_t slidwin_subconn_token(uint64_t run_token, uint16_t local_id, uint16_t remote_id);

// What a key is for: plain SYNs (before the peer's token is known) or everything else.
enum class SlidwinKeyUse : uint8_t { kSyn = 1, kData = 2 };

// The per-datagram keys of one thread: HKDF-Expand from the machine key, through one EVP_KDF
// context kept for the thread's life. A key is derived at a key set-up only (a handshake
// token's first datagram, a new epoch), never per datagram: libcrypto 3.0's HKDF allocates
// inside each derive (11 allocations, ~1 us: `bench stack --key`'s stage table), and a failed
// one is a false return, which the endpoint counts as a drop.
class SlidwinKdf {
   public:
    explicit SlidwinKdf(const SlidwinAuthKey& key);
    ~SlidwinKdf();
    SlidwinKdf(const SlidwinKdf&) = delete;
    SlidwinKdf& operator=(const SlidwinKdf&) = delete;
    bool ok() const { return ctx_ != nullptr; }
    // out = HKDF-Expand(prk, "iccs slidwin v3 key" | use | epoch | sender token | receiver token
    // (0 for kSyn) | subconn field | sender's own id, 16). False if libcrypto fails.
    bool derive(uint8_t out[16], SlidwinKeyUse use, uint32_t epoch, uint64_t sender_token, uint64_t receiver_token,
                uint16_t subconn_field, uint16_t sender_id);

   private:
    EVP_KDF_CTX* ctx_ = nullptr;
};

// Whether libcrypto's AES-128-GCM can be reached as SlidwinCipher reaches it (err says why not).
bool slidwin_gcm_available(std::string& err);

// One AES-128-GCM key in contexts allocated once: a new key is a key schedule, no allocation.
//
// A datagram with no text to encrypt (every one without `encrypt`, the default; with it, an
// ack-only one: its GCM is a GMAC either way) goes through SlidwinGmac (slidwin_gmac.hpp: AES-NI
// rounds and a GHASH over PCLMULQDQ with the powers of H, the key one cache-aligned block inside
// this object), checked byte for byte against EVP's AES-128-GCM (tests/unit/test_security_gmac.cpp).
// Before issue 37's second pass these went through libcrypto's GCM mode (CRYPTO_gcm128_*) over
// AES-NI rounds of ours, and before that through the provider's GCM, whose per-datagram IV set-up
// and OSSL_PARAM tag exchange (8 OSSL_PARAM_locate calls, each a strcmp, to read a tag) cost as
// much as the GCM itself on a 64-byte ack (perf/README.md, issue 37: `bench stack --key`'s stages).
//
// A datagram with text to encrypt (and every one on a CPU without AES-NI and PCLMULQDQ, or with
// Engine::kProvider) goes through the provider's AES-128-GCM context (libcrypto's default
// provider, or whichever EVP would fetch it from), driven through the provider's dispatch table
// rather than an EVP_CIPHER_CTX: the same GCM code without OpenSSL 3.0's EVP layer, which on
// every IV-only re-init and every tag get or set builds and parses OSSL_PARAM queries; its
// stitched AES-CTR + GHASH is what a payload to encrypt wants. A datagram costs one IV set-up,
// its GHASH (and CTR) passes, and one tag read or compare; no allocation on either path.
class SlidwinCipher {
   public:
    // kFastest: datagrams with no text to encrypt through SlidwinGmac where the CPU has AES-NI
    // and PCLMULQDQ; kProvider: every datagram through the provider's GCM (the benchmark's
    // baseline, tests).
    enum class Engine : uint8_t { kFastest, kProvider };
    explicit SlidwinCipher(Engine engine = Engine::kFastest);
    ~SlidwinCipher();
    SlidwinCipher(const SlidwinCipher&) = delete;
    SlidwinCipher& operator=(const SlidwinCipher&) = delete;
    bool ok() const { return ctx_ != nullptr; }
    // Datagrams with no text to encrypt go through SlidwinGmac (the CPU has AES-NI and
    // PCLMULQDQ, and the engine is kFastest).
    bool mac_on_aesni() const { return use_gmac_; }
    bool set_key(const uint8_t key[16]);

    // dgram: data() at the slidwin header, the auth block right after it in the first segment.
    // Writes the counter and the tag in place; with encrypt, encrypts the payload in place (a
    // datagram's first transmission). False only if libcrypto fails.
    bool seal(PktBuf* dgram, uint64_t counter, bool encrypt);
    // A retransmission with encrypt: dgram's payload is the ciphertext of the counter in its block
    // and stays so (a queued fragment may still view it). Returns a new chain from pool, with
    // `headroom` in front: the header, a new block, the payload decrypted into it and encrypted
    // under `counter`. Null when the pool has no buffer (or libcrypto fails); dgram untouched.
    PktBuf* seal_copy(const PktBuf* dgram, uint64_t counter, PktPool& pool, uint32_t headroom);
    // Verify (and decrypt) a received datagram in place; false: the tag does not match.
    bool open(PktBuf* dgram, uint64_t counter, bool encrypt);

   private:
    // Run GCM over src from byte `from` on: as authenticated data (dst null), or as text into
    // dst from byte `dst_from` on (dst == src: in place).
    bool update(const PktBuf* src, uint32_t from, PktBuf* dst, uint32_t dst_from);
    // A datagram's GCM pass begins: on gmac_ when `mac` (no text to encrypt) and this context
    // uses it, else on the provider's.
    bool start(uint64_t counter, int enc, bool mac);
    // One piece: authenticated data (out null) or text into out.
    bool add(uint8_t* out, const uint8_t* in, uint32_t len);
    bool finish_tag(uint8_t tag[kSlidwinAuthTagLen]);       // sealing: compute and read the tag
    bool check_tag(const uint8_t tag[kSlidwinAuthTagLen]);  // opening: false unless it matches
    SlidwinGmac gmac_;                   // first: the cache-aligned key every MAC-only datagram reads
    void* ctx_ = nullptr;                // the provider's AES-128-GCM context (null: not ok())
    bool use_gmac_ = false;              // MAC-only datagrams go through gmac_
    bool on_gmac_ = false;               // the pass start() began runs on gmac_
};

// Which counters of one key were accepted: the highest, and a bitmap of `bits` below it.
class SlidwinReplayWindow {
   public:
    explicit SlidwinReplayWindow(uint32_t bits = 4096);  // rounded up to a power of two >= 64
    void reset();                                         // a new key: nothing seen
    // Not seen, and not more than bits() below the highest seen (counter 0 is never valid).
    bool fresh(uint64_t counter) const;
    // After the tag verified: remember it (the highest moves up, the bits it passes are cleared).
    void mark(uint64_t counter);
    uint32_t bits() const { return nwords_ * 64; }
    uint64_t highest() const { return top_; }

   private:
    std::unique_ptr<uint64_t[]> words_;
    uint32_t nwords_;
    uint64_t top_ = 0;
};

}  // namespace iccs
