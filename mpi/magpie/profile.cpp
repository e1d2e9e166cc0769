// profile.cpp: the MPI_ functions the library puts in front of the MPI library (the profiling
// interface: the program's calls land here, the MPI library's own are reached as PMPI_).
//
// Each collective checks what MPI would refuse; a call MPI refuses, or one the library does not
// handle (an inter-communicator, a communicator reaching outside MPI_COMM_WORLD), goes to its
// PMPI_ twin unchanged, so MPI's own checks and errors apply, and is counted. A call the library
// runs and that fails (ranks that disagree on the collective, root or counts; a time-out) reports
// on stderr and through the communicator's error handler (MPI_ERRORS_ARE_FATAL: the job ends),
// and leaves the communicator failed for the library: later collectives on it fail at once.
#include <map>
#include <mutex>
#include <utility>

#include "iccs_magpie.h"
#include "library.hpp"
#include "magpie.hpp"

#define ICCS_EXPORT extern "C" __attribute__((visibility("default")))

using namespace iccs::magpie;

namespace {

// The library's view of comm, or null (and why) when the call goes to PMPI_.
Comm* enter(MPI_Comm comm, Pass& why) {
    if (!ensure_setup()) {  // MPI not initialized: PMPI_ gives MPI's own error
        why = Pass::kUnplaced;
        return nullptr;
    }
    if (!settings().enabled) {
        why = Pass::kDisabled;
        return nullptr;
    }
    if (comm == MPI_COMM_NULL) {
        why = Pass::kArguments;
        return nullptr;
    }
    return comm_of(comm, why);
}

template <class F>
int pass(Coll coll, Pass why, F&& pmpi) {
    counters().of(coll).passthrough.fetch_add(1, std::memory_order_relaxed);
    counters().pass[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed);
    return pmpi();
}

template <class F>
int run(Comm& c, Coll coll, int root, F&& algorithm) {
    if (c.error != MPI_SUCCESS)
        return raise_error(c.user, c.error, std::string(mpi_name(coll)) +
                                                ": this communicator failed in an earlier collective: " + c.error_text);
    counters().of(coll).calls.fetch_add(1, std::memory_order_relaxed);
    int rc = MPI_SUCCESS;
    std::string text;
    {
        Call call(c, coll, root);
        rc = call.ready() ? algorithm(call) : call.error();
        if (rc == MPI_SUCCESS && !call.ok()) rc = call.error();
        text = call.error_text();
    }
    if (rc == MPI_SUCCESS) return MPI_SUCCESS;
    c.error = rc;
    c.error_text = text;
    return raise_error(c.user, rc, text);
}

bool fits_int(uint64_t bytes) { return bytes <= uint64_t(INT32_MAX); }
bool valid_type(MPI_Datatype t) { return t != MPI_DATATYPE_NULL; }

bool predefined_op(MPI_Op op) {
    static const MPI_Op ops[] = {MPI_MAX,  MPI_MIN,  MPI_SUM,  MPI_PROD,   MPI_LAND,   MPI_BAND,    MPI_LOR,
                                 MPI_BOR,  MPI_LXOR, MPI_BXOR, MPI_MAXLOC, MPI_MINLOC, MPI_REPLACE, MPI_NO_OP};
    for (MPI_Op o : ops)
        if (o == op) return true;
    return false;
}

// Whether MPI accepts `op` on `t`: user operations take any datatype; a predefined one only the
// predefined datatypes its definition lists, which MPI_Reduce_local on one element tells (asked
// once per pair, with MPI_COMM_WORLD's error handler set to return meanwhile).
bool op_fits(MPI_Op op, MPI_Datatype t) {
    if (op == MPI_OP_NULL || !valid_type(t)) return false;
    if (!predefined_op(op)) return true;
    int ni, na, nd, combiner;
    if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) != MPI_SUCCESS || combiner != MPI_COMBINER_NAMED) return false;
    static std::mutex m;
    static std::map<std::pair<MPI_Op, MPI_Datatype>, bool> known;
    std::lock_guard<std::mutex> lock(m);
    const auto it = known.find({op, t});
    if (it != known.end()) return it->second;
    const TypeInfo ti = type_info(t);
    TypedBuf a(ti, 1), b(ti, 1);
    MPI_Errhandler old;
    PMPI_Comm_get_errhandler(MPI_COMM_WORLD, &old);
    PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const bool ok = PMPI_Reduce_local(a.base(), b.base(), 1, t, op) == MPI_SUCCESS;
    PMPI_Comm_set_errhandler(MPI_COMM_WORLD, old);
    PMPI_Errhandler_free(&old);
    known.emplace(std::make_pair(op, t), ok);
    return ok;
}

