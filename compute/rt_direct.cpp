// rt_direct.cpp: the `direct` ("no delay") and `delay` ("no contention") transports: messages go
// straight from cluster process to cluster process through one shared-memory region of the run,
// no proxy, no stack (DESIGN.md §7).
//
// The one idea: every (source endpoint, destination endpoint) pair of the run has its own SPSC
// byte ring in the region (so per-source order is the ring's order and no lock is ever taken),
// and every endpoint a futex doorbell its senders ring after publishing. A region of zeros is a
// valid empty state, so any process may create it (shm_open O_CREAT + ftruncate) and exec'd
// processes need nothing but its name. `delay` differs only at the receiver: the message at a
// ring's head is not delivered before its send time + D (the head blocks its ring, which keeps
// per-source order), and a sleeping receiver sets its futex time-out to the earliest due time.
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>

#include "rt_core.hpp"
#include "runtime_launch.hpp"

namespace iccs {

namespace {

constexpr uint64_t kRingBytes = 2u << 20;  // per (source, destination) pair: one max_message() + slack
// A producer that finds its ring empty once it is this far into a lap goes back to the lap's start
// behind a pad record (kPadFlag) instead of going on. Why: the ring's pages are shared memory that
// both processes fault in on first touch (the sender's fault also allocates and zeroes the page),
// and a run's messages mostly find the ring empty (a request, then its answer); going round all of
// it touched every page of every ring a run used: SPLASH-3 water-nsquared (2 x 1) moved 1.3-1.7 MB
// through each of its two busy rings, about 1,700 of the run's 4,600 page faults. So a ring's
// working set stays within this and the largest record in flight.
constexpr uint64_t kLapRestartBytes = 64u << 10;
// RtHdr::flags of a pad record: no message; its length covers the rest of the lap.
constexpr uint16_t kPadFlag = 0x8000;
constexpr uint64_t kMagic = 0x69636373'72740002ull;  // "iccsrt", layout 2 (served_until)
constexpr uint64_t kMaxSleepNs = 100'000'000;  // a sleeper re-checks (peer down) at least this often
// serve_service's promise and the bound of an unrung awaited message (make_direct_runtime). The
// promise is off by default (0: every message rings as before; 20 turns it on): against main it
// was not shown faster for barnes and fmm (dsm/SPLASH3-LOCKS.md, session 22), the lead decides.
constexpr uint64_t kServeWindowUs = 0;
constexpr uint64_t kServeBoundUs = 30;

uint64_t env_u64(const char* name, uint64_t fallback) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return fallback;
    char* end = nullptr;
    const unsigned long long x = std::strtoull(v, &end, 10);
    return end != nullptr && *end == '\0' ? x : fallback;
}

struct alignas(64) Doorbell {
    std::atomic<uint32_t> seq{0};       // bumped by every sender (and notify) after publishing
    std::atomic<uint32_t> sleeping{0};  // the owner is (about to be) in futex_wait on seq
};
struct RingCtl {
    alignas(64) std::atomic<uint64_t> head{0};  // consumer's cursor [bytes, monotonic]
    alignas(64) std::atomic<uint64_t> tail{0};  // producer's cursor
};
struct ShmHeader {
    std::atomic<uint64_t> magic;
    std::atomic<int32_t> pid[64];  // cluster c's process (0: not up yet)
    // Cluster c's compute thread serves c's service endpoint until this time [CLOCK_MONOTONIC ns]
    // (RtEp::serve_service; 0: not now): an awaited message due before it need not ring c's
    // service doorbell (its sender rings it after the bound if it is still unserved).
    alignas(64) std::atomic<uint64_t> served_until[64];
};
static_assert(sizeof(ShmHeader) <= 4096);
static_assert(sizeof(Doorbell) == 64 && sizeof(RingCtl) == 128);

uint64_t page_up(uint64_t x) { return (x + 4095) & ~uint64_t{4095}; }

struct Layout {
    uint64_t endpoints = 0, doorbells = 0, ctls = 0, data = 0, total = 0;
    explicit Layout(uint32_t clusters, uint32_t threads) {
        endpoints = uint64_t{clusters} * (threads + 1);
        doorbells = page_up(sizeof(ShmHeader));
        ctls = doorbells + page_up(endpoints * sizeof(Doorbell));
        data = ctls + page_up(endpoints * endpoints * sizeof(RingCtl));
        total = data + endpoints * endpoints * kRingBytes;
    }
};

long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* ts) {
    // Not FUTEX_PRIVATE: the word is shared between processes.
    return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}

