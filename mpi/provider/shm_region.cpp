// shm_region.cpp: creating, mapping and laying out a domain's shared region.
#include "shm_region.hpp"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace iccs::mpi {

namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
uint64_t ring_span(uint64_t capacity) { return sizeof(ShmRingCtl) + capacity; }

}  // namespace

void region_layout(RegionGeometry& g) {
    uint64_t at = align_up(sizeof(RegionHeader), 64);
    g.slots_off = at;
    at = align_up(at + uint64_t{g.members} * sizeof(RankSlot), 64);
    g.dead_off = at;
    at = align_up(at + g.world, 4096);
    g.rings_off = at;
    const uint64_t pairs = uint64_t{g.members} * g.members;  // the diagonal is unused, kept for simple indexing
    at += pairs * ring_span(g.pair_ring_bytes);
    if (g.bridged) at += 2ull * g.members * ring_span(g.agent_ring_bytes);
    g.total = align_up(at, 4096);
}

namespace {
// The rings' pages mapped now, not at their first use: a ring cycles through its whole span once
// before it reuses a byte, so its first laps cost a page fault per 4 KiB in each process, as the
// proxies' buffers did (proxy/dpdk_pool.hpp, populate_dpdk_memory; ICCS_NO_POPULATE=1 the same
// A/B switch). A read fault on a shared memfd maps its page writable, so MAP_POPULATE serves both.
int populate_flag() {
    const char* np = std::getenv("ICCS_NO_POPULATE");
    return np != nullptr && std::strcmp(np, "1") == 0 ? 0 : MAP_POPULATE;
}
}  // namespace

bool Region::create(const RegionGeometry& g, uint32_t transport, uint64_t delay_ns, uint64_t run_hash,
                    std::string& err) {
    const int fd = memfd_create("iccs-mpi-region", MFD_CLOEXEC);
    if (fd < 0) {
        err = std::string("memfd_create: ") + std::strerror(errno);
        return false;
    }
    if (ftruncate(fd, static_cast<off_t>(g.total)) != 0) {
        err = "ftruncate of the shared region to " + std::to_string(g.total) + " bytes: " + std::strerror(errno);
        close(fd);
        return false;
    }
    void* p = mmap(nullptr, g.total, PROT_READ | PROT_WRITE, MAP_SHARED | populate_flag(), fd, 0);
    if (p == MAP_FAILED) {
        err = std::string("mmap of the shared region: ") + std::strerror(errno);
        close(fd);
        return false;
    }
    base_ = static_cast<uint8_t*>(p);
    len_ = g.total;
    fd_ = fd;
    RegionHeader& h = hdr();  // a fresh memfd reads as zeros: every ring is empty, every slot unborn
    h.version = kRegionVersion;
    h.members = g.members;
    h.first_rank = g.first_rank;
    h.world = g.world;
    h.cluster_size = g.cluster_size;
    h.transport = transport;
    h.delay_ns = delay_ns;
    h.run_hash = run_hash;
    h.region_bytes = g.total;
    h.pair_ring_bytes = g.pair_ring_bytes;
    h.agent_ring_bytes = g.agent_ring_bytes;
    h.slots_off = g.slots_off;
    h.dead_off = g.dead_off;
    h.rings_off = g.rings_off;
    h.bridged.store(g.bridged ? 1 : 0, std::memory_order_relaxed);
    h.agent_pid.store(static_cast<uint32_t>(getpid()), std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    h.magic.store(kRegionMagic, std::memory_order_release);
    return true;
}

bool Region::attach(int fd, std::string& err) {
    struct stat st {};
    if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(RegionHeader))) {
        err = "the agent's shared region is missing or too small";
        return false;
    }
    void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED | populate_flag(), fd, 0);
    if (p == MAP_FAILED) {
        err = std::string("mmap of the shared region: ") + std::strerror(errno);
        return false;
    }
    base_ = static_cast<uint8_t*>(p);
    len_ = static_cast<uint64_t>(st.st_size);
    const RegionHeader& h = hdr();
    if (h.magic.load(std::memory_order_acquire) != kRegionMagic ||
        h.version != kRegionVersion || h.region_bytes != len_) {
        err = "the agent's shared region is not a region of this provider (version " + std::to_string(h.version) +
              ", expected " + std::to_string(kRegionVersion) + "): agent and provider from different builds?";
        unmap();
        return false;
    }
    return true;
}

void Region::unmap() {
    if (base_ != nullptr) munmap(base_, len_);
    base_ = nullptr;
    len_ = 0;
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
}

ShmRingDesc Region::pair_ring(uint32_t from_member, uint32_t to_member) const {
    const RegionHeader& h = hdr();
    const uint64_t idx = uint64_t{from_member} * h.members + to_member;
    return ShmRingDesc{h.rings_off + idx * ring_span(h.pair_ring_bytes), h.pair_ring_bytes};
}

ShmRingDesc Region::to_agent_ring(uint32_t member) const {
    const RegionHeader& h = hdr();
    const uint64_t base = h.rings_off + uint64_t{h.members} * h.members * ring_span(h.pair_ring_bytes);
    return ShmRingDesc{base + uint64_t{member} * ring_span(h.agent_ring_bytes), h.agent_ring_bytes};
}

ShmRingDesc Region::from_agent_ring(uint32_t member) const {
    const RegionHeader& h = hdr();
    const uint64_t base = h.rings_off + uint64_t{h.members} * h.members * ring_span(h.pair_ring_bytes) +
                          uint64_t{h.members} * ring_span(h.agent_ring_bytes);
    return ShmRingDesc{base + uint64_t{member} * ring_span(h.agent_ring_bytes), h.agent_ring_bytes};
}

void Region::set_agent_error(const std::string& why) const {
    RegionHeader& h = hdr();
    uint32_t free = 0;  // 0: no text, 2: being written, 1: complete (the agent's threads race for it)
    if (!h.agent_error_set.compare_exchange_strong(free, 2, std::memory_order_acq_rel)) return;
    std::snprintf(h.agent_error, sizeof h.agent_error, "%s", why.c_str());
    h.agent_error_set.store(1, std::memory_order_release);
}

std::string Region::agent_error() const {
    const RegionHeader& h = hdr();
    if (h.agent_error_set.load(std::memory_order_acquire) != 1) return "";
    return std::string(h.agent_error, strnlen(h.agent_error, sizeof h.agent_error));
}

bool futex_wake_shared(std::atomic<uint32_t>* word, uint32_t only) {
    // The sleeper's protocol (proxy/rings.hpp Waker): it stores 1, looks once more, then waits
    // while the word is 1; a waker that finds it non-zero clears it and wakes. The fence orders
    // the caller's publication (a ring's release store of its head) before this load: without
    // it the store may wait in the store buffer while the load reads 0, and a sleeper that looked
    // at the ring meanwhile sleeps on a record (until its time-out).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if ((word->load(std::memory_order_relaxed) & only) == 0) return false;
    if (word->exchange(0, std::memory_order_seq_cst) == 0) return false;
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, 1, nullptr, nullptr, 0);
    return true;
}

bool futex_wait_shared(std::atomic<uint32_t>* word, uint32_t expected, uint64_t timeout_us) {
    timespec ts{static_cast<time_t>(timeout_us / 1'000'000), static_cast<long>(timeout_us % 1'000'000) * 1000};
    return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0) == 0;
}

}  // namespace iccs::mpi
