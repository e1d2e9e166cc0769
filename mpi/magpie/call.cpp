// call.cpp: one collective call's messages: posting, completion, the checks on what arrives, the
// time-out, and the counters.
#include <sched.h>

#include <algorithm>
#include <chrono>

#include "magpie.hpp"

namespace iccs::magpie {

namespace {

uint64_t now_ms() {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::steady_clock::now().time_since_epoch())
                                      .count());
}

void max_into(std::atomic<uint64_t>& a, uint64_t v) {
    uint64_t cur = a.load(std::memory_order_relaxed);
    while (v > cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
    }
}

std::string mpi_error_string(int err) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (PMPI_Error_string(err, s, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(err);
    return std::string(s, static_cast<size_t>(len));
}

}  // namespace

Call::Call(Comm& comm, Coll coll, int root) : comm_(comm), coll_(coll), root_(root) {
    const uint32_t seq = ++comm.seq;
    // Equal on every rank that makes the same call in the same place with the same root.
    sig_ = seq * 0x9E3779B1u ^ static_cast<uint32_t>(root + 1) * 0x85EBCA6Bu;
}

Call::~Call() {
    for (Pending& p : pending_)  // after an error: nothing of this call may stay posted
        if (!p.done && p.req != MPI_REQUEST_NULL) {
            if (p.src >= 0) PMPI_Cancel(&p.req);
            PMPI_Request_free(&p.req);
        }
    CollCounters& k = counters().of(coll_);
    const auto add = [](std::atomic<uint64_t>& a, uint64_t v) {
        if (v) a.fetch_add(v, std::memory_order_relaxed);
    };
    add(k.bytes, bytes_);
    add(k.msgs, msgs_);
    add(k.sent_bytes, sent_bytes_);
    add(k.shm_msgs, shm_msgs_);
    add(k.shm_bytes, shm_bytes_);
    add(k.wan_msgs, wan_msgs_);
    add(k.wan_bytes, wan_bytes_);
    add(k.wan_bytes_min, wan_min_);
    max_into(k.wan_hops_max, hops_max_);
}

bool Call::ready() {
    if (comm_.dup_req == MPI_REQUEST_NULL) return true;
    const uint64_t timeout = settings().timeout_ms;
    const uint64_t deadline = timeout ? now_ms() + timeout : 0;
    for (uint32_t polls = 0;; ++polls) {
        int done = 0;
        const int e = timeout ? PMPI_Test(&comm_.dup_req, &done, MPI_STATUS_IGNORE)
                              : PMPI_Wait(&comm_.dup_req, MPI_STATUS_IGNORE);
        if (e != MPI_SUCCESS) return fail(e, "duplicating the communicator failed: " + mpi_error_string(e));
        if (done || timeout == 0) break;
        if ((polls & 63) == 63) {
            if (now_ms() >= deadline)
                return fail(MPI_ERR_OTHER, "waited " + std::to_string(timeout) +
                                               " ms (ICCS_MAGPIE_TIMEOUT_MS) for every rank to make its first "
                                               "collective call on this communicator");
            sched_yield();
        }
    }
    comm_.dup_req = MPI_REQUEST_NULL;
    PMPI_Comm_set_errhandler(comm_.priv, MPI_ERRORS_RETURN);
    return true;
}

bool Call::fail(int mpi_err, std::string text) {
    if (err_ == MPI_SUCCESS) {
        err_ = mpi_err == MPI_SUCCESS ? MPI_ERR_OTHER : mpi_err;
        err_text_ = std::string(mpi_name(coll_)) + " (call " + std::to_string(comm_.seq) + " on this communicator" +
                    (root_ >= 0 ? ", root " + std::to_string(root_) : std::string()) + ") on rank " +
                    std::to_string(comm_.me) + ": " + text;
    }
    return false;
}

void Call::send(const void* buf, int count, MPI_Datatype t, int dest, int64_t data_bytes) {
    if (!ok()) return;
    int tsize = 0;
    PMPI_Type_size(t, &tsize);
    const uint64_t bytes = uint64_t(count) * uint64_t(tsize);
    const bool wan = comm_.site_of[dest] != comm_.my_site();
    const uint32_t hops = hops_in_ + (wan ? 1 : 0);
    MPI_Request req = MPI_REQUEST_NULL;
    const int e = PMPI_Isend(buf, count, t, dest, tags().make(sig_, coll_, std::min<uint32_t>(hops, 3)), comm_.priv, &req);
    if (e != MPI_SUCCESS) {
        fail(e, "sending to rank " + std::to_string(dest) + " failed: " + mpi_error_string(e));
        return;
    }
    pending_.push_back(Pending{req, -1, count, t, false});
    ++msgs_;
    sent_bytes_ += bytes;
    if (comm_.cluster_of[dest] == comm_.my_cluster()) {
        ++shm_msgs_;
        shm_bytes_ += bytes;
    }
    if (wan) {
        ++wan_msgs_;
        wan_bytes_ += data_bytes < 0 ? bytes : static_cast<uint64_t>(data_bytes);
        hops_max_ = std::max<uint64_t>(hops_max_, hops);
    }
}

