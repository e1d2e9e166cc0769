// activity.cpp: the activity board (activity.hpp): one shared page per cluster process.
#include "activity.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace iccs {

namespace {

constexpr uint32_t kMagic = 0x49434143;  // "ICAC"
constexpr uint32_t kWords = kActivityTextBytes / 8;

// A line in words of relaxed atomics: a reader may run while the writer writes (another process
// too); the sequence count tells it to try again, and no byte is a data race.
struct Line {
    std::atomic<uint32_t> seq{0};  // odd while the line is written
    std::atomic<uint64_t> words[kWords];

    void write(const char* text, size_t n) {
        char buf[kActivityTextBytes] = {};
        std::memcpy(buf, text, n < kActivityTextBytes - 1 ? n : kActivityTextBytes - 1);
        const uint32_t q = seq.load(std::memory_order_relaxed);
        seq.store(q + 1, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_release);
        for (uint32_t w = 0; w < kWords; ++w) {
            uint64_t v;
            std::memcpy(&v, buf + 8 * w, 8);
            words[w].store(v, std::memory_order_relaxed);
        }
        seq.store(q + 2, std::memory_order_release);
    }
    // Into out (kActivityTextBytes). A process killed in the middle of a write leaves the count
    // odd for good: after a few tries the words are taken as they are.
    void read(char* out) const {
        for (int tries = 0; tries < 64; ++tries) {
            const uint32_t q1 = seq.load(std::memory_order_acquire);
            for (uint32_t w = 0; w < kWords; ++w) {
                const uint64_t v = words[w].load(std::memory_order_relaxed);
                std::memcpy(out + 8 * w, &v, 8);
            }
            std::atomic_thread_fence(std::memory_order_acquire);
            if ((q1 & 1) == 0 && seq.load(std::memory_order_relaxed) == q1) break;
        }
        out[kActivityTextBytes - 1] = '\0';
    }
};

struct alignas(64) Slot {
    Line line;
    std::atomic<uint64_t> progress{0};
};
static_assert(sizeof(Slot) == 64);

struct Page {
    uint32_t magic;
    std::atomic<uint32_t> phase;
    Line phase_text;
    Slot slots[kActivitySlots];
};
static_assert(sizeof(Page) <= 4096);
static_assert(std::atomic<uint64_t>::is_always_lock_free);  // shared between processes

Page* g_page = nullptr;
thread_local Slot* t_slot = nullptr;
thread_local char t_text[kActivityTextBytes];  // this thread's line as last written (for scopes)

void write_own(const char* text, size_t n) {
    n = n < kActivityTextBytes - 1 ? n : kActivityTextBytes - 1;
    std::memcpy(t_text, text, n);
    t_text[n] = '\0';
    t_slot->line.write(text, n);
}

// Async-signal-safe string building (describe_to): no stdio, no allocation.
struct Out {
    char* buf;
    size_t len, n = 0;
    void add(const char* s) {
        while (*s != '\0' && n + 1 < len) buf[n++] = *s++;
        buf[n] = '\0';
    }
    void add_uint(uint32_t v) {
        char d[12];
        int k = 0;
        do {
            d[k++] = static_cast<char>('0' + v % 10);
            v /= 10;
        } while (v != 0);
        while (k > 0 && n + 1 < len) buf[n++] = d[--k];
        buf[n] = '\0';
    }
};

size_t describe_page(const Page& page, char* buf, size_t len) {
    if (len == 0) return 0;
    Out o{buf, len};
    buf[0] = '\0';
    const auto phase = static_cast<ClusterPhase>(page.phase.load(std::memory_order_relaxed));
    char text[kActivityTextBytes];
    page.phase_text.read(text);
    o.add(text[0] != '\0' ? text : to_string(phase));
    for (uint32_t s = 0; s < kActivitySlots; ++s) {
        page.slots[s].line.read(text);
        if (text[0] == '\0') continue;
        o.add("; ");
        if (s == 0) {
            o.add("main");
        } else {
            o.add("thread ");
            o.add_uint(s - 1);
        }
        o.add(": ");
        o.add(text);
    }
    return o.n;
}

}  // namespace

const char* to_string(ClusterPhase p) {
    switch (p) {
        case ClusterPhase::kStarting: return "starting";
        case ClusterPhase::kLinks: return "waiting for its links";
        case ClusterPhase::kRunning: return "running";
        case ClusterPhase::kEnding: return "ending";
        case ClusterPhase::kFinished: return "finished";
    }
    return "?";
}

std::string activity_path(const std::string& run_dir, uint16_t cluster) {
    return run_dir + "/activity-c" + std::to_string(cluster);
}

