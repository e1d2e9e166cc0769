// msg_trace.cpp: writing a proxy's message trace (msg_trace.hpp) at the end of a run.
#include "msg_trace.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace iccs {

bool MsgTrace_st::write(const std::string& path, uint16_t cluster, uint16_t proxy, std::string& err) const {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) {
        err = "trace file " + path + ": " + std::strerror(errno);
        return false;
    }
    // The last line says what the buffer could not keep (the reader checks it).
    for (size_t i = 0; i < n_; ++i) {
        const MsgTraceRecord& r = buf_[i];
        std::fprintf(f, "%s,%u,%u,%llu,%llu,%u,%u,%u,%u,%u,%u,%u,%u\n", r.rx ? "rx" : "tx", unsigned(cluster),
                     unsigned(proxy), (unsigned long long)r.t_ns, (unsigned long long)r.enq_ns, unsigned(r.src_cluster),
                     unsigned(r.dst_cluster), unsigned(r.thread), unsigned(r.src_port), unsigned(r.dst_port),
                     unsigned(r.type), unsigned(r.bytes), unsigned(r.msg_id));
    }
    std::fprintf(f, "# dropped,%u,%u,%llu\n", unsigned(cluster), unsigned(proxy), (unsigned long long)dropped_);
    const bool ok = std::fclose(f) == 0;
    if (!ok) err = "trace file " + path + ": " + std::strerror(errno);
    return ok;
}

}  // namespace iccs
