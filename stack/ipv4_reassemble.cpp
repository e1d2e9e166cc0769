// ipv4_reassemble.cpp: IPv4 reassembly with hard bounds; see ipv4_reassemble.hpp.
//
// Slots are found by a linear scan: the table is sized for tens of partial datagrams, and the
// scan doubles as lazy expiry. Slot objects are created on demand (never more than
// max_datagrams), then reused with their fragment vectors, so a steady stream of fragmented
// datagrams allocates nothing.
#include "ipv4_reassemble.hpp"

#include <algorithm>
#include <cstddef>
#include <iterator>

#include "checksum.hpp"
#include "ipv4_frag.hpp"

namespace iccs {

namespace {

// total_len is 16 bits and counts the header: with the smallest header (20 bytes) a datagram
// carries at most 65515 payload bytes (RFC 791 §3.1).
constexpr uint32_t kMaxPayload = kIpv4MaxDatagram - kIpv4HdrLen;

// Fragment entries reserved per slot: every datagram from a link with MTU >= kMtuMin fits without
// regrowth. Smaller fragments grow the vector; the byte cap still bounds how many are held,
// because every fragment pins at least one segment.
constexpr size_t kFragsReserved = kIpv4MaxFragments;

uint32_t hdr_len_at(const PktBuf* p) { return (p->data()[0] & 0x0fu) * 4u; }

// What a fragment keeps from going back to its pool: every segment's storage, including the
// storage an indirect segment views (its buf_len is the direct's).
uint32_t pinned_bytes(const PktBuf* p) {
    uint32_t n = 0;
    for (; p != nullptr; p = p->next) n += p->buf_len;
    return n;
}

}  // namespace

struct Ipv4Reassembler::Slot {
    struct Frag {
        PktBuf* p;        // as received: data() at its IPv4 header
        uint32_t off;     // its first payload byte within the datagram [bytes]
        uint32_t end;     // one past its last payload byte [bytes]
        uint32_t pinned;  // storage it holds, counted against max_bytes [bytes]
    };

    bool live = false;
    bool last_seen = false;
    uint8_t proto = 0;
    uint32_t cls = 0;          // the source class whose quota it counts against
    uint16_t id = 0;
    uint32_t src = 0;
    uint32_t dst = 0;
    uint32_t hl0 = 0;          // header length of the offset-0 fragment, 0 until it arrives [bytes]
    uint32_t total = 0;        // datagram payload, known once last_seen [bytes]
    uint32_t have = 0;         // payload held; fragments never overlap, so have == total is no hole
    uint64_t pinned = 0;       // sum of frags[].pinned [bytes]
    uint64_t deadline_ns = 0;  // first fragment's arrival + timeout
    std::vector<Frag> frags;   // sorted by off, non-overlapping

