// socket_runtime.hpp: test support, not part of the library users link. One cluster per process,
// the processes joined by Unix stream sockets (a full mesh the test launcher creates,
// tests/dsm/run_parmacs_clusters.py), behind the Runtime interface: so a PARMACS program's
// replayed start-up, its stdout rules and its DSM traffic run across real processes before the
// cluster runtime (issue 6) is merged.
#pragma once

#include <memory>
#include <string>

#include "runtime.hpp"

namespace iccs::testing {

// From ICCS_TEST_CLUSTER (this cluster's id), ICCS_TEST_CLUSTERS, ICCS_TEST_THREADS and
// ICCS_TEST_FDS (per cluster id, the fd of the socket to it; "-" for this cluster). nullptr with
// `err` naming the variable when they do not describe a run.
std::unique_ptr<Runtime> socket_runtime_from_env(std::string& err);
// Every cluster's part is over: a last barrier of every compute thread (so no cluster leaves
// while another may still fetch from it), then the threads stop.
void socket_runtime_finish(Runtime& rt);

}  // namespace iccs::testing