bool make_reduction(MPI_Op op, MPI_Datatype t, int count, Reduction& r) {
    if (count < 0 || !op_fits(op, t)) return false;
    int commute = 1;
    if (PMPI_Op_commutative(op, &commute) != MPI_SUCCESS) return false;
    r.op = op;
    r.t = type_info(t);
    r.count = count;
    r.commutative = commute != 0;
    return fits_int(uint64_t(count) * uint64_t(r.t.size));
}

bool valid_counts(const int* counts, int n) {
    if (counts == nullptr) return false;
    for (int i = 0; i < n; ++i)
        if (counts[i] < 0) return false;
    return true;
}

Blocks blocks(const int* counts, const int* displs, int count, MPI_Datatype t) {
    Blocks b;
    b.counts = counts;
    b.displs = displs;
    b.count = count;
    b.t = type_info(t);
    return b;
}

}  // namespace

ICCS_EXPORT unsigned long long iccs_magpie_counter(const char* collective, const char* field) {
    return counter_value(collective, field);
}

ICCS_EXPORT int MPI_Init(int* argc, char*** argv) {
    const int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) setup_after_init();
    return rc;
}

ICCS_EXPORT int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
    const int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) setup_after_init();
    return rc;
}

ICCS_EXPORT int MPI_Finalize(void) {
    int inited = 0, finalized = 0;
    PMPI_Initialized(&inited);
    PMPI_Finalized(&finalized);
    if (inited && !finalized) finish_before_finalize();
    return PMPI_Finalize();
}

ICCS_EXPORT int MPI_Barrier(MPI_Comm comm) {
    Pass why;
    Comm* c = enter(comm, why);
    if (!c) return pass(Coll::kBarrier, why, [&] { return PMPI_Barrier(comm); });
    return run(*c, Coll::kBarrier, -1, [&](Call& call) { return barrier(call); });
}

ICCS_EXPORT int MPI_Bcast(void* buf, int count, MPI_Datatype t, int root, MPI_Comm comm) {
    Pass why;
    Comm* c = enter(comm, why);
    TypeInfo ti;
    if (c && (root < 0 || root >= c->n || count < 0 || !valid_type(t))) c = nullptr, why = Pass::kArguments;
    if (c && !fits_int(uint64_t(count) * uint64_t((ti = type_info(t)).size))) c = nullptr, why = Pass::kTooLarge;
    if (!c) return pass(Coll::kBcast, why, [&] { return PMPI_Bcast(buf, count, t, root, comm); });
    return run(*c, Coll::kBcast, root, [&](Call& call) { return bcast(call, buf, count, ti); });
}

ICCS_EXPORT int MPI_Reduce(const void* sbuf, void* rbuf, int count, MPI_Datatype t, MPI_Op op, int root, MPI_Comm comm) {
    Pass why;
    Comm* c = enter(comm, why);
    Reduction red;
    if (c && (root < 0 || root >= c->n || (sbuf == MPI_IN_PLACE && c->me != root) || !make_reduction(op, t, count, red)))
        c = nullptr, why = Pass::kArguments;
    if (!c) return pass(Coll::kReduce, why, [&] { return PMPI_Reduce(sbuf, rbuf, count, t, op, root, comm); });
    return run(*c, Coll::kReduce, root, [&](Call& call) { return reduce(call, sbuf == MPI_IN_PLACE ? rbuf : sbuf, rbuf, red); });
}

ICCS_EXPORT int MPI_Allreduce(const void* sbuf, void* rbuf, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
    Pass why;
    Comm* c = enter(comm, why);
    Reduction red;
    if (c && !make_reduction(op, t, count, red)) c = nullptr, why = Pass::kArguments;
    if (!c) return pass(Coll::kAllreduce, why, [&] { return PMPI_Allreduce(sbuf, rbuf, count, t, op, comm); });
    return run(*c, Coll::kAllreduce, -1, [&](Call& call) { return allreduce(call, sbuf == MPI_IN_PLACE ? rbuf : sbuf, rbuf, red); });
}

