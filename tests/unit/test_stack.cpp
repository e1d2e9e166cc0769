// The Stack end to end over the in-memory wire: ARP resolution, UDP with IP fragmentation, and
// every drop counted under its own name.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "mem_wire.hpp"
#include "stack.hpp"

using namespace iccs;

namespace {

StackConfig host(uint8_t last, uint32_t mtu = 1500) { return mem_wire_host(last, mtu); }

struct Collect : UdpHandler {
    std::vector<std::vector<uint8_t>> got;
    void udp_deliver(PktBuf* p, const UdpMeta&, uint64_t) override {
        std::vector<uint8_t> v(p->pkt_len);
        pkt_read(p, 0, p->pkt_len, v.data());
        got.push_back(std::move(v));
        pkt_free(p);
    }
};

std::vector<uint8_t> pattern(uint32_t n, uint32_t seed) {
    std::vector<uint8_t> v(n);
    for (uint32_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 + seed);
    return v;
}

PktBuf* msg(PktPool& pool, const std::vector<uint8_t>& v) {
    PktBuf* p = pkt_alloc(pool);
    REQUIRE(pkt_write(p, pool, v.data(), static_cast<uint32_t>(v.size())));
    return p;
}

}  // namespace

TEST_CASE("ARP resolves on first use and held packets go out in order", "[stack]") {
    HeapPktPool pa(256, 2048), pb(256, 2048);
    {
        Stack a(host(1), pa), b(host(2), pb);
        MemWire wire(a, b);
        Collect rx;
        b.bind(7000, &rx);
        for (uint32_t i = 0; i < 3; ++i) REQUIRE(a.udp_output(msg(pa, pattern(10, i)), 7000, b.config().ip, 7000));
        REQUIRE(a.counters().arp_tx_request == 1);  // one request for three packets
        REQUIRE(rx.got.empty());
        wire.pump(0);
        REQUIRE(b.counters().arp_rx_request == 1);
        REQUIRE(a.counters().arp_rx_reply == 1);
        wire.pump(0);
        REQUIRE(rx.got.size() == 3);
        for (uint32_t i = 0; i < 3; ++i) REQUIRE(rx.got[i] == pattern(10, i));
    }
    REQUIRE(pa.in_use() == 0);
    REQUIRE(pb.in_use() == 0);
}

TEST_CASE("a datagram of 45 fragments waits for ARP whole and arrives intact", "[stack]") {
    HeapPktPool pa(1024, 2048), pb(1024, 2048);
    {
        StackConfig ca = host(1), cb = host(2);
        ca.arp_pending_max = 4;  // far fewer than the datagram's fragments
        Stack a(ca, pa), b(cb, pb);
        MemWire wire(a, b);
        Collect rx;
        b.bind(7000, &rx);
        REQUIRE(a.udp_output(msg(pa, pattern(65507, 3)), 7000, b.config().ip, 7000));
        REQUIRE(a.counters().arp_tx_request == 1);
        wire.pump(0);
        wire.pump(0);
        REQUIRE(rx.got.size() == 1);
        REQUIRE(rx.got[0] == pattern(65507, 3));
        REQUIRE(a.counters().drop_arp_pending_full == 0);
        REQUIRE(a.counters().ip_frag_tx == 45);
    }
    REQUIRE(pa.in_use() == 0);
    REQUIRE(pb.in_use() == 0);
}

TEST_CASE("an unanswered ARP request is retried and held packets are bounded", "[stack]") {
    HeapPktPool pa(256, 2048);
    {
        StackConfig c = host(1);
        c.arp_pending_max = 4;
        Stack a(c, pa);
        for (uint32_t i = 0; i < 6; ++i) a.udp_output(msg(pa, pattern(10, i)), 1, Ipv4Addr{0x0a000009}, 1);
        REQUIRE(a.counters().drop_arp_pending_full == 2);
        a.timers(c.arp_retry_ns + 1);
        REQUIRE(a.counters().arp_tx_request == 2);
    }
    REQUIRE(pa.in_use() == 0);
}

