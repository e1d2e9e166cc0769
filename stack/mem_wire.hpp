// mem_wire.hpp: the in-memory wire between two Stacks, a fake device for tests, the demo and
// the stack benchmark (the seam eRPC calls its fake transport).
//
// pump() moves every frame queued on either stack's TX side to the other stack's input, as a
// NIC would: the receiver gets its own copy in buffers of its own pool and the sender's frame is
// freed. On the way it can drop, duplicate, reorder (hold up to `reorder_window` frames and let
// them out in random order) and corrupt (flip one random bit) frames, from a seeded generator,
// so every run is reproducible (corruption turns both stacks' UDP checksums on, whatever their
// udp_checksum_off says); a test can also drop by a rule of its own (`drop_if`).
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "stack.hpp"

namespace iccs {

// The address plan of a host on the in-memory wire: MAC 02:00:00:00:00:<last>, IPv4 10.0.0.<last>.
inline StackConfig mem_wire_host(uint8_t last, uint32_t mtu_bytes = 1500) {
    StackConfig c;
    c.mac = MacAddr{{0x02, 0, 0, 0, 0, last}};
    c.ip = Ipv4Addr{0x0a000000u | last};
    c.mtu_bytes = mtu_bytes;
    return c;
}

struct WireImpairment {
    double drop = 0.0;             // probability a frame is lost
    double duplicate = 0.0;        // probability a frame arrives twice
    double corrupt = 0.0;          // probability one bit of a frame is flipped
    uint32_t reorder_window = 0;   // frames held back and released in random order (0: FIFO)
    uint64_t seed = 1;
    // The test's own loss pattern (deterministic droppers: every N-th frame, only acks, ...):
    // asked about every frame, in wire order, before the random draws; true drops it (counted in
    // `dropped`). dir 0: a -> b, 1: b -> a; the frame's data() is at its Ethernet header.
    std::function<bool(int dir, const PktBuf& frame)> drop_if;
};

struct WireCounters {
    uint64_t frames = 0, bytes = 0, dropped = 0, duplicated = 0, corrupted = 0, reordered = 0, nobuf = 0;
};

class MemWire {
   public:
    MemWire(Stack& a, Stack& b, const WireImpairment& imp = {});
    ~MemWire();
    MemWire(const MemWire&) = delete;
    MemWire& operator=(const MemWire&) = delete;

    // Move frames both ways and feed them to the stacks in bursts of up to 32. Frames held for
    // reordering are released when the window is full, or all of them when `flush_held` (so a
    // quiet wire never sits on a frame forever). Returns frames delivered.
    uint32_t pump(uint64_t now_ns, bool flush_held = false);
    void set_impairment(const WireImpairment& imp);
    const WireCounters& counters() const { return ctr_; }
    uint32_t held() const { return static_cast<uint32_t>(held_[0].size() + held_[1].size()); }

   private:
    uint32_t move(int dir, uint64_t now_ns, bool flush_held);
    // Corruption on: both stacks check every UDP checksum (Stack::sum_every_datagram; a
    // StackConfig::udp_checksum_off of theirs is ignored).
    void sum_both_ends();
    Stack* ends_[2];
    WireImpairment imp_;
    std::mt19937_64 rng_;
    std::uniform_real_distribution<double> unit_{0.0, 1.0};
    std::vector<PktBuf*> held_[2];
    std::vector<PktBuf*> ready_;
    WireCounters ctr_;
};

}  // namespace iccs
