// cluster_programs.hpp: the built-in programs of a cluster run (ClusterPlan::workload), each run
// on every compute thread over its own convergence module (compute/README.md says what each
// checks). The runtime's built-in programs are beside them, in rt_programs.cpp.
#pragma once

#include "cluster.hpp"

namespace iccs {

// alltoall: every thread to every thread of every other cluster, each message checked.
bool program_alltoall(ComputeEnv& env);
// pingpong (`iccs bench rtt`): round-trip times from thread 0 of cluster 0 to cluster 1.
bool program_pingpong(ComputeEnv& env);
// errors: refused connect, time-out, end-of-stream, closed, a cluster that dies.
bool program_errors(ComputeEnv& env);
// stream (`iccs bench compare`): one sender to one receiver as fast as the window takes it.
bool program_stream(ComputeEnv& env);

}  // namespace iccs
