// run_mpi.cpp: the row --mpi of run_table.cpp, `iccs run --mpi PATH [run options] [-- ARGS]`: an
// MPI program over the proxies, through Debian's mpirun with the provider `iccs` (mpi/provider/README.md) and every setting
// filled in: the program's standard output, standard error and exit status are mpirun's; the
// launcher's report (the agents' per-rank and per-proxy counters) goes to standard error, or to
// --report FILE as JSON.
#include "run_table.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "clock.hpp"
#include "cluster.hpp"
#include "config.hpp"
#include "../mpi/provider/mpi_machine.hpp"  // inline_agent_falls_back
#include "runtime_launch.hpp"

namespace iccs {

namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// A JSON document without its trailing blanks, to be nested in another.
std::string trimmed(std::string doc) {
    while (!doc.empty() && (doc.back() == '\n' || doc.back() == ' ')) doc.pop_back();
    return doc;
}

// A number of a flat JSON object the agent wrote ("key":123), or 0.
uint64_t json_u64(const std::string& obj, const std::string& key) {
    const std::string k = "\"" + key + "\":";
    const size_t at = obj.find(k);
    return at == std::string::npos ? 0 : std::strtoull(obj.c_str() + at + k.size(), nullptr, 10);
}

// The objects of the JSON array under key (one level of braces inside each is allowed).
std::vector<std::string> json_objects(const std::string& doc, const std::string& key) {
    std::vector<std::string> out;
    size_t at = doc.find("\"" + key + "\":[");
    if (at == std::string::npos) return out;
    at = doc.find('[', at) + 1;
    int depth = 0;
    size_t start = 0;
    for (size_t i = at; i < doc.size(); ++i) {
        if (doc[i] == '{' && depth++ == 0) start = i;
        else if (doc[i] == '}' && --depth == 0) out.push_back(doc.substr(start, i - start + 1));
        else if (doc[i] == ']' && depth == 0) break;
    }
    return out;
}

void print_report(const std::vector<std::string>& domains, FILE* out) {
    std::fprintf(out, "iccs run --mpi: provider counters per rank (same cluster = shared memory, other = proxies)\n");
    for (const std::string& d : domains)
        for (const std::string& r : json_objects(d, "ranks"))
            std::fprintf(out,
                         "  rank %llu: sent same %llu msgs %llu B, other %llu msgs %llu B; received same %llu msgs %llu B, "
                         "other %llu msgs %llu B; unexpected %llu, posted receives %llu, peeks %llu (%llu found nothing), "
                         "claims %llu, discards %llu, cancels %llu, truncations %llu, injects %llu, failed %llu; sends that waited "
                         "for ring room %llu, waits that slept on the agent ring's room %llu\n",
                         (unsigned long long)json_u64(r, "rank"), (unsigned long long)json_u64(r, "sent_local_msgs"),
                         (unsigned long long)json_u64(r, "sent_local_bytes"), (unsigned long long)json_u64(r, "sent_remote_msgs"),
                         (unsigned long long)json_u64(r, "sent_remote_bytes"), (unsigned long long)json_u64(r, "recv_local_msgs"),
                         (unsigned long long)json_u64(r, "recv_local_bytes"), (unsigned long long)json_u64(r, "recv_remote_msgs"),
                         (unsigned long long)json_u64(r, "recv_remote_bytes"), (unsigned long long)json_u64(r, "unexpected"),
                         (unsigned long long)json_u64(r, "posted_recvs"), (unsigned long long)json_u64(r, "peeks"),
                         (unsigned long long)json_u64(r, "peek_misses"), (unsigned long long)json_u64(r, "claims"),
                         (unsigned long long)json_u64(r, "discards"), (unsigned long long)json_u64(r, "cancels"),
                         (unsigned long long)json_u64(r, "truncations"), (unsigned long long)json_u64(r, "injects"),
                         (unsigned long long)json_u64(r, "errors"), (unsigned long long)json_u64(r, "send_ring_full"),
                         (unsigned long long)json_u64(r, "room_blocks"));
    bool any = false;
    for (const std::string& d : domains)
        for (const std::string& p : json_objects(d, "proxies")) {
            if (!any) std::fprintf(out, "iccs run --mpi: proxies\n");
            any = true;
            const size_t u = p.find("\"utilization\":");
            std::fprintf(out, "  proxy %llu.%llu: msgs tx %llu rx %llu, bytes tx %llu rx %llu, retransmissions %llu, utilization %s\n",
                         (unsigned long long)json_u64(p, "cluster"), (unsigned long long)json_u64(p, "proxy"),
                         (unsigned long long)json_u64(p, "msgs_tx"), (unsigned long long)json_u64(p, "msgs_rx"),
                         (unsigned long long)json_u64(p, "bytes_tx"), (unsigned long long)json_u64(p, "bytes_rx"),
                         (unsigned long long)json_u64(p, "retransmissions"),
                         u == std::string::npos ? "?" : p.substr(u + 14, p.find_first_of(",}", u) - u - 14).c_str());
        }
}

// SIGINT/SIGTERM to `iccs run --mpi` (a Ctrl-C aimed at it alone, `timeout`, a batch system):
// handed on to mpirun, which ends its ranks (their agents then see them go and report).
volatile sig_atomic_t g_user_signal = 0;
void note_user_signal(int sig) { g_user_signal = sig; }

}  // namespace

