// agent_link.hpp: how a rank reaches its domain's agent, and the little protocol on that socket
// (mpi/provider/README.md, "The agent and its bridges" and "Failures").
//
// The agent of domain d listens on a Unix socket in the run directory (MpiMachine::agent_socket).
// A rank connects, says hello (its rank, the run and the machine it computed), and gets back the
// region's file descriptor (SCM_RIGHTS) or one line saying why not. The connection then stays
// open for the rank's life: it says goodbye when its domain is closed, and when its process ends
// without that (a crash, a kill) the agent sees the hang-up and marks the rank dead. The other
// way round a rank that finds the socket hung up knows its agent is gone.
//
// Nobody started the agent (plain mpirun): the first rank of the domain to take the run
// directory's lock file starts it (posix_spawn of iccs-mpi-agent, which detaches into its own
// session), waits for its socket, and lets go of the lock; the others find the socket.
#pragma once

#include <cstdint>
#include <string>

#include "mpi_machine.hpp"
#include "shm_region.hpp"

namespace iccs::mpi {

inline constexpr uint32_t kLinkMagic = 0x49434d48;  // "ICMH"
inline constexpr uint32_t kLinkVersion = 1;

enum class LinkMsg : uint32_t { kHello = 1, kWelcome = 2, kRefused = 3, kBye = 4 };

struct LinkHello {
    uint32_t magic = kLinkMagic, version = kLinkVersion;
    LinkMsg kind = LinkMsg::kHello;
    uint32_t rank = 0, world = 0, clusters = 0, cluster_size = 0, transport = 0, pid = 0;
    uint64_t run_hash = 0, delay_ns = 0;
};
struct LinkReply {
    uint32_t magic = kLinkMagic, version = kLinkVersion;
    LinkMsg kind = LinkMsg::kWelcome;  // kWelcome (the region's fd rides along) or kRefused
    char why[480] = {};                // kRefused: one line
};
struct LinkBye {
    uint32_t magic = kLinkMagic, version = kLinkVersion;
    LinkMsg kind = LinkMsg::kBye;
};

// A rank's connection to its agent.
struct AgentLink {
    int sock = -1;
    Region region;
    ~AgentLink();
    // The agent's socket hung up (the agent is gone). A poll() with no wait.
    bool agent_gone() const;
    // Leaving normally: goodbye, then close the socket (the region stays mapped until unmap).
    void bye();
};

// Connect rank m.rank to its domain's agent, starting the agent (agent_exe) when nobody did;
// maps the region. timeout_ms bounds the whole start-up. False with err (the agent's own error
// line when it failed to start).
bool agent_connect(const MpiMachine& m, const std::string& agent_exe, uint32_t timeout_ms, AgentLink& out,
                   std::string& err);

// The agent's side: send the reply to a hello (with the region's fd when welcome).
bool link_send_reply(int sock, const LinkReply& r, int region_fd);
// Receive one message of at most cap bytes; its size, 0 on hang-up, -1 on error.
long link_recv(int sock, void* buf, size_t cap);

}  // namespace iccs::mpi
