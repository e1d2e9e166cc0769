// hello.cpp: the first program to read. Two clusters (two processes, each with its own proxies);
// thread 0 of cluster 1 listens on port 7, thread 0 of cluster 0 connects, sends "hello" and a
// 1 MiB message (striped over the proxies), and gets both back. Run: build/compute/examples/iccs-hello
#include <cstdio>
#include <cstring>
#include <vector>

#include "cluster.hpp"

using namespace iccs;

static bool hello(ComputeEnv& env) {
    Convergence& conv = env.conv;
    if (env.thread != 0) return true;
    Connection* c = nullptr;
    std::vector<uint8_t> big(1 << 20), back(1 << 20);
    uint32_t len = 0;
    if (env.plan.cluster_id == 1) {  // the server: echo every message until end-of-stream
        conv.listen(7);
        if (conv.accept(7, c) != ConvError::kOk) return false;
        while (conv.recv(c, back.data(), static_cast<uint32_t>(back.size()), len) == ConvError::kOk)
            conv.send(c, back.data(), len);
        return conv.close(c, 1'000'000) == ConvError::kOk;
    }
    ConvError e;
    while ((e = conv.connect(Endpoint{1, 7}, c)) == ConvError::kRefused) {}  // until the server listens
    if (e != ConvError::kOk) return std::printf("connect: %s\n", conv.last_error().c_str()), false;
    conv.send(c, "hello", 5);
    char word[16] = {};
    conv.recv(c, word, sizeof word, len);
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7);
    conv.send(c, big.data(), static_cast<uint32_t>(big.size()));
    conv.recv(c, back.data(), static_cast<uint32_t>(back.size()), len);
    const bool ok = len == big.size() && back == big && std::strcmp(word, "hello") == 0;
    std::printf("cluster 0 got \"%s\" and %u bytes back: %s\n", word, len, ok ? "intact" : "WRONG");
    return conv.close(c, 5'000'000) == ConvError::kOk && ok;
}

int main() {
    ClusterPlan plan;               // 2 clusters x 2 threads, 2 proxies each, memif, adaptive polling
    plan.proxies_per_cluster = {2, 2};
    plan.proxy_cores = {1, 1};
    plan.program = hello;
    plan.quiet = true;
    return launch_clusters(plan, 60);
}