void copy_in(uint8_t* ring, uint64_t pos, const void* src, uint64_t n) {
    const uint64_t off = pos & (kRingBytes - 1), first = std::min(n, kRingBytes - off);
    std::memcpy(ring + off, src, first);
    if (n > first) std::memcpy(ring, static_cast<const uint8_t*>(src) + first, n - first);
}
void copy_out(const uint8_t* ring, uint64_t pos, void* dst, uint64_t n) {
    const uint64_t off = pos & (kRingBytes - 1), first = std::min(n, kRingBytes - off);
    std::memcpy(dst, ring + off, first);
    if (n > first) std::memcpy(static_cast<uint8_t*>(dst) + first, ring, n - first);
}
uint64_t record_bytes(uint32_t len) { return (sizeof(RtHdr) + uint64_t{len} + 7) & ~uint64_t{7}; }

}  // namespace

std::string rt_shm_name(const std::string& run_id) { return "/iccs-" + run_id + "-rt"; }

static void* map_region(const RtSpec& spec, bool create, std::string& err) {
    const Layout L(spec.clusters, spec.threads);
    const std::string name = rt_shm_name(spec.run_id);
    const int fd = shm_open(name.c_str(), O_RDWR | (create ? O_CREAT : 0), 0600);
    if (fd < 0) {
        err = "shared memory " + name + ": " + std::strerror(errno);
        return nullptr;
    }
    struct stat st {};
    fstat(fd, &st);
    // The region is sparse, but a page touched beyond what /dev/shm can hold is a SIGBUS in the
    // middle of a run (a container's 64 MiB /dev/shm): refuse at start instead.
    struct statvfs vfs {};
    if (st.st_size == 0 && statvfs("/dev/shm", &vfs) == 0 && uint64_t(vfs.f_bavail) * vfs.f_frsize < L.total) {
        err = "shared memory " + name + ": " + std::to_string(spec.clusters) + " clusters x " +
              std::to_string(spec.threads) + " threads need " + std::to_string(L.total >> 20) + " MiB (2 MiB per pair of "
              "endpoints), /dev/shm has " + std::to_string((uint64_t(vfs.f_bavail) * vfs.f_frsize) >> 20) + " MiB free";
        close(fd);
        shm_unlink(name.c_str());
        return nullptr;
    }
    if (st.st_size == 0 && ftruncate(fd, static_cast<off_t>(L.total)) != 0) {
        err = "shared memory " + name + ": cannot size it to " + std::to_string(L.total) + " bytes: " + std::strerror(errno);
        close(fd);
        return nullptr;
    }
    if (st.st_size != 0 && uint64_t(st.st_size) != L.total) {
        err = "shared memory " + name + " has " + std::to_string(st.st_size) + " bytes, this run (" +
              std::to_string(spec.clusters) + " clusters x " + std::to_string(spec.threads) + " threads) needs " +
              std::to_string(L.total) + ": another run with the same run id (ICCS_RUN_ID)?";
        close(fd);
        return nullptr;
    }
    void* p = mmap(nullptr, L.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        err = "shared memory " + name + ": mmap of " + std::to_string(L.total) + " bytes: " + std::strerror(errno);
        return nullptr;
    }
    return p;
}

bool rt_shm_create(const RtSpec& spec, std::string& err) {
    void* p = map_region(spec, true, err);
    if (p == nullptr) return false;
    munmap(p, Layout(spec.clusters, spec.threads).total);
    return true;
}

void rt_shm_remove(const std::string& run_id) { shm_unlink(rt_shm_name(run_id).c_str()); }

namespace {

class DirectCore;

class DirectEp final : public RtEp {
   public:
    DirectEp(RtCore& core, uint16_t local, DirectCore& d);

   protected:
    RtStatus xmit(RtAddr dst, const RtHdr& h, RtBytes a, RtBytes b) override;
    int pump(int max) override;
    void block(uint64_t deadline_ns) override;
    void wake() override;

