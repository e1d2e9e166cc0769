// Convergence receive side (reordering by conn_seq, assembly of striped messages, the window) and
// the dispatch policies, without proxies: pieces are built here as a sender would cut them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "conn_rx.hpp"
#include "dispatch.hpp"

using namespace iccs;

namespace {

uint8_t byte_of(uint32_t seq, uint32_t k) { return static_cast<uint8_t>(seq * 7 + k * 13 + 1); }

// The pieces of message `seq` of len bytes, cut at piece_max like the sender does.
std::vector<PktBuf*> cut(HeapPktPool& pool, uint32_t seq, uint32_t len, uint32_t piece_max) {
    const uint32_t cnt = piece_count(len, piece_max), psize = piece_size(len, cnt);
    std::vector<PktBuf*> out;
    for (uint32_t i = 0; i < cnt; ++i) {
        const uint32_t off = i * psize, plen = i + 1 == cnt ? len - off : psize;
        ConvHdr h{};
        h.type = static_cast<uint8_t>(ConvType::kData);
        h.conn_seq = be32::of(seq);
        h.msg_id = be32::of(seq + 1000);
        h.piece_idx = be16::of(static_cast<uint16_t>(i));
        h.piece_cnt = be16::of(static_cast<uint16_t>(cnt));
        h.msg_len = be32::of(len);
        PktBuf* p = pkt_alloc(pool, 0);
        REQUIRE(p != nullptr);
        store_hdr(pkt_append(p, kConvHdrLen), h);
        std::vector<uint8_t> payload(plen);
        for (uint32_t k = 0; k < plen; ++k) payload[k] = byte_of(seq, off + k);
        REQUIRE(pkt_write(p, pool, payload.data(), plen));
        out.push_back(p);
    }
    return out;
}

// Piece idx of that message alone (the others freed).
PktBuf* piece(HeapPktPool& pool, uint32_t seq, uint32_t len, uint32_t idx) {
    auto v = cut(pool, seq, len, 1400);
    for (uint32_t i = 0; i < v.size(); ++i)
        if (i != idx) pkt_free(v[i]);
    return v[idx];
}

PieceResult feed(ConnRx& rx, PktBuf* p) { return rx.on_piece(p, load_hdr<ConvHdr>(p->data())); }

bool intact(const RecvMsg& m, uint32_t seq, uint32_t len) {
    if (m.size() != len || m.conn_seq() != seq) return false;
    std::vector<uint8_t> b(len);
    if (m.copy_to(b.data(), len) != len) return false;
    for (uint32_t k = 0; k < len; ++k)
        if (b[k] != byte_of(seq, k)) return false;
    return true;
}

}  // namespace

TEST_CASE("pieces are balanced and cover the message exactly", "[convergence]") {
    for (uint32_t len : {0u, 1u, 1400u, 1401u, 2799u, 2800u, 2801u, 1u << 20, 4u << 20}) {
        const uint32_t cnt = piece_count(len, 1400), psize = piece_size(len, cnt);
        REQUIRE(psize <= 1400);
        REQUIRE(uint64_t{psize} * (cnt - 1) < std::max(len, 1u));  // the last piece is never empty
        REQUIRE(uint64_t{psize} * cnt >= len);
    }
    REQUIRE(piece_count(1u << 20, 1400) == 749);
}

