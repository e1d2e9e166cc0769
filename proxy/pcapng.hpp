// pcapng.hpp: a small pcapng writer (the format tshark and Wireshark open directly) over PktBuf
// chains, for `--pcap DIR` / `[machine] pcap_dir`: each proxy records the frames its ports deliver
// and the frames their TX rings take.
//
// One idea: a frame is written as one Enhanced Packet Block gathered from its segments straight
// into a buffered stdio stream (no copy into an mbuf, which DPDK's librte_pcapng would need: our TX
// frames are PktBuf chains lent to the driver, not mbufs). The file is a Section Header Block, one
// Interface Description Block per port (Ethernet, if_tsresol = 9: nanosecond timestamps), then
// EPBs, each with epb_flags saying inbound or outbound (pcapng spec, draft-ietf-opsawg-pcapng
// §4.3, §4.2, §4.3.1). Blocks are in the host's byte order; the SHB's byte-order magic says which.
//
// Bounded: a file never grows past max_bytes. The first frame that would cross it stops the capture
// for good (the file stays complete and readable), prints one line to stderr naming the file and
// the limit, and it and every later frame are counted as missed.
//
// Threading: one thread at a time (the proxy's, or under inline polling whichever compute thread
// holds the proxy's lock), as the proxy that owns it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "pktbuf.hpp"

namespace iccs {

inline constexpr uint64_t kPcapDefaultMaxBytes = 64ull << 20;  // [bytes] per file

// pcapng block types and options used here.
inline constexpr uint32_t kPcapngShb = 0x0A0D0D0A;
inline constexpr uint32_t kPcapngIdb = 0x00000001;
inline constexpr uint32_t kPcapngEpb = 0x00000006;
inline constexpr uint32_t kPcapngByteOrderMagic = 0x1A2B3C4D;
inline constexpr uint16_t kPcapngLinkEthernet = 1;
inline constexpr uint16_t kPcapngOptIfName = 2, kPcapngOptIfTsresol = 9, kPcapngOptEpbFlags = 2,
                          kPcapngOptShbUserappl = 4;
inline constexpr uint32_t kPcapngEpbInbound = 1, kPcapngEpbOutbound = 2;  // epb_flags bits 0-1

class PcapngWriter {
   public:
    enum class Dir : uint32_t { kIn = kPcapngEpbInbound, kOut = kPcapngEpbOutbound };

    PcapngWriter() = default;
    ~PcapngWriter() { close(); }
    PcapngWriter(const PcapngWriter&) = delete;
    PcapngWriter& operator=(const PcapngWriter&) = delete;

    // Creates (truncates) path and writes the Section Header Block. false with err naming the path
    // and the reason. max_bytes bounds the whole file (at least the SHB and IDBs must fit).
    bool open(const std::string& path, uint64_t max_bytes, std::string& err);
    // An Interface Description Block (Ethernet, nanosecond timestamps, if_name = name); returns the
    // interface id EPBs name. Call before the first frame of that interface.
    uint32_t add_interface(const std::string& name);
    // One EPB per frame of frames[0..n), all stamped ts_ns (ns since the epoch); returns the frames
    // written. Segments are gathered; nothing is taken from or given to the frames.
    uint32_t write_burst(uint32_t iface, PktBuf* const* frames, uint32_t n, uint64_t ts_ns, Dir dir);
    void flush();
    void close();

    bool is_open() const { return f_ != nullptr; }
    bool stopped() const { return stopped_; }  // the limit (or a write error) ended the capture
    const std::string& path() const { return path_; }
    uint64_t max_bytes() const { return max_bytes_; }
    uint64_t frames() const { return frames_; }  // EPBs written
    uint64_t bytes() const { return bytes_; }    // file size so far
    uint64_t missed() const { return missed_; }  // frames not written because the capture stopped

   private:
    void put(const void* p, size_t n);
    void stop(const std::string& why);

    FILE* f_ = nullptr;
    char* buf_ = nullptr;  // stdio buffer (large: one write(2) per MiB)
    std::string path_;
    uint64_t max_bytes_ = kPcapDefaultMaxBytes;
    uint64_t frames_ = 0, bytes_ = 0, missed_ = 0;
    uint32_t interfaces_ = 0;
    bool stopped_ = false, io_error_ = false;
};

// A capture whose writer was killed (SIGKILL: no close) may end inside a block: stdio writes its
// buffer when it is full, wherever a block ends. This cuts the file after its last whole block,
// so tshark reads it to the end without "cut short in the middle of a packet" (the launcher runs
// it on the files of every cluster that died). Returns the bytes cut (0: it ended whole), or -1
// with err when the file cannot be read or does not start with a Section Header Block.
int64_t pcapng_cut_to_whole_blocks(const std::string& path, std::string& err);

}  // namespace iccs