   private:
    struct Held {
        RtHdr h;
        std::vector<uint8_t> bytes;
    };
    // Whether source s has a message due now; next_due: the earliest later due time.
    bool due(uint32_t s, uint64_t now, uint64_t& next_due);
    // While our own send waits for ring space: move what arrived to the backlog, so two endpoints
    // sending to each other with full rings cannot wait for each other forever.
    void drain_to_backlog();
    // xmit's first step: where the record goes (tail, or the next lap's start behind a pad).
    uint64_t restart_lap_if_empty(RingCtl& rc, uint8_t* ring, uint64_t tail, uint64_t rec);
    uint64_t ring_overdue(uint64_t now) override;
    void ring_unrung_now() override;
    // An awaited send whose doorbell was left unrung: served once the ring's head passed `end`.
    struct Unrung {
        uint32_t dst;        // global endpoint index
        uint64_t end;        // the ring position after its record
        uint64_t ring_at;    // due time + the bound: rung by us then if still unserved
    };
    std::vector<Unrung> unrung_list_;
    DirectCore& d_;
    uint32_t me_;  // global endpoint index
    std::vector<std::deque<Held>> backlog_;
    std::vector<uint8_t> scratch_;
    uint32_t rr_ = 0;
    bool delivering_ = false;
};

class DirectCore final : public RtCore {
   public:
    DirectCore(const RtSpec& spec, uint8_t* base, uint64_t serve_window_ns, uint64_t serve_bound_ns)
        : RtCore(spec.cluster, spec.clusters, spec.threads, spec.transport), L_(spec.clusters, spec.threads),
          base_(base), delay_ns_(spec.transport == RtTransport::kDelay ? spec.delay_ns : 0), name_(rt_shm_name(spec.run_id)),
          unlink_at_end_(spec.unlink_shm_at_end) {
        hdr()->pid[spec.cluster].store(static_cast<int32_t>(getpid()));
        hdr()->magic.store(kMagic);
        for (uint16_t l = 0; l <= threads_; ++l) eps_.push_back(std::make_unique<DirectEp>(*this, l, *this));
        service_core_ = spec.service_core;
        set_service_serving(serve_window_ns, serve_bound_ns);
        start_service();
    }
    ~DirectCore() override {
        stop_service();
        munmap(base_, L_.total);
    }
    bool peer_down(uint16_t c) override {
        const int32_t pid = hdr()->pid[c].load(std::memory_order_relaxed);
        return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
    }
    bool shutdown(bool, std::string&) override {
        if (unlink_at_end_) shm_unlink(name_.c_str());  // no launcher of ours: the last use is over
        return true;
    }
    std::string describe() const override {
        std::string s = delay_ns_ || transport_ == RtTransport::kDelay
                            ? "delay " + std::to_string(delay_ns_ / 1000) + "." + std::to_string(delay_ns_ % 1000 / 100) +
                                  " us per message (no contention)"
                            : std::string("direct (no delay)");
        return s + ", shared memory " + name_;
    }

    uint32_t global(RtAddr a) const { return a.cluster * (threads_ + 1u) + local_of(a.thread); }
    uint32_t endpoints() const { return static_cast<uint32_t>(L_.endpoints); }
    Doorbell& bell(uint32_t g) { return reinterpret_cast<Doorbell*>(base_ + L_.doorbells)[g]; }
    RingCtl& ctl(uint32_t src, uint32_t dst) {
        return reinterpret_cast<RingCtl*>(base_ + L_.ctls)[uint64_t{src} * L_.endpoints + dst];
    }
    uint8_t* ring(uint32_t src, uint32_t dst) { return base_ + L_.data + (uint64_t{src} * L_.endpoints + dst) * kRingBytes; }
    uint64_t delay_ns() const { return delay_ns_; }
    uint64_t served_until(uint16_t c) { return hdr()->served_until[c].load(std::memory_order_seq_cst); }
    void promise_service(uint64_t until_ns) override {
        hdr()->served_until[cluster_].store(until_ns, std::memory_order_release);
    }
    void withdraw_service_promise() override {
        // seq_cst against a sender's publish, doorbell bump and look at served_until (xmit): either
        // it sees 0 and rings, or this look finds its record.
        hdr()->served_until[cluster_].store(0, std::memory_order_seq_cst);
        const uint32_t svc = global(RtAddr{cluster_, kRtService});
        for (uint32_t s = 0; s < endpoints(); ++s) {
            RingCtl& rc = ctl(s, svc);
            if (rc.tail.load(std::memory_order_seq_cst) != rc.head.load(std::memory_order_acquire)) {
                ring_bell(svc);
                return;
            }
        }
    }
    void ring_bell(uint32_t g) {
        Doorbell& db = bell(g);
        db.seq.fetch_add(1, std::memory_order_seq_cst);
        if (db.sleeping.load(std::memory_order_seq_cst)) futex(&db.seq, FUTEX_WAKE, 1, nullptr);
    }
    RtAddr addr_of(uint32_t g) const {
        const uint16_t l = static_cast<uint16_t>(g % (threads_ + 1u));
        return RtAddr{static_cast<uint16_t>(g / (threads_ + 1u)), l == threads_ ? kRtService : l};
    }

