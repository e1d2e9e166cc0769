// prov_cq.cpp: completion queues. The engine pushes entries (success entries only while there
// is room: a full CQ stops progress, nothing is lost); every read first moves the engine (manual
// progress). Entries leave in order; an error entry at the head makes fi_cq_read say
// -FI_EAVAIL until fi_cq_readerr takes it.
#include <time.h>

#include <algorithm>
#include <cstring>

#include "clock.hpp"
#include "prov.hpp"

namespace iccs::mpi {

namespace {

uint64_t mono_ms() { return now_ns() / 1'000'000; }

size_t entry_size(fi_cq_format f) {
    switch (f) {
        case FI_CQ_FORMAT_CONTEXT: return sizeof(fi_cq_entry);
        case FI_CQ_FORMAT_MSG: return sizeof(fi_cq_msg_entry);
        case FI_CQ_FORMAT_DATA: return sizeof(fi_cq_data_entry);
        default: return sizeof(fi_cq_tagged_entry);
    }
}

void write_entry(fi_cq_format f, void* at, const Completion& c) {
    switch (f) {
        case FI_CQ_FORMAT_CONTEXT:
            static_cast<fi_cq_entry*>(at)->op_context = c.context;
            return;
        case FI_CQ_FORMAT_MSG:
            *static_cast<fi_cq_msg_entry*>(at) = fi_cq_msg_entry{c.context, c.flags, c.len};
            return;
        case FI_CQ_FORMAT_DATA:
            *static_cast<fi_cq_data_entry*>(at) = fi_cq_data_entry{c.context, c.flags, c.len, c.buf, c.data};
            return;
        default:
            *static_cast<fi_cq_tagged_entry*>(at) = fi_cq_tagged_entry{c.context, c.flags, c.len, c.buf, c.data, c.tag};
    }
}

// Success entries from the head, at most count; -FI_EAVAIL when an error entry is at the head,
// -FI_EAGAIN when there is nothing. The caller holds the domain's lock.
ssize_t take(IccsCq* cq, void* buf, size_t count, fi_addr_t* src) {
    if (count == 0) return 0;
    cq->domain->progress();
    if (cq->q.empty()) return -FI_EAGAIN;
    // A peek that found nothing does not end the caller's wait: a program polling MPI_Iprobe (or
    // MPI_Improbe: MagPIe's receive of unknown length) for a message from another cluster is a wait
    // loop, as empty reads are, and blocks on the doorbell after the spin time. Reset here, it
    // spun on the core its bridge and proxies needed (MagPIe's scatterv under OSU, 2 x 2 ranks:
    // 638 million peeks, calls of 50-700 ms).
    if (cq->q.front().err != FI_ENOMSG) cq->domain->idle_reads = 0;
    if (cq->q.front().err != 0) return -FI_EAVAIL;
    const size_t sz = entry_size(cq->format);
    size_t n = 0;
    while (n < count && !cq->q.empty() && cq->q.front().err == 0) {
        const Completion& c = cq->q.front();
        write_entry(cq->format, static_cast<uint8_t*>(buf) + n * sz, c);
        if (src != nullptr)
            src[n] = (c.src_rank == kAnyRank || cq->av == nullptr) ? FI_ADDR_NOTAVAIL : cq->av->addr_of(c.src_rank);
        cq->q.pop_front();
        --cq->successes;
        ++n;
    }
    return static_cast<ssize_t>(n);
}

// fi_cq_read(from): take; an empty read counts towards the wait loop's spin (IccsDomain::idle_read),
// and once the loop has polled long enough it sleeps on the rank's doorbell (without the lock:
// another thread may post meanwhile, and wakes it) and takes once more.
ssize_t read_polled(IccsCq* cq, void* buf, size_t count, fi_addr_t* src) {
    uint64_t block_us = 0;
    {
        DomainLock lk(cq->domain);
        const ssize_t n = take(cq, buf, count, src);
        if (n != -FI_EAGAIN) return n;
        block_us = cq->domain->idle_read();
    }
    if (block_us == 0) return -FI_EAGAIN;
    cq->domain->att->engine->sleep_until_work(block_us);
    DomainLock lk(cq->domain);
    cq->domain->idle_slept();
    return take(cq, buf, count, src);
}

ssize_t cq_read(fid_cq* f, void* buf, size_t count) {
    return read_polled(reinterpret_cast<IccsCq*>(f), buf, count, nullptr);
}

ssize_t cq_readfrom(fid_cq* f, void* buf, size_t count, fi_addr_t* src_addr) {
    return read_polled(reinterpret_cast<IccsCq*>(f), buf, count, src_addr);
}

ssize_t cq_readerr(fid_cq* f, fi_cq_err_entry* buf, uint64_t flags) {
    auto* cq = reinterpret_cast<IccsCq*>(f);
    if (flags != 0) return -FI_EBADFLAGS;
    DomainLock lk(cq->domain);
    if (cq->q.empty() || cq->q.front().err == 0) return -FI_EAGAIN;
    const Completion c = cq->q.front();
    cq->q.pop_front();
    cq->err_text = prov_errno_text(c.prov_errno);
    if (c.peer != kAnyRank) cq->err_text += " (rank " + std::to_string(c.peer) + ")";
    // Since API 1.5 the caller may bring its own err_data buffer (err_data_size > 0); else it gets
    // ours, valid until the next read of this CQ.
    const bool own = FI_VERSION_GE(cq->domain->fabric->fab.api_version, FI_VERSION(1, 5)) && buf->err_data_size > 0;
    void* user_data = own ? buf->err_data : nullptr;
    const size_t user_size = own ? buf->err_data_size : 0;
    buf->op_context = c.context;
    buf->flags = c.flags;
    buf->len = c.len;
    buf->buf = c.buf;
    buf->data = c.data;
    buf->tag = c.tag;
    buf->olen = c.olen;
    buf->err = c.err;
    buf->prov_errno = c.prov_errno;
    if (c.err == FI_ENOMSG || c.err == FI_ECANCELED) {
        // A peek that found nothing, a receive the caller cancelled: answers, not failures. No
        // words, and the caller's err_data is not written (fabtests' rdm_tagged_peek and
        // recv_cancel pass uninitialised entries, whose err_data_size is not 0: writing through
        // their err_data corrupted those processes' memory).
        buf->err_data_size = 0;
        return 1;
    }
    if (own) {
        const size_t n = std::min(user_size, cq->err_text.size() + 1);
        std::memcpy(user_data, cq->err_text.c_str(), n);
        static_cast<char*>(user_data)[n - 1] = '\0';
        buf->err_data = user_data;
        buf->err_data_size = n;
    } else {
        buf->err_data = const_cast<char*>(cq->err_text.c_str());
        buf->err_data_size = cq->err_text.size() + 1;
    }
    return 1;
}

// Blocking reads: progress, and between attempts sleep on this rank's doorbell (a writer of
// one of its rings wakes it) with the domain's lock let go.
ssize_t sread_common(IccsCq* cq, void* buf, size_t count, fi_addr_t* src, int timeout_ms) {
    const uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : mono_ms() + static_cast<uint64_t>(timeout_ms);
    while (true) {
        {
            DomainLock lk(cq->domain);
            const ssize_t n = take(cq, buf, count, src);
            if (n != -FI_EAGAIN) return n;
        }
        if (cq->signaled.exchange(false)) return -FI_EAGAIN;
        const uint64_t now = mono_ms();
        if (now >= deadline) return -FI_EAGAIN;
        const uint64_t wait_us = std::min<uint64_t>(deadline - now, 10) * 1000;
        // A rank that runs its cluster's proxies (InRankLink) polls, as fi_cq_read's wait does
        // (IccsDomain::idle_read: the core given away every reads_per_yield empty reads, not
        // every one): nobody else would take its frames off the fabric to wake it.
        if (cq->domain->att->in_rank.active()) {
            DomainLock lk(cq->domain);
            (void)cq->domain->idle_read();
            continue;
        }
        RankEngine* e = cq->domain->att->engine.get();
        e->sleep_until_work(wait_us);
    }
}

ssize_t cq_sread(fid_cq* f, void* buf, size_t count, const void*, int timeout) {
    return sread_common(reinterpret_cast<IccsCq*>(f), buf, count, nullptr, timeout);
}

ssize_t cq_sreadfrom(fid_cq* f, void* buf, size_t count, fi_addr_t* src_addr, const void*, int timeout) {
    return sread_common(reinterpret_cast<IccsCq*>(f), buf, count, src_addr, timeout);
}

int cq_signal(fid_cq* f) {
    auto* cq = reinterpret_cast<IccsCq*>(f);
    cq->signaled = true;
    cq->domain->att->engine->wake_self();
    return 0;
}

const char* cq_strerror(fid_cq*, int prov_errno, const void*, char* buf, size_t len) {
    return prov_errno_text(prov_errno, buf, len);
}

fi_ops_cq g_cq_ops = {sizeof(fi_ops_cq), cq_read, cq_readfrom, cq_readerr, cq_sread, cq_sreadfrom, cq_signal, cq_strerror};

int cq_close(fid* f) {
    auto* cq = reinterpret_cast<IccsCq*>(f);
    {
        DomainLock lk(cq->domain);
        if (cq->binds != 0) return -FI_EBUSY;
        --cq->domain->refs;
    }
    delete cq;
    return 0;
}

int cq_control(fid*, int command, void*) {
    (void)command;  // FI_GETWAIT: no wait object to hand out (sread sleeps on a futex of ours)
    return -FI_ENOSYS;
}

fi_ops g_cq_fi_ops = {sizeof(fi_ops), cq_close, iccs_no_bind, cq_control, iccs_no_ops_open, nullptr, nullptr};

}  // namespace

int iccs_cq_open(fid_domain* fdom, fi_cq_attr* attr, fid_cq** out, void* context) {
    auto* d = reinterpret_cast<IccsDomain*>(fdom);
    if (attr == nullptr) return -FI_EINVAL;
    if (attr->flags & ~uint64_t(FI_AFFINITY)) return -FI_EBADFLAGS;
    switch (attr->wait_obj) {
        case FI_WAIT_NONE:
        case FI_WAIT_UNSPEC:
        case FI_WAIT_YIELD: break;
        default: return -FI_ENOSYS;  // fds, wait sets and mutexes are not offered: sread sleeps on our futex
    }
    if (attr->wait_cond != FI_CQ_COND_NONE && attr->wait_cond != FI_CQ_COND_THRESHOLD) return -FI_EINVAL;
    fi_cq_format f = attr->format;
    if (f == FI_CQ_FORMAT_UNSPEC) f = FI_CQ_FORMAT_CONTEXT;
    if (f != FI_CQ_FORMAT_CONTEXT && f != FI_CQ_FORMAT_MSG && f != FI_CQ_FORMAT_DATA && f != FI_CQ_FORMAT_TAGGED)
        return -FI_ENOSYS;
    auto* cq = new IccsCq{};
    cq->cq.fid.fclass = FI_CLASS_CQ;
    cq->cq.fid.context = context;
    cq->cq.fid.ops = &g_cq_fi_ops;
    cq->cq.ops = &g_cq_ops;
    cq->domain = d;
    cq->format = f;
    cq->capacity = attr->size != 0 ? attr->size : kDefaultCqSize;
    cq->sink.cq = cq;
    {
        DomainLock lk(d);
        ++d->refs;
    }
    *out = &cq->cq;
    return 0;
}

}  // namespace iccs::mpi
