// The pcapng writer of --pcap (proxy/pcapng.hpp): the exact block structure a reader relies on
// (SHB byte-order magic and lengths, IDB link type and if_tsresol = 9, EPB interface, timestamp
// halves, lengths, data gathered from a segment chain, padding, epb_flags direction), and the size
// limit: the frame that would cross it is not written, later ones are counted, the file stays whole.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "pcapng.hpp"

using namespace iccs;

namespace {

struct TempFile {
    std::string path;
    TempFile() {
        char tmpl[] = "/tmp/iccs-pcapng-XXXXXX";
        const int fd = mkstemp(tmpl);
        REQUIRE(fd >= 0);
        close(fd);
        path = tmpl;
    }
    ~TempFile() { std::remove(path.c_str()); }
    std::vector<uint8_t> bytes() const {
        std::ifstream in(path, std::ios::binary);
        return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    }
};

uint32_t u32(const std::vector<uint8_t>& b, size_t off) {
    uint32_t v;
    std::memcpy(&v, b.data() + off, 4);
    return v;
}
uint16_t u16(const std::vector<uint8_t>& b, size_t off) {
    uint16_t v;
    std::memcpy(&v, b.data() + off, 2);
    return v;
}

// A frame of len bytes (i*7 + k pattern), chained over segments of seg_bytes.
PktBuf* frame(HeapPktPool& pool, uint32_t i, uint32_t len) {
    PktBuf* p = pkt_alloc(pool);
    REQUIRE(p != nullptr);
    std::vector<uint8_t> b(len);
    for (uint32_t k = 0; k < len; ++k) b[k] = static_cast<uint8_t>(i * 7 + k);
    REQUIRE(pkt_write(p, pool, b.data(), len));
    return p;
}

}  // namespace

TEST_CASE("pcapng: SHB, IDB with ns resolution, EPBs with gathered data and direction", "[pcapng]") {
    HeapPktPool pool(64, 256 + kPktHeadroom);
    TempFile tmp;
    PcapngWriter w;
    std::string err;
    REQUIRE(w.open(tmp.path, kPcapDefaultMaxBytes, err));
    CHECK(w.add_interface("net_memif_0_1_0") == 0);
    CHECK(w.add_interface("eth1") == 1);
    PktBuf* f[2] = {frame(pool, 1, 61), frame(pool, 2, 300)};  // 300 bytes: a chain of two segments
    CHECK(f[1]->nb_segs == 2);
    const uint64_t ts = 1'795'449'049'909'207'452ull;  // ns since the epoch
    CHECK(w.write_burst(1, f, 1, ts, PcapngWriter::Dir::kIn) == 1);
    CHECK(w.write_burst(0, f + 1, 1, ts + 5, PcapngWriter::Dir::kOut) == 1);
    CHECK(w.frames() == 2);
    w.close();
    const std::vector<uint8_t> b = tmp.bytes();
    CHECK(b.size() == w.bytes());

    // SHB: type, length (also at its end), byte-order magic, version 1.0, section length -1.
    size_t off = 0;
    REQUIRE(b.size() > 28);
    CHECK(u32(b, 0) == kPcapngShb);
    const uint32_t shb_len = u32(b, 4);
    CHECK(shb_len % 4 == 0);
    CHECK(u32(b, 8) == kPcapngByteOrderMagic);
    CHECK(u16(b, 12) == 1);
    CHECK(u16(b, 14) == 0);
    CHECK(u32(b, 16) == 0xffffffffu);
    CHECK(u32(b, shb_len - 4) == shb_len);
    off += shb_len;

    // Two IDBs: Ethernet, snaplen 0, if_name, if_tsresol = 9.
    const char* names[2] = {"net_memif_0_1_0", "eth1"};
    for (const char* name : names) {
        INFO(name);
        CHECK(u32(b, off) == kPcapngIdb);
        const uint32_t len = u32(b, off + 4);
        CHECK(len % 4 == 0);
        CHECK(u32(b, off + len - 4) == len);
        CHECK(u16(b, off + 8) == kPcapngLinkEthernet);
        CHECK(u32(b, off + 12) == 0);
        size_t o = off + 16;
        CHECK(u16(b, o) == kPcapngOptIfName);
        const uint16_t nlen = u16(b, o + 2);
        CHECK(std::string(reinterpret_cast<const char*>(b.data() + o + 4), nlen) == name);
        o += 4 + ((nlen + 3u) & ~3u);
        CHECK(u16(b, o) == kPcapngOptIfTsresol);
        CHECK(u16(b, o + 2) == 1);
        CHECK(b[o + 4] == 9);
        o += 8;
        CHECK(u32(b, o) == 0);  // opt_endofopt
        CHECK(o + 8 == off + len);
        off += len;
    }

    // Two EPBs.
    const uint32_t want_if[2] = {1, 0}, want_len[2] = {61, 300}, want_flags[2] = {kPcapngEpbInbound, kPcapngEpbOutbound};
    const uint64_t want_ts[2] = {ts, ts + 5};
    for (int i = 0; i < 2; ++i) {
        INFO("EPB " << i);
        CHECK(u32(b, off) == kPcapngEpb);
        const uint32_t len = u32(b, off + 4);
        const uint32_t padded = (want_len[i] + 3u) & ~3u;
        CHECK(len == 28 + padded + 8 + 4 + 4);
        CHECK(u32(b, off + len - 4) == len);
        CHECK(u32(b, off + 8) == want_if[i]);
        CHECK((uint64_t{u32(b, off + 12)} << 32 | u32(b, off + 16)) == want_ts[i]);
        CHECK(u32(b, off + 20) == want_len[i]);  // captured
        CHECK(u32(b, off + 24) == want_len[i]);  // original
        bool same = true;
        for (uint32_t k = 0; k < want_len[i]; ++k) same &= b[off + 28 + k] == static_cast<uint8_t>((i + 1) * 7 + k);
        CHECK(same);
        for (uint32_t k = want_len[i]; k < padded; ++k) CHECK(b[off + 28 + k] == 0);
        const size_t o = off + 28 + padded;
        CHECK(u16(b, o) == kPcapngOptEpbFlags);
        CHECK(u16(b, o + 2) == 4);
        CHECK(u32(b, o + 4) == want_flags[i]);
        CHECK(u32(b, o + 8) == 0);  // opt_endofopt
        off += len;
    }
    CHECK(off == b.size());
    pkt_free(f[0]);
    pkt_free(f[1]);
    CHECK(pool.in_use() == 0);
}

