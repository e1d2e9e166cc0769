// Golden bytes: frames the stack builds equal byte strings computed independently (by hand with
// a separate checksum routine; see the comments), and known frames parse to the right fields.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "ipv4_hdr.hpp"
#include "mem_wire.hpp"
#include "slidwin_endpoint.hpp"
#include "stack.hpp"

using namespace iccs;

namespace {

StackConfig host(uint8_t last) { return mem_wire_host(last); }

std::vector<uint8_t> take_one_frame(Stack& s) {
    PktBuf* f = nullptr;
    REQUIRE(s.tx_take(&f, 1) == 1);
    std::vector<uint8_t> v(f->pkt_len);
    pkt_read(f, 0, f->pkt_len, v.data());
    pkt_free(f);
    return v;
}

struct Catch1 : UdpHandler {
    std::vector<std::string> got;
    UdpMeta last{};
    void udp_deliver(PktBuf* p, const UdpMeta& m, uint64_t) override {
        std::string s(p->pkt_len, '\0');
        pkt_read(p, 0, p->pkt_len, s.data());
        got.push_back(s);
        last = m;
        pkt_free(p);
    }
};

// 10.0.0.1:5000 -> 10.0.0.2:6000 "hello iccs", IP id 1, TTL 64. IPv4 checksum 0x66c4 and UDP
// checksum 0xb006 worked out separately (16-bit one's-complement sums of the header words and of
// pseudo-header + UDP header + payload). 52 bytes, padded to the 60-byte Ethernet minimum.
const uint8_t kHelloFrame[] = {
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00,  // eth
    0x45, 0x00, 0x00, 0x26, 0x00, 0x01, 0x00, 0x00, 0x40, 0x11, 0x66, 0xc4,              // ipv4
    0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02,                                      //
    0x13, 0x88, 0x17, 0x70, 0x00, 0x12, 0xb0, 0x06,                                      // udp
    0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x20, 0x69, 0x63, 0x63, 0x73,                          // payload
    0, 0, 0, 0, 0, 0, 0, 0};                                                             // pad

}  // namespace

