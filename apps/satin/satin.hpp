// satin.hpp: `iccs run integrate|nqueens|raytrace|satin-tsp`: a Satin program on every compute
// thread of real cluster processes (group/steal.hpp), its result checked against the sequential
// computation in the same run, the steal counters summed over the clusters.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime.hpp"
#include "steal.hpp"

namespace iccs::satin {

// "integrate", "nqueens", "raytrace", "satin-tsp".
bool is_program(const std::string& name);
const char* program_names();  // "integrate, nqueens, raytrace, satin-tsp"
std::vector<std::string> program_list();  // the same, in table order (the rows of `iccs run`)

struct RunOptions {
    std::string app;
    group::StealPolicy policy = group::StealPolicy::kCrs;
    bool paper = false;
    bool inject_error = false;  // test hook: corrupt the parallel result before the check (must FAIL)
    uint64_t seed = 1;
    uint64_t timeout_ms = 600'000;
    std::string image_file;   // raytrace: the image as PPM (cluster 0)
    std::string result_file;  // cluster 0: "KEY VALUE" lines for the cli's report
    bool quiet = false;       // cluster 0 prints nothing on stdout (the cli prints JSON)
};

// Every cluster process: run the program under the policy, gather the counters, and on cluster 0
// the sequential computation and the check. Returns runtime_finish's status (1 on FAIL).
int program(std::unique_ptr<Runtime> rt, const group::Topology& topo, const RunOptions& o);

}  // namespace iccs::satin
