// fi_conformance_setup.cpp: the checks before messaging: fi_getinfo's capabilities and its node
// and service names, the AV's names (insertsvc, insertsym), an EQ's wait file descriptor, the
// agent's session.
#include <filesystem>
#include <set>
#include <thread>

#include "fi_conformance.hpp"

namespace fi_conformance {

// Capabilities as fi_getinfo(3) lays them out: a context's capabilities hold none of the domain's
// (FI_LOCAL_COMM, FI_REMOTE_COMM), and of the primary capabilities only those asked for.
void getinfo_caps() {
    const std::string name = "getinfo-caps";
    fi_info* i = nullptr;
    EXPECT_RC(name, getinfo(nullptr, nullptr, 0, [](fi_info*) {}, &i), 0);
    const uint64_t domain_caps = FI_LOCAL_COMM | FI_REMOTE_COMM;
    EXPECT(name, (i->tx_attr->caps & domain_caps) == 0 && (i->rx_attr->caps & domain_caps) == 0);
    EXPECT(name, (i->tx_attr->caps & ~i->caps) == 0 && (i->rx_attr->caps & ~i->caps) == 0);
    EXPECT(name, (i->domain_attr->caps & domain_caps) == domain_caps);
    EXPECT(name, (i->caps & (FI_TAGGED | FI_MSG)) == (FI_TAGGED | FI_MSG));
    fi_freeinfo(i);
    EXPECT_RC(name, getinfo(nullptr, nullptr, 0, [](fi_info* h) { h->caps = FI_TAGGED; }, &i), 0);
    EXPECT(name, (i->caps & (FI_TAGGED | FI_MSG)) == FI_TAGGED);
    EXPECT(name, i->tx_attr->caps == (FI_TAGGED | FI_SEND) && i->rx_attr->caps == (FI_TAGGED | FI_RECV));
    fi_freeinfo(i);
    // A context's capabilities in the hints are the context's; beyond the provider's: none.
    EXPECT_RC(name, getinfo(nullptr, nullptr, 0, [](fi_info* h) {
        h->caps = FI_TAGGED | FI_MSG;
        h->tx_attr->caps = FI_MSG | FI_SEND;
    }, &i), 0);
    EXPECT(name, i->tx_attr->caps == (FI_MSG | FI_SEND) && (i->rx_attr->caps & FI_TAGGED));
    fi_freeinfo(i);
    EXPECT_RC(name, getinfo(nullptr, nullptr, 0, [](fi_info* h) { h->tx_attr->caps = FI_MSG | FI_WRITE; }, &i), -FI_ENODATA);
    EXPECT_RC(name, getinfo(nullptr, nullptr, 0, [](fi_info* h) { h->rx_attr->caps = FI_MULTI_RECV; }, &i), -FI_ENODATA);
    EXPECT_RC(name, getinfo(nullptr, nullptr, 0, [](fi_info* h) { h->ep_attr->protocol = FI_PROTO_RXM; }, &i), -FI_ENODATA);
    ok(name);
}

// Node and service resolved to addresses (fi_getinfo(3)): the service is a rank, the node this
// host or "iccs://rank/N"; FI_SOURCE names this process's own address; anything else -FI_ENODATA.
void getinfo_names(const std::string& dir) {
    const std::string name = "getinfo-names";
    const std::string mine = read_name(dir, g_rank), peer = read_name(dir, 1 - g_rank);
    const std::string me_s = std::to_string(g_rank), peer_s = std::to_string(1 - g_rank);
    const std::string peer_uri = "iccs://rank/" + peer_s;
    auto none = [](fi_info*) {};
    fi_info* i = nullptr;
    // The destination from node and service, this process's address as the source.
    for (const char* node : {"localhost", "127.0.0.1", static_cast<const char*>(nullptr)}) {
        EXPECT_RC(name, getinfo(node, peer_s.c_str(), 0, none, &i), 0);
        EXPECT(name, same_addr(i->dest_addr, i->dest_addrlen, peer) && same_addr(i->src_addr, i->src_addrlen, mine));
        fi_freeinfo(i);
    }
    EXPECT_RC(name, getinfo("127.0.0.1", peer_s.c_str(), FI_NUMERICHOST, none, &i), 0);
    EXPECT(name, same_addr(i->dest_addr, i->dest_addrlen, peer));
    fi_freeinfo(i);
    EXPECT_RC(name, getinfo(peer_uri.c_str(), nullptr, 0, none, &i), 0);
    EXPECT(name, same_addr(i->dest_addr, i->dest_addrlen, peer));
    fi_freeinfo(i);
    // FI_SOURCE: the names are the source, and only this process's own address can be it.
    EXPECT_RC(name, getinfo(nullptr, me_s.c_str(), FI_SOURCE, none, &i), 0);
    EXPECT(name, same_addr(i->src_addr, i->src_addrlen, mine) && i->dest_addr == nullptr && i->dest_addrlen == 0);
    fi_freeinfo(i);
    EXPECT_RC(name, getinfo("localhost", nullptr, FI_SOURCE, none, &i), 0);
    EXPECT(name, same_addr(i->src_addr, i->src_addrlen, mine) && i->dest_addr == nullptr);
    fi_freeinfo(i);
    EXPECT_RC(name, getinfo(nullptr, peer_s.c_str(), FI_SOURCE, none, &i), -FI_ENODATA);
    // A destination in the hints is used when no names are given, and checked.
    EXPECT_RC(name, getinfo(nullptr, nullptr, 0, [&](fi_info* h) {
        h->dest_addr = malloc(peer.size());
        std::memcpy(h->dest_addr, peer.data(), peer.size());
        h->dest_addrlen = peer.size();
    }, &i), 0);
    EXPECT(name, same_addr(i->dest_addr, i->dest_addrlen, peer));
    fi_freeinfo(i);
    EXPECT_RC(name, getinfo(nullptr, nullptr, 0, [&](fi_info* h) {
        h->dest_addr = calloc(1, 8);
        h->dest_addrlen = 8;
    }, &i), -FI_ENODATA);
    // Names that name no rank of this run.
    EXPECT_RC(name, getinfo("localhost", "2", 0, none, &i), -FI_ENODATA);  // 2 ranks: 0 and 1
    EXPECT_RC(name, getinfo("localhost", "1x", 0, none, &i), -FI_ENODATA);
    EXPECT_RC(name, getinfo("localhost", "9228", 0, none, &i), -FI_ENODATA);
    EXPECT_RC(name, getinfo("localhost", nullptr, 0, none, &i), -FI_ENODATA);  // a host is no destination
    EXPECT_RC(name, getinfo("192.0.2.1", peer_s.c_str(), FI_NUMERICHOST, none, &i), -FI_ENODATA);  // not here
    EXPECT_RC(name, getinfo("localhost", peer_s.c_str(), FI_NUMERICHOST, none, &i), -FI_ENODATA);  // not numeric
    EXPECT_RC(name, getinfo(peer_uri.c_str(), "0", 0, none, &i), -FI_ENODATA);  // a whole address and a service
    EXPECT_RC(name, getinfo("iccs://rank/7", nullptr, 0, none, &i), -FI_ENODATA);
    EXPECT(name, i == nullptr);
    ok(name);
}

// fi_av_insertsvc and fi_av_insertsym take the same names as fi_getinfo.
void av_names(Fab& f, const std::string& dir, bool table) {
    const std::string name = "av-insertsvc-insertsym";
    const std::string peer = read_name(dir, 1 - g_rank);
    fid_av* av = nullptr;
    fi_av_attr aa{};
    aa.type = table ? FI_AV_TABLE : FI_AV_MAP;
    EXPECT_RC(name, fi_av_open(f.domain, &aa, &av, nullptr), 0);
    fi_addr_t a[4] = {0, 0, 0, 0};
    char back[16];
    size_t blen = sizeof back;
    EXPECT_RC(name, fi_av_insertsvc(av, "localhost", std::to_string(1 - g_rank).c_str(), &a[0], 0, nullptr), 1);
    EXPECT_RC(name, fi_av_lookup(av, a[0], back, &blen), 0);
    EXPECT(name, same_addr(back, blen, peer));
    // FI_MORE is a hint (more inserts follow), taken by every insert call.
    EXPECT_RC(name, fi_av_insert(av, peer.data(), 1, &a[1], FI_MORE, nullptr), 1);
    EXPECT_RC(name, fi_av_insertsvc(av, nullptr, std::to_string(g_rank).c_str(), &a[2], FI_MORE, nullptr), 1);
    EXPECT_RC(name, fi_av_insertsym(av, "localhost", 1, "0", 1, &a[3], FI_MORE, nullptr), 1);
    EXPECT(name, a[1] != FI_ADDR_NOTAVAIL && a[2] != FI_ADDR_NOTAVAIL && a[3] != FI_ADDR_NOTAVAIL);
    EXPECT_RC(name, fi_av_insertsvc(av, nullptr, "7", &a[0], 0, nullptr), 0);
    EXPECT(name, a[0] == FI_ADDR_NOTAVAIL);
    EXPECT_RC(name, fi_av_insertsvc(av, "192.0.2.1", "0", &a[0], 0, nullptr), 0);
    EXPECT(name, a[0] == FI_ADDR_NOTAVAIL);
    // Ranks 0 and 1 of 127.0.0.1, then 127.0.0.2 (loopback, this host too): 0 and 1 again.
    EXPECT_RC(name, fi_av_insertsym(av, "127.0.0.1", 2, "0", 2, a, 0, nullptr), 4);
    for (int k = 0; k < 4; ++k) {
        IccsLikeAddr got{};
        blen = sizeof got;
        EXPECT_RC(name, fi_av_lookup(av, a[k], &got, &blen), 0);
        EXPECT(name, blen == 16 && got.rank == static_cast<uint32_t>(k % 2));
    }
    // "localhost" ends with no number to count on: its second node names nothing.
    EXPECT_RC(name, fi_av_insertsym(av, "localhost", 2, "1", 1, a, 0, nullptr), 1);
    EXPECT(name, a[0] != FI_ADDR_NOTAVAIL && a[1] == FI_ADDR_NOTAVAIL);
    EXPECT_RC(name, fi_close(&av->fid), 0);
    ok(name);
}

// An EQ whose wait object is a file descriptor (fi_eq(3), fi_poll(3)): readable while it holds an
// event, fi_trywait says whether blocking on it is safe, sread waits for an event or its time-out.
void eq_wait_fd(Fab& f) {
    const std::string name = "eq-wait-fd";
    fid_eq* eq = nullptr;
    fi_eq_attr ea{};
    ea.wait_obj = FI_WAIT_MUTEX_COND;
    EXPECT_RC(name, fi_eq_open(f.fabric, &ea, &eq, nullptr), -FI_ENOSYS);  // not offered
    ea.wait_obj = FI_WAIT_UNSPEC;
    EXPECT_RC(name, fi_eq_open(f.fabric, &ea, &eq, nullptr), 0);
    int fd = -1;
    EXPECT_RC(name, fi_control(&eq->fid, FI_GETWAIT, &fd), -FI_ENODATA);  // no fd to hand out
    EXPECT_RC(name, fi_close(&eq->fid), 0);
    ea.wait_obj = FI_WAIT_FD;
    ea.flags = FI_WRITE;
    EXPECT_RC(name, fi_eq_open(f.fabric, &ea, &eq, nullptr), 0);
    EXPECT_RC(name, fi_control(&eq->fid, FI_GETWAIT, &fd), 0);
    auto readable = [&] {
        pollfd p{fd, POLLIN, 0};
        return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
    };
    fid* fids[1] = {&eq->fid};
    EXPECT_RC(name, fi_trywait(f.fabric, fids, 1), FI_SUCCESS);
    EXPECT(name, !readable());
    fid* cq_fid[1] = {&f.cq->fid};
    EXPECT_RC(name, fi_trywait(f.fabric, cq_fid, 1), -FI_EINVAL);  // a CQ has no wait fd here
    fi_eq_entry in{}, out{};
    uint32_t event = 0;
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_RC(name, fi_eq_sread(eq, &event, &out, sizeof out, 50, 0), -FI_EAGAIN);
    EXPECT(name, std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(50));
    for (int k = 1; k <= 2; ++k) {
        in.fid = &eq->fid;
        in.context = reinterpret_cast<void*>(static_cast<uintptr_t>(k));
        in.data = 40u + static_cast<uint64_t>(k);
        EXPECT_RC(name, fi_eq_write(eq, FI_NOTIFY, &in, sizeof in, 0), static_cast<long>(sizeof in));
    }
    EXPECT(name, readable());
    EXPECT_RC(name, fi_trywait(f.fabric, fids, 1), -FI_EAGAIN);
    EXPECT_RC(name, fi_eq_read(eq, &event, &out, sizeof out, FI_PEEK), static_cast<long>(sizeof out));
    EXPECT(name, readable() && out.data == 41);
    EXPECT_RC(name, fi_eq_sread(eq, &event, &out, sizeof out, -1, 0), static_cast<long>(sizeof out));
    EXPECT(name, event == FI_NOTIFY && out.data == 41 && out.fid == &eq->fid && readable());
    EXPECT_RC(name, fi_eq_sread(eq, &event, &out, sizeof out, 1000, 0), static_cast<long>(sizeof out));
    EXPECT(name, out.data == 42 && !readable());
    EXPECT_RC(name, fi_trywait(f.fabric, fids, 1), FI_SUCCESS);
    // A writer from another thread wakes a reader blocked without a time-out.
    std::thread writer([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        in.data = 43;
        (void)fi_eq_write(eq, FI_NOTIFY, &in, sizeof in, 0);
    });
    EXPECT_RC(name, fi_eq_sread(eq, &event, &out, sizeof out, -1, 0), static_cast<long>(sizeof out));
    writer.join();
    EXPECT(name, out.data == 43 && !readable());
    EXPECT_RC(name, fi_close(&eq->fid), 0);
    ok(name);
}

// The agent's threads must be in the ranks' scheduling group: under the kernel's autogroups (on by
// default) a session is one, and a bridge's sched_yield after waking its rank gave an agent of its
// own session's group nothing to the rank (mpi/provider/README.md, "Waiting"). A signal to the
// rank's process group is still not the agent's.
void agent_session() {
    const std::string name = "agent-session";
    const char* run = std::getenv("ICCS_RUN_ID");
    EXPECT(name, run != nullptr);
    const std::string want = std::string("ICCS_RUN_ID=") + run;
    int agents = 0;
    std::set<std::string> proxy_cpus;  // the agents' first proxy threads' Cpus_allowed_list lines
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
        const pid_t pid = static_cast<pid_t>(std::atoi(e.path().filename().c_str()));
        if (pid <= 0) continue;
        std::ifstream comm(e.path() / "comm");
        std::string c;
        if (!std::getline(comm, c) || c != "iccs-mpi-agent") continue;
        std::ifstream env(e.path() / "environ", std::ios::binary);
        std::string var;
        bool ours = false;
        while (!ours && std::getline(env, var, '\0')) ours = var == want;
        if (!ours) continue;
        ++agents;
        EXPECT(name, getsid(pid) == getsid(0));
        EXPECT(name, getpgid(pid) != getpgrp());
        // Its first proxy thread's cores (DPDK names it rte-worker-1; direct has none).
        for (const auto& t : std::filesystem::directory_iterator(e.path() / "task", ec)) {
            std::ifstream tcomm(t.path() / "comm");
            std::string tc;
            if (!std::getline(tcomm, tc) || tc != "rte-worker-1") continue;
            std::ifstream st(t.path() / "status");
            for (std::string line; std::getline(st, line);)
                if (line.rfind("Cpus_allowed_list:", 0) == 0) proxy_cpus.insert(line);
        }
    }
    // A cluster of one rank under inline polling runs in its rank's process: no agent process at
    // all (fi_conformance.py --polling inline sets ICCS_CONFORMANCE_IN_RANK).
    if (std::getenv("ICCS_CONFORMANCE_IN_RANK") != nullptr)
        EXPECT(name, agents == 0);
    else
        EXPECT(name, agents >= 1);
    ok(name);
    // The clusters' first proxies are not all on one core when the host has two or more: one
    // core for every cluster's proxy woke a cluster's proxy where the other's bridge ran (agent.cpp).
    const std::string spread = "agent-proxies-spread";
    if (agents >= 2 && proxy_cpus.size() >= 1 && std::thread::hardware_concurrency() >= 2)
        EXPECT(spread, proxy_cpus.size() >= 2);
    ok(spread);
}

}  // namespace fi_conformance
