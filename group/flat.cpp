// flat.cpp: the grid-unaware algorithms over all ranks (the baseline MagPIe is measured against):
// dissemination barrier, binomial bcast / reduce / gather / scatter, recursive-doubling allreduce
// and scan, ring allgather and reduce_scatter, pairwise alltoall. Every link is treated alike, so
// data crosses the same WAN link several times and paths chain WAN hops.
#include <cstring>
#include <numeric>

#include "group_impl.hpp"

namespace iccs::group {

bool flat_barrier(GroupImpl& g) {
    const uint32_t P = g.topo().ranks(), r = g.me;
    std::vector<uint8_t> m;
    uint16_t step = 0;
    for (uint32_t k = 1; k < P; k <<= 1, ++step) {
        if (!g.send((r + k) % P, step, nullptr, 0)) return false;
        if (!g.recv((r + P - k) % P, step, m)) return false;
        g.recycle(std::move(m));
    }
    return true;
}

bool flat_bcast(GroupImpl& g, uint8_t* buf, size_t n, uint32_t root) {
    const uint32_t P = g.topo().ranks(), vr = (g.me + P - root) % P;
    uint32_t mask = 1;
    while (mask < P) {
        if (vr & mask) {
            std::vector<uint8_t> m;
            const uint32_t from = (vr - mask + root) % P;
            if (!g.recv(from, 0, m) || !g.want_len(from, m.size(), n)) return false;
            if (n) std::memcpy(buf, m.data(), n);
            g.recycle(std::move(m));
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (vr + mask < P && !g.send((vr + mask + root) % P, 0, buf, n)) return false;
    return true;
}

namespace {

// Binomial gather of blocks (relative order) to root; `all` every rank's block size.
bool gather_tree(GroupImpl& g, const MoveArgs& a) {
    const uint32_t P = g.topo().ranks(), root = a.root, vr = (g.me + P - root) % P;
    std::vector<uint8_t> acc(a.in, a.in + a.all_bytes[g.me]);
    for (uint32_t mask = 1; mask < P; mask <<= 1) {
        if (vr & mask) return g.send((vr - mask + root) % P, 0, acc.data(), acc.size());
        if (vr + mask < P) {
            size_t want = 0;
            for (uint32_t x = vr + mask; x < std::min(P, vr + 2 * mask); ++x) want += a.all_bytes[(x + root) % P];
            std::vector<uint8_t> m;
            const uint32_t from = (vr + mask + root) % P;
            if (!g.recv(from, 0, m) || !g.want_len(from, m.size(), want)) return false;
            acc.insert(acc.end(), m.begin(), m.end());
            g.recycle(std::move(m));
        }
    }
    // root: acc holds the blocks of relative ranks 0..P-1
    const std::vector<size_t> off = offsets(a.all_bytes);
    size_t pos = 0;
    for (uint32_t x = 0; x < P; ++x) {
        const uint32_t r = (x + root) % P;
        if (a.all_bytes[r]) std::memcpy(a.out + off[r], acc.data() + pos, a.all_bytes[r]);
        pos += a.all_bytes[r];
    }
    return true;
}

bool scatter_tree(GroupImpl& g, const MoveArgs& a) {
    const uint32_t P = g.topo().ranks(), root = a.root, vr = (g.me + P - root) % P;
    const std::vector<size_t> off = offsets(a.all_bytes);
    // `mine`: the blocks of relative ranks [vr, vr + span) in relative order
    std::vector<uint8_t> mine;
    uint32_t span = 1, mask = 1;
    while (mask < P && !(vr & mask)) mask <<= 1;
    span = vr == 0 ? P : std::min(mask, P - vr);
    auto bytes_of = [&](uint32_t lo, uint32_t hi) {
        size_t b = 0;
        for (uint32_t x = lo; x < hi; ++x) b += a.all_bytes[(x + root) % P];
        return b;
    };
    if (vr == 0) {
        for (uint32_t x = 0; x < P; ++x) {
            const uint32_t r = (x + root) % P;
            mine.insert(mine.end(), a.in + off[r], a.in + off[r] + a.all_bytes[r]);
        }
    } else {
        const uint32_t from = (vr - mask + root) % P;
        if (!g.recv(from, 0, mine) || !g.want_len(from, mine.size(), bytes_of(vr, vr + span))) return false;
    }
    for (uint32_t m = (vr == 0 ? std::bit_ceil(P) : mask) >> 1; m > 0; m >>= 1)
        if (vr + m < P && m < span) {
            const size_t lo = bytes_of(vr, vr + m), len = bytes_of(vr + m, std::min(P, vr + 2 * m));
            if (!g.send((vr + m + root) % P, 0, mine.data() + lo, len)) return false;
        }
    if (a.all_bytes[g.me]) std::memcpy(a.out, mine.data(), a.all_bytes[g.me]);
    return true;
}

bool allgather_ring(GroupImpl& g, const MoveArgs& a) {
    const uint32_t P = g.topo().ranks(), r = g.me;
    const std::vector<size_t> off = offsets(a.all_bytes);
    if (a.all_bytes[r]) std::memmove(a.out + off[r], a.in, a.all_bytes[r]);
    std::vector<uint8_t> m;
    for (uint32_t s = 0; s + 1 < P; ++s) {
        const uint32_t sb = (r + P - s) % P, rb = (r + 2 * P - s - 1) % P;
        if (!g.send((r + 1) % P, static_cast<uint16_t>(s), a.out + off[sb], a.all_bytes[sb])) return false;
        const uint32_t from = (r + P - 1) % P;
        if (!g.recv(from, static_cast<uint16_t>(s), m) || !g.want_len(from, m.size(), a.all_bytes[rb])) return false;
        if (!m.empty()) std::memcpy(a.out + off[rb], m.data(), m.size());
        g.recycle(std::move(m));
    }
    return true;
}

bool alltoall_pairwise(GroupImpl& g, const MoveArgs& a) {
    const uint32_t P = g.topo().ranks(), r = g.me;
    const std::vector<size_t> so = offsets(a.send_bytes), ro = offsets(a.recv_bytes);
    if (a.send_bytes[r] != a.recv_bytes[r])
        return g.fail("sendcounts[" + std::to_string(r) + "] and recvcounts[" + std::to_string(r) + "] differ");
    if (a.send_bytes[r]) std::memmove(a.out + ro[r], a.in + so[r], a.send_bytes[r]);
    for (uint32_t s = 1; s < P; ++s) {
        const uint32_t d = (r + s) % P;
        if (!g.send(d, 0, a.in + so[d], a.send_bytes[d])) return false;
    }
    std::vector<uint8_t> m;
    for (uint32_t s = 1; s < P; ++s) {
        const uint32_t from = (r + P - s) % P;
        if (!g.recv(from, 0, m) || !g.want_len(from, m.size(), a.recv_bytes[from])) return false;
        if (!m.empty()) std::memcpy(a.out + ro[from], m.data(), m.size());
        g.recycle(std::move(m));
    }
    return true;
}

}  // namespace

bool flat_move(GroupImpl& g, const MoveArgs& a) {
    switch (a.kind) {
        case Coll::kGather: return gather_tree(g, a);
        case Coll::kScatter: return scatter_tree(g, a);
        case Coll::kAllgather: return allgather_ring(g, a);
        default: return alltoall_pairwise(g, a);
    }
}

namespace {

bool reduce_tree(GroupImpl& g, const RedArgs& a, std::vector<uint8_t>& acc) {
    const uint32_t P = g.topo().ranks(), root = a.root, vr = (g.me + P - root) % P;
    std::vector<uint8_t> m;
    for (uint32_t mask = 1; mask < P; mask <<= 1) {
        if (vr & mask) return g.send((vr - mask + root) % P, 0, acc.data(), acc.size());
        if (vr + mask < P) {
            const uint32_t from = (vr + mask + root) % P;
            if (!g.recv(from, 0, m) || !g.want_len(from, m.size(), acc.size())) return false;
            combine(a.r, acc.data(), m.data(), acc.size());
            g.recycle(std::move(m));
        }
    }
    return true;
}

// Recursive doubling over P ranks (the ranks beyond the largest power of two fold in first).
bool allreduce_rd(GroupImpl& g, const RedArgs& a, std::vector<uint8_t>& acc) {
    const uint32_t P = g.topo().ranks(), r = g.me;
    const uint32_t p2 = std::bit_floor(P), rem = P - p2;
    std::vector<uint8_t> m;
    auto take = [&](uint32_t from, uint16_t step, bool mine_first) {
        if (!g.recv(from, step, m) || !g.want_len(from, m.size(), acc.size())) return false;
        if (mine_first) combine(a.r, acc.data(), m.data(), acc.size());
        else {  // acc = m op acc, so both partners compute the same bits
            combine(a.r, m.data(), acc.data(), acc.size());
            std::swap(acc, m);
        }
        g.recycle(std::move(m));
        return true;
    };
    int64_t nr;
    if (r < 2 * rem) {
        if (r % 2 == 0) {
            if (!g.send(r + 1, 0, acc.data(), acc.size())) return false;
            nr = -1;
        } else {
            if (!take(r - 1, 0, false)) return false;
            nr = r / 2;
        }
    } else {
        nr = r - rem;
    }
    if (nr >= 0) {
        uint16_t step = 1;
        for (uint32_t mask = 1; mask < p2; mask <<= 1, ++step) {
            const uint32_t pn = static_cast<uint32_t>(nr) ^ mask;
            const uint32_t partner = pn < rem ? pn * 2 + 1 : pn + rem;
            if (!g.send(partner, step, acc.data(), acc.size())) return false;
            if (!take(partner, step, partner > r)) return false;
        }
    }
    if (r < 2 * rem) {
        if (r % 2 == 1) return g.send(r - 1, 100, acc.data(), acc.size());
        if (!g.recv(r + 1, 100, m) || !g.want_len(r + 1, m.size(), acc.size())) return false;
        std::swap(acc, m);
        g.recycle(std::move(m));
    }
    return true;
}

// Hillis-Steele inclusive scan: at distance k, rank r sends its partial to r + k.
bool scan_rd(GroupImpl& g, const RedArgs& a, std::vector<uint8_t>& acc) {
    const uint32_t P = g.topo().ranks(), r = g.me;
    std::vector<uint8_t> m;
    uint16_t step = 0;
    for (uint32_t k = 1; k < P; k <<= 1, ++step) {
        if (r + k < P && !g.send(r + k, step, acc.data(), acc.size())) return false;
        if (r >= k) {
            if (!g.recv(r - k, step, m) || !g.want_len(r - k, m.size(), acc.size())) return false;
            combine(a.r, m.data(), acc.data(), acc.size());  // earlier ranks first
            std::swap(acc, m);
            g.recycle(std::move(m));
        }
    }
    return true;
}

// Ring reduce-scatter: block j starts at rank j + 1 and picks up every rank's part on its way to j.
bool reduce_scatter_ring(GroupImpl& g, const RedArgs& a, std::vector<uint8_t>& acc) {
    const uint32_t P = g.topo().ranks(), r = g.me;
    const std::vector<size_t> off = offsets(a.block_bytes);
    std::vector<uint8_t> m;
    for (uint32_t s = 0; s + 1 < P; ++s) {
        const uint32_t sb = (r + 2 * P - s - 1) % P, rb = (r + 2 * P - s - 2) % P;
        if (!g.send((r + 1) % P, static_cast<uint16_t>(s), acc.data() + off[sb], a.block_bytes[sb])) return false;
        const uint32_t from = (r + P - 1) % P;
        if (!g.recv(from, static_cast<uint16_t>(s), m) || !g.want_len(from, m.size(), a.block_bytes[rb])) return false;
        combine(a.r, acc.data() + off[rb], m.data(), m.size());
        g.recycle(std::move(m));
    }
    if (a.block_bytes[r]) std::memcpy(a.out, acc.data() + off[r], a.block_bytes[r]);
    return true;
}

}  // namespace

bool flat_reduce(GroupImpl& g, const RedArgs& a) {
    std::vector<uint8_t> acc(a.in, a.in + a.bytes);
    bool ok;
    switch (a.kind) {
        case Coll::kReduce:
            ok = reduce_tree(g, a, acc);
            if (ok && g.me == a.root && a.bytes) std::memcpy(a.out, acc.data(), a.bytes);
            return ok;
        case Coll::kAllreduce: ok = allreduce_rd(g, a, acc); break;
        case Coll::kScan: ok = scan_rd(g, a, acc); break;
        default: return reduce_scatter_ring(g, a, acc);
    }
    if (ok && a.bytes) std::memcpy(a.out, acc.data(), a.bytes);
    return ok;
}

}  // namespace iccs::group
