// bench_raw.hpp: the raw-fabric baselines of `bench rtt` and `bench compare` (issue 21): the same
// two processes pinned to the same two cores (pinger / sender on core 0, echo / receiver on core 1)
// exchange frames of the size an iccs message of `size` bytes makes, over the same fabric, with no
// stack: no eth/ipv4/udp of ours, no slidwin, no convergence, no rings, no proxy.
//  - memif: each process its own EAL and one net_memif port configured as the cluster runs' links
//    (compute/cluster.cpp: role server/client over a socket file, bsize 2048); rte_eth_tx_burst /
//    rte_eth_rx_burst of frames of 14 + 20 + 8 + 32 + 40 + size bytes (the headers iccs puts in
//    front of a message), nothing parsed.
//  - udp: each process a UringUdpPort (proxy/uring_udp.hpp, the io_uring loop the proxies run:
//    rx_burst, flush) on 127.0.0.1 sending bare datagrams of 32 + 40 + size bytes.
// So ours / raw is what the stack and the proxy add on top of the fabric (overhead_ratio).
// A fabric these cannot run on (io_uring refused, memif socket directory not writable, EAL or
// memif device refused) is an error naming the reason; nothing is measured then.
#pragma once

#include <cstdint>
#include <string>

#include "bench_paths.hpp"

namespace iccs {

struct RawOptions {
    std::string sock_dir = "/tmp";  // memif: where the link's socket file goes
};

// The frame (memif) or datagram (udp) a message of size bytes travels in under iccs.
uint32_t raw_frame_bytes(const std::string& fabric, uint32_t size);
// Why the raw baseline cannot run over fabric here ("" = it can): checked before anything starts.
std::string raw_unavailable(const std::string& fabric, const RawOptions& o = {});
// One frame in flight, `samples` round trips timed (after samples/10 untimed).
RttStats raw_rtt(const std::string& fabric, uint32_t size, uint64_t samples, const RawOptions& o = {});
// `messages` frames one way as fast as the fabric takes them, first send to last arrival. memif
// loses nothing (a full ring makes the sender retry); udp may (the kernel drops when the socket
// buffer is full: `delivered` says how many came).
RateStats raw_stream(const std::string& fabric, uint32_t size, uint64_t messages, const RawOptions& o = {});

}  // namespace iccs
