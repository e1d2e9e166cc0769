// pcapng.cpp: see pcapng.hpp.
#include "pcapng.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "owner_only.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace iccs {

namespace {
constexpr size_t kStdioBuf = 1u << 20;
inline uint32_t pad4(uint32_t n) { return (n + 3u) & ~3u; }
constexpr uint8_t kZeros[4] = {};
// EPB: type, length, interface, ts high, ts low, captured, original (28), data, epb_flags option
// (4 + 4), opt_endofopt (4), length (4).
constexpr uint32_t kEpbOverhead = 28 + 8 + 4 + 4;
}  // namespace

bool PcapngWriter::open(const std::string& path, uint64_t max_bytes, std::string& err) {
    close();
    path_ = path;
    max_bytes_ = max_bytes;
    frames_ = bytes_ = missed_ = 0;
    interfaces_ = 0;
    stopped_ = io_error_ = false;
    // Owner-only (0600): a capture holds every byte the run sent.
    std::string why;
    const int fd = open_private_file(path, why);
    if (fd >= 0) f_ = ::fdopen(fd, "wb");
    if (f_ == nullptr) {
        if (fd >= 0) ::close(fd);
        err = "cannot write capture file " + (fd >= 0 ? path + ": " + std::strerror(errno) : why);
        return false;
    }
    buf_ = static_cast<char*>(std::malloc(kStdioBuf));
    if (buf_ != nullptr) std::setvbuf(f_, buf_, _IOFBF, kStdioBuf);
    // SHB: type, length, byte-order magic, version 1.0, section length unknown (-1), shb_userappl.
    static constexpr char kApp[] = "iccs";
    const uint32_t opt_len = pad4(sizeof kApp - 1);
    const uint32_t len = 28 + 4 + opt_len + 4;
    const uint32_t head[3] = {kPcapngShb, len, kPcapngByteOrderMagic};
    const uint16_t ver[2] = {1, 0};
    const int64_t section_len = -1;
    const uint16_t opt[2] = {kPcapngOptShbUserappl, static_cast<uint16_t>(sizeof kApp - 1)};
    put(head, sizeof head);
    put(ver, sizeof ver);
    put(&section_len, sizeof section_len);
    put(opt, sizeof opt);
    put(kApp, sizeof kApp - 1);
    put(kZeros, opt_len - (sizeof kApp - 1));
    put(kZeros, 4);  // opt_endofopt
    put(&len, 4);
    if (io_error_) {
        err = "cannot write capture file " + path + ": " + std::strerror(errno);
        close();
        return false;
    }
    return true;
}

uint32_t PcapngWriter::add_interface(const std::string& name) {
    // IDB: type, length, linktype, reserved, snaplen (0: no limit) (16), if_name (4 + padded name),
    // if_tsresol = 9 (10^-9 s) (8), opt_endofopt (4), length (4).
    const uint32_t name_len = static_cast<uint32_t>(std::min<size_t>(name.size(), 0xffff));
    const uint32_t len = 16 + 4 + pad4(name_len) + 8 + 4 + 4;
    const uint32_t head[2] = {kPcapngIdb, len};
    const uint16_t link[2] = {kPcapngLinkEthernet, 0};
    const uint32_t snaplen = 0;
    const uint16_t opt_name[2] = {kPcapngOptIfName, static_cast<uint16_t>(name_len)};
    const uint16_t opt_res[2] = {kPcapngOptIfTsresol, 1};
    const uint8_t res[4] = {9, 0, 0, 0};
    put(head, sizeof head);
    put(link, sizeof link);
    put(&snaplen, 4);
    put(opt_name, sizeof opt_name);
    put(name.data(), name_len);
    put(kZeros, pad4(name_len) - name_len);
    put(opt_res, sizeof opt_res);
    put(res, sizeof res);
    put(kZeros, 4);  // opt_endofopt
    put(&len, 4);
    return interfaces_++;
}

