// registry.cpp: the table of wide-area programs. Adding one: its file defines
// `std::unique_ptr<Instance> make_NAME(const Setup&)`, declared and listed here (README.md).
#include "widearea.hpp"

namespace iccs::widearea {

std::unique_ptr<Instance> make_sor(const Setup& s);
std::unique_ptr<Instance> make_asp(const Setup& s);
std::unique_ptr<Instance> make_tsp_wa(const Setup& s);
std::unique_ptr<Instance> make_water_wa(const Setup& s);
std::unique_ptr<Instance> make_atpg(const Setup& s);
std::unique_ptr<Instance> make_ida(const Setup& s);
std::unique_ptr<Instance> make_ra(const Setup& s);
std::unique_ptr<Instance> make_acp(const Setup& s);

namespace {

constexpr Program kPrograms[] = {
    {"sor",
     "red/black successive over-relaxation, row blocks, neighbour row exchange; optimized: inter-site rows only "
     "every 3rd iteration, 6 deep (the halo updated locally meanwhile), and the convergence test every 3rd",
     "test: 130x130 grid; paper: 770x770 grid", make_sor},
    {"asp",
     "all-pairs shortest paths (Floyd), row k broadcast at step k through the totally ordered broadcast; "
     "optimized: the sequencer migrates to the sending site instead of the central one",
     "test: 128 nodes; paper: 2048 nodes", make_asp},
    {"tsp-wa",
     "travelling salesman, branch and bound with a fixed bound over a job queue (an RPC per job); optimized: "
     "one queue per site, jobs dealt to the sites statically",
     "test: 12 cities, 110 jobs; paper: 14 cities, 1716 jobs", make_tsp_wa},
    {"water-wa",
     "n-body (Water-Nsquared pattern): each step fetch the half shell's positions, send force updates to their "
     "owners; optimized: cluster cache (one coordinator per remote block and site fetches once and sums the "
     "site's updates before one WAN transfer)",
     "test: 256 molecules, 3 steps; paper: 8192 molecules, 4 steps", make_water_wa},
    {"atpg",
     "test pattern generation, faults static over the threads, a shared counter on rank 0 updated by an RPC per "
     "detected fault; optimized: sums per cluster, one RPC a cluster",
     "test: 1500 gates, 3064 faults, 3072 shared vectors; paper: 3000 gates, 6096 faults, 3072 shared vectors",
     make_atpg},
    {"ida",
     "IDA* on the 15-puzzle, work stealing between all threads; optimized: steal in the site first, remember "
     "empty queues",
     "test: 70 random moves from the goal (9.0 M nodes); paper: 110 (140.8 M nodes)", make_ida},
    {"ra",
     "retrograde analysis of a game database, positions owned by hash, one small message per predecessor update; "
     "optimized: updates combined per destination cluster through its thread 0; grid: Awari's five grid changes "
     "(--grid-opts)",
     "test: 20,000 positions; paper: 1,000,000", make_ra, true},
    {"acp",
     "arc consistency, variables owned by threads, every domain reduction broadcast to all and acknowledged; "
     "optimized: asynchronous pipelined broadcasts",
     "test: 300 variables of 32 values, 1200 constraints; paper: 3000 of 64, 15000", make_acp},
};

}  // namespace

std::span<const Program> programs() { return kPrograms; }

const Program* find_program(std::string_view name) {
    for (const Program& p : kPrograms)
        if (name == p.name) return &p;
    return nullptr;
}

}  // namespace iccs::widearea
