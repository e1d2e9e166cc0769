// fuzz_udp: UDP datagrams (header + payload) into the stack, wrapped in a valid Ethernet frame
// and IPv4 header (10.0.0.1 -> 10.0.0.2, correct header checksum, total length from the size),
// optionally cut into IPv4 fragments so they reach UDP through reassembly as chains.
//
// Input: byte 0 flags, byte 1 fragmenting and cutting, then the UDP datagram.
//   byte 0: 0x01 UDP length field := bytes given   0x02 UDP checksum fixed (over the length field)
//           0x04 destination port := 0x18 selects 7 (echo), 9 (discard), 19 (echo a copy), 4242 (unbound)
//           0x20 fragments go in reverse order    0x40 IPv4 destination broadcast
//           0x80 the stack's MTU is 576 instead of 1500 (its echoes fragment sooner)
//   byte 1: low 4 bits how each frame is cut into segments (fuzz::split_from);
//           high 4 bits 0: one IPv4 datagram, else fragments of 8 * k payload bytes each.
// Echoes to 10.0.0.1 go to a peer stack that must receive them intact (fuzz_common.hpp).
#include "fuzz_common.hpp"

using namespace fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static FuzzPool pool(4096, 2048);
    if (size < 2 || size > 65515 + 2) return 0;
    Reader in(data, size);
    const uint8_t f0 = in.u8();
    const uint8_t f1 = in.u8();
    std::vector<uint8_t> udp = in.rest();
    const Ipv4Addr src = kIpA;
    const Ipv4Addr dst = (f0 & 0x40) ? kIpBcast : kIpB;

    if (udp.size() >= 8) {
        if (f0 & 0x01) set16(&udp[4], static_cast<uint16_t>(udp.size()));
        if (f0 & 0x04) {
            static constexpr uint16_t kPorts[4] = {kPortEcho, kPortDiscard, kPortEchoCopy, 4242};
            set16(&udp[2], kPorts[(f0 >> 3) & 3]);
        }
        const size_t ulen = get16(&udp[4]);
        if ((f0 & 0x02) && ulen >= 8 && ulen <= udp.size()) set16(&udp[6], udp_csum(src, dst, udp.data(), ulen));
    }

    // One datagram, or fragments of chunk bytes (the last one takes the rest).
    static constexpr uint32_t kChunks[16] = {0, 8, 16, 24, 64, 72, 256, 512, 544, 1000, 1024, 1472, 1480, 2048, 4000, 8000};
    const uint32_t chunk = kChunks[f1 >> 4];
    const Split split = split_from(static_cast<uint8_t>(f1 & 0x0f));
    std::vector<std::vector<uint8_t>> frames;
    uint32_t off = 0;
    do {
        const uint32_t left = static_cast<uint32_t>(udp.size()) - off;
        const uint32_t len = chunk == 0 || left <= chunk ? left : chunk;
        const bool more = off + len < udp.size();
        std::vector<uint8_t> fr;
        put_eth(fr, dst == kIpBcast ? MacAddr::broadcast() : kMacB, kMacA, kEtherTypeIpv4);
        put_ipv4(fr, src, dst, kIpProtoUdp, 0x4242, static_cast<uint16_t>((off / 8) | (more ? kIpFlagMF : 0)), len);
        fr.insert(fr.end(), udp.begin() + off, udp.begin() + off + len);
        frames.push_back(std::move(fr));
        off += len;
    } while (off < udp.size());
    if (f0 & 0x20) std::reverse(frames.begin(), frames.end());

    {
        EchoRig rig(pool, (f0 & 0x80) ? 576 : 1500);
        for (const auto& fr : frames) rig.feed(make_pkt(pool, fr, split));
        rig.finish();
    }
    pool.end_of_input();
    return 0;
}
