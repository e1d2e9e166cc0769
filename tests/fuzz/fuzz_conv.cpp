// fuzz_conv: the convergence receive side (ConnRx), which takes pieces that crossed the network:
// reordering by conn_seq, assembly of striped messages, the message and byte windows.
//
// Input: a setup byte (bit 0 ordered, bits 1-3 window of 2^(1+n) messages, bits 4-5 byte window
// 4 KiB / 64 KiB / 1 MiB / 16 MiB), then operations until the input runs out (at most 300):
//   op & 7 = 0..3  a true piece: seq = base + (byte % 2*window) - 4 (may be behind the base),
//                  length (u16, 0..65535), piece size 1400 / 100 / 7 / 40000 (byte & 3), piece
//                  index byte % count, cut into segments per a split byte
//            4     a forged piece: every header field raw from the input (length capped at 2^24),
//                  payload of a raw length (<= 3000) of raw bytes, split per a byte
//            5     the application takes up to (op >> 3) + 1 messages
//            6     the connection closes (ConnRx destroyed) and a new one opens
//            7     the same true piece again (a duplicate)
// Checked: ordered connections hand out consecutive conn_seqs; no conn_seq is handed out twice;
// without forgery every message handed out has the true bytes of its conn_seq; held counts stay
// within the windows; credit never goes back; no leak (FuzzPool) after every input.
#include <memory>
#include <set>

#include "conn_rx.hpp"
#include "fuzz_common.hpp"

using namespace fuzz;
using namespace iccs;

namespace {

uint8_t body(uint32_t seq, uint32_t k) { return static_cast<uint8_t>(seq * 7 + k * 13 + (k >> 8) + 1); }

struct Rig {
    FuzzPool pool{8192, 2048};
};

PktBuf* true_piece(FuzzPool& pool, uint32_t seq, uint32_t len, uint32_t pmax, uint32_t idx, Split split) {
    const uint32_t cnt = piece_count(len, pmax), psize = piece_size(len, cnt);
    idx %= cnt;
    const uint32_t off = idx * psize, plen = idx + 1 == cnt ? len - off : psize;
    std::vector<uint8_t> b(kConvHdrLen + plen);
    ConvHdr h{};
    h.type = static_cast<uint8_t>(ConvType::kData);
    h.conn_seq = be32::of(seq);
    h.piece_idx = be16::of(static_cast<uint16_t>(idx));
    h.piece_cnt = be16::of(static_cast<uint16_t>(cnt));
    h.msg_len = be32::of(len);
    store_hdr(b.data(), h);
    for (uint32_t k = 0; k < plen; ++k) b[kConvHdrLen + k] = body(seq, off + k);
    return make_pkt(pool, b, split);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static Rig* rig = new Rig;
    FuzzPool& pool = rig->pool;
    Reader in(data, size);
    const uint8_t setup = in.u8();
    const bool ordered = setup & 1;
    const uint32_t window = 2u << ((setup >> 1) & 7);
    static constexpr uint32_t kBytes[4] = {4096, 65536, 1u << 20, 16u << 20};
    const uint32_t window_bytes = kBytes[(setup >> 4) & 3];
    auto rx = std::make_unique<ConnRx>(ordered, window, window_bytes);
    bool forged = false;
    uint32_t expect_next = 0, last_credit = 0;
    std::set<uint32_t> handed;
    struct Last {
        uint32_t seq = 0, len = 0, pmax = 1400, idx = 0;
        uint8_t split = 0;
        bool valid = false;
    } last;
    static constexpr uint32_t kPieceMax[4] = {1400, 100, 7, 40000};
    for (int op_n = 0; op_n < 300 && !in.empty(); ++op_n) {
        const uint8_t op = in.u8();
        switch (op & 7) {
            case 0: case 1: case 2: case 3: case 7: {
                if ((op & 7) != 7 || !last.valid) {
                    last.seq = rx->credit_msgs() + in.u8() % (2 * window) - 4;
                    last.len = in.u16();
                    last.pmax = kPieceMax[op & 3];
                    last.idx = in.u8();
                    last.split = in.u8();
                    last.valid = true;
                }
                if (PktBuf* p = true_piece(pool, last.seq, last.len, last.pmax, last.idx, split_from(last.split)))
                    rx->on_piece(p, load_hdr<ConvHdr>(p->data()));  // header in the first segment or dropped
                break;
            }
            case 4: {
                forged = true;
                std::vector<uint8_t> b(kConvHdrLen);
                for (uint8_t& x : b) x = in.u8();
                ConvHdr h = load_hdr<ConvHdr>(b.data());
                if (h.msg_len.get() > (1u << 24)) h.msg_len = be32::of(h.msg_len.get() & 0xffffff);
                if (in.u8() & 1) h.conn_seq = be32::of(rx->credit_msgs() + (h.conn_seq.get() & 15));
                store_hdr(b.data(), h);
                const auto payload = in.bytes(in.u16() % 3001);
                b.insert(b.end(), payload.begin(), payload.end());
                if (PktBuf* p = make_pkt(pool, b, split_from(in.u8()))) {
                    if (p->data_len >= kConvHdrLen) rx->on_piece(p, load_hdr<ConvHdr>(p->data()));
                    else rx->on_piece(p, h);
                }
                break;
            }
            case 5: {
                RecvMsg m;
                for (uint32_t k = 0; k <= (op >> 3u); ++k) {
                    if (!rx->pop(m)) break;
                    const uint32_t seq = m.conn_seq();
                    if (ordered) FUZZ_CHECK(seq == expect_next);
                    expect_next = seq + 1;
                    FUZZ_CHECK(handed.insert(seq).second);
                    if (!forged) {
                        std::vector<uint8_t> b(m.size());
                        FUZZ_CHECK(m.copy_to(b.data(), m.size()) == m.size());
                        for (uint32_t i = 0; i < m.size(); ++i) FUZZ_CHECK(b[i] == body(seq, i));
                        if (const uint8_t* c = m.contiguous(); c != nullptr && !b.empty()) FUZZ_CHECK(std::memcmp(c, b.data(), b.size()) == 0);
                    }
                }
                break;
            }
            case 6:
                rx = std::make_unique<ConnRx>(ordered, window, window_bytes);
                expect_next = last_credit = 0;
                handed.clear();
                last.valid = false;
                break;
        }
        FUZZ_CHECK(rx->held_msgs() <= window * 2);
        FUZZ_CHECK(rx->held_bytes() <= window_bytes);
        FUZZ_CHECK(static_cast<int32_t>(rx->credit_msgs() - last_credit) >= 0);
        last_credit = rx->credit_msgs();
    }
    rx.reset();
    pool.end_of_input();
    return 0;
}