TEST_CASE("udp_output builds the hand-checked frame byte for byte", "[golden]") {
    HeapPktPool pool(64, 2048);
    {
        Stack a(host(1), pool);
        a.arp().add_static(Ipv4Addr{0x0a000002}, MacAddr{{0x02, 0, 0, 0, 0, 2}});
        PktBuf* p = pkt_alloc(pool);
        std::memcpy(pkt_append(p, 10), "hello iccs", 10);
        REQUIRE(a.udp_output(p, 5000, Ipv4Addr{0x0a000002}, 6000));
        const auto f = take_one_frame(a);
        REQUIRE(f == std::vector<uint8_t>(std::begin(kHelloFrame), std::end(kHelloFrame)));
    }
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("the hand-checked frame parses: ports, addresses, payload, padding trimmed", "[golden]") {
    HeapPktPool pool(64, 2048);
    {
        Stack b(host(2), pool);
        Catch1 h;
        b.bind(6000, &h);
        PktBuf* f = pkt_alloc(pool, 0);
        std::memcpy(pkt_append(f, sizeof kHelloFrame), kHelloFrame, sizeof kHelloFrame);
        b.input_burst(&f, 1, 0);
        REQUIRE(h.got == std::vector<std::string>{"hello iccs"});
        REQUIRE(h.last.src == Ipv4Addr{0x0a000001});
        REQUIRE(h.last.src_port == 5000);
        REQUIRE(h.last.dst_port == 6000);
        REQUIRE(b.counters().udp_rx == 1);

        // One flipped bit anywhere in the IPv4 or UDP part is caught and counted.
        for (size_t byte = 14; byte < 52; ++byte) {
            PktBuf* g = pkt_alloc(pool, 0);
            uint8_t* d = pkt_append(g, sizeof kHelloFrame);
            std::memcpy(d, kHelloFrame, sizeof kHelloFrame);
            d[byte] ^= 0x10;
            b.input_burst(&g, 1, 0);
        }
        REQUIRE(h.got.size() == 1);
        const auto& c = b.counters();
        REQUIRE(c.drop_ip_csum + c.drop_udp_csum + c.drop_ip_version + c.drop_ip_hdrlen + c.drop_ip_len +
                    c.drop_udp_port + c.drop_udp_len ==
                38);
    }
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("ARP: the request we send and the reply we give are RFC 826 bytes", "[golden]") {
    HeapPktPool pool(64, 2048);
    {
        Stack a(host(1), pool);
        a.arp_request(Ipv4Addr{0x0a000002}, 0);
        const auto req = take_one_frame(a);
        const std::vector<uint8_t> want_req = {
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06,  // eth
            0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01,                                      // eth/ipv4, request
            0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x01,                          // sender
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x02,                          // target
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};                               // pad
        REQUIRE(req == want_req);

        Stack b(host(2), pool);
        PktBuf* f = pkt_alloc(pool, 0);
        std::memcpy(pkt_append(f, static_cast<uint32_t>(req.size())), req.data(), req.size());
        b.input_burst(&f, 1, 0);
        REQUIRE(b.counters().arp_rx_request == 1);
        const auto rep = take_one_frame(b);
        const std::vector<uint8_t> want_rep = {
            0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x08, 0x06,
            0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02,
            0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x0a, 0x00, 0x00, 0x02,
            0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x01,
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        REQUIRE(rep == want_rep);
        // b learned a from the request (RFC 826: the target adds the sender).
        REQUIRE(b.arp().lookup(Ipv4Addr{0x0a000001}) != nullptr);
    }
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("a slidwin handshake and data datagram on the wire", "[golden]") {
    // 10.0.0.1:9410 -> 10.0.0.2:9410, slidwin v3, sub-connection 3 -> 7 of run token
    // 0x0123456789abcdef: its token is HMAC-SHA256(key = those 8 bytes, "iccs subconn token" |
    // be16 3 | be16 7), first 8 bytes: 0x5e15f84575003731 (worked out with Python's hmac). ISN
    // 0x1000, nonce 0x1122334455667788. First the SYN (subconn 7, seq = ISN, no ack, sent at
    // t = 0; its handshake block: nonce, echo 0). Then the peer's SYN|ACK (its token
    // 0xfedcba9876543210, ISN 0x2000, acking 0x1000, echoing our nonce) confirms the peer; our
    // SYN|ACK echoing its nonce and an ack go back, and once the peer's first ack without SYN is
    // in (it confirmed us; window 1024), the first data datagram DATA|ACK seq 0x1000 ack 0x2000
    // wnd 1024, sent at t = 5 ms (tsval 5000 us), nothing to echo yet, payload "ping" (IP id 4:
    // the fourth frame). IPv4 checksums 0x6696, 0x669f and UDP checksums 0x7ade, 0x760f worked
    // out separately (one's-complement sums, as above).
    const std::vector<uint8_t> want_syn = {
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00,
        0x45, 0x00, 0x00, 0x54, 0x00, 0x01, 0x00, 0x00, 0x40, 0x11, 0x66, 0x96,
        0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02,
        0x24, 0xc2, 0x24, 0xc2, 0x00, 0x40, 0x7a, 0xde,
        0x03, 0x20, 0x00, 0x07, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00,  // ver SYN sc seq ack
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // wnd rsvd sack
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,                          // tsval tsecr
        0x5e, 0x15, 0xf8, 0x45, 0x75, 0x00, 0x37, 0x31,                          // token
        0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,                          // nonce
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};                         // echo
    const std::vector<uint8_t> want = {
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00,
        0x45, 0x00, 0x00, 0x48, 0x00, 0x04, 0x00, 0x00, 0x40, 0x11, 0x66, 0x9f,
        0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02,
        0x24, 0xc2, 0x24, 0xc2, 0x00, 0x34, 0x76, 0x0f,
        0x03, 0x03, 0x00, 0x07, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x20, 0x00,  // ver flags sc seq ack
        0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // wnd rsvd sack
        0x00, 0x00, 0x13, 0x88, 0x00, 0x00, 0x00, 0x00,                          // tsval tsecr
        0x5e, 0x15, 0xf8, 0x45, 0x75, 0x00, 0x37, 0x31,                          // token
        0x70, 0x69, 0x6e, 0x67};
    HeapPktPool pool(64, 2048);
    {
        Stack a(host(1), pool);
        a.arp().add_static(Ipv4Addr{0x0a000002}, MacAddr{{0x02, 0, 0, 0, 0, 2}});
        TimerWheel wheel(10'000, 256, 0);
        struct Null : SlidwinSink {
            bool on_message(SubConnection&, PktBuf* m) override { pkt_free(m); return true; }
        } sink;
        SlidwinConfig cfg;
        cfg.run_token = 0x0123456789abcdefull;
        cfg.random_isn = false;
        cfg.initial_seq = 0x1000;
        cfg.nonce = 0x1122334455667788ull;
        SlidwinEndpoint ep(a, wheel, 9410, cfg, sink);
        SubConnection* sc = ep.open(3, Ipv4Addr{0x0a000002}, 9410, 7, 0);
        REQUIRE(sc->local_token() == 0x5e15f84575003731ull);
        REQUIRE(take_one_frame(a) == want_syn);
        REQUIRE(to_string(load_hdr<SlidwinHdr>(want_syn.data() + 42)) ==
                "slidwin v3 sc 7 SYN seq 4096 ack 0 wnd 0 sack 0x0000000000000000 tsval 0 tsecr-none 0 "
                "token 0x5e15f84575003731");
        REQUIRE(to_string(load_hdr<SlidwinSynBlk>(want_syn.data() + 82)) ==
                "syn nonce 0x1122334455667788 echo 0x0000000000000000");
        // Before the handshake a message waits: the peer's window is closed.
        PktBuf* m = pkt_alloc(pool);
        std::memcpy(pkt_append(m, 4), "ping", 4);
        REQUIRE(slidwin_send(*sc, m, 1'000'000) == SlidwinSendResult::kOk);
        REQUIRE(a.tx_queued() == 0);
        // The peer's SYN|ACK, as its endpoint would hand it up: it proves it has our SYN.
        auto peer_hdr = [](uint8_t flags) {
            SlidwinHdr h{};
            h.version = kSlidwinVersion;
            h.flags = flags;
            h.subconn = be16::of(3);
            h.seq = be32::of(0x2000);
            h.ack = be32::of(0x1000);
            h.wnd = be16::of(1024);
            h.token = be64::of(0xfedcba9876543210ull);
            return h;
        };
        const UdpMeta from_peer{Ipv4Addr{0x0a000002}, Ipv4Addr{0x0a000001}, 9410, 9410};
        PktBuf* in = pkt_alloc(pool);
        store_hdr(pkt_append(in, kSlidwinHdrLen), peer_hdr(kSwSyn | kSwAck));
        store_hdr(pkt_append(in, kSlidwinSynBlkLen),
                  SlidwinSynBlk{be64::of(0xaabbccddeeff0011ull), be64::of(0x1122334455667788ull)});
        ep.udp_deliver(in, from_peer, 2'000'000);
        REQUIRE(sc->peer_confirmed());
        REQUIRE(sc->peer_token() == 0xfedcba9876543210ull);
        REQUIRE(!sc->established());  // until the peer says it confirmed us
        // Our answer: a SYN|ACK echoing its nonce, then (end of the burst) an ack.
        std::vector<uint8_t> f = take_one_frame(a);
        REQUIRE(f.size() == 42 + kSlidwinHdrLen + kSlidwinSynBlkLen);
        REQUIRE(to_string(load_hdr<SlidwinSynBlk>(f.data() + 82)) ==
                "syn nonce 0x1122334455667788 echo 0xaabbccddeeff0011");
        ep.end_of_burst(2'000'000);
        f = take_one_frame(a);
        REQUIRE(to_string(load_hdr<SlidwinHdr>(f.data() + 42)) ==
                "slidwin v3 sc 7 ACK seq 4096 ack 8192 wnd 1024 sack 0x0000000000000000 tsval 2000 tsecr-none 0 "
                "token 0x5e15f84575003731");
        // The peer's first ack without SYN: the handshake is done, the waiting data goes.
        in = pkt_alloc(pool);
        store_hdr(pkt_append(in, kSlidwinHdrLen), peer_hdr(kSwAck));
        ep.udp_deliver(in, from_peer, 5'000'000);
        REQUIRE(sc->established());
        REQUIRE(take_one_frame(a) == want);
        const SlidwinHdr h = load_hdr<SlidwinHdr>(want.data() + 42);
        REQUIRE(to_string(h) ==
                "slidwin v3 sc 7 DATA ACK seq 4096 ack 8192 wnd 1024 sack 0x0000000000000000 tsval 5000 tsecr-none 0 "
                "token 0x5e15f84575003731");
        ep.end_of_burst(5'000'000);  // the ack it owed rode on the data: nothing more goes out
        REQUIRE(a.tx_queued() == 0);
    }
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("a published IPv4 header decodes to its fields", "[golden]") {
    // The standard worked example of the IPv4 header checksum (192.168.0.1 -> 192.168.0.199).
    const uint8_t raw[] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                           0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
    const Ipv4Hdr h = load_hdr<Ipv4Hdr>(raw);
    REQUIRE(h.hdr_len() == 20);
    REQUIRE(h.total_len.get() == 115);
    REQUIRE_FALSE(h.is_fragment());
    REQUIRE(to_string(h) == "ipv4 192.168.0.1 > 192.168.0.199 len 115 id 0 off 0 DF ttl 64 proto 17 csum 0xb861");
}

TEST_CASE("address parsing is strict", "[golden]") {
    Ipv4Addr a;
    REQUIRE(parse_ipv4("10.1.2.3", a));
    REQUIRE(a.v == 0x0a010203u);
    for (const char* bad : {"10.1.2", "10.1.2.3.4", "256.1.1.1", "1..1.1", "a.b.c.d", "1.2.3.4 ", ""})
        REQUIRE_FALSE(parse_ipv4(bad, a));
    MacAddr m;
    REQUIRE(parse_mac("02:00:0a:ff:00:01", m));
    REQUIRE(to_string(m) == "02:00:0a:ff:00:01");
    REQUIRE_FALSE(parse_mac("02:00:0a:ff:00", m));
    REQUIRE_FALSE(parse_mac("02:00:0a:ff:00:01:02", m));
}
