// pktbuf.hpp: the packet-buffer view every layer of the stack works on.
//
// One idea: a packet is a chain of segments, each a window [data_off, data_off + data_len) into a
// backing buffer with headroom in front. Output layers prepend their header into the headroom of
// the head segment, input layers strip theirs by moving data_off; nobody copies payload. The
// fields mirror rte_mbuf (buf_addr, data_off, data_len, pkt_len, nb_segs, refcnt, next, indirect
// attach), so the proxy can back a PktBuf by an mbuf without a copy, and tests back it by the heap.
//
// Reference counting follows DPDK: pkt_ref() bumps every segment of a chain, pkt_free() drops
// every segment and returns those that reach zero. An indirect segment views the storage of a
// "direct" segment and holds one reference on it (that is how IP fragments share the datagram).
//
// Threading: a PktBuf and its pool belong to one thread at a time (_st); handing a pointer over
// a ring hands over ownership.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace iccs {

// Room in front of the first byte of a fresh buffer: eth(14) + ipv4(20) + udp(8) + slidwin(40)
// + its auth block (24, with a key) + convergence(40) + a bundle record's length (2) = 148, so a
// message can become a bundle (proxy/bundle.hpp) under a key too; rounded up to a cache-line
// multiple.
inline constexpr uint32_t kPktHeadroom = 192;

struct PktPool;

struct PktBuf {
    uint8_t* buf = nullptr;     // backing storage (for an indirect segment: the direct's storage)
    PktBuf* next = nullptr;     // next segment of the same packet
    PktPool* pool = nullptr;    // where this segment returns
    PktBuf* direct = nullptr;   // indirect segment: the segment whose storage it views (ref held)
    uint32_t buf_len = 0;       // bytes of backing storage
    uint32_t data_off = 0;      // first data byte within buf
    uint32_t data_len = 0;      // data bytes in this segment
    uint32_t pkt_len = 0;       // head segment only: data bytes in the whole chain
    uint16_t nb_segs = 1;       // head segment only
    uint16_t refcnt = 1;
    uint32_t meta = 0;          // for the layer that currently owns the packet (e.g. frag offset)
    uint64_t ts_ns = 0;         // for the layer that currently owns the packet (e.g. arrival time)
    void* backing = nullptr;    // the pool's own handle (e.g. the rte_mbuf behind this segment)
    uint64_t buf_iova = 0;      // device address of buf (DPDK IOVA); a view copies its direct's
    // The Internet checksum's partial sum (folded, csum_add's word order) of the bytes
    // [sum_at, sum_at + sum_len) of buf, kept by pkt_write(..., PktSum::kKeep) while it copies
    // them in, so that the UDP checksum (csum_chain) takes it instead of reading those bytes
    // again on another core (issue 35). sum_len 0: none. Whoever changes those bytes in place
    // afterwards clears it (pkt_sum_forget): the checksum would be of the old bytes.
    uint32_t sum_at = 0;
    uint32_t sum_len = 0;
    uint16_t sum = 0;
    // Room for the device layer's per-segment state while the segment is on a TX queue (the
    // proxy keeps an rte_mbuf_ext_shared_info here); the stack never touches it.
    alignas(8) uint8_t dev_scratch[24] = {};

    uint8_t* data() { return buf + data_off; }
    const uint8_t* data() const { return buf + data_off; }
    uint32_t headroom() const { return data_off; }
    uint32_t tailroom() const { return buf_len - data_off - data_len; }
};

// A source of segments. The stack calls only these two; a pool decides where storage lives.
struct PktPool {
    virtual ~PktPool() = default;
    // A fresh segment: refcnt 1, data_off = headroom, data_len 0, next/direct null; nullptr when empty.
    virtual PktBuf* seg_alloc(uint32_t headroom) = 0;
    // Return a segment whose refcnt reached zero (its direct reference is already dropped).
    virtual void seg_release(PktBuf* seg) = 0;
    // Size of one segment's storage, so writers know when to chain.
    virtual uint32_t seg_size() const = 0;
};

// A pool of fixed-size segments carved from the heap once, with a free stack: no allocation per
// packet. `in_use()` is the leak check every test ends with.
class HeapPktPool final : public PktPool {
   public:
    HeapPktPool(uint32_t nsegs, uint32_t seg_bytes);
    PktBuf* seg_alloc(uint32_t headroom) override;
    void seg_release(PktBuf* seg) override;
    uint32_t seg_size() const override { return seg_bytes_; }
    uint32_t in_use() const { return nsegs_ - nfree_; }
    uint32_t capacity() const { return nsegs_; }
    uint64_t alloc_failures() const { return alloc_failures_; }

   private:
    uint32_t nsegs_, seg_bytes_;
    std::unique_ptr<uint8_t[]> storage_;
    std::unique_ptr<PktBuf[]> segs_;
    std::unique_ptr<PktBuf*[]> free_;  // a stack of nsegs_ slots: no capacity check or growth per push
    uint32_t nfree_ = 0;
    uint64_t alloc_failures_ = 0;
};

// Segments from `first` while it has any, else from `fallback`: what a writer chains a large
// payload from when a pool of large segments stands beside the pool of small ones (convergence's
// copying send on a jumbo-frame fabric: every segment of a frame costs the proxy a view, a TX
// descriptor and a cache miss or two, so fewer and larger ones, issue 35). It owns no segment:
// each one returns to the pool it came from (PktBuf::pool). seg_size() is first's, the room a
// writer plans with.
class FallbackPktPool final : public PktPool {
   public:
    FallbackPktPool(PktPool& first, PktPool& fallback) : first_(first), fallback_(fallback) {}
    PktBuf* seg_alloc(uint32_t headroom) override {
        if (PktBuf* s = first_.seg_alloc(headroom)) return s;
        ++fallbacks_;
        return fallback_.seg_alloc(headroom);
    }
    void seg_release(PktBuf* seg) override { seg->pool->seg_release(seg); }  // never its own
    uint32_t seg_size() const override { return first_.seg_size(); }
    uint64_t fallbacks() const { return fallbacks_; }  // segments `first` could not give

