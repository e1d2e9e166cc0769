// apps/dsm/dsm_report.cpp: the DSM counters of one cluster as one JSON object, written to
// ICCS_REPORT.dsm.c<cluster> for `iccs run <app>` (cli/run_app.cpp merges every cluster's).
// Keys are those of the run's JSON contract (apps/README.md); times in seconds.
#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "parmacs_attach.hpp"

namespace {

std::atomic<bool> g_written{false};
bool g_after_wait = false;  // main's thread passed WAIT_FOR_END
bool g_main_end = false;    // MAIN_END was reached
pthread_t g_main_thread;

void write_now() {
    const char* base = std::getenv("ICCS_REPORT");
    if (base == nullptr || *base == '\0') return;
    iccs::dsm::DsmNode* node = iccs::parmacs::node();
    if (node == nullptr || g_written.exchange(true)) return;
    const iccs::dsm::DsmCounters& c = node->counters();
    auto u = [](const std::atomic<uint64_t>& a) { return static_cast<unsigned long long>(a.load()); };
    const std::string file = std::string(base) + ".dsm.c" + std::to_string(node->cluster());
    std::FILE* out = std::fopen(file.c_str(), "w");
    if (out == nullptr) return;  // the launcher reports the cluster's DSM counters as missing (null)
    std::fprintf(out,
                 "{\"cluster\":%u,\"read_faults\":%llu,\"write_faults\":%llu,\"page_fetches\":%llu,"
                 "\"page_fetch_us_mean\":%.3f,\"diffs_sent\":%llu,\"diff_bytes\":%llu,\"diffs_applied\":%llu,"
                 "\"invalidations\":%llu,\"intervals\":%llu,\"notices_received\":%llu,\"lock_acquires\":%llu,"
                 "\"lock_wait_s\":%.9f,\"barriers\":%llu,\"barrier_wait_s\":%.9f,\"getsubs\":%llu,"
                 "\"remote_allocs\":%llu,\"shared_used_bytes\":%llu}\n",
                 unsigned(node->cluster()), u(c.read_faults), u(c.write_faults), u(c.page_fetches),
                 c.page_fetches.load() ? double(c.page_fetch_ns.load()) / 1e3 / double(c.page_fetches.load()) : 0.0,
                 u(c.diffs_sent), u(c.diff_bytes), u(c.diffs_applied), u(c.invalidations), u(c.intervals),
                 u(c.write_notices_received), u(c.lock_acquires), double(c.lock_wait_ns.load()) / 1e9, u(c.barriers),
                 double(c.barrier_wait_ns.load()) / 1e9, u(c.getsubs), u(c.remote_allocs),
                 static_cast<unsigned long long>(node->used_bytes()));
    std::fclose(out);
}

// exit() before MAIN_END: every cluster replays the same deterministic epilogue, so a failed
// check exits every cluster's main, each still reading results whose pages may live at another
// cluster. A cluster that left at once would take its pages with it (the others' fetches would
// find it down), so each main first meets the others in the barrier WAIT_FOR_END used (sync id 1,
// dsm/parmacs.cpp: the layer's own), by which point every cluster's epilogue has read what it
// needs. MAIN_END does not need this: runtime_finish waits for every cluster.
void at_exit() {
    write_now();
    iccs::dsm::DsmNode* node = iccs::parmacs::node();
    if (g_main_end || !g_after_wait || node == nullptr || node->clusters() < 2 ||
        !pthread_equal(pthread_self(), g_main_thread))
        return;
    std::fflush(nullptr);
    if (node->barrier(1, 1, node->clusters()) != iccs::dsm::DsmStatus::kOk)
        std::fprintf(stderr, "iccs app (cluster %u): the exit barrier failed: %s\n", unsigned(node->cluster()),
                     iccs::dsm::DsmNode::error().c_str());
}

}  // namespace

extern "C" void iccs_app_report_write(void) {
    g_main_end = true;
    write_now();
}

extern "C" void iccs_app_after_wait(void) {
    g_after_wait = true;
    g_main_thread = pthread_self();
}

extern "C" void iccs_app_report_init(void) { std::atexit(at_exit); }
