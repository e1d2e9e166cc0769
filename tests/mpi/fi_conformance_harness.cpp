// fi_conformance_harness.cpp: see fi_conformance.hpp (reporting, completions, steps, opening a rank).
#include "fi_conformance.hpp"

namespace fi_conformance {

[[noreturn]] void fail(const std::string& name, const std::string& why) {
    std::printf("FAIL %s (rank %d): %s\n", name.c_str(), g_rank, why.c_str());
    std::fflush(stdout);
    std::_Exit(1);
}
void ok(const std::string& name) {
    if (g_rank == 0) std::printf("ok %s\n", name.c_str());
    std::fflush(stdout);
}

uint8_t pat(int src, int k, size_t i) { return static_cast<uint8_t>(src * 37 + k * 11 + i * 7 + (i >> 9)); }
void fill(std::vector<uint8_t>& b, int src, int k) {
    for (size_t i = 0; i < b.size(); ++i) b[i] = pat(src, k, i);
}
bool intact(const uint8_t* b, size_t n, int src, int k) {
    for (size_t i = 0; i < n; ++i)
        if (b[i] != pat(src, k, i)) return false;
    return true;
}

size_t entry_bytes(fi_cq_format f) {
    switch (f) {
        case FI_CQ_FORMAT_CONTEXT: return sizeof(fi_cq_entry);
        case FI_CQ_FORMAT_MSG: return sizeof(fi_cq_msg_entry);
        case FI_CQ_FORMAT_DATA: return sizeof(fi_cq_data_entry);
        default: return sizeof(fi_cq_tagged_entry);
    }
}

Entry next(Fab& f, const std::string& name, int timeout_ms, bool from) {
    uint8_t raw[sizeof(fi_cq_tagged_entry)];
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (true) {
        fi_addr_t src = FI_ADDR_NOTAVAIL;
        const ssize_t n = from ? fi_cq_readfrom(f.cq, raw, 1, &src) : fi_cq_read(f.cq, raw, 1);
        Entry e;
        if (n == 1) {
            e.src = src;
            std::memcpy(&e.ctx, raw, sizeof(void*));
            if (f.format != FI_CQ_FORMAT_CONTEXT) {
                const auto* m = reinterpret_cast<fi_cq_msg_entry*>(raw);
                e.flags = m->flags;
                e.len = m->len;
            }
            if (f.format == FI_CQ_FORMAT_DATA || f.format == FI_CQ_FORMAT_TAGGED) {
                const auto* d = reinterpret_cast<fi_cq_data_entry*>(raw);
                e.buf = d->buf;
                e.data = d->data;
            }
            if (f.format == FI_CQ_FORMAT_TAGGED) e.tag = reinterpret_cast<fi_cq_tagged_entry*>(raw)->tag;
            return e;
        }
        if (n == -FI_EAVAIL) {
            e.error = true;
            EXPECT_RC(name, fi_cq_readerr(f.cq, &e.err, 0), 1);
            e.ctx = e.err.op_context;
            e.flags = e.err.flags;
            e.len = e.err.len;
            e.tag = e.err.tag;
            e.data = e.err.data;
            return e;
        }
        if (n != -FI_EAGAIN) fail(name, "fi_cq_read: " + std::string(fi_strerror(int(-n))));
        if (std::chrono::steady_clock::now() > until) fail(name, "no completion within " + std::to_string(timeout_ms) + " ms");
    }
}

void quiet(Fab& f, const std::string& name, int ms) {
    uint8_t raw[sizeof(fi_cq_tagged_entry)];
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < until) {
        const ssize_t n = fi_cq_read(f.cq, raw, 1);
        if (n != -FI_EAGAIN) fail(name, "an unexpected completion or error (" + std::to_string(n) + ")");
    }
}

void step(Fab& f, int k) {
    const uint64_t tag = 0xF0000000ull + static_cast<uint64_t>(k);
    int v = k, got = -1;
    Ctx rc{{}, -1}, sc{{}, -2};
    EXPECT_RC("step", fi_trecv(f.ep, &got, sizeof got, nullptr, f.peer, tag, 0, &rc), 0);
    EXPECT_RC("step", post(f, [&] { return fi_tsend(f.ep, &v, sizeof v, nullptr, f.peer, tag, &sc); }), 0);
    int seen = 0;
    while (seen < 2) {
        const Entry e = next(f, "step");
        if (e.error) fail("step", "an error entry " + std::to_string(e.err.err));
        if (e.ctx == &rc || e.ctx == &sc) ++seen;
        else fail("step", "a completion of another operation");
    }
    EXPECT("step", got == k);
}

