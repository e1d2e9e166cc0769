// dsm.cpp: the region (memfd mapped twice), the SIGSEGV fault path, page fetch, twins and word
// diffs, intervals and write notices, allocation, start-up. Synchronization is in dsm_sync.cpp.
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include "dsm_impl.hpp"

namespace iccs::dsm {

namespace {

thread_local std::string t_err;
struct Binding {
    DsmNode* node = nullptr;
    RtEndpoint* ep = nullptr;
};
thread_local Binding t_bind;

// FNV-1a over 8-byte words (the region is page-aligned, pages are multiples of 8 bytes).
uint64_t hash_words(uint64_t h, const uint8_t* p, uint64_t n) {
    for (uint64_t i = 0; i < n; i += 8) {
        uint64_t w;
        std::memcpy(&w, p + i, 8);
        h = (h ^ w) * 1099511628211ull;
    }
    return h;
}

bool all_zero(const uint8_t* p, uint64_t n) {
    for (uint64_t i = 0; i < n; i += 8) {
        uint64_t w;
        std::memcpy(&w, p + i, 8);
        if (w) return false;
    }
    return true;
}

// The region's contents as the clusters compare them at CREATE: every page of [0, used) that holds
// a non-zero byte, with its index, read through `view`. The memfd's holes (pages never written)
// are skipped without being read (a read would allocate them: a 2 GiB G_MALLOC the prefix never
// fills costs nothing), and so are pages of zeros, so two replays that touched a zero page
// differently still agree.
uint64_t region_hash(int fd, const uint8_t* view, uint64_t used, uint64_t page) {
    uint64_t h = 1469598103934665603ull, next = 0;  // next: the first page not hashed yet
    while (next * page < used) {
        const off_t d = lseek(fd, off_t(next * page), SEEK_DATA);
        if (d < 0 || uint64_t(d) >= used) break;  // ENXIO: no data after it
        off_t e = lseek(fd, d, SEEK_HOLE);
        const uint64_t end = e < 0 ? used : std::min<uint64_t>(uint64_t(e), used);
        for (uint64_t p = std::max<uint64_t>(next, uint64_t(d) / page); p * page < end; p++) {
            const uint64_t len = std::min<uint64_t>(page, used - p * page + 7) & ~7ull;
            if (all_zero(view + p * page, len)) continue;
            h = (h ^ p) * 1099511628211ull;
            h = hash_words(h, view + p * page, len);
        }
        next = (end + page - 1) / page;
    }
    return h;
}

// What limits reserving address space here, for an error message.
std::string map_limits() {
    std::string out;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        out += "RLIMIT_AS (ulimit -v) is " + std::to_string(uint64_t(rl.rlim_cur)) + " bytes; ";
    if (FILE* f = fopen("/proc/sys/vm/overcommit_memory", "r")) {
        int mode = -1;
        if (fscanf(f, "%d", &mode) == 1 && mode == 2)
            out += "vm.overcommit_memory = 2 (strict: reserved memory counts against the commit limit); ";
        fclose(f);
    }
    return out.empty() ? std::string("no address-space limit is set") : out.substr(0, out.size() - 2);
}

}  // namespace

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

void set_error(const std::string& e) { t_err = e; }
const std::string& DsmNode::error() { return t_err; }

void fatal(const char* fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, sizeof(buf) - 2, fmt, ap);
    va_end(ap);
    if (k < 0) k = 0;
    if (k > int(sizeof(buf)) - 2) k = int(sizeof(buf)) - 2;
    buf[k++] = '\n';
    ssize_t w = write(2, "iccs dsm: ", 10);
    w = write(2, buf, size_t(k));
    (void)w;
    abort();
}

const char* to_string(DsmStatus s) {
    switch (s) {
        case DsmStatus::kOk: return "ok";
        case DsmStatus::kBadArg: return "bad argument";
        case DsmStatus::kNoSpace: return "no space";
        case DsmStatus::kMismatch: return "mismatch";
        case DsmStatus::kRuntime: return "runtime error";
    }
    return "?";
}

// ---- home side: fetch, diff, alloc, start -----------------------------------------------------

