// be.hpp: big-endian wire integers as types.
//
// A wire field can only be read through .get() and written through .set(): there is no implicit
// conversion, so forgetting a byte swap is a compile error rather than a packet bug (TAS's beui16_t).
// The types are packed (alignment 1): wire headers put them at any offset (ARP's 32-bit
// addresses sit at offsets 14 and 24), and a member call on a misaligned be32 would be UB.
#pragma once

#include <cstdint>
#include <cstring>

namespace iccs {

struct __attribute__((packed)) be16 {
    uint16_t raw;  // network order as stored on the wire
    constexpr uint16_t get() const { return __builtin_bswap16(raw); }
    constexpr void set(uint16_t v) { raw = __builtin_bswap16(v); }
    static constexpr be16 of(uint16_t v) { return be16{__builtin_bswap16(v)}; }
    friend constexpr bool operator==(be16 a, be16 b) { return a.raw == b.raw; }
};

struct __attribute__((packed)) be32 {
    uint32_t raw;
    constexpr uint32_t get() const { return __builtin_bswap32(raw); }
    constexpr void set(uint32_t v) { raw = __builtin_bswap32(v); }
    static constexpr be32 of(uint32_t v) { return be32{__builtin_bswap32(v)}; }
    friend constexpr bool operator==(be32 a, be32 b) { return a.raw == b.raw; }
};

struct __attribute__((packed)) be64 {
    uint64_t raw;
    constexpr uint64_t get() const { return __builtin_bswap64(raw); }
    constexpr void set(uint64_t v) { raw = __builtin_bswap64(v); }
    static constexpr be64 of(uint64_t v) { return be64{__builtin_bswap64(v)}; }
};

static_assert(sizeof(be16) == 2 && sizeof(be32) == 4 && sizeof(be64) == 8);
static_assert(alignof(be32) == 1 && alignof(be64) == 1);

// Headers are read from and written to byte buffers that need not be aligned: go through memcpy.
template <typename Hdr>
inline Hdr load_hdr(const uint8_t* p) {
    Hdr h;
    std::memcpy(&h, p, sizeof(Hdr));
    return h;
}
template <typename Hdr>
inline void store_hdr(uint8_t* p, const Hdr& h) {
    std::memcpy(p, &h, sizeof(Hdr));
}

}  // namespace iccs

namespace iccs {

// Hot-path header writes: a header built field by field in a local struct and then copied out is
// read back with wider loads than it was written with, and each such load waits for the stores
// to drain (a store-forwarding stall, ~12 cycles). Writers instead compose whole 64-bit words in
// registers (little-endian host: byte i of the wire is bits 8i..8i+7) and store them once.
inline void store_u64(uint8_t* p, uint64_t w) { std::memcpy(p, &w, 8); }
inline void store_u32(uint8_t* p, uint32_t w) { std::memcpy(p, &w, 4); }
inline void store_u16(uint8_t* p, uint16_t w) { std::memcpy(p, &w, 2); }
inline uint16_t load_be16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return __builtin_bswap16(v);
}
inline uint32_t load_be32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return __builtin_bswap32(v);
}
inline uint64_t load_be64(const uint8_t* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}
// The wire bytes of a big-endian value, as the low bytes of a little-endian word.
constexpr uint64_t wire16(uint16_t v) { return __builtin_bswap16(v); }
constexpr uint64_t wire32(uint32_t v) { return __builtin_bswap32(v); }

}  // namespace iccs
