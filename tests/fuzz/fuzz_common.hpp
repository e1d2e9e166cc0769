// fuzz_common.hpp: what the libFuzzer targets share (tests/fuzz/fuzz_<name>.cpp).
//
// - FuzzPool: a HeapPktPool made visible to AddressSanitizer. The stack works inside pool
//   storage, where a plain pool hides every overrun (the next segment's storage is valid memory)
//   and every use after release (the storage stays mapped). FuzzPool gives each segment a
//   poisoned redzone behind its storage, poisons the storage of released segments, keeps released
//   segments in a quarantine (so a stale pointer does not land on a recycled segment at once),
//   scribbles their headers and checks the scribble is intact when they leave quarantine (a
//   late pkt_free/pkt_ref on a released segment), traps on a double release, and its
//   end_of_input() is the leak check (HeapPktPool::in_use() == 0) every target ends with.
// - Reader: the input as a stream of small fields (zeros once it runs dry).
// - Wire builders: Ethernet/IPv4/UDP headers with correct checksums, packets from bytes cut
//   into segments of chosen sizes (chains exercise every pkt_contig/pkt_read slow path).
// - Frame checks: what a stack transmits must itself be well formed.
// - EchoRig: the stack under test (10.0.0.2) with UDP handlers bound (discard, echo in place,
//   echo a copy) and a peer stack (10.0.0.1) that receives the echoes, so a fuzzed datagram that
//   gets through is sent back (ARP hold, fragmentation) and must arrive intact at the peer.
//
// Every failed invariant prints what failed and calls __builtin_trap(): libFuzzer reports it as
// a crash and saves the input.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <unordered_set>
#include <vector>

#include "checksum.hpp"
#include "pktbuf.hpp"
#include "stack.hpp"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ICCS_FUZZ_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define ICCS_FUZZ_ASAN 1
#endif
#ifdef ICCS_FUZZ_ASAN
#include <sanitizer/asan_interface.h>
#define ICCS_FUZZ_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define ICCS_FUZZ_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define ICCS_FUZZ_POISON(p, n) ((void)(p), (void)(n))
#define ICCS_FUZZ_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

// Harness loops over every byte of a packet (filling, comparing) need no coverage feedback:
// instrumented, they cost more than the code under test and flood the comparison tables.
#if defined(__clang__)
#define ICCS_FUZZ_NO_COV __attribute__((no_sanitize("coverage")))
#else
#define ICCS_FUZZ_NO_COV
#endif

#define FUZZ_CHECK(cond)                                                                          \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            std::fprintf(stderr, "fuzz invariant failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
            __builtin_trap();                                                                     \
        }                                                                                         \
    } while (0)

namespace fuzz {

using namespace iccs;

// ------------------------------------------------------------------------------------------ pool

class FuzzPool final : public PktPool {
   public:
    static constexpr uint32_t kRedzone = 64;       // poisoned bytes behind each segment's storage
    static constexpr size_t kQuarantine = 64;      // released segments held back before reuse
    static constexpr uint16_t kCanaryRef = 0x5a5a; // refcnt of a released segment
    static constexpr uint32_t kCanary32 = 0xa5a5a5a5u;

    FuzzPool(uint32_t nsegs, uint32_t seg_bytes) : heap_(nsegs, seg_bytes + kRedzone), seg_bytes_(seg_bytes) {
        // Take every segment once to poison its storage (redzone included), then give them back
        // in reverse so the heap's free stack keeps its order.
        std::vector<PktBuf*> all;
        all.reserve(nsegs);
        while (PktBuf* s = heap_.seg_alloc(0)) {
            ICCS_FUZZ_POISON(s->buf, seg_bytes_ + kRedzone);
            all.push_back(s);
        }
        for (size_t i = all.size(); i-- > 0;) heap_.seg_release(all[i]);
        limit_ = nsegs;
        live_.reserve(nsegs);
    }
    FuzzPool(const FuzzPool&) = delete;
    FuzzPool& operator=(const FuzzPool&) = delete;

