// steal_tsan.cpp: group/steal.hpp under ThreadSanitizer (test `steal-race-free-tsan`): the four
// Satin programs under RS, CHS and CRS on 3 simulated clusters x 2 threads in 2 sites over the
// loopback runtime (dsm/testing), each result against its sequential one and the known answer
// (tests/unit/satin_known.hpp); a run that fails on any thread fails the test. A data race in the
// deques, the lent-job table, the idle flags or the result hand-off is reported by TSan (exit 66).
// Not Catch2: a plain driver built with -fsanitize=thread (the unit binary is not).
#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>
#include "loopback_runtime.hpp"
#include "satin_apps.hpp"
#include "satin_known.hpp"
#include "steal.hpp"
using namespace iccs; using namespace iccs::group;
namespace {
// The kinds table of satin.cpp without its runner (which links the group programs).
std::vector<JobFn> kinds() {
    return {iccs::satin::integrate_app().job, iccs::satin::nqueens_app().job, iccs::satin::raytrace_app().job,
            iccs::satin::tsp_app().job};
}
}  // namespace
int main() {
  const satin::App apps[] = {satin::integrate_app(), satin::nqueens_app(), satin::raytrace_app(), satin::tsp_app()};
  int bad = 0;
  for (auto& app : apps) for (StealPolicy p : {StealPolicy::kRs, StealPolicy::kChs, StealPolicy::kCrs}) {
    const uint16_t C = 3, T = 2;
    iccs::testing::LoopbackWorld lw(C, T);
    Topology topo; topo.clusters = C; topo.threads = T; topo.sites = 2; topo.site_of = {0, 0, 1}; topo.site_id = {0, 1}; topo.clusters_of = {{0, 1}, {2}};
    StealOptions o; o.policy = p;
    std::vector<std::unique_ptr<Stealer>> st;
    for (uint16_t c = 0; c < C; ++c) st.push_back(std::make_unique<Stealer>(lw.runtime(c), topo, o, kinds()));
    auto root = app.root_args(false, 1);
    std::vector<uint8_t> res; std::vector<std::thread> th;
    std::atomic<int> thread_failures{0};  // a failed run() or counter gather on any thread fails the test
    for (uint16_t c = 0; c < C; ++c) for (uint16_t t = 0; t < T; ++t) th.emplace_back([&, c, t] {
      if (!st[c]->run(t, app.kind, root, c == 0 && t == 0 ? &res : nullptr, nullptr)) {
        std::printf("fail on thread %u.%u: %s\n", c, t, st[c]->error().c_str());
        ++thread_failures;
      }
      StealCounters s; std::string e;
      if (!gather_steal_counters(lw.runtime(c).endpoint(t), *st[c], s, e)) {
        std::printf("fail on thread %u.%u: counters: %s\n", c, t, e.c_str());
        ++thread_failures;
      } });
    for (auto& x : th) x.join();
    lw.stop();
    std::string why;
    const bool same = res == app.sequential(root), known = satin_known::check(app.name, root, res, why);
    const bool ok = same && known && thread_failures == 0;
    bad += !ok;
    std::printf("%s %s %s (%s; %d thread failures)\n", app.name, to_string(p), ok ? "ok" : "FAILED",
                same ? "equals the sequential result" : "DIFFERS from the sequential result", thread_failures.load());
    std::printf("  known answer: %s%s\n", why.c_str(), known ? "" : " (WRONG)");
  }
  std::printf("%s: %d of 12 runs failed\n", bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
