// registry.cpp: the table of wide-area programs. Adding one: its file defines
// `std::unique_ptr<Instance> make_NAME(const Setup&)`, declared and listed here (README.md).
#include "widearea.hpp"

namespace iccs::widearea {

std::unique_ptr<Instance> make_sor(const Setup& s);

namespace {

constexpr Program kPrograms[] = {
    {"sor",
     "red/black successive over-relaxation, row blocks, neighbour row exchange; optimized: inter-site rows only "
     "every 3rd iteration, 6 deep (the halo updated locally meanwhile), and the convergence test every 3rd",
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