    PktBuf* seg_alloc(uint32_t headroom) override {
        if (headroom > seg_bytes_ || live_.size() >= limit_) return nullptr;
        PktBuf* s = heap_.seg_alloc(headroom);
        if (s == nullptr && !quarantine_.empty()) {
            flush_quarantine();
            s = heap_.seg_alloc(headroom);
        }
        if (s == nullptr) return nullptr;
        ICCS_FUZZ_UNPOISON(s->buf, seg_bytes_);
        s->buf_len = seg_bytes_;  // the redzone behind stays poisoned
        s->pool = this;
        s->backing = s->buf;      // its own storage (an indirect segment's buf is another's)
        live_.insert(s);
        return s;
    }

    void seg_release(PktBuf* s) override {
        FUZZ_CHECK(s->pool == this);
        FUZZ_CHECK(live_.erase(s) == 1);  // released twice, or never ours
        FUZZ_CHECK(s->refcnt == 0);
        FUZZ_CHECK(s->direct == nullptr);
        ICCS_FUZZ_POISON(s->backing, seg_bytes_);
        // Scribble: a stale user that follows next, reads data() or drops a reference shows.
        s->buf = reinterpret_cast<uint8_t*>(uintptr_t{0xdead0000dead0000ull});
        s->next = reinterpret_cast<PktBuf*>(uintptr_t{0xdead0000dead0000ull});
        s->data_off = s->data_len = s->pkt_len = kCanary32;
        s->nb_segs = kCanaryRef;
        s->refcnt = kCanaryRef;
        quarantine_.push_back(s);
        if (quarantine_.size() > kQuarantine) {
            give_back(quarantine_.front());
            quarantine_.pop_front();
        }
    }

    uint32_t seg_size() const override { return seg_bytes_; }

    // Segments handed out and not released.
    uint32_t in_use() const { return static_cast<uint32_t>(live_.size()); }
    uint32_t capacity() const { return heap_.capacity(); }
    // Refuse allocations beyond n live segments (pool-exhaustion paths); capacity() lifts it.
    void set_limit(uint32_t n) { limit_ = std::min(n, heap_.capacity()); }

    // The end of one input: every segment must be back (leak check), and untouched since release.
    void end_of_input() {
        if (!live_.empty()) {
            std::fprintf(stderr, "fuzz: %zu packet segments leaked\n", live_.size());
            __builtin_trap();
        }
        flush_quarantine();
        FUZZ_CHECK(heap_.in_use() == 0);
        limit_ = heap_.capacity();
    }

   private:
    void give_back(PktBuf* s) {
        FUZZ_CHECK(s->refcnt == kCanaryRef);  // a reference dropped or taken after release
        FUZZ_CHECK(s->nb_segs == kCanaryRef && s->data_off == kCanary32 && s->data_len == kCanary32 &&
                   s->pkt_len == kCanary32);
        FUZZ_CHECK(s->direct == nullptr);
        s->refcnt = 0;
        heap_.seg_release(s);
    }
    void flush_quarantine() {
        for (PktBuf* s : quarantine_) give_back(s);
        quarantine_.clear();
    }

    HeapPktPool heap_;
    uint32_t seg_bytes_;
    uint32_t limit_ = 0;
    std::deque<PktBuf*> quarantine_;
    std::unordered_set<PktBuf*> live_;
};

// ---------------------------------------------------------------------------------------- reader

class Reader {
   public:
    Reader(const uint8_t* data, size_t size) : p_(data), n_(size) {}
    size_t left() const { return n_; }
    bool empty() const { return n_ == 0; }
    uint8_t u8() {
        if (n_ == 0) return 0;
        --n_;
        return *p_++;
    }
    uint16_t u16() { return static_cast<uint16_t>(u8() << 8 | u8()); }
    uint32_t u32() { return uint32_t{u16()} << 16 | u16(); }
    // Up to n bytes (fewer when the input runs out); *got says how many.
    const uint8_t* take(size_t n, size_t* got) {
        const uint8_t* q = p_;
        *got = std::min(n, n_);
        p_ += *got;
        n_ -= *got;
        return q;
    }
    std::vector<uint8_t> bytes(size_t n) {
        size_t got = 0;
        const uint8_t* q = take(n, &got);
        return std::vector<uint8_t>(q, q + got);
    }
    std::vector<uint8_t> rest() { return bytes(n_); }

