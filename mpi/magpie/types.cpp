// types.cpp: datatype layouts, typed scratch buffers, local copies and the reduction step.
#include <cstring>

#include "magpie.hpp"

namespace iccs::magpie {

namespace {

// Memory order equals MPI's packed order only for predefined types and contiguous runs of them;
// anything else (a struct listed out of address order, a vector) goes through PMPI_Pack.
bool dense_in_type_order(MPI_Datatype t) {
    int ni = 0, na = 0, nd = 0, combiner = 0;
    if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) != MPI_SUCCESS) return false;
    if (combiner == MPI_COMBINER_NAMED) return true;
    if (combiner != MPI_COMBINER_CONTIGUOUS && combiner != MPI_COMBINER_DUP) return false;
    std::vector<int> ints(ni);
    std::vector<MPI_Aint> addrs(na);
    std::vector<MPI_Datatype> types(nd);
    if (PMPI_Type_get_contents(t, ni, na, nd, ints.data(), addrs.data(), types.data()) != MPI_SUCCESS || nd != 1)
        return false;
    const bool dense = dense_in_type_order(types[0]);
    int ni2 = 0, na2 = 0, nd2 = 0, comb2 = 0;
    PMPI_Type_get_envelope(types[0], &ni2, &na2, &nd2, &comb2);
    if (comb2 != MPI_COMBINER_NAMED) PMPI_Type_free(&types[0]);  // get_contents returned a new handle
    return dense;
}

}  // namespace

TypeInfo type_info(MPI_Datatype t) {
    TypeInfo i;
    i.type = t;
    MPI_Aint lb = 0;
    PMPI_Type_get_extent(t, &lb, &i.extent);
    PMPI_Type_get_true_extent(t, &i.true_lb, &i.true_extent);
    PMPI_Type_size(t, &i.size);
    i.contiguous = i.size == i.extent && i.true_extent == i.size && dense_in_type_order(t);
    return i;
}

TypedBuf::TypedBuf(const TypeInfo& t, size_t count) : extent_(t.extent) {
    if (count == 0) return;
    const MPI_Aint span = t.true_extent + static_cast<MPI_Aint>(count - 1) * t.extent;
    store_.resize(static_cast<size_t>(std::max<MPI_Aint>(span, 1)));
    base_ = store_.data() - t.true_lb;
}

int pack(const void* buf, int count, const TypeInfo& t, char* out) {
    if (count == 0 || t.size == 0) return MPI_SUCCESS;
    if (t.contiguous) {
        std::memcpy(out, static_cast<const char*>(buf) + t.true_lb, size_t(count) * size_t(t.size));
        return MPI_SUCCESS;
    }
    int pos = 0;
    return PMPI_Pack(buf, count, t.type, out, count * t.size, &pos, MPI_COMM_SELF);
}

int unpack(const char* in, void* buf, int count, const TypeInfo& t) {
    if (count == 0 || t.size == 0) return MPI_SUCCESS;
    if (t.contiguous) {
        std::memcpy(static_cast<char*>(buf) + t.true_lb, in, size_t(count) * size_t(t.size));
        return MPI_SUCCESS;
    }
    int pos = 0;
    return PMPI_Unpack(in, count * t.size, &pos, buf, count, t.type, MPI_COMM_SELF);
}

int copy_typed(const void* src, void* dst, int count, const TypeInfo& t) {
    if (count == 0 || t.size == 0 || src == dst) return MPI_SUCCESS;
    if (t.contiguous) {
        std::memmove(static_cast<char*>(dst) + t.true_lb, static_cast<const char*>(src) + t.true_lb,
                     size_t(count) * size_t(t.size));
        return MPI_SUCCESS;
    }
    std::vector<char> tmp(size_t(count) * size_t(t.size));
    const int e = pack(src, count, t, tmp.data());
    return e != MPI_SUCCESS ? e : unpack(tmp.data(), dst, count, t);
}

int Reduction::apply(const void* in, void* inout, int n) const {
    return n == 0 ? MPI_SUCCESS : PMPI_Reduce_local(in, inout, n, t.type, op);
}

}  // namespace iccs::magpie