int Call::recv(void* buf, int count, MPI_Datatype t, int src) {
    if (!ok()) return -1;
    MPI_Request req = MPI_REQUEST_NULL;
    const int e = PMPI_Irecv(buf, count, t, src, MPI_ANY_TAG, comm_.priv, &req);
    if (e != MPI_SUCCESS) {
        fail(e, "receiving from rank " + std::to_string(src) + " failed: " + mpi_error_string(e));
        return -1;
    }
    pending_.push_back(Pending{req, src, count, t, false});
    return static_cast<int>(pending_.size() - 1);
}

// What arrived must be this call's, from a rank that agrees on the collective and root, and as
// long as this rank expects.
bool Call::finish(size_t i, const MPI_Status& st) {
    Pending& p = pending_[i];
    p.done = true;
    p.req = MPI_REQUEST_NULL;
    if (p.src < 0) {  // a send
        if (st.MPI_ERROR != MPI_SUCCESS) return fail(st.MPI_ERROR, "a send failed: " + mpi_error_string(st.MPI_ERROR));
        return true;
    }
    const std::string from = "rank " + std::to_string(p.src);
    if (st.MPI_ERROR != MPI_SUCCESS && st.MPI_ERROR != MPI_ERR_TRUNCATE)
        return fail(st.MPI_ERROR, "a receive from " + from + " failed: " + mpi_error_string(st.MPI_ERROR));
    if (TagCodec::coll(st.MPI_TAG) != coll_ || tags().sig(st.MPI_TAG) != (sig_ & tags().sig_mask)) {
        const Coll other = TagCodec::coll(st.MPI_TAG);
        const bool known = static_cast<size_t>(other) < kColls;
        return fail(MPI_ERR_OTHER, from + " sent a message of another call (" +
                                       (known ? std::string(mpi_name(other)) : std::string("unknown")) +
                                       (other == coll_ ? " with another root or in another place" : "") +
                                       "): the ranks did not call the same collectives in the same order with the "
                                       "same root");
    }
    if (st.MPI_ERROR == MPI_ERR_TRUNCATE)
        return fail(MPI_ERR_TRUNCATE, from + " sent more data than this rank expects (the ranks passed counts or "
                                             "datatypes that do not match)");
    int got = 0;
    PMPI_Get_count(&st, p.type, &got);
    if (got != p.count)
        return fail(MPI_ERR_OTHER,
                    from + " sent " + (got == MPI_UNDEFINED ? std::string("a part of an element") : std::to_string(got)) +
                        " where this rank expects " + std::to_string(p.count) +
                        " (the ranks passed counts or datatypes that do not match)");
    hops_in_ = std::max(hops_in_, TagCodec::hops(st.MPI_TAG));
    return true;
}

std::string Call::who_is_late(const std::vector<size_t>& which) const {
    std::vector<int> late;
    bool sends = false;
    for (size_t i : which)
        if (!pending_[i].done) {
            if (pending_[i].src >= 0)
                late.push_back(pending_[i].src);
            else
                sends = true;
        }
    std::sort(late.begin(), late.end());
    late.erase(std::unique(late.begin(), late.end()), late.end());
    std::string s;
    for (int r : late) s += (s.empty() ? "" : ", ") + std::to_string(r);
    if (!late.empty()) return "nothing came from rank(s) " + s;
    return sends ? "sends did not complete (the receiving ranks did not take them)" : "";
}

