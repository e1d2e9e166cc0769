// Authentication, second pass (issue 37, findings 2, 6, 7 and 8): replayed authenticated
// datagrams are refused by the counter's anti-replay window, also across key epochs; with
// encryption a retransmission is sealed into a copy (a queued fragment of the last transmission
// is never rewritten, and no buffer for the copy is a counted drop); the key file is opened once,
// checked on its descriptor and derived with HKDF; the owner-only files of a run likewise.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "checksum.hpp"
#include "owner_only.hpp"
#include "security_link.hpp"

using namespace iccs;
using namespace security_test;

TEST_CASE("the anti-replay window: each counter once, none too far below the highest", "[security]") {
    SlidwinReplayWindow w(256);
    REQUIRE(w.bits() == 256);
    REQUIRE(!w.fresh(0));
    for (uint64_t c : {1, 2, 3, 7, 5}) {
        REQUIRE(w.fresh(c));
        w.mark(c);
        REQUIRE(!w.fresh(c));
    }
    REQUIRE(w.fresh(4));  // reordered, not seen
    REQUIRE(w.fresh(6));
    w.mark(1000);  // far ahead: everything more than the window below is refused
    REQUIRE(w.highest() == 1000);
    REQUIRE(!w.fresh(4));
    REQUIRE(!w.fresh(1000 - 192));
    REQUIRE(w.fresh(1000 - 191));
    w.mark(999);
    REQUIRE(!w.fresh(999));
    REQUIRE(w.fresh(998));
    // bits passed over while the highest moved are clear again (the ring is reused)
    const uint64_t top = 1000 + 64 * 3 + 5;
    w.mark(top);
    REQUIRE(!w.fresh(top - 192));
    for (uint64_t c = top - 191; c < top; ++c) REQUIRE(w.fresh(c));
    w.reset();
    REQUIRE(w.fresh(1));
}

TEST_CASE("authenticated datagrams replayed, also after the keys moved to a new epoch, are refused", "[security]") {
    for (const bool encrypt : {false, true}) {
        INFO("encrypt " << encrypt);
        const SlidwinAuthKey key = test_key(encrypt);
        SlidwinConfig cfg;
        cfg.auth = &key;
        cfg.auth_epoch_shift = 6;  // 64 datagrams a key: the wrap of 2^32, forced early
        std::vector<Frame> wire;
        Link l{cfg};
        l.record_a_to_b = &wire;
        l.handshake();
        l.send_a(300);
        REQUIRE(l.sink_b.got == 300);
        // a sealed > 300 datagrams: its keys moved on four times at least, b's with them.
        REQUIRE(l.sa->counters().key_setups >= 5);
        REQUIRE(l.sb->counters().key_setups >= 5);
        REQUIRE(l.sb->counters().drop_auth == 0);
        l.record_a_to_b = nullptr;
        const BState before(l);
        const uint64_t replays = l.sb->counters().drop_replay;
        for (const Frame& f : wire) l.inject(l.b, l.pool_b, f);
        l.ep_b->end_of_burst(l.now);
        // Every one refused before slidwin saw it: no ack in answer, no state changed.
        REQUIRE(l.sb->counters().drop_replay == replays + wire.size());
        REQUIRE(BState(l) == before);
        REQUIRE(l.b.tx_queued() == 0);
        l.send_a(5);
        REQUIRE(l.sink_b.got == 305);
    }
}

TEST_CASE("with encryption a retransmission never rewrites what a queued fragment views", "[security]") {
    const SlidwinAuthKey key = test_key(true);
    SlidwinConfig cfg;
    cfg.auth = &key;
    Link l{cfg};
    l.handshake();
    // 3500 bytes: three IP fragments at MTU 1500; the last one views only the datagram's second
    // segment (the first holds the headers and ~1900 bytes), so the head is not shared.
    PktBuf* m = pkt_alloc(l.pool_a);
    const std::string text(3500, 'P');
    REQUIRE(pkt_write(m, l.pool_a, text.data(), 3500));
    REQUIRE(slidwin_send(*l.sa, m, l.now) == SlidwinSendResult::kOk);
    PktBuf* f[8];
    REQUIRE(l.a.tx_take(f, 8) == 3);
    pkt_free(f[0]);  // the first two are lost; the last is still queued (not on the wire yet)
    pkt_free(f[1]);
    const Frame held = Link::bytes(f[2]);
    REQUIRE(!contains(held, "PPPPPPPP"));
    for (int i = 0; i < 100 && l.sa->counters().tx_retx == 0; ++i) l.step(1'000'000);
    REQUIRE(l.sa->counters().tx_retx >= 1);
    REQUIRE(Link::bytes(f[2]) == held);  // neither decrypted back in place nor re-encrypted
    pkt_free(f[2]);
    l.settle();
    REQUIRE(l.sink_b.got == 1);
    REQUIRE(l.sb->counters().drop_auth == 0);
}