uint32_t PcapngWriter::write_burst(uint32_t iface, PktBuf* const* frames, uint32_t n, uint64_t ts_ns, Dir dir) {
    if (f_ == nullptr || stopped_) {
        missed_ += n;
        return 0;
    }
    const uint32_t ts_hi = static_cast<uint32_t>(ts_ns >> 32), ts_lo = static_cast<uint32_t>(ts_ns);
    const uint16_t opt_flags[2] = {kPcapngOptEpbFlags, 4};
    const uint32_t flags = static_cast<uint32_t>(dir);
    for (uint32_t i = 0; i < n; ++i) {
        const PktBuf* fr = frames[i];
        const uint32_t caplen = fr->pkt_len;
        const uint32_t len = kEpbOverhead + pad4(caplen);
        if (bytes_ + len > max_bytes_) {
            missed_ += n - i;
            stop("reached its limit of " + std::to_string(max_bytes_) +
                 " bytes ([machine] pcap_max_bytes); capture of this proxy stopped after " + std::to_string(frames_) +
                 " frames");
            return i;
        }
        const uint32_t head[7] = {kPcapngEpb, len, iface, ts_hi, ts_lo, caplen, caplen};
        put(head, sizeof head);
        for (const PktBuf* s = fr; s != nullptr; s = s->next) put(s->data(), s->data_len);
        put(kZeros, pad4(caplen) - caplen);
        put(opt_flags, sizeof opt_flags);
        put(&flags, 4);
        put(kZeros, 4);  // opt_endofopt
        put(&len, 4);
        if (io_error_) {
            missed_ += n - i;
            stop(std::string("could not be written (") + std::strerror(errno) + "); capture of this proxy stopped");
            return i;
        }
        ++frames_;
    }
    return n;
}

void PcapngWriter::put(const void* p, size_t n) {
    if (n == 0) return;
    if (std::fwrite(p, 1, n, f_) != n) io_error_ = true;
    bytes_ += n;
}

void PcapngWriter::stop(const std::string& why) {
    stopped_ = true;
    std::fprintf(stderr, "iccs: capture %s %s\n", path_.c_str(), why.c_str());
    flush();
}

void PcapngWriter::flush() {
    if (f_ != nullptr && std::fflush(f_) != 0) io_error_ = true;
}

void PcapngWriter::close() {
    if (f_ == nullptr) return;
    std::fclose(f_);
    f_ = nullptr;
    std::free(buf_);
    buf_ = nullptr;
}

int64_t pcapng_cut_to_whole_blocks(const std::string& path, std::string& err) {
    const int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    struct stat st{};
    if (fd < 0 || fstat(fd, &st) != 0) {
        err = path + ": " + std::strerror(errno);
        if (fd >= 0) ::close(fd);
        return -1;
    }
    const auto size = static_cast<uint64_t>(st.st_size);
    void* map = size >= 12 ? mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (map == MAP_FAILED) {
        err = path + (size < 12 ? ": shorter than a block" : std::string(": mmap: ") + std::strerror(errno));
        ::close(fd);
        return -1;
    }
    const auto* b = static_cast<const uint8_t*>(map);
    auto u32 = [&](uint64_t at, bool swap) {
        uint32_t v;
        std::memcpy(&v, b + at, 4);
        return swap ? __builtin_bswap32(v) : v;
    };
    // The SHB's byte-order magic says how the lengths are written (ours: the host's order).
    bool swap = false;
    const bool shb = u32(0, false) == kPcapngShb &&
                     (u32(8, false) == kPcapngByteOrderMagic || (swap = u32(8, true) == kPcapngByteOrderMagic));
    uint64_t end = 0;  // just after the last whole block
    while (shb && end + 12 <= size) {
        const uint32_t len = u32(end + 4, swap);
        if (len < 12 || len % 4 != 0 || end + len > size || u32(end + len - 4, swap) != len) break;
        end += len;
    }
    munmap(map, size);
    if (!shb) {
        err = path + ": not a pcapng file (no Section Header Block)";
        ::close(fd);
        return -1;
    }
    int64_t cut = static_cast<int64_t>(size - end);
    if (cut > 0 && ftruncate(fd, static_cast<off_t>(end)) != 0) {
        err = path + ": ftruncate: " + std::strerror(errno);
        cut = -1;
    }
    ::close(fd);
    return cut;
}

}  // namespace iccs
