// fuzz_ipv4: IPv4 packets (header, options, fragments, payload) into the stack, behind a valid
// Ethernet header for 02:00:00:00:00:02.
//
// Input: byte 0 flags, byte 1 how the frame is cut into segments (fuzz::split_from), then the
// IPv4 packet. Flags, applied in this order so the fuzzer gets past the checks it cannot guess:
//   0x04 destination := 10.0.0.2        0x02 total length := bytes given
//   0x08 UDP checksum fixed (when the packet is UDP and its length field fits)
//   0x01 header checksum fixed (over the claimed header length, clamped to the bytes given)
//   0x30 MTU of the stack: 576, 1500, 9000, 1280 (echoes are fragmented to it)
//   0x40 Ethernet destination broadcast    0x80 the frame arrives twice
// Ports 7 (echo), 9 (discard), 19 (echo a copy) are bound; echoes to 10.0.0.1 go to a peer
// stack that must receive them intact. See fuzz_common.hpp for what else is checked.
#include "fuzz_common.hpp"

using namespace fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static FuzzPool pool(4096, 2048);
    if (size < 2 || size > 70000) return 0;
    Reader in(data, size);
    const uint8_t flags = in.u8();
    const Split split = split_from(in.u8());
    std::vector<uint8_t> ip = in.rest();

    if ((flags & 0x04) && ip.size() >= 20) {
        ip[16] = 10, ip[17] = 0, ip[18] = 0, ip[19] = 2;
    }
    if ((flags & 0x02) && ip.size() >= 4) set16(&ip[2], static_cast<uint16_t>(std::min<size_t>(ip.size(), 0xffff)));
    const size_t hl = ip.empty() ? 0 : (ip[0] & 0x0fu) * 4u;
    if ((flags & 0x08) && hl >= 20 && ip.size() >= hl + 8 && ip[9] == kIpProtoUdp) {
        uint8_t* u = &ip[hl];
        const size_t ulen = get16(u + 4);
        if (ulen >= 8 && ulen <= ip.size() - hl)
            set16(u + 6, udp_csum(Ipv4Addr{get32(&ip[12])}, Ipv4Addr{get32(&ip[16])}, u, ulen));
    }
    if ((flags & 0x01) && ip.size() >= 12) set16(&ip[10], ipv4_csum(ip.data(), std::min(hl, ip.size())));

    static constexpr uint32_t kMtus[4] = {576, 1500, 9000, 1280};
    std::vector<uint8_t> frame;
    put_eth(frame, (flags & 0x40) ? MacAddr::broadcast() : kMacB, kMacA, kEtherTypeIpv4);
    frame.insert(frame.end(), ip.begin(), ip.end());
    {
        EchoRig rig(pool, kMtus[(flags >> 4) & 3]);
        rig.feed(make_pkt(pool, frame, split));
        if (flags & 0x80) rig.feed(make_pkt(pool, frame, split));
        rig.finish();
    }
    pool.end_of_input();
    return 0;
}