TEST_CASE("UDP over IP fragments: every size arrives intact at MTU 576, 1500 and 9000", "[stack]") {
    for (uint32_t mtu : {576u, 1500u, 9000u}) {
        HeapPktPool pa(4096, 2048), pb(4096, 2048);
        {
            Stack a(host(1, mtu), pa), b(host(2, mtu), pb);
            a.arp().add_static(b.config().ip, b.config().mac);
            b.arp().add_static(a.config().ip, a.config().mac);
            WireImpairment imp;  // fragments arrive out of order
            imp.reorder_window = 16;
            imp.seed = 7;
            MemWire wire(a, b, imp);
            Collect rx;
            b.bind(9, &rx);
            const std::vector<uint32_t> sizes = {0, 1, 1472, 1473, 2952, 2953, 8972, 8973, 65507};
            for (uint32_t n : sizes) {
                REQUIRE(a.udp_output(msg(pa, pattern(n, n)), 9, b.config().ip, 9));
                wire.pump(0, true);
            }
            REQUIRE(rx.got.size() == sizes.size());
            for (size_t i = 0; i < sizes.size(); ++i) REQUIRE(rx.got[i] == pattern(sizes[i], sizes[i]));
            REQUIRE(b.counters().drop_udp_csum == 0);
            REQUIRE(b.reassembler().datagrams_held() == 0);
            INFO("mtu " << mtu);
            REQUIRE(a.counters().ip_frag_tx > 0);
        }
        REQUIRE(pa.in_use() == 0);
        REQUIRE(pb.in_use() == 0);
    }
}

TEST_CASE("a jumbo frame with one bit flipped anywhere in its payload is dropped and counted, never delivered",
          "[stack]") {
    // What the receiving proxy does with a memif frame (issue 35): the frame copied into chained
    // 2 KiB buffers, the UDP checksum over every byte by the wide sum (64 or 32 bytes a step,
    // csum_wide_path) and its tail. One bit flipped in the first or a later buffer, inside a
    // step, across a step's or a buffer's boundary or in the last bytes: drop_udp_csum, nothing
    // delivered; the same frame intact is delivered.
    HeapPktPool pa(64, 16384), pb(256, 2048);
    {
        Stack a(host(1, 9000), pa), b(host(2, 9000), pb);
        a.arp().add_static(b.config().ip, b.config().mac);
        Collect rx;
        b.bind(9, &rx);
        const uint32_t n = 8972;  // the largest UDP payload of one frame at MTU 9000
        PktBuf* d = pkt_alloc(pa);
        const std::vector<uint8_t> payload = pattern(n, 35);
        REQUIRE(pkt_write(d, pa, payload.data(), n, PktSum::kKeep));  // as convergence sends
        REQUIRE(a.udp_output(d, 9, b.config().ip, 9));
        PktBuf* frame = nullptr;
        REQUIRE(a.tx_take(&frame, 1) == 1);
        REQUIRE(frame->next == nullptr);  // one frame, not fragments
        const uint32_t at = kEthHdrLen + kIpv4HdrLen + kUdpHdrLen;  // the payload's first byte
        uint64_t drops = 0;
        for (uint32_t off : {0u, 1u, 63u, 64u, 127u, 200u, 1855u, 1856u, 2047u, 4000u, 8903u, 8940u, n - 2, n - 1})
            for (uint8_t bit : {uint8_t{0x01}, uint8_t{0x80}}) {
                INFO("payload byte " << off << " bit " << int{bit});
                PktBuf* copy = pkt_copy(pb, frame);
                REQUIRE(copy != nullptr);
                REQUIRE(copy->next != nullptr);  // chained buffers, as memif's receive makes them
                uint8_t byte = 0;
                REQUIRE(pkt_read(copy, at + off, 1, &byte) == 1);
                byte ^= bit;
                PktBuf* s = copy;  // write the flipped byte back into the segment holding it
                uint32_t o = at + off;
                while (o >= s->data_len) {
                    o -= s->data_len;
                    s = s->next;
                }
                s->data()[o] = byte;
                b.input_burst(&copy, 1, 0);
                REQUIRE(b.counters().drop_udp_csum == ++drops);
                REQUIRE(rx.got.empty());
            }
        PktBuf* intact = pkt_copy(pb, frame);
        REQUIRE(intact != nullptr);
        b.input_burst(&intact, 1, 0);
        REQUIRE(rx.got.size() == 1);
        REQUIRE(rx.got[0] == payload);
        REQUIRE(b.counters().drop_udp_csum == drops);
        pkt_free(frame);
    }
    REQUIRE(pa.in_use() == 0);
    REQUIRE(pb.in_use() == 0);
}

