// library.cpp: the library's state and its two ends: at MPI_Init, the settings, where every rank
// is (sites.hpp) and the tag layout; at MPI_Finalize, the counters (a JSON file per rank, and a
// report summed over the ranks).
#include "library.hpp"

#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "config.hpp"
#include "runtime_launch.hpp"

namespace iccs::magpie {

namespace {

Counters g_counters;
Settings g_settings;
std::vector<Place> g_places;
std::string g_placement;  // where the placement came from, for the report
int g_world_rank = 0;
TagCodec g_tags;
int g_error_class = MPI_ERR_OTHER;
std::once_flag g_setup_once;
bool g_setup_done = false;

constexpr const char* kCollNames[kColls] = {
    "barrier", "bcast", "reduce", "allreduce", "gather", "gatherv", "scatter", "scatterv", "allgather", "allgatherv",
    "alltoall", "alltoallv", "reduce_scatter", "reduce_scatter_block", "scan", "exscan"};
constexpr const char* kMpiNames[kColls] = {
    "MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Allreduce", "MPI_Gather", "MPI_Gatherv", "MPI_Scatter",
    "MPI_Scatterv", "MPI_Allgather", "MPI_Allgatherv", "MPI_Alltoall", "MPI_Alltoallv", "MPI_Reduce_scatter",
    "MPI_Reduce_scatter_block", "MPI_Scan", "MPI_Exscan"};
// Every counter of a collective, by its name in the files (and iccs_magpie_counter).
struct Field {
    const char* name;
    std::atomic<uint64_t> CollCounters::*member;
};
constexpr Field kFields[] = {
    {"calls", &CollCounters::calls},         {"passthrough", &CollCounters::passthrough},
    {"bytes", &CollCounters::bytes},         {"msgs", &CollCounters::msgs},
    {"sent_bytes", &CollCounters::sent_bytes}, {"shm_msgs", &CollCounters::shm_msgs},
    {"shm_bytes", &CollCounters::shm_bytes}, {"wan_msgs", &CollCounters::wan_msgs},
    {"wan_bytes", &CollCounters::wan_bytes}, {"wan_bytes_min", &CollCounters::wan_bytes_min},
    {"wan_hops_max", &CollCounters::wan_hops_max}};  // the only one summed by its maximum
constexpr const char* kPassNames[kPasses] = {"intercomm", "arguments", "outside_world", "unplaced", "too_large", "disabled"};

const char* env(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? v : nullptr;
}

bool env_u64(const char* name, uint64_t lo, uint64_t hi, uint64_t& out, std::string& err) {
    const char* v = env(name);
    if (v == nullptr) return true;
    char* end = nullptr;
    errno = 0;
    const unsigned long long x = std::strtoull(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi) {
        err = std::string(name) + "=\"" + v + "\": expected a whole number from " + std::to_string(lo) + " to " +
              std::to_string(hi);
        return false;
    }
    out = x;
    return true;
}

bool read_settings(std::string& err) {
    if (const char* v = env("ICCS_MAGPIE")) {
        if (std::strcmp(v, "off") == 0)
            g_settings.enabled = false;
        else if (std::strcmp(v, "on") != 0)
            return err = std::string("ICCS_MAGPIE=\"") + v + "\": expected on or off", false;
    }
    uint64_t seg = g_settings.segment_bytes;
    if (!env_u64("ICCS_MAGPIE_TIMEOUT_MS", 0, 86'400'000, g_settings.timeout_ms, err) ||
        !env_u64("ICCS_MAGPIE_SEGMENT_BYTES", 0, 1u << 30, seg, err) ||
        !env_u64("ICCS_MAGPIE_BLOCKS_BYTES", 0, INT_MAX, g_settings.blocks_bytes, err) ||
        !env_u64("ICCS_MAGPIE_BLOCK_CHUNKS", 1, 64, g_settings.block_chunks, err))
        return false;
    g_settings.segment_bytes = static_cast<uint32_t>(seg);
    if (const char* v = env("ICCS_MAGPIE_COUNTERS_FILE")) g_settings.counters_file = v;
    if (const char* v = env("ICCS_MAGPIE_REPORT")) g_settings.report = v;
    return true;
}

// Every rank's host name (collective over MPI_COMM_WORLD).
std::vector<std::string> exchange_hosts(int size) {
    char mine[MPI_MAX_PROCESSOR_NAME] = {};
    int len = 0;
    PMPI_Get_processor_name(mine, &len);
    std::vector<char> all(size_t(size) * MPI_MAX_PROCESSOR_NAME);
    PMPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> hosts(size);
    for (int r = 0; r < size; ++r) hosts[r] = std::string(all.data() + size_t(r) * MPI_MAX_PROCESSOR_NAME);
    return hosts;
}

// Where every world rank is (sites.hpp: ICCS_SITES, else ICCS_CONFIG, else host names).
// `collective`: false when MPI_Init was not seen, so no exchange over MPI_COMM_WORLD is possible.
bool place_world(bool collective, std::string& err) {
    int size = 0;
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    if (const char* sites = env("ICCS_SITES")) {
        std::vector<uint32_t> host_cluster;
        const std::string text = sites;
        const bool needs_hosts = text.find('x') == std::string::npos &&
                                 text.find_first_of("0123456789") != std::string::npos &&
                                 [&] {  // an entry without ":CLUSTER"
                                     std::vector<Place> probe;
                                     std::string e;
                                     return !parse_sites(text, uint32_t(size), {}, probe, e) &&
                                            e.find("names no cluster") != std::string::npos;
                                 }();
        if (needs_hosts) {
            if (!collective) return err = "ICCS_SITES names no cluster for some ranks and MPI_Init was not seen", false;
            std::map<std::string, uint32_t> ids;
            for (const std::string& h : exchange_hosts(size))
                host_cluster.push_back(ids.emplace(h, uint32_t(ids.size())).first->second);
        }
        g_placement = "ICCS_SITES";
        return parse_sites(text, uint32_t(size), host_cluster, g_places, err);
    }
    if (const char* path = env(kEnvConfig)) {
        std::vector<std::pair<std::string, std::string>> overrides;
        if (!parse_overrides(env(kEnvOverrides), overrides, err)) return false;
        const ConfigResult cr = configure(path, overrides);
        if (!cr.ok()) return err = cr.error, false;
        const MachineConfig& cfg = *cr.config;
        g_placement = std::string("machine file ") + path;
        if (!places_from_machine(cfg.machine.clusters, cfg.cluster.compute_threads, cfg.wan.sites, uint32_t(size), g_places, err))
            return err = std::string(path) + ": " + err, false;
        return true;
    }
    if (!collective) return err = "no ICCS_SITES or ICCS_CONFIG and MPI_Init was not seen (host names need it)", false;
    g_placement = "host names";
    g_places = places_from_hosts(exchange_hosts(size));
    return true;
}

void setup(bool collective) {
    PMPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
    std::string err;
    if (!read_settings(err) || (g_settings.enabled && !place_world(collective, err))) {
        if (collective) {
            std::fprintf(stderr, "iccs-magpie: %s\n", err.c_str());
            PMPI_Abort(MPI_COMM_WORLD, 1);
        }
        g_places.clear();  // without MPI_Init: every call passes through (counted as unplaced)
    }
    void* ub = nullptr;
    int found = 0;
    PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found);
    const uint32_t tag_ub = found ? static_cast<uint32_t>(*static_cast<int*>(ub)) : 32767u;
    g_tags.sig_mask = 0;  // the most bits of call signature above collective and hops that fit
    while (((g_tags.sig_mask << 1) | 1) <= (tag_ub >> 7)) g_tags.sig_mask = (g_tags.sig_mask << 1) | 1;
    if (PMPI_Add_error_class(&g_error_class) != MPI_SUCCESS) g_error_class = MPI_ERR_OTHER;
    g_setup_done = true;
}

std::string json_counters(const CollCounters& k) {
    std::string s = "{";
    for (const Field& f : kFields)
        s += std::string(s.size() > 1 ? ", " : "") + "\"" + f.name + "\": " + std::to_string((k.*f.member).load());
    return s + "}";
}

// The counters as one JSON object (this rank's, or summed over the ranks).
std::string json_all(const Counters& k, const std::string& head) {
    std::string s = "{" + head + "\"collectives\": {";
    for (size_t i = 0; i < kColls; ++i)
        s += std::string(i ? ", " : "") + "\"" + kCollNames[i] + "\": " + json_counters(k.coll[i]);
    s += "}, \"passthrough\": {";
    for (size_t i = 0; i < kPasses; ++i)
        s += std::string(i ? ", " : "") + "\"" + kPassNames[i] + "\": " + std::to_string(k.pass[i].load());
    return s + "}}";
}

// One rank's counters as words (summed over ranks with PMPI_Reduce; hops by max).
std::vector<uint64_t> words(const Counters& k) {
    std::vector<uint64_t> w;
    for (const CollCounters& c : k.coll)
        for (const Field& f : kFields) w.push_back((c.*f.member).load());
    for (const auto& p : k.pass) w.push_back(p.load());
    return w;
}
void from_words(const std::vector<uint64_t>& sum, const std::vector<uint64_t>& max, Counters& k) {
    size_t i = 0;
    for (CollCounters& c : k.coll)
        for (const Field& f : kFields) {
            (c.*f.member).store(f.member == &CollCounters::wan_hops_max ? max[i] : sum[i]);
            ++i;
        }
    for (auto& p : k.pass) p.store(sum[i++]);
}

void write_file(const std::string& path, const std::string& text) {
    FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) {
        std::fprintf(stderr, "iccs-magpie: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
        return;
    }
    std::fputs(text.c_str(), f);
    std::fputc('\n', f);
    std::fclose(f);
}

void print_table(const Counters& k) {
    std::fprintf(stderr, "iccs-magpie: %s (from %s); counters summed over the ranks\n", describe(g_places).c_str(),
                 g_placement.c_str());
    std::fprintf(stderr, "  %-21s %8s %7s %9s %8s %12s %12s %4s\n", "collective", "calls", "passed", "msgs", "wan_msgs",
                 "wan_bytes", "wan_min", "hops");
    bool bytes_ok = true, hops_ok = true;
    for (size_t i = 0; i < kColls; ++i) {
        const CollCounters& c = k.coll[i];
        if (c.calls == 0 && c.passthrough == 0) continue;
        std::fprintf(stderr, "  %-21s %8" PRIu64 " %7" PRIu64 " %9" PRIu64 " %8" PRIu64 " %12" PRIu64 " %12" PRIu64 " %4" PRIu64 "\n",
                     kCollNames[i], c.calls.load(), c.passthrough.load(), c.msgs.load(), c.wan_msgs.load(),
                     c.wan_bytes.load(), c.wan_bytes_min.load(), c.wan_hops_max.load());
        bytes_ok = bytes_ok && c.wan_bytes == c.wan_bytes_min;
        const bool blocks = static_cast<Coll>(i) == Coll::kAllreduce || static_cast<Coll>(i) == Coll::kReduce;
        hops_ok = hops_ok && c.wan_hops_max <= (blocks ? 2u : 1u);  // by blocks: 2
    }
    std::string passes;
    for (size_t i = 0; i < kPasses; ++i)
        if (k.pass[i]) passes += std::string(passes.empty() ? "" : ", ") + kPassNames[i] + " " + std::to_string(k.pass[i].load());
    std::fprintf(stderr, "  MagPIe's rules: wan_bytes = wan_min: %s; at most one wide-area link per path (allreduce and reduce "
                 "by blocks: two): %s%s%s\n",
                 bytes_ok ? "yes" : "NO", hops_ok ? "yes" : "NO", passes.empty() ? "" : "; passed through: ", passes.c_str());
}

}  // namespace

