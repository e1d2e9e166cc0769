// msg_trace.hpp: the message trace of one proxy (`iccs run APP --trace FILE`, perf/model/).
//
// One record per message the proxy takes from a compute thread (tx, where msgs_tx counts it) and
// per message it delivers to one (rx, where msgs_rx counts it), in a buffer the proxy's thread
// owns (no lock, no allocation: reserved at start), written out once at the end of the run. A
// full buffer counts the records it could not keep (`dropped`) instead of growing. Off (no
// trace): the proxy holds a null pointer, and the hot path pays one predictable branch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace iccs {

struct MsgTraceRecord {
    uint64_t t_ns;       // tx: the proxy took it from the ring; rx: delivered to the thread's ring
    uint64_t enq_ns;     // the sender's enqueue (convergence header), 0 if unstamped
    uint32_t bytes;      // convergence header + payload
    uint32_t msg_id;     // the sending module's message number
    uint16_t src_cluster, dst_cluster, src_port, dst_port;
    uint16_t thread;     // tx: the sending compute thread (its ring); rx: the receiving one
    uint8_t rx;          // 0 tx, 1 rx
    uint8_t type;        // ConvType
};

class MsgTrace_st {  // _st: only the proxy's thread records (the end of the run reads it)
   public:
    explicit MsgTrace_st(size_t capacity) { buf_.resize(capacity); }
    void record(const MsgTraceRecord& r) {
        if (n_ < buf_.size()) buf_[n_++] = r;
        else ++dropped_;
    }
    size_t size() const { return n_; }
    uint64_t dropped() const { return dropped_; }
    // Text lines (kMsgTraceHeader's columns) to path; false with err.
    bool write(const std::string& path, uint16_t cluster, uint16_t proxy, std::string& err) const;

   private:
    std::vector<MsgTraceRecord> buf_;
    size_t n_ = 0;
    uint64_t dropped_ = 0;
};

inline constexpr const char* kMsgTraceHeader =
    "dir,cluster,proxy,t_ns,enq_ns,src_cluster,dst_cluster,thread,src_port,dst_port,type,bytes,msg_id";

}  // namespace iccs
