// prov_eq.cpp: event queues. Reliable datagram endpoints have no connection events and address
// vectors insert at once, so nothing of the provider writes one; an EQ exists for programs that
// open one anyway (and bind nothing to it), and holds what the application writes (fi_eq_write).
#include <time.h>

#include <cstring>
#include <thread>

#include "prov.hpp"

namespace iccs::mpi {

namespace {

ssize_t eq_read(fid_eq* f, uint32_t* event, void* buf, size_t len, uint64_t flags) {
    auto* eq = reinterpret_cast<IccsEq*>(f);
    if (flags & ~uint64_t(FI_PEEK)) return -FI_EBADFLAGS;
    std::lock_guard<std::mutex> lk(eq->mu);
    if (eq->q.empty()) return -FI_EAGAIN;
    const IccsEq::Entry& e = eq->q.front();
    if (len < e.bytes.size()) return -FI_ETOOSMALL;
    if (event != nullptr) *event = e.event;
    if (!e.bytes.empty()) std::memcpy(buf, e.bytes.data(), e.bytes.size());
    const auto n = static_cast<ssize_t>(e.bytes.size());
    if (!(flags & FI_PEEK)) eq->q.pop_front();
    return n;
}

ssize_t eq_readerr(fid_eq*, fi_eq_err_entry*, uint64_t) { return -FI_EAGAIN; }  // no errors are ever queued

ssize_t eq_write(fid_eq* f, uint32_t event, const void* buf, size_t len, uint64_t flags) {
    auto* eq = reinterpret_cast<IccsEq*>(f);
    if (flags != 0) return -FI_EBADFLAGS;
    std::lock_guard<std::mutex> lk(eq->mu);
    IccsEq::Entry e{event, {}};
    if (len != 0) e.bytes.assign(static_cast<const uint8_t*>(buf), static_cast<const uint8_t*>(buf) + len);
    eq->q.push_back(std::move(e));
    return static_cast<ssize_t>(len);
}

ssize_t eq_sread(fid_eq* f, uint32_t* event, void* buf, size_t len, int timeout, uint64_t flags) {
    timespec t0{};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (true) {
        const ssize_t n = eq_read(f, event, buf, len, flags);
        if (n != -FI_EAGAIN) return n;
        timespec t{};
        clock_gettime(CLOCK_MONOTONIC, &t);
        const long ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1'000'000;
        if (timeout >= 0 && ms >= timeout) return -FI_EAGAIN;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

const char* eq_strerror(fid_eq*, int prov_errno, const void*, char* buf, size_t len) {
    return prov_errno_text(prov_errno, buf, len);
}

fi_ops_eq g_eq_ops = {sizeof(fi_ops_eq), eq_read, eq_readerr, eq_write, eq_sread, eq_strerror};

int eq_close(fid* f) {
    delete reinterpret_cast<IccsEq*>(f);
    return 0;
}

fi_ops g_eq_fi_ops = {sizeof(fi_ops), eq_close, iccs_no_bind, iccs_no_control, iccs_no_ops_open, nullptr, nullptr};

}  // namespace

int iccs_eq_open(fid_fabric* fabric, fi_eq_attr* attr, fid_eq** out, void* context) {
    if (attr != nullptr && attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC) return -FI_ENOSYS;
    auto* eq = new IccsEq{};
    eq->eq.fid.fclass = FI_CLASS_EQ;
    eq->eq.fid.context = context;
    eq->eq.fid.ops = &g_eq_fi_ops;
    eq->eq.ops = &g_eq_ops;
    eq->fabric = reinterpret_cast<IccsFabric*>(fabric);
    *out = &eq->eq;
    return 0;
}

}  // namespace iccs::mpi
