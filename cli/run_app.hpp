// run_app.hpp: `iccs run <app>`: one of the eight applications (apps/) across clusters on the
// DSM, and the merged report of a run (the application's verdict and time from cluster 0, the
// runtime's, proxies' and DSM's counters of every cluster), as text or as one JSON object.
#pragma once

#include <string>
#include <vector>

#include "run_rt.hpp"

namespace iccs {

// jacobi matmul gauss fft tsp water barnes unstructured: the rows of `iccs run` (run_table.cpp).
const std::vector<const char*>& app_names();
bool is_app_name(const std::string& name);

// One run of an application, gathered from the files its cluster processes wrote (ICCS_REPORT).
struct AppOutcome {
    int rc = 2;              // the launcher's: 0 every cluster succeeded, 1 a failure, 2 usage
    RtRunInfo info;          // the resolved run (clusters, threads, transport, proxies, ...)
    std::string app_json;    // cluster 0's result object ("" when it wrote none)
    bool pass = false;       // rc == 0 and the app said PASS
    double parallel_s = -1;  // < 0: unknown
    std::vector<std::string> rt_json;   // per cluster ("" when missing)
    std::vector<std::string> dsm_json;  // per cluster ("" when missing)
    // Over every proxy of every cluster (transport iccs): -1 when no proxy reported it.
    struct Proxy {
        unsigned cluster = 0, proxy = 0;
        double msgs_tx = 0, msgs_rx = 0, bytes_tx = 0, bytes_rx = 0;
        double msg_time_count = 0, msg_time_us = -1, queue_len = 0, utilization = 0;
        double total_s = -1;  // how long its loop ran (the denominator of utilization and queue length)
    };
    std::vector<Proxy> proxies;
    double msg_time_us_mean = -1, queue_len_mean = -1, utilization_mean = -1;
    double rt_msgs = -1, rt_bytes = -1;
    std::string trace_json;  // --trace: {"file", "records", "tx", "rx", "dropped"}; "" when not traced
};

// Runs `app` (its binary next to this one: ../apps/iccs-app-<app>-dsm) as `setup` says (the
// shared options, configured once), giving the application `-p clusters*threads` followed by
// `app_args` (--size, ...). `quiet_fd` >= 0: every output of the run (launcher and clusters) goes
// to that descriptor instead of stdout/stderr. `report_to_file`: as run_reported's (`--report FILE`).
void run_app(const std::string& app, const RunSetup& setup, const std::vector<std::string>& app_args, int quiet_fd,
             AppOutcome& out, bool report_to_file = false);

// The same for any program (PATH) linked with the runtime: given `prog_args`, its clusters' report
// files gathered into `out` (app_json stays "" unless the program wrote ICCS_REPORT.app.c0, as the
// applications do). `report_to_file`: the launcher prints nothing of its own and the clusters write
// their counters only to the report files (`--report FILE`). `app`: an application run (the
// launcher prints no closing PASS/FAIL line of its own).
void run_reported(const std::string& bin, const RunSetup& setup, const std::vector<std::string>& prog_args,
                  int quiet_fd, bool report_to_file, bool app, AppOutcome& out);

// The run's shape as JSON members, each with its leading comma: threads, clusters, cluster_size,
// proxies_per_cluster, proxies_auto, dispatch, transport, delay_us, polling, fabric.
std::string shape_members_json(const RtRunInfo& in);

// A value of AppOutcome for a table: "%.3f", or "-" when no source gave it (< 0).
std::string fmt3(double v);

}  // namespace iccs