bool activity_create(const std::string& path, std::string& err) {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, 4096) != 0) {
        err = path + ": " + std::strerror(errno);
        if (fd >= 0) close(fd);
        return false;
    }
    close(fd);
    return true;
}

void activity_open(const std::string& path, uint16_t /*cluster*/) {
    if (g_page != nullptr) return;
    void* p = MAP_FAILED;
    if (!path.empty()) {
        const int fd = open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        struct stat st{};
        if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size >= 4096)
            p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (fd >= 0) close(fd);
    }
    if (p == MAP_FAILED) p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;  // no board: every call below does nothing
    auto* page = static_cast<Page*>(p);
    page->magic = kMagic;
    g_page = page;
}

void activity_phase(ClusterPhase p, const char* text) {
    // Forward only: the runtime over iccs ends in two layers (runtime_finish, then run_cluster's
    // end of run), and the later one's "ending" must not undo the other's "finished".
    if (g_page == nullptr || static_cast<uint32_t>(p) < g_page->phase.load(std::memory_order_relaxed)) return;
    g_page->phase_text.write(text, std::strlen(text));
    g_page->phase.store(static_cast<uint32_t>(p), std::memory_order_release);
}

void activity_bind_thread(uint32_t slot) {
    t_slot = g_page != nullptr && slot < kActivitySlots ? &g_page->slots[slot] : nullptr;
    if (t_slot != nullptr) write_own("", 0);
}

void activity_doing(const char* fmt, ...) {
    if (t_slot == nullptr) return;
    char buf[kActivityTextBytes];
    va_list ap;
    va_start(ap, fmt);
    const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    write_own(buf, n < 0 ? 0 : static_cast<size_t>(n));
}

void activity_doing_str(const char* text) {
    if (t_slot != nullptr) write_own(text, std::strlen(text));
}

ActivityScope::ActivityScope(const char* what, uint64_t number) : on_(t_slot != nullptr) {
    if (!on_) return;
    std::memcpy(prev_, t_text, sizeof prev_);
    char buf[kActivityTextBytes];
    size_t n = 0;
    if (prev_[0] != '\0' && std::strncmp(prev_, "after ", 6) != 0) {  // inside another: "DSM LOCK 3: request to cluster 1"
        for (const char* p = prev_; *p != '\0' && n < sizeof buf - 3;) buf[n++] = *p++;
        buf[n++] = ':';
        buf[n++] = ' ';
    }
    while (*what != '\0' && n < sizeof buf - 1) buf[n++] = *what++;
    if (number != kNoNumber) {
        char d[20];
        int k = 0;
        do {
            d[k++] = static_cast<char>('0' + number % 10);
            number /= 10;
        } while (number != 0);
        if (n < sizeof buf - 1) buf[n++] = ' ';
        while (k > 0 && n < sizeof buf - 1) buf[n++] = d[--k];
    }
    write_own(buf, n);
}

ActivityScope::~ActivityScope() {
    if (!on_ || t_slot == nullptr) return;
    if (prev_[0] != '\0' && std::strncmp(prev_, "after ", 6) != 0) {  // an enclosing scope's line
        write_own(prev_, std::strlen(prev_));
        return;
    }
    char buf[kActivityTextBytes];
    const int n = std::snprintf(buf, sizeof buf, "after %s", t_text);
    write_own(buf, n < 0 ? 0 : static_cast<size_t>(n));
}

void activity_progress(uint64_t n) {
    if (t_slot != nullptr)
        t_slot->progress.store(t_slot->progress.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

std::string activity_describe() {
    char buf[1024];
    return activity_describe_to(buf, sizeof buf) > 0 ? std::string(buf) : std::string();
}

size_t activity_describe_to(char* buf, size_t len) {
    if (g_page == nullptr) {
        if (len > 0) buf[0] = '\0';
        return 0;
    }
    return describe_page(*g_page, buf, len);
}

ActivityReport activity_read(const std::string& path) {
    ActivityReport r;
    const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return r;
    void* p = mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return r;
    const auto* page = static_cast<const Page*>(p);
    r.readable = true;
    r.phase = static_cast<ClusterPhase>(page->phase.load(std::memory_order_acquire));
    char buf[1024];
    describe_page(*page, buf, sizeof buf);
    r.line = buf;
    for (const Slot& s : page->slots) r.progress += s.progress.load(std::memory_order_relaxed);
    // A bound slot was written at least once (activity_bind_thread writes its empty line); the
    // launcher's page starts zeroed.
    for (uint32_t s = 1; s < kActivitySlots; ++s)
        r.program_threads = r.program_threads || page->slots[s].line.seq.load(std::memory_order_relaxed) != 0;
    munmap(p, 4096);
    return r;
}

}  // namespace iccs