   private:
    const uint8_t* p_;
    size_t n_;
};

// ------------------------------------------------------------------------------------- addresses

inline constexpr MacAddr kMacA{{0x02, 0, 0, 0, 0, 0x01}};  // the peer
inline constexpr MacAddr kMacB{{0x02, 0, 0, 0, 0, 0x02}};  // the stack under test
inline constexpr Ipv4Addr kIpA{0x0a000001u};                // 10.0.0.1
inline constexpr Ipv4Addr kIpB{0x0a000002u};                // 10.0.0.2
inline constexpr Ipv4Addr kIpBcast{0xffffffffu};

inline StackConfig host_config(const MacAddr& mac, Ipv4Addr ip, uint32_t mtu = 1500) {
    StackConfig c;
    c.mac = mac;
    c.ip = ip;
    c.mtu_bytes = mtu;
    c.tx_queue_frames = 256;
    return c;
}

// ------------------------------------------------------------------------------------- builders

inline void put16(std::vector<uint8_t>& v, uint16_t x) {
    v.push_back(static_cast<uint8_t>(x >> 8));
    v.push_back(static_cast<uint8_t>(x));
}
inline void put32(std::vector<uint8_t>& v, uint32_t x) {
    put16(v, static_cast<uint16_t>(x >> 16));
    put16(v, static_cast<uint16_t>(x));
}
inline uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
inline uint32_t get32(const uint8_t* p) { return uint32_t{get16(p)} << 16 | get16(p + 2); }
inline void set16(uint8_t* p, uint16_t x) {
    p[0] = static_cast<uint8_t>(x >> 8);
    p[1] = static_cast<uint8_t>(x);
}

inline void put_eth(std::vector<uint8_t>& v, const MacAddr& dst, const MacAddr& src, uint16_t type) {
    v.insert(v.end(), dst.b.begin(), dst.b.end());
    v.insert(v.end(), src.b.begin(), src.b.end());
    put16(v, type);
}

// The IPv4 header checksum over hl bytes at h, with the checksum field taken as zero.
inline uint16_t ipv4_csum(const uint8_t* h, size_t hl) {
    uint64_t sum = csum_add(0, h, std::min<size_t>(hl, 10));
    if (hl > 12) sum = csum_add(sum, h + 12, hl - 12);
    return csum_finish(sum);
}

// An IPv4 header of ihl words (5..15; options are NOPs then a filler) for `payload` bytes.
inline void put_ipv4(std::vector<uint8_t>& v, Ipv4Addr src, Ipv4Addr dst, uint8_t proto, uint16_t id,
                     uint16_t frag_field, uint32_t payload, uint32_t ihl = 5, uint8_t ttl = 64) {
    const size_t at = v.size();
    const uint32_t hl = ihl * 4;
    v.push_back(static_cast<uint8_t>(0x40 | ihl));
    v.push_back(0);
    put16(v, static_cast<uint16_t>(hl + payload));
    put16(v, id);
    put16(v, frag_field);
    v.push_back(ttl);
    v.push_back(proto);
    put16(v, 0);
    put32(v, src.v);
    put32(v, dst.v);
    for (uint32_t i = 20; i < hl; ++i) v.push_back(i + 1 < hl ? 0x01 : 0x00);  // NOPs, then EOL
    set16(&v[at + 10], ipv4_csum(&v[at], hl));
}

// The UDP checksum of the len bytes at udp (checksum field taken as zero), as sent (0 -> 0xffff).
inline uint16_t udp_csum(Ipv4Addr src, Ipv4Addr dst, const uint8_t* udp, size_t len) {
    uint64_t sum = uint64_t{src.v >> 16} + (src.v & 0xffff) + (dst.v >> 16) + (dst.v & 0xffff) + kIpProtoUdp + len;
    sum = csum_add(sum, udp, std::min<size_t>(len, 6));
    if (len > 8) sum = csum_add(sum, udp + 8, len - 8);
    const uint16_t c = csum_finish(sum);
    return c == 0 ? 0xffff : c;
}

// How a packet is cut into segments: `first` bytes in the head (which has kPktHeadroom in
// front), then `rest` bytes a segment; 0 means as many as fit.
struct Split {
    uint32_t first = 0;
    uint32_t rest = 0;
};

// Sizes that sit on and around header boundaries (eth 14, ipv4 20..60, udp 8, arp 28, slidwin 32).
inline Split split_from(uint8_t sel) {
    static constexpr uint32_t kCuts[16] = {0, 1, 7, 13, 14, 15, 27, 33, 34, 35, 41, 42, 43, 47, 64, 0};
    Split s;
    s.first = kCuts[sel & 15];
    static constexpr uint32_t kRest[16] = {0, 1, 3, 8, 9, 16, 31, 64, 100, 255, 511, 1000, 0, 0, 0, 0};
    s.rest = kRest[(sel >> 4) & 15];
    return s;
}

// A packet holding bytes (cut per split); nullptr when the pool ran dry (nothing leaked).
inline PktBuf* make_pkt(PktPool& pool, const uint8_t* data, size_t len, Split split = {}) {
    // At most ~256 segments: tiny segments for a long packet would only exhaust the pool.
    if (split.rest != 0 && len / split.rest > 256) split.rest = static_cast<uint32_t>(len / 256 + 1);
    PktBuf* head = pkt_alloc(pool, kPktHeadroom);
    if (head == nullptr) return nullptr;
    size_t done = 0;
    PktBuf* tail = head;
    bool first = true;
    while (first || done < len) {
        PktBuf* s = first ? head : pool.seg_alloc(0);
        if (s == nullptr) {
            pkt_free(head);
            return nullptr;
        }
        if (!first) tail->next = s;
        tail = s;
        const uint32_t want = first ? split.first : split.rest;
        uint32_t k = static_cast<uint32_t>(std::min<size_t>(len - done, s->tailroom()));
        if (want != 0) k = std::min(k, want);
        if (k > 0) std::memcpy(s->data() + s->data_len, data + done, k);
        s->data_len += k;
        done += k;
        first = false;
    }
    pkt_recount(head);
    return head;
}
inline PktBuf* make_pkt(PktPool& pool, const std::vector<uint8_t>& v, Split split = {}) {
    return make_pkt(pool, v.data(), v.size(), split);
}

// ---------------------------------------------------------------------------------------- checks

// The chain is consistent: lengths add up, segments lie in their storage, references are live.
inline void check_chain(const PktBuf* head) {
    uint64_t len = 0;
    uint32_t n = 0;
    for (const PktBuf* s = head; s != nullptr; s = s->next) {
        FUZZ_CHECK(s->refcnt >= 1);
        FUZZ_CHECK(uint64_t{s->data_off} + s->data_len <= s->buf_len);
        if (s->direct != nullptr) FUZZ_CHECK(s->direct->refcnt >= 1 && s->direct->direct == nullptr);
        len += s->data_len;
        ++n;
        FUZZ_CHECK(n <= 65535);
    }
    FUZZ_CHECK(len == head->pkt_len);
    FUZZ_CHECK(n == head->nb_segs);
}

inline std::vector<uint8_t> pkt_bytes(const PktBuf* p) {
    std::vector<uint8_t> v(p->pkt_len);
    FUZZ_CHECK(pkt_read(p, 0, p->pkt_len, v.data()) == p->pkt_len);
    return v;
}

// Sum of every drop_* counter: a frame the stack did not use must have raised one of them.
inline uint64_t drops(const StackCounters& c) {
    uint64_t n = 0;
    c.for_each([&](const char* name, const char*, uint64_t v) {
        if (std::strncmp(name, "drop_", 5) == 0) n += v;
    });
    return n;
}

// ICCS_FUZZ_VERBOSE=1 in the environment: each target prints what an input did (for checking
// that a seed goes where it should: `ICCS_FUZZ_VERBOSE=1 build/tests/fuzz/fuzz_eth seed.bin`).
inline bool verbose() {
    static const bool v = std::getenv("ICCS_FUZZ_VERBOSE") != nullptr;
    return v;
}

// For triage: every non-zero counter, on stderr.
inline void dump_counters(const char* who, const StackCounters& c) {
    std::fprintf(stderr, "%s:", who);
    c.for_each([](const char* name, const char*, uint64_t v) {
        if (v != 0) std::fprintf(stderr, " %s=%llu", name, static_cast<unsigned long long>(v));
    });
    std::fprintf(stderr, "\n");
}

// One frame the stack `s` transmitted must be well formed: Ethernet from its MAC and at least the
// minimum frame; ARP from its addresses; IPv4 with a good header checksum, from its address, whose
// total length fits the frame and the MTU; an unfragmented UDP datagram with a good checksum.
inline void check_tx_frame(const Stack& s, const PktBuf* f) {
    check_chain(f);
    const std::vector<uint8_t> v = pkt_bytes(f);
    FUZZ_CHECK(v.size() >= kEthMinFrame);
    FUZZ_CHECK(std::equal(s.config().mac.b.begin(), s.config().mac.b.end(), v.begin() + 6));
    const uint16_t type = get16(&v[12]);
    const uint8_t* l3 = v.data() + kEthHdrLen;
    const size_t l3len = v.size() - kEthHdrLen;
    if (type == kEtherTypeArp) {
        FUZZ_CHECK(l3len >= kArpHdrLen);
        FUZZ_CHECK(get16(l3) == 1 && get16(l3 + 2) == 0x0800 && l3[4] == 6 && l3[5] == 4);
        FUZZ_CHECK(get16(l3 + 6) == kArpOpRequest || get16(l3 + 6) == kArpOpReply);
        FUZZ_CHECK(std::equal(s.config().mac.b.begin(), s.config().mac.b.end(), l3 + 8));
        FUZZ_CHECK(get32(l3 + 14) == s.config().ip.v);
        return;
    }
    FUZZ_CHECK(type == kEtherTypeIpv4);
    FUZZ_CHECK(l3len >= kIpv4HdrLen);
    FUZZ_CHECK(l3[0] == 0x45);
    FUZZ_CHECK(ipv4_csum(l3, 20) == get16(l3 + 10));
    const uint32_t total = get16(l3 + 2);
    FUZZ_CHECK(total >= kIpv4HdrLen && total <= l3len && total <= s.config().mtu_bytes);
    FUZZ_CHECK(l3len == total || (total < kEthMinFrame - kEthHdrLen && v.size() == kEthMinFrame));
    FUZZ_CHECK(get32(l3 + 12) == s.config().ip.v);
    const uint16_t frag = get16(l3 + 6);
    if ((frag & 0x1fff) != 0) FUZZ_CHECK((frag & kIpFlagDF) == 0);
    if ((frag & (kIpFlagMF | 0x1fff)) == 0 && l3[9] == kIpProtoUdp) {
        const uint8_t* u = l3 + 20;
        const uint32_t ulen = total - 20;
        FUZZ_CHECK(ulen >= kUdpHdrLen && get16(u + 4) == ulen);
        FUZZ_CHECK(get16(u + 6) == udp_csum(s.config().ip, Ipv4Addr{get32(l3 + 16)}, u, ulen));
    }
    if ((frag & kIpFlagMF) != 0) FUZZ_CHECK((total - 20) % 8 == 0 && total > 20);
}

// Take every frame the stack queued, check it, and hand it to keep (or free it).
inline uint32_t drain_tx(Stack& s, std::vector<PktBuf*>* keep = nullptr) {
    uint32_t n = 0;
    PktBuf* out[32];
    for (;;) {
        const uint32_t k = s.tx_take(out, 32);
        if (k == 0) break;
        for (uint32_t i = 0; i < k; ++i) {
            check_tx_frame(s, out[i]);
            if (keep != nullptr)
                keep->push_back(out[i]);
            else
                pkt_free(out[i]);
        }
        n += k;
    }
    FUZZ_CHECK(s.tx_queued() == 0);
    return n;
}

// ------------------------------------------------------------------------------------ echo rig

inline constexpr uint16_t kPortDiscard = 9;
inline constexpr uint16_t kPortEcho = 7;       // echoed in the same buffer
inline constexpr uint16_t kPortEchoCopy = 19;  // echoed from a copy
inline constexpr uint16_t kPortPeer = 7;       // where echoes go on the peer

struct EchoRig {
    // Reads the whole datagram (every byte of the chain) and drops it.
    struct Discard : UdpHandler {
        EchoRig& rig;
        explicit Discard(EchoRig& r) : rig(r) {}
        void udp_deliver(PktBuf* p, const UdpMeta& meta, uint64_t) override {
            rig.on_delivery(p, meta);
            (void)pkt_bytes(p);
            pkt_free(p);
        }
    };
    // Sends the payload back to port 7 of its source: in the same buffer, or from a copy.
    struct Echo : UdpHandler {
        EchoRig& rig;
        bool copy;
        Echo(EchoRig& r, bool c) : rig(r), copy(c) {}
        void udp_deliver(PktBuf* p, const UdpMeta& meta, uint64_t) override {
            rig.on_delivery(p, meta);
            if (copy) {
                PktBuf* c = pkt_copy(rig.pool, p);
                pkt_free(p);
                if (c == nullptr) return;
                p = c;
            }
            // Echoes addressed to the peer (or broadcast) must reach it intact.
            if (meta.src == kIpA || meta.src == kIpBcast) rig.expected.push_back(pkt_bytes(p));
            rig.b.udp_output(p, meta.dst_port, meta.src, kPortPeer);
        }
    };
    // The peer's end: records what arrives.
    struct Recorder : UdpHandler {
        EchoRig& rig;
        explicit Recorder(EchoRig& r) : rig(r) {}
        void udp_deliver(PktBuf* p, const UdpMeta& meta, uint64_t) override {
            check_chain(p);
            FUZZ_CHECK(meta.src == kIpB && meta.dst_port == kPortPeer);
            rig.received.push_back(pkt_bytes(p));
            pkt_free(p);
        }
    };

