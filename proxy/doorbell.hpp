// doorbell.hpp: wake on arrival across cluster processes on one host (issue 21).
//
// A proxy in adaptive polling sleeps on a futex word; compute threads of its own cluster wake it
// (rings.hpp, Waker). Frames from another cluster woke nobody: DPDK 22.11's net_memif and
// net_af_packet PMDs have no RX interrupts (rte_eth_dev_rx_intr_enable: ENOTSUP, probed by
// Port::open), so a sleeping proxy found a frame only when its bounded sleep ended. A doorbell puts
// the proxy's sleep word in a small file shared by the cluster processes of the run
// (`<sock_dir>/bell-c<C>p<P>`, the directory of the memif sockets): after a TX burst onto a link the
// sending proxy rings the receiving proxy's bell, which costs one load when that proxy is awake and
// one futex wake (a process-shared futex) when it sleeps: memif's own interrupt protocol (an
// eventfd written by the sender when the receiver unmasked it), at our level.
//
// Ordering: the sleeper says it sleeps (a seq_cst store), then polls its ports once more, then
// sleeps; the sender makes the frame visible (the driver's ring), a full fence, then reads the
// word. One of the two sees the other, so no frame waits for the bounded sleep.
//
// Watching (adaptive polling's assist): a compute thread that waits in a loop polls its proxies
// itself, so a frame for a sleeping proxy needs no wake while one watches: the sender skips the
// ring when the watch count is not 0. The last watcher to leave decrements the count, then, if
// the proxy sleeps, polls its ports once itself: a sender that saw the count before the
// decrement skipped the ring, and its frame was written before; a sender after it rings.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace iccs {

class Doorbell {
   public:
    // The bell file at path, created when missing (either side may be first). nullptr with err.
    static std::unique_ptr<Doorbell> open(const std::string& path, std::string& err);
    ~Doorbell();
    Doorbell(const Doorbell&) = delete;
    Doorbell& operator=(const Doorbell&) = delete;
    // The sleep word (1 while its proxy sleeps or is about to).
    std::atomic<uint32_t>* word() const { return word_; }
    // The watch count beside it: compute threads of the proxy's cluster that wait in a loop
    // polling the proxy themselves (the assist, proxy.hpp); while it is not 0 nobody rings.
    std::atomic<uint32_t>* watch() const { return word_ + 1; }
    // Wake the proxy if it sleeps and nobody watches its ports: one or two loads when not. Call
    // after a full fence that follows the write of what it should find.
    void ring();
    uint64_t rings() const { return rings_; }  // futex wakes this side issued

   private:
    explicit Doorbell(std::atomic<uint32_t>* w) : word_(w) {}
    std::atomic<uint32_t>* word_;
    uint64_t rings_ = 0;
};

// The doorbell file of proxy p of cluster c in dir.
std::string doorbell_path(const std::string& dir, uint16_t cluster, uint16_t proxy);

}  // namespace iccs
