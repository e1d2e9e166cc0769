// wb_common.hpp: small pieces shared by the programs atpg, ida, ra and acp (not the framework):
// a seeded generator of deterministic inputs, and a barrier of the compute threads of one cluster
// process (no message: they share the process).
#pragma once

#include <atomic>
#include <cstdint>

#include "widearea.hpp"

namespace iccs::widearea {

// splitmix64: a stateless mix (hash of a key) and a stream from a seed.
inline uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(mix64(seed)) {}
    uint64_t next() { return mix64(s += 0x632BE59BD9B4E019ull); }
    uint32_t below(uint32_t n) { return uint32_t((next() >> 32) * n >> 32); }
};

// A barrier of this process's compute threads (every thread calls arrive() the same number of
// times); it runs the thread's handlers while it waits (Ctx::wait).
class LocalSync {
public:
    bool arrive(Ctx& c, uint64_t& generation, const char* what) {
        const uint64_t target = uint64_t{c.threads} * ++generation;
        if (count_.fetch_add(1, std::memory_order_acq_rel) + 1 == target)
            for (uint16_t t = 0; t < c.threads; ++t)
                if (t != c.thread) c.rt.endpoint(t).notify();
        return c.wait([&] { return count_.load(std::memory_order_acquire) >= target; }, what);
    }

private:
    std::atomic<uint64_t> count_{0};
};

}  // namespace iccs::widearea
