// fi_conformance.cpp: the provider `iccs` against libfabric's own API, call by call, between two
// processes (ranks 0 and 1 of a machine file of 2 ranks; ICCS_RANK/ICCS_RANKS, no MPI). Each
// check prints "ok NAME" or "FAIL NAME: why" (exit 1). Rank 0 drives; rank 1 answers. Both meet
// through the provider itself (a tagged "step" message) after the basic exchange is checked.
//
// Usage: iccs-fi-conformance DIR map|table safe|domain context|msg|data|tagged
//   DIR: where the two exchange their endpoint names (a file each)
//        iccs-fi-conformance DIR sent-and-left
//   rank 1 sends one message and ends before rank 0 starts (fi_conformance.py --sent-and-left)
//        iccs-fi-conformance DIR alone
//   rank 0 opens a domain and an endpoint and ends; rank 1 never comes (fi_conformance.py --alone)
//
// The harness is in fi_conformance.hpp; the checks in fi_conformance_setup.cpp,
// fi_conformance_messaging.cpp and fi_conformance_limits.cpp.
#include "fi_conformance.hpp"

using namespace fi_conformance;

int main(int argc, char** argv) {
    const bool left = argc == 3 && std::strcmp(argv[2], "sent-and-left") == 0;
    const bool alone = argc == 3 && std::strcmp(argv[2], "alone") == 0;
    if (argc != 5 && !left && !alone) {
        std::fprintf(stderr, "usage: %s DIR map|table safe|domain context|msg|data|tagged\n"
                             "       %s DIR sent-and-left|alone\n", argv[0], argv[0]);
        return 2;
    }
    const char* r = std::getenv("ICCS_RANK");
    g_rank = r ? std::atoi(r) : -1;
    if (g_rank != 0 && g_rank != 1) {
        std::fprintf(stderr, "ICCS_RANK must be 0 or 1\n");
        return 2;
    }
    if (left) return sent_and_left();
    if (alone) return alone_and_done();
    const std::string dir = argv[1];
    const bool table = std::strcmp(argv[2], "table") == 0;
    const bool safe = std::strcmp(argv[3], "safe") == 0;
    const std::string fmt = argv[4];
    const fi_cq_format format = fmt == "context" ? FI_CQ_FORMAT_CONTEXT
                                : fmt == "msg"   ? FI_CQ_FORMAT_MSG
                                : fmt == "data"  ? FI_CQ_FORMAT_DATA
                                                 : FI_CQ_FORMAT_TAGGED;
    Fab f;
    open_all(f, dir, table, safe, format, 1024);
    step(f, 1);
    ok("first-exchange");
    getinfo_caps();
    getinfo_names(dir);
    av_names(f, dir, table);
    eq_wait_fd(f);
    agent_session();
    calls(f);
    matching(f);
    peek_claim_cancel(f);
    not_offered(f);
    null_buffers(f);
    if (safe) threads(f);
    step(f, 7000);
    close_endpoint(f);
    // A new endpoint on the same domain, with a CQ of 8 entries and FI_SELECTIVE_COMPLETION (the
    // endpoint's op flags say FI_COMPLETION, as Open MPI's): overrun and selective completion.
    f.info->tx_attr->op_flags = FI_COMPLETION;
    f.info->rx_attr->op_flags = FI_COMPLETION;
    fi_cq_attr ca{};
    ca.format = format;
    ca.size = 8;
    EXPECT_RC("reopen", fi_cq_open(f.domain, &ca, &f.cq, nullptr), 0);
    fi_av_attr aa{};
    aa.type = table ? FI_AV_TABLE : FI_AV_MAP;
    EXPECT_RC("reopen", fi_av_open(f.domain, &aa, &f.av, nullptr), 0);
    EXPECT_RC("reopen", fi_endpoint(f.domain, f.info, &f.ep, nullptr), 0);
    EXPECT_RC("reopen", fi_ep_bind(f.ep, &f.av->fid, 0), 0);
    EXPECT_RC("reopen", fi_ep_bind(f.ep, &f.cq->fid, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION), 0);
    EXPECT_RC("reopen", fi_enable(f.ep), 0);
    std::ifstream in(dir + "/name." + std::to_string(1 - g_rank), std::ios::binary);
    std::string peer((std::istreambuf_iterator<char>(in)), {});
    EXPECT_RC("reopen", fi_av_insert(f.av, peer.data(), 1, &f.peer, 0, nullptr), 1);
    step(f, 8000);
    many_and_overrun(f);
    selective(f);
    step(f, 9000);
    close_endpoint(f);
    close_domain(f);
    std::printf("conformance PASS rank %d (av %s, threading %s, cq %s)\n", g_rank, argv[2], argv[3], argv[4]);
    return 0;
}
