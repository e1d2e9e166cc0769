// prov_info.cpp: the provider's entry point (fi_prov_ini) and fi_getinfo: what the provider
// offers, stated truthfully, against the application's hints.
#include <dlfcn.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

#include "clock.hpp"
#include "prov.hpp"
#include "runtime_launch.hpp"

namespace iccs::mpi {

namespace {

int iccs_getinfo(uint32_t version, const char* node, const char* service, uint64_t flags, const fi_info* hints,
                 fi_info** info);
void iccs_cleanup() {}

bool names_iccs(const char* v) { return v != nullptr && std::strstr(v, "iccs") != nullptr; }

// The user asked for this provider by name (so a failure deserves a line on standard error).
bool asked_for_iccs(const fi_info* hints) {
    if (hints != nullptr && hints->fabric_attr != nullptr && names_iccs(hints->fabric_attr->prov_name)) return true;
    return names_iccs(std::getenv("FI_PROVIDER")) || names_iccs(std::getenv("OMPI_MCA_mtl_ofi_provider_include")) ||
           names_iccs(std::getenv("OMPI_MCA_opal_common_ofi_provider_include"));
}

// One process of the run speaks for all (one line per run, not one per rank): the first to bind
// the run's name in the abstract socket namespace, which it holds until it exits (nothing to
// remove). Not rank 0: the launcher may kill it before it gets here when a faster rank failed.
// A rank that finds the name taken tells the speaker so (one datagram), and the speaker, once it
// has spoken, waits (at most 2 s) until every rank of the run has checked: a rank checking after
// the speaker exited would find the name free and say it all again.
int g_claim = -2;

sockaddr_un run_claim_name(socklen_t& len) {
    const std::string name = "iccs-mpi-said-" + std::to_string(getuid()) + "-" +
                             iccs::launcher_run_id([](const char* n) -> const char* { return std::getenv(n); });
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    const size_t n = std::min(name.size(), sizeof a.sun_path - 2);
    std::memcpy(a.sun_path + 1, name.data(), n);
    len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
    return a;
}

bool speaks_for_the_run() {
    if (g_claim == -2) {
        g_claim = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        socklen_t len = 0;
        const sockaddr_un a = run_claim_name(len);
        if (g_claim >= 0 && bind(g_claim, reinterpret_cast<const sockaddr*>(&a), len) != 0) {
            const char checked = 1;
            (void)sendto(g_claim, &checked, 1, MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&a), len);
            close(g_claim);
            g_claim = -1;
        }
    }
    return g_claim >= 0;
}

void wait_until_every_rank_checked() {
    const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
    const long ranks = size != nullptr ? std::strtol(size, nullptr, 10) : 1;
    const uint64_t deadline = now_ns() + 2'000'000'000ull;
    for (long heard = 1; heard < ranks && g_claim >= 0;) {
        const uint64_t now = now_ns();
        if (now >= deadline) return;
        pollfd p{g_claim, POLLIN, 0};
        if (poll(&p, 1, static_cast<int>((deadline - now) / 1'000'000) + 1) <= 0) return;
        char checked = 0;
        if (recv(g_claim, &checked, 1, MSG_DONTWAIT) == 1) ++heard;
    }
}

std::atomic<bool> g_hints_asked{false};

constexpr uint64_t kTxCaps = FI_TAGGED | FI_MSG | FI_SEND;
constexpr uint64_t kRxCaps = FI_TAGGED | FI_MSG | FI_RECV | FI_DIRECTED_RECV | FI_SOURCE;

// Why hints ask for something this provider does not do ("" when they do not).
std::string unmet(uint32_t version, const fi_info* h) {
    (void)version;
    if (h == nullptr) return "";
    if (h->ep_attr && h->ep_attr->type != FI_EP_UNSPEC && h->ep_attr->type != FI_EP_RDM)
        return "endpoint type " + std::to_string(h->ep_attr->type) + " (only FI_EP_RDM)";
    if (h->caps & ~(kPrimaryCaps | kSecondaryCaps)) return "capabilities beyond tagged and untagged messages";
    if (h->addr_format != FI_FORMAT_UNSPEC) return "an address format other than the provider's own";
    if (h->fabric_attr && h->fabric_attr->name && std::strcmp(h->fabric_attr->name, kFabricName) != 0)
        return std::string("fabric ") + h->fabric_attr->name;
    if (const fi_domain_attr* d = h->domain_attr) {
        if (d->name && std::strcmp(d->name, kDomainName) != 0) return std::string("domain ") + d->name;
        if (d->control_progress == FI_PROGRESS_AUTO || d->data_progress == FI_PROGRESS_AUTO)
            return "automatic progress (progress is manual: CQ reads drive it)";
        if (d->cq_data_size > 8) return "remote CQ data of more than 8 bytes";
        if (d->caps & ~(FI_LOCAL_COMM | FI_REMOTE_COMM)) return "domain capabilities";
    }
    if (const fi_ep_attr* e = h->ep_attr) {
        if (e->max_msg_size > (1ull << 30)) return "messages longer than 1 GiB";
        if (e->protocol != FI_PROTO_UNSPEC) return "wire protocol " + std::to_string(e->protocol) + " (the provider's own only)";
        if (e->tx_ctx_cnt > 1 || e->rx_ctx_cnt > 1) return "more than one transmit or receive context";
    }
    if (const fi_tx_attr* t = h->tx_attr) {
        if (t->caps & ~kTxCaps) return "transmit capabilities beyond tagged and untagged sends";
        if (t->msg_order & ~uint64_t(FI_ORDER_SAS)) return "message orders beyond FI_ORDER_SAS";
        if (t->comp_order & ~uint64_t(FI_ORDER_NONE)) return "ordered completions";
        if (t->op_flags & ~kTxOpFlags) return "transmit flags beyond FI_COMPLETION, FI_INJECT_COMPLETE, FI_TRANSMIT_COMPLETE";
        if (t->inject_size > 8192) return "inject sizes beyond 8192 bytes";
        if (t->iov_limit > kMaxIov) return "more than 4 iovecs";
        if (t->size > 65536) return "more than 65536 outstanding sends";
        if (t->rma_iov_limit > 0) return "RMA";
    }
    if (const fi_rx_attr* r = h->rx_attr) {
        if (r->caps & ~kRxCaps) return "receive capabilities beyond tagged and untagged receives";
        if (r->msg_order & ~uint64_t(FI_ORDER_SAS)) return "message orders beyond FI_ORDER_SAS";
        if (r->comp_order & ~uint64_t(FI_ORDER_NONE)) return "ordered completions";
        if (r->op_flags & ~kRxOpFlags) return "receive flags beyond FI_COMPLETION";
        if (r->iov_limit > kMaxIov) return "more than 4 iovecs";
        if (r->size > 65536) return "more than 65536 posted receives";
    }
    return "";
}

char* dup(const char* s) { return s ? strdup(s) : nullptr; }

// The capabilities answered for `asked` (fi_getinfo(3), CAPABILITIES): of the primary ones only
// those asked for (all when none is: hints without caps), both modifiers unless one is asked, the
// secondary ones asked for, and the domain's (local and remote communication) always.
uint64_t answered_caps(uint64_t asked) {
    constexpr uint64_t primary = FI_TAGGED | FI_MSG | FI_DIRECTED_RECV;
    constexpr uint64_t modifiers = FI_SEND | FI_RECV;
    constexpr uint64_t domain = FI_LOCAL_COMM | FI_REMOTE_COMM;
    uint64_t caps = asked & primary ? asked & primary : primary;
    caps |= asked & modifiers ? asked & modifiers : modifiers;
    caps |= asked ? asked & (FI_SOURCE | domain) : FI_SOURCE;
    if (!(caps & domain)) caps |= domain;
    return caps;
}

// Source and destination addresses from node, service and flags (fi_getinfo(3)): with FI_SOURCE
// they name this process's own address, else the destination's. "" or why none can be given.
std::string resolve_addresses(const MpiMachine& m, const char* node, const char* service, uint64_t flags,
                              const fi_info* hints, fi_info* fi) {
    NamedRank named;
    if (node != nullptr || service != nullptr) {
        if (std::string why = resolve_rank_name(m, node, service, flags, named); !why.empty()) return why;
    }
    const bool source = (flags & FI_SOURCE) != 0;
    uint32_t src_rank = m.rank;
    bool has_src = m.rank_known;
    if (source && named.named) {
        if (m.rank_known && named.rank != m.rank)
            return "FI_SOURCE names rank " + std::to_string(named.rank) + ", but this process is rank " +
                   std::to_string(m.rank) + " (its only address)";
        src_rank = named.rank;
        has_src = true;
    }
    if (!source && hints != nullptr && hints->src_addr != nullptr) {
        IccsAddr a{};
        if (hints->src_addrlen != sizeof a) return "a source address of " + std::to_string(hints->src_addrlen) + " bytes (16)";
        std::memcpy(&a, hints->src_addr, sizeof a);
        if (!iccs_addr_valid(a, m) || (m.rank_known && a.rank != m.rank))
            return "a source address that is not this process's";
    }
    std::optional<uint32_t> dest;
    if (!source && (node != nullptr || service != nullptr)) {
        if (!named.named) return std::string("node '") + node + "' names a host, not a rank: give the rank as service";
        dest = named.rank;
    } else if (hints != nullptr && hints->dest_addr != nullptr) {
        IccsAddr a{};
        if (hints->dest_addrlen != sizeof a) return "a destination address of " + std::to_string(hints->dest_addrlen) + " bytes (16)";
        std::memcpy(&a, hints->dest_addr, sizeof a);
        if (!iccs_addr_valid(a, m)) return "a destination address that is no rank of this run";
        dest = a.rank;
    }
    auto put = [&](uint32_t rank, void*& addr, size_t& len) {
        auto* a = static_cast<IccsAddr*>(calloc(1, sizeof(IccsAddr)));
        if (a == nullptr) return;
        *a = IccsAddr{kAddrMagic, rank, m.run_hash};
        addr = a;
        len = sizeof(IccsAddr);
    };
    if (has_src) put(src_rank, fi->src_addr, fi->src_addrlen);
    if (dest) put(*dest, fi->dest_addr, fi->dest_addrlen);
    return "";
}

int iccs_getinfo(uint32_t version, const char* node, const char* service, uint64_t flags, const fi_info* hints,
                 fi_info** info) {
    *info = nullptr;
    if (asked_for_iccs(hints)) g_hints_asked = true;
    std::string err;
    const std::shared_ptr<const MpiMachine> m = prov_machine(err);
    if (!m) {
        prov_warn("fi_getinfo", err);
        return -FI_ENODATA;
    }
    if (const std::string why = unmet(version, hints); !why.empty()) {
        FI_INFO(&g_iccs_prov, FI_LOG_CORE, "iccs: hints ask for %s\n", why.c_str());
        return -FI_ENODATA;
    }
    fi_info* fi = fi_allocinfo();
    if (fi == nullptr) return -FI_ENOMEM;
    if (const std::string why = resolve_addresses(*m, node, service, flags, hints, fi); !why.empty()) {
        FI_INFO(&g_iccs_prov, FI_LOG_CORE, "iccs: %s\n", why.c_str());
        fi_freeinfo(fi);
        return -FI_ENODATA;
    }
    const uint64_t caps = answered_caps(hints ? hints->caps : 0);
    fi->caps = caps;
    fi->mode = 0;  // nothing asked of the application (FI_CONTEXT, FI_CONTEXT2 are accepted, not needed)
    fi->addr_format = FI_FORMAT_UNSPEC;

    fi_tx_attr* tx = fi->tx_attr;
    // A context's capabilities: the hints' own when they give them (fi_endpoint(3)), else the
    // info's that apply to it; never the domain's.
    const uint64_t tx_asked = hints && hints->tx_attr ? hints->tx_attr->caps : 0;
    const uint64_t rx_asked = hints && hints->rx_attr ? hints->rx_attr->caps : 0;
    tx->caps = caps & kTxCaps & (tx_asked ? tx_asked : ~0ull);
    tx->mode = 0;
    tx->op_flags = hints && hints->tx_attr ? hints->tx_attr->op_flags : 0;
    tx->msg_order = FI_ORDER_SAS;
    tx->comp_order = FI_ORDER_NONE;
    tx->inject_size = 8192;
    tx->size = hints && hints->tx_attr && hints->tx_attr->size ? hints->tx_attr->size : 65536;
    tx->iov_limit = kMaxIov;
    tx->rma_iov_limit = 0;

    fi_rx_attr* rx = fi->rx_attr;
    rx->caps = caps & kRxCaps & (rx_asked ? rx_asked : ~0ull);
    rx->mode = 0;
    rx->op_flags = hints && hints->rx_attr ? hints->rx_attr->op_flags : 0;
    rx->msg_order = FI_ORDER_SAS;
    rx->comp_order = FI_ORDER_NONE;
    rx->total_buffered_recv = 0;
    rx->size = hints && hints->rx_attr && hints->rx_attr->size ? hints->rx_attr->size : 65536;
    rx->iov_limit = kMaxIov;

    fi_ep_attr* ep = fi->ep_attr;
    ep->type = FI_EP_RDM;
    ep->protocol = FI_PROTO_UNSPEC;
    ep->protocol_version = 1;
    ep->max_msg_size = 1ull << 30;
    ep->msg_prefix_size = 0;
    ep->mem_tag_format = hints && hints->ep_attr && hints->ep_attr->mem_tag_format ? hints->ep_attr->mem_tag_format
                                                                                    : kMemTagFormat;
    ep->tx_ctx_cnt = 1;
    ep->rx_ctx_cnt = 1;

    fi_domain_attr* d = fi->domain_attr;
    const fi_domain_attr* hd = hints ? hints->domain_attr : nullptr;
    d->name = dup(kDomainName);
    d->threading = hd && hd->threading != FI_THREAD_UNSPEC ? hd->threading : FI_THREAD_SAFE;
    d->control_progress = FI_PROGRESS_MANUAL;
    d->data_progress = FI_PROGRESS_MANUAL;
    d->resource_mgmt = hd && hd->resource_mgmt == FI_RM_DISABLED ? FI_RM_DISABLED : FI_RM_ENABLED;
    d->av_type = hd && (hd->av_type == FI_AV_MAP || hd->av_type == FI_AV_TABLE) ? hd->av_type : FI_AV_UNSPEC;
    d->mr_mode = 0;  // no registration needed: descriptors are ignored (may be NULL)
    d->mr_key_size = 0;
    d->cq_data_size = 8;
    d->cq_cnt = 64;
    d->ep_cnt = 1;
    d->tx_ctx_cnt = 1;
    d->rx_ctx_cnt = 1;
    d->max_ep_tx_ctx = 1;
    d->max_ep_rx_ctx = 1;
    d->max_ep_stx_ctx = 0;
    d->max_ep_srx_ctx = 0;
    d->cntr_cnt = 0;
    d->mr_iov_limit = 1;
    d->caps = caps & (FI_LOCAL_COMM | FI_REMOTE_COMM);
    d->mode = 0;
    d->max_err_data = 256;
    d->mr_cnt = 0;

    fi->fabric_attr->name = dup(kFabricName);
    fi->fabric_attr->prov_name = nullptr;  // libfabric's core fills it
    fi->fabric_attr->prov_version = kProvVersion;
    *info = fi;
    return 0;
}

}  // namespace