void open_all(Fab& f, const std::string& dir, bool table, bool safe, fi_cq_format format, size_t cq_size) {
    fi_info* hints = fi_allocinfo();
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_TAGGED | FI_MSG | FI_DIRECTED_RECV | FI_SOURCE;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->domain_attr->threading = safe ? FI_THREAD_SAFE : FI_THREAD_DOMAIN;
    hints->domain_attr->av_type = table ? FI_AV_TABLE : FI_AV_MAP;
    hints->domain_attr->mr_mode = 0;
    hints->fabric_attr->prov_name = strdup("iccs");
    EXPECT_RC("getinfo", fi_getinfo(FI_VERSION(1, 5), nullptr, nullptr, 0, hints, &f.info), 0);
    fi_freeinfo(hints);
    fi_info* i = f.info;
    EXPECT("getinfo", i->next == nullptr);
    EXPECT("getinfo", std::string(i->fabric_attr->prov_name) == "iccs");
    EXPECT("getinfo", i->ep_attr->type == FI_EP_RDM);
    EXPECT("getinfo", (i->caps & (FI_TAGGED | FI_MSG | FI_DIRECTED_RECV | FI_SOURCE)) == (FI_TAGGED | FI_MSG | FI_DIRECTED_RECV | FI_SOURCE));
    EXPECT("getinfo", i->mode == 0);  // FI_CONTEXT accepted, not required
    EXPECT("getinfo", i->tx_attr->inject_size == 8192);
    EXPECT("getinfo", i->ep_attr->max_msg_size >= (1ull << 30));
    EXPECT("getinfo", i->domain_attr->cq_data_size >= 4);
    EXPECT("getinfo", i->domain_attr->mr_mode == 0);
    EXPECT("getinfo", i->domain_attr->threading == (safe ? FI_THREAD_SAFE : FI_THREAD_DOMAIN));
    EXPECT("getinfo", i->domain_attr->av_type == (table ? FI_AV_TABLE : FI_AV_MAP));
    EXPECT("getinfo", (i->ep_attr->mem_tag_format >> 63) == 1);  // every tag bit is the caller's
    EXPECT("getinfo", (i->tx_attr->msg_order & FI_ORDER_SAS) && (i->rx_attr->msg_order & FI_ORDER_SAS));
    EXPECT("getinfo", i->domain_attr->data_progress == FI_PROGRESS_MANUAL);
    ok("getinfo");
    // What it does not do: no answer, not a wrong one.
    for (int k = 0; k < 3; ++k) {
        fi_info* h = fi_allocinfo();
        fi_info* none = nullptr;
        h->fabric_attr->prov_name = strdup("iccs");
        if (k == 0) h->caps = FI_RMA;
        if (k == 1) h->ep_attr->type = FI_EP_MSG;
        if (k == 2) h->domain_attr->data_progress = FI_PROGRESS_AUTO;
        EXPECT_RC("getinfo-refuses", fi_getinfo(FI_VERSION(1, 5), nullptr, nullptr, 0, h, &none), -FI_ENODATA);
        EXPECT("getinfo-refuses", none == nullptr);
        fi_freeinfo(h);
    }
    ok("getinfo-refuses");

    EXPECT_RC("open", fi_fabric(i->fabric_attr, &f.fabric, nullptr), 0);
    EXPECT_RC("open", fi_domain(f.fabric, i, &f.domain, nullptr), 0);
    fi_cq_attr ca{};
    ca.format = format;
    ca.size = cq_size;
    ca.wait_obj = FI_WAIT_UNSPEC;
    f.format = format;
    EXPECT_RC("open", fi_cq_open(f.domain, &ca, &f.cq, nullptr), 0);
    fi_av_attr aa{};
    aa.type = table ? FI_AV_TABLE : FI_AV_MAP;
    EXPECT_RC("open", fi_av_open(f.domain, &aa, &f.av, nullptr), 0);
    EXPECT_RC("open", fi_endpoint(f.domain, i, &f.ep, nullptr), 0);
    fid_ep* second = nullptr;
    EXPECT_RC("open", fi_endpoint(f.domain, i, &second, nullptr), -FI_EBUSY);  // one endpoint: the rank
    EXPECT_RC("open", fi_ep_bind(f.ep, &f.av->fid, 0), 0);
    EXPECT_RC("open", fi_ep_bind(f.ep, &f.cq->fid, FI_TRANSMIT | FI_RECV), 0);
    EXPECT_RC("open", fi_enable(f.ep), 0);
    char name[64];
    size_t len = 4;
    EXPECT_RC("getname", fi_getname(&f.ep->fid, name, &len), -FI_ETOOSMALL);
    EXPECT("getname", len == 16);
    len = sizeof name;
    EXPECT_RC("getname", fi_getname(&f.ep->fid, name, &len), 0);
    {
        std::ofstream out(dir + "/name." + std::to_string(g_rank) + ".tmp", std::ios::binary);
        out.write(name, static_cast<std::streamsize>(len));
    }
    std::rename((dir + "/name." + std::to_string(g_rank) + ".tmp").c_str(), (dir + "/name." + std::to_string(g_rank)).c_str());
    const std::string peer_file = dir + "/name." + std::to_string(1 - g_rank);
    std::string peer;
    for (int t = 0; t < 6000 && peer.size() != len; ++t) {
        std::ifstream in(peer_file, std::ios::binary);
        peer.assign(std::istreambuf_iterator<char>(in), {});
        if (peer.size() != len) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT("getname", peer.size() == len);
    // A bad address first (not this run's): refused, the good one inserted.
    char bad[16] = {};
    fi_addr_t ba = 0;
    EXPECT_RC("av", fi_av_insert(f.av, bad, 1, &ba, 0, nullptr), 0);
    EXPECT("av", ba == FI_ADDR_NOTAVAIL);
    EXPECT_RC("av", fi_av_insert(f.av, peer.data(), 1, &f.peer, 0, nullptr), 1);
    EXPECT("av", f.peer != FI_ADDR_NOTAVAIL);
    char back[16];
    size_t blen = sizeof back;
    EXPECT_RC("av", fi_av_lookup(f.av, f.peer, back, &blen), 0);
    EXPECT("av", blen == 16 && std::memcmp(back, peer.data(), 16) == 0);
    char text[64];
    size_t tlen = sizeof text;
    fi_av_straddr(f.av, back, text, &tlen);
    EXPECT("av", std::string(text) == "iccs://rank/" + std::to_string(1 - g_rank));
    ok("open-bind-enable-getname-av");
}

std::string read_name(const std::string& dir, int rank) {
    std::ifstream in(dir + "/name." + std::to_string(rank), std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
}

bool same_addr(const void* a, size_t len, const std::string& want) {
    return a != nullptr && len == want.size() && std::memcmp(a, want.data(), len) == 0;
}

void close_endpoint(Fab& f) {
    EXPECT_RC("close", fi_close(&f.cq->fid), -FI_EBUSY);  // still bound
    EXPECT_RC("close", fi_close(&f.domain->fid), -FI_EBUSY);
    EXPECT_RC("close", fi_close(&f.ep->fid), 0);
    EXPECT_RC("close", fi_close(&f.av->fid), 0);
    EXPECT_RC("close", fi_close(&f.cq->fid), 0);
}

void close_domain(Fab& f) {
    EXPECT_RC("close", fi_close(&f.domain->fid), 0);
    EXPECT_RC("close", fi_close(&f.fabric->fid), 0);
    fi_freeinfo(f.info);
}

void expect_answer_without_words(Fab& f, const std::string& name, int err_code, const void* ctx) {
    uint8_t raw[64];
    for (int tries = 0; fi_cq_read(f.cq, raw, 1) != -FI_EAVAIL; ++tries) EXPECT(name, tries < 100000);
    char canary[8];
    std::memset(canary, 'x', sizeof canary);
    fi_cq_err_entry err{};
    err.err_data = canary;
    err.err_data_size = sizeof canary;
    EXPECT_RC(name, fi_cq_readerr(f.cq, &err, 0), 1);
    EXPECT(name, err.err == err_code && err.op_context == ctx && err.err_data_size == 0 &&
                     std::memcmp(canary, "xxxxxxxx", sizeof canary) == 0);
}

}  // namespace fi_conformance
