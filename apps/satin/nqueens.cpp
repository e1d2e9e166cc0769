// nqueens.cpp: the number of ways to place n queens on an n x n board (bit masks of the attacked
// columns and diagonals). An irregular tree: a job places a queen in each free column of its row
// and spawns the rest of the board; rows below `spawn_rows` are counted sequentially.
#include "satin_apps.hpp"

namespace iccs::satin {

namespace {

struct Args {
    uint32_t n, row, cols, d1, d2, spawn_rows;
};
static_assert(sizeof(Args) == 24);

uint64_t count(uint32_t n, uint32_t row, uint32_t cols, uint32_t d1, uint32_t d2) {
    if (row == n) return 1;
    const uint32_t all = (1u << n) - 1;
    uint32_t free = all & ~(cols | d1 | d2);
    uint64_t c = 0;
    while (free != 0) {
        const uint32_t bit = free & (0u - free);
        free &= free - 1;
        c += count(n, row + 1, cols | bit, ((d1 | bit) << 1) & all, (d2 | bit) >> 1);
    }
    return c;
}

void job(group::Worker& w, std::span<const uint8_t> args, std::vector<uint8_t>& result) {
    Args x;
    if (!read_one(args, x) || x.n == 0 || x.n > 30) return;
    if (x.row >= x.spawn_rows || x.row == x.n) {
        result = bytes_of(count(x.n, x.row, x.cols, x.d1, x.d2));
        return;
    }
    const uint32_t all = (1u << x.n) - 1;
    uint32_t free = all & ~(x.cols | x.d1 | x.d2);
    uint32_t kids = 0;
    while (free != 0) {
        const uint32_t bit = free & (0u - free);
        free &= free - 1;
        const Args c{x.n, x.row + 1, x.cols | bit, ((x.d1 | bit) << 1) & all, (x.d2 | bit) >> 1, x.spawn_rows};
        w.spawn(kNqueens, std::span(reinterpret_cast<const uint8_t*>(&c), sizeof c));
        ++kids;
    }
    if (!w.sync()) return;
    uint64_t sum = 0;
    for (uint32_t k = 0; k < kids; ++k) {
        uint64_t v = 0;
        if (!read_one(std::span(w.result(k)), v)) return;
        sum += v;
    }
    result = bytes_of(sum);
}

Args root(bool paper) { return paper ? Args{15, 0, 0, 0, 0, 4} : Args{14, 0, 0, 0, 0, 3}; }

std::vector<uint8_t> root_args(bool paper, uint64_t) {
    return bytes_of(root(paper));
}

std::vector<uint8_t> sequential(std::span<const uint8_t> args) {
    Args x;
    if (!read_one(args, x) || x.n == 0 || x.n > 30) return {};
    return bytes_of(count(x.n, x.row, x.cols, x.d1, x.d2));
}

std::string describe(std::span<const uint8_t> r) {
    uint64_t v = 0;
    if (!read_one(r, v)) return "no result (" + std::to_string(r.size()) + " bytes)";
    return std::to_string(v) + " solutions";
}

std::string problem(bool paper) {
    const Args a = root(paper);
    return "n = " + std::to_string(a.n) + " queens, jobs for the first " + std::to_string(a.spawn_rows) + " rows";
}

}  // namespace

App nqueens_app() {
    return App{"nqueens", kNqueens, job, "N-queens: an irregular search tree, 24-byte jobs, 8-byte results", root_args,
               sequential, describe, problem};
}

}  // namespace iccs::satin