TEST_CASE("ordered: pieces of striped messages in any order come out whole and in conn_seq order",
          "[convergence]") {
    HeapPktPool pool(8192, 512);
    {
        ConnRx rx(true, 64);
        std::mt19937 g(5);
        std::vector<PktBuf*> all;
        std::vector<uint32_t> lens;
        for (uint32_t seq = 0; seq < 40; ++seq) {
            const uint32_t len = seq % 5 == 0 ? 0 : 1 + g() % 9000;
            lens.push_back(len);
            for (PktBuf* p : cut(pool, seq, len, 1400)) all.push_back(p);
        }
        std::shuffle(all.begin(), all.end(), g);  // as if over several sub-connections
        uint32_t next = 0;
        for (PktBuf* p : all) {
            REQUIRE(feed(rx, p) == PieceResult::kTaken);
            RecvMsg m;
            while (rx.pop(m)) {
                REQUIRE(intact(m, next, lens[next]));
                ++next;
            }
        }
        REQUIRE(next == 40);
        REQUIRE(rx.credit_msgs() == 40);
        REQUIRE(rx.held_msgs() == 0);
        REQUIRE(rx.counters().reordered > 0);
    }
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("ordered: a gap holds everything behind it until it fills", "[convergence]") {
    HeapPktPool pool(64, 512);
    {
        ConnRx rx(true, 16);
        for (uint32_t seq : {1u, 2u, 3u}) REQUIRE(feed(rx, cut(pool, seq, 10, 1400)[0]) == PieceResult::kTaken);
        RecvMsg m;
        REQUIRE_FALSE(rx.readable());
        REQUIRE_FALSE(rx.pop(m));
        REQUIRE(rx.held_msgs() == 3);
        REQUIRE(feed(rx, cut(pool, 0, 10, 1400)[0]) == PieceResult::kTaken);
        for (uint32_t seq = 0; seq < 4; ++seq) {
            REQUIRE(rx.pop(m));
            REQUIRE(intact(m, seq, 10));
        }
        m.reset();
    }
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("unordered: each message leaves as soon as it is complete, exactly once", "[convergence]") {
    HeapPktPool pool(256, 512);
    {
        ConnRx rx(false, 16);
        REQUIRE(feed(rx, cut(pool, 2, 5, 1400)[0]) == PieceResult::kTaken);
        RecvMsg m;
        REQUIRE(rx.pop(m));
        REQUIRE(intact(m, 2, 5));
        REQUIRE(rx.credit_msgs() == 0);  // 0 and 1 not taken yet: the window does not move
        // a duplicate of a taken message (not yet passed by the base) is dropped
        REQUIRE(feed(rx, cut(pool, 2, 5, 1400)[0]) == PieceResult::kDuplicate);
        auto p1 = cut(pool, 1, 3000, 1400);  // striped: 3 pieces
        REQUIRE(p1.size() == 3);
        REQUIRE(feed(rx, p1[2]) == PieceResult::kTaken);
        REQUIRE_FALSE(rx.readable());
        REQUIRE(feed(rx, p1[0]) == PieceResult::kTaken);
        REQUIRE(feed(rx, piece(pool, 1, 3000, 0)) == PieceResult::kDuplicate);  // piece 0 again
        REQUIRE(feed(rx, p1[1]) == PieceResult::kTaken);
        REQUIRE(rx.pop(m));
        REQUIRE(intact(m, 1, 3000));
        REQUIRE(feed(rx, cut(pool, 0, 0, 1400)[0]) == PieceResult::kTaken);
        REQUIRE(rx.pop(m));
        REQUIRE(intact(m, 0, 0));
        REQUIRE(rx.credit_msgs() == 3);
        // behind the base now: a duplicate
        REQUIRE(feed(rx, piece(pool, 1, 3000, 1)) == PieceResult::kDuplicate);
        m.reset();
        REQUIRE(rx.counters().dup_pieces == 3);
    }
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("pieces outside the window or inconsistent with their message are dropped and counted",
          "[convergence]") {
    HeapPktPool pool(256, 512);
    {
        ConnRx rx(true, 8);
        REQUIRE(feed(rx, cut(pool, 8, 10, 1400)[0]) == PieceResult::kBad);  // a sender that ignored credit
        auto p = cut(pool, 0, 3000, 1400);
        REQUIRE(feed(rx, p[0]) == PieceResult::kTaken);
        // piece 1 of the same message claiming another length
        ConvHdr h = load_hdr<ConvHdr>(p[1]->data());
        h.msg_len = be32::of(3001);
        store_hdr(p[1]->data(), h);
        REQUIRE(feed(rx, p[1]) == PieceResult::kBad);
        // a piece whose size does not match its index
        PktBuf* q = p[2];
        pkt_trim_to(q, q->pkt_len - 1);
        REQUIRE(feed(rx, q) == PieceResult::kBad);
        // piece index beyond the count
        auto r = cut(pool, 1, 10, 1400);
        h = load_hdr<ConvHdr>(r[0]->data());
        h.piece_idx = be16::of(1);
        store_hdr(r[0]->data(), h);
        REQUIRE(feed(rx, r[0]) == PieceResult::kBad);
        REQUIRE(rx.counters().bad_pieces == 4);
        REQUIRE_FALSE(rx.readable());
    }
    REQUIRE(pool.in_use() == 0);  // a partial message is freed with its connection
}

TEST_CASE("dispatch: fixed maps a thread to one proxy, round-robin rotates, least-loaded avoids load",
          "[convergence]") {
    auto none = [](uint16_t) { return 0u; };
    DispatchState s{3, 2, 0};
    for (int i = 0; i < 10; ++i) REQUIRE(dispatch_pick(s, Dispatch::kFixed, none) == 1);
    DispatchState r{0, 4, 0};
    std::vector<uint16_t> seen;
    for (int i = 0; i < 8; ++i) seen.push_back(dispatch_pick(r, Dispatch::kRoundRobin, none));
    REQUIRE(seen == std::vector<uint16_t>{1, 2, 3, 0, 1, 2, 3, 0});
    // least-loaded: proxy 2 holds the least
    DispatchState l{0, 4, 0};
    const uint32_t load[4] = {5, 9, 1, 7};
    for (int i = 0; i < 8; ++i)
        REQUIRE(dispatch_pick(l, Dispatch::kLeastLoaded, [&](uint16_t p) { return load[p]; }) == 2);
    // equal loads: spread like round-robin
    std::vector<int> count(4, 0);
    for (int i = 0; i < 400; ++i) ++count[dispatch_pick(l, Dispatch::kLeastLoaded, none)];
    REQUIRE(count == std::vector<int>{100, 100, 100, 100});
}

TEST_CASE("the packet budget bounds receive buffers kept for zero copy; beyond it messages are copied",
          "[convergence]") {
    HeapPktPool pool(64, 512);
    uint32_t budget = 2;
    {
        ConnRx rx(true, 16, 1u << 20, &budget);
        for (uint32_t seq = 0; seq < 3; ++seq) REQUIRE(feed(rx, cut(pool, seq, 100, 1400)[0]) == PieceResult::kTaken);
        REQUIRE(budget == 0);
        REQUIRE(rx.counters().copied == 1);
        REQUIRE(pool.in_use() == 2);  // the third message's packet went back at once
        RecvMsg a, b, c;
        REQUIRE(rx.pop(a));
        REQUIRE(rx.pop(b));
        REQUIRE(rx.pop(c));
        REQUIRE((intact(a, 0, 100) && intact(b, 1, 100) && intact(c, 2, 100)));
        a.reset();
        REQUIRE(budget == 1);  // given back when the application lets go
        REQUIRE(feed(rx, cut(pool, 3, 100, 1400)[0]) == PieceResult::kTaken);
        REQUIRE(budget == 0);
    }
    REQUIRE(budget == 2);  // the connection's end gives back what it held
    REQUIRE(pool.in_use() == 0);
}

TEST_CASE("a message's segments cover its bytes in order, or say 0 when they do not fit", "[convergence]") {
    HeapPktPool pool(256, 512);
    {
        ConnRx rx(true, 64);
        // One piece of 3000 bytes in segments of 512: a chain (as a datagram of several frames).
        for (PktBuf* p : cut(pool, 0, 3000, 65535)) REQUIRE(feed(rx, p) == PieceResult::kTaken);
        // Three pieces: assembled into one buffer.
        for (PktBuf* p : cut(pool, 1, 3000, 1400)) REQUIRE(feed(rx, p) == PieceResult::kTaken);
        for (uint32_t seq = 0; seq < 2; ++seq) {
            RecvMsg m;
            REQUIRE(rx.pop(m));
            iovec seg[16];
            const uint32_t n = m.segments(seg, 16);
            REQUIRE(n >= 1);
            REQUIRE((seq == 0 ? n > 1 : n == 1));
            std::vector<uint8_t> b;
            for (uint32_t i = 0; i < n; ++i) {
                const auto* at = static_cast<const uint8_t*>(seg[i].iov_base);
                b.insert(b.end(), at, at + seg[i].iov_len);
            }
            REQUIRE(b.size() == 3000);
            for (uint32_t k = 0; k < b.size(); ++k) REQUIRE(b[k] == byte_of(seq, k));
            if (seq == 0) REQUIRE(m.segments(seg, n - 1) == 0);  // more than max: use copy_to
        }
    }
    REQUIRE(pool.in_use() == 0);
}