namespace {
void h_start(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto* I = static_cast<DsmNode::Impl*>(ctx);
    Rd r(m.data.data(), m.data.size());
    std::array<uint64_t, 4> v{r.get<uint64_t>(), r.get<uint64_t>(), r.get<uint32_t>(), r.get<uint64_t>()};
    I->start_arrived.push_back({m.token(), v});
    if (I->start_arrived.size() < I->n.clusters()) return;
    // In cluster order, whatever the order of arrival: cluster 0's copy is the reference the
    // message names ("cluster 1's shared region differs from cluster 0's").
    std::sort(I->start_arrived.begin(), I->start_arrived.end(),
              [](const auto& a, const auto& b) { return a.first.to.cluster < b.first.to.cluster; });
    std::string why;
    const auto& ref = I->start_arrived.front();
    for (const auto& [tok, x] : I->start_arrived) {
        if (x[3] != ref.second[3]) {
            why = "cluster " + std::to_string(tok.to.cluster) + "'s shared region is " + std::to_string(x[3]) +
                  " bytes, cluster " + std::to_string(ref.first.to.cluster) + "'s " + std::to_string(ref.second[3]) +
                  " (ICCS_DSM_SIZE, or its default from each host's memory): set the same ICCS_DSM_SIZE everywhere";
            break;
        }
        if (x != ref.second) {
            char line[256];
            snprintf(line, sizeof line,
                     "cluster %u's shared region differs from cluster %u's at CREATE (used %" PRIu64 " vs %" PRIu64
                     " bytes, hash %016" PRIx64 " vs %016" PRIx64 ", sync ids %" PRIu64 " vs %" PRIu64
                     "): the sequential prefix of main is not deterministic (fixed seeds, same input)",
                     unsigned(tok.to.cluster), unsigned(ref.first.to.cluster), x[1], ref.second[1], x[0],
                     ref.second[0], x[2], ref.second[2]);
            why = line;
            break;
        }
    }
    Wr w;
    w.put<uint8_t>(why.empty() ? 1 : 0);
    w.bytes(why.data(), why.size());
    // Other clusters first: on a mismatch this cluster's main exits as soon as it has its answer.
    for (const auto& [tok, x] : I->start_arrived)
        if (tok.to.cluster != I->n.cluster()) self.reply(tok, RtBytes{w.b.data(), uint32_t(w.b.size())});
    for (const auto& [tok, x] : I->start_arrived)
        if (tok.to.cluster == I->n.cluster()) self.reply(tok, RtBytes{w.b.data(), uint32_t(w.b.size())});
    I->start_arrived.clear();
}
void h_replay(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto* I = static_cast<DsmNode::Impl*>(ctx);
    Rd r(m.data.data(), m.data.size());
    const uint64_t k = r.get<uint64_t>();
    std::lock_guard<std::mutex> g(I->replay_mu);
    if (k < I->replay_log.size()) self.reply(m.token(), RtBytes{&I->replay_log[k], 8});
    else I->replay_waiting.emplace_back(k, m.token());  // cluster 0's prefix has not got there yet
}
}  // namespace

uint64_t DsmNode::replay_value(uint64_t mine) {
    if (parallel() || clusters_ == 1) return mine;
    Impl& I = *impl_;
    RtEndpoint& ep = bound_or_die(*this, "CLOCK before CREATE");
    if (cluster_ == 0) {
        std::lock_guard<std::mutex> g(I.replay_mu);
        I.replay_log.push_back(mine);
        const uint64_t k = I.replay_log.size() - 1;
        for (size_t i = 0; i < I.replay_waiting.size();) {
            if (I.replay_waiting[i].first == k) {
                ep.reply(I.replay_waiting[i].second, RtBytes{&I.replay_log[k], 8});
                I.replay_waiting.erase(I.replay_waiting.begin() + long(i));
            } else {
                i++;
            }
        }
        return mine;
    }
    const uint64_t k = I.replay_next++;
    std::vector<uint8_t> reply;
    if (ep.request(I.service(0), I.h(kHReplay), RtBytes{&k, 8}, {}, reply) != RtStatus::kOk || reply.size() != 8)
        fatal("cluster %u: replaying prefix value %llu from cluster 0 failed: %s", unsigned(cluster_),
              static_cast<unsigned long long>(k), ep.last_error().c_str());
    uint64_t v;
    std::memcpy(&v, reply.data(), 8);
    return v;
}


