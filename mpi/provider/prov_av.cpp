// prov_av.cpp: address vectors. An address is a rank of the run (IccsAddr); FI_AV_MAP hands out
// the rank itself, tagged so that a stray value is refused, FI_AV_TABLE the insertion index.
#include <cstdio>
#include <cstring>

#include "prov.hpp"

namespace iccs::mpi {

namespace {

constexpr fi_addr_t kMapTag = 0x1CC5ull << 48;  // FI_AV_MAP: kMapTag | rank
constexpr fi_addr_t kMapTagMask = 0xFFFFull << 48;
// What inserts take (fi_av(3)): FI_MORE is a hint (inserts complete at once; nothing to gather),
// FI_SYNC_ERR asks for each entry's error; FI_AV_USER_ID is not offered.
constexpr uint64_t kInsertFlags = FI_MORE | FI_SYNC_ERR;

// Puts one rank into the AV (the caller holds the domain's lock); its fi_addr.
fi_addr_t insert_rank(IccsAv* av, uint32_t rank) {
    if (av->type != FI_AV_TABLE) return kMapTag | rank;
    const fi_addr_t out = av->ranks.size();
    av->ranks.push_back(rank);
    if (av->by_rank[rank] == FI_ADDR_NOTAVAIL) av->by_rank[rank] = out;
    return out;
}

int av_insert(fid_av* fav, const void* addr, size_t count, fi_addr_t* fi_addr, uint64_t flags, void* context) {
    auto* av = reinterpret_cast<IccsAv*>(fav);
    if ((flags & ~kInsertFlags) != 0) return -FI_EBADFLAGS;
    if (count != 0 && addr == nullptr) return -FI_EINVAL;
    DomainLock lk(av->domain);
    const MpiMachine& m = *av->domain->fabric->machine;
    int* errs = (flags & FI_SYNC_ERR) ? static_cast<int*>(context) : nullptr;
    int inserted = 0;
    for (size_t i = 0; i < count; ++i) {
        IccsAddr a;
        std::memcpy(&a, static_cast<const uint8_t*>(addr) + i * sizeof(IccsAddr), sizeof a);
        const bool ok = iccs_addr_valid(a, m);
        fi_addr_t out = FI_ADDR_NOTAVAIL;
        if (ok) {
            out = insert_rank(av, a.rank);
            ++inserted;
        } else {
            FI_WARN(&g_iccs_prov, FI_LOG_AV, "fi_av_insert: entry %zu is no address of this run (magic 0x%x, rank %u)\n",
                    i, a.magic, a.rank);
        }
        if (fi_addr != nullptr) fi_addr[i] = out;
        if (errs != nullptr) errs[i] = ok ? 0 : FI_EINVAL;
    }
    return inserted;
}

// Inserts what node and service name (prov_names.cpp) as entry `i` of the call; 1 when inserted.
int insert_named(IccsAv* av, const char* node, const char* service, size_t i, fi_addr_t* fi_addr, int* errs) {
    NamedRank named;
    std::string why = resolve_rank_name(*av->domain->fabric->machine, node, service, 0, named);
    if (why.empty() && !named.named) why = "no rank named (the rank is the service)";
    fi_addr_t out = FI_ADDR_NOTAVAIL;
    if (why.empty()) out = insert_rank(av, named.rank);
    else FI_WARN(&g_iccs_prov, FI_LOG_AV, "fi_av_insertsvc: entry %zu: %s\n", i, why.c_str());
    if (fi_addr != nullptr) fi_addr[i] = out;
    if (errs != nullptr) errs[i] = why.empty() ? 0 : FI_EINVAL;
    return why.empty() ? 1 : 0;
}

int av_insertsvc(fid_av* fav, const char* node, const char* service, fi_addr_t* fi_addr, uint64_t flags,
                 void* context) {
    auto* av = reinterpret_cast<IccsAv*>(fav);
    if ((flags & ~kInsertFlags) != 0) return -FI_EBADFLAGS;
    if (node == nullptr && service == nullptr) return -FI_EINVAL;
    DomainLock lk(av->domain);
    return insert_named(av, node, service, 0, fi_addr, (flags & FI_SYNC_ERR) ? static_cast<int*>(context) : nullptr);
}

// nodecnt x svccnt names, every service of a node before the next node (fi_av(3)).
int av_insertsym(fid_av* fav, const char* node, size_t nodecnt, const char* service, size_t svccnt,
                 fi_addr_t* fi_addr, uint64_t flags, void* context) {
    auto* av = reinterpret_cast<IccsAv*>(fav);
    if ((flags & ~kInsertFlags) != 0) return -FI_EBADFLAGS;
    if (node == nullptr || service == nullptr || nodecnt == 0 || svccnt == 0) return -FI_EINVAL;
    DomainLock lk(av->domain);
    int* errs = (flags & FI_SYNC_ERR) ? static_cast<int*>(context) : nullptr;
    int inserted = 0;
    std::string n = node;
    for (size_t i = 0; i < nodecnt; ++i, n = next_symmetric_name(n)) {
        std::string s = service;
        for (size_t j = 0; j < svccnt; ++j, s = next_symmetric_name(s)) {
            // A name without a number to count on ("" from next_symmetric_name) names nothing.
            const bool countable = !n.empty() && !s.empty();
            inserted += insert_named(av, countable ? n.c_str() : nullptr, countable ? s.c_str() : nullptr,
                                     i * svccnt + j, fi_addr, errs);
        }
    }
    return inserted;
}

int av_remove(fid_av* fav, fi_addr_t* fi_addr, size_t count, uint64_t flags) {
    auto* av = reinterpret_cast<IccsAv*>(fav);
    if (flags != 0) return -FI_EBADFLAGS;
    DomainLock lk(av->domain);
    for (size_t i = 0; i < count; ++i) {
        const uint32_t r = av->rank_of(fi_addr[i]);
        if (r == kAnyRank) return -FI_EINVAL;
        if (av->type == FI_AV_TABLE) {
            av->ranks[fi_addr[i]] = kAnyRank;
            if (av->by_rank[r] == fi_addr[i]) {
                av->by_rank[r] = FI_ADDR_NOTAVAIL;
                for (size_t k = 0; k < av->ranks.size(); ++k)
                    if (av->ranks[k] == r) {
                        av->by_rank[r] = k;
                        break;
                    }
            }
        }
    }
    return 0;
}

int av_lookup(fid_av* fav, fi_addr_t fi_addr, void* addr, size_t* addrlen) {
    auto* av = reinterpret_cast<IccsAv*>(fav);
    DomainLock lk(av->domain);
    const uint32_t r = av->rank_of(fi_addr);
    if (r == kAnyRank) return -FI_EINVAL;
    const IccsAddr a{kAddrMagic, r, av->domain->fabric->machine->run_hash};
    std::memcpy(addr, &a, std::min(*addrlen, sizeof a));
    *addrlen = sizeof a;
    return 0;
}

const char* av_straddr(fid_av*, const void* addr, char* buf, size_t* len) {
    IccsAddr a;
    std::memcpy(&a, addr, sizeof a);
    char s[64];
    const int n = std::snprintf(s, sizeof s, "iccs://rank/%u", a.rank);
    if (buf != nullptr && *len > 0) std::snprintf(buf, *len, "%s", s);
    *len = static_cast<size_t>(n) + 1;
    return buf;
}

int av_set(fid_av*, fi_av_set_attr*, fid_av_set**, void*) { return -FI_ENOSYS; }

fi_ops_av g_av_ops = {sizeof(fi_ops_av), av_insert, av_insertsvc, av_insertsym, av_remove,
                      av_lookup,          av_straddr, av_set};

int av_close(fid* f) {
    auto* av = reinterpret_cast<IccsAv*>(f);
    {
        DomainLock lk(av->domain);
        if (av->binds != 0) return -FI_EBUSY;
        --av->domain->refs;
    }
    delete av;
    return 0;
}

int av_bind(fid*, fid*, uint64_t) { return -FI_ENOSYS; }  // no EQ: inserts complete at once

fi_ops g_av_fi_ops = {sizeof(fi_ops), av_close, av_bind, iccs_no_control, iccs_no_ops_open, nullptr, nullptr};

}  // namespace

uint32_t IccsAv::rank_of(fi_addr_t a) const {
    if (type == FI_AV_TABLE) return a < ranks.size() ? ranks[a] : kAnyRank;
    if ((a & kMapTagMask) != kMapTag) return kAnyRank;
    const uint64_t r = a & ~kMapTagMask;
    return r < by_rank.size() ? static_cast<uint32_t>(r) : kAnyRank;
}

fi_addr_t IccsAv::addr_of(uint32_t rank) const {
    if (rank >= by_rank.size()) return FI_ADDR_NOTAVAIL;
    return type == FI_AV_TABLE ? by_rank[rank] : kMapTag | rank;
}

int iccs_av_open(fid_domain* fdom, fi_av_attr* attr, fid_av** out, void* context) {
    auto* d = reinterpret_cast<IccsDomain*>(fdom);
    if (attr == nullptr) return -FI_EINVAL;
    if (attr->flags & FI_EVENT) return -FI_ENOSYS;  // asynchronous inserts (an EQ) are not offered
    if (attr->name != nullptr) return -FI_ENOSYS;   // named (shared) AVs are not offered
    if (attr->rx_ctx_bits != 0) return -FI_EINVAL;  // one receive context
    fi_av_type type = attr->type;
    if (type == FI_AV_UNSPEC) type = FI_AV_MAP;
    if (type != FI_AV_MAP && type != FI_AV_TABLE) return -FI_EINVAL;
    auto* av = new IccsAv{};
    av->av.fid.fclass = FI_CLASS_AV;
    av->av.fid.context = context;
    av->av.fid.ops = &g_av_fi_ops;
    av->av.ops = &g_av_ops;
    av->domain = d;
    av->type = type;
    av->by_rank.assign(d->fabric->machine->world, type == FI_AV_TABLE ? FI_ADDR_NOTAVAIL : 0);
    {
        DomainLock lk(d);
        ++d->refs;
    }
    *out = &av->av;
    return 0;
}

}  // namespace iccs::mpi
