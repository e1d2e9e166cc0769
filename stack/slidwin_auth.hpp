// slidwin_auth.hpp: optional per-datagram authentication, and encryption, of slidwin (issue 17).
//
// With a shared key ([security] key_file, ICCS_KEY_FILE) every slidwin datagram carries an auth
// block after its 40-byte header: a 64-bit transmission counter and a 16-byte AES-128-GCM tag
// over the header, the counter and the payload (MAC only: all of it is authenticated data; with
// `encrypt`, the payload is the GCM plaintext and goes out encrypted). The key of a datagram is
// derived per run and per direction of each sub-connection (HMAC-SHA256 of the shared key over a
// label, the sender's and receiver's run tokens and the two sub-connection ids), so a frame
// captured in one run verifies in no other, and the counter (never reused under one key: it
// restarts only with a new token) is the GCM nonce. SYNs, sent before the peer's token is known,
// use a key of the sender's token alone: a replayed SYN verifies, but a restart is believed only
// when the new token acks a challenge (slidwin.hpp), and that ack is under the per-run key.
//
// Why OpenSSL's libcrypto and AES-GCM (not libsodium): our datagrams are chains of segments
// (zero copy: headers in headroom, striped payloads, IP fragments as views), and EVP's GCM takes
// the authenticated data and the plaintext in as many pieces as there are segments, in place;
// libsodium's AEADs (AES-256-GCM, ChaCha20-Poly1305) are one-shot over one contiguous buffer,
// which would cost a copy per datagram. On these hosts (AES-NI, VPCLMULQDQ) one GCM over a
// 180-byte datagram costs 170-250 ns with a context kept per direction (key schedule once), and
// libcrypto is already installed with DPDK. Measured by `./iccs bench stack --key FILE`.
//
// Threading: a SlidwinCipher belongs to the thread that owns the endpoint (_st).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pktbuf.hpp"
#include "slidwin_hdr.hpp"

typedef struct evp_cipher_ctx_st EVP_CIPHER_CTX;

namespace iccs {

inline constexpr uint32_t kSlidwinAuthLen = 24;  // counter (8) + GCM tag (16), after the header
inline constexpr uint32_t kSlidwinAuthTagLen = 16;

// The shared key of a machine, as read from its key file.
struct SlidwinAuthKey {
    std::vector<uint8_t> secret;  // the file's bytes (at least 16)
    bool encrypt = false;         // AEAD: hide the payload too
    std::string path;             // for messages
};

// Read a key file: at least 16 bytes, readable by its owner only (mode 0600 or 0400). Returns
// null with err naming the file and what is wrong.
std::shared_ptr<const SlidwinAuthKey> slidwin_load_key(const std::string& path, bool encrypt, std::string& err);

// Directions of a sub-connection's keys.
enum class SlidwinKeyUse : uint8_t { kSyn = 1, kData = 2 };

// One direction's AES-128-GCM key, expanded once.
class SlidwinCipher {
   public:
    // key = HMAC-SHA256(secret, "iccs slidwin v2" | use | sender token | receiver token (0 for
    // kSyn) | subconn field | sender's own id)[0..16).
    SlidwinCipher(const SlidwinAuthKey& key, SlidwinKeyUse use, uint64_t sender_token, uint64_t receiver_token,
                  uint16_t subconn_field, uint16_t sender_id);
    ~SlidwinCipher();
    SlidwinCipher(const SlidwinCipher&) = delete;
    SlidwinCipher& operator=(const SlidwinCipher&) = delete;

    // dgram: data() at the slidwin header, the auth block right after it in the first segment.
    // Writes the counter and the tag (encrypting the payload when the key says so; a payload
    // encrypted by an earlier transmission, counter != 0 in the block, is decrypted first).
    // False only if libcrypto fails.
    bool seal(PktBuf* dgram, uint64_t counter);
    // Verify (and decrypt) a received datagram in place; false: the tag does not match.
    bool open(PktBuf* dgram);

   private:
    // Run GCM over dgram from byte `from` on: as authenticated data, or as text (in place; the
    // direction is the one the last init set).
    bool update(PktBuf* dgram, uint32_t from, bool as_text);
    EVP_CIPHER_CTX* ctx_;
    bool encrypt_;
};

}  // namespace iccs
