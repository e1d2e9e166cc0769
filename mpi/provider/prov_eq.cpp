// prov_eq.cpp: event queues. Reliable datagram endpoints have no connection events and address
// vectors insert at once, so nothing of the provider writes one; an EQ exists for programs that
// open one anyway (and bind nothing to it), and holds what the application writes (fi_eq_write).
// Wait objects: none, unspecified (sread) and a file descriptor (an eventfd readable while the
// EQ holds an event, for poll/epoll after fi_trywait); mutexes and wait sets are not offered.
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "prov.hpp"

namespace iccs::mpi {

namespace {

// The eventfd says whether q holds an event (the caller holds mu): set by the write that filled
// an empty q, cleared by the read that emptied it.
void mark_filled(IccsEq* eq) {
    const uint64_t one = 1;
    if (eq->fd >= 0) (void)!::write(eq->fd, &one, sizeof one);
}
void mark_empty(IccsEq* eq) {
    uint64_t v = 0;
    if (eq->fd >= 0) (void)!::read(eq->fd, &v, sizeof v);
}

ssize_t read_locked(IccsEq* eq, uint32_t* event, void* buf, size_t len, uint64_t flags) {
    if (eq->q.empty()) return -FI_EAGAIN;
    const IccsEq::Entry& e = eq->q.front();
    if (len < e.bytes.size()) return -FI_ETOOSMALL;
    if (event != nullptr) *event = e.event;
    if (!e.bytes.empty()) std::memcpy(buf, e.bytes.data(), e.bytes.size());
    const auto n = static_cast<ssize_t>(e.bytes.size());
    if (!(flags & FI_PEEK)) {
        eq->q.pop_front();
        if (eq->q.empty()) mark_empty(eq);
    }
    return n;
}

ssize_t eq_read(fid_eq* f, uint32_t* event, void* buf, size_t len, uint64_t flags) {
    auto* eq = reinterpret_cast<IccsEq*>(f);
    if (flags & ~uint64_t(FI_PEEK)) return -FI_EBADFLAGS;
    std::lock_guard<std::mutex> lk(eq->mu);
    return read_locked(eq, event, buf, len, flags);
}

ssize_t eq_readerr(fid_eq*, fi_eq_err_entry*, uint64_t) { return -FI_EAGAIN; }  // no errors are ever queued

ssize_t eq_write(fid_eq* f, uint32_t event, const void* buf, size_t len, uint64_t flags) {
    auto* eq = reinterpret_cast<IccsEq*>(f);
    if (flags != 0) return -FI_EBADFLAGS;
    std::lock_guard<std::mutex> lk(eq->mu);
    IccsEq::Entry e{event, {}};
    if (len != 0) e.bytes.assign(static_cast<const uint8_t*>(buf), static_cast<const uint8_t*>(buf) + len);
    if (eq->q.empty()) mark_filled(eq);
    eq->q.push_back(std::move(e));
    eq->filled.notify_all();
    return static_cast<ssize_t>(len);
}

// Waits for an event at most timeout ms (< 0: without end); -FI_EAGAIN when none came.
ssize_t eq_sread(fid_eq* f, uint32_t* event, void* buf, size_t len, int timeout, uint64_t flags) {
    auto* eq = reinterpret_cast<IccsEq*>(f);
    if (flags & ~uint64_t(FI_PEEK)) return -FI_EBADFLAGS;
    std::unique_lock<std::mutex> lk(eq->mu);
    auto has_event = [&] { return !eq->q.empty(); };
    if (timeout < 0) eq->filled.wait(lk, has_event);
    else eq->filled.wait_for(lk, std::chrono::milliseconds(timeout), has_event);
    return read_locked(eq, event, buf, len, flags);
}

const char* eq_strerror(fid_eq*, int prov_errno, const void*, char* buf, size_t len) {
    return prov_errno_text(prov_errno, buf, len);
}

fi_ops_eq g_eq_ops = {sizeof(fi_ops_eq), eq_read, eq_readerr, eq_write, eq_sread, eq_strerror};

int eq_close(fid* f) {
    auto* eq = reinterpret_cast<IccsEq*>(f);
    if (eq->fd >= 0) ::close(eq->fd);
    delete eq;
    return 0;
}

int eq_control(fid* f, int command, void* arg) {
    auto* eq = reinterpret_cast<IccsEq*>(f);
    if (command != FI_GETWAIT) return -FI_ENOSYS;
    if (eq->fd < 0) return -FI_ENODATA;  // opened without FI_WAIT_FD: no wait object to hand out
    *static_cast<int*>(arg) = eq->fd;
    return 0;
}

fi_ops g_eq_fi_ops = {sizeof(fi_ops), eq_close, iccs_no_bind, eq_control, iccs_no_ops_open, nullptr, nullptr};

}  // namespace

int iccs_eq_open(fid_fabric* fabric, fi_eq_attr* attr, fid_eq** out, void* context) {
    const fi_wait_obj wait = attr != nullptr ? attr->wait_obj : FI_WAIT_NONE;
    if (wait != FI_WAIT_NONE && wait != FI_WAIT_UNSPEC && wait != FI_WAIT_FD) return -FI_ENOSYS;
    int fd = -1;
    if (wait == FI_WAIT_FD && (fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) return -FI_EMFILE;
    auto* eq = new IccsEq{};
    eq->eq.fid.fclass = FI_CLASS_EQ;
    eq->eq.fid.context = context;
    eq->eq.fid.ops = &g_eq_fi_ops;
    eq->eq.ops = &g_eq_ops;
    eq->fabric = reinterpret_cast<IccsFabric*>(fabric);
    eq->fd = fd;
    *out = &eq->eq;
    return 0;
}

int iccs_trywait(fid_fabric*, fid** fids, int count) {
    for (int i = 0; i < count; ++i) {
        if (fids[i] == nullptr || fids[i]->fclass != FI_CLASS_EQ) return -FI_EINVAL;  // only EQs have a wait fd
        auto* eq = reinterpret_cast<IccsEq*>(fids[i]);
        if (eq->fd < 0) return -FI_EINVAL;
        std::lock_guard<std::mutex> lk(eq->mu);
        if (!eq->q.empty()) return -FI_EAGAIN;
    }
    return FI_SUCCESS;
}

}  // namespace iccs::mpi