uint64_t counter_value(const char* collective, const char* field) {
    if (collective == nullptr || field == nullptr) return ~uint64_t{0};
    for (size_t i = 0; i < kColls; ++i) {
        if (std::strcmp(collective, kCollNames[i]) != 0) continue;
        for (const Field& f : kFields)
            if (std::strcmp(field, f.name) == 0) return (g_counters.coll[i].*f.member).load(std::memory_order_relaxed);
    }
    return ~uint64_t{0};
}

const char* to_string(Coll c) { return static_cast<size_t>(c) < kColls ? kCollNames[static_cast<size_t>(c)] : "?"; }
const char* mpi_name(Coll c) { return static_cast<size_t>(c) < kColls ? kMpiNames[static_cast<size_t>(c)] : "?"; }
const char* to_string(Pass p) { return static_cast<size_t>(p) < kPasses ? kPassNames[static_cast<size_t>(p)] : "?"; }
Counters& counters() { return g_counters; }
const Settings& settings() { return g_settings; }
const std::vector<Place>& world_places() { return g_places; }
int world_rank() { return g_world_rank; }
const TagCodec& tags() { return g_tags; }

void setup_after_init() { std::call_once(g_setup_once, [] { setup(true); }); }

bool ensure_setup() {
    if (!g_setup_done) {
        int inited = 0, finalized = 0;
        PMPI_Initialized(&inited);
        PMPI_Finalized(&finalized);
        if (!inited || finalized) return false;
        std::call_once(g_setup_once, [] { setup(false); });
    }
    return true;
}

