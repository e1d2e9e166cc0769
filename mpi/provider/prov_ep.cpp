// prov_ep.cpp: the endpoint (FI_EP_RDM): binding, enabling, addresses, and every send and
// receive call, tagged and untagged, turned into the engine's SendArgs / RecvArgs.
#include <cstring>

#include "prov.hpp"

namespace iccs::mpi {

namespace {

IccsEp* ep_of(fid_ep* e) { return reinterpret_cast<IccsEp*>(e); }
IccsEp* ep_of(fid* f) { return reinterpret_cast<IccsEp*>(f); }

// A posted operation may only come on an enabled endpoint with its CQ bound.
bool ready(const IccsEp* ep, bool send) { return ep->enabled && (send ? ep->tx_cq != nullptr : ep->rx_cq != nullptr); }

// The destination rank of an fi_addr, or kAnyRank when the AV does not hold it.
uint32_t dest_rank(const IccsEp* ep, fi_addr_t a) { return ep->av != nullptr ? ep->av->rank_of(a) : kAnyRank; }

// The source a receive is directed at: any unless the endpoint does directed receives and the
// caller named one (fi_tagged(3): src_addr is ignored without FI_DIRECTED_RECV).
bool source_rank(const IccsEp* ep, fi_addr_t a, uint32_t& out) {
    out = kAnyRank;
    if (a == FI_ADDR_UNSPEC || !(ep->caps & FI_DIRECTED_RECV)) return true;
    out = dest_rank(ep, a);
    return out != kAnyRank;
}

// The completion an operation gets by default (non-msg calls): with FI_SELECTIVE_COMPLETION only
// when the endpoint's op flags say FI_COMPLETION.
bool tx_default_completion(const IccsEp* ep) { return !ep->tx_selective || (ep->tx_op_flags & FI_COMPLETION); }
bool rx_default_completion(const IccsEp* ep) { return !ep->rx_selective || (ep->rx_op_flags & FI_COMPLETION); }

// A buffer at NULL with a nonzero length is the caller's mistake, refused (-FI_EINVAL) and said
// once, naming the call, instead of a segfault in the engine's copy: Open MPI 4.1.4's ofi MTL
// hands one over for MPI_BOTTOM with struct types (mpi4py's testAlltoallwBottom). Zero bytes at
// NULL stay valid (Open MPI's MPI_Ssend acknowledgement, 0-byte messages).
bool null_buffer(const char* call, const iovec* iov, size_t count) {
    bool bad = count > 0 && iov == nullptr;
    for (size_t i = 0; !bad && i < count; ++i) bad = iov[i].iov_base == nullptr && iov[i].iov_len != 0;
    if (bad) prov_warn(call, std::string(call) + ": a NULL buffer with a nonzero length: -FI_EINVAL", true);
    return bad;
}

ssize_t do_send(const char* call, IccsEp* ep, const iovec* iov, size_t count, fi_addr_t dest, uint64_t tag,
                uint64_t data, bool tagged, bool has_data, bool completion, bool inject, void* context) {
    if (!ready(ep, true)) return -FI_EOPBADSTATE;
    if (!(ep->caps & (tagged ? FI_TAGGED : FI_MSG))) return -FI_EOPNOTSUPP;
    if (count > kMaxIov || null_buffer(call, iov, count)) return -FI_EINVAL;
    const uint32_t dst = dest_rank(ep, dest);
    if (dst == kAnyRank) return -FI_EINVAL;
    SendArgs a;
    a.dst = dst;
    a.iov = iov;
    a.iov_count = static_cast<uint32_t>(count);
    a.tag = tag;
    a.data = data;
    a.tagged = tagged;
    a.has_data = has_data;
    a.completion = completion;
    a.inject = inject;
    a.context = context;
    DomainLock lk(ep->domain);
    long rc = ep->domain->att->engine->send(a);
    if (rc == -FI_EAGAIN) {
        ep->domain->progress();  // FI_EAGAIN asks the caller to progress; do a round now
        rc = ep->domain->att->engine->send(a);
    }
    // In the rank (InRankLink): the record goes onto its connection now, not at the next read.
    if (rc == 0) (void)ep->domain->att->in_rank.step();
    ep->domain->posted();
    return rc;
}

ssize_t do_recv(const char* call, IccsEp* ep, const iovec* iov, size_t count, fi_addr_t src, uint64_t tag,
                uint64_t ignore, bool tagged, uint64_t flags, bool completion, void* context) {
    if (!ready(ep, false)) return -FI_EOPBADSTATE;
    if (!(ep->caps & (tagged ? FI_TAGGED : FI_MSG))) return -FI_EOPNOTSUPP;
    if (count > kMaxIov) return -FI_EINVAL;
    // A peek alone writes nothing into the buffer (a claim or a receive does).
    const bool writes_buffer = !(flags & FI_PEEK) || (flags & FI_CLAIM);
    if (writes_buffer && null_buffer(call, iov, count)) return -FI_EINVAL;
    RecvArgs a;
    // A claim names its message by the context of the peek that claimed it (fi_tagged(3)):
    // its address is not looked at (Open MPI's MPI_Mrecv passes 0).
    const bool claim_only = (flags & FI_CLAIM) && !(flags & FI_PEEK);
    if (!claim_only && !source_rank(ep, src, a.src)) return -FI_EINVAL;
    a.iov = iov;
    a.iov_count = static_cast<uint32_t>(count);
    a.tag = tag;
    a.ignore = ignore;
    a.tagged = tagged;
    a.completion = completion;
    a.peek = (flags & FI_PEEK) != 0;
    a.claim = (flags & FI_CLAIM) != 0;
    a.discard = (flags & FI_DISCARD) != 0;
    a.context = context;
    DomainLock lk(ep->domain);
    if (a.peek) ep->domain->progress();  // a peek looks at what arrived: take it in first
    const long rc = ep->domain->att->engine->recv(a);
    ep->domain->posted();
    return rc;
}

// ---- untagged (fi_msg) ----

ssize_t msg_recv(fid_ep* e, void* buf, size_t len, void*, fi_addr_t src, void* ctx) {
    const iovec v{buf, len};
    return do_recv("fi_recv", ep_of(e), &v, 1, src, 0, 0, false, 0, rx_default_completion(ep_of(e)), ctx);
}
ssize_t msg_recvv(fid_ep* e, const iovec* iov, void**, size_t count, fi_addr_t src, void* ctx) {
    return do_recv("fi_recvv", ep_of(e), iov, count, src, 0, 0, false, 0, rx_default_completion(ep_of(e)), ctx);
}
ssize_t msg_recvmsg(fid_ep* e, const fi_msg* m, uint64_t flags) {
    IccsEp* ep = ep_of(e);
    if (flags & ~uint64_t(FI_COMPLETION)) return -FI_EBADFLAGS;  // FI_MULTI_RECV is not offered
    return do_recv("fi_recvmsg", ep, m->msg_iov, m->iov_count, m->addr, 0, 0, false, 0,
                   !ep->rx_selective || (flags & FI_COMPLETION), m->context);
}
ssize_t msg_send(fid_ep* e, const void* buf, size_t len, void*, fi_addr_t dst, void* ctx) {
    const iovec v{const_cast<void*>(buf), len};
    return do_send("fi_send", ep_of(e), &v, 1, dst, 0, 0, false, false, tx_default_completion(ep_of(e)), false, ctx);
}
ssize_t msg_sendv(fid_ep* e, const iovec* iov, void**, size_t count, fi_addr_t dst, void* ctx) {
    return do_send("fi_sendv", ep_of(e), iov, count, dst, 0, 0, false, false, tx_default_completion(ep_of(e)),
                   false, ctx);
}
ssize_t msg_sendmsg(fid_ep* e, const fi_msg* m, uint64_t flags) {
    IccsEp* ep = ep_of(e);
    if (flags & ~uint64_t(FI_COMPLETION | FI_REMOTE_CQ_DATA | FI_INJECT | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE |
                          FI_DELIVERY_COMPLETE))
        return -FI_EBADFLAGS;
    return do_send("fi_sendmsg", ep, m->msg_iov, m->iov_count, m->addr, 0, m->data, false,
                   (flags & FI_REMOTE_CQ_DATA) != 0,
                   !ep->tx_selective || (flags & FI_COMPLETION), (flags & FI_INJECT) != 0, m->context);
}
ssize_t msg_inject(fid_ep* e, const void* buf, size_t len, fi_addr_t dst) {
    const iovec v{const_cast<void*>(buf), len};
    return do_send("fi_inject", ep_of(e), &v, 1, dst, 0, 0, false, false, false, true, nullptr);
}
ssize_t msg_senddata(fid_ep* e, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dst, void* ctx) {
    const iovec v{const_cast<void*>(buf), len};
    return do_send("fi_senddata", ep_of(e), &v, 1, dst, 0, data, false, true, tx_default_completion(ep_of(e)),
                   false, ctx);
}
ssize_t msg_injectdata(fid_ep* e, const void* buf, size_t len, uint64_t data, fi_addr_t dst) {
    const iovec v{const_cast<void*>(buf), len};
    return do_send("fi_injectdata", ep_of(e), &v, 1, dst, 0, data, false, true, false, true, nullptr);
}

fi_ops_msg g_msg_ops = {sizeof(fi_ops_msg), msg_recv,    msg_recvv,    msg_recvmsg,   msg_send,
                        msg_sendv,          msg_sendmsg, msg_inject,   msg_senddata,  msg_injectdata};

// ---- tagged (fi_tagged) ----

ssize_t t_recv(fid_ep* e, void* buf, size_t len, void*, fi_addr_t src, uint64_t tag, uint64_t ignore, void* ctx) {
    const iovec v{buf, len};
    return do_recv("fi_trecv", ep_of(e), &v, 1, src, tag, ignore, true, 0, rx_default_completion(ep_of(e)), ctx);
}
ssize_t t_recvv(fid_ep* e, const iovec* iov, void**, size_t count, fi_addr_t src, uint64_t tag, uint64_t ignore,
                void* ctx) {
    return do_recv("fi_trecvv", ep_of(e), iov, count, src, tag, ignore, true, 0, rx_default_completion(ep_of(e)), ctx);
}
ssize_t t_recvmsg(fid_ep* e, const fi_msg_tagged* m, uint64_t flags) {
    IccsEp* ep = ep_of(e);
    if (flags & ~uint64_t(FI_COMPLETION | FI_PEEK | FI_CLAIM | FI_DISCARD)) return -FI_EBADFLAGS;
    if ((flags & FI_DISCARD) && !(flags & (FI_PEEK | FI_CLAIM))) return -FI_EBADFLAGS;
    // A peek always reports (its answer is the completion); so does a claim.
    const bool completion = (flags & (FI_PEEK | FI_CLAIM)) || !ep->rx_selective || (flags & FI_COMPLETION);
    return do_recv("fi_trecvmsg", ep, m->msg_iov, m->iov_count, m->addr, m->tag, m->ignore, true, flags,
                   completion, m->context);
}
ssize_t t_send(fid_ep* e, const void* buf, size_t len, void*, fi_addr_t dst, uint64_t tag, void* ctx) {
    const iovec v{const_cast<void*>(buf), len};
    return do_send("fi_tsend", ep_of(e), &v, 1, dst, tag, 0, true, false, tx_default_completion(ep_of(e)), false, ctx);
}
ssize_t t_sendv(fid_ep* e, const iovec* iov, void**, size_t count, fi_addr_t dst, uint64_t tag, void* ctx) {
    return do_send("fi_tsendv", ep_of(e), iov, count, dst, tag, 0, true, false,
                   tx_default_completion(ep_of(e)), false, ctx);
}
ssize_t t_sendmsg(fid_ep* e, const fi_msg_tagged* m, uint64_t flags) {
    IccsEp* ep = ep_of(e);
    if (flags & ~uint64_t(FI_COMPLETION | FI_REMOTE_CQ_DATA | FI_INJECT | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE |
                          FI_DELIVERY_COMPLETE))
        return -FI_EBADFLAGS;
    return do_send("fi_tsendmsg", ep, m->msg_iov, m->iov_count, m->addr, m->tag, m->data, true,
                   (flags & FI_REMOTE_CQ_DATA) != 0,
                   !ep->tx_selective || (flags & FI_COMPLETION), (flags & FI_INJECT) != 0, m->context);
}
ssize_t t_inject(fid_ep* e, const void* buf, size_t len, fi_addr_t dst, uint64_t tag) {
    const iovec v{const_cast<void*>(buf), len};
    return do_send("fi_tinject", ep_of(e), &v, 1, dst, tag, 0, true, false, false, true, nullptr);
}
ssize_t t_senddata(fid_ep* e, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dst, uint64_t tag,
                   void* ctx) {
    const iovec v{const_cast<void*>(buf), len};
    return do_send("fi_tsenddata", ep_of(e), &v, 1, dst, tag, data, true, true,
                   tx_default_completion(ep_of(e)), false, ctx);
}
ssize_t t_injectdata(fid_ep* e, const void* buf, size_t len, uint64_t data, fi_addr_t dst, uint64_t tag) {
    const iovec v{const_cast<void*>(buf), len};
    return do_send("fi_tinjectdata", ep_of(e), &v, 1, dst, tag, data, true, true, false, true, nullptr);
}

fi_ops_tagged g_tagged_ops = {sizeof(fi_ops_tagged), t_recv,    t_recvv,  t_recvmsg,  t_send,
                              t_sendv,               t_sendmsg, t_inject, t_senddata, t_injectdata};

// ---- endpoint operations ----

ssize_t ep_cancel(fid_t f, void* context) {
    IccsEp* ep = ep_of(f);
    if (!ep->enabled) return -FI_EOPBADSTATE;
    DomainLock lk(ep->domain);
    return ep->domain->att->engine->cancel(context);
}

int ep_getopt(fid_t, int, int, void*, size_t*) { return -FI_ENOPROTOOPT; }
int ep_setopt(fid_t, int, int, const void*, size_t) { return -FI_ENOPROTOOPT; }
int ep_tx_ctx(fid_ep*, int, fi_tx_attr*, fid_ep**, void*) { return -FI_ENOSYS; }
int ep_rx_ctx(fid_ep*, int, fi_rx_attr*, fid_ep**, void*) { return -FI_ENOSYS; }
ssize_t ep_rx_size_left(fid_ep* e) {
    IccsEp* ep = ep_of(e);
    if (!ep->enabled) return -FI_EOPBADSTATE;
    DomainLock lk(ep->domain);
    return static_cast<ssize_t>(ep->domain->att->engine->rx_left());
}
ssize_t ep_tx_size_left(fid_ep* e) {
    IccsEp* ep = ep_of(e);
    if (!ep->enabled) return -FI_EOPBADSTATE;
    DomainLock lk(ep->domain);
    return static_cast<ssize_t>(ep->domain->att->engine->tx_left());
}

fi_ops_ep g_ep_ops = {sizeof(fi_ops_ep), ep_cancel, ep_getopt, ep_setopt, ep_tx_ctx, ep_rx_ctx, ep_rx_size_left,
                      ep_tx_size_left};

// ---- addresses (fi_cm) ----

int cm_getname(fid_t f, void* addr, size_t* addrlen) {
    IccsEp* ep = ep_of(f);
    const MpiMachine& m = ep->domain->att->machine;
    const IccsAddr a{kAddrMagic, m.rank, m.run_hash};
    const size_t room = *addrlen;
    *addrlen = sizeof a;
    if (room < sizeof a) return -FI_ETOOSMALL;
    std::memcpy(addr, &a, sizeof a);
    return 0;
}
int cm_setname(fid_t, void*, size_t) { return -FI_ENOSYS; }  // a rank's address is its rank
int cm_getpeer(fid_ep*, void*, size_t*) { return -FI_ENOSYS; }
int cm_connect(fid_ep*, const void*, const void*, size_t) { return -FI_ENOSYS; }
int cm_listen(fid_pep*) { return -FI_ENOSYS; }
int cm_accept(fid_ep*, const void*, size_t) { return -FI_ENOSYS; }
int cm_reject(fid_pep*, fid_t, const void*, size_t) { return -FI_ENOSYS; }
int cm_shutdown(fid_ep*, uint64_t) { return -FI_ENOSYS; }
int cm_join(fid_ep*, const void*, uint64_t, fid_mc**, void*) { return -FI_ENOSYS; }

fi_ops_cm g_cm_ops = {sizeof(fi_ops_cm), cm_setname, cm_getname, cm_getpeer, cm_connect,
                      cm_listen,         cm_accept,  cm_reject,  cm_shutdown, cm_join};

// ---- fid operations: close, bind, control ----

int ep_close(fid* f) {
    IccsEp* ep = ep_of(f);
    IccsDomain* d = ep->domain;
    {
        DomainLock lk(d);
        if (ep->enabled) {
            // Sends still queued go out first (their buffers are the caller's until completion,
            // so a close that dropped them would lose messages the application believes sent).
            RankEngine& e = *d->att->engine;
            for (int i = 0; i < 100000 && e.sends_pending(); ++i) d->progress();
            e.forget_receives();
            e.bind_tx(nullptr);
            e.bind_rx(nullptr);
        }
        if (ep->tx_cq) --ep->tx_cq->binds;
        if (ep->rx_cq && ep->rx_cq != ep->tx_cq) --ep->rx_cq->binds;
        if (ep->av) --ep->av->binds;
        d->ep_open = false;
        --d->refs;
    }
    delete ep;
    return 0;
}

int ep_bind(fid* f, fid* bf, uint64_t flags) {
    IccsEp* ep = ep_of(f);
    if (ep->enabled) return -FI_EOPBADSTATE;
    DomainLock lk(ep->domain);
    switch (bf->fclass) {
        case FI_CLASS_AV: {
            if (flags != 0) return -FI_EBADFLAGS;
            auto* av = reinterpret_cast<IccsAv*>(bf);
            if (av->domain != ep->domain) return -FI_EINVAL;
            if (ep->av) return -FI_EALREADY;
            ep->av = av;
            ++av->binds;
            return 0;
        }
        case FI_CLASS_CQ: {
            if (flags & ~uint64_t(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION)) return -FI_EBADFLAGS;
            if (!(flags & (FI_TRANSMIT | FI_RECV))) return -FI_EBADFLAGS;
            auto* cq = reinterpret_cast<IccsCq*>(bf);
            if (cq->domain != ep->domain) return -FI_EINVAL;
            if (((flags & FI_TRANSMIT) && ep->tx_cq) || ((flags & FI_RECV) && ep->rx_cq)) return -FI_EALREADY;
            if (flags & FI_TRANSMIT) {
                ep->tx_cq = cq;
                ep->tx_selective = (flags & FI_SELECTIVE_COMPLETION) != 0;
                ++cq->binds;
            }
            if (flags & FI_RECV) {
                ep->rx_cq = cq;
                ep->rx_selective = (flags & FI_SELECTIVE_COMPLETION) != 0;
                if (!(flags & FI_TRANSMIT)) ++cq->binds;
            }
            return 0;
        }
        case FI_CLASS_EQ:
            return 0;  // nothing of an RDM endpoint reports there
        case FI_CLASS_CNTR:
            return -FI_ENOSYS;  // counters are not offered
        default:
            return -FI_EINVAL;
    }
}

int ep_control(fid* f, int command, void* arg) {
    IccsEp* ep = ep_of(f);
    switch (command) {
        case FI_ENABLE: {
            DomainLock lk(ep->domain);
            if (ep->enabled) return 0;
            if (ep->av == nullptr) return -FI_ENOAV;
            if (ep->tx_cq == nullptr && ep->rx_cq == nullptr) return -FI_ENOCQ;
            RankEngine& e = *ep->domain->att->engine;
            e.bind_tx(ep->tx_cq ? &ep->tx_cq->sink : nullptr);
            e.bind_rx(ep->rx_cq ? &ep->rx_cq->sink : nullptr);
            if (ep->tx_cq) ep->tx_cq->av = ep->av;
            if (ep->rx_cq) ep->rx_cq->av = ep->av;
            ep->enabled = true;
            return 0;
        }
        case FI_GETOPSFLAG: {
            auto* flags = static_cast<uint64_t*>(arg);
            if (flags == nullptr) return -FI_EINVAL;
            *flags = (*flags & FI_TRANSMIT) ? ep->tx_op_flags : ep->rx_op_flags;
            return 0;
        }
        case FI_SETOPSFLAG: {
            auto* flags = static_cast<uint64_t*>(arg);
            if (flags == nullptr) return -FI_EINVAL;
            const uint64_t v = *flags & ~uint64_t(FI_TRANSMIT | FI_RECV);
            if (*flags & FI_TRANSMIT) ep->tx_op_flags = v;
            else ep->rx_op_flags = v;
            return 0;
        }
        default:
            return -FI_ENOSYS;
    }
}

fi_ops g_ep_fi_ops = {sizeof(fi_ops), ep_close, ep_bind, ep_control, iccs_no_ops_open, nullptr, nullptr};

}  // namespace

int iccs_ep_open(fid_domain* fdom, fi_info* info, fid_ep** out, void* context) {
    auto* d = reinterpret_cast<IccsDomain*>(fdom);
    if (info == nullptr || (info->ep_attr != nullptr && info->ep_attr->type != FI_EP_RDM)) return -FI_EINVAL;
    DomainLock lk(d);
    if (d->ep_open) return -FI_EBUSY;  // one endpoint per process: the rank
    auto* ep = new IccsEp{};
    ep->ep.fid.fclass = FI_CLASS_EP;
    ep->ep.fid.context = context;
    ep->ep.fid.ops = &g_ep_fi_ops;
    ep->ep.ops = &g_ep_ops;
    ep->ep.cm = &g_cm_ops;
    ep->ep.msg = &g_msg_ops;
    ep->ep.rma = &g_no_rma;
    ep->ep.tagged = &g_tagged_ops;
    ep->ep.atomic = &g_no_atomic;
    ep->ep.collective = &g_no_collective;
    ep->domain = d;
    ep->caps = info->caps ? info->caps : (kPrimaryCaps | kSecondaryCaps);
    ep->tx_op_flags = info->tx_attr ? info->tx_attr->op_flags : 0;
    ep->rx_op_flags = info->rx_attr ? info->rx_attr->op_flags : 0;
    d->ep_open = true;
    ++d->refs;
    *out = &ep->ep;
    return 0;
}

}  // namespace iccs::mpi