    FuzzPool& pool;
    Stack b;  // under test
    Stack a;  // the peer
    Discard discard{*this};
    Echo echo{*this, false};
    Echo echo_copy{*this, true};
    Recorder recorder{*this};
    uint64_t now = 1'000'000'000;
    uint64_t delivered = 0;
    uint64_t peer_nobuf = 0;
    std::vector<std::vector<uint8_t>> expected, received;

    EchoRig(FuzzPool& p, uint32_t mtu) : pool(p), b(host_config(kMacB, kIpB, mtu), p), a(host_config(kMacA, kIpA), p) {
        b.arp().add_static(kIpA, kMacA);
        a.arp().add_static(kIpB, kMacB);
        b.bind(kPortDiscard, &discard);
        b.bind(kPortEcho, &echo);
        b.bind(kPortEchoCopy, &echo_copy);
        a.bind(kPortPeer, &recorder);
    }

    void on_delivery(PktBuf* p, const UdpMeta& meta) {
        check_chain(p);
        FUZZ_CHECK(meta.dst == kIpB || meta.dst == kIpBcast);
        ++delivered;
        // The handler of that port, and nobody else, was called.
        FUZZ_CHECK(meta.dst_port == kPortDiscard || meta.dst_port == kPortEcho || meta.dst_port == kPortEchoCopy);
    }

