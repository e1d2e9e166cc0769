// registry.cpp: the table of wide-area programs. Adding one: its file defines
// `std::unique_ptr<Instance> make_NAME(const Setup&)`, declared and listed here (README.md).
#include "widearea.hpp"

namespace iccs::widearea {

std::unique_ptr<Instance> make_sor(const Setup& s);

namespace {

constexpr Program kPrograms[] = {
    {"sor",
     "red/black successive over-relaxation, row blocks, neighbour row exchange; optimized: chaotic relaxation "
     "(inter-site row exchanges and the convergence test only every 3rd iteration)",
     "test: 130x130 grid; paper: 386x386 grid", make_sor},
};

}  // namespace

std::span<const Program> programs() { return kPrograms; }

const Program* find_program(std::string_view name) {
    for (const Program& p : kPrograms)
        if (name == p.name) return &p;
    return nullptr;
}

}  // namespace iccs::widearea
