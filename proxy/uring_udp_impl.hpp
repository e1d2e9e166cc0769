// uring_udp_impl.hpp: what the files of the io_uring UDP port (uring_*.cpp) share and no other
// file uses: the tags of its requests, the limits of a send, and the helpers of its set-up.
#pragma once

#include <liburing.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "uring_udp.hpp"

namespace iccs::uring_detail {

inline constexpr uint64_t kTagShift = 32;
inline constexpr uint64_t kTagTx = 1ull << kTagShift;       // | slot index
inline constexpr uint64_t kTagRxMulti = 2ull << kTagShift;
inline constexpr uint64_t kTagRxBatch = 3ull << kTagShift;  // | slot index
inline constexpr uint64_t kTagCancel = 4ull << kTagShift;
inline constexpr uint64_t kTagWake = 5ull << kTagShift;  // the read of the wake eventfd
inline constexpr uint16_t kBufGroup = 1;
inline constexpr uint32_t kMaxIov = 64;  // segments of one datagram: 64 KiB in 2 KiB segments is 33
// GSO: datagrams per send (the kernel's UDP_MAX_SEGMENTS is at least 64), the largest datagram
// (one Ethernet frame of 1500 bytes: a non-loopback path refuses larger segments), bytes per send.
inline constexpr uint32_t kMaxGsoSegs = 64;
inline constexpr uint32_t kMaxGsoSize = 1472;
inline constexpr uint32_t kMaxGsoBytes = 65000;
// Zero-copy send (6.2+; liburing 2.3's header predates them): ask the notification to say
// whether the kernel copied the data after all, and that bit of its result.
inline constexpr uint16_t kZcReportUsage = 1u << 3;       // IORING_SEND_ZC_REPORT_USAGE
inline constexpr uint32_t kNotifZcCopied = 1u << 31;      // IORING_NOTIF_USAGE_ZC_COPIED
// A zero-copy send pins its pages as the fragments of one skb: at most MAX_SKB_FRAGS (17 by
// default), else EMSGSIZE. A GSO run ends before its pages pass this; a longer datagram goes copied.
inline constexpr uint32_t kZcMaxPages = 16;

// "fabric "udp" needs io_uring, which this kernel refused (CALL: ERROR); use ..."
std::string refused(const char* call, int e);
// n rounded up to whole pages; anonymous memory of that many bytes (null: refused).
size_t page_round(size_t n);
void* map_anon(size_t bytes);
// NAME=0 in the environment: a default-on feature off (measurements, tests).
bool env_off(const char* name);
bool env_set(const char* name);
// A ring with deferred task running if asked for and the kernel has it (6.1+: created disabled,
// enabled by the thread that will own it), else with cooperative task running if the kernel has
// it (5.19+), else a plain one; or an SQPOLL ring (its kernel thread idles 10 ms before it sleeps).
int ring_init(unsigned entries, io_uring& ring, bool want_coop, bool sqpoll, bool& coop, bool want_defer = false,
              bool* defer = nullptr);

}  // namespace iccs::uring_detail
