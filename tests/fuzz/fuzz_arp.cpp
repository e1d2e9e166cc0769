// fuzz_arp: ARP packets into the stack (behind a valid Ethernet header, EtherType 0x0806), with
// an oracle: what RFC 826 says the stack must do with each packet is computed here from the
// bytes and compared with its counters, its ARP table and the frames it transmits.
//
// Input: byte 0 flags, then records of 1 control byte + 28 ARP bytes (the last record may be
// shorter: a truncated packet).
//   flags:   0x01 the dynamic ARP cache holds 2 entries instead of 4  0x02 a static entry 10.0.0.9
//   control: 0x01 Ethernet destination broadcast (else 02:00:00:00:00:02)
//            0x02 the frame is cut into segments (ARP header split across them)
//            0x0c before the packet: 1 = send a UDP datagram to 10.0.0.1, 2 = to 10.0.0.(16 + bits 4-7),
//                 3 = let the ARP retry time pass (timers)
// The stack under test is 10.0.0.2 with at most 4 packets waiting for resolution, so replies
// release held packets (to the MAC they name) and a full hold queue drops with a counter.
#include "fuzz_common.hpp"

using namespace fuzz;

namespace {

struct Arp {
    uint16_t htype, ptype, op;
    uint8_t hlen, plen;
    MacAddr sha, tha;
    Ipv4Addr spa, tpa;
};

Arp parse(const uint8_t* p) {
    Arp a;
    a.htype = get16(p);
    a.ptype = get16(p + 2);
    a.hlen = p[4];
    a.plen = p[5];
    a.op = get16(p + 6);
    std::copy(p + 8, p + 14, a.sha.b.begin());
    a.spa = Ipv4Addr{get32(p + 14)};
    std::copy(p + 18, p + 24, a.tha.b.begin());
    a.tpa = Ipv4Addr{get32(p + 24)};
    return a;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static FuzzPool pool(256, 2048);
    if (size == 0 || size > 29 * 64 + 1) return 0;
    Reader in(data, size);
    const uint8_t flags = in.u8();
    {
        StackConfig cfg = host_config(kMacB, kIpB);
        cfg.arp_entries = (flags & 0x01) ? 2 : 4;
        cfg.arp_pending_max = 4;
        cfg.tx_queue_frames = 8;
        Stack s(cfg, pool);
        const Ipv4Addr kStaticIp{0x0a000009u};
        const MacAddr kStaticMac{{0x02, 0, 0, 0, 0, 0x09}};
        const uint32_t statics = (flags & 0x02) ? 1 : 0;
        if (statics) s.arp().add_static(kStaticIp, kStaticMac);
        uint64_t now = 1'000'000'000;

        while (!in.empty()) {
            const uint8_t ctl = in.u8();
            size_t n = 0;
            const uint8_t* payload = in.take(kArpHdrLen, &n);

            // Something to resolve, or time for the retries.
            const uint8_t pre = (ctl >> 2) & 3;
            if (pre == 1 || pre == 2) {
                const Ipv4Addr to = pre == 1 ? kIpA : Ipv4Addr{0x0a000010u + (ctl >> 4)};
                if (PktBuf* p = pkt_alloc(pool)) {
                    const uint8_t msg[4] = {'p', 'i', 'n', 'g'};
                    std::memcpy(pkt_append(p, sizeof msg), msg, sizeof msg);
                    s.udp_output(p, 5000, to, 5000);
                }
            } else if (pre == 3) {
                now += cfg.arp_retry_ns;
                s.timers(now);
            }
            drain_tx(s);

            std::vector<uint8_t> frame;
            put_eth(frame, (ctl & 0x01) ? MacAddr::broadcast() : kMacB, kMacA, kEtherTypeArp);
            frame.insert(frame.end(), payload, payload + n);
            PktBuf* f = make_pkt(pool, frame, (ctl & 0x02) ? Split{17, 5} : Split{});
            if (f == nullptr) break;

            const StackCounters c0 = s.counters();
            s.input_burst(&f, 1, now);
            const StackCounters& c1 = s.counters();
            std::vector<PktBuf*> tx;
            drain_tx(s, &tx);

            // The oracle.
            const Arp a = n == kArpHdrLen ? parse(payload) : Arp{};
            const bool valid = n == kArpHdrLen && a.htype == 1 && a.ptype == 0x0800 && a.hlen == 6 && a.plen == 4 &&
                               (a.op == kArpOpRequest || a.op == kArpOpReply);
            uint32_t replies = 0;
            for (PktBuf* t : tx) {
                const std::vector<uint8_t> v = pkt_bytes(t);
                if (get16(&v[12]) == kEtherTypeArp && get16(&v[kEthHdrLen + 6]) == kArpOpReply) {
                    ++replies;
                    // To the asker, about us, in answer to what it said.
                    FUZZ_CHECK(valid && a.op == kArpOpRequest && a.tpa == kIpB);
                    FUZZ_CHECK(std::equal(a.sha.b.begin(), a.sha.b.end(), v.begin()));
                    FUZZ_CHECK(std::equal(a.sha.b.begin(), a.sha.b.end(), v.begin() + kEthHdrLen + 18));
                    FUZZ_CHECK(get32(&v[kEthHdrLen + 24]) == a.spa.v);
                }
                pkt_free(t);
            }
            FUZZ_CHECK(c1.rx_frames == c0.rx_frames + 1);
            if (!valid) {
                FUZZ_CHECK(c1.drop_arp_bad == c0.drop_arp_bad + 1);
                FUZZ_CHECK(replies == 0);
            } else if (a.op == kArpOpReply) {
                FUZZ_CHECK(c1.arp_rx_reply == c0.arp_rx_reply + 1);
                FUZZ_CHECK(replies == 0);
            } else if (!(a.tpa == kIpB)) {
                FUZZ_CHECK(c1.drop_arp_other == c0.drop_arp_other + 1);
                FUZZ_CHECK(replies == 0);
            } else {
                FUZZ_CHECK(c1.arp_rx_request == c0.arp_rx_request + 1);
                const bool lost = c1.drop_ip_nobuf != c0.drop_ip_nobuf || c1.drop_tx_full != c0.drop_tx_full;
                FUZZ_CHECK(c1.arp_tx_reply == c0.arp_tx_reply + 1);
                FUZZ_CHECK(replies == (lost ? 0u : 1u) || (lost && replies <= 1));
            }
            // RFC 826 merge: a sender is learned when the packet is for us, refreshed when known;
            // a static entry never changes.
            if (valid && a.spa.v != 0) {
                const MacAddr* m = s.arp().lookup(a.spa);
                if (statics && a.spa == kStaticIp) {
                    FUZZ_CHECK(m != nullptr && *m == kStaticMac);
                } else if (a.tpa == kIpB) {
                    FUZZ_CHECK(m != nullptr && *m == a.sha);
                }
            }
            FUZZ_CHECK(s.arp().size() <= cfg.arp_entries + statics);
            if (statics) FUZZ_CHECK(s.arp().lookup(kStaticIp) != nullptr);
        }
        if (verbose()) dump_counters("stack", s.counters());
        now += 10 * cfg.arp_retry_ns;
        s.timers(now);
        drain_tx(s);
    }
    pool.end_of_input();
    return 0;
}