void DsmNode::Impl::register_handlers() {
    rt.set_handler(h(kHStart), h_start, this);
    rt.set_handler(h(kHReplay), h_replay, this);
    register_fault_handlers(*this);
    register_diff_handlers(*this);
    register_notice_handlers(*this);
    register_alloc_handlers(*this);
    register_sync_handlers(*this);
}

// ---- node -------------------------------------------------------------------------------------

std::unique_ptr<DsmNode> DsmNode::attach(Runtime& rt, const DsmConfig& given, std::string& err) {
    DsmConfig cfg = given;
    if (cfg.region_bytes == 0) cfg.region_bytes = dsm_default_region_bytes();
    if (!dsm_config_check(cfg, err)) return nullptr;
    std::unique_ptr<DsmNode> n(new DsmNode());
    n->cfg_ = cfg;
    n->cluster_ = rt.cluster();
    n->clusters_ = rt.clusters();
    n->impl_ = std::make_unique<Impl>(*n, rt);
    Impl& I = *n->impl_;
    I.page = cfg.page_bytes;
    I.npages = cfg.region_bytes / cfg.page_bytes;
    if (I.npages > UINT32_MAX) {
        err = "dsm region of " + std::to_string(cfg.region_bytes) + " bytes has more than 2^32 pages";
        return nullptr;
    }
    // The region is reserved, not allocated: the memfd is sparse (a page is memory once written),
    // the mappings are address space. What a 2 GiB G_MALLOC costs is what the program touches.
    I.memfd = memfd_create("iccs-dsm", MFD_CLOEXEC);
    if (I.memfd < 0 || ftruncate(I.memfd, off_t(cfg.region_bytes)) != 0) {
        err = "dsm: cannot reserve the shared region (ICCS_DSM_SIZE = " + std::to_string(cfg.region_bytes) +
              " bytes) as a memfd: " + strerror(errno);
        return nullptr;
    }
    void* want = reinterpret_cast<void*>(cfg.base_addr);
    void* a = mmap(want, cfg.region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, I.memfd, 0);
    if (a == MAP_FAILED || a != want) {
        const int e = errno;
        if (a != MAP_FAILED) munmap(a, cfg.region_bytes);
        char line[512];
        if (a == MAP_FAILED && e == ENOMEM)
            snprintf(line, sizeof line, "dsm: cannot reserve %" PRIu64 " bytes of address space for the shared region "
                     "at %p (ICCS_DSM_SIZE): %s (%s); set a smaller ICCS_DSM_SIZE", cfg.region_bytes, want,
                     strerror(e), map_limits().c_str());
        else
            snprintf(line, sizeof line, "dsm: cannot map the shared region at %p (%" PRIu64 " bytes): %s; choose "
                     "another ICCS_DSM_BASE or a smaller ICCS_DSM_SIZE", want, cfg.region_bytes,
                     a == MAP_FAILED ? strerror(e) : "the kernel placed it elsewhere");
        err = line;
        close(I.memfd);
        I.memfd = -1;
        return nullptr;
    }
    I.app = static_cast<uint8_t*>(a);
    void* p = mmap(nullptr, cfg.region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, I.memfd, 0);
    void* t = mmap(nullptr, cfg.region_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) I.priv = static_cast<uint8_t*>(p);
    if (t != MAP_FAILED) I.twins = static_cast<uint8_t*>(t);
    if (p == MAP_FAILED || t == MAP_FAILED) {
        err = "dsm: cannot reserve " + std::to_string(cfg.region_bytes) + " bytes of address space for the protocol "
              "view or the twins of the shared region (ICCS_DSM_SIZE): " + strerror(errno) + " (" + map_limits() +
              "); set a smaller ICCS_DSM_SIZE";
        return nullptr;  // the destructor unmaps what was mapped
    }
    if (!I.map_pages(err)) return nullptr;
    I.vc.assign(n->clusters_, 0);
    I.store.resize(n->clusters_);
    I.home_has.assign(n->clusters_, VC(n->clusters_, 0));
    for (uint16_t c = 0; c < n->clusters_; c++) I.home_has[c][c] = UINT32_MAX;  // its own intervals
    if (!fault_path_register(n.get(), I.slot, err)) return nullptr;
    I.register_handlers();
    return n;
}

