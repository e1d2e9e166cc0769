// dsm.cpp: the node. The region (a memfd mapped twice: the application view at the fixed address,
// the protocol view; the twins), the page records, the handlers of every part, thread binding,
// errors and counters. The protocol's parts are in dsm_fault.cpp (SIGSEGV fault path, fetch),
// dsm_diff.cpp (twins, word diffs, release), dsm_notices.cpp (intervals, write notices, acquire),
// dsm_alloc.cpp, dsm_start.cpp (CREATE, replay), dsm_config.cpp and dsm_sync.cpp (synchronization).
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

// ---- node -------------------------------------------------------------------------------------

void DsmNode::Impl::register_handlers() {
    register_fault_handlers(*this);
    register_diff_handlers(*this);
    register_notice_handlers(*this);
    register_alloc_handlers(*this);
    register_start_handlers(*this);
    register_sync_handlers(*this);
    register_barrier_handlers(*this);
}

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
    I.gpage = uint32_t(sysconf(_SC_PAGESIZE));
    I.total_pages = I.npages;
    for (const auto& [addr, bytes] : cfg.globals) {
        if (bytes == 0) continue;
        if (addr % I.gpage || bytes % I.gpage) {
            err = "dsm: a range of the program's globals (" + std::to_string(bytes) + " bytes at " +
                  std::to_string(addr) + ") is not page-aligned";
            return nullptr;
        }
        Impl::Area a;
        a.first = I.total_pages + 1;  // one unused number: a run of pages never crosses an area
        a.count = bytes / I.gpage;
        a.app = reinterpret_cast<uint8_t*>(addr);
        I.globals.push_back(a);
        I.total_pages = a.first + a.count;
    }
    if (I.total_pages > UINT32_MAX) {
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
    for (VC& v : I.last_full) v.assign(n->clusters_, 0);
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
    // The globals stay mapped where they are (the program's variables), no longer coherent.
    for (const Impl::Area& a : I.globals) {
        if (a.priv) munmap(a.priv, a.count * I.gpage);
        if (a.twins) munmap(a.twins, a.count * I.gpage);
        if (a.memfd >= 0) close(a.memfd);
    }
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
        pages = new (std::nothrow) Page[total_pages];
        if (!pages) err = "dsm: no memory for the records of " + std::to_string(total_pages) + " pages";
        return pages != nullptr;
    }
    const uint64_t bytes = (total_pages * sizeof(Page) + 4095) & ~4095ull;
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        err = "dsm: cannot reserve " + std::to_string(bytes) + " bytes of address space for the records of " +
              std::to_string(total_pages) + " pages: " + strerror(errno) + " (" + map_limits() +
              "); set a smaller ICCS_DSM_SIZE or larger ICCS_DSM_PAGE";
        return false;
    }
    pages = static_cast<Page*>(m);
    pages_map_bytes = bytes;
    return true;
}

void DsmNode::bind_thread(uint16_t t) {
    // Counted once per thread (a thread rebinding to another node without unbinding stays counted
    // here: too many only means no barrier lets homes move).
    if (t_bind.node != this) impl_->bound_threads.fetch_add(1);
    t_bind = Binding{this, &impl_->rt.endpoint(t)};
}

void DsmNode::unbind_thread() {
    if (t_bind.node != this) return;
    if (parallel()) flush();
    t_bind = {};
    impl_->bound_threads.fetch_sub(1);
}

RtEndpoint* DsmNode::bound_endpoint() const { return t_bind.node == this ? t_bind.ep : nullptr; }

RtEndpoint& bound_or_die(DsmNode& n, const char* what) {
    RtEndpoint* ep = n.bound_endpoint();
    if (!ep) fatal("%s called by a thread that is not a compute thread of cluster %u's DSM", what, unsigned(n.cluster()));
    return *ep;
}

