// prov_noops.cpp: the operation tables of what the provider does not offer (RMA, atomics,
// collectives on an endpoint). libfabric's inline calls (fi_read, fi_atomic, fi_barrier) jump
// through these tables without looking, so each entry must exist and say -FI_ENOSYS.
#include "prov.hpp"

namespace iccs::mpi {

namespace {

// The entry of any signature: -FI_ENOSYS.
template <typename Fn>
struct NoOp;
template <typename R, typename... Args>
struct NoOp<R (*)(Args...)> {
    static R fn(Args...) { return static_cast<R>(-FI_ENOSYS); }
};
#define ICCS_NO(table, member) NoOp<decltype(table::member)>::fn

}  // namespace

fi_ops_rma g_no_rma = {
    sizeof(fi_ops_rma),
    ICCS_NO(fi_ops_rma, read),     ICCS_NO(fi_ops_rma, readv),  ICCS_NO(fi_ops_rma, readmsg),
    ICCS_NO(fi_ops_rma, write),    ICCS_NO(fi_ops_rma, writev), ICCS_NO(fi_ops_rma, writemsg),
    ICCS_NO(fi_ops_rma, inject),   ICCS_NO(fi_ops_rma, writedata), ICCS_NO(fi_ops_rma, injectdata),
};

fi_ops_atomic g_no_atomic = {
    sizeof(fi_ops_atomic),
    ICCS_NO(fi_ops_atomic, write),        ICCS_NO(fi_ops_atomic, writev),
    ICCS_NO(fi_ops_atomic, writemsg),     ICCS_NO(fi_ops_atomic, inject),
    ICCS_NO(fi_ops_atomic, readwrite),    ICCS_NO(fi_ops_atomic, readwritev),
    ICCS_NO(fi_ops_atomic, readwritemsg), ICCS_NO(fi_ops_atomic, compwrite),
    ICCS_NO(fi_ops_atomic, compwritev),   ICCS_NO(fi_ops_atomic, compwritemsg),
    ICCS_NO(fi_ops_atomic, writevalid),   ICCS_NO(fi_ops_atomic, readwritevalid),
    ICCS_NO(fi_ops_atomic, compwritevalid),
};

fi_ops_collective g_no_collective = {
    sizeof(fi_ops_collective),
    ICCS_NO(fi_ops_collective, barrier),   ICCS_NO(fi_ops_collective, broadcast),
    ICCS_NO(fi_ops_collective, alltoall),  ICCS_NO(fi_ops_collective, allreduce),
    ICCS_NO(fi_ops_collective, allgather), ICCS_NO(fi_ops_collective, reduce_scatter),
    ICCS_NO(fi_ops_collective, reduce),    ICCS_NO(fi_ops_collective, scatter),
    ICCS_NO(fi_ops_collective, gather),    ICCS_NO(fi_ops_collective, msg),
    ICCS_NO(fi_ops_collective, barrier2),
};

}  // namespace iccs::mpi
