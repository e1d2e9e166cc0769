// bench_auth_stages.cpp: see bench_auth_stages.hpp.
#include "bench_auth_stages.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <functional>
#include <vector>

#include "slidwin_hdr.hpp"

namespace iccs {

namespace {

uint64_t cpu_ns() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// A slidwin datagram as sealed: header, auth block, `payload` bytes, in one segment.
PktBuf* datagram(PktPool& pool, uint32_t payload) {
    PktBuf* d = pkt_alloc(pool);
    if (d == nullptr) return nullptr;
    uint8_t* p = pkt_append(d, kSlidwinHdrLen + kSlidwinAuthLen + payload);
    for (uint32_t i = 0; i < kSlidwinHdrLen + kSlidwinAuthLen + payload; ++i) p[i] = static_cast<uint8_t>(i * 7 + 3);
    p[offsetof(SlidwinHdr, flags)] = kSwAck | kSwAuth | (payload != 0 ? kSwData : 0);
    return d;
}

// The seal slidwin did before: one EVP_CIPHER_CTX per key, re-initialised with the IV only,
// the header and payload as authenticated data (MAC) or the payload as text (encrypt), the tag
// read with EVP_CIPHER_CTX_ctrl. Same key, same nonce layout: the same bytes as
// SlidwinCipher::seal, which the benchmark checks.
struct EvpSeal {
    EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
    explicit EvpSeal(const uint8_t key[16]) {
        if (ctx != nullptr && EVP_CipherInit_ex(ctx, EVP_aes_128_gcm(), nullptr, key, nullptr, 1) != 1) {
            EVP_CIPHER_CTX_free(ctx);
            ctx = nullptr;
        }
    }
    ~EvpSeal() { EVP_CIPHER_CTX_free(ctx); }
    bool seal(PktBuf* d, uint64_t counter, bool encrypt) {
        uint8_t* h = d->data();
        uint8_t iv[12] = {};
        for (int i = 0; i < 8; ++i) h[kSlidwinHdrLen + i] = iv[4 + i] = static_cast<uint8_t>(counter >> (56 - 8 * i));
        uint8_t* text = h + kSlidwinHdrLen + kSlidwinAuthLen;
        const int len = static_cast<int>(d->data_len - kSlidwinHdrLen - kSlidwinAuthLen);
        int n = 0;
        uint8_t fin[16];
        return ctx != nullptr && EVP_CipherInit_ex(ctx, nullptr, nullptr, nullptr, iv, 1) == 1 &&
               EVP_CipherUpdate(ctx, nullptr, &n, h, kSlidwinHdrLen + 8) == 1 &&
               (len == 0 || EVP_CipherUpdate(ctx, encrypt ? text : nullptr, &n, text, len) == 1) &&
               EVP_CipherFinal_ex(ctx, fin, &n) == 1 &&
               EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, kSlidwinAuthTagLen, h + kSlidwinHdrLen + 8) == 1;
    }
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

}  // namespace

AuthStagesResult bench_auth_stages(const SlidwinAuthKey& key, uint32_t size, uint32_t reps, uint32_t runs) {
    AuthStagesResult r;
    HeapPktPool pool(64, 2048 + size);
    SlidwinKdf kdf(key);
    SlidwinCipher c, c2, prov(SlidwinCipher::Engine::kProvider);
    uint8_t k16[16];
    if (!kdf.ok() || !c.ok() || !kdf.derive(k16, SlidwinKeyUse::kData, 0, 1, 2, 3, 4) || !c.set_key(k16) ||
        !c2.set_key(k16) || !prov.set_key(k16)) {
        r.error = "libcrypto refused the key set-up";
        return r;
    }
    EvpSeal evp(k16);
    PktBuf* data = datagram(pool, size);
    PktBuf* ack = datagram(pool, 0);
    PktBuf* other = datagram(pool, size);
    if (data == nullptr || ack == nullptr || other == nullptr || evp.ctx == nullptr) {
        r.error = "no buffer or no EVP context";
        return r;
    }
    const bool enc = key.encrypt;
    // The baseline must compute what SlidwinCipher computes, byte for byte.
    if (!c.seal(data, 77, enc) || !evp.seal(other, 77, enc) ||
        std::memcmp(data->data(), other->data(), data->data_len) != 0) {
        r.error = "the EVP baseline's seal differs from SlidwinCipher::seal";
        return r;
    }
    // (A fresh datagram: with encryption the EVP baseline's seal encrypted `other` in place.)
    pkt_free(other);
    other = datagram(pool, size);
    if (other == nullptr || !prov.seal(other, 77, enc) ||
        std::memcmp(data->data(), other->data(), data->data_len) != 0) {
        r.error = "the provider baseline's seal differs from SlidwinCipher::seal";
        return r;
    }
    r.mac_on_aesni = !enc && c.mac_on_aesni();
    SlidwinReplayWindow window(4096);
    uint64_t counter = 1000;
    bool ok = true;
    // An open is timed on its own: before each batch of calls, untimed, `seal_batch` seals the
    // datagrams the calls then open. (Timing seal + open and subtracting a separately timed seal
    // gave a difference of two noisy figures, which went below zero on a busy host.)
    struct Stage {
        const char* key;
        const char* what;
        std::function<bool()> call;
        std::function<bool()> seal_batch = nullptr;
    };
    constexpr uint32_t kOpenBatch = 256;  // two clock reads per 256 opens: under 2 ns each
    HeapPktPool open_pool(2 * kOpenBatch, 2048 + size);
    std::vector<PktBuf*> open_acks, open_datas;
    for (uint32_t i = 0; i < kOpenBatch; ++i) {
        open_acks.push_back(datagram(open_pool, 0));
        open_datas.push_back(datagram(open_pool, size));
        if (open_acks.back() == nullptr || open_datas.back() == nullptr) {
            r.error = "no buffer for the datagrams the opens take";
            return r;
        }
    }
    std::vector<uint64_t> open_counter(kOpenBatch);
    size_t open_next = 0;
    auto seal_all = [&](SlidwinCipher& cipher, std::vector<PktBuf*>& batch) {
        open_next = 0;
        for (uint32_t i = 0; i < kOpenBatch; ++i)
            if (!cipher.seal(batch[i], open_counter[i] = ++counter, enc)) return false;
        return true;
    };
    auto open_one = [&](SlidwinCipher& cipher, std::vector<PktBuf*>& batch) {
        const size_t i = open_next++;
        return cipher.open(batch[i], open_counter[i], enc);
    };
    std::vector<Stage> stages = {
        {"kdf_expand", "HKDF-Expand: one datagram key (at a key set-up)",
         [&] { return kdf.derive(k16, SlidwinKeyUse::kData, static_cast<uint32_t>(++counter), 1, 2, 3, 4); }},
        {"key_schedule", "AES-128 key schedule (at a key set-up)", [&] { return c2.set_key(k16); }},
        {"seal_ack", "seal: ack-only datagram (64 bytes)", [&] { return c.seal(ack, ++counter, enc); }},
        {"open_ack", "open: ack-only datagram", [&] { return open_one(c, open_acks); },
         [&] { return seal_all(c, open_acks); }},
        {"seal_data", "seal: data datagram", [&] { return c.seal(data, ++counter, enc); }},
        {"open_data", "open: data datagram", [&] { return open_one(c, open_datas); },
         [&] { return seal_all(c, open_datas); }},
        {"seal_ack_provider", "seal: ack-only datagram, all through the provider's GCM",
         [&] { return prov.seal(ack, ++counter, enc); }},
        {"seal_data_provider", "seal: data datagram, all through the provider's GCM",
         [&] { return prov.seal(other, ++counter, enc); }},
        {"open_data_provider", "open: data datagram, all through the provider's GCM",
         [&] { return open_one(prov, open_datas); }, [&] { return seal_all(prov, open_datas); }},
        {"seal_ack_evp", "seal: ack-only datagram through EVP_CIPHER_CTX (before)",
         [&] { return evp.seal(ack, ++counter, enc); }},
        {"seal_data_evp", "seal: data datagram through EVP_CIPHER_CTX (before)",
         [&] { return evp.seal(other, ++counter, enc); }},
        {"replay_window", "anti-replay window: fresh + mark", [&] {
             ++counter;
             const bool f = window.fresh(counter);
             window.mark(counter);
             return f;
         }},
    };
    if (enc)
        stages.push_back({"seal_copy", "seal a retransmission into a copy (encrypt)", [&] {
                              PktBuf* cp = c.seal_copy(data, ++counter, pool, kPktHeadroom);
                              pkt_free(cp);
                              return cp != nullptr;
                          }});
    std::vector<std::vector<double>> ns(stages.size());
    for (uint32_t run = 0; run < runs + 1 && ok; ++run)  // run 0 warms up, not counted
        for (size_t i = 0; i < stages.size() && ok; ++i) {
            uint64_t spent = 0;
            for (uint32_t k = 0; k < reps && ok;) {
                const uint32_t n = stages[i].seal_batch ? std::min(kOpenBatch, reps - k) : reps - k;
                if (stages[i].seal_batch) ok = stages[i].seal_batch();
                const uint64_t t0 = cpu_ns();
                for (uint32_t j = 0; j < n; ++j) ok = stages[i].call() && ok;
                spent += cpu_ns() - t0;
                k += n;
            }
            if (run > 0) ns[i].push_back(static_cast<double>(spent) / reps);
        }
    pkt_free(data);
    pkt_free(ack);
    pkt_free(other);
    for (uint32_t i = 0; i < kOpenBatch; ++i) {
        pkt_free(open_acks[i]);
        pkt_free(open_datas[i]);
    }
    if (!ok) {
        r.error = "a stage failed (libcrypto refused a call)";
        return r;
    }
    for (size_t i = 0; i < stages.size(); ++i) {
        const std::vector<double>& v = ns[i];
        AuthStage s{stages[i].key, stages[i].what, median(v), *std::min_element(v.begin(), v.end()),
                    *std::max_element(v.begin(), v.end())};
        r.stages.push_back(s);
    }
    double ours = 0, before = 0, provider = 0;
    for (const AuthStage& s : r.stages) {
        if (s.key == "seal_data") ours = s.ns;
        if (s.key == "seal_data_evp") before = s.ns;
        if (s.key == "seal_data_provider") provider = s.ns;
    }
    r.evp_over_ours = ours > 0 ? before / ours : 0;
    r.provider_over_ours = ours > 0 ? provider / ours : 0;
    return r;
}

}  // namespace iccs
