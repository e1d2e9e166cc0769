// proxy_impl.hpp: what the files of the proxy (proxy*.cpp) share and no other part uses.
#pragma once

#include <cstdint>

#include "proxy.hpp"

namespace iccs {

// Sub-connection ids: one per proxy of the machine (the receiver's index of its peer).
inline uint16_t global_id(uint16_t cluster, uint16_t index) { return static_cast<uint16_t>(cluster * 64 + index); }
inline constexpr uint32_t kBurst = 32;

}  // namespace iccs
