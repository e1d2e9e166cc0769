// port.hpp: one DPDK ethdev port as a proxy sees it: bursts of PktBuf in and out.
//
// The same setup path serves every fabric: a virtual device is probed from its devargs
// (net_memif, net_af_packet, net_ring), a physical one is found by its PCI address (fabric
// "pci", allowed on the EAL command line); then one RX and one TX queue, started, link awaited.
#pragma once

#include <rte_ethdev.h>
#include <rte_mempool.h>

#include <cstdint>
#include <string>

#include "dpdk_pool.hpp"
#include "eth_hdr.hpp"

namespace iccs {

struct PortCounters {
    uint64_t rx_frames = 0, tx_frames = 0, rx_bursts = 0;
    uint64_t tx_ring_full = 0;  // bursts the device did not take whole (the rest is retried)
};

class Port {
   public:
    Port() = default;
    ~Port() { close(); }
    Port(const Port&) = delete;
    Port& operator=(const Port&) = delete;
    // devargs: "net_memif0,role=server,socket=/path,socket-abstract=no", "net_af_packet0,iface=veth0",
    // or a PCI address "0000:01:00.0". rx_pool: mbufs with rx_priv_size() private bytes.
    // start_timeout_ms: how long to retry starting (a memif client waits for its server).
    // An af_packet port gets the kernel-defrag fix-up of af_packet.hpp unless keep_kernel_defrag()
    // was called first (to reproduce the PMD's own behaviour).
    bool open(const std::string& devargs, rte_mempool* rx_pool, rte_mempool* desc_pool, uint32_t start_timeout_ms,
              std::string& err);
    void close();
    void keep_kernel_defrag() { keep_kernel_defrag_ = true; }
    // Wait until the link is up (a memif peer connected); false after timeout_ms.
    bool wait_link(uint32_t timeout_ms);
    bool link_up() const;

    // Up to max received frames, wrapped as PktBuf (zero copy).
    uint32_t rx_burst(PktBuf** out, uint32_t max);
    // Transmit up to 64 frames; returns how many the device took (their ownership passed to it).
    // Frames [returned, n) stay the caller's, untouched, to retry when the TX ring has room.
    uint32_t tx_burst(PktBuf** frames, uint32_t n);

    uint16_t id() const { return port_id_; }
    const MacAddr& mac() const { return mac_; }
    const std::string& name() const { return name_; }
    const PortCounters& counters() const { return ctr_; }
    // Whether the driver offers RX interrupts (rte_eth_dev_rx_intr_enable, probed at open): ""
    // when it does, else why not ("Operation not supported": DPDK 22.11's memif and af_packet).
    const std::string& rx_intr_missing() const { return rx_intr_missing_; }
    // A descriptor that poll() reports readable when a frame arrives (af_packet: its packet
    // socket, whose RX ring the kernel fills), or -1.
    int rx_wait_fd() const { return rx_wait_fd_; }

   private:
    uint16_t port_id_ = UINT16_MAX;
    bool keep_kernel_defrag_ = false;
    std::string name_;
    std::string memif_socket_;  // a memif port's socket path (wait_link), else empty
    MacAddr mac_{};
    rte_mempool* desc_pool_ = nullptr;
    RxMbufPool rx_owner_;
    PortCounters ctr_;
    std::string rx_intr_missing_;
    int rx_wait_fd_ = -1;
};

}  // namespace iccs
