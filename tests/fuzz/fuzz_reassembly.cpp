// fuzz_reassembly: IPv4 reassembly under every order, overlap, duplicate, gap, size and timing
// of fragments, straight into an Ipv4Reassembler and through Stack::input_burst.
//
// Input: a sequence of 7-byte fragment descriptors (at most 64):
//   byte 0: bits 0-1 which datagram (4 keys: two ids from 10.0.0.1, one id from 10.0.0.3, and
//           a non-UDP protocol), 0x04 MF, 0x08 through the stack (else straight into the
//           reassembler), 0x10 payload as indirect slices behind a header-only head segment
//           (what ipv4_fragment makes), 0x20 fed twice, bits 6-7 header length 20, 20, 24, 60
//   bytes 1-2: fragment offset (8-byte units, 13 bits)   bytes 3-4: payload bytes (mod 9001)
//   byte 5: time passes (x 50 us; timeout 4 ms; odd: expire() is called, even: the lazy scan)
//   byte 6: how the fragment is cut into segments (fuzz::split_from)
// Fragment headers are valid (checksum, total length); payload byte k of a datagram is a fixed
// function of (key, k), so a completed datagram can be checked byte for byte. After every step:
// at most max_datagrams (8) partial datagrams and max_bytes (64 KiB) held; a fragment is held,
// completes a datagram, or is counted (drop or duplicate), never lost silently; a completed
// datagram has a good header checksum, total_len == pkt_len, no MF/offset, the right bytes.
#include "fuzz_common.hpp"

using namespace fuzz;