ICCS_EXPORT int MPI_Reduce_scatter(const void* sbuf, void* rbuf, const int counts[], MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
    Pass why;
    Comm* c = enter(comm, why);
    Reduction red;
    if (c && (!valid_counts(counts, c->n) || !make_reduction(op, t, 0, red))) c = nullptr, why = Pass::kArguments;
    if (c) {
        uint64_t total = 0;
        for (int r = 0; r < c->n; ++r) total += uint64_t(counts[r]);
        if (!fits_int(total * uint64_t(red.t.size))) c = nullptr, why = Pass::kTooLarge;
    }
    if (!c) return pass(Coll::kReduceScatter, why, [&] { return PMPI_Reduce_scatter(sbuf, rbuf, counts, t, op, comm); });
    return run(*c, Coll::kReduceScatter, -1,
               [&](Call& call) { return reduce_scatter(call, sbuf == MPI_IN_PLACE ? rbuf : sbuf, rbuf, counts, red); });
}

ICCS_EXPORT int MPI_Reduce_scatter_block(const void* sbuf, void* rbuf, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
    Pass why;
    Comm* c = enter(comm, why);
    Reduction red;
    if (c && !make_reduction(op, t, count, red)) c = nullptr, why = Pass::kArguments;
    if (c && !fits_int(uint64_t(count) * uint64_t(c->n) * uint64_t(red.t.size))) c = nullptr, why = Pass::kTooLarge;
    if (!c) return pass(Coll::kReduceScatterBlock, why, [&] { return PMPI_Reduce_scatter_block(sbuf, rbuf, count, t, op, comm); });
    const std::vector<int> counts(c->n, count);
    return run(*c, Coll::kReduceScatterBlock, -1,
               [&](Call& call) { return reduce_scatter(call, sbuf == MPI_IN_PLACE ? rbuf : sbuf, rbuf, counts.data(), red); });
}

ICCS_EXPORT int MPI_Scan(const void* sbuf, void* rbuf, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
    Pass why;
    Comm* c = enter(comm, why);
    Reduction red;
    if (c && !make_reduction(op, t, count, red)) c = nullptr, why = Pass::kArguments;
    if (!c) return pass(Coll::kScan, why, [&] { return PMPI_Scan(sbuf, rbuf, count, t, op, comm); });
    return run(*c, Coll::kScan, -1, [&](Call& call) { return scan(call, sbuf == MPI_IN_PLACE ? rbuf : sbuf, rbuf, red, false); });
}

ICCS_EXPORT int MPI_Exscan(const void* sbuf, void* rbuf, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
    Pass why;
    Comm* c = enter(comm, why);
    Reduction red;
    if (c && !make_reduction(op, t, count, red)) c = nullptr, why = Pass::kArguments;
    if (!c) return pass(Coll::kExscan, why, [&] { return PMPI_Exscan(sbuf, rbuf, count, t, op, comm); });
    return run(*c, Coll::kExscan, -1, [&](Call& call) { return scan(call, sbuf == MPI_IN_PLACE ? rbuf : sbuf, rbuf, red, true); });
}

