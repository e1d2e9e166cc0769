// dpdk_pool.hpp: PktBuf storage in DPDK memory, and the zero-copy bridge to rte_mbuf.
//
// Two kinds of segment meet the stack in a proxy:
//  - MempoolPktPool: message and header buffers from an rte_mempool (DMA-able, thread-safe:
//    compute threads allocate from it and hand buffers to proxies over rings). Each object is a
//    PktBuf followed by its data room.
//  - RX mbufs: what the driver received. Each is wrapped in place (the PktBuf lives in the
//    mbuf's private area) and returns to its mempool when the stack drops its last reference.
// On transmit every segment is lent to the driver as an external buffer of a descriptor mbuf
// (rte_pktmbuf_attach_extbuf) whose free callback drops the stack's reference, so the stack's
// own reference counts stay the truth and nothing is copied. Drivers free transmitted mbufs in
// tx_burst on the proxy's own thread, which keeps PktBuf single-owner.
#pragma once

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <cstdint>
#include <memory>
#include <string>

#include "pktbuf.hpp"

namespace iccs {

class MempoolPktPool final : public PktPool {
   public:
    // The element of a pool of room_bytes buffers (a PktBuf, then the data room), for pool_obj_bytes.
    static uint32_t elt_bytes(uint32_t room_bytes);
    // n objects with room_bytes of data each (pool_flags()), lcore caches of up to cache objects;
    // nullptr and err on failure.
    static std::unique_ptr<MempoolPktPool> create(const std::string& name, uint32_t n, uint32_t room_bytes,
                                                  std::string& err, uint32_t cache = 256);
    ~MempoolPktPool() override;
    PktBuf* seg_alloc(uint32_t headroom) override;
    void seg_release(PktBuf* seg) override;
    uint32_t seg_size() const override { return room_; }
    uint32_t in_use() const;
    uint32_t capacity() const { return n_; }
    const rte_mempool* mempool() const { return mp_; }

   private:
    MempoolPktPool(rte_mempool* mp, uint32_t n, uint32_t room, bool iova_is_va)
        : mp_(mp), n_(n), room_(room), iova_is_va_(iova_is_va) {}
    rte_mempool* mp_;
    uint32_t n_, room_;
    // The EAL runs IOVA as VA (always under --no-huge): a buffer's device address is its address,
    // and seg_alloc need not read it from the object's mempool header, a cache line of its own
    // that nothing else on the path touches (a third of seg_alloc's time in a 1 MiB MPI stream,
    // on the sending bridge and on the proxy, for every segment: issue 35).
    bool iova_is_va_;
};

// The PktPool of RX-wrapped mbufs: release frees the mbuf segment; it never allocates.
class RxMbufPool final : public PktPool {
   public:
    PktBuf* seg_alloc(uint32_t) override { return nullptr; }
    void seg_release(PktBuf* seg) override;
    uint32_t seg_size() const override { return 0; }
};

// The private-area size an RX mempool needs so rx_wrap() can place a PktBuf in each mbuf.
uint16_t rx_priv_size();
// The mempool flags of every pool of a cluster: without hugepages (--no-huge: 4 KiB pages) an
// object may cross a page (RTE_MEMPOOL_F_NO_IOVA_CONTIG). Else DPDK keeps every object inside
// one page, and an object of 2.3-2.5 KiB (a message buffer, an RX mbuf) took a whole 4 KiB page:
// 40% of every pool wasted, which was why 16 clusters x 2 proxies could not start (issue 34).
// Nothing here needs a physically contiguous object: memif and af_packet copy, and under
// --no-huge DPDK runs IOVA as VA. With hugepages (2 MiB pages) the default stays.
unsigned pool_flags();
// The bytes one object of elt_bytes costs in such a pool (header, trailer, alignment).
uint32_t pool_obj_bytes(uint32_t elt_bytes);
// The element of an mbuf pool (rte_mbuf, private area, data room), for pool_obj_bytes.
uint32_t mbuf_elt_bytes(uint16_t priv_bytes, uint16_t data_room);
// rte_pktmbuf_pool_create with pool_flags(); nullptr with err naming the pool, its size and why.
rte_mempool* mbuf_pool_create(const std::string& name, uint32_t n, uint32_t cache, uint16_t priv_bytes,
                              uint16_t data_room, std::string& err);
// Wrap a received mbuf chain as a PktBuf chain (no copy). The mbufs are owned by the result.
PktBuf* rx_wrap(rte_mbuf* m, RxMbufPool& owner);
// Lend a frame to the driver: a descriptor mbuf per segment from desc_pool, each attached to the
// segment's storage. The driver's free of the descriptors drops the frame's references.
// nullptr (frame untouched) if desc_pool has too few descriptors.
rte_mbuf* tx_lend(PktBuf* frame, rte_mempool* desc_pool);
// Take back a lent frame the driver did not accept: the frame keeps its references.
void tx_unlend(PktBuf* frame, rte_mbuf* m);

// Map now every page of this process's mempools and of its memif regions, so that no packet
// buffer or ring slot costs a page fault at its first use. Without hugepages all of them are
// 4 KiB pages of memfds the kernel maps at the first touch (each process its own page tables),
// and a pool hands out every buffer once before any twice (its ring cycles): until then every
// message paid one or two faults a side, ~2.5 us each on this VM (the host maps the page too),
// for the first ~1000 messages of each size class (mpi/provider/SPEED.md, "First touches").
// With hugepages the pools are left alone (a fault per 2 MiB). After the links are up (memif maps
// its regions when it connects). The bytes populated, the time it took, and in fallback why the
// kernel refused MADV_POPULATE_WRITE (each page is then read, which maps a memfd's page writable).
struct PopulateResult {
    uint64_t bytes = 0;
    uint64_t ns = 0;
    std::string fallback;  // empty, or why MADV_POPULATE_WRITE was not used
};
PopulateResult populate_dpdk_memory();

// Where a mempool's objects are, for a report when something stalls (slow path: it walks every
// lcore's cache): "c0p1rx: 5890 of 6400 free (5506 in its ring, in lcore caches: l1 300, l3 84)".
// A port whose pool's ring holds fewer than a burst receives nothing (memif allocates a burst of
// 32 mbufs at once), however many sit in the caches of threads that do not receive.
std::string mempool_state(const rte_mempool* mp);

}  // namespace iccs