DsmNode::~DsmNode() {
    if (!impl_) return;
    Impl& I = *impl_;
    if (I.slot >= 0) fault_path_unregister(I.slot);
    if (t_bind.node == this) t_bind = {};
    if (I.app) munmap(I.app, cfg_.region_bytes);
    if (I.priv) munmap(I.priv, cfg_.region_bytes);
    if (I.twins) munmap(I.twins, cfg_.region_bytes);
    if (I.memfd >= 0) close(I.memfd);
    if (I.pages_map_bytes) munmap(I.pages, I.pages_map_bytes);
    else delete[] I.pages;
}

bool DsmNode::Impl::map_pages(std::string& err) {
    // A zero record must be what the constructor makes (glibc: an unlocked std::mutex is all
    // zeros): checked here, once, with padding zeroed; otherwise the records are constructed.
    alignas(Page) unsigned char probe[sizeof(Page)] = {};
    static const unsigned char zero[sizeof(Page)] = {};
    new (probe) Page;
    const bool zero_is_fresh = std::memcmp(probe, zero, sizeof(Page)) == 0;
    std::launder(reinterpret_cast<Page*>(probe))->~Page();
    if (!zero_is_fresh) {
        pages = new (std::nothrow) Page[npages];
        if (!pages) err = "dsm: no memory for the records of " + std::to_string(npages) + " pages";
        return pages != nullptr;
    }
    const uint64_t bytes = (npages * sizeof(Page) + 4095) & ~4095ull;
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        err = "dsm: cannot reserve " + std::to_string(bytes) + " bytes of address space for the records of " +
              std::to_string(npages) + " pages: " + strerror(errno) + " (" + map_limits() +
              "); set a smaller ICCS_DSM_SIZE or larger ICCS_DSM_PAGE";
        return false;
    }
    pages = static_cast<Page*>(m);
    pages_map_bytes = bytes;
    return true;
}

void DsmNode::bind_thread(uint16_t t) { t_bind = Binding{this, &impl_->rt.endpoint(t)}; }

void DsmNode::unbind_thread() {
    if (t_bind.node != this) return;
    if (parallel()) flush();
    t_bind = {};
}

RtEndpoint* DsmNode::bound_endpoint() const { return t_bind.node == this ? t_bind.ep : nullptr; }

RtEndpoint& bound_or_die(DsmNode& n, const char* what) {
    RtEndpoint* ep = n.bound_endpoint();
    if (!ep) fatal("%s called by a thread that is not a compute thread of cluster %u's DSM", what, unsigned(n.cluster()));
    return *ep;
}

DsmStatus DsmNode::start_parallel() {
    RtEndpoint& ep = bound_or_die(*this, "start_parallel (CREATE)");
    if (parallel()) return DsmStatus::kOk;  // coherent since the first call
    Impl& I = *impl_;
    const uint64_t used = used_.load();
    Wr w;
    w.put<uint64_t>(region_hash(I.memfd, I.priv, used, I.page));
    w.put<uint64_t>(used);
    w.put<uint32_t>(next_sync_.load());
    w.put<uint64_t>(cfg_.region_bytes);
    std::vector<uint8_t> reply;
    RtStatus s = ep.request(I.service(0), I.h(kHStart), RtBytes{w.b.data(), uint32_t(w.b.size())}, {}, reply);
    if (s != RtStatus::kOk || reply.empty()) {
        set_error("CREATE: start-up exchange with cluster 0 failed: " + ep.last_error());
        return DsmStatus::kRuntime;
    }
    if (reply[0] != 1) {
        set_error(std::string(reinterpret_cast<const char*>(reply.data() + 1), reply.size() - 1));
        return DsmStatus::kMismatch;
    }
    // Every page is valid everywhere (identical copies): read-only (every record is, from the
    // start), so the first write of the parallel section makes a twin. One cluster has nobody to
    // keep coherent: its pages stay writable and never fault. (A write fault there cost ~17 us, a
    // signal and an mprotect whose TLB flush interrupts every core running another of the
    // process's threads: gauss, 1 cluster of 2 threads, paper size, 4.4 s; now 0.04 s.)
    const uint64_t used_pages = (used + I.page - 1) / I.page;
    // The homes of the pages used at CREATE (later ones go round-robin). Every cluster replayed
    // the same allocations (the start-up exchange compared the used part), so every cluster
    // computes the same table.
    if (cfg_.home != HomePolicy::kRoundRobin) {
        I.homes.resize(used_pages);
        if (cfg_.home == HomePolicy::kBlock) {  // the used part in C blocks
            const uint64_t per = std::max<uint64_t>(1, (used_pages + clusters_ - 1) / clusters_);
            for (uint64_t p = 0; p < used_pages; p++) I.homes[p] = uint16_t(p / per);
        } else {  // each allocation in C blocks; one of fewer than C pages round-robin; a page two
                  // allocations share goes with the later one
            for (uint64_t p = 0; p < used_pages; p++) I.homes[p] = uint16_t(p % clusters_);
            for (const auto& [off, bytes] : I.pre_allocs) {
                const uint64_t first = off / I.page, end = (off + bytes + I.page - 1) / I.page;
                const uint64_t np = end - first;
                if (bytes == 0 || np < clusters_) continue;
                for (uint64_t k = 0; k < np; k++) I.homes[first + k] = uint16_t(k * clusters_ / np);
            }
            std::vector<std::pair<uint64_t, uint64_t>>().swap(I.pre_allocs);
        }
    }
    if (clusters_ > 1 && mprotect(I.app, cfg_.region_bytes, PROT_READ) != 0) {
        set_error(std::string("CREATE: mprotect of the shared region: ") + strerror(errno));
        return DsmStatus::kRuntime;
    }
    parallel_.store(true, std::memory_order_release);
    return DsmStatus::kOk;
}