TEST_CASE("with encryption no buffer for a sealed copy is a counted drop, and the datagram goes later",
          "[security]") {
    const SlidwinAuthKey key = test_key(true);
    SlidwinConfig cfg;
    cfg.auth = &key;
    Link l{cfg};
    l.handshake();
    PktBuf* m = pkt_alloc(l.pool_a);
    std::memcpy(pkt_append(m, 100), std::string(100, 'Q').data(), 100);
    REQUIRE(slidwin_send(*l.sa, m, l.now) == SlidwinSendResult::kOk);
    Link::drop(l.a);  // lost
    std::vector<PktBuf*> hog;  // a's pool runs dry
    while (PktBuf* p = pkt_alloc(l.pool_a)) hog.push_back(p);
    for (int i = 0; i < 100 && l.sa->counters().drop_tx_nobuf == 0; ++i) l.step(1'000'000);
    REQUIRE(l.sa->counters().drop_tx_nobuf >= 1);
    REQUIRE(l.sink_b.got == 0);
    for (PktBuf* p : hog) pkt_free(p);
    for (int i = 0; i < 100 && l.sink_b.got == 0; ++i) l.step(1'000'000);
    REQUIRE(l.sink_b.got == 1);
}

namespace {

// AES-128-GCM of a flat datagram as slidwin lays it out, one-shot through EVP: nonce 0^32 ||
// counter, authenticated data the header and counter (and, without encryption, the payload),
// text the payload with encryption. Returns the datagram as it must go on the wire.
std::vector<uint8_t> evp_sealed(const uint8_t key[16], std::vector<uint8_t> d, uint64_t counter, bool encrypt) {
    const size_t from = kSlidwinHdrLen + kSlidwinAuthLen;
    uint8_t iv[12] = {};
    for (int i = 0; i < 8; ++i) d[kSlidwinHdrLen + i] = iv[4 + i] = static_cast<uint8_t>(counter >> (56 - 8 * i));
    EVP_CIPHER_CTX* c = EVP_CIPHER_CTX_new();
    int n = 0;
    uint8_t fin[16];
    REQUIRE(EVP_EncryptInit_ex(c, EVP_aes_128_gcm(), nullptr, key, iv) == 1);
    REQUIRE(EVP_EncryptUpdate(c, nullptr, &n, d.data(), kSlidwinHdrLen + 8) == 1);
    const int len = static_cast<int>(d.size() - from);
    if (len > 0) REQUIRE(EVP_EncryptUpdate(c, encrypt ? d.data() + from : nullptr, &n, d.data() + from, len) == 1);
    REQUIRE(EVP_EncryptFinal_ex(c, fin, &n) == 1);
    REQUIRE(EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, d.data() + kSlidwinHdrLen + 8) == 1);
    EVP_CIPHER_CTX_free(c);
    return d;
}

// The bytes as a chain whose segments hold at most seg bytes each (the first at least the
// header and auth block, as slidwin's datagrams always do).
PktBuf* chain_of(PktPool& pool, const std::vector<uint8_t>& d, uint32_t seg) {
    PktBuf* head = pkt_alloc(pool);
    REQUIRE(head != nullptr);
    const uint32_t first = std::max<uint32_t>(seg, kSlidwinHdrLen + kSlidwinAuthLen);
    uint32_t off = std::min<uint32_t>(first, static_cast<uint32_t>(d.size()));
    std::memcpy(pkt_append(head, off), d.data(), off);
    while (off < d.size()) {
        PktBuf* s = pkt_alloc(pool, 0);
        REQUIRE(s != nullptr);
        const uint32_t k = std::min<uint32_t>(seg, static_cast<uint32_t>(d.size()) - off);
        std::memcpy(pkt_append(s, k), d.data() + off, k);
        pkt_chain(head, s);
        off += k;
    }
    return head;
}

std::vector<uint8_t> flat(const PktBuf* p) {
    std::vector<uint8_t> v(p->pkt_len);
    REQUIRE(pkt_read(p, 0, p->pkt_len, v.data()) == p->pkt_len);
    return v;
}

}  // namespace