TEST_CASE("pcapng: the size limit stops the capture between whole blocks", "[pcapng]") {
    HeapPktPool pool(64, 2048 + kPktHeadroom);
    TempFile tmp;
    PcapngWriter w;
    std::string err;
    REQUIRE(w.open(tmp.path, 4096, err));
    w.add_interface("p0");
    const uint64_t header = w.bytes();
    PktBuf* f[4];
    for (uint32_t i = 0; i < 4; ++i) f[i] = frame(pool, i, 1000);  // EPB of 1044 bytes each
    // 3 fit (header + 3 * 1044 <= 4096), the 4th would cross the limit.
    REQUIRE(header + 3 * 1044 <= 4096);
    REQUIRE(header + 4 * 1044 > 4096);
    CHECK(w.write_burst(0, f, 4, 1, PcapngWriter::Dir::kOut) == 3);
    CHECK(w.stopped());
    CHECK(w.frames() == 3);
    CHECK(w.missed() == 1);
    CHECK(w.write_burst(0, f, 2, 2, PcapngWriter::Dir::kIn) == 0);
    CHECK(w.missed() == 3);
    w.close();
    const std::vector<uint8_t> b = tmp.bytes();
    CHECK(b.size() == header + 3 * 1044);
    CHECK(u32(b, b.size() - 4) == 1044);  // ends with a whole EPB
    for (PktBuf* p : f) pkt_free(p);
    CHECK(pool.in_use() == 0);
}

TEST_CASE("pcapng: a file that cannot be created is an error naming it", "[pcapng]") {
    PcapngWriter w;
    std::string err;
    CHECK_FALSE(w.open("/proc/iccs-no/such.pcapng", kPcapDefaultMaxBytes, err));
    CHECK_THAT(err, Catch::Contains("/proc/iccs-no/such.pcapng"));
    CHECK_FALSE(w.is_open());
}

// Issue 34: a cluster killed while its capture's stdio buffer held half a block leaves a file that
// ends inside a block; the launcher cuts it after the last whole one, so tshark reads it to the end.
TEST_CASE("pcapng: a file cut inside a block is cut back to its last whole block", "[pcapng]") {
    HeapPktPool pool(64, 2048 + kPktHeadroom);
    TempFile tmp;
    PcapngWriter w;
    std::string err;
    REQUIRE(w.open(tmp.path, kPcapDefaultMaxBytes, err));
    w.add_interface("p0");
    PktBuf* f[3];
    for (uint32_t i = 0; i < 3; ++i) f[i] = frame(pool, i, 1000);  // EPB of 1044 bytes each
    REQUIRE(w.write_burst(0, f, 3, 1, PcapngWriter::Dir::kIn) == 3);
    w.close();
    const std::vector<uint8_t> whole = tmp.bytes();
    // Whole: nothing to cut, the file unchanged.
    CHECK(pcapng_cut_to_whole_blocks(tmp.path, err) == 0);
    CHECK(tmp.bytes() == whole);
    // Ends 700 bytes into the third EPB (as a killed writer's last flush may leave it).
    REQUIRE(truncate(tmp.path.c_str(), static_cast<off_t>(whole.size() - 1044 + 700)) == 0);
    CHECK(pcapng_cut_to_whole_blocks(tmp.path, err) == 700);
    std::vector<uint8_t> b = tmp.bytes();
    CHECK(b.size() == whole.size() - 1044);
    CHECK(std::equal(b.begin(), b.end(), whole.begin()));
    CHECK(u32(b, b.size() - 4) == 1044);
    // Ends 6 bytes into a block header (its length not even whole).
    REQUIRE(truncate(tmp.path.c_str(), static_cast<off_t>(b.size() - 1044 + 6)) == 0);
    CHECK(pcapng_cut_to_whole_blocks(tmp.path, err) == 6);
    CHECK(tmp.bytes().size() == whole.size() - 2 * 1044);
    // Not a capture: an error naming the file, the file left alone.
    {
        std::FILE* out = std::fopen(tmp.path.c_str(), "wb");
        REQUIRE(out != nullptr);
        std::fputs("not a capture at all, just text", out);
        std::fclose(out);
    }
    CHECK(pcapng_cut_to_whole_blocks(tmp.path, err) == -1);
    CHECK_THAT(err, Catch::Contains(tmp.path) && Catch::Contains("not a pcapng"));
    CHECK(tmp.bytes().size() == 31);
    for (PktBuf* p : f) pkt_free(p);
    CHECK(pool.in_use() == 0);
}