bool Call::wait_for(const std::vector<size_t>& which) {
    const uint64_t timeout = settings().timeout_ms;
    const uint64_t deadline = timeout ? now_ms() + timeout : 0;
    std::vector<MPI_Request> reqs;
    std::vector<size_t> idx;
    std::vector<int> done;
    std::vector<MPI_Status> st;
    uint32_t polls = 0;
    while (ok()) {
        reqs.clear();
        idx.clear();
        for (size_t i : which)
            if (!pending_[i].done) {
                reqs.push_back(pending_[i].req);
                idx.push_back(i);
            }
        if (reqs.empty()) return true;
        done.resize(reqs.size());
        st.resize(reqs.size());
        int outcount = 0;
        int e = timeout == 0 ? PMPI_Waitsome(static_cast<int>(reqs.size()), reqs.data(), &outcount, done.data(), st.data())
                             : PMPI_Testsome(static_cast<int>(reqs.size()), reqs.data(), &outcount, done.data(), st.data());
        if (e != MPI_SUCCESS && e != MPI_ERR_IN_STATUS)
            return fail(e, "waiting for messages failed: " + mpi_error_string(e));
        if (outcount == MPI_UNDEFINED) return true;
        for (int k = 0; k < outcount; ++k) {
            MPI_Status s = st[k];  // statuses come in completion order, like the indices
            if (e == MPI_SUCCESS) s.MPI_ERROR = MPI_SUCCESS;
            if (!finish(idx[done[k]], s)) return false;
        }
        if (outcount == 0 && timeout != 0) {
            if ((++polls & 63) == 0) {
                if (now_ms() >= deadline)
                    return fail(MPI_ERR_OTHER, "waited " + std::to_string(timeout) + " ms (ICCS_MAGPIE_TIMEOUT_MS): " +
                                                   who_is_late(which) +
                                                   " (a rank that did not make this call, or made it with other "
                                                   "arguments: root, counts)");
                sched_yield();
            }
        }
    }
    return false;
}

bool Call::wait(int handle) {
    if (!ok() || handle < 0) return ok();
    return wait_for({static_cast<size_t>(handle)});
}

bool Call::wait_all() {
    if (!ok()) return false;
    std::vector<size_t> all;
    for (size_t i = 0; i < pending_.size(); ++i)
        if (!pending_[i].done) all.push_back(i);
    const bool r = wait_for(all);
    if (r) pending_.clear();  // nothing pending: handles start again from 0
    return r;
}

bool Call::recv_any_length(std::vector<char>& out, int src) {
    if (!ok()) return false;
    const uint64_t timeout = settings().timeout_ms;
    const uint64_t deadline = timeout ? now_ms() + timeout : 0;
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Status st;
    for (uint32_t polls = 0;; ++polls) {
        int flag = 0;
        const int e = PMPI_Improbe(src, MPI_ANY_TAG, comm_.priv, &flag, &msg, &st);
        if (e != MPI_SUCCESS) return fail(e, "probing for rank " + std::to_string(src) + " failed: " + mpi_error_string(e));
        if (flag) break;
        if ((polls & 63) == 63) {
            if (timeout != 0 && now_ms() >= deadline)
                return fail(MPI_ERR_OTHER, "waited " + std::to_string(timeout) + " ms (ICCS_MAGPIE_TIMEOUT_MS): nothing came from rank " +
                                               std::to_string(src) + " (a rank that did not make this call, or made it "
                                               "with other arguments: root, counts)");
            sched_yield();
        }
    }
    int n = 0;
    PMPI_Get_count(&st, MPI_BYTE, &n);
    out.resize(static_cast<size_t>(n));
    pending_.push_back(Pending{MPI_REQUEST_NULL, src, n, MPI_BYTE, false});
    MPI_Status rs;
    const int e = PMPI_Mrecv(out.data(), n, MPI_BYTE, &msg, &rs);
    if (e != MPI_SUCCESS) return fail(e, "receiving from rank " + std::to_string(src) + " failed: " + mpi_error_string(e));
    rs.MPI_ERROR = MPI_SUCCESS;
    const bool r = finish(pending_.size() - 1, rs);
    pending_.pop_back();
    return r;
}

uint32_t pieces_for(const Comm& c, uint32_t site, uint64_t len_bytes, uint64_t elements) {
    const uint64_t seg = settings().segment_bytes;
    uint64_t n = c.site_clusters[site].size();
    if (seg == 0) return 1;
    n = std::min<uint64_t>(n, std::max<uint64_t>(1, len_bytes / seg));
    n = std::min<uint64_t>(n, std::max<uint64_t>(1, elements));
    return static_cast<uint32_t>(n);
}

void piece_range(uint64_t total, uint32_t n, uint32_t j, uint64_t& first, uint64_t& count) {
    const uint64_t base = total / n, rem = total % n;
    first = j * base + std::min<uint64_t>(j, rem);
    count = base + (j < rem ? 1 : 0);
}

void binomial_tree(const std::vector<int>& ranks, int me, int& parent, std::vector<int>& children) {
    const int n = static_cast<int>(ranks.size());
    const int rel = static_cast<int>(std::find(ranks.begin(), ranks.end(), me) - ranks.begin());
    parent = -1;
    children.clear();
    int mask = 1;
    while (mask < n) {
        if (rel & mask) {
            parent = ranks[rel - mask];
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (rel + mask < n) children.push_back(ranks[rel + mask]);
}

}  // namespace iccs::magpie
