// prov_names.cpp: node and service names (fi_getinfo(3), fi_av_insertsvc / insertsym in fi_av(3))
// resolved to the provider's addresses. An address is a rank of the run, so a name is:
//   service  the rank, in decimal (0 .. ranks-1), on
//   node     a name or address of this host (every rank of a run meets its agent through this
//            host's run directory and shared memory), or NULL;
//   or node alone in the provider's string form "iccs://rank/N" (what fi_av_straddr prints),
//   with service NULL, as fi_getinfo(3) allows for FI_ADDR_STR-like names.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "prov.hpp"

namespace iccs::mpi {

namespace {

constexpr const char* kRankUri = "iccs://rank/";

// A rank number: decimal digits only, below `world`.
bool parse_rank(const char* s, uint32_t world, uint32_t& rank) {
    if (s == nullptr || *s == '\0') return false;
    uint64_t v = 0;
    for (const char* p = s; *p != '\0'; ++p) {
        if (*p < '0' || *p > '9') return false;
        v = v * 10 + static_cast<uint64_t>(*p - '0');
        if (v >= world) return false;
    }
    rank = static_cast<uint32_t>(v);
    return true;
}

bool same_ip(const sockaddr* a, const sockaddr* b) {
    if (a == nullptr || b == nullptr || a->sa_family != b->sa_family) return false;
    if (a->sa_family == AF_INET)
        return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
               reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
    if (a->sa_family == AF_INET6)
        return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                           &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
    return false;
}

bool is_loopback(const sockaddr* a) {
    if (a->sa_family == AF_INET)
        return (ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr) >> 24) == 127;
    if (a->sa_family == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
    return false;
}

// "" when `node` names this host: its host name, or an address that is loopback or one of its
// interfaces' (FI_NUMERICHOST: numeric addresses only, no lookup). Else why not.
std::string check_this_host(const char* node, bool numeric) {
    char host[256] = {};
    if (!numeric && gethostname(host, sizeof host - 1) == 0 && std::strcmp(host, node) == 0) return "";
    addrinfo want{};
    want.ai_family = AF_UNSPEC;
    want.ai_flags = numeric ? AI_NUMERICHOST : 0;
    addrinfo* found = nullptr;
    if (const int rc = getaddrinfo(node, nullptr, &want, &found); rc != 0)
        return std::string("node '") + node + "' does not resolve (" + gai_strerror(rc) + ")";
    ifaddrs* ifs = nullptr;
    if (getifaddrs(&ifs) != 0) ifs = nullptr;
    bool here = false;
    for (const addrinfo* a = found; a != nullptr && !here; a = a->ai_next) {
        here = is_loopback(a->ai_addr);
        for (const ifaddrs* i = ifs; i != nullptr && !here; i = i->ifa_next) here = same_ip(a->ai_addr, i->ifa_addr);
    }
    if (ifs != nullptr) freeifaddrs(ifs);
    freeaddrinfo(found);
    if (!here) return std::string("node '") + node + "' is not this host (the ranks of a run live on its host)";
    return "";
}

}  // namespace

std::string resolve_rank_name(const MpiMachine& m, const char* node, const char* service, uint64_t flags,
                              NamedRank& out) {
    out = NamedRank{};
    const std::string range = " (this run has ranks 0.." + std::to_string(m.world - 1) + ")";
    if (node != nullptr && std::strncmp(node, kRankUri, std::strlen(kRankUri)) == 0) {
        if (service != nullptr) return std::string("node '") + node + "' is a whole address: service must be NULL";
        if (!parse_rank(node + std::strlen(kRankUri), m.world, out.rank))
            return std::string("node '") + node + "' names no rank" + range;
        out.named = true;
        return "";
    }
    if (node != nullptr) {
        if (std::string why = check_this_host(node, (flags & FI_NUMERICHOST) != 0); !why.empty()) return why;
    }
    if (service != nullptr) {
        if (!parse_rank(service, m.world, out.rank))
            return std::string("service '") + service + "' is no rank number" + range;
        out.named = true;
    }
    return "";
}

// The next name of a symmetric insert (fi_av(3) fi_av_insertsym): the number the name ends with,
// plus one ("10.1.1.1" -> "10.1.1.2", "host10" -> "host11"); "" when it ends with no digit.
std::string next_symmetric_name(const std::string& name) {
    size_t first = name.size();
    while (first > 0 && name[first - 1] >= '0' && name[first - 1] <= '9') --first;
    if (first == name.size()) return "";
    std::string digits = name.substr(first);
    for (size_t i = digits.size(); i-- > 0;) {
        if (digits[i] != '9') {
            ++digits[i];
            return name.substr(0, first) + digits;
        }
        digits[i] = '0';
    }
    return name.substr(0, first) + "1" + digits;
}

}  // namespace iccs::mpi
