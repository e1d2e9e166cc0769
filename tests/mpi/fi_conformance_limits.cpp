// fi_conformance_limits.cpp: many operations outstanding and a CQ that overruns, selective
// completion, what the provider does not offer, two threads on one endpoint, and a rank that
// sent and left before its receiver was up.
#include "fi_conformance.hpp"

namespace fi_conformance {

// Many operations outstanding, and a CQ that overruns (the small CQ of this phase).
void many_and_overrun(Fab& f) {
    const std::string name = "many-outstanding-cq-overrun";
    const int n = 3000;
    std::vector<uint32_t> in(n, ~0u), out(n);
    std::vector<Ctx> rc(n), sc(n);
    for (int i = 0; i < n; ++i) {
        rc[i].id = i;
        EXPECT_RC(name, post(f, [&] { return fi_trecv(f.ep, &in[i], 4, nullptr, f.peer, 0xB00, 0, &rc[i]); }), 0);
    }
    step(f, 4000);
    // The CQ holds 8 entries: every post beyond what fits waits (-FI_EAGAIN) until we read.
    int completions = 0, sent = 0;
    std::vector<char> seen_r(n, 0), seen_s(n, 0);
    auto drain = [&] {
        fi_cq_entry raw[4];
        uint8_t buf[4 * sizeof(fi_cq_tagged_entry)];
        (void)raw;
        const ssize_t got = fi_cq_read(f.cq, buf, 4);
        if (got == -FI_EAVAIL) fail(name, "an error entry");
        for (ssize_t k = 0; k < got; ++k) {
            void* ctx;
            std::memcpy(&ctx, buf + k * entry_bytes(f.format), sizeof ctx);
            const auto* c = static_cast<Ctx*>(ctx);
            if (c >= rc.data() && c < rc.data() + n) seen_r[c - rc.data()]++;
            else if (c >= sc.data() && c < sc.data() + n) seen_s[c - sc.data()]++;
            else fail(name, "a completion of no operation");
            ++completions;
        }
    };
    while (sent < n) {
        out[sent] = static_cast<uint32_t>(sent);
        sc[sent].id = sent;
        const long r = fi_tsend(f.ep, &out[sent], 4, nullptr, f.peer, 0xB00, &sc[sent]);
        if (r == 0) ++sent;
        else if (r == -FI_EAGAIN) drain();
        else fail(name, "fi_tsend: " + std::to_string(r));
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (completions < 2 * n && std::chrono::steady_clock::now() < until) drain();
    EXPECT(name, completions == 2 * n);
    for (int i = 0; i < n; ++i) EXPECT(name, seen_r[i] == 1 && seen_s[i] == 1 && in[i] == static_cast<uint32_t>(i));
    quiet(f, name, 100);
    ok(name);
}

// Selective completion: an operation completes only when it asks (Open MPI's Ssend ack: a
// 0-byte fi_tsendmsg with flags 0 and a NULL context produces nothing).
void selective(Fab& f) {
    const std::string name = "selective-completion";
    // a second endpoint is not allowed: this runs on a fresh domain of its own (the first closed)
    uint32_t x = 0, y = 7;
    Ctx rc{{}, 1}, sc{{}, 2};
    EXPECT_RC(name, fi_trecv(f.ep, &x, 4, nullptr, f.peer, 0xC00, 0, &rc), 0);  // op flags: FI_COMPLETION
    step(f, 5000);
    fi_msg_tagged m0{nullptr, nullptr, 0, f.peer, 0xC01, 0, nullptr, 0};
    EXPECT_RC(name, post(f, [&] { return fi_tsendmsg(f.ep, &m0, 0); }), 0);  // no completion
    iovec v{&y, 4};
    fi_msg_tagged m1{&v, nullptr, 1, f.peer, 0xC00, 0, &sc, 0};
    EXPECT_RC(name, post(f, [&] { return fi_tsendmsg(f.ep, &m1, FI_COMPLETION); }), 0);
    std::vector<void*> got;
    for (int i = 0; i < 2; ++i) got.push_back(next(f, name).ctx);
    EXPECT(name, (got[0] == &rc || got[1] == &rc) && (got[0] == &sc || got[1] == &sc) && x == 7);
    // the peer's 0-byte message (tag 0xC01) waits unexpected (peeked until it is there); a
    // receive without FI_COMPLETION (selective) takes it silently
    for (int tries = 0;; ++tries) {
        Ctx pc{{}, 4};
        fi_msg_tagged pm{nullptr, nullptr, 0, f.peer, 0xC01, 0, &pc, 0};
        EXPECT_RC(name, fi_trecvmsg(f.ep, &pm, FI_PEEK), 0);
        const Entry e = next(f, name);
        if (!e.error) break;
        EXPECT(name, e.err.err == FI_ENOMSG && tries < 2000);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    fi_msg_tagged r0{nullptr, nullptr, 0, f.peer, 0xC01, 0, nullptr, 0};
    EXPECT_RC(name, fi_trecvmsg(f.ep, &r0, 0), 0);
    quiet(f, name, 200);
    Ctx pc{{}, 3};
    fi_msg_tagged pm{nullptr, nullptr, 0, f.peer, 0xC01, 0, &pc, 0};
    EXPECT_RC(name, fi_trecvmsg(f.ep, &pm, FI_PEEK), 0);  // it was taken
    const Entry e = next(f, name);
    EXPECT(name, e.error && e.err.err == FI_ENOMSG);
    ok(name);
}

// What the provider does not offer: -FI_ENOSYS, no crash.
void not_offered(Fab& f) {
    const std::string name = "enosys";
    char b[8];
    EXPECT_RC(name, fi_read(f.ep, b, 8, nullptr, f.peer, 0, 0, nullptr), -FI_ENOSYS);
    EXPECT_RC(name, fi_write(f.ep, b, 8, nullptr, f.peer, 0, 0, nullptr), -FI_ENOSYS);
    EXPECT_RC(name, fi_inject_write(f.ep, b, 8, f.peer, 0, 0), -FI_ENOSYS);
    EXPECT_RC(name, fi_atomic(f.ep, b, 1, nullptr, f.peer, 0, 0, FI_UINT64, FI_SUM, nullptr), -FI_ENOSYS);
    EXPECT_RC(name, fi_barrier(f.ep, 0, nullptr), -FI_ENOSYS);
    fid_cntr* cntr = nullptr;
    fi_cntr_attr cattr{};
    EXPECT_RC(name, fi_cntr_open(f.domain, &cattr, &cntr, nullptr), -FI_ENOSYS);
    fid_ep* sep = nullptr;
    EXPECT_RC(name, fi_scalable_ep(f.domain, f.info, &sep, nullptr), -FI_ENOSYS);
    fid_mr* mr = nullptr;
    EXPECT_RC(name, fi_mr_reg(f.domain, b, 8, FI_SEND, 0, 0, 0, &mr, nullptr), -FI_ENOSYS);
    EXPECT_RC(name, fi_setname(&f.ep->fid, b, 8), -FI_ENOSYS);
    EXPECT_RC(name, fi_connect(f.ep, b, nullptr, 0), -FI_ENOSYS);
    EXPECT_RC(name, fi_ep_bind(f.ep, &f.cq->fid, FI_TRANSMIT), -FI_EOPBADSTATE);  // enabled already
    fi_msg_tagged m{nullptr, nullptr, 0, f.peer, 1, 0, nullptr, 0};
    EXPECT_RC(name, fi_trecvmsg(f.ep, &m, FI_MULTI_RECV), -FI_EBADFLAGS);
    EXPECT_RC(name, fi_tsend(f.ep, b, 8, nullptr, 0x1234567ull, 1, nullptr), -FI_EINVAL);  // no such address
    ok(name);
}

// A NULL buffer with a nonzero length: every send and receive call refuses it (-FI_EINVAL) rather
// than crashing in a copy (Open MPI 4.1.4's ofi MTL posts one for MPI_BOTTOM with struct types:
// mpi4py's testAlltoallwBottom). Zero bytes at NULL stay valid: each rank sends the other one
// and receives one into NULL.
void null_buffers(Fab& f) {
    const std::string name = "null-buffer";
    const iovec null8{nullptr, 8};
    char b[8] = {};
    const iovec ok_then_null[2] = {{b, 8}, {nullptr, 8}};
    fi_msg_tagged tm{&null8, nullptr, 1, f.peer, 0xE01, 0, nullptr, 0};
    fi_msg_tagged tm_no_iov{nullptr, nullptr, 1, f.peer, 0xE01, 0, nullptr, 0};
    fi_msg m{&null8, nullptr, 1, f.peer, nullptr, 0};
    EXPECT_RC(name, fi_tsend(f.ep, nullptr, 8, nullptr, f.peer, 0xE01, nullptr), -FI_EINVAL);
    EXPECT_RC(name, fi_tsendv(f.ep, ok_then_null, nullptr, 2, f.peer, 0xE01, nullptr), -FI_EINVAL);
    EXPECT_RC(name, fi_tsendmsg(f.ep, &tm, FI_COMPLETION), -FI_EINVAL);
    EXPECT_RC(name, fi_tsendmsg(f.ep, &tm_no_iov, FI_COMPLETION), -FI_EINVAL);
    EXPECT_RC(name, fi_tsenddata(f.ep, nullptr, 8, nullptr, 1, f.peer, 0xE01, nullptr), -FI_EINVAL);
    EXPECT_RC(name, fi_tinject(f.ep, nullptr, 8, f.peer, 0xE01), -FI_EINVAL);
    EXPECT_RC(name, fi_tinjectdata(f.ep, nullptr, 8, 1, f.peer, 0xE01), -FI_EINVAL);
    EXPECT_RC(name, fi_send(f.ep, nullptr, 8, nullptr, f.peer, nullptr), -FI_EINVAL);
    EXPECT_RC(name, fi_sendmsg(f.ep, &m, FI_COMPLETION), -FI_EINVAL);
    EXPECT_RC(name, fi_inject(f.ep, nullptr, 8, f.peer), -FI_EINVAL);
    EXPECT_RC(name, fi_senddata(f.ep, nullptr, 8, nullptr, 1, f.peer, nullptr), -FI_EINVAL);
    EXPECT_RC(name, fi_injectdata(f.ep, nullptr, 8, 1, f.peer), -FI_EINVAL);
    EXPECT_RC(name, fi_trecv(f.ep, nullptr, 8, nullptr, f.peer, 0xE01, 0, nullptr), -FI_EINVAL);
    EXPECT_RC(name, fi_trecvv(f.ep, ok_then_null, nullptr, 2, f.peer, 0xE01, 0, nullptr), -FI_EINVAL);
    EXPECT_RC(name, fi_trecvmsg(f.ep, &tm, FI_COMPLETION), -FI_EINVAL);
    EXPECT_RC(name, fi_recv(f.ep, nullptr, 8, nullptr, f.peer, nullptr), -FI_EINVAL);
    EXPECT_RC(name, fi_recvmsg(f.ep, &m, FI_COMPLETION), -FI_EINVAL);
    // zero bytes at NULL: sent and received
    Ctx rc{{}, 1}, sc{{}, 2};
    EXPECT_RC(name, fi_trecv(f.ep, nullptr, 0, nullptr, f.peer, 0xE02, 0, &rc), 0);
    step(f, 6500);
    EXPECT_RC(name, post(f, [&] { return fi_tsend(f.ep, nullptr, 0, nullptr, f.peer, 0xE02, &sc); }), 0);
    std::vector<void*> got;
    for (int i = 0; i < 2; ++i) {
        const Entry e = next(f, name);
        EXPECT(name, !e.error && e.len == 0);
        got.push_back(e.ctx);
    }
    EXPECT(name, (got[0] == &rc && got[1] == &sc) || (got[0] == &sc && got[1] == &rc));
    quiet(f, name, 100);
    ok(name);
}

// FI_THREAD_SAFE: two threads of each process send and receive at once on one endpoint.
void threads(Fab& f) {
    const std::string name = "thread-safe-two-threads";
    std::atomic<int> failures{0}, taken{0};
    step(f, 6000);
    auto worker = [&](int t) {
        const uint64_t tag = 0xD00 + static_cast<uint64_t>(t);
        std::vector<uint32_t> in(500, ~0u);
        std::vector<Ctx> rc(500);
        for (int i = 0; i < 500; ++i)
            if (post(f, [&] { return fi_trecv(f.ep, &in[i], 4, nullptr, f.peer, tag, 0, &rc[i]); }) != 0) ++failures;
        std::vector<uint32_t> out(500);
        for (int i = 0; i < 500; ++i) {
            out[i] = static_cast<uint32_t>(i) + 10000u * static_cast<uint32_t>(t);
            if (post(f, [&] { return fi_tinject(f.ep, &out[i], 4, f.peer, tag); }) != 0) ++failures;
        }
        // Both threads read the one CQ (either may take the other's entries): this one waits
        // until its own buffers are filled.
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        auto done = [&] {
            for (int i = 0; i < 500; ++i)
                if (reinterpret_cast<volatile uint32_t&>(in[i]) == ~0u) return false;
            return true;
        };
        while (!done() && std::chrono::steady_clock::now() < until) {
            uint8_t buf[8 * sizeof(fi_cq_tagged_entry)];
            const ssize_t n = fi_cq_read(f.cq, buf, 8);
            if (n > 0) taken += static_cast<int>(n);
            else if (n != -FI_EAGAIN) ++failures;
        }
        for (int i = 0; i < 500; ++i)
            if (in[i] != static_cast<uint32_t>(i) + 10000u * static_cast<uint32_t>(t)) ++failures;
    };
    std::thread a(worker, 0), b(worker, 1);
    a.join();
    b.join();
    EXPECT(name, failures == 0);
    while (taken < 1000) {  // the completions neither thread took yet: exactly 1000 in all
        const Entry e = next(f, name);
        EXPECT(name, !e.error);
        ++taken;
    }
    quiet(f, name, 100);
    step(f, 6001);
    ok(name);
}

// A tagged endpoint of info i with a CQ and a map AV, for the one-rank checks below.
static void open_tagged(Fab& f, fi_info* i, const std::string& name) {
    f.info = i;
    EXPECT_RC(name, fi_fabric(i->fabric_attr, &f.fabric, nullptr), 0);
    EXPECT_RC(name, fi_domain(f.fabric, i, &f.domain, nullptr), 0);
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_TAGGED;
    EXPECT_RC(name, fi_cq_open(f.domain, &ca, &f.cq, nullptr), 0);
    fi_av_attr aa{};
    aa.type = FI_AV_MAP;
    EXPECT_RC(name, fi_av_open(f.domain, &aa, &f.av, nullptr), 0);
    EXPECT_RC(name, fi_endpoint(f.domain, i, &f.ep, nullptr), 0);
    EXPECT_RC(name, fi_ep_bind(f.ep, &f.av->fid, 0), 0);
    EXPECT_RC(name, fi_ep_bind(f.ep, &f.cq->fid, FI_TRANSMIT | FI_RECV), 0);
    EXPECT_RC(name, fi_enable(f.ep), 0);
}

// A rank that sends and leaves before the receiver's cluster is up (its agent stops before its
// bridge is connected): the message still arrives, intact. Rank 1 sends one message of several
// chunks to rank 0 (named by its service) and closes; rank 0 starts after rank 1 has ended.
int sent_and_left() {
    const std::string name = "sent-and-left";
    const size_t len = 200'000;
    fi_info* i = nullptr;
    EXPECT_RC(name, getinfo(nullptr, g_rank == 1 ? "0" : nullptr, 0, [](fi_info* h) { h->caps = FI_TAGGED; }, &i), 0);
    Fab f;
    open_tagged(f, i, name);
    std::vector<uint8_t> b(len);
    Ctx c{{}, 1};
    if (g_rank == 1) {
        EXPECT_RC(name, fi_av_insert(f.av, i->dest_addr, 1, &f.peer, 0, nullptr), 1);
        fill(b, 1, 77);
        EXPECT_RC(name, post(f, [&] { return fi_tsend(f.ep, b.data(), len, nullptr, f.peer, 0x77, &c); }), 0);
    } else {
        EXPECT_RC(name, fi_trecv(f.ep, b.data(), len, nullptr, FI_ADDR_UNSPEC, 0x77, 0, &c), 0);
    }
    const Entry e = next(f, name, 60000, false);
    EXPECT(name, !e.error && e.ctx == &c);
    if (g_rank == 0) EXPECT(name, e.len == len && intact(b.data(), len, 1, 77));
    close_endpoint(f);
    close_domain(f);
    std::printf("conformance PASS rank %d (%s)\n", g_rank, name.c_str());
    return 0;
}

// A one-process program on a machine file of two clusters (as fabtests' fi_dom_test): rank 0
// opens a domain and an endpoint and ends, sending nothing; rank 1's cluster never comes. The
// script times its agent's end (fi_conformance.py --alone).
int alone_and_done() {
    const std::string name = "alone";
    fi_info* i = nullptr;
    EXPECT_RC(name, getinfo(nullptr, nullptr, 0, [](fi_info* h) { h->caps = FI_TAGGED; }, &i), 0);
    Fab f;
    open_tagged(f, i, name);
    close_endpoint(f);
    close_domain(f);
    std::printf("conformance PASS rank %d (%s)\n", g_rank, name.c_str());
    return 0;
}

}  // namespace fi_conformance