namespace {

// Gather and gatherv share their checks: the send side everywhere (or in place at the root), the
// receive side at the root only (MPI ignores it elsewhere).
template <class F>
int gather_entry(Coll coll, const void* sbuf, int scount, MPI_Datatype st, void* rbuf, const int* rcounts,
                 const int* displs, int rcount, MPI_Datatype rt, int root, MPI_Comm comm, F&& pmpi) {
    Pass why;
    Comm* c = enter(comm, why);
    const bool v = coll == Coll::kGatherv;
    if (c) {
        const bool at_root = root >= 0 && root < c->n && c->me == root, in_place = sbuf == MPI_IN_PLACE;
        bool ok = root >= 0 && root < c->n && (!in_place || at_root) && (in_place || (scount >= 0 && valid_type(st)));
        if (ok && at_root) ok = valid_type(rt) && (v ? valid_counts(rcounts, c->n) && displs != nullptr : rcount >= 0);
        if (!ok) c = nullptr, why = Pass::kArguments;
    }
    if (!c) return pass(coll, why, pmpi);
    Blocks rb;
    if (c->me == root) rb = blocks(v ? rcounts : nullptr, v ? displs : nullptr, rcount, rt);
    const TypeInfo sti = sbuf == MPI_IN_PLACE ? TypeInfo{} : type_info(st);
    return run(*c, coll, root, [&](Call& call) {
        return gather(call, sbuf == MPI_IN_PLACE ? nullptr : sbuf, sbuf == MPI_IN_PLACE ? 0 : scount, sti, rbuf, rb);
    });
}

template <class F>
int scatter_entry(Coll coll, const void* sbuf, const int* scounts, const int* displs, int scount, MPI_Datatype st,
                  void* rbuf, int rcount, MPI_Datatype rt, int root, MPI_Comm comm, F&& pmpi) {
    Pass why;
    Comm* c = enter(comm, why);
    const bool v = coll == Coll::kScatterv;
    if (c) {
        const bool at_root = root >= 0 && root < c->n && c->me == root, in_place = rbuf == MPI_IN_PLACE;
        bool ok = root >= 0 && root < c->n && (!in_place || at_root) && (in_place || (rcount >= 0 && valid_type(rt)));
        if (ok && at_root) ok = valid_type(st) && (v ? valid_counts(scounts, c->n) && displs != nullptr : scount >= 0);
        if (!ok) c = nullptr, why = Pass::kArguments;
    }
    if (!c) return pass(coll, why, pmpi);
    Blocks sb;
    if (c->me == root) sb = blocks(v ? scounts : nullptr, v ? displs : nullptr, scount, st);
    const TypeInfo rti = rbuf == MPI_IN_PLACE ? TypeInfo{} : type_info(rt);
    return run(*c, coll, root, [&](Call& call) {
        return scatter(call, sbuf, sb, rbuf == MPI_IN_PLACE ? nullptr : rbuf, rbuf == MPI_IN_PLACE ? 0 : rcount, rti);
    });
}

}  // namespace

ICCS_EXPORT int MPI_Gather(const void* sbuf, int scount, MPI_Datatype st, void* rbuf, int rcount, MPI_Datatype rt, int root,
                           MPI_Comm comm) {
    return gather_entry(Coll::kGather, sbuf, scount, st, rbuf, nullptr, nullptr, rcount, rt, root, comm,
                        [&] { return PMPI_Gather(sbuf, scount, st, rbuf, rcount, rt, root, comm); });
}

ICCS_EXPORT int MPI_Gatherv(const void* sbuf, int scount, MPI_Datatype st, void* rbuf, const int rcounts[], const int displs[],
                            MPI_Datatype rt, int root, MPI_Comm comm) {
    return gather_entry(Coll::kGatherv, sbuf, scount, st, rbuf, rcounts, displs, 0, rt, root, comm,
                        [&] { return PMPI_Gatherv(sbuf, scount, st, rbuf, rcounts, displs, rt, root, comm); });
}

ICCS_EXPORT int MPI_Scatter(const void* sbuf, int scount, MPI_Datatype st, void* rbuf, int rcount, MPI_Datatype rt, int root,
                            MPI_Comm comm) {
    return scatter_entry(Coll::kScatter, sbuf, nullptr, nullptr, scount, st, rbuf, rcount, rt, root, comm,
                         [&] { return PMPI_Scatter(sbuf, scount, st, rbuf, rcount, rt, root, comm); });
}

ICCS_EXPORT int MPI_Scatterv(const void* sbuf, const int scounts[], const int displs[], MPI_Datatype st, void* rbuf, int rcount,
                             MPI_Datatype rt, int root, MPI_Comm comm) {
    return scatter_entry(Coll::kScatterv, sbuf, scounts, displs, 0, st, rbuf, rcount, rt, root, comm,
                         [&] { return PMPI_Scatterv(sbuf, scounts, displs, st, rbuf, rcount, rt, root, comm); });
}

