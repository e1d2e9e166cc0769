// memif_guard.hpp: a memif peer's hang-up taken out of DPDK's hands (issue 34), so that a peer
// cluster that ends (killed, crashed, or at the normal end of a run) never crashes the survivor.
//
// What DPDK 22.11's net_memif does (drivers/net/memif, memif_socket.c): every link has a control
// socket, watched by the EAL's interrupt thread. When the peer's process ends the kernel closes
// its end; the interrupt thread wakes and memif_disconnect() clears the link's connected flag and
// then unmaps the link's shared regions (memif_free_regions) at once. Nothing waits for a thread
// already inside rte_eth_rx_burst/tx_burst on that port, which then reads or writes unmapped
// memory: SIGSEGV in librte_net_memif. The PMD's lock (cc_lock) is private to it.
//
// What the guard does: once every link of the process is up, the interrupt thread has nothing
// left to do (memif links are its only sources in a cluster process), so the guard takes it: an
// EAL alarm callback that does not return while the guard runs and polls the links' control
// sockets itself. The PMD's handler for them never runs again, so no link's memory is unmapped
// while the process lives (cluster processes _exit without DPDK teardown; a process that tears
// down stops the guard first, with its proxies already stopped). A control socket that becomes
// readable after the link is up means the peer is gone (its end closed, or its PMD sent a
// DISCONNECT): the guard calls that link's on_hangup, from the interrupt thread. The proxy reads
// what the peer left in the link, then leaves the port (Proxy::port_hung_up). A new connection
// on a listening socket is never accepted (a restarted peer cluster is not merged anyway).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace iccs {

// The control socket of the memif link on `path` in this process (a client's socket connected to
// it, or the server's socket accepted on it; not a listening one), or -1: no connection is made
// or being made on that link (Port::wait_link restarts only such a port).
int memif_control_socket(const std::string& path);

struct MemifGuardLink {
    std::string socket_path;          // the link's socket (devargs socket=, socket-abstract=no)
    std::function<void()> on_hangup;  // the peer is gone; runs on the interrupt thread: flags only
};

class MemifHangupGuard {
   public:
    MemifHangupGuard() = default;
    ~MemifHangupGuard() { stop(); }
    MemifHangupGuard(const MemifHangupGuard&) = delete;
    MemifHangupGuard& operator=(const MemifHangupGuard&) = delete;

    // Find each link's control socket (the process's connected unix socket on that path) and take
    // the interrupt thread. Call when every link is up and before any thread polls a port; once
    // per process. false with err (a socket not found, the alarm refused, the callback not run
    // within 2 s).
    bool start(std::vector<MemifGuardLink> links, std::string& err);
    // Give the interrupt thread back (before ports are closed or the EAL cleaned up). Idempotent.
    void stop();
    bool running() const;
    // Hang-ups seen so far.
    unsigned hangups() const;

    struct State;  // what the interrupt thread's callback holds (memif_guard.cpp)

   private:
    State* st_ = nullptr;  // lives until the process exits: the alarm callback holds it
};

}  // namespace iccs