int raise_error(MPI_Comm comm, int code, const std::string& text) {
    std::fprintf(stderr, "iccs-magpie: %s\n", text.c_str());
    int err = code;
    // Our own findings (a mismatch, a time-out) get an error code whose string says what happened.
    if ((code == MPI_ERR_OTHER || code == MPI_ERR_TRUNCATE) && g_error_class != MPI_ERR_OTHER &&
        PMPI_Add_error_code(g_error_class, &err) == MPI_SUCCESS) {
        const std::string s = ("iccs-magpie: " + text).substr(0, MPI_MAX_ERROR_STRING - 1);
        PMPI_Add_error_string(err, s.c_str());
    } else {
        err = code;
    }
    PMPI_Comm_call_errhandler(comm, err);
    return err;
}

void finish_before_finalize() {
    if (!g_setup_done) return;
    free_comms();
    const std::string head = "\"rank\": " + std::to_string(g_world_rank) +
                             (g_places.empty() ? std::string()
                                               : ", \"site\": " + std::to_string(g_places[g_world_rank].site) +
                                                     ", \"cluster\": " + std::to_string(g_places[g_world_rank].cluster)) +
                             ", \"placement\": " + json_quote(g_placement) + ", ";
    if (!g_settings.counters_file.empty())
        write_file(g_settings.counters_file + ".r" + std::to_string(g_world_rank), json_all(g_counters, head));
    if (g_settings.report.empty()) return;
    // Summed over MPI_COMM_WORLD (collective: every rank is in MPI_Finalize).
    const std::vector<uint64_t> mine = words(g_counters);
    std::vector<uint64_t> sum(mine.size()), max(mine.size());
    PMPI_Reduce(mine.data(), sum.data(), int(mine.size()), MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    PMPI_Reduce(mine.data(), max.data(), int(mine.size()), MPI_UINT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
    if (g_world_rank != 0) return;
    int ranks = 0;
    PMPI_Comm_size(MPI_COMM_WORLD, &ranks);
    Counters total;
    from_words(sum, max, total);
    if (g_settings.report == "-") {
        print_table(total);
    } else {
        write_file(g_settings.report, json_all(total, "\"ranks\": " + std::to_string(ranks) + ", \"layout\": " +
                                                          json_quote(describe(g_places)) + ", \"placement\": " +
                                                          json_quote(g_placement) + ", "));
    }
}

}  // namespace iccs::magpie