    // Back to unused; the caller has freed or taken the fragments and settled bytes_held_.
    void reset() {
        live = false;
        last_seen = false;
        hl0 = total = have = 0;
        pinned = 0;
        if (frags.capacity() > kFragsReserved) {  // a tiny-fragment datagram: give the memory back
            std::vector<Frag>().swap(frags);
            frags.reserve(kFragsReserved);
        } else {
            frags.clear();
        }
    }
};

Ipv4Reassembler::Ipv4Reassembler(const ReassemblyConfig& cfg) : cfg_(cfg) {
    slots_.reserve(cfg.max_datagrams);
}

Ipv4Reassembler::~Ipv4Reassembler() {
    for (Slot* s : slots_) {
        if (s->live) drop_slot(*s);
        delete s;
    }
}

void Ipv4Reassembler::drop_slot(Slot& s) {
    for (const Slot::Frag& f : s.frags) pkt_free(f.p);
    bytes_held_ -= s.pinned;
    s.reset();
}

Ipv4Reassembler::Quota Ipv4Reassembler::quota(uint32_t cls, uint32_t peers) const {
    if (peers == 0) return Quota{cfg_.max_datagrams, cfg_.max_bytes};
    const Quota shared{std::max<uint32_t>(1, cfg_.max_datagrams / 8), std::max<uint64_t>(1, cfg_.max_bytes / 16)};
    if (cls >= peers) return shared;
    return Quota{std::max<uint32_t>(1, (cfg_.max_datagrams - shared.datagrams) / peers),
                 std::max<uint64_t>(1, (cfg_.max_bytes - shared.bytes) / peers)};
}

uint32_t Ipv4Reassembler::datagrams_held() const {
    uint32_t n = 0;
    for (const Slot* s : slots_) n += s->live ? 1u : 0u;
    return n;
}

void Ipv4Reassembler::expire(uint64_t now_ns, StackCounters& ctr) {
    for (Slot* s : slots_) {
        if (s->live && now_ns >= s->deadline_ns) {
            ++ctr.drop_reass_timeout;
            drop_slot(*s);
        }
    }
}

PktBuf* Ipv4Reassembler::ipv4_reassemble(PktBuf* frag, uint64_t now_ns, StackCounters& ctr, uint32_t source,
                                         uint32_t peers) {
    // The one exit of every drop: count it, drop the datagram it condemns (if any), free it.
    auto drop = [&](uint64_t& counter, Slot* whole) -> PktBuf* {
        ++counter;
        if (whole != nullptr) drop_slot(*whole);
        pkt_free(frag);
        return nullptr;
    };

    // ipv4_input validated this; re-checked because the header is read and stripped in place.
    if (frag->data_len < kIpv4HdrLen) return drop(ctr.drop_ip_frag_bad, nullptr);
    const Ipv4Hdr h = load_hdr<Ipv4Hdr>(frag->data());
    const uint32_t hl = h.hdr_len();
    if (hl < kIpv4HdrLen || hl > frag->data_len) return drop(ctr.drop_ip_frag_bad, nullptr);
    const uint32_t off = h.frag_off_bytes();
    const uint32_t len = frag->pkt_len - hl;
    const uint32_t end = off + len;
    const bool more = h.more_frags();
    if (off == 0 && !more) return frag;  // not a fragment: the whole datagram already

    const uint32_t cls = peers == 0 ? 0 : std::min(source, peers);  // peers: the strangers' class
    Slot* s = nullptr;
    Slot* spare = nullptr;
    uint32_t live = 0;      // partial datagrams of this class
    uint64_t held = 0;      // and the bytes they pin
    for (Slot* c : slots_) {
        if (c->live && now_ns >= c->deadline_ns) {  // the scan visits every slot: expire on the way
            ++ctr.drop_reass_timeout;
            drop_slot(*c);
        }
        if (!c->live) {
            if (spare == nullptr) spare = c;
            continue;
        }
        if (c->cls == cls) {
            ++live;
            held += c->pinned;
        }
        if (c->id == h.id.get() && c->src == h.src.get() && c->dst == h.dst.get() &&
            c->proto == h.proto)
            s = c;
    }

    // The datagram must fit total_len behind the offset-0 fragment's header (20 until seen).
    const uint32_t hl0 = off == 0 ? hl : (s != nullptr && s->hl0 != 0 ? s->hl0 : kIpv4HdrLen);
    const uint32_t max_end = s != nullptr ? std::max(end, s->frags.back().end) : end;
    if (max_end > kMaxPayload || hl0 + max_end > kIpv4MaxDatagram)
        return drop(ctr.drop_reass_oversize, s);
    // RFC 791 §3.2: only the last fragment may end off an 8-byte boundary; an empty one is junk.
    if (more && (len == 0 || len % 8 != 0)) return drop(ctr.drop_ip_frag_bad, s);

    size_t pos = 0;
    if (s != nullptr) {
        // A last fragment fixes the total: it must agree with an earlier one and with data held.
        const bool bad_end = !more ? (s->last_seen ? end != s->total : s->frags.back().end > end)
                                   : (s->last_seen && end > s->total);
        if (bad_end) return drop(ctr.drop_ip_frag_bad, s);
        const auto it = std::lower_bound(s->frags.begin(), s->frags.end(), off,
                                         [](const Slot::Frag& f, uint32_t o) { return f.off < o; });
        if (it != s->frags.end() && it->off == off && it->end == end) {
            ++ctr.ip_reass_dup;  // a retransmitted copy: harmless, keep the one held
            pkt_free(frag);
            return nullptr;
        }
        // RFC 5722's rule as Linux applies it to IPv4: overlapping data condemns the datagram.
        if ((it != s->frags.begin() && std::prev(it)->end > off) ||
            (it != s->frags.end() && it->off < end))
            return drop(ctr.drop_reass_overlap, s);
        pos = static_cast<size_t>(it - s->frags.begin());
    }

    // Over its quota a class loses its own oldest partial datagram (counted), as Linux evicts:
    // under loss the oldest is the one most likely to have lost a fragment for good, and keeping
    // it instead would stall every new fragmented datagram until the timeout. Another class's
    // datagrams are never touched. A fragment larger than the whole quota is dropped itself.
    const Quota q = quota(cls, peers);
    const uint32_t pinned = pinned_bytes(frag);
    if (pinned > q.bytes) return drop(ctr.drop_reass_cap, nullptr);
    auto evict_oldest = [&]() -> bool {
        Slot* oldest = nullptr;
        for (Slot* c : slots_)
            if (c->live && c != s && c->cls == cls && (oldest == nullptr || c->deadline_ns < oldest->deadline_ns))
                oldest = c;
        if (oldest == nullptr) return false;
        ++ctr.drop_reass_cap;
        held -= oldest->pinned;
        --live;
        drop_slot(*oldest);
        if (spare == nullptr) spare = oldest;
        return true;
    };
    while (held + pinned > q.bytes)
        if (!evict_oldest()) return drop(ctr.drop_reass_cap, s);
    if (s == nullptr) {
        while (live >= q.datagrams)
            if (!evict_oldest()) return drop(ctr.drop_reass_cap, nullptr);
        if (spare == nullptr) {  // slots_ grows to the sum of the quotas (max_datagrams, reserved)
            spare = new Slot;
            spare->frags.reserve(kFragsReserved);
            slots_.push_back(spare);
        }
        s = spare;
        s->live = true;
        s->cls = cls;
        s->id = h.id.get();
        s->src = h.src.get();
        s->dst = h.dst.get();
        s->proto = h.proto;
        s->deadline_ns = now_ns + cfg_.timeout_ns;
    }

    s->frags.insert(s->frags.begin() + static_cast<std::ptrdiff_t>(pos),
                    Slot::Frag{frag, off, end, pinned});
    s->pinned += pinned;
    bytes_held_ += pinned;
    s->have += len;
    if (off == 0) s->hl0 = hl;
    if (!more) {
        s->last_seen = true;
        s->total = end;
    }
    if (!s->last_seen || s->have != s->total) return nullptr;

    // Complete. The offset-0 fragment's buffer becomes the datagram: its header is rewritten
    // in place and the other fragments' payloads are linked behind it.
    PktBuf* whole = s->frags[0].p;
    PktBuf* tail = whole;
    while (tail->next != nullptr) tail = tail->next;
    for (size_t i = 1; i < s->frags.size(); ++i) {
        PktBuf* p = s->frags[i].p;
        pkt_adj(p, hdr_len_at(p));
        if (p->data_len == 0) {  // the head held only the header (e.g. a sliced fragment): drop it
            PktBuf* rest = p->next;
            p->next = nullptr;
            pkt_free(p);
            p = rest;
            if (p == nullptr) continue;
        }
        // Linked by hand with a running tail: pkt_chain would walk the chain from its head each
        // time. pkt_recount below fixes the head's pkt_len and nb_segs once.
        tail->next = p;
        while (tail->next != nullptr) tail = tail->next;
    }
    pkt_recount(whole);

    uint8_t* raw = whole->data();
    Ipv4Hdr wh = load_hdr<Ipv4Hdr>(raw);
    wh.total_len.set(static_cast<uint16_t>(s->hl0 + s->total));
    wh.frag.set(static_cast<uint16_t>(wh.frag.get() & kIpFlagDF));
    wh.csum.set(0);
    store_hdr(raw, wh);
    wh.csum.set(csum_finish(csum_add(0, raw, s->hl0)));  // over the options too
    store_hdr(raw, wh);

    bytes_held_ -= s->pinned;
    s->reset();  // the fragments now live in `whole`
    ++ctr.ip_reass_ok;
    return whole;
}

}  // namespace iccs
