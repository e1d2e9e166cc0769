// Bad use gets a clear error: allocation beyond the region, sync ids out of range, an unlock
// without the lock, a non-deterministic prefix, bad configuration; and a segfault outside the
// shared region stays the program's own crash.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <tuple>

#include "dsm_machine.hpp"

using namespace dsmtest;

TEST_CASE("dsm: allocation beyond the region is a clear error, before and after start", "[dsm-errors]") {
    Machine m(2, 1);
    DsmNode& n0 = *m.nodes[0];
    REQUIRE(n0.alloc(15ull << 20) != nullptr);
    CHECK(n0.alloc(2ull << 20) == nullptr);
    CHECK_THAT(DsmNode::error(), Catch::Contains("shared region is full") && Catch::Contains("ICCS_DSM_SIZE"));
    CHECK(n0.alloc(64, 3) == nullptr);
    CHECK_THAT(DsmNode::error(), Catch::Contains("not a power of two"));
    REQUIRE(m.nodes[1]->alloc(15ull << 20) != nullptr);
    Failures f;
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        if (c != 1) return;
        // After CREATE, cluster 0 allocates for everyone.
        void* p = n.alloc(4096);
        if (!p) f.fail("a small allocation after start failed: " + DsmNode::error());
        if (n.alloc(4ull << 20)) f.fail("an allocation beyond the region succeeded after start");
        else if (DsmNode::error().find("shared region is full") == std::string::npos) f.fail("error: " + DsmNode::error());
    });
    f.check();
    CHECK(m.nodes[1]->counters().remote_allocs.load() == 2);
}

TEST_CASE("dsm: sync ids out of range and an unlock without the lock are clear errors", "[dsm-errors]") {
    Machine m(2, 1);
    Failures f;
    m.run([&](uint16_t c, uint16_t, DsmNode& n) {
        if (c != 0) return;
        if (n.lock(1024) != DsmStatus::kBadArg) f.fail("lock 1024 accepted");
        else if (DsmNode::error() != "lock id 1024 is out of range (0 .. 1023)") f.fail("error: " + DsmNode::error());
        if (n.barrier(5000) != DsmStatus::kBadArg) f.fail("barrier 5000 accepted");
        int64_t s;
        if (n.getsub(99999, 10, 1, s) != DsmStatus::kBadArg) f.fail("getsub 99999 accepted");
        if (n.unlock(5) != DsmStatus::kBadArg) f.fail("unlock of a free lock accepted");
        else if (DsmNode::error().find("which no thread of cluster 0 holds") == std::string::npos) f.fail("error: " + DsmNode::error());
    });
    f.check();
}

TEST_CASE("dsm: a prefix that is not deterministic is caught at start", "[dsm-errors]") {
    Machine m(2, 1);
    for (uint16_t c = 0; c < 2; c++) {
        auto* p = static_cast<uint32_t*>(m.nodes[c]->alloc(64));
        p[3] = c == 0 ? 1 : 2;  // differs between the clusters
    }
    std::vector<DsmStatus> st(2);
    std::vector<std::string> err(2);
    std::vector<std::thread> th;
    for (uint16_t c = 0; c < 2; c++)
        th.emplace_back([&, c] {
            m.nodes[c]->bind_thread(0);
            st[c] = m.nodes[c]->start_parallel();
            err[c] = DsmNode::error();
        });
    for (auto& t : th) t.join();
    CHECK(st[0] == DsmStatus::kMismatch);
    CHECK(st[1] == DsmStatus::kMismatch);
    CHECK_THAT(err[1], Catch::Contains("not deterministic") && Catch::Contains("differs"));
}

