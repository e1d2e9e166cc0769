// uring_features.cpp: test `uring-udp-features`. Catch2 2.13 has no SKIP, so the [uring] unit tests
// cover a kernel feature only where it exists (elsewhere they say so in a WARN and test the
// rest); this test reports those features: PASS when every one is there (so the unit tests ran
// every case), SKIP (exit 77) naming each one missing and the cases it left untested, FAIL when a
// feature the probe reported does not work when a port asks for it.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "uring_udp.hpp"

using namespace iccs;

int main() {
    UringCaps caps;
    std::string err;
    if (!uring_probe(caps, err)) {
        std::printf("SKIP: %s\n(every [uring] unit test fails here, and fabric udp cannot run)\n", err.c_str());
        return 77;
    }
    HeapPktPool pool(256, 2048 + kPktHeadroom);
    auto open = [&](const UringUdpConfig& c) { return UringUdpPort::open(c, pool, pool, err); };
    std::vector<std::string> missing, broken;
    auto feature = [&](const char* name, bool present, const char* untested) {
        std::printf("  %-52s %s\n", name, present ? "yes" : "no");
        if (!present) missing.push_back(std::string(name) + ": " + untested);
    };
    feature("multishot recvmsg with a provided-buffer ring", caps.multishot_recvmsg,
            "every case in multishot mode, the tiny-ring (ENOBUFS), dry-ring-under-GRO and direct-path cases");
    {
        UringUdpConfig c;
        c.gso = true;
        auto p = open(c);
        if (!p) broken.push_back("a plain port did not open: " + err);
        feature("UDP GSO (UDP_SEGMENT)", p && p->gso(), "the GSO runs of 'GSO sends runs to one peer' and of the direct path");
    }
    {
        UringUdpConfig c;
        c.sqpoll = true;
        auto p = open(c);
        feature("SQPOLL ring", p != nullptr, "'an SQPOLL ring sends and receives as the plain one'");
        if (p && p->describe().find("SQPOLL") == std::string::npos)
            broken.push_back("an SQPOLL port opened but does not say SQPOLL: " + p->describe());
    }
    {
        UringUdpConfig c;
        c.single_issuer = true;
        auto p = open(c);
        const bool on = p && p->defer_taskrun();
        feature("DEFER_TASKRUN (single issuer)", caps.defer_taskrun && on, "the deferred-task-run ring's 'on' sections");
        if (caps.defer_taskrun && !on) broken.push_back("the probe found DEFER_TASKRUN but a single-issuer port has it off");
    }
    {
        UringUdpConfig c;
        c.zc_send = true;
        auto p = open(c);
        const bool on = p && p->zc_send();
        feature("IORING_OP_SENDMSG_ZC", caps.send_zc && on, "'zero-copy sends arrive byte for byte'");
        if (caps.send_zc && !on) broken.push_back("the probe found SENDMSG_ZC but a port asking for it has it off");
    }
    for (const std::string& b : broken) std::printf("FAIL: %s\n", b.c_str());
    if (!broken.empty()) return 1;
    if (!missing.empty()) {
        std::printf("SKIP: this kernel lacks what some [uring] unit test cases need; they passed without testing:\n");
        for (const std::string& m : missing) std::printf("  %s\n", m.c_str());
        return 77;
    }
    std::printf("PASS: every io_uring feature the [uring] unit tests use is here: they ran every case\n");
    return 0;
}
