// af_packet.hpp: a fix-up for DPDK 22.11's net_af_packet (DESIGN.md §8 lists it).
//
// The PMD puts its packet socket in a PACKET_FANOUT group with PACKET_FANOUT_FLAG_DEFRAG,
// unconditionally: the kernel reassembles IP fragments before the PMD sees them, so the stack
// never receives a fragment, and every reassembled datagram longer than a ring frame arrives
// truncated (and is dropped as drop_ip_len). A fanout group cannot be left, so the socket is
// swapped for an identical one without fanout.
#pragma once

#include <string>

namespace iccs {

// Call after the port is started and before its first rx/tx burst. block_bytes, frame_bytes and
// frames are the ring geometry the PMD was given (blocksz, framesz, framecnt devargs). sock_fd:
// the PMD's socket descriptor (now the new socket): poll() on it wakes when a frame arrives.
bool af_packet_undo_kernel_defrag(const std::string& iface, unsigned block_bytes, unsigned frame_bytes,
                                  unsigned frames, int& sock_fd, std::string& err);

}  // namespace iccs