TEST_CASE("dsm: configuration errors name the value", "[dsm-errors]") {
    DsmConfig cfg = test_config();
    std::string err;
    cfg.page_bytes = 1000;
    CHECK_FALSE(dsm_config_check(cfg, err));
    CHECK_THAT(err, Catch::Contains("page size 1000"));
    cfg = test_config();
    cfg.region_bytes = 4096 * 3 + 1;
    CHECK_FALSE(dsm_config_check(cfg, err));
    CHECK_THAT(err, Catch::Contains("region size 12289"));
    setenv("ICCS_DSM_HOME", "nearest", 1);
    cfg = DsmConfig{};
    CHECK_FALSE(dsm_config_from_env(cfg, err));
    CHECK(err == "ICCS_DSM_HOME=nearest: allowed values are round-robin, block, alloc-block");
    unsetenv("ICCS_DSM_HOME");
    setenv("ICCS_DSM_MIGRATE", "always", 1);
    cfg = DsmConfig{};
    CHECK_FALSE(dsm_config_from_env(cfg, err));
    CHECK(err == "ICCS_DSM_MIGRATE=always: allowed values are barrier, off");
    setenv("ICCS_DSM_MIGRATE", "off", 1);
    CHECK(dsm_config_from_env(cfg, err));
    CHECK_FALSE(cfg.migrate_homes);
    unsetenv("ICCS_DSM_MIGRATE");
    // The lock grace and its idle end: microseconds, 0 .. 1 s.
    const std::tuple<const char*, uint32_t DsmConfig::*, uint32_t> graces[] = {
        {"ICCS_DSM_LOCK_GRACE_US", &DsmConfig::lock_grace_us, 1000},
        {"ICCS_DSM_LOCK_GRACE_IDLE_US", &DsmConfig::lock_grace_idle_us, 50}};
    for (const auto& [name, field, by_default] : graces) {
        cfg = DsmConfig{};
        CHECK(cfg.*field == by_default);
        for (const char* bad : {"2000000", "-1", "1ms", ""}) {
            setenv(name, bad, 1);
            CHECK_FALSE(dsm_config_from_env(cfg, err));
            CHECK(err == std::string(name) + "=" + bad + ": expected microseconds, 0 .. 1000000");
        }
        setenv(name, "70", 1);
        CHECK(dsm_config_from_env(cfg, err));
        CHECK(cfg.*field == 70);
        unsetenv(name);
    }
    setenv("ICCS_DSM_SIZE", "12X", 1);
    CHECK_FALSE(dsm_config_from_env(cfg, err));
    CHECK_THAT(err, Catch::StartsWith("ICCS_DSM_SIZE=12X"));
    // Negative, blank-led and overflowing numbers are refused (strtoull alone takes "-1" as 2^64-1).
    for (const char* bad : {"-1", " 4096", "+4096", "16777216T", "18446744073709551616"}) {
        setenv("ICCS_DSM_SIZE", bad, 1);
        CHECK_FALSE(dsm_config_from_env(cfg, err));
        CHECK_THAT(err, Catch::StartsWith(std::string("ICCS_DSM_SIZE=") + bad + ": expected bytes"));
    }
    setenv("ICCS_DSM_SIZE", "64M", 1);
    setenv("ICCS_DSM_BASE", "-4096", 1);
    CHECK_FALSE(dsm_config_from_env(cfg, err));
    CHECK_THAT(err, Catch::StartsWith("ICCS_DSM_BASE=-4096: expected an address"));
    unsetenv("ICCS_DSM_BASE");
    setenv("ICCS_DSM_PAGE", "16K", 1);
    CHECK(dsm_config_from_env(cfg, err));
    CHECK(cfg.region_bytes == 64ull << 20);
    CHECK(cfg.page_bytes == 16384);
    unsetenv("ICCS_DSM_SIZE");
    unsetenv("ICCS_DSM_PAGE");
    // The base address is taken: a clear error, not a silent move.
    testing::LoopbackWorld w(1, 1);
    DsmConfig k = test_config();
    auto a = DsmNode::attach(w.runtime(0), k, err);
    REQUIRE(a);
    auto b = DsmNode::attach(w.runtime(0), k, err);
    CHECK_FALSE(b);
    CHECK_THAT(err, Catch::Contains("cannot map the shared region") && Catch::Contains("ICCS_DSM_BASE"));
    w.stop();
}

namespace {
// In a child: a DSM working across 2 clusters (faults inside the region handled), then a null
// dereference. Returns the wait status.
int crash_child(bool own_handler) {
    fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);  // a program with no handler of its own
        if (own_handler) {
            struct sigaction sa {};
            sa.sa_handler = [](int) { _exit(42); };
            sigaction(SIGSEGV, &sa, nullptr);
        }
        {
            Machine m(2, 1);
            uint64_t off = 0;
            for (auto& n : m.nodes) off = uint64_t(static_cast<uint8_t*>(n->alloc(64)) - static_cast<uint8_t*>(n->base()));
            m.run([&](uint16_t c, uint16_t, DsmNode& n) {
                *m.at<uint32_t>(c, off + 4 * c) = 5;  // a write fault inside the region: handled
                n.barrier(1);
                if (c == 1 && *m.at<uint32_t>(c, off) == 5) {
                    volatile int* bad = nullptr;
                    *bad = 1;  // the program's own bug
                }
            });
        }
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}
}  // namespace

TEST_CASE("dsm: a segfault outside the shared region is the program's own crash", "[dsm-errors]") {
    SECTION("default action: the process dies of SIGSEGV") {
        const int st = crash_child(false);
        CHECK(WIFSIGNALED(st));
        if (WIFSIGNALED(st)) CHECK(WTERMSIG(st) == SIGSEGV);
    }
    SECTION("the program's own SIGSEGV handler (installed first) still runs") {
        const int st = crash_child(true);
        REQUIRE(WIFEXITED(st));
        CHECK(WEXITSTATUS(st) == 42);
    }
}

TEST_CASE("dsm: a thread that is not bound touching shared memory after start stops with the address",
          "[dsm-errors]") {
    fflush(nullptr);
    int pipefd[2];
    REQUIRE(pipe(pipefd) == 0);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], 2);
        signal(SIGABRT, SIG_DFL);
        Machine m(2, 1);
        uint64_t off = 0;
        for (auto& n : m.nodes) off = uint64_t(static_cast<uint8_t*>(n->alloc(64)) - static_cast<uint8_t*>(n->base()));
        m.run([&](uint16_t, uint16_t, DsmNode&) {});
        std::thread([&] { *m.at<volatile uint32_t>(0, off) = 1; }).join();  // not bound: read-only page
        _exit(0);
    }
    close(pipefd[1]);
    std::string err;
    char buf[512];
    for (ssize_t k; (k = read(pipefd[0], buf, sizeof buf)) > 0;) err.append(buf, size_t(k));
    close(pipefd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFSIGNALED(st));
    if (WIFSIGNALED(st)) CHECK(WTERMSIG(st) == SIGABRT);
    CHECK_THAT(err, Catch::Contains("not a compute thread of this DSM touched shared address 0x3"));
}