   private:
    PktPool& first_;
    PktPool& fallback_;
    uint64_t fallbacks_ = 0;
};

// A fresh one-segment packet with `headroom` bytes in front; nullptr when the pool is empty.
inline PktBuf* pkt_alloc(PktPool& pool, uint32_t headroom = kPktHeadroom) { return pool.seg_alloc(headroom); }
// Drop one reference on a single segment (never follows next); at zero it returns to its pool.
[[gnu::noinline]] void pkt_seg_put(PktBuf* s);
// Drop one reference on every segment of the chain; segments reaching zero go back to their pool.
inline void pkt_free(PktBuf* head) {
    while (head != nullptr) {
        PktBuf* nx = head->next;
        // the common case inline: a direct segment whose last reference goes
        if (head->direct == nullptr && head->refcnt == 1) {
            head->refcnt = 0;
            head->pool->seg_release(head);
        } else if (head->direct == nullptr) {  // another holder keeps it (a transmitted datagram slidwin holds)
            --head->refcnt;
        } else {
            pkt_seg_put(head);
        }
        head = nx;
    }
}
// Take one more reference on every segment of the chain.
inline void pkt_ref(PktBuf* head) {
    for (PktBuf* s = head; s != nullptr; s = s->next) ++s->refcnt;
}
// True when some segment of the chain is shared (refcnt > 1 or indirect): writing to it would be
// seen by another holder.
bool pkt_shared(const PktBuf* head);

// Grow the packet at the front by len bytes of headroom; returns the new first byte or nullptr.
// A view's headroom is someone else's data: never prepend into an indirect segment.
inline uint8_t* pkt_prepend(PktBuf* head, uint32_t len) {
    if (head->direct != nullptr || head->data_off < len) return nullptr;
    head->data_off -= len;
    head->data_len += len;
    head->pkt_len += len;
    return head->data();
}
// Strip len bytes from the front (within the head segment); returns the new first byte or nullptr.
inline uint8_t* pkt_adj(PktBuf* head, uint32_t len) {
    if (head->data_len < len) return nullptr;
    head->data_off += len;
    head->data_len -= len;
    head->pkt_len -= len;
    return head->data();
}
// Cut the packet to new_len bytes from its tail (frees segments that fall off); false if longer.
[[gnu::noinline]] bool pkt_trim_to(PktBuf* head, uint32_t new_len);
// Append len bytes of tailroom in the last segment; returns where to write or nullptr.
uint8_t* pkt_append_slow(PktBuf* head, uint32_t len);
inline uint8_t* pkt_append(PktBuf* head, uint32_t len) {
    if (head->next != nullptr || head->direct != nullptr || head->tailroom() < len) return pkt_append_slow(head, len);
    uint8_t* p = head->data() + head->data_len;  // the usual one-segment packet
    head->data_len += len;
    head->pkt_len += len;
    return p;
}
// Append bytes, chaining new segments from `pool` when the last one fills; false on pool empty
// (the packet keeps what was written so far; the caller frees it). PktSum::kKeep also sums the
// bytes each segment took while they are in this core's cache (PktBuf::sum): for payload that the
// stack's UDP checksum will cover (convergence's sends on a DPDK fabric), not for bytes that are
// never summed (a received datagram's copy).
enum class PktSum : bool { kNone, kKeep };
inline constexpr uint32_t kPktSumMinBytes = 256;  // fewer bytes into a segment: no sum kept
bool pkt_write(PktBuf* head, PktPool& pool, const void* src, uint32_t len, PktSum sums = PktSum::kNone);
// The bytes of segment s were changed in place (encrypted): its kept sum no longer holds.
inline void pkt_sum_forget(PktBuf* s) { s->sum_len = 0; }
// Link `tail` (a chain) after the last segment of `head`.
void pkt_chain(PktBuf* head, PktBuf* tail);

// Copy len bytes starting at off out of the chain; returns bytes copied.
uint32_t pkt_read(const PktBuf* head, uint32_t off, uint32_t len, void* dst);
// Pointer to len contiguous bytes at off: into the segment when they lie in one, else copied
// into scratch (len bytes). nullptr if the packet is shorter.
[[gnu::noinline]] const uint8_t* pkt_contig_slow(const PktBuf* head, uint32_t off, uint32_t len, uint8_t* scratch);
inline const uint8_t* pkt_contig(const PktBuf* head, uint32_t off, uint32_t len, uint8_t* scratch) {
    if (static_cast<uint64_t>(off) + len <= head->data_len) return head->data() + off;  // in the head
    return pkt_contig_slow(head, off, len, scratch);
}

// A new chain of indirect segments viewing [off, off+len) of src (no copy; each holds a reference
// on the direct segment it views). The first segment is a fresh direct segment with `headroom`
// bytes for headers when headroom > 0. nullptr on pool exhaustion (nothing leaked).
PktBuf* pkt_slice(PktPool& pool, const PktBuf* src, uint32_t off, uint32_t len, uint32_t headroom);
// A deep copy into fresh segments of `pool` (what a NIC does when it DMAs a frame into the
// receiver's buffers). nullptr on pool exhaustion.
PktBuf* pkt_copy(PktPool& pool, const PktBuf* src, uint32_t headroom = kPktHeadroom);

// Recompute pkt_len and nb_segs of the head from the chain (after hand-editing segments).
void pkt_recount(PktBuf* head);

}  // namespace iccs