namespace {

template <class F>
int allgather_entry(Coll coll, const void* sbuf, int scount, MPI_Datatype st, void* rbuf, const int* rcounts,
                    const int* displs, int rcount, MPI_Datatype rt, MPI_Comm comm, F&& pmpi) {
    Pass why;
    Comm* c = enter(comm, why);
    const bool v = coll == Coll::kAllgatherv;
    if (c && (!(sbuf == MPI_IN_PLACE || (scount >= 0 && valid_type(st))) || !valid_type(rt) ||
              (v ? !valid_counts(rcounts, c->n) || displs == nullptr : rcount < 0)))
        c = nullptr, why = Pass::kArguments;
    if (!c) return pass(coll, why, pmpi);
    const Blocks rb = blocks(v ? rcounts : nullptr, v ? displs : nullptr, rcount, rt);
    const TypeInfo sti = sbuf == MPI_IN_PLACE ? TypeInfo{} : type_info(st);
    return run(*c, coll, -1, [&](Call& call) {
        return allgather(call, sbuf == MPI_IN_PLACE ? nullptr : sbuf, sbuf == MPI_IN_PLACE ? 0 : scount, sti, rbuf, rb);
    });
}

template <class F>
int alltoall_entry(Coll coll, const void* sbuf, const int* scounts, const int* sdispls, int scount, MPI_Datatype st,
                   void* rbuf, const int* rcounts, const int* rdispls, int rcount, MPI_Datatype rt, MPI_Comm comm, F&& pmpi) {
    Pass why;
    Comm* c = enter(comm, why);
    const bool v = coll == Coll::kAlltoallv, in_place = sbuf == MPI_IN_PLACE;
    if (c && (!valid_type(rt) || (v ? !valid_counts(rcounts, c->n) || rdispls == nullptr : rcount < 0) ||
              (!in_place && (!valid_type(st) || (v ? !valid_counts(scounts, c->n) || sdispls == nullptr : scount < 0)))))
        c = nullptr, why = Pass::kArguments;
    if (!c) return pass(coll, why, pmpi);
    const Blocks rb = blocks(v ? rcounts : nullptr, v ? rdispls : nullptr, rcount, rt);
    const Blocks sb = in_place ? Blocks{} : blocks(v ? scounts : nullptr, v ? sdispls : nullptr, scount, st);
    return run(*c, coll, -1, [&](Call& call) { return alltoall(call, in_place ? nullptr : sbuf, sb, rbuf, rb); });
}

}  // namespace

ICCS_EXPORT int MPI_Allgather(const void* sbuf, int scount, MPI_Datatype st, void* rbuf, int rcount, MPI_Datatype rt,
                              MPI_Comm comm) {
    return allgather_entry(Coll::kAllgather, sbuf, scount, st, rbuf, nullptr, nullptr, rcount, rt, comm,
                           [&] { return PMPI_Allgather(sbuf, scount, st, rbuf, rcount, rt, comm); });
}

ICCS_EXPORT int MPI_Allgatherv(const void* sbuf, int scount, MPI_Datatype st, void* rbuf, const int rcounts[], const int displs[],
                               MPI_Datatype rt, MPI_Comm comm) {
    return allgather_entry(Coll::kAllgatherv, sbuf, scount, st, rbuf, rcounts, displs, 0, rt, comm,
                           [&] { return PMPI_Allgatherv(sbuf, scount, st, rbuf, rcounts, displs, rt, comm); });
}

ICCS_EXPORT int MPI_Alltoall(const void* sbuf, int scount, MPI_Datatype st, void* rbuf, int rcount, MPI_Datatype rt,
                             MPI_Comm comm) {
    return alltoall_entry(Coll::kAlltoall, sbuf, nullptr, nullptr, scount, st, rbuf, nullptr, nullptr, rcount, rt, comm,
                          [&] { return PMPI_Alltoall(sbuf, scount, st, rbuf, rcount, rt, comm); });
}

ICCS_EXPORT int MPI_Alltoallv(const void* sbuf, const int scounts[], const int sdispls[], MPI_Datatype st, void* rbuf,
                              const int rcounts[], const int rdispls[], MPI_Datatype rt, MPI_Comm comm) {
    return alltoall_entry(Coll::kAlltoallv, sbuf, scounts, sdispls, 0, st, rbuf, rcounts, rdispls, 0, rt, comm,
                          [&] { return PMPI_Alltoallv(sbuf, scounts, sdispls, st, rbuf, rcounts, rdispls, rt, comm); });
}
