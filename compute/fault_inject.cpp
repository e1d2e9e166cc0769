// fault_inject.cpp: ICCS_FAULT (fault_inject.hpp).
#include "fault_inject.hpp"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace iccs {

bool fault_plan_from_env(uint16_t cluster, FaultPlan& out, std::string& err) {
    out = FaultPlan{};
    const char* v = std::getenv("ICCS_FAULT");
    if (v == nullptr || *v == '\0') return true;
    std::vector<std::string> f;
    std::istringstream in(v);
    for (std::string part; std::getline(in, part, ':');) f.push_back(part);
    char* end = nullptr;
    const unsigned long c = f.empty() ? 0 : std::strtoul(f[0].c_str(), &end, 10);
    const bool how_ok = f.size() >= 3 && (f[1] == "kill" || f[1] == "segv" || f[1] == "exit" || f[1] == "proxies");
    const bool when_ok = f.size() >= 3 && (f[2] == "setup" || f[2] == "run" || f[2] == "shutdown");
    unsigned long ms = 300;
    if (f.size() == 4) ms = std::strtoul(f[3].c_str(), nullptr, 10);
    if (f.size() < 3 || f.size() > 4 || end == f[0].c_str() || *end != '\0' || !how_ok || !when_ok || ms > 3'600'000) {
        err = std::string("ICCS_FAULT=\"") + v +
              "\": expected CLUSTER:HOW:WHEN[:MS], HOW kill|segv|exit|proxies, WHEN setup|run|shutdown, MS <= 3600000";
        return false;
    }
    if (f[1] == "proxies" && f[2] == "setup") {  // (its proxy threads start after set-up)
        err = std::string("ICCS_FAULT=\"") + v + "\": proxies at setup: the proxy threads start after set-up";
        return false;
    }
    if (c != cluster) return true;
    out.armed = true;
    out.how = f[1];
    out.when = f[2];
    out.after_ms = static_cast<uint32_t>(ms);
    return true;
}

void fault_strike(const FaultPlan& f, uint16_t cluster, const char* when, const std::function<void()>& stop_proxies) {
    if (!f.armed || f.when != when) return;
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    std::fprintf(stderr, "iccs fault: cluster %u: %s at %s (t=%lld)\n", cluster, f.how.c_str(), when,
                 static_cast<long long>(ts.tv_sec) * 1'000'000'000ll + ts.tv_nsec);
    std::fflush(stderr);
    std::fflush(stdout);
    if (f.how == "kill") raise(SIGKILL);
    if (f.how == "segv") {
        // Through a volatile, so the compiler emits the store (a constant null pointer it may
        // replace with a trap instruction: SIGILL, not the SIGSEGV a real bug gives).
        static volatile uintptr_t nowhere = 0;
        *reinterpret_cast<volatile int*>(nowhere) = 1;
    }
    if (f.how == "exit") _exit(3);
    if (f.how == "proxies" && stop_proxies) stop_proxies();
}

}  // namespace iccs
