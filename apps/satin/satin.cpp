// satin.cpp: the runner of the four Satin programs (satin.hpp) and the table of job kinds.
#include "satin.hpp"

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "group_programs.hpp"
#include "satin_apps.hpp"

namespace iccs::satin {

const std::vector<App>& apps() {
    static const std::vector<App> a = {integrate_app(), nqueens_app(), raytrace_app(), tsp_app()};
    return a;
}

const App* find_app(const std::string& name) {
    for (const App& a : apps())
        if (name == a.name) return &a;
    return nullptr;
}

std::vector<group::JobFn> job_kinds() {
    std::vector<group::JobFn> k(kKinds, nullptr);
    for (const App& a : apps()) k[a.kind] = a.job;
    return k;
}

bool is_program(const std::string& name) { return find_app(name) != nullptr; }
const char* program_names() { return "integrate, nqueens, raytrace, satin-tsp"; }
std::vector<std::string> program_list() {
    std::vector<std::string> names;
    for (const App& a : apps()) names.emplace_back(a.name);
    return names;
}

int program(std::unique_ptr<Runtime> rt, const group::Topology& topo, const RunOptions& o) {
    const App* app = find_app(o.app);
    const uint16_t T = rt->threads(), me = rt->cluster();
    if (app == nullptr) {
        std::fprintf(stderr, "satin: no program '%s' (%s)\n", o.app.c_str(), program_names());
        return runtime_finish(std::move(rt), false);
    }
    group::StealOptions so;
    so.policy = o.policy;
    so.timeout_ms = o.timeout_ms;
    so.seed = o.seed;
    group::Stealer st(*rt, topo, so, job_kinds());
    const std::vector<uint8_t> root = app->root_args(o.paper, o.seed);
    std::vector<uint8_t> result;
    uint64_t elapsed_ns = 0;
    group::StealCounters sum;
    const std::string err = group::on_every_thread(T, [&](uint16_t t, const group::FailFn& failed) {
        const bool ok = st.run(t, app->kind, root, me == 0 && t == 0 ? &result : nullptr, &elapsed_ns);
        if (!ok) failed(st.error());
        std::string why;  // also after a failure: every thread meets in the gather
        group::StealCounters s;
        if (!group::gather_steal_counters(rt->endpoint(t), st, s, why)) return failed(why);
        if (s.failed_threads != 0) failed(std::to_string(s.failed_threads) + " threads of the run failed");
        if (t == 0) sum = s;
    });
    bool ok = err.empty();
    if (!ok) std::fprintf(stderr, "satin %s on cluster %u: %s\n", app->name, me, err.c_str());
    if (me == 0 && ok) {
        if (o.inject_error && !result.empty()) result[result.size() / 2] ^= 1;  // the test hook
        const auto s0 = std::chrono::steady_clock::now();
        const std::vector<uint8_t> ref = app->sequential(root);
        const double seq_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
        const bool pass = !ref.empty() && result == ref;
        size_t first_diff = 0;
        while (first_diff < std::min(result.size(), ref.size()) && result[first_diff] == ref[first_diff]) ++first_diff;
        const double par_s = double(elapsed_ns) / 1e9;
        FILE* out = o.quiet ? stderr : stdout;
        std::fprintf(out,
                     "satin %s, policy %s, %s size (%s): %u clusters x %u threads, %s\n"
                     "  parallel: %s in %.3f s; sequential: %s in %.3f s\n"
                     "  steals: local %" PRIu64 " of %" PRIu64 " attempts, wan %" PRIu64 " of %" PRIu64
                     " attempts (most outstanding per thread %" PRIu64 "), idle %.3f s over all threads\n"
                     "  jobs: %" PRIu64 " spawned, %" PRIu64 " run; results sent between clusters %" PRIu64 " (%" PRIu64
                     " bytes); stolen job bytes %" PRIu64 "; CHS trace: %" PRIu64 " WAN steals, %" PRIu64
                     " while the cluster had work\n"
                     "%s\n",
                     app->name, group::to_string(o.policy), o.paper ? "paper" : "test", app->problem(o.paper).c_str(),
                     topo.clusters, T, topo.describe().c_str(), app->describe(result).c_str(), par_s,
                     app->describe(ref).c_str(), seq_s, sum.local_successes, sum.local_attempts, sum.wan_successes,
                     sum.wan_attempts, sum.max_outstanding_wan, double(sum.idle_ns) / 1e9, sum.jobs_spawned,
                     sum.jobs_run, sum.result_msgs, sum.result_bytes, sum.stolen_job_bytes, sum.wan_steals_traced,
                     sum.wan_steals_cluster_busy,
                     pass ? "PASS: the parallel result equals the sequential one byte for byte"
                          : ("FAIL: the parallel result differs from the sequential one (" +
                             std::to_string(result.size()) + " against " + std::to_string(ref.size()) +
                             " bytes, first difference at byte " + std::to_string(first_diff) + ")")
                                .c_str());
        if (!o.image_file.empty() && app->kind == kRaytrace) {
            std::string why;
            if (!write_ppm(o.image_file, root, result, why)) {
                std::fprintf(stderr, "satin: %s\n", why.c_str());
                ok = false;
            }
        }
        if (!o.result_file.empty()) {
            if (FILE* f = std::fopen(o.result_file.c_str(), "w")) {
                std::fprintf(f,
                             "result %s\ntime_s %.6f\nsequential_s %.6f\nlocal_attempts %" PRIu64
                             "\nlocal_steals %" PRIu64 "\nwan_attempts %" PRIu64 "\nwan_steals %" PRIu64
                             "\nmax_outstanding_wan %" PRIu64 "\nidle_s %.6f\njobs_spawned %" PRIu64
                             "\njobs_run %" PRIu64 "\nresult_msgs %" PRIu64 "\nresult_bytes %" PRIu64
                             "\nstolen_job_bytes %" PRIu64 "\nchs_wan_steals_traced %" PRIu64
                             "\nchs_wan_steals_cluster_busy %" PRIu64 "\n",
                             pass ? "PASS" : "FAIL", par_s, seq_s, sum.local_attempts, sum.local_successes,
                             sum.wan_attempts, sum.wan_successes, sum.max_outstanding_wan, double(sum.idle_ns) / 1e9,
                             sum.jobs_spawned, sum.jobs_run, sum.result_msgs, sum.result_bytes, sum.stolen_job_bytes,
                             sum.wan_steals_traced, sum.wan_steals_cluster_busy);
                std::fclose(f);
            }
        }
        std::fflush(nullptr);
        ok = ok && pass;
    }
    return runtime_finish(std::move(rt), ok);
}

}  // namespace iccs::satin
