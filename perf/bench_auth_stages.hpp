// bench_auth_stages.hpp: what authenticating a datagram costs, stage by stage (issue 37), for
// `bench stack --key`: each stage run alone in a loop on one thread, CPU ns per call.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "slidwin_auth.hpp"

namespace iccs {

struct AuthStage {
    std::string key;    // JSON key
    std::string what;   // table row
    double ns = 0;      // median CPU ns per call over the runs
    double min = 0, max = 0;
};

struct AuthStagesResult {
    std::vector<AuthStage> stages;
    // The data datagram's seal through an EVP_CIPHER_CTX reused with only the IV changed (how
    // slidwin sealed before, kept here as the same-run baseline) over SlidwinCipher::seal.
    double evp_over_ours = 0;
    // The same through the provider's GCM alone (SlidwinCipher::Engine::kProvider: how slidwin
    // sealed MAC-only datagrams before they went through the GCM mode over AES-NI rounds).
    double provider_over_ours = 0;
    bool mac_on_aesni = false;  // the data datagram's seal ran the AES-NI path (MAC only, CPU with AES-NI)
    std::string error;  // a stage that could not run (libcrypto refused), or a seal the
                        // baseline computed differently
};

// size: the data datagram's slidwin payload [bytes]; reps: calls per stage per run.
AuthStagesResult bench_auth_stages(const SlidwinAuthKey& key, uint32_t size, uint32_t reps, uint32_t runs);

}  // namespace iccs
