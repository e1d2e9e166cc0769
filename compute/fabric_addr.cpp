// fabric_addr.cpp: the address plan every cluster agrees on (cluster.hpp): IPv4 and MAC of a
// proxy, its NIC port, its UDP socket, its veth, its memif sockets, its EAL prefix and capture file.
#include "cluster.hpp"

#include <string>
#include <utility>

namespace iccs {

Ipv4Addr proxy_ip(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy) {
    return Ipv4Addr{plan.base_ip + uint32_t{cluster} * 256 + proxy + 1};
}

MacAddr proxy_mac(uint16_t cluster, uint16_t proxy) {
    return MacAddr{{0x02, 0x00, 0x0a, 0x00, static_cast<uint8_t>(cluster), static_cast<uint8_t>(proxy)}};
}

std::string pci_address(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy) {
    // One entry per proxy of every cluster (all clusters on this host), or per proxy of one
    // cluster (one cluster per host): the configuration checks the count.
    const size_t all = size_t{plan.clusters} * plan.proxies_per_cluster[cluster];
    const size_t i = plan.pci_addresses.size() >= all ? size_t{cluster} * plan.proxies_per_cluster[cluster] + proxy : proxy;
    return i < plan.pci_addresses.size() ? plan.pci_addresses[i] : std::string();
}

Ipv4Addr udp_ip(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy) {
    return udp_socket_ip(plan.udp_addresses, plan.clusters, plan.proxies_per_cluster[cluster], cluster, proxy);
}

std::string unauthenticated_fabric_warning(const ClusterPlan& plan) {
    if (plan.auth || plan.no_fabric || plan.fabric == "memif") return "";
    if (plan.fabric == "udp") {
        bool loopback = true;
        for (uint16_t c = 0; c < plan.clusters; ++c)
            for (uint16_t p = 0; p < plan.proxies_per_cluster[c]; ++p) loopback &= (udp_ip(plan, c, p).v >> 24) == 127;
        if (loopback) return "";
    }
    return "iccs: warning: fabric " + plan.fabric +
           " without a key: a host on the path can read every message, and with a token it saw inject or replay "
           "frames and stop the run; set [security] key_file (head -c 32 /dev/urandom > FILE; chmod 600 FILE)";
}

uint16_t udp_port(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy) {
    return udp_socket_port(plan.udp_port, cluster, proxy);
}

std::string afp_ifname(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy) {
    // IFNAMSIZ is 16: "ic" + run + "c" + cluster + "p" + proxy stays within it for pids < 10^7
    return "ic" + plan.run_id + "c" + std::to_string(cluster) + "p" + std::to_string(proxy);
}

std::string eal_prefix(const ClusterPlan& plan, uint16_t cluster) {
    return "iccs-" + plan.run_id + "-c" + std::to_string(cluster);
}


std::string link_socket(const ClusterPlan& plan, uint16_t c1, uint16_t p1, uint16_t c2, uint16_t p2) {
    if (c2 < c1 || (c2 == c1 && p2 < p1)) {
        std::swap(c1, c2);
        std::swap(p1, p2);
    }
    return plan.sock_dir + "/memif-" + std::to_string(c1) + "." + std::to_string(p1) + "-" + std::to_string(c2) +
           "." + std::to_string(p2) + ".sock";
}

std::string pcap_path(const ClusterPlan& plan, uint16_t cluster, uint16_t proxy) {
    return plan.pcap_dir + "/cluster" + std::to_string(cluster) + "-proxy" + std::to_string(proxy) + ".pcapng";
}

}  // namespace iccs