std::string DsmNode::format_counters() const {
    char buf[2048];
    auto L = [](const std::atomic<uint64_t>& a) { return static_cast<unsigned long long>(a.load()); };
    const double fetch_us = ctr_.page_fetches.load() ? double(ctr_.page_fetch_ns.load()) / 1e3 / double(ctr_.page_fetches.load()) : 0;
    // One block a cluster, "name value" pairs (the names of DsmCounters): the caller writes it in
    // one piece so the blocks of clusters sharing a terminal do not interleave.
    snprintf(buf, sizeof buf,
             "dsm cluster %u:\n"
             "  read_faults %llu  write_faults %llu  page_fetches %llu  page_fetch_mean_us %.1f\n"
             "  diffs_sent %llu  diff_bytes %llu  diffs_applied %llu  invalidations %llu  intervals %llu  "
             "notices_received %llu\n"
             "  lock_acquires %llu  lock_requests %llu  lock_returns %llu  lock_returns_early %llu  lock_requests_here %llu  lock_returns_here %llu  lock_returns_to_thread %llu  lock_returns_ahead %llu  lock_grants_ahead %llu  lock_grants_ahead_used %llu  lock_graces %llu  lock_grace_reuses %llu  lock_grace_hold_us %.1f  lock_wait_us %.1f  fences %llu  cond_ops %llu  barriers %llu  barriers_here %llu  barrier_wait_us %.1f  getsubs %llu  "
             "remote_allocs %llu  shared_used_bytes %llu  private_global_words %llu  homes_moved %llu  pages_written_ahead %llu  written_ahead_unchanged %llu  pages_fetched_writable %llu  "
             "pages_served_twinned %llu  pages_kept_writable %llu  protection_changes %llu\n",
             unsigned(cluster_), L(ctr_.read_faults), L(ctr_.write_faults), L(ctr_.page_fetches), fetch_us,
             L(ctr_.diffs_sent), L(ctr_.diff_bytes), L(ctr_.diffs_applied), L(ctr_.invalidations), L(ctr_.intervals),
             L(ctr_.write_notices_received), L(ctr_.lock_acquires), L(ctr_.lock_requests), L(ctr_.lock_returns),
             L(ctr_.lock_returns_early), L(ctr_.lock_requests_here), L(ctr_.lock_returns_here), L(ctr_.lock_returns_to_thread), L(ctr_.lock_returns_ahead), L(ctr_.lock_grants_ahead), L(ctr_.lock_grants_ahead_used), L(ctr_.lock_graces), L(ctr_.lock_grace_reuses), double(ctr_.lock_grace_hold_ns.load()) / 1e3, double(ctr_.lock_wait_ns.load()) / 1e3, L(ctr_.fences), L(ctr_.cond_ops), L(ctr_.barriers), L(ctr_.barriers_here), double(ctr_.barrier_wait_ns.load()) / 1e3,
             L(ctr_.getsubs), L(ctr_.remote_allocs), static_cast<unsigned long long>(used_.load()),
             L(ctr_.private_global_words), L(ctr_.homes_moved), L(ctr_.pages_written_ahead),
             L(ctr_.written_ahead_unchanged), L(ctr_.pages_fetched_writable), L(ctr_.pages_served_twinned), L(ctr_.pages_kept_writable),
             L(ctr_.protection_changes));
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
            {"lock_requests", c.lock_requests.load()},
            {"lock_returns", c.lock_returns.load()},
            {"lock_returns_early", c.lock_returns_early.load()},
            {"lock_requests_here", c.lock_requests_here.load()},
            {"lock_returns_here", c.lock_returns_here.load()},
            {"lock_returns_to_thread", c.lock_returns_to_thread.load()},
            {"lock_returns_ahead", c.lock_returns_ahead.load()},
            {"lock_grants_ahead", c.lock_grants_ahead.load()},
            {"lock_grants_ahead_used", c.lock_grants_ahead_used.load()},
            {"lock_graces", c.lock_graces.load()},
            {"lock_grace_reuses", c.lock_grace_reuses.load()},
            {"lock_grace_hold_ns", c.lock_grace_hold_ns.load()},
            {"lock_wait_ns", c.lock_wait_ns.load()},
            {"fences", c.fences.load()},
            {"cond_ops", c.cond_ops.load()},
            {"barriers", c.barriers.load()},
            {"barriers_here", c.barriers_here.load()},
            {"barrier_wait_ns", c.barrier_wait_ns.load()},
            {"getsubs", c.getsubs.load()},
            {"remote_allocs", c.remote_allocs.load()},
            {"shared_used_bytes", used_.load()},
            {"private_global_words", c.private_global_words.load()},
            {"homes_moved", c.homes_moved.load()},
            {"pages_written_ahead", c.pages_written_ahead.load()},
            {"written_ahead_unchanged", c.written_ahead_unchanged.load()},
            {"pages_fetched_writable", c.pages_fetched_writable.load()},
            {"pages_served_twinned", c.pages_served_twinned.load()},
            {"pages_kept_writable", c.pages_kept_writable.load()},
            {"protection_changes", c.protection_changes.load()}};
}

}  // namespace iccs::dsm
