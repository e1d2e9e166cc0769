// af_packet.cpp: see af_packet.hpp.
#include "af_packet.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace iccs {

// DPDK 22.11's net_af_packet puts its socket in a PACKET_FANOUT group with
// PACKET_FANOUT_FLAG_DEFRAG, unconditionally: the kernel reassembles IP fragments before the
// PMD sees them, so the stack never receives a fragment, and every reassembled datagram longer
// than a ring frame (2048 - 66 bytes of packet) arrives truncated (tp_snaplen < tp_len), which
// the stack drops as drop_ip_len. A fanout group cannot be left, so swap the socket: a new
// packet socket with the same rings (mapped over the PMD's mapping, MAP_FIXED) and the same
// options but no fanout, dup2()ed onto the PMD's descriptor. Must run after Port::open and
// before the first rx_burst/tx_burst (the PMD's ring indices are still 0).
bool af_packet_undo_kernel_defrag(const std::string& iface, unsigned block_bytes, unsigned frame_bytes,
                                  unsigned frames, int& sock_fd, std::string& err) {
    const unsigned kAfpBlock = block_bytes, kAfpFrame = frame_bytes, kAfpFrames = frames;
    const unsigned ifindex = if_nametoindex(iface.c_str());
    if (ifindex == 0) {
        err = "no interface " + iface;
        return false;
    }
    int old_fd = -1;
    if (DIR* d = opendir("/proc/self/fd")) {
        while (dirent* e = readdir(d)) {
            const int fd = std::atoi(e->d_name);
            if (e->d_name[0] == '.' || fd == dirfd(d)) continue;
            int dom = 0, fan = 0;
            socklen_t l = sizeof dom;
            if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) != 0 || dom != AF_PACKET) continue;
            l = sizeof fan;
            if (getsockopt(fd, SOL_PACKET, PACKET_FANOUT, &fan, &l) != 0 || fan == 0) continue;
            sockaddr_ll sll{};
            l = sizeof sll;
            if (getsockname(fd, reinterpret_cast<sockaddr*>(&sll), &l) != 0 || unsigned(sll.sll_ifindex) != ifindex)
                continue;
            old_fd = fd;
        }
        closedir(d);
    }
    if (old_fd < 0) {
        err = "the af_packet PMD's socket (in a fanout group, bound to " + iface + ") was not found";
        return false;
    }
    char link[64] = {};
    if (readlink(("/proc/self/fd/" + std::to_string(old_fd)).c_str(), link, sizeof link - 1) <= 0) {
        err = "readlink of the PMD's socket failed";
        return false;
    }
    const size_t ring_bytes = size_t{2} * kAfpBlock * (kAfpFrames / (kAfpBlock / kAfpFrame));
    void* addr = nullptr;
    {
        std::ifstream maps("/proc/self/maps");
        std::string line;
        while (std::getline(maps, line)) {
            if (line.size() < std::strlen(link) || line.compare(line.size() - std::strlen(link), std::string::npos, link) != 0)
                continue;
            unsigned long lo = 0, hi = 0;
            if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2 && hi - lo == ring_bytes)
                addr = reinterpret_cast<void*>(lo);
        }
    }
    if (addr == nullptr) {
        err = std::string("the PMD's ring mapping (") + link + ", " + std::to_string(ring_bytes) + " bytes) was not found";
        return false;
    }
    // Protocol 0: the socket takes no frame until bind() names the protocol and the interface
    // (packet(7)). Created with ETH_P_ALL it would take every interface's frames into its ring until
    // then: loopback datagrams of other programs reached the proxy (and its --pcap capture).
    const int fd = socket(AF_PACKET, SOCK_RAW, 0);
    if (fd < 0) {
        err = std::string("socket(AF_PACKET): ") + std::strerror(errno);
        return false;
    }
    tpacket_req req{kAfpBlock, kAfpFrames / (kAfpBlock / kAfpFrame), kAfpFrame, kAfpFrames};
    int v2 = TPACKET_V2, one = 1;
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = static_cast<int>(ifindex);
    const char* step = nullptr;
    if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &v2, sizeof v2) != 0) step = "PACKET_VERSION";
    else if (setsockopt(fd, SOL_PACKET, PACKET_LOSS, &one, sizeof one) != 0) step = "PACKET_LOSS";
    else if (setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one) != 0) step = "PACKET_QDISC_BYPASS";
    else if (setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req) != 0) step = "PACKET_RX_RING";
    else if (setsockopt(fd, SOL_PACKET, PACKET_TX_RING, &req, sizeof req) != 0) step = "PACKET_TX_RING";
    else if (mmap(addr, ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_LOCKED | MAP_FIXED, fd, 0) != addr)
        step = "mmap";
    else if (bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0) step = "bind";
    else if (dup2(fd, old_fd) != old_fd) step = "dup2";
    if (step != nullptr) {
        err = std::string("replacing the af_packet socket: ") + step + ": " + std::strerror(errno);
        close(fd);
        return false;
    }
    close(fd);
    sock_fd = old_fd;
    return true;
}

int af_packet_close_all_at_once() {
    std::vector<int> fds;
    if (DIR* d = opendir("/proc/self/fd")) {
        while (dirent* e = readdir(d)) {
            char* end = nullptr;
            const long fd = std::strtol(e->d_name, &end, 10);
            if (end == e->d_name || *end != '\0' || fd == dirfd(d)) continue;
            int domain = 0;
            socklen_t len = sizeof domain;
            if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_PACKET)
                fds.push_back(static_cast<int>(fd));
        }
        closedir(d);
    }
    std::vector<std::thread> closers;
    for (int fd : fds) closers.emplace_back([fd] { ::close(fd); });
    for (auto& t : closers) t.join();
    return static_cast<int>(fds.size());
}

}  // namespace iccs