TEST_CASE("a datagram larger than IPv4 allows is refused and counted", "[stack]") {
    HeapPktPool pa(256, 2048);
    {
        Stack a(host(1), pa);
        a.arp().add_static(Ipv4Addr{0x0a000002}, MacAddr{{2, 0, 0, 0, 0, 2}});
        REQUIRE_FALSE(a.udp_output(msg(pa, pattern(65508, 0)), 1, Ipv4Addr{0x0a000002}, 1));
        REQUIRE(a.counters().drop_ip_too_big == 1);
        REQUIRE(a.tx_queued() == 0);
    }
    REQUIRE(pa.in_use() == 0);
}

TEST_CASE("drops are counted by reason", "[stack]") {
    HeapPktPool pa(256, 2048), pb(256, 2048);
    {
        Stack a(host(1), pa), b(host(2), pb);
        a.arp().add_static(b.config().ip, b.config().mac);
        MemWire wire(a, b);
        // nobody bound 1234
        a.udp_output(msg(pa, pattern(5, 0)), 1, b.config().ip, 1234);
        wire.pump(0);
        REQUIRE(b.counters().drop_udp_port == 1);
        // another host's address
        a.arp().add_static(Ipv4Addr{0x0a000003}, b.config().mac);
        a.udp_output(msg(pa, pattern(5, 0)), 1, Ipv4Addr{0x0a000003}, 1);
        wire.pump(0);
        REQUIRE(b.counters().drop_ip_dst == 1);
        // not UDP
        a.ipv4_output(msg(pa, pattern(20, 0)), b.config().ip, 6);
        wire.pump(0);
        REQUIRE(b.counters().drop_ip_proto == 1);
        // runts and foreign frames straight into b
        const uint8_t runt[] = {1, 2, 3};
        PktBuf* r = pkt_alloc(pb, 0);
        std::memcpy(pkt_append(r, 3), runt, 3);
        b.input_burst(&r, 1, 0);
        REQUIRE(b.counters().drop_eth_short == 1);
        uint8_t other[60] = {0x02, 0, 0, 0, 0, 0x77};  // another MAC
        PktBuf* o = pkt_alloc(pb, 0);
        std::memcpy(pkt_append(o, 60), other, 60);
        b.input_burst(&o, 1, 0);
        REQUIRE(b.counters().drop_eth_dst == 1);
        uint8_t ipv6[60] = {0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x86, 0xdd};
        PktBuf* s = pkt_alloc(pb, 0);
        std::memcpy(pkt_append(s, 60), ipv6, 60);
        b.input_burst(&s, 1, 0);
        REQUIRE(b.counters().drop_eth_type == 1);
    }
    REQUIRE(pa.in_use() == 0);
    REQUIRE(pb.in_use() == 0);
}

namespace {

// The UDP checksum field of an unfragmented frame (data() at its Ethernet header), as on the wire.
uint16_t udp_csum_field(const PktBuf& f) {
    uint8_t b[2];
    REQUIRE(pkt_read(&f, kEthHdrLen + kIpv4HdrLen + 6, 2, b) == 2);
    return static_cast<uint16_t>(b[0] << 8 | b[1]);
}

}  // namespace

