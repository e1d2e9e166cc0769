// activity.hpp: what a cluster process is doing, kept where its launcher can still read it after
// the process died (issue 34): one page per cluster process, in the run directory
// (/tmp/iccs-<run>/activity-c<cluster>), mapped shared.
//
// The process writes its phase (starting, links, running, ending, finished) and each of its
// threads a short line of what it does now ("DSM LOCK 3", "waiting for a message", "sending to
// cluster 2"); a line is written when the thread starts something that may wait, never per message.
// The launcher reads the page when a cluster dies (SIGKILL leaves no chance to say anything:
// "iccs: cluster 1 died of signal 9 (Killed) while running; thread 0: DSM LOCK 3") and when the
// user stops the run; the process itself reads it when a signal stops it. Under mpirun/srun (no
// launcher of ours) the page is the process's own memory.
//
// Each thread's line sits in a slot of its own with a sequence count (a seqlock: odd while it is
// written), so a reader never takes a torn line; a writer costs two atomic stores and a copy of
// at most 47 bytes. Beside each line, a count the thread advances (the soak's messages delivered).
#pragma once

#include <cstdint>
#include <string>

namespace iccs {

// Where a cluster process is in its life. The launcher stops the others at once when a cluster
// dies before kFinished (it cannot finish the run with them); one that ends after kFinished (its
// program's exit status, its report) ends as it ends.
enum class ClusterPhase : uint32_t {
    kStarting = 0,  // the EAL, pools, rings (what a zeroed page says: nothing written yet)
    kLinks,         // waiting for its links to the other clusters
    kRunning,       // the program runs
    kEnding,        // said it is done; waits until every other cluster is done and nothing is unacked
    kFinished,      // every cluster done: only its report and exit are left
};
const char* to_string(ClusterPhase p);

inline constexpr uint32_t kActivitySlots = 63;     // thread slots of a page (slot 0: the process's main thread)
inline constexpr uint32_t kActivityTextBytes = 48;  // a slot's line, NUL included

// The board's file for cluster `cluster` of a run whose directory is run_dir (/tmp/iccs-<run>).
std::string activity_path(const std::string& run_dir, uint16_t cluster);
// The launcher: create (or empty) the page of every cluster before it starts them, so a cluster
// that dies before it wrote anything reads as "starting". false with err.
bool activity_create(const std::string& path, std::string& err);

// ---- the cluster process

// Map this process's page: the file at path when it exists (our launcher made it), else private
// memory (mpirun/srun, tests). Once per process; later calls keep the first page. Never fails:
// without a file the board still serves the process's own reports.
void activity_open(const std::string& path, uint16_t cluster);
// The process's phase, with a few words on it ("links: 2 of 4 up", "running alltoall").
void activity_phase(ClusterPhase p, const char* text);
// This thread writes slot `slot` from now on: 0 for the thread that runs the cluster (the
// process's main thread, or the one run_cluster runs on), t + 1 for compute thread t. A slot
// beyond kActivitySlots, or no page: the thread's lines are not kept (nothing fails).
void activity_bind_thread(uint32_t slot);
// What this thread starts now, printf-style, cut to 47 bytes ("" clears the line). Costs a
// vsnprintf: call it where a thread may wait (a lock, a barrier, a page fetch, a receive), not per message.
void activity_doing(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// The same with a constant string (no formatting): the hot-path form.
void activity_doing_str(const char* text);
// What this thread does for the scope's lifetime: `what`, and `number` after it unless kNoNumber
// ("DSM LOCK 3"), formatted without printf (a few tens of ns: it sits on the runtime's request
// and the DSM's lock and fetch paths). At its end the enclosing scope's line comes back, or,
// outside any, "after <this>": a thread back in the program's own code (spinning on a flag)
// still says what it did last. Nests: a scope inside another says both ("DSM LOCK 3: request to
// cluster 1").
class ActivityScope {
   public:
    static constexpr uint64_t kNoNumber = UINT64_MAX;
    explicit ActivityScope(const char* what, uint64_t number = kNoNumber);
    ~ActivityScope();
    ActivityScope(const ActivityScope&) = delete;
    ActivityScope& operator=(const ActivityScope&) = delete;

   private:
    char prev_[kActivityTextBytes];
    bool on_;
};
// Advance this thread's count (the soak's messages delivered); relaxed, the thread's own cache line.
void activity_progress(uint64_t n);
// One line of what this process does now: "running alltoall; thread 0: sending to cluster 2;
// thread 1: waiting for a message" (the phase's text, then every slot with a line).
std::string activity_describe();
// The same, async-signal-safe: into buf (at most len - 1 bytes and a NUL), no allocation.
size_t activity_describe_to(char* buf, size_t len);

// ---- the launcher (or anyone) reading a page, also of a process that died

struct ActivityReport {
    bool readable = false;
    ClusterPhase phase = ClusterPhase::kStarting;
    std::string line;        // as activity_describe()
    uint64_t progress = 0;   // the slots' counts summed
    // A compute thread took its slot (activity_bind_thread(t + 1)): the program is past its
    // CREATE (PARMACS) or the runtime started its threads, i.e. in its parallel part.
    bool program_threads = false;
};
ActivityReport activity_read(const std::string& path);

}  // namespace iccs