fi_provider g_iccs_prov = {
    kProvVersion,
    FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
    {},
    "iccs",
    iccs_getinfo,
    iccs_fabric_open,
    iccs_cleanup,
};

void prov_warn(const char* what, const std::string& line, bool every_rank) {
    FI_WARN(&g_iccs_prov, FI_LOG_CORE, "%s: %s\n", what, line.c_str());
    static std::atomic<bool> said{false};
    if (!(g_hints_asked || asked_for_iccs(nullptr)) || said.exchange(true)) return;
    if (every_rank) {
        std::fprintf(stderr, "libiccs-fi: %s\n", line.c_str());
    } else if (speaks_for_the_run()) {
        std::fprintf(stderr, "libiccs-fi: %s\n", line.c_str());
        wait_until_every_rank_checked();
    }
}

std::shared_ptr<const MpiMachine> prov_machine(std::string& err) {
    // Read once: every fi_getinfo of the process asks (Open MPI's components ask several times).
    static std::mutex mu;
    static std::shared_ptr<const MpiMachine> machine;
    static std::string error;
    static bool done = false;
    std::lock_guard<std::mutex> lk(mu);
    if (!done) {
        auto m = std::make_shared<MpiMachine>();
        if (mpi_machine_from_env([](const char* n) -> const char* { return std::getenv(n); }, false, *m, error))
            machine = std::move(m);
        done = true;
    }
    err = error;
    return machine;
}

std::string prov_companion_path(const char* env, const char* name, int mode, const char* installed) {
    if (const char* e = std::getenv(env); e != nullptr && *e != '\0') return e;
    Dl_info dl{};
    if (dladdr(reinterpret_cast<void*>(&prov_companion_path), &dl) != 0 && dl.dli_fname != nullptr) {
        std::string dir = dl.dli_fname;
        dir = dir.substr(0, dir.rfind('/') + 1);
        const std::string beside = dir + name;
        if (access(beside.c_str(), mode) == 0) return beside;
    }
    return installed;
}

std::string prov_agent_path() {
    return prov_companion_path("ICCS_MPI_AGENT", "iccs-mpi-agent", X_OK, ICCS_MPI_AGENT_INSTALLED);
}

int iccs_no_control(fid*, int, void*) { return -FI_ENOSYS; }
int iccs_no_ops_open(fid*, const char*, uint64_t, void**, void*) { return -FI_ENOSYS; }
int iccs_no_bind(fid*, fid*, uint64_t) { return -FI_ENOSYS; }

}  // namespace iccs::mpi

extern "C" FI_EXT_INI { return &iccs::mpi::g_iccs_prov; }
