// dsm_start.cpp: start-up of the parallel section. At CREATE every cluster's region is compared
// by hash at cluster 0 (a non-deterministic prefix stops the run), the homes of the used pages are
// fixed and the region turns coherent; before it, replay gives every cluster cluster 0's values of
// the prefix's non-deterministic inputs (CLOCK).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>

#include "dsm_impl.hpp"

namespace iccs::dsm {

namespace {

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

// Marks the pages of [addr, addr + count * page) that lie in a mapping of a file (/proc/self/maps:
// a non-zero inode). Such a page never touched is not zeros: it holds the file's bytes, the
// executable's initialised .data (SPLASH-3 radiosity's room_model, 18 KB of it, first read after
// CREATE: taken for zeros, its tasks read garbage types in every run of builds where no variable
// the prefix touched shared a page with it). False when the maps cannot be read: then every page.
bool mark_file_pages(const uint8_t* addr, uint64_t count, uint32_t page, std::vector<uint8_t>& touched) {
    FILE* maps = fopen("/proc/self/maps", "re");
    if (maps == nullptr) return false;
    const uintptr_t lo = reinterpret_cast<uintptr_t>(addr), hi = lo + count * page;
    char line[512];
    while (fgets(line, sizeof line, maps) != nullptr) {
        unsigned long long start = 0, end = 0, inode = 0;
        if (sscanf(line, "%llx-%llx %*s %*s %*s %llu", &start, &end, &inode) != 3 || inode == 0) continue;
        for (uintptr_t a = std::max<uintptr_t>(lo, uintptr_t(start)); a < std::min<uintptr_t>(hi, uintptr_t(end)); a += page)
            touched[(a - lo) / page] = 1;
    }
    fclose(maps);
    return true;
}

// The pages of [addr, addr + count * page) that may hold a non-zero byte: those the process ever
// touched (present or swapped out, from /proc/self/pagemap; page is the OS page) and those of a
// file mapping; an anonymous page never touched (.bss) reads as zeros without being read. All of
// them when pagemap or the maps cannot be read.
std::vector<uint8_t> touched_pages(const uint8_t* addr, uint64_t count, uint32_t page) {
    std::vector<uint8_t> touched(count, 1);
    const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return touched;
    std::vector<uint64_t> entry(count);
    const ssize_t got = pread(fd, entry.data(), count * 8, off_t(reinterpret_cast<uintptr_t>(addr) / page * 8));
    close(fd);
    if (got != ssize_t(count * 8)) return touched;
    std::vector<uint8_t> mine(count, 0);
    for (uint64_t k = 0; k < count; k++) mine[k] = (entry[k] >> 62) != 0;  // bit 63 present, 62 swapped
    if (!mark_file_pages(addr, count, page, mine)) return touched;
    return mine;
}

}  // namespace

namespace {
void h_start(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto* I = static_cast<DsmNode::Impl*>(ctx);
    Rd r(m.data.data(), m.data.size());
    DsmNode::Impl::StartArrival a;
    a.tok = m.token();
    a.v = {r.get<uint64_t>(), r.get<uint64_t>(), r.get<uint32_t>(), r.get<uint64_t>(), r.get<uint64_t>()};
    const uint32_t np = r.get<uint32_t>();
    for (uint32_t k = 0; k < np && !r.bad; k++) a.page_hashes.push_back(r.get<uint64_t>());
    I->start_arrived.push_back(std::move(a));
    if (I->start_arrived.size() < I->n.clusters()) return;
    // In cluster order, whatever the order of arrival: cluster 0's copy is the reference the
    // message names ("cluster 1's shared region differs from cluster 0's").
    std::sort(I->start_arrived.begin(), I->start_arrived.end(),
              [](const auto& x, const auto& y) { return x.tok.to.cluster < y.tok.to.cluster; });
    std::string why;
    const auto& ref = I->start_arrived.front();
    const unsigned rc = ref.tok.to.cluster;
    for (const auto& x : I->start_arrived) {
        const unsigned c = x.tok.to.cluster;
        if (x.v[3] != ref.v[3]) {
            why = "cluster " + std::to_string(c) + "'s shared region is " + std::to_string(x.v[3]) + " bytes, cluster " +
                  std::to_string(rc) + "'s " + std::to_string(ref.v[3]) +
                  " (ICCS_DSM_SIZE, or its default from each host's memory): set the same ICCS_DSM_SIZE everywhere";
            break;
        }
        if (x.v[4] != ref.v[4] || x.page_hashes.size() != ref.page_hashes.size()) {
            why = "cluster " + std::to_string(c) + "'s program has " + std::to_string(x.v[4]) + " bytes of globals, "
                  "cluster " + std::to_string(rc) + "'s " + std::to_string(ref.v[4]) + ": every cluster must run the same "
                  "executable";
            break;
        }
        if (x.v != ref.v) {
            char line[256];
            snprintf(line, sizeof line,
                     "cluster %u's shared region differs from cluster %u's at CREATE (used %" PRIu64 " vs %" PRIu64
                     " bytes, hash %016" PRIx64 " vs %016" PRIx64 ", sync ids %" PRIu64 " vs %" PRIu64
                     "): the sequential prefix of main is not deterministic (fixed seeds, same input)",
                     c, rc, x.v[1], ref.v[1], x.v[0], ref.v[0], x.v[2], ref.v[2]);
            why = line;
            break;
        }
    }
    Wr w;
    w.put<uint8_t>(why.empty() ? 1 : 0);
    if (why.empty()) {  // the pages of globals that differ somewhere
        std::vector<uint32_t> differ;
        for (size_t k = 0; k < ref.page_hashes.size(); k++)
            for (const auto& x : I->start_arrived)
                if (x.page_hashes[k] != ref.page_hashes[k]) {
                    differ.push_back(uint32_t(k));
                    break;
                }
        w.put<uint32_t>(uint32_t(differ.size()));
        w.bytes(differ.data(), differ.size() * 4);
    } else {
        w.bytes(why.data(), why.size());
    }
    // Other clusters first: on a mismatch this cluster's main exits as soon as it has its answer.
    for (const auto& x : I->start_arrived)
        if (x.tok.to.cluster != I->n.cluster()) self.reply(x.tok, RtBytes{w.b.data(), uint32_t(w.b.size())});
    for (const auto& x : I->start_arrived)
        if (x.tok.to.cluster == I->n.cluster()) self.reply(x.tok, RtBytes{w.b.data(), uint32_t(w.b.size())});
    I->start_arrived.clear();
}

// Cluster 0: every cluster's words of globals that differ from cluster 0's; the union to all.
void h_private(RtEndpoint& self, const AmMsg& m, void* ctx) {
    auto* I = static_cast<DsmNode::Impl*>(ctx);
    Rd r(m.data.data(), m.data.size());
    std::vector<uint64_t> words;
    const uint32_t n = r.get<uint32_t>();
    for (uint32_t k = 0; k < n && !r.bad; k++) words.push_back(r.get<uint64_t>());
    I->private_arrived.emplace_back(m.token(), std::move(words));
    if (I->private_arrived.size() < I->n.clusters()) return;
    std::vector<uint64_t> all;
    for (const auto& [tok, v] : I->private_arrived) all.insert(all.end(), v.begin(), v.end());
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    Wr w;
    w.put<uint32_t>(uint32_t(all.size()));
    w.bytes(all.data(), all.size() * 8);
    for (const auto& [tok, v] : I->private_arrived) self.reply(tok, RtBytes{w.b.data(), uint32_t(w.b.size())});
    I->private_arrived.clear();
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

DsmStatus DsmNode::Impl::start_exchange(RtEndpoint& ep, uint64_t used, std::vector<uint32_t>& differing) {
    Wr w;
    w.b.reserve(48);  // (one allocation; GCC 12 warns of a false overflow when it grows piecewise)
    w.put<uint64_t>(region_hash(memfd, priv, used, page));
    w.put<uint64_t>(used);
    w.put<uint32_t>(n.next_sync_.load());
    w.put<uint64_t>(n.cfg_.region_bytes);
    uint64_t gbytes = 0, gpages = 0;
    for (const Area& a : globals) {
        gbytes += a.count * gpage;
        gpages += a.count;
    }
    w.put<uint64_t>(gbytes);
    w.put<uint32_t>(uint32_t(gpages));
    std::vector<uint8_t> zeros(gpage, 0);
    const uint64_t zero_hash = hash_words(1469598103934665603ull, zeros.data(), gpage);
    // One cluster shares no globals (share_globals did not run: no `nonzero`) and compares with
    // nobody: every page goes as a zero page.
    for (const Area& a : globals)
        for (uint64_t k = 0; k < a.count; k++)
            w.put<uint64_t>(k < a.nonzero.size() && a.nonzero[k] ? hash_words(1469598103934665603ull, a.app + k * gpage, gpage)
                                                                : zero_hash);
    std::vector<uint8_t> reply;
    if (w.b.size() > rt.max_message())
        fatal("cluster %u: the program's globals (%" PRIu64 " bytes) are too many pages to compare at CREATE in one "
              "message", unsigned(n.cluster_), gbytes);
    RtStatus s = ep.request(service(0), h(kHStart), RtBytes{w.b.data(), uint32_t(w.b.size())}, {}, reply);
    if (s != RtStatus::kOk || reply.empty()) {
        set_error("CREATE: start-up exchange with cluster 0 failed: " + ep.last_error());
        return DsmStatus::kRuntime;
    }
    if (reply[0] != 1) {
        set_error(std::string(reinterpret_cast<const char*>(reply.data() + 1), reply.size() - 1));
        return DsmStatus::kMismatch;
    }
    // Page k of the globals (in area order) by its page number.
    std::vector<uint32_t> number;
    for (const Area& a : globals)
        for (uint64_t k = 0; k < a.count; k++) number.push_back(uint32_t(a.first + k));
    Rd r(reply.data() + 1, reply.size() - 1);
    const uint32_t nd = r.get<uint32_t>();
    for (uint32_t k = 0; k < nd && !r.bad; k++) {
        const uint32_t idx = r.get<uint32_t>();
        if (idx < number.size()) differing.push_back(number[idx]);
    }
    return DsmStatus::kOk;
}

// The words of `differing` pages in which this cluster's copy differs from cluster 0's (fetched
// from there), sent to cluster 0, whose union every cluster then keeps its own value of.
DsmStatus DsmNode::Impl::agree_private_words(RtEndpoint& ep, const std::vector<uint32_t>& differing) {
    std::vector<uint64_t> mine;
    std::vector<uint8_t> copy;
    for (uint32_t p : differing) {
        if (n.cluster_ == 0) break;
        if (ep.request(service(0), h(kHFetch), RtBytes{&p, 4}, {}, copy) != RtStatus::kOk || copy.size() != gpage) {
            set_error("CREATE: fetching cluster 0's globals failed: " + ep.last_error());
            return DsmStatus::kRuntime;
        }
        const uint8_t* own = page_priv(p);
        for (uint32_t off = 0; off < gpage; off += 8)
            if (std::memcmp(own + off, copy.data() + off, 8) != 0) mine.push_back(uint64_t(p) << 32 | off);
    }
    Wr w;
    w.put<uint32_t>(uint32_t(mine.size()));
    w.bytes(mine.data(), mine.size() * 8);
    std::vector<uint8_t> reply;
    if (ep.request(service(0), h(kHPrivate), RtBytes{w.b.data(), uint32_t(w.b.size())}, {}, reply) != RtStatus::kOk) {
        set_error("CREATE: agreeing on the globals that differ failed: " + ep.last_error());
        return DsmStatus::kRuntime;
    }
    Rd r(reply.data(), reply.size());
    const uint32_t k = r.get<uint32_t>();
    for (uint32_t i = 0; i < k && !r.bad; i++) {
        const uint64_t x = r.get<uint64_t>();
        private_words[x >> 32].push_back(uint32_t(x));
    }
    n.ctr_.private_global_words.store(k, std::memory_order_relaxed);
    return DsmStatus::kOk;
}

// The homes of the pages used at CREATE (later ones go round-robin). Every cluster replayed the
// same allocations (the start-up exchange compared the used part), so every cluster computes the
// same table.
// The table is filled a block at a time (std::fill, and the round-robin pattern doubled by copies),
// not with a division per page: ocean-nc uses 29.5 GB of the region before CREATE (7.2 M pages),
// and the two loops of a division per page were 15 % of its run's CPU (perf, 2 x 1 over direct).
void DsmNode::Impl::fix_homes(uint64_t used) {
    const uint16_t C = n.clusters_;
    const uint64_t used_pages = (used + page - 1) / page;
    homes.resize(used_pages);
    if (n.cfg_.home == HomePolicy::kBlock) {  // the used part in C blocks: page p at p / per
        const uint64_t per = std::max<uint64_t>(1, (used_pages + C - 1) / C);
        for (uint64_t c = 0; c * per < used_pages; c++)
            std::fill(homes.begin() + c * per, homes.begin() + std::min(used_pages, (c + 1) * per), uint16_t(c));
        return;
    }
    // Each allocation in C blocks; one of fewer than C pages round-robin; a page two allocations
    // share goes with the later one. Round-robin first: page p at p mod C.
    for (uint64_t p = 0; p < std::min<uint64_t>(C, used_pages); p++) homes[p] = uint16_t(p);
    for (uint64_t len = C; len < used_pages; len *= 2)  // a multiple of C: the pattern continues
        std::copy_n(homes.begin(), std::min(len, used_pages - len), homes.begin() + len);
    for (const auto& [off, bytes] : pre_allocs) {
        const uint64_t first = off / page, end = (off + bytes + page - 1) / page;
        const uint64_t np = end - first;
        if (bytes == 0 || np < C) continue;
        // Page k of the allocation at k * C / np: cluster c from ceil(c * np / C) to ceil((c + 1) * np / C).
        for (uint64_t c = 0; c < C; c++)
            std::fill(homes.begin() + first + (c * np + C - 1) / C, homes.begin() + first + ((c + 1) * np + C - 1) / C,
                      uint16_t(c));
    }
    std::vector<std::pair<uint64_t, uint64_t>>().swap(pre_allocs);
}

DsmStatus DsmNode::start_parallel() {
    RtEndpoint& ep = bound_or_die(*this, "start_parallel (CREATE)");
    if (parallel()) return DsmStatus::kOk;  // coherent since the first call
    Impl& I = *impl_;
    const uint64_t used = used_.load();
    // The globals become DSM memory before the exchange: once any cluster is past it, it may
    // fetch a global page from any other, or send it a diff.
    std::string err;
    if (!I.locks_free_at_create(err)) {
        set_error("CREATE: " + err);
        return DsmStatus::kBadArg;
    }
    if (clusters_ > 1 && !I.share_globals(err)) {
        set_error("CREATE: " + err);
        return DsmStatus::kRuntime;
    }
    std::vector<uint32_t> differing;
    DsmStatus st = I.start_exchange(ep, used, differing);
    if (st == DsmStatus::kOk && !differing.empty()) st = I.agree_private_words(ep, differing);
    if (st != DsmStatus::kOk) return st;
    if (cfg_.home != HomePolicy::kRoundRobin) I.fix_homes(used);
    // Every page is valid everywhere (identical copies): read-only (every record is, from the
    // start), so the first write of the parallel section makes a twin. One cluster has nobody to
    // keep coherent: its pages stay writable and never fault. (A write fault there cost ~17 us, a
    // signal and an mprotect whose TLB flush interrupts every core running another of the
    // process's threads: gauss, 1 cluster of 2 threads, paper size, 4.4 s; now 0.04 s.)
    if (clusters_ > 1 && mprotect(I.app, cfg_.region_bytes, PROT_READ) != 0) {
        set_error(std::string("CREATE: mprotect of the shared region: ") + strerror(errno));
        return DsmStatus::kRuntime;
    }
    for (const Impl::Area& a : I.globals)
        if (clusters_ > 1 && mprotect(a.app, a.count * I.gpage, PROT_READ) != 0) {
            set_error(std::string("CREATE: mprotect of the program's globals: ") + strerror(errno));
            return DsmStatus::kRuntime;
        }
    parallel_.store(true, std::memory_order_release);
    return DsmStatus::kOk;
}

// Each area of the program's globals onto DSM memory where it is: its current bytes copied into
// a memfd that is then mapped over the area (MAP_FIXED: the same addresses, now a shared mapping
// the protocol can protect), and a second time as the protocol view. Before CREATE only main
// runs, and the runtime's threads never touch the program's own variables, so nothing reads or
// writes an area while it is replaced. Only pages holding a non-zero byte are copied (the memfd
// reads as zeros elsewhere), and anonymous pages never touched are not even read (file pages, the
// initialised .data, always are: touched_pages): raytrace's .bss is 256 MB
// (one array), copied whole it cost each cluster 256 MB of shared memory and most of its start-up.
bool DsmNode::Impl::share_globals(std::string& err) {
    for (Area& a : globals) {
        const uint64_t bytes = a.count * gpage;
        a.memfd = memfd_create("iccs-dsm-globals", MFD_CLOEXEC);
        if (a.memfd < 0 || ftruncate(a.memfd, off_t(bytes)) != 0) {
            err = std::string("the program's globals into shared memory: ") + strerror(errno);
            return false;
        }
        a.nonzero = touched_pages(a.app, a.count, gpage);
        for (uint64_t k = 0; k < a.count; k++)
            if (a.nonzero[k]) a.nonzero[k] = !all_zero(a.app + k * gpage, gpage);
        for (uint64_t k = 0; k < a.count;) {  // each run of non-zero pages in one write
            if (!a.nonzero[k]) {
                k++;
                continue;
            }
            uint64_t e = k + 1;
            while (e < a.count && a.nonzero[e]) e++;
            const size_t len = (e - k) * gpage;
            if (pwrite(a.memfd, a.app + k * gpage, len, off_t(k * gpage)) != ssize_t(len)) {
                err = std::string("the program's globals into shared memory: ") + strerror(errno);
                return false;
            }
            k = e;
        }
        void* v = mmap(a.app, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, a.memfd, 0);
        void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, a.memfd, 0);
        void* t = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (v != a.app || p == MAP_FAILED || t == MAP_FAILED) {
            // The area may already be replaced: nothing can continue without it.
            fatal("cluster %u: mapping the program's globals (%" PRIu64 " bytes at %p) as shared memory: %s",
                  unsigned(n.cluster_), bytes, static_cast<void*>(a.app), strerror(errno));
        }
        a.priv = static_cast<uint8_t*>(p);
        a.twins = static_cast<uint8_t*>(t);
    }
    return true;
}

void DsmNode::end_coherence() {
    if (!parallel()) return;
    Impl& I = *impl_;
    parallel_.store(false, std::memory_order_release);
    if (clusters_ == 1) return;  // never protected
    mprotect(I.app, cfg_.region_bytes, PROT_READ | PROT_WRITE);
    for (const Impl::Area& a : I.globals) mprotect(a.app, a.count * I.gpage, PROT_READ | PROT_WRITE);
}

void register_start_handlers(DsmNode::Impl& I) {
    I.rt.set_handler(I.h(kHStart), h_start, &I);
    I.rt.set_handler(I.h(kHReplay), h_replay, &I);
    I.rt.set_handler(I.h(kHPrivate), h_private, &I);
}

}  // namespace iccs::dsm
