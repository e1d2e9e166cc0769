// fi_conformance.hpp: the harness of the provider's conformance checks (fi_conformance.cpp says
// what they are and how they run): reporting (ok, fail, EXPECT), one rank's fabric objects, its
// completions, the steps that keep the two ranks together, and the checks, one function each.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace fi_conformance {

inline int g_rank = -1;  // ICCS_RANK: rank 0 drives, rank 1 answers

// "FAIL NAME (rank R): why", and the process ends with exit 1.
[[noreturn]] void fail(const std::string& name, const std::string& why);
// "ok NAME" (rank 0 says it).
void ok(const std::string& name);

#define EXPECT(name, cond)                                                                         \
    do {                                                                                           \
        if (!(cond)) fail(name, std::string(#cond) + " (line " + std::to_string(__LINE__) + ")"); \
    } while (0)
#define EXPECT_RC(name, call, want)                                                                             \
    do {                                                                                                        \
        const long rc_ = (call);                                                                                \
        if (rc_ != (want))                                                                                      \
            fail(name, std::string(#call) + " returned " + std::to_string(rc_) + " (" + fi_strerror(int(-rc_)) + \
                           "), wanted " + std::to_string(want) + " (line " + std::to_string(__LINE__) + ")");  \
    } while (0)

// The bytes of message k from rank src: pat(src, k, i) at byte i.
uint8_t pat(int src, int k, size_t i);
void fill(std::vector<uint8_t>& b, int src, int k);
bool intact(const uint8_t* b, size_t n, int src, int k);

// An address of the provider as its README documents it (fi_getname: 16 bytes).
struct IccsLikeAddr {
    uint32_t magic;
    uint32_t rank;
    uint64_t run_hash;
};

struct Ctx {
    fi_context2 c;  // FI_CONTEXT2: the provider may use it (it does not)
    int id;
};

struct Fab {
    fi_info* info = nullptr;
    fid_fabric* fabric = nullptr;
    fid_domain* domain = nullptr;
    fid_cq* cq = nullptr;
    fid_av* av = nullptr;
    fid_ep* ep = nullptr;
    fi_cq_format format = FI_CQ_FORMAT_TAGGED;
    fi_addr_t peer = FI_ADDR_UNSPEC;
};

size_t entry_bytes(fi_cq_format f);

// One completion as all formats see it (fields the CQ's format lacks stay 0).
struct Entry {
    void* ctx = nullptr;
    uint64_t flags = 0, len = 0, data = 0, tag = 0;
    void* buf = nullptr;
    fi_addr_t src = FI_ADDR_NOTAVAIL;
    bool error = false;
    fi_cq_err_entry err{};
};

// The next completion (success or error), waiting up to timeout_ms.
Entry next(Fab& f, const std::string& name, int timeout_ms = 20000, bool from = true);
// Nothing more in the CQ for a while (nothing extra was generated).
void quiet(Fab& f, const std::string& name, int ms = 200);

// Retry a post while the provider says -FI_EAGAIN (progress in between: manual progress).
template <typename F>
long post(Fab& f, F&& call) {
    uint8_t raw[sizeof(fi_cq_tagged_entry)];
    (void)raw;
    for (;;) {
        const long rc = call();
        if (rc != -FI_EAGAIN) return rc;
        (void)f;
        std::this_thread::yield();
    }
}

// A step between the two ranks: rank 0 sends "step k" and rank 1 answers (tag 0xF000 + k).
void step(Fab& f, int k);
// fi_getinfo, fabric, domain, CQ, AV, endpoint; the names exchanged through DIR and the peer
// inserted (each checked: "getinfo", "getinfo-refuses", "open-bind-enable-getname-av").
void open_all(Fab& f, const std::string& dir, bool table, bool safe, fi_cq_format format, size_t cq_size);
// The endpoint name rank `rank` wrote to DIR.
std::string read_name(const std::string& dir, int rank);

// fi_getinfo with the provider named and `tweak` applied to the hints; its return code, *out the answer.
template <typename F>
int getinfo(const char* node, const char* service, uint64_t flags, F&& tweak, fi_info** out) {
    fi_info* h = fi_allocinfo();
    h->fabric_attr->prov_name = strdup("iccs");
    tweak(h);
    *out = nullptr;
    const int rc = fi_getinfo(FI_VERSION(1, 5), node, service, flags, h, out);
    fi_freeinfo(h);
    return rc;
}
bool same_addr(const void* a, size_t len, const std::string& want);

// The endpoint and what is bound to it (the domain stays: a process is one rank, attached once).
void close_endpoint(Fab& f);
void close_domain(Fab& f);

// The next entry is an error entry `err` for ctx that is an answer, not a failure (a peek that
// found nothing, a cancel): readerr writes no words through the caller's err_data, whatever its
// size says (fabtests' rdm_tagged_peek and recv_cancel read into uninitialised entries; the
// provider once wrote through them and those processes crashed).
void expect_answer_without_words(Fab& f, const std::string& name, int err_code, const void* ctx);

// The checks, in the order main runs them. fi_conformance_setup.cpp: capabilities and names.
void getinfo_caps();
void getinfo_names(const std::string& dir);
void av_names(Fab& f, const std::string& dir, bool table);
void eq_wait_fd(Fab& f);
// The agent this run started is in our session (one scheduling group with the ranks under the
// kernel's autogroups) but not in our process group.
void agent_session();
// fi_conformance_messaging.cpp: every call, matching, peek/claim/cancel.
void calls(Fab& f);
void matching(Fab& f);
void peek_claim_cancel(Fab& f);
// fi_conformance_limits.cpp: what is not offered, two threads, many outstanding and a CQ that
// overruns, selective completion; a rank that sent and left.
void not_offered(Fab& f);
// A NULL buffer with a nonzero length refused by every send and receive call; zero bytes at NULL
// sent and received.
void null_buffers(Fab& f);
void threads(Fab& f);
void many_and_overrun(Fab& f);
void selective(Fab& f);
int sent_and_left();
int alone_and_done();

}  // namespace fi_conformance