std::string DsmNode::format_counters() const {
    char buf[1400];
    auto L = [](const std::atomic<uint64_t>& a) { return static_cast<unsigned long long>(a.load()); };
    const double fetch_us = ctr_.page_fetches.load() ? double(ctr_.page_fetch_ns.load()) / 1e3 / double(ctr_.page_fetches.load()) : 0;
    // One block a cluster, "name value" pairs (the names of DsmCounters): the caller writes it in
    // one piece so the blocks of clusters sharing a terminal do not interleave.
    snprintf(buf, sizeof buf,
             "dsm cluster %u:\n"
             "  read_faults %llu  write_faults %llu  page_fetches %llu  page_fetch_mean_us %.1f\n"
             "  diffs_sent %llu  diff_bytes %llu  diffs_applied %llu  invalidations %llu  intervals %llu  "
             "notices_received %llu\n"
             "  lock_acquires %llu  lock_wait_us %.1f  barriers %llu  barrier_wait_us %.1f  getsubs %llu  "
             "remote_allocs %llu  shared_used_bytes %llu\n",
             unsigned(cluster_), L(ctr_.read_faults), L(ctr_.write_faults), L(ctr_.page_fetches), fetch_us,
             L(ctr_.diffs_sent), L(ctr_.diff_bytes), L(ctr_.diffs_applied), L(ctr_.invalidations), L(ctr_.intervals),
             L(ctr_.write_notices_received), L(ctr_.lock_acquires),
             double(ctr_.lock_wait_ns.load()) / 1e3, L(ctr_.barriers), double(ctr_.barrier_wait_ns.load()) / 1e3,
             L(ctr_.getsubs), L(ctr_.remote_allocs), static_cast<unsigned long long>(used_.load()));
    return buf;
}

std::vector<std::pair<std::string, uint64_t>> DsmNode::counter_pairs() const {
    const DsmCounters& c = ctr_;
    return {{"cluster", cluster_},
            {"read_faults", c.read_faults.load()},
            {"write_faults", c.write_faults.load()},
            {"page_fetches", c.page_fetches.load()},
            {"page_fetch_ns", c.page_fetch_ns.load()},
            {"diffs_sent", c.diffs_sent.load()},
            {"diff_bytes", c.diff_bytes.load()},
            {"diffs_applied", c.diffs_applied.load()},
            {"invalidations", c.invalidations.load()},
            {"intervals", c.intervals.load()},
            {"notices_received", c.write_notices_received.load()},
            {"lock_acquires", c.lock_acquires.load()},
            {"lock_wait_ns", c.lock_wait_ns.load()},
            {"barriers", c.barriers.load()},
            {"barrier_wait_ns", c.barrier_wait_ns.load()},
            {"getsubs", c.getsubs.load()},
            {"remote_allocs", c.remote_allocs.load()},
            {"shared_used_bytes", used_.load()}};
}

}  // namespace iccs::dsm
