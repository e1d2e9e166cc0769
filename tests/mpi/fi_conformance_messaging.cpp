// fi_conformance_messaging.cpp: every send and receive call, the matching rules, and FI_PEEK,
// FI_CLAIM, FI_DISCARD, cancel, error data and sread.
#include "fi_conformance.hpp"

namespace fi_conformance {

// Every send and receive call, tagged and untagged; remote CQ data; injects; flags and fields.
void calls(Fab& f) {
    const int me = g_rank, other = 1 - g_rank;
    const bool tagged_fmt = f.format == FI_CQ_FORMAT_TAGGED;
    const bool data_fmt = f.format == FI_CQ_FORMAT_DATA || tagged_fmt;
    const bool msg_fmt = f.format != FI_CQ_FORMAT_CONTEXT;
    // k: 0 tsend, 1 tsendv, 2 tsendmsg, 3 tsenddata, 4 tinject, 5 tinjectdata,
    //    6 send, 7 sendv, 8 sendmsg, 9 senddata, 10 inject, 11 injectdata
    const size_t n = 3000;
    for (int k = 0; k < 12; ++k) {
        const bool tagged = k < 6, inject = k == 4 || k == 5 || k == 10 || k == 11;
        const bool data = k == 3 || k == 5 || k == 9 || k == 11;
        const size_t len = inject ? 200 : n;
        const uint64_t tag = 0x100 + static_cast<uint64_t>(k);
        const std::string name = std::string("call-") +
                                 (const char*[]){"tsend", "tsendv", "tsendmsg", "tsenddata", "tinject", "tinjectdata",
                                                 "send", "sendv", "sendmsg", "senddata", "inject", "injectdata"}[k];
        std::vector<uint8_t> sb(len), rb(len + 16, 0xEE);
        fill(sb, me, k);
        Ctx rctx{{}, 1}, sctx{{}, 2};
        // receive with the matching call style (v and msg forms too), three iovecs for the v forms
        iovec riov[3] = {{rb.data(), 100}, {rb.data() + 100, 900}, {rb.data() + 1000, len + 16 - 1000}};
        if (k % 3 == 1 && !inject) {
            if (tagged) EXPECT_RC(name, fi_trecvv(f.ep, riov, nullptr, 3, f.peer, tag, 0, &rctx), 0);
            else EXPECT_RC(name, fi_recvv(f.ep, riov, nullptr, 3, f.peer, &rctx), 0);
        } else if (k % 3 == 2) {
            iovec v{rb.data(), rb.size()};
            if (tagged) {
                fi_msg_tagged m{&v, nullptr, 1, f.peer, tag, 0, &rctx, 0};
                EXPECT_RC(name, fi_trecvmsg(f.ep, &m, FI_COMPLETION), 0);
            } else {
                fi_msg m{&v, nullptr, 1, f.peer, &rctx, 0};
                EXPECT_RC(name, fi_recvmsg(f.ep, &m, FI_COMPLETION), 0);
            }
        } else {
            if (tagged) EXPECT_RC(name, fi_trecv(f.ep, rb.data(), rb.size(), nullptr, f.peer, tag, 0, &rctx), 0);
            else EXPECT_RC(name, fi_recv(f.ep, rb.data(), rb.size(), nullptr, f.peer, &rctx), 0);
        }
        step(f, 1000 + k);  // both posted their receives
        const uint64_t cqd = 0xC0DE0000ull + static_cast<uint64_t>(k);
        iovec siov[3] = {{sb.data(), 7}, {sb.data() + 7, 1993}, {sb.data() + 2000, len - 2000}};
        iovec sv{sb.data(), len};
        long rc = 0;
        switch (k) {
            case 0: rc = post(f, [&] { return fi_tsend(f.ep, sb.data(), len, nullptr, f.peer, tag, &sctx); }); break;
            case 1: rc = post(f, [&] { return fi_tsendv(f.ep, siov, nullptr, 3, f.peer, tag, &sctx); }); break;
            case 2: {
                fi_msg_tagged m{&sv, nullptr, 1, f.peer, tag, 0, &sctx, 0};
                rc = post(f, [&] { return fi_tsendmsg(f.ep, &m, FI_COMPLETION); });
                break;
            }
            case 3: rc = post(f, [&] { return fi_tsenddata(f.ep, sb.data(), len, nullptr, cqd, f.peer, tag, &sctx); }); break;
            case 4: rc = post(f, [&] { return fi_tinject(f.ep, sb.data(), len, f.peer, tag); }); break;
            case 5: rc = post(f, [&] { return fi_tinjectdata(f.ep, sb.data(), len, cqd, f.peer, tag); }); break;
            case 6: rc = post(f, [&] { return fi_send(f.ep, sb.data(), len, nullptr, f.peer, &sctx); }); break;
            case 7: rc = post(f, [&] { return fi_sendv(f.ep, siov, nullptr, 3, f.peer, &sctx); }); break;
            case 8: {
                fi_msg m{&sv, nullptr, 1, f.peer, &sctx, 0};
                rc = post(f, [&] { return fi_sendmsg(f.ep, &m, FI_COMPLETION); });
                break;
            }
            case 9: rc = post(f, [&] { return fi_senddata(f.ep, sb.data(), len, nullptr, cqd, f.peer, &sctx); }); break;
            case 10: rc = post(f, [&] { return fi_inject(f.ep, sb.data(), len, f.peer); }); break;
            default: rc = post(f, [&] { return fi_injectdata(f.ep, sb.data(), len, cqd, f.peer); }); break;
        }
        EXPECT_RC(name, rc, 0);
        if (inject) std::memset(sb.data(), 0, len);  // the buffer is free at return
        int got_recv = 0, got_send = 0;
        while (got_recv + got_send < (inject ? 1 : 2)) {
            const Entry e = next(f, name);
            if (e.error) fail(name, "error entry " + std::to_string(e.err.err));
            if (e.ctx == &rctx) {
                ++got_recv;
                EXPECT(name, intact(rb.data(), len, other, k));
                EXPECT(name, rb[len] == 0xEE);
                if (msg_fmt) {
                    EXPECT(name, e.len == len);
                    EXPECT(name, (e.flags & FI_RECV) && (e.flags & (tagged ? FI_TAGGED : FI_MSG)));
                    EXPECT(name, ((e.flags & FI_REMOTE_CQ_DATA) != 0) == data);
                }
                if (data_fmt && data) EXPECT(name, e.data == cqd);
                if (data_fmt) EXPECT(name, e.buf == rb.data());
                if (tagged_fmt && tagged) EXPECT(name, e.tag == tag);
                EXPECT(name, e.src == f.peer);  // fi_cq_readfrom
            } else if (e.ctx == &sctx) {
                ++got_send;
                if (msg_fmt) EXPECT(name, (e.flags & FI_SEND) && (e.flags & (tagged ? FI_TAGGED : FI_MSG)));
            } else {
                fail(name, "a completion with a context nobody posted");
            }
        }
        quiet(f, name, 50);  // an inject has no completion
        ok(name);
    }
    // An untagged message does not match a tagged receive, nor the other way round.
    {
        const std::string name = "tagged-untagged-apart";
        uint32_t t = 0, u = 0, one = 1, two = 2;
        Ctx ct{{}, 1}, cu{{}, 2};
        step(f, 1100);  // before the any-tag receive below, which would take the step's message
        EXPECT_RC(name, fi_trecv(f.ep, &t, 4, nullptr, f.peer, 0, ~0ull, &ct), 0);  // any tag
        EXPECT_RC(name, fi_recv(f.ep, &u, 4, nullptr, f.peer, &cu), 0);
        EXPECT_RC(name, post(f, [&] { return fi_inject(f.ep, &one, 4, f.peer); }), 0);
        EXPECT_RC(name, post(f, [&] { return fi_tinject(f.ep, &two, 4, f.peer, 77); }), 0);
        for (int i = 0; i < 2; ++i) {
            const Entry e = next(f, name);
            EXPECT(name, !e.error && (e.ctx == &ct || e.ctx == &cu));
        }
        EXPECT(name, t == 2 && u == 1);
        ok(name);
    }
}

// Matching rules: source wildcard and directed, ignore bits, order, unexpected in arrival order,
// zero bytes, messages larger than a record / a ring, larger than the buffer (truncation).
void matching(Fab& f) {
    const int me = g_rank, other = 1 - g_rank;
    {
        const std::string name = "ignore-bits";
        // receive tag 0xAB00 with the low byte ignored takes tags 0xAB00..0xABFF only
        uint32_t a = 0, b = 0;
        Ctx ca{{}, 1}, cb{{}, 2};
        EXPECT_RC(name, fi_trecv(f.ep, &a, 4, nullptr, FI_ADDR_UNSPEC, 0xAB00, 0xFF, &ca), 0);
        EXPECT_RC(name, fi_trecv(f.ep, &b, 4, nullptr, f.peer, 0xAC00, 0, &cb), 0);
        step(f, 2000);
        uint32_t x = 10, y = 20;
        EXPECT_RC(name, post(f, [&] { return fi_tinject(f.ep, &y, 4, f.peer, 0xAC00); }), 0);
        EXPECT_RC(name, post(f, [&] { return fi_tinject(f.ep, &x, 4, f.peer, 0xAB42); }), 0);
        for (int i = 0; i < 2; ++i) {
            const Entry e = next(f, name);
            EXPECT(name, !e.error);
            if (e.ctx == &ca && f.format == FI_CQ_FORMAT_TAGGED) EXPECT(name, e.tag == 0xAB42);
        }
        EXPECT(name, a == 10 && b == 20);
        ok(name);
    }
    {
        const std::string name = "order-and-unexpected";
        // 300 messages of one tag sent before any receive is posted (unexpected), then 300 more
        // while receives wait: both taken in send order, any-source receives included.
        step(f, 2100);
        std::vector<uint32_t> vals(300);
        for (uint32_t i = 0; i < 300; ++i) {
            vals[i] = i;
            EXPECT_RC(name, post(f, [&] { return fi_tinject(f.ep, &vals[i], 4, f.peer, 0x55); }), 0);
        }
        step(f, 2101);  // both sent everything
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        std::vector<uint32_t> in(600, ~0u);
        std::vector<Ctx> cs(600);
        for (int i = 0; i < 300; ++i) {
            cs[i].id = i;
            EXPECT_RC(name, post(f, [&] {
                          return fi_trecv(f.ep, &in[i], 4, nullptr, i % 2 ? FI_ADDR_UNSPEC : f.peer, 0x55, 0, &cs[i]);
                      }),
                      0);
        }
        for (int i = 0; i < 300; ++i) {
            const Entry e = next(f, name);
            EXPECT(name, !e.error);
        }
        for (uint32_t i = 0; i < 300; ++i) EXPECT(name, in[i] == i);
        for (int i = 300; i < 600; ++i) {
            cs[i].id = i;
            EXPECT_RC(name, post(f, [&] { return fi_trecv(f.ep, &in[i], 4, nullptr, FI_ADDR_UNSPEC, 0x56, 0, &cs[i]); }), 0);
        }
        step(f, 2102);
        for (uint32_t i = 0; i < 300; ++i) {
            vals[i] = 1000 + i;
            EXPECT_RC(name, post(f, [&] { return fi_tinject(f.ep, &vals[i], 4, f.peer, 0x56); }), 0);
        }
        for (int i = 0; i < 300; ++i) EXPECT(name, !next(f, name).error);
        for (uint32_t i = 0; i < 300; ++i) EXPECT(name, in[300 + i] == 1000 + i);
        ok(name);
    }
    {
        const std::string name = "sizes";  // 0 B, one byte, a datagram's edge, a record, several records, 9 MiB
        const size_t sizes[] = {0, 1, 1392, 1393, 65536, 65537, (1u << 20) + 7, (9u << 20) + 3};
        int k = 0;
        for (size_t len : sizes) {
            std::vector<uint8_t> sb(len), rb(len + 8, 0xEE);
            fill(sb, me, 300 + k);
            Ctx rc{{}, 1}, sc{{}, 2};
            EXPECT_RC(name, fi_trecv(f.ep, rb.data(), len + 8, nullptr, f.peer, 0x700 + k, 0, &rc), 0);
            step(f, 2200 + k);
            EXPECT_RC(name, post(f, [&] { return fi_tsend(f.ep, sb.data(), len, nullptr, f.peer, 0x700 + k, &sc); }), 0);
            for (int i = 0; i < 2; ++i) {
                const Entry e = next(f, name, 120000);
                EXPECT(name, !e.error);
                if (e.ctx == &rc && f.format != FI_CQ_FORMAT_CONTEXT) EXPECT(name, e.len == len);
            }
            EXPECT(name, intact(rb.data(), len, other, 300 + k) && rb[len] == 0xEE);
            ++k;
        }
        ok(name);
    }
    {
        const std::string name = "truncation";  // FI_ETRUNC: the buffer holds the start, olen the rest
        for (size_t len : {size_t(3000), size_t(3u << 20)}) {
            std::vector<uint8_t> sb(len), rb(1000 + 8, 0xEE);
            fill(sb, me, 500);
            Ctx rc{{}, 1}, sc{{}, 2};
            EXPECT_RC(name, fi_trecv(f.ep, rb.data(), 1000, nullptr, f.peer, 0x800, 0, &rc), 0);
            step(f, 2300 + static_cast<int>(len % 97));
            EXPECT_RC(name, post(f, [&] { return fi_tsend(f.ep, sb.data(), len, nullptr, f.peer, 0x800, &sc); }), 0);
            bool truncated = false, sent = false;
            while (!truncated || !sent) {
                const Entry e = next(f, name, 60000);
                if (e.ctx == &rc) {
                    EXPECT(name, e.error && e.err.err == FI_ETRUNC);
                    EXPECT(name, e.err.olen == len - 1000 && e.err.len == 1000);
                    truncated = true;
                } else {
                    EXPECT(name, e.ctx == &sc && !e.error);
                    sent = true;
                }
            }
            EXPECT(name, intact(rb.data(), 1000, other, 500) && rb[1000] == 0xEE);
        }
        ok(name);
    }
}

// FI_PEEK, FI_CLAIM, FI_DISCARD; cancel; error data; sread.
void peek_claim_cancel(Fab& f) {
    const int other = 1 - g_rank;
    {
        const std::string name = "peek-nothing";  // FI_ENOMSG error entry, with the peek's context
        Ctx pc{{}, 9};
        fi_msg_tagged m{nullptr, nullptr, 0, FI_ADDR_UNSPEC, 0x900, 0, &pc, 0};
        EXPECT_RC(name, fi_trecvmsg(f.ep, &m, FI_PEEK), 0);
        const Entry e = next(f, name);
        EXPECT(name, e.error && e.err.err == FI_ENOMSG && e.ctx == &pc);
        EXPECT_RC(name, fi_trecvmsg(f.ep, &m, FI_PEEK), 0);
        expect_answer_without_words(f, name, FI_ENOMSG, &pc);
        ok(name);
    }
    step(f, 3000);
    {
        const std::string name = "peek-claim-discard";
        // three messages: tag 0x901 (peeked, then received normally), 0x902 (peeked with claim,
        // received by FI_CLAIM with the peek's context), 0x903 (peeked with discard: gone).
        std::vector<uint8_t> b1(500), b2(70000), b3(300);
        fill(b1, g_rank, 1);
        fill(b2, g_rank, 2);
        fill(b3, g_rank, 3);
        Ctx s1{{}, 1}, s2{{}, 2}, s3{{}, 3};
        EXPECT_RC(name, post(f, [&] { return fi_tsenddata(f.ep, b1.data(), b1.size(), nullptr, 41, f.peer, 0x901, &s1); }), 0);
        EXPECT_RC(name, post(f, [&] { return fi_tsend(f.ep, b2.data(), b2.size(), nullptr, f.peer, 0x902, &s2); }), 0);
        EXPECT_RC(name, post(f, [&] { return fi_tsend(f.ep, b3.data(), b3.size(), nullptr, f.peer, 0x903, &s3); }), 0);
        for (int i = 0; i < 3; ++i) EXPECT(name, !next(f, name).error);
        step(f, 3001);
        auto peek = [&](uint64_t tag, uint64_t flags, Ctx* c) {
            for (int tries = 0;; ++tries) {
                fi_msg_tagged m{nullptr, nullptr, 0, f.peer, tag, 0, c, 0};
                EXPECT_RC(name, fi_trecvmsg(f.ep, &m, FI_PEEK | flags), 0);
                const Entry e = next(f, name);
                EXPECT(name, e.ctx == c);
                if (!e.error) return e;
                EXPECT(name, e.err.err == FI_ENOMSG && tries < 2000);  // still on its way
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
            }
        };
        Ctx p1{{}, 11}, p2{{}, 12}, p3{{}, 13};
        Entry e = peek(0x901, 0, &p1);
        if (f.format != FI_CQ_FORMAT_CONTEXT) EXPECT(name, e.len == 500);
        if (f.format == FI_CQ_FORMAT_TAGGED) EXPECT(name, e.tag == 0x901 && e.data == 41);
        EXPECT(name, e.src == f.peer);
        e = peek(0x902, FI_CLAIM, &p2);
        if (f.format != FI_CQ_FORMAT_CONTEXT) EXPECT(name, e.len == 70000);
        e = peek(0x903, FI_DISCARD, &p3);
        {  // the claimed message no longer matches a plain peek, the discarded one is gone
            Ctx q{{}, 14};
            fi_msg_tagged m{nullptr, nullptr, 0, f.peer, 0x902, 0, &q, 0};
            EXPECT_RC(name, fi_trecvmsg(f.ep, &m, FI_PEEK), 0);
            const Entry n2 = next(f, name);
            EXPECT(name, n2.error && n2.err.err == FI_ENOMSG);
            fi_msg_tagged m3{nullptr, nullptr, 0, f.peer, 0x903, 0, &q, 0};
            EXPECT_RC(name, fi_trecvmsg(f.ep, &m3, FI_PEEK), 0);
            const Entry n3 = next(f, name);
            EXPECT(name, n3.error && n3.err.err == FI_ENOMSG);
        }
        std::vector<uint8_t> r1(500), r2(70000);
        Ctx rc1{{}, 21};
        EXPECT_RC(name, fi_trecv(f.ep, r1.data(), r1.size(), nullptr, f.peer, 0x901, 0, &rc1), 0);  // the peeked one is still there
        EXPECT(name, next(f, name).ctx == &rc1);
        EXPECT(name, intact(r1.data(), 500, other, 1));
        iovec v{r2.data(), r2.size()};
        fi_msg_tagged m{&v, nullptr, 1, 0 /* ignored with FI_CLAIM */, 0x902, 0, &p2, 0};
        EXPECT_RC(name, fi_trecvmsg(f.ep, &m, FI_CLAIM), 0);
        e = next(f, name);
        EXPECT(name, !e.error && e.ctx == &p2);
        EXPECT(name, intact(r2.data(), 70000, other, 2));
        ok(name);
    }
    step(f, 3002);
    {
        const std::string name = "cancel";
        uint32_t x = 0;
        Ctx c{{}, 31}, unknown{{}, 32};
        EXPECT_RC(name, fi_trecv(f.ep, &x, 4, nullptr, f.peer, 0xA00, 0, &c), 0);
        EXPECT_RC(name, fi_cancel(&f.ep->fid, &c), 0);
        const Entry e = next(f, name);
        EXPECT(name, e.error && e.err.err == FI_ECANCELED && e.ctx == &c);
        EXPECT_RC(name, fi_cancel(&f.ep->fid, &unknown), -FI_ENOENT);
        ok(name);
    }
    {
        // The caller's own err_data buffer, and ours, on a failure (a truncation); a cancel is the
        // answer to the caller's own fi_cancel: no words, its err_data not written (fabtests'
        // recv_cancel reads into an uninitialised entry).
        const std::string name = "readerr-err-data";
        char own[32];
        for (int mode = 0; mode < 2; ++mode) {
            uint32_t x = 0;
            const uint64_t y = 0x1122334455667788ull;
            Ctx rc{{}, 41}, sc{{}, 42};
            EXPECT_RC(name, fi_trecv(f.ep, &x, 4, nullptr, f.peer, 0xA01, 0, &rc), 0);
            step(f, 3100 + mode);
            EXPECT_RC(name, post(f, [&] { return fi_tsend(f.ep, &y, sizeof y, nullptr, f.peer, 0xA01, &sc); }), 0);
            bool truncated = false, sent = false;
            uint8_t raw[64];
            for (long tries = 0; !truncated || !sent; ++tries) {
                EXPECT(name, tries < 20'000'000);
                const ssize_t n = fi_cq_read(f.cq, raw, 1);
                if (n == 1) {
                    void* ctx = nullptr;
                    std::memcpy(&ctx, raw, sizeof ctx);
                    EXPECT(name, ctx == &sc && !sent);
                    sent = true;
                    continue;
                }
                if (n != -FI_EAVAIL) {
                    EXPECT(name, n == -FI_EAGAIN);
                    continue;
                }
                fi_cq_err_entry err{};
                if (mode == 0) {
                    err.err_data = own;
                    err.err_data_size = sizeof own;
                }
                EXPECT_RC(name, fi_cq_readerr(f.cq, &err, 0), 1);
                EXPECT(name, err.op_context == &rc && err.err == FI_ETRUNC && err.err_data != nullptr &&
                                 err.err_data_size > 0);
                if (mode == 0) EXPECT(name, err.err_data == own && err.err_data_size <= sizeof own);
                const char* s = fi_cq_strerror(f.cq, err.prov_errno, err.err_data, nullptr, 0);
                EXPECT(name, s != nullptr && std::strstr(s, "longer") != nullptr);
                truncated = true;
            }
        }
        Ctx c{{}, 43};
        uint32_t x = 0;
        EXPECT_RC(name, fi_trecv(f.ep, &x, 4, nullptr, f.peer, 0xA02, 0, &c), 0);
        EXPECT_RC(name, fi_cancel(&f.ep->fid, &c), 0);
        expect_answer_without_words(f, name, FI_ECANCELED, &c);
        ok(name);
    }
    {
        const std::string name = "sread-timeout";
        uint8_t raw[64];
        const auto t0 = std::chrono::steady_clock::now();
        EXPECT_RC(name, fi_cq_sread(f.cq, raw, 1, nullptr, 100), -FI_EAGAIN);
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
        EXPECT(name, ms >= 90);
        ok(name);
    }
    step(f, 3003);
}

}  // namespace fi_conformance
