// registry.cpp: the table of wide-area programs and their variants. Adding one: its file defines
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

constexpr VariantInfo kSor[] = {
    {Variant::kOriginal, "every row exchange after every colour's sweep, the convergence test every iteration: bit "
                         "for bit the sequential red/black iteration"},
    {Variant::kOptimized, "the study's chaotic relaxation: rows between sites go only before the sweeps of every "
                          "3rd iteration (the other sides' copies stale meanwhile), the convergence test in those "
                          "iterations; iterations counted, the result bit for bit its schedule replayed sequentially"},
    {Variant::kExactHalo, "ours: rows between sites every 3rd iteration, 6 deep, each side updating its copy of "
                          "the other's rows meanwhile: bit for bit the sequential iteration, no extra iterations"},
};
constexpr VariantInfo kAsp[] = {
    {Variant::kOriginal, "row k through the totally ordered broadcast with one central sequencer (cluster 0)"},
    {Variant::kOptimized, "the study's sequencer migration: the right to number moves to the sending site"},
};
constexpr VariantInfo kTsp[] = {
    {Variant::kOriginal, "one central job queue (cluster 0): an RPC per job"},
    {Variant::kOptimized, "the study's TSP': one queue per site, jobs dealt statically, an empty site queue steals "
                          "half of another site's (Plaat et al.)"},
};
constexpr VariantInfo kWater[] = {
    {Variant::kOriginal, "every fetch of a remote block an RPC to its owner, every force update a message"},
    {Variant::kOptimized, "the study's cluster cache: one coordinator per remote block and site fetches once and "
                          "sums the site's updates before one WAN transfer"},
};
constexpr VariantInfo kAtpg[] = {
    {Variant::kOriginal, "a shared counter on rank 0, an RPC per detected fault"},
    {Variant::kOptimized, "the study's local accumulation: sums per cluster, one RPC a cluster"},
};
constexpr VariantInfo kIda[] = {
    {Variant::kOriginal, "an idle thread steals from the threads at offsets 1, 2, 4, ... (mod P); an idle thread "
                         "broadcasts how many jobs it searched, the iteration ends when they sum to all"},
    {Variant::kOptimized, "the study's change: steal in the site first, and idle/active broadcasts tell the "
                          "thieves whom not to ask"},
};
constexpr VariantInfo kRa[] = {
    {Variant::kOriginal, "updates combined per destination thread (the study's original combined per processor)"},
    {Variant::kOptimized, "the study's change: updates for another cluster combined per destination cluster in one "
                          "buffer of the sending cluster (its designated combiner), sent to that cluster's thread 0"},
    {Variant::kGrid, "Awari's five grid changes (Verstoep et al., issue 20), switched by --grid-opts; runs only "
                     "when asked by name"},
};
constexpr VariantInfo kAcp[] = {
    {Variant::kOriginal, "every domain reduction through the totally ordered broadcast (a central sequencer), the "
                         "writer waiting until its own broadcast is delivered (Orca's write), no acknowledgements"},
    {Variant::kAsyncBcast, "ours: unordered broadcasts straight to every thread, the writer revises on at once"},
};

constexpr Program kPrograms[] = {
    {"sor", "red/black successive over-relaxation, row blocks, neighbour rows exchanged after each sweep, a "
            "convergence test (allreduce) per iteration",
     "test: 514x514 grid (130x130 with --sor-rule tight); paper: 770x770 grid", make_sor, kSor},
    {"asp", "all-pairs shortest paths (Floyd), row k broadcast at step k through the totally ordered broadcast",
     "test: 128 nodes; paper: 2048 nodes", make_asp, kAsp},
    {"tsp-wa", "travelling salesman, branch and bound with a fixed bound over job queues (an RPC per job)",
     "test: 12 cities, 110 jobs; paper: 14 cities, 1716 jobs", make_tsp_wa, kTsp},
    {"water-wa", "n-body in Water-Nsquared's communication pattern (a simple softened force, not SPLASH Water's "
                 "physics): each step fetch the half shell's positions, send force updates to their owners",
     "test: 256 molecules, 3 steps; paper: 8192 molecules, 4 steps", make_water_wa, kWater, "",
     "communication pattern only: not the study's Water physics"},
    {"atpg", "test pattern generation, faults static over the threads, detected faults counted on rank 0",
     "test: 1500 gates, 3064 faults, 3072 shared vectors; paper: 3000 gates, 6096 faults, 3072 shared vectors",
     make_atpg, kAtpg},
    {"ida", "IDA* on the 15-puzzle, work stealing between the threads' job queues",
     "test: 70 random moves from the goal (9.0 M nodes); paper: 110 (140.8 M nodes)", make_ida, kIda},
    {"ra", "retrograde analysis of a game database, positions owned by hash, update messages to the owners of "
           "predecessors, combined",
     "test: 20,000 positions; paper: 1,000,000", make_ra, kRa},
    {"acp", "arc consistency, variables owned by threads, every domain reduction broadcast to every thread",
     "test: 300 variables of 32 values, 1200 constraints; paper: 3000 of 64, 15000", make_acp, kAcp,
     "the study made no change to ACP (its Table 5: -); ours: --variant async-bcast"},
};

}  // namespace

bool Program::has(Variant v) const {
    for (const VariantInfo& i : variants)
        if (i.id == v) return true;
    return false;
}

std::span<const Program> programs() { return kPrograms; }

const Program* find_program(std::string_view name) {
    for (const Program& p : kPrograms)
        if (name == p.name) return &p;
    return nullptr;
}

}  // namespace iccs::widearea