int launch_mpi(const ProgramRow& row, const std::string& program, const cli::Args& p) {
    (void)row;
    auto usage_error = [](const std::string& msg) { cli::usage_error("run --mpi", msg); };
    const std::string& config_path = p.config_path;
    const auto& overrides = p.overrides;
    const std::vector<std::string>& args = p.rest;
    const std::string transport_s = p.text("--transport"), delay_s = p.text("--delay-us"), report_file = p.text("--report");
    std::vector<std::string> mpirun_args;  // every --mpirun-arg, in order
    for (size_t i = 0; i + 1 < p.given.size(); ++i)
        if (p.given[i] == "--mpirun-arg") mpirun_args.push_back(p.given[i + 1]);
    const ConfigResult cr = configure(config_path, overrides);
    if (!cr.ok()) {
        std::fprintf(stderr, "%s\n", cr.error.c_str());
        return 2;
    }
    const MachineConfig& cfg = *cr.config;
    RtTransport transport = cfg.runtime.transport;
    if (!transport_s.empty() && !parse_transport(transport_s, transport))
        usage_error("bad value '" + transport_s + "' for --transport: allowed values are iccs, direct, delay");
    uint64_t delay_ns = cfg.runtime.delay_us * 1000;
    if (!delay_s.empty()) {
        if (transport != RtTransport::kDelay) usage_error("--delay-us is for --transport delay");
        if (delay_s == "auto") usage_error("--delay-us auto is for the runtime's programs; give MPI runs a number");
        delay_ns = static_cast<uint64_t>(p.real("--delay-us", 0) * 1000);
    }
    if (access(program.c_str(), X_OK) != 0) usage_error(program + ": not an executable program (" + std::strerror(errno) + ")");
    const bool magpie = p.text("--collectives", "mpi") == "magpie";
    const std::string magpie_lib = ICCS_MPI_MAGPIE_LIB;
    if (magpie && (magpie_lib.empty() || access(magpie_lib.c_str(), R_OK) != 0))
        usage_error("--collectives magpie: libiccs-magpie.so is not built" +
                    (magpie_lib.empty() ? std::string(" (Open MPI's libopenmpi-dev was missing when meson configured)")
                                        : " (" + magpie_lib + ": " + std::strerror(errno) + ")"));
    const uint32_t ranks = cfg.machine.clusters * cfg.cluster.compute_threads;

    // The run's files: an empty machine file when none was given (the flags travel as overrides:
    // the provider reads the same file and the same overrides as this launcher did), the report base.
    const char* tmpdir = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp") + "/iccs-mpirun-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
        std::fprintf(stderr, "iccs run --mpi: mkdtemp %s: %s\n", tmpl.c_str(), std::strerror(errno));
        return 2;
    }
    const std::string tmp = tmpl;
    std::string machine_file = config_path;
    if (machine_file.empty()) {
        machine_file = tmp + "/machine.toml";
        std::ofstream mf(machine_file);
        mf << "# iccs run --mpi: the defaults; the flags are in ICCS_OVERRIDES\n";
        // memif is a virtual link: jumbo frames. A 1 MiB stream (window 64, 2 x 1 ranks) moved
        // ~30% more at MTU 9000 than at 1500 (mpi/provider/README.md, "Speed"); --mtu still wins.
        // (Not memif's zero-copy mode, [machine] memif_zero_copy: more bandwidth, but 8-byte
        // ping-pongs were slower with it: mpi/provider/SPEED.md, "memif's copies".)
        if (cfg.machine.fabric == Fabric::kMemif) mf << "[machine]\nmtu_bytes = " << kMpiMemifMtuBytes << "\n";
    } else {
        machine_file = std::filesystem::absolute(machine_file).string();
    }
    std::string ov;
    for (const auto& [k, v] : overrides) ov += k + "=" + v + "\n";
    const std::string report_base = tmp + "/report";
    const std::string run_id = std::to_string(getpid());
    setenv("FI_PROVIDER_PATH", ICCS_MPI_PROVIDER_DIR, 1);
    setenv(kEnvConfig, machine_file.c_str(), 1);
    setenv(kEnvOverrides, ov.c_str(), 1);
    setenv(kEnvRunId, run_id.c_str(), 1);
    setenv(kEnvReport, report_base.c_str(), 1);
    setenv(kEnvTransport, to_string(transport), 1);
    setenv(kEnvDelayNs, std::to_string(delay_ns).c_str(), 1);

    // fabric af_packet: the run's Linux bridge and a veth pair per proxy, made here as `iccs run`
    // makes them for its clusters (afp_fabric_up), under the run id the agents take: "m" + ICCS_RUN_ID
    // (mpi/provider/mpi_machine.cpp; a pid has at most 7 digits, so they use it whole). Without
    // them each agent's af_packet port found no interface and every rank died in MPI_Init's first
    // exchange ("cannot create device net_af_packet0,iface=...").
    ClusterPlan afp;
    const bool afp_fabric = transport == RtTransport::kIccs && cfg.machine.fabric == Fabric::kAfPacket;
    if (afp_fabric) {
        std::string err;
        std::error_code ec;
        if (run_id.size() > 7 || !plan_from_config(cfg, 0, afp, err)) {
            std::fprintf(stderr, "iccs run --mpi: fabric af_packet: %s\n",
                         err.empty() ? ("run id " + run_id + " is longer than 7 characters").c_str() : err.c_str());
            std::filesystem::remove_all(tmp, ec);
            return 2;
        }
        afp.run_id = "m" + run_id;
        if (!afp_fabric_up(afp)) {  // it said why (root and iproute2 needed)
            afp_fabric_down(afp);   // what was made of it
            std::filesystem::remove_all(tmp, ec);
            return 2;
        }
    }

    std::vector<std::string> cmd = {"mpirun", "-n", std::to_string(ranks)};
    if (geteuid() == 0) cmd.push_back("--allow-run-as-root");
    if (ranks > host_core_count()) cmd.push_back("--oversubscribe");
    cmd.insert(cmd.end(), {"--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "mtl_ofi_provider_include", "iccs"});
    // One-sided communication (MPI_Put, MPI_Get, MPI_Accumulate...) on Open MPI's point-to-point
    // messages, so over the provider and the proxies: its default component (osc rdma) reaches
    // every rank of this host through the shared-memory BTL and went around the proxies (the
    // WAN emulation, the counters) between clusters; osc sm would take MPI_Win_allocate windows
    // the same way. MPI_Win_allocate_shared is then refused (ranks of two clusters share no memory).
    cmd.insert(cmd.end(), {"--mca", "osc", "pt2pt"});
    // Open MPI's shared-memory BTL makes a backing file per rank (/dev/shm by default) even under
    // the cm PML, which never uses it, and unlinks it only in MPI_Finalize: ranks that mpirun ends
    // (a signal to this launcher, --timeout, a killed rank) left theirs in /dev/shm. In the run's
    // own directory they go with it.
    cmd.insert(cmd.end(), {"--mca", "btl_vader_backing_directory", tmp});
    for (const char* var : {"FI_PROVIDER_PATH", kEnvConfig, kEnvOverrides, kEnvRunId, kEnvReport, kEnvTransport, kEnvDelayNs}) {
        cmd.push_back("-x");
        cmd.push_back(var);
    }
    // MagPIe's collectives: preloaded in front of libmpi (as for a binary that cannot be relinked),
    // the ranks placed by the same machine file (ICCS_CONFIG, ICCS_OVERRIDES); its counters summed
    // at MPI_Finalize, into --report's JSON or as its own table on standard error.
    const std::string magpie_report = report_file.empty() ? "-" : tmp + "/magpie.json";
    if (magpie) {
        const char* preloaded = std::getenv("LD_PRELOAD");
        const std::string preload =
            magpie_lib + (preloaded != nullptr && *preloaded != '\0' ? ":" + std::string(preloaded) : std::string());
        cmd.insert(cmd.end(), {"-x", "LD_PRELOAD=" + preload, "-x", "ICCS_MAGPIE_REPORT=" + magpie_report});
    }
    cmd.insert(cmd.end(), mpirun_args.begin(), mpirun_args.end());
    cmd.push_back(program);
    cmd.insert(cmd.end(), args.begin(), args.end());
    std::string line;
    for (const std::string& c : cmd) line += (line.empty() ? "" : " ") + c;
    std::fprintf(stderr, "iccs run --mpi: %s (%u clusters x %u ranks, transport %s%s, collectives %s)\n", line.c_str(),
                 cfg.machine.clusters, cfg.cluster.compute_threads, to_string(transport),
                 transport == RtTransport::kIccs ? (", fabric " + std::string(to_string(cfg.machine.fabric))).c_str() : "",
                 magpie ? "MagPIe's (libiccs-magpie.so)" : "Open MPI's");
    const uint32_t world = cfg.machine.clusters * cfg.cluster.compute_threads;
    if (transport == RtTransport::kIccs && cfg.cluster.polling == Polling::kInline &&
        mpi::inline_agent_falls_back(cfg.cluster.compute_threads, world, host_core_count()))
        std::fprintf(stderr,
                     "iccs run --mpi: polling inline needs a core for each rank and each agent's bridge (%u); this "
                     "host has %u: the agents poll adaptively (mpi/provider/README.md; --cluster-size 1 keeps "
                     "inline, in the rank)\n",
                     2 * world, host_core_count());
    std::fflush(stderr);

    // A closed stdout or stderr (`| head`) must not kill this launcher before it removes the run's
    // directory and collects the reports; mpirun itself keeps the default (an ignored signal stays
    // ignored across exec).
    signal(SIGPIPE, SIG_IGN);
    const pid_t pid = fork();
    if (pid == 0) {
        signal(SIGPIPE, SIG_DFL);
        std::vector<char*> av;
        for (std::string& c : cmd) av.push_back(c.data());
        av.push_back(nullptr);
        execvp("mpirun", av.data());
        std::fprintf(stderr, "iccs run --mpi: cannot start mpirun: %s (Debian's openmpi-bin; ./iccs installs it)\n",
                     std::strerror(errno));
        _exit(127);
    }
    struct sigaction sa {};
    sa.sa_handler = note_user_signal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    int status = 0;
    int forwarded = 0;
    const uint64_t timeout_s = p.u64("--timeout", 86400);
    const uint64_t deadline = now_ns() + timeout_s * 1'000'000'000ull;
    bool stopped = false;
    for (;;) {
        const pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid || (w < 0 && errno != EINTR)) break;
        if (const int sig = g_user_signal; sig != 0 && forwarded < 2) {
            g_user_signal = 0;
            ++forwarded;  // a second one: mpirun's own "abort now" on its second SIGINT
            std::fprintf(stderr, "iccs run --mpi: %s: handed to mpirun\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
            kill(pid, sig);
        }
        if (!stopped && now_ns() >= deadline) {
            std::fprintf(stderr, "iccs run --mpi: stopping mpirun after --timeout %llu s\n", (unsigned long long)timeout_s);
            kill(pid, SIGTERM);  // mpirun ends its ranks; their agents see them go
            stopped = true;
        }
        usleep(20'000);
    }
    const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);

    // The agents write their reports after their last rank left, which may be after mpirun ended.
    // A cluster of one rank under inline polling runs in its rank (mpi/provider/README.md), which
    // writes the cluster's report at MPI_Finalize, before it exits and so before mpirun ends: a
    // report missing then never comes (a rank ended by a signal or an error writes none), and the
    // 10 s wait for agents kept a Ctrl-C'd run 7.5 s after its ranks had gone.
    const bool in_rank = transport == RtTransport::kIccs && cfg.cluster.compute_threads == 1 &&
                         cfg.cluster.polling == Polling::kInline;
    const int report_wait_ms = in_rank ? 0 : 10'000;
    const uint32_t domains = transport == RtTransport::kIccs ? cfg.machine.clusters : 1;
    std::vector<std::string> docs;
    for (int wait_ms = 0; wait_ms <= report_wait_ms; wait_ms += 50) {
        docs.clear();
        for (uint32_t d = 0; d < domains; ++d) {
            const std::string f = report_base + ".mpi.c" + std::to_string(d);
            struct stat st {};
            if (stat(f.c_str(), &st) == 0 && st.st_size > 0) docs.push_back(read_file(f));
        }
        if (docs.size() == domains || wait_ms >= report_wait_ms) break;
        usleep(50'000);
    }
    if (!report_file.empty()) {
        FILE* out = std::fopen(report_file.c_str(), "w");
        if (out == nullptr) {
            std::fprintf(stderr, "iccs run --mpi: --report %s: %s\n", report_file.c_str(), std::strerror(errno));
        } else {
            std::fprintf(out, "{\"program\":%s,\"exit_status\":%d,\"clusters\":%u,\"cluster_size\":%u,\"transport\":\"%s\","
                              "\"collectives\":\"%s\",\"domains\":[",
                         json_quote(program).c_str(), rc, cfg.machine.clusters, cfg.cluster.compute_threads, to_string(transport),
                         magpie ? "magpie" : "mpi");
            for (size_t i = 0; i < docs.size(); ++i) std::fprintf(out, "%s%s", i ? "," : "", trimmed(docs[i]).c_str());
            std::fprintf(out, "]");
            if (magpie) {  // the library's summed counters (null when no rank reached MPI_Finalize)
                const std::string m = trimmed(read_file(magpie_report));
                std::fprintf(out, ",\"magpie\":%s", m.empty() ? "null" : m.c_str());
            }
            std::fprintf(out, "}\n");
            std::fclose(out);
        }
    } else {
        print_report(docs, stderr);
    }
    if (docs.size() != domains) {
        if (in_rank)
            std::fprintf(stderr,
                         "iccs run --mpi: %zu of %u clusters' reports came (each cluster runs in its rank, which writes "
                         "the report at MPI_Finalize: a rank ended by a signal or an error writes none)\n",
                         docs.size(), domains);
        else
            std::fprintf(stderr, "iccs run --mpi: %zu of %u agents' reports came (a run that failed before its ranks attached?)\n",
                         docs.size(), domains);
    }
    if (afp_fabric) afp_fabric_down(afp);
    std::error_code ec;
    std::filesystem::remove_all(tmp, ec);
    return rc;
}

}  // namespace iccs