TEST_CASE("SlidwinCipher seals and opens what AES-128-GCM through EVP does, over segment chains", "[security]") {
    // SlidwinCipher drives GCM without an EVP_CIPHER_CTX: MAC-only datagrams through libcrypto's
    // GCM mode over AES-NI rounds of our own (where the CPU has AES-NI), the rest through the
    // provider's dispatch table. Both engines: the same bytes as EVP, in one segment or many,
    // and nothing a forged datagram can pass; the AES-NI path under many keys (its key schedule).
    std::string err;
    REQUIRE(slidwin_gcm_available(err));
    HeapPktPool pool(256, 4096);
    for (const SlidwinCipher::Engine engine : {SlidwinCipher::Engine::kFastest, SlidwinCipher::Engine::kProvider}) {
        SlidwinCipher c(engine);
        REQUIRE(c.ok());
        if (engine == SlidwinCipher::Engine::kProvider) REQUIRE(!c.mac_on_aesni());
        else if (!__builtin_cpu_supports("aes")) WARN("this CPU has no AES-NI: kFastest is the provider's GCM");
        else REQUIRE(c.mac_on_aesni());
        for (uint32_t k = 0; k < 40; ++k) {
            uint8_t key[16];
            for (int i = 0; i < 16; ++i) key[i] = static_cast<uint8_t>(k == 0 ? 0xa5 ^ (i * 29) : k * 97 + i * 61 + (k >> 2) * i * i);
            REQUIRE(c.set_key(key));
            for (const bool encrypt : {false, true})
                for (const uint32_t payload : {0u, 1u, 15u, 16u, 17u, 100u, 1000u})
                    for (const uint32_t seg : {2048u, 100u, 17u}) {
                        if (k > 0 && seg == 17u) continue;  // every key in whole segments; chains with the first
                        INFO("engine " << static_cast<int>(engine) << " key " << k << " encrypt " << encrypt << " payload "
                                       << payload << " segments of " << seg);
                        std::vector<uint8_t> plain(kSlidwinHdrLen + kSlidwinAuthLen + payload);
                        for (size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<uint8_t>(i * 13 + payload + k);
                        const uint64_t counter = 0x0102030405060708ull + payload + seg + (uint64_t{k} << 40);
                        const std::vector<uint8_t> want = evp_sealed(key, plain, counter, encrypt);
                        PktBuf* d = chain_of(pool, plain, seg);
                        REQUIRE(c.seal(d, counter, encrypt));
                        REQUIRE(flat(d) == want);
                        pkt_free(d);
                        // EVP's datagram opens (and decrypts back to the plaintext, the block kept) ...
                        d = chain_of(pool, want, seg);
                        REQUIRE(c.open(d, counter, encrypt));
                        std::vector<uint8_t> back = want;
                        if (encrypt) std::copy(plain.begin() + kSlidwinHdrLen + kSlidwinAuthLen, plain.end(),
                                               back.begin() + kSlidwinHdrLen + kSlidwinAuthLen);
                        REQUIRE(flat(d) == back);
                        pkt_free(d);
                        // ... under its own counter only, and a bit flipped anywhere is refused, without
                        // leaving anything in libcrypto's error queue (a forged datagram costs no allocation).
                        ERR_clear_error();
                        d = chain_of(pool, want, seg);
                        REQUIRE(!c.open(d, counter + 1, encrypt));
                        pkt_free(d);
                        for (size_t at : {size_t{3}, size_t{kSlidwinHdrLen + 2}, size_t{kSlidwinHdrLen + 8 + 5},
                                          want.size() - 1}) {
                            std::vector<uint8_t> bad = want;
                            bad[at] ^= 0x10;
                            d = chain_of(pool, bad, seg);
                            REQUIRE(!c.open(d, counter, encrypt));
                            pkt_free(d);
                        }
                        REQUIRE(ERR_peek_error() == 0);
                        // The context is fine after a refusal: the genuine one still opens.
                        d = chain_of(pool, want, seg);
                        REQUIRE(c.open(d, counter, encrypt));
                        pkt_free(d);
                    }
        }
    }
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("sealing with encryption forgets the payload sums pkt_write kept: the UDP checksum is the ciphertext's",
          "[security]") {
    // Convergence writes a piece's payload with its sums kept (PktBuf::sum, issue 35); encryption
    // then rewrites those bytes in place, after which a kept sum would checksum the plaintext and
    // the receiver would drop every copy of the datagram as corrupt.
    HeapPktPool pool(64, 2048);
    SlidwinCipher c;
    REQUIRE(c.ok());
    uint8_t key[16];
    for (int i = 0; i < 16; ++i) key[i] = static_cast<uint8_t>(i * 11 + 5);
    REQUIRE(c.set_key(key));
    std::vector<uint8_t> payload(5000);
    for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 31 + 7);
    PktBuf* d = pkt_alloc(pool, 64);
    std::memset(pkt_append(d, kSlidwinHdrLen + kSlidwinAuthLen), 0x11, kSlidwinHdrLen + kSlidwinAuthLen);
    REQUIRE(pkt_write(d, pool, payload.data(), static_cast<uint32_t>(payload.size()), PktSum::kKeep));
    REQUIRE(d->next != nullptr);
    REQUIRE(c.seal(d, 42, true));
    const std::vector<uint8_t> sealed = flat(d);
    REQUIRE(!std::equal(payload.begin(), payload.end(), sealed.begin() + kSlidwinHdrLen + kSlidwinAuthLen));
    REQUIRE(csum_finish(csum_chain(d, 0, d->pkt_len)) == csum_finish(csum_add(0, sealed.data(), sealed.size())));
    pkt_free(d);
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("a MAC-only datagram of every payload length 0..9000, in segment chains, seals and opens as EVP's",
          "[security]") {
    // The MAC-only path (SlidwinGmac where the CPU has AES-NI and PCLMULQDQ) over the chains
    // slidwin sends: the header and block in the first segment, the payload in segments of any size.
    HeapPktPool pool(1024, 4096);  // up to 530 segments of 17 bytes
    SlidwinCipher c;
    REQUIRE(c.ok());
    std::mt19937_64 rng(3709);
    uint8_t key[16];
    for (uint32_t payload = 0; payload <= 9000; ++payload) {
        if (payload % 100 == 0) {
            for (uint8_t& b : key) b = static_cast<uint8_t>(rng());
            REQUIRE(c.set_key(key));
        }
        std::vector<uint8_t> plain(kSlidwinHdrLen + kSlidwinAuthLen + payload);
        for (uint8_t& b : plain) b = static_cast<uint8_t>(rng());
        const uint64_t counter = rng() | 1;
        const uint32_t seg = 17 + static_cast<uint32_t>(rng() % 2032);  // the clusters' buffers hold 2 KiB
        INFO("payload " << payload << " segments of " << seg);
        const std::vector<uint8_t> want = evp_sealed(key, plain, counter, false);
        PktBuf* d = chain_of(pool, plain, seg);
        REQUIRE(c.seal(d, counter, false));
        REQUIRE(flat(d) == want);
        pkt_free(d);
        d = chain_of(pool, want, seg);
        REQUIRE(c.open(d, counter, false));
        pkt_free(d);
        std::vector<uint8_t> bad = want;
        bad[rng() % bad.size()] ^= 0x01;
        d = chain_of(pool, bad, seg);
        REQUIRE(!c.open(d, counter, false));
        pkt_free(d);
    }
    REQUIRE(pool.in_use() == 0);
}

namespace {

struct TempDir {
    std::string path;
    TempDir() {
        char d[] = "/tmp/iccs-keytest-XXXXXX";
        REQUIRE(mkdtemp(d) != nullptr);
        path = d;
    }
    ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

void write_file(const std::string& path, const std::vector<uint8_t>& bytes, mode_t mode) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    ::close(fd);
    REQUIRE(::chmod(path.c_str(), mode) == 0);
}

std::vector<uint8_t> key_bytes(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 7 + seed);
    return v;
}

// RFC 5869 §2.2 worked out here with HMAC: PRK = HMAC-SHA256(salt, IKM).
std::array<uint8_t, 32> extract(const std::vector<uint8_t>& ikm) {
    static const char salt[] = "iccs slidwin v3";
    std::array<uint8_t, 32> prk{};
    unsigned int len = 32;
    REQUIRE(HMAC(EVP_sha256(), salt, sizeof salt - 1, ikm.data(), ikm.size(), prk.data(), &len) != nullptr);
    return prk;
}

}  // namespace

TEST_CASE("a key file is checked on the descriptor that reads it, and refused with the reason", "[security]") {
    TempDir dir;
    const std::string path = dir.path + "/key";
    std::string err;
    REQUIRE(slidwin_load_key(path, false, err) == nullptr);
    REQUIRE(err == "key file " + path + ": No such file or directory");
    write_file(path, key_bytes(31, 1), 0600);
    REQUIRE(slidwin_load_key(path, false, err) == nullptr);
    REQUIRE(err == "key file " + path +
                       ": 31 bytes; at least 32 random bytes are needed (e.g. head -c 32 /dev/urandom > " + path + ")");
    write_file(path, key_bytes(32, 1), 0640);
    REQUIRE(slidwin_load_key(path, false, err) == nullptr);
    REQUIRE(err == "key file " + path + ": group or others have access (mode 0640): chmod 600 " + path);
    write_file(path, key_bytes(32, 1), 0602);  // others may write: they could swap the key
    REQUIRE(slidwin_load_key(path, false, err) == nullptr);
    write_file(path, key_bytes(5000, 1), 0600);
    REQUIRE(slidwin_load_key(path, false, err) == nullptr);
    REQUIRE(err == "key file " + path + ": 5000 bytes, more than a key file holds (32..4096 random bytes)");
    // A symlink to a good key file is refused (O_NOFOLLOW): whoever can plant one picks the key.
    const std::string real = dir.path + "/real";
    write_file(real, key_bytes(32, 1), 0600);
    REQUIRE(::unlink(path.c_str()) == 0);
    REQUIRE(::symlink(real.c_str(), path.c_str()) == 0);
    REQUIRE(slidwin_load_key(path, false, err) == nullptr);
    REQUIRE(err == "key file " + path + ": a symlink (refused: name the file itself)");
    ::unlink(path.c_str());
    // A FIFO does not block the open, and is refused.
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
    REQUIRE(slidwin_load_key(path, false, err) == nullptr);
    REQUIRE(err == "key file " + path + ": not a regular file");
    ::unlink(path.c_str());
    // Owned by another user: refused, even for root.
    write_file(path, key_bytes(32, 1), 0600);
    if (::geteuid() == 0) {
        REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
        REQUIRE(slidwin_load_key(path, false, err) == nullptr);
        REQUIRE(err == "key file " + path + ": owned by UID 65534, not by this user (UID 0): a key file must be its "
                                            "user's own");
        REQUIRE(::chown(path.c_str(), 0, 0) == 0);
    } else {
        WARN("not root: the other-owner case needs chown (skipped)");
    }
    // The good one: what is kept is HKDF-Extract of the bytes, nothing of the bytes themselves.
    const auto k = slidwin_load_key(path, true, err);
    REQUIRE(k != nullptr);
    REQUIRE(k->encrypt);
    REQUIRE(k->prk == extract(key_bytes(32, 1)));
}

TEST_CASE("a key file swapped while it is loaded: what was checked is what was read", "[security]") {
    // The name flips between a good key file (0600) and a bad one (0644, other bytes) as fast as
    // a thread can swap them (renameat2 RENAME_EXCHANGE). A check by name and a read by name can
    // land on different files; a check on the descriptor that reads cannot: every key that loads
    // is the good file's.
    TempDir dir;
    const std::string path = dir.path + "/key", other = dir.path + "/other";
    write_file(path, key_bytes(32, 1), 0600);
    write_file(other, key_bytes(32, 99), 0644);
    const auto good = extract(key_bytes(32, 1));
    std::atomic<bool> stop{false};
    std::thread swapper([&] {
        while (!stop.load(std::memory_order_relaxed))
            ::renameat2(AT_FDCWD, path.c_str(), AT_FDCWD, other.c_str(), RENAME_EXCHANGE);
    });
    uint64_t loaded = 0, refused = 0, wrong = 0;
    for (int i = 0; i < 20000; ++i) {
        std::string err;
        const auto k = slidwin_load_key(path, false, err);
        if (k == nullptr) {
            ++refused;
            continue;
        }
        ++loaded;
        wrong += k->prk != good;
    }
    stop = true;
    swapper.join();
    INFO("loaded " << loaded << ", refused " << refused);
    REQUIRE(wrong == 0);
    REQUIRE(loaded > 0);
}

TEST_CASE("owner-only files and directories are checked on their descriptors", "[security]") {
    TempDir dir;
    std::string err;
    // A file of ours with loose bits: taken, made 0600.
    const std::string f = dir.path + "/counters.json";
    write_file(f, {1, 2, 3}, 0644);
    int fd = open_private_file(f, err);
    REQUIRE(fd >= 0);
    struct stat st{};
    REQUIRE(::fstat(fd, &st) == 0);
    REQUIRE((st.st_mode & 0777) == 0600);
    REQUIRE(st.st_size == 0);
    ::close(fd);
    // A symlink planted at the name: refused.
    const std::string link = dir.path + "/capture.pcapng";
    REQUIRE(::symlink(f.c_str(), link.c_str()) == 0);
    REQUIRE(open_private_file(link, err) < 0);
    // A directory of ours with loose bits: made 0700; a symlink to one: refused.
    const std::string d = dir.path + "/run";
    REQUIRE(::mkdir(d.c_str(), 0755) == 0);
    REQUIRE(make_private_dir(d, err));
    REQUIRE(::stat(d.c_str(), &st) == 0);
    REQUIRE((st.st_mode & 0777) == 0700);
    const std::string dlink = dir.path + "/runlink";
    REQUIRE(::symlink(d.c_str(), dlink.c_str()) == 0);
    REQUIRE(!make_private_dir(dlink, err));
    REQUIRE(err == dlink + ": is a symlink, not a directory of ours (refused)");
    if (::geteuid() != 0) {
        WARN("not root: the other-owner cases need chown (skipped)");
        return;
    }
    // Another user's file and directory: never taken over (root could truncate and chmod them).
    write_file(f, {1, 2, 3}, 0644);
    REQUIRE(::chown(f.c_str(), 65534, 65534) == 0);
    REQUIRE(open_private_file(f, err) < 0);
    REQUIRE(err == f + ": permission denied: owned by UID 65534");
    REQUIRE(::stat(f.c_str(), &st) == 0);
    REQUIRE(st.st_size == 3);  // not truncated
    REQUIRE((st.st_mode & 0777) == 0644);
    REQUIRE(::chown(d.c_str(), 65534, 65534) == 0);
    REQUIRE(::chmod(d.c_str(), 0755) == 0);
    REQUIRE(!make_private_dir(d, err));
    REQUIRE(err == d + ": permission denied: owned by UID 65534");
    REQUIRE(::stat(d.c_str(), &st) == 0);
    REQUIRE((st.st_mode & 0777) == 0755);
}

TEST_CASE("with a key only an authenticated datagram proves the peer alive: a forged one is not heard",
          "[security]") {
    // The proxy's peer time-out counts any datagram slidwin takes as its confirmed peer's
    // (SubConnection::last_valid_rx_ns): with a key that must never be a frame made without it,
    // or a forger could keep a dead cluster "alive".
    for (const bool encrypt : {false, true}) {
        INFO("encrypt " << encrypt);
        const SlidwinAuthKey key = test_key(encrypt);
        SlidwinConfig cfg;
        cfg.auth = &key;
        std::vector<Frame> wire;
        Link l{cfg};
        l.handshake();
        l.record_a_to_b = &wire;
        l.send_a(3);
        l.record_a_to_b = nullptr;
        const uint64_t heard = l.sb->last_valid_rx_ns();
        REQUIRE(heard > 0);
        l.settle();
        const uint64_t drops = l.sb->counters().drop_auth, replays = l.sb->counters().drop_replay;
        // a's token, in the window, everything right but the key: without the auth block, with a
        // made-up one; and a real frame of a's sent again (a replay).
        const uint8_t enc = encrypt ? kSwEnc : 0;
        l.inject(l.b, l.pool_b, l.forge(kSwAck, 0, l.sb->snd_sent(), l.sa->local_token()));
        l.inject(l.b, l.pool_b, l.forge(static_cast<uint8_t>(kSwAuth | enc | kSwAck), 0, l.sb->snd_sent(),
                                        l.sa->local_token()));
        l.inject(l.b, l.pool_b, wire.back());
        l.ep_b->end_of_burst(l.now);
        REQUIRE(l.sb->counters().drop_auth == drops + 2);
        REQUIRE(l.sb->counters().drop_replay == replays + 1);
        REQUIRE(l.sb->last_valid_rx_ns() == heard);
        // a's keepalive, sealed with the key: heard.
        REQUIRE(slidwin_keepalive(*l.sa, l.now));
        const uint64_t at = l.now;
        l.step();
        REQUIRE(l.sb->last_valid_rx_ns() == at);
        REQUIRE(l.sb->counters().drop_auth == drops + 2);
    }
}