namespace {

struct Key {
    uint16_t id;
    Ipv4Addr src;
    uint8_t proto;
};
constexpr Key kKeys[4] = {
    {0x1234, kIpA, kIpProtoUdp},
    {0x1235, kIpA, kIpProtoUdp},
    {0x1234, Ipv4Addr{0x0a000003u}, kIpProtoUdp},
    {0x1234, kIpA, 6},
};

uint8_t pattern(uint32_t key, uint32_t k) { return static_cast<uint8_t>(k * 7 + (k >> 8) * 13 + key * 61 + 1); }

int key_of(const uint8_t* h) {
    for (int i = 0; i < 4; ++i)
        if (get16(h + 4) == kKeys[i].id && get32(h + 12) == kKeys[i].src.v && h[9] == kKeys[i].proto) return i;
    return -1;
}

ICCS_FUZZ_NO_COV void fill(std::vector<uint8_t>& payload, uint32_t key, uint32_t off) {
    for (uint32_t k = 0; k < payload.size(); ++k) payload[k] = pattern(key, off + k);
}

// Index of the first byte of v[from..] that is not the pattern of key, or v.size().
ICCS_FUZZ_NO_COV size_t mismatch(const std::vector<uint8_t>& v, size_t from, uint32_t key) {
    for (size_t k = from; k < v.size(); ++k)
        if (v[k] != pattern(key, static_cast<uint32_t>(k - from))) return k;
    return v.size();
}

void check_whole(PktBuf* w) {
    check_chain(w);
    FUZZ_CHECK(w->data_len >= kIpv4HdrLen);
    const uint8_t* h = w->data();
    const uint32_t hl = (h[0] & 0x0fu) * 4u;
    FUZZ_CHECK(h[0] >> 4 == 4 && hl >= kIpv4HdrLen && hl <= w->data_len);
    FUZZ_CHECK(ipv4_csum(h, hl) == get16(h + 10));
    FUZZ_CHECK(get16(h + 2) == w->pkt_len);
    FUZZ_CHECK((get16(h + 6) & (kIpFlagMF | kIpFragOffMask)) == 0);
    FUZZ_CHECK(get32(h + 16) == kIpB.v);
    const int key = key_of(h);
    FUZZ_CHECK(key >= 0);
    const std::vector<uint8_t> v = pkt_bytes(w);
    FUZZ_CHECK(mismatch(v, hl, static_cast<uint32_t>(key)) == v.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static FuzzPool pool(1024, 2048);
    if (size == 0 || size > 7 * 64) return 0;
    Reader in(data, size);
    {
        ReassemblyConfig rc;
        rc.max_datagrams = 8;
        rc.max_bytes = 64 * 1024;
        rc.timeout_ns = 4'000'000;
        Ipv4Reassembler r(rc);
        StackCounters ctr;
        StackConfig sc = host_config(kMacB, kIpB);
        sc.reass = rc;
        Stack s(sc, pool);
        uint64_t now = 1'000'000'000;

        while (in.left() >= 7) {
            const uint8_t b0 = in.u8();
            const uint32_t off = (in.u16() & kIpFragOffMask) * 8u;
            const uint32_t len = in.u16() % 9001u;
            const uint8_t dt = in.u8();
            const Split split = split_from(in.u8());
            const uint32_t key = b0 & 3;
            const bool more = (b0 & 0x04) != 0;
            const bool via_stack = (b0 & 0x08) != 0;
            const bool sliced = (b0 & 0x10) != 0;
            const int copies = (b0 & 0x20) ? 2 : 1;
            static constexpr uint32_t kIhl[4] = {5, 5, 6, 15};
            const uint32_t ihl = kIhl[b0 >> 6];

            now += uint64_t{dt} * 50'000;
            if (dt & 1) {
                r.expire(now, ctr);
                s.timers(now);
            }

            std::vector<uint8_t> hdr;
            if (via_stack) put_eth(hdr, kMacB, kMacA, kEtherTypeIpv4);
            put_ipv4(hdr, kKeys[key].src, kIpB, kKeys[key].proto, kKeys[key].id,
                     static_cast<uint16_t>(off / 8 | (more ? kIpFlagMF : 0)), len, ihl);
            std::vector<uint8_t> payload(len);
            fill(payload, key, off);

            for (int c = 0; c < copies; ++c) {
                PktBuf* f = nullptr;
                if (sliced) {
                    f = make_pkt(pool, hdr);
                    PktBuf* src = make_pkt(pool, payload, split);
                    PktBuf* view = (f != nullptr && src != nullptr) ? pkt_slice(pool, src, 0, len, 0) : nullptr;
                    pkt_free(src);
                    if (view == nullptr) {
                        if (f != nullptr) pkt_free(f);
                        f = nullptr;
                    } else {
                        pkt_chain(f, view);
                    }
                } else {
                    std::vector<uint8_t> all = hdr;
                    all.insert(all.end(), payload.begin(), payload.end());
                    f = make_pkt(pool, all, split);
                }
                FUZZ_CHECK(f != nullptr);  // the pool is sized for this
                check_chain(f);

                if (via_stack) {
                    const StackCounters c0 = s.counters();
                    const uint64_t held0 = s.reassembler().bytes_held();
                    s.input_burst(&f, 1, now);
                    const StackCounters& c1 = s.counters();
                    const bool counted = drops(c1) != drops(c0) || c1.ip_reass_ok != c0.ip_reass_ok ||
                                         c1.ip_reass_dup != c0.ip_reass_dup;
                    FUZZ_CHECK(counted || s.reassembler().bytes_held() > held0);
                } else {
                    const StackCounters c0 = ctr;
                    const uint64_t held0 = r.bytes_held();
                    PktBuf* w = r.ipv4_reassemble(f, now, ctr);
                    if (off == 0 && !more && w != nullptr) {
                        FUZZ_CHECK(w == f);  // not a fragment: handed back as it is
                        pkt_free(w);
                    } else if (w != nullptr) {
                        FUZZ_CHECK(ctr.ip_reass_ok == c0.ip_reass_ok + 1);
                        check_whole(w);
                        pkt_free(w);
                    } else {
                        const bool counted = drops(ctr) != drops(c0) || ctr.ip_reass_dup != c0.ip_reass_dup;
                        FUZZ_CHECK(counted || r.bytes_held() > held0);
                    }
                }
                EchoRig::check_reassembler(r, rc);
                EchoRig::check_reassembler(s.reassembler(), rc);
            }
            drain_tx(s);
        }
        if (verbose()) {
            dump_counters("reassembler", ctr);
            dump_counters("stack", s.counters());
        }
        // Everything left expires; nothing stays pinned.
        now += 10 * rc.timeout_ns;
        r.expire(now, ctr);
        s.timers(now);
        FUZZ_CHECK(r.datagrams_held() == 0 && r.bytes_held() == 0);
        FUZZ_CHECK(s.reassembler().datagrams_held() == 0 && s.reassembler().bytes_held() == 0);
    }
    pool.end_of_input();
    return 0;
}