TEST_CASE("udp_checksum_off: datagrams go with checksum 0 and arrive; nonzero sums are still checked",
          "[stack]") {
    // [machine] udp_checksum = "off-on-memif" (issue 35): both ends' stacks have udp_checksum_off.
    HeapPktPool pa(256, 16384), pb(256, 16384), pc(256, 16384);
    {
        StackConfig ca = host(1, 9000), cb = host(2, 9000), cc = host(3, 9000);
        ca.udp_checksum_off = cb.udp_checksum_off = true;
        Stack a(ca, pa), b(cb, pb), c(cc, pc);  // c sums as before
        a.arp().add_static(b.config().ip, b.config().mac);
        b.arp().add_static(a.config().ip, a.config().mac);
        c.arp().add_static(b.config().ip, b.config().mac);
        std::vector<uint16_t> sums_seen;
        WireImpairment look;
        look.drop_if = [&](int dir, const PktBuf& f) {
            if (dir == 0) sums_seen.push_back(udp_csum_field(f));
            return false;
        };
        MemWire wire(a, b, look);
        Collect rx;
        b.bind(9, &rx);
        const std::vector<uint32_t> sizes = {0, 8, 1000, 8972};
        for (uint32_t n : sizes) {
            PktBuf* d = pkt_alloc(pa);
            const std::vector<uint8_t> v = pattern(n, n);
            REQUIRE(pkt_write(d, pa, v.data(), n, PktSum::kKeep));
            REQUIRE(a.udp_output(d, 9, b.config().ip, 9));
        }
        wire.pump(0);
        REQUIRE(sums_seen == std::vector<uint16_t>(sizes.size(), 0));
        REQUIRE(rx.got.size() == sizes.size());
        for (size_t i = 0; i < sizes.size(); ++i) REQUIRE(rx.got[i] == pattern(sizes[i], sizes[i]));
        REQUIRE(a.counters().udp_tx_no_csum == sizes.size());
        REQUIRE(b.counters().udp_rx_no_csum == sizes.size());
        REQUIRE(b.counters().drop_udp_csum == 0);

        // A datagram with a checksum (c's) is checked by b: intact it arrives, with a byte changed
        // it is dropped and counted.
        for (bool flip : {false, true}) {
            REQUIRE(c.udp_output(msg(pc, pattern(700, 5)), 9, b.config().ip, 9));
            PktBuf* f = nullptr;
            REQUIRE(c.tx_take(&f, 1) == 1);
            REQUIRE(udp_csum_field(*f) != 0);
            if (flip) f->data()[kEthHdrLen + kIpv4HdrLen + kUdpHdrLen + 300] ^= 0x10;
            PktBuf* in = pkt_copy(pb, f);
            pkt_free(f);
            b.input_burst(&in, 1, 0);
        }
        REQUIRE(rx.got.size() == sizes.size() + 1);
        REQUIRE(b.counters().drop_udp_csum == 1);
        REQUIRE(b.counters().udp_rx_no_csum == sizes.size());

        // A stack without the setting drops a datagram without a checksum as missing.
        a.arp().add_static(c.config().ip, c.config().mac);
        Collect rx_c;
        c.bind(9, &rx_c);
        REQUIRE(a.udp_output(msg(pa, pattern(64, 1)), 9, c.config().ip, 9));
        PktBuf* f = nullptr;
        REQUIRE(a.tx_take(&f, 1) == 1);
        REQUIRE(udp_csum_field(*f) == 0);
        PktBuf* in = pkt_copy(pc, f);
        pkt_free(f);
        c.input_burst(&in, 1, 0);
        REQUIRE(rx_c.got.empty());
        REQUIRE(c.counters().drop_udp_csum == 1);
    }
    REQUIRE(pa.in_use() == 0);
    REQUIRE(pb.in_use() == 0);
    REQUIRE(pc.in_use() == 0);
}

TEST_CASE("a wire that corrupts frames turns udp_checksum_off back on at both ends", "[stack]") {
    // The setting is for links that cannot corrupt; MemWire's bit flips ignore it (the sums go
    // on again), so every flipped datagram is still caught and none is delivered changed.
    HeapPktPool pa(512, 2048), pb(512, 2048);
    {
        StackConfig ca = host(1), cb = host(2);
        ca.udp_checksum_off = cb.udp_checksum_off = true;
        Stack a(ca, pa), b(cb, pb);
        a.arp().add_static(b.config().ip, b.config().mac);
        b.arp().add_static(a.config().ip, a.config().mac);
        WireImpairment imp;
        imp.corrupt = 0.5;
        imp.seed = 35;
        std::vector<uint16_t> sums_seen;
        imp.drop_if = [&](int, const PktBuf& f) {
            sums_seen.push_back(udp_csum_field(f));
            return false;
        };
        MemWire wire(a, b, imp);
        REQUIRE_FALSE(a.config().udp_checksum_off);
        REQUIRE_FALSE(b.config().udp_checksum_off);
        Collect rx;
        b.bind(9, &rx);
        for (uint32_t i = 0; i < 200; ++i) {
            REQUIRE(a.udp_output(msg(pa, pattern(1000, i)), 9, b.config().ip, 9));
            wire.pump(0);
        }
        REQUIRE(wire.counters().corrupted > 50);
        REQUIRE(std::count(sums_seen.begin(), sums_seen.end(), uint16_t{0}) == 0);
        // Every datagram delivered is one that was sent, unchanged (in order: one at a time); a
        // flip in a field nothing checks (the Ethernet source) may still let one through whole.
        REQUIRE(rx.got.size() >= 200 - wire.counters().corrupted);
        uint32_t next = 0;
        for (const auto& g : rx.got) {
            while (next < 200 && g != pattern(1000, next)) ++next;
            REQUIRE(next < 200);
            ++next;
        }
        REQUIRE(a.counters().udp_tx_no_csum == 0);
        REQUIRE(b.counters().udp_rx_no_csum == 0);
        REQUIRE(b.counters().drop_udp_csum > 0);
    }
    REQUIRE(pa.in_use() == 0);
    REQUIRE(pb.in_use() == 0);
}