   private:
    ShmHeader* hdr() { return reinterpret_cast<ShmHeader*>(base_); }
    Layout L_;
    uint8_t* base_;
    uint64_t delay_ns_;
    std::string name_;
    bool unlink_at_end_;
};

DirectEp::DirectEp(RtCore& core, uint16_t local, DirectCore& d)
    : RtEp(core, local), d_(d), me_(d.global(RtAddr{core.cluster(), local == core.threads() ? kRtService : local})),
      backlog_(d.endpoints()) {}

uint64_t DirectEp::restart_lap_if_empty(RingCtl& rc, uint8_t* ring, uint64_t tail, uint64_t rec) {
    const uint64_t off = tail & (kRingBytes - 1), rest = kRingBytes - off;
    // Empty (the receiver has read up to tail), far enough into the lap, and the record fits
    // before the pad's bytes are read back: the receiver steps over the pad, then reads the record.
    if (off < kLapRestartBytes || rec > off || rest < sizeof(RtHdr) ||
        rc.head.load(std::memory_order_acquire) != tail)
        return tail;
    RtHdr pad;
    pad.flags = kPadFlag;
    pad.len = static_cast<uint32_t>(rest - sizeof(RtHdr));  // record_bytes(len) == rest (off is 8-aligned)
    copy_in(ring, tail, &pad, sizeof pad);
    return tail + rest;
}

RtStatus DirectEp::xmit(RtAddr dst, const RtHdr& h, RtBytes a, RtBytes b) {
    const uint32_t g = d_.global(dst);
    RingCtl& rc = d_.ctl(me_, g);
    uint8_t* ring = d_.ring(me_, g);
    const uint64_t rec = record_bytes(h.len);
    uint64_t tail = rc.tail.load(std::memory_order_relaxed);
    tail = restart_lap_if_empty(rc, ring, tail, rec);
    uint64_t waited = 0, full_since = 0;
    while (kRingBytes - (tail - rc.head.load(std::memory_order_acquire)) < rec) {
        if (full_since == 0) full_since = now_ns();
        // Full: the receiver is behind. Keep our own inbox moving meanwhile (not from inside a
        // handler: the message being handled still sits in its ring).
        if (d_.peer_down(dst.cluster))
            return fail(RtStatus::kPeerDown, "send to cluster " + std::to_string(dst.cluster) + ": its process is gone");
        if (!delivering_) drain_to_backlog();
        if (++waited < 64) sched_yield();
        else usleep(50);
    }
    if (full_since != 0) {
        ++ctr_.send_full_waits;
        ctr_.send_full_ns += now_ns() - full_since;
    }
    copy_in(ring, tail, &h, sizeof h);
    if (a.len) copy_in(ring, tail + sizeof h, a.data, a.len);
    if (b.len) copy_in(ring, tail + sizeof h + a.len, b.data, b.len);
    rc.tail.store(tail + rec, std::memory_order_release);
    Doorbell& db = d_.bell(g);
    db.seq.fetch_add(1, std::memory_order_seq_cst);
    if (db.sleeping.load(std::memory_order_seq_cst)) {
        // A sleeping service thread need not be woken (a futex wake across cores: ~25 us here)
        // for a message its cluster's compute thread will run before the promise it made ends;
        // this sender waits next and rings it itself if that did not happen within the bound.
        const uint64_t due = h.send_ns + d_.delay_ns();
        if ((h.flags & kRtAwaitedFlag) && dst.thread == kRtService && due < d_.served_until(dst.cluster)) {
            unrung_list_.push_back(Unrung{g, tail + rec, due + d_.serve_bound_ns()});
            unrung_ = static_cast<uint32_t>(unrung_list_.size());
            ++ctr_.bells_skipped;
        } else {
            futex(&db.seq, FUTEX_WAKE, 1, nullptr);
            ++ctr_.bells_rung;
        }
    }
    return RtStatus::kOk;
}

uint64_t DirectEp::ring_overdue(uint64_t now) {
    uint64_t next = UINT64_MAX;
    size_t keep = 0;
    for (const Unrung& u : unrung_list_) {
        if (d_.ctl(me_, u.dst).head.load(std::memory_order_acquire) >= u.end) continue;  // served
        if (now >= u.ring_at) {
            d_.ring_bell(u.dst);
            ++ctr_.bells_rung_late;
            continue;
        }
        next = std::min(next, u.ring_at);
        unrung_list_[keep++] = u;
    }
    unrung_list_.resize(keep);
    unrung_ = static_cast<uint32_t>(keep);
    return next;
}

void DirectEp::ring_unrung_now() {
    for (Unrung& u : unrung_list_) u.ring_at = 0;
    ring_overdue(now_ns());
}

bool DirectEp::due(uint32_t s, uint64_t now, uint64_t& next_due) {
    const uint64_t d = d_.delay_ns();
    if (!backlog_[s].empty()) {
        const uint64_t at = backlog_[s].front().h.send_ns + d;
        if (d == 0 || at <= now) return true;
        next_due = std::min(next_due, at);
        return false;
    }
    RingCtl& rc = d_.ctl(s, me_);
    const uint64_t head = rc.head.load(std::memory_order_relaxed);
    if (head == rc.tail.load(std::memory_order_acquire)) return false;
    if (d == 0) return true;
    RtHdr h;
    copy_out(d_.ring(s, me_), head, &h, sizeof h);
    if ((h.flags & kPadFlag) || h.send_ns + d <= now) return true;  // (a pad: pump() steps over it)
    next_due = std::min(next_due, h.send_ns + d);
    return false;
}

void DirectEp::drain_to_backlog() {
    for (uint32_t s = 0; s < d_.endpoints(); ++s) {
        RingCtl& rc = d_.ctl(s, me_);
        const uint8_t* ring = d_.ring(s, me_);
        uint64_t head = rc.head.load(std::memory_order_relaxed);
        const uint64_t tail = rc.tail.load(std::memory_order_acquire);
        while (head != tail) {
            Held m;
            copy_out(ring, head, &m.h, sizeof m.h);
            if (m.h.flags & kPadFlag) {
                head += record_bytes(m.h.len);
                continue;
            }
            m.bytes.resize(m.h.len);
            copy_out(ring, head + sizeof m.h, m.bytes.data(), m.h.len);
            head += record_bytes(m.h.len);
            backlog_[s].push_back(std::move(m));
        }
        rc.head.store(head, std::memory_order_release);
    }
}

int DirectEp::pump(int max) {
    const uint32_t n = d_.endpoints();
    const uint64_t d = d_.delay_ns();
    uint64_t now = d ? now_ns() : 0;
    int ran = 0;
    for (uint32_t k = 0; k < n && ran < max; ++k) {
        const uint32_t s = (rr_ + k) % n;
        // the backlog first: it holds this source's older messages
        while (!backlog_[s].empty() && ran < max) {
            Held& m = backlog_[s].front();
            if (d && m.h.send_ns + d > now) break;
            Held x = std::move(m);
            backlog_[s].pop_front();
            delivering_ = true;
            deliver(x.h, x.bytes.data());
            delivering_ = false;
            ++ran;
        }
        if (!backlog_[s].empty()) continue;
        RingCtl& rc = d_.ctl(s, me_);
        const uint8_t* ring = d_.ring(s, me_);
        const uint64_t tail = rc.tail.load(std::memory_order_acquire);
        uint64_t head = rc.head.load(std::memory_order_relaxed);
        while (head != tail && ran < max) {
            RtHdr h;
            copy_out(ring, head, &h, sizeof h);
            if (h.flags & kPadFlag) {  // the producer went back to the lap's start (xmit)
                head += record_bytes(h.len);
                rc.head.store(head, std::memory_order_release);
                continue;
            }
            if (d && h.send_ns + d > now) {
                now = now_ns();
                if (h.send_ns + d > now) break;  // not due: it holds back its ring (per-source order)
            }
            const uint64_t off = (head + sizeof h) & (kRingBytes - 1);
            const uint8_t* data = ring + off;
            if (off + h.len > kRingBytes) {  // wraps: one copy to make it contiguous
                if (scratch_.size() < h.len) scratch_.resize(h.len);
                copy_out(ring, head + sizeof h, scratch_.data(), h.len);
                data = scratch_.data();
            }
            delivering_ = true;
            deliver(h, data);
            delivering_ = false;
            head += record_bytes(h.len);
            rc.head.store(head, std::memory_order_release);  // only now may the sender reuse the bytes
            ++ran;
        }
    }
    rr_ = (rr_ + 1) % n;
    return ran;
}

void DirectEp::block(uint64_t deadline_ns) {
    // delay: a message's due time is a futex time-out; the default 50 us timer slack would add
    // that much to every hold, so this thread asks for 1 us (once). Not on direct, which has no
    // due times: the slack is the thread's, so every other short sleep of it would be cut to the
    // bone too (the DSM's 20 us naps of a thread waiting for a local event woke every ~30 us
    // instead of ~70 and preempted the cluster's working thread on a 2-core host: perf/README.md).
    static thread_local bool slack_set = false;
    if (!slack_set && d_.delay_ns() != 0) {
        prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
        slack_set = true;
    }
    // The service endpoint's look at its rings and backlog is a pump's: not while a compute thread
    // runs its messages (serve_service), which ends soon; then no sleep, only a turn.
    const bool service = local_ == core_.threads();
    if (service && pumping_.exchange(true, std::memory_order_acquire)) {
        sched_yield();
        return;
    }
    Doorbell& db = d_.bell(me_);
    const uint32_t seq = db.seq.load(std::memory_order_seq_cst);
    db.sleeping.store(1, std::memory_order_seq_cst);
    const uint64_t now = now_ns();
    uint64_t until = std::min(deadline_ns, now + kMaxSleepNs);
    bool ready = notified_.exchange(0) != 0;
    for (uint32_t s = 0; s < d_.endpoints() && !ready; ++s) ready = due(s, now, until);
    if (service) pumping_.store(false, std::memory_order_release);
    if (!ready && until > now && until - now < 20'000) {
        sched_yield();  // due within 20 us: a futex round trip would overshoot it
    } else if (!ready && until > now) {
        const uint64_t ns = until - now;
        const timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
        futex(&db.seq, FUTEX_WAIT, seq, &ts);
    }
    db.sleeping.store(0, std::memory_order_relaxed);
}

void DirectEp::wake() {
    Doorbell& db = d_.bell(me_);
    db.seq.fetch_add(1, std::memory_order_seq_cst);
    if (db.sleeping.load(std::memory_order_seq_cst)) futex(&db.seq, FUTEX_WAKE, 1, nullptr);
}

}  // namespace

std::unique_ptr<RtCore> make_direct_runtime(const RtSpec& spec, std::string& err) {
    if (spec.clusters > 64) {
        err = "transport " + std::string(to_string(spec.transport)) + ": at most 64 clusters";
        return nullptr;
    }
    // A compute thread serving its cluster's service endpoint (RtEp::serve_service): its promise
    // lasts ICCS_RT_SERVE_WINDOW_US after each call (0: off, every message rings as before), and an
    // awaited message left unrung is rung by its sender ICCS_RT_SERVE_BOUND_US after it was due.
    const uint64_t window_us = env_u64("ICCS_RT_SERVE_WINDOW_US", kServeWindowUs);
    const uint64_t bound_us = env_u64("ICCS_RT_SERVE_BOUND_US", kServeBoundUs);
    void* p = map_region(spec, true, err);
    if (p == nullptr) return nullptr;
    return std::make_unique<DirectCore>(spec, static_cast<uint8_t*>(p), window_us * 1000, bound_us * 1000);
}

}  // namespace iccs