    // One frame into the stack under test: it must be used (delivered, answered, held for
    // reassembly) or dropped with a counter, never dropped silently.
    void feed(PktBuf* frame) {
        if (frame == nullptr) return;
        const StackCounters c0 = b.counters();
        const uint64_t d0 = delivered;
        b.input_burst(&frame, 1, now);
        const StackCounters& c1 = b.counters();
        FUZZ_CHECK(c1.rx_frames == c0.rx_frames + 1);
        const uint64_t accounted = (drops(c1) - drops(c0)) + (delivered - d0) + (c1.arp_rx_request - c0.arp_rx_request) +
                                   (c1.arp_rx_reply - c0.arp_rx_reply) + (c1.ip_frag_rx - c0.ip_frag_rx);
        FUZZ_CHECK(accounted >= 1);
        check_reassembler(b.reassembler(), b.config().reass);
    }

    static void check_reassembler(const Ipv4Reassembler& r, const ReassemblyConfig& cfg) {
        FUZZ_CHECK(r.datagrams_held() <= cfg.max_datagrams);
        FUZZ_CHECK(r.bytes_held() <= cfg.max_bytes);
        if (r.datagrams_held() == 0) FUZZ_CHECK(r.bytes_held() == 0);
    }

    // Move what the stack sent to the peer (echoes) and check they arrived as sent.
    void settle() {
        std::vector<PktBuf*> frames;
        drain_tx(b, &frames);
        for (PktBuf* f : frames) {
            // Only IPv4 for the peer's address (or broadcast) is the peer's business.
            uint8_t h[kEthHdrLen + kIpv4HdrLen];
            const bool ipv4 = pkt_read(f, 0, sizeof h, h) == sizeof h && get16(h + 12) == kEtherTypeIpv4;
            const uint32_t dst = ipv4 ? get32(h + kEthHdrLen + 16) : 0;
            if (ipv4 && (dst == kIpA.v || dst == kIpBcast.v)) {
                // Into the peer's own buffers, as a NIC (and MemWire) would: a frame as the
                // stack built it (a header-only head, then views) is not what a device delivers.
                PktBuf* r = pkt_copy(a.pool(), f);
                if (r != nullptr)
                    a.input_burst(&r, 1, now);
                else
                    ++peer_nobuf;  // the peer's "NIC" had no buffer: the echo is lost
            }
            pkt_free(f);
        }
        drain_tx(a);
    }

