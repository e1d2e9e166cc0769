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

// Close every packet socket of this process at once, each from its own thread; for a process
// about to _exit (a cluster's stop). A packet socket's close waits for an RCU grace period
// (synchronize_net in the kernel's packet_release), and the kernel closes a dying process's
// descriptors one after another: 10-40 ms each on a loaded host here, ~300 ms for 8 sockets with
// rings, against ~50 ms for the same 8 closed concurrently (they share grace periods). A PMD still
// reading a ring reads memory that stays mapped until the process is gone. Returns how many.
int af_packet_close_all_at_once();

}  // namespace iccs