    // After the last frame: every echo the stack under test sent without a counted drop on its
    // output path arrived at the peer byte for byte, and the peer dropped nothing of ours.
    void finish() {
        settle();
        const StackCounters& cb = b.counters();
        const bool out_clean = cb.drop_ip_nobuf == 0 && cb.drop_tx_full == 0 && cb.drop_arp_pending_full == 0 &&
                               cb.drop_ip_too_big == 0 && peer_nobuf == 0;
        if (verbose() || drops(a.counters()) != 0 || (out_clean && received != expected)) {
            dump_counters("stack under test", cb);
            dump_counters("peer", a.counters());
            std::fprintf(stderr, "echoes expected %zu, received %zu\n", expected.size(), received.size());
        }
        FUZZ_CHECK(drops(a.counters()) == 0);
        if (out_clean) {
            FUZZ_CHECK(received.size() == expected.size());
            for (size_t i = 0; i < expected.size(); ++i) FUZZ_CHECK(received[i] == expected[i]);
        } else {
            FUZZ_CHECK(received.size() <= expected.size());
        }
        // Time passes: partial datagrams expire and every byte held goes back.
        now += 10'000'000'000ull;
        b.timers(now);
        a.timers(now);
        FUZZ_CHECK(b.reassembler().datagrams_held() == 0 && b.reassembler().bytes_held() == 0);
        drain_tx(b);
        drain_tx(a);
    }
};

}  // namespace fuzz
