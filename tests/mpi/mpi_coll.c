/* mpi_coll.c: the collectives of Open MPI's default set, each checked on every rank against the
   result computed sequentially from the inputs (which every rank can compute: input i of rank r
   is a function of (r, i)): barrier, bcast, reduce, allreduce, gather(v), scatter(v),
   allgather(v), alltoall(v, w), reduce_scatter(_block), scan, exscan, their non-blocking forms,
   on MPI_COMM_WORLD and on communicators made by split and dup. */
#include <string.h>

#include "mpi_check.h"

static int wrank;

static double in_val(int r, long i) { return (double)((r * 7919 + i * 104729) % 1000) - 500.0; }
static int in_int(int r, long i) { return (int)((r * 31 + i * 17) % 1001) - 500; }

static void check_comm(MPI_Comm comm, const char* name) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    const long sizes[] = {1, 1000, 70000};
    for (int si = 0; si < 3; si++) {
        const long n = sizes[si];
        double* in = malloc(n * sizeof(double));
        double* out = malloc(n * size * sizeof(double));
        double* ref = malloc(n * size * sizeof(double));
        int* ii = malloc(n * sizeof(int));
        int* io = malloc(n * sizeof(int));
        for (long i = 0; i < n; i++) in[i] = in_val(rank, i), ii[i] = in_int(rank, i);

        CHECK_MPI(MPI_Barrier(comm));
        /* bcast from every root */
        for (int root = 0; root < size; root++) {
            for (long i = 0; i < n; i++) out[i] = rank == root ? in_val(root, i) : -1;
            CHECK_MPI(MPI_Bcast(out, (int)n, MPI_DOUBLE, root, comm));
            for (long i = 0; i < n; i++) CHECK(out[i] == in_val(root, i));
        }
        /* reduce (sum of integers is exact in any order), allreduce min/max/sum */
        for (int root = 0; root < size; root += size > 1 ? size - 1 : 1) {
            CHECK_MPI(MPI_Reduce(ii, io, (int)n, MPI_INT, MPI_SUM, root, comm));
            if (rank == root)
                for (long i = 0; i < n; i++) {
                    int s = 0;
                    for (int r = 0; r < size; r++) s += in_int(r, i);
                    CHECK(io[i] == s);
                }
        }
        CHECK_MPI(MPI_Allreduce(ii, io, (int)n, MPI_INT, MPI_MAX, comm));
        for (long i = 0; i < n; i++) {
            int m = in_int(0, i);
            for (int r = 1; r < size; r++) m = in_int(r, i) > m ? in_int(r, i) : m;
            CHECK(io[i] == m);
        }
        CHECK_MPI(MPI_Allreduce(ii, io, (int)n, MPI_INT, MPI_SUM, comm));
        for (long i = 0; i < n; i++) {
            int s = 0;
            for (int r = 0; r < size; r++) s += in_int(r, i);
            CHECK(io[i] == s);
        }
        /* gather, allgather, scatter */
        CHECK_MPI(MPI_Gather(in, (int)n, MPI_DOUBLE, out, (int)n, MPI_DOUBLE, 0, comm));
        if (rank == 0)
            for (int r = 0; r < size; r++)
                for (long i = 0; i < n; i++) CHECK(out[r * n + i] == in_val(r, i));
        CHECK_MPI(MPI_Allgather(in, (int)n, MPI_DOUBLE, out, (int)n, MPI_DOUBLE, comm));
        for (int r = 0; r < size; r++)
            for (long i = 0; i < n; i++) CHECK(out[r * n + i] == in_val(r, i));
        if (rank == size - 1)
            for (int r = 0; r < size; r++)
                for (long i = 0; i < n; i++) ref[r * n + i] = in_val(r + 100, i);
        CHECK_MPI(MPI_Scatter(ref, (int)n, MPI_DOUBLE, out, (int)n, MPI_DOUBLE, size - 1, comm));
        for (long i = 0; i < n; i++) CHECK(out[i] == in_val(rank + 100, i));
        /* the v forms: rank r contributes r + 1 .. items (at most n) */
        int* counts = malloc(size * sizeof(int));
        int* displs = malloc(size * sizeof(int));
        int total = 0;
        for (int r = 0; r < size; r++) {
            counts[r] = (int)((r + 1) * n / size > 0 ? (r + 1) * n / size : 1);
            displs[r] = total;
            total += counts[r];
        }
        double* vout = malloc(total * sizeof(double));
        CHECK_MPI(MPI_Gatherv(in, counts[rank], MPI_DOUBLE, vout, counts, displs, MPI_DOUBLE, 0, comm));
        if (rank == 0)
            for (int r = 0; r < size; r++)
                for (int i = 0; i < counts[r]; i++) CHECK(vout[displs[r] + i] == in_val(r, i));
        CHECK_MPI(MPI_Allgatherv(in, counts[rank], MPI_DOUBLE, vout, counts, displs, MPI_DOUBLE, comm));
        for (int r = 0; r < size; r++)
            for (int i = 0; i < counts[r]; i++) CHECK(vout[displs[r] + i] == in_val(r, i));
        if (rank == 0)
            for (int r = 0; r < size; r++)
                for (int i = 0; i < counts[r]; i++) vout[displs[r] + i] = in_val(r + 50, i);
        CHECK_MPI(MPI_Scatterv(vout, counts, displs, MPI_DOUBLE, out, counts[rank], MPI_DOUBLE, 0, comm));
        for (int i = 0; i < counts[rank]; i++) CHECK(out[i] == in_val(rank + 50, i));
        /* alltoall: element j of block d sent by r is in_val(r * size + d, j) */
        const long blk = n < 2000 ? n : 2000;
        const long a2a_room = (blk > 3 ? blk : 3) * size;  /* alltoallv below sends up to 3 items a rank */
        double* a2a_in = malloc(a2a_room * sizeof(double));
        double* a2a_out = malloc(a2a_room * sizeof(double));
        for (int d = 0; d < size; d++)
            for (long j = 0; j < blk; j++) a2a_in[d * blk + j] = in_val(rank * size + d, j);
        CHECK_MPI(MPI_Alltoall(a2a_in, (int)blk, MPI_DOUBLE, a2a_out, (int)blk, MPI_DOUBLE, comm));
        for (int r = 0; r < size; r++)
            for (long j = 0; j < blk; j++) CHECK(a2a_out[r * blk + j] == in_val(r * size + rank, j));
        /* alltoallv: rank r sends (r + d) % 3 + 1 items to d */
        int *sc = malloc(size * sizeof(int)), *sd = malloc(size * sizeof(int)), *rc = malloc(size * sizeof(int)),
            *rd = malloc(size * sizeof(int));
        int st = 0, rt = 0;
        for (int d = 0; d < size; d++) {
            sc[d] = (rank + d) % 3 + 1;
            sd[d] = st;
            st += sc[d];
            rc[d] = (d + rank) % 3 + 1;
            rd[d] = rt;
            rt += rc[d];
        }
        for (int d = 0; d < size; d++)
            for (int j = 0; j < sc[d]; j++) a2a_in[sd[d] + j] = in_val(rank * size + d, j);
        CHECK_MPI(MPI_Alltoallv(a2a_in, sc, sd, MPI_DOUBLE, a2a_out, rc, rd, MPI_DOUBLE, comm));
        for (int r = 0; r < size; r++)
            for (int j = 0; j < rc[r]; j++) CHECK(a2a_out[rd[r] + j] == in_val(r * size + rank, j));
        /* alltoallw with byte displacements and one type */
        MPI_Datatype* types = malloc(size * sizeof(MPI_Datatype));
        for (int d = 0; d < size; d++) {
            types[d] = MPI_DOUBLE;
            sd[d] *= (int)sizeof(double);
            rd[d] *= (int)sizeof(double);
        }
        CHECK_MPI(MPI_Alltoallw(a2a_in, sc, sd, types, a2a_out, rc, rd, types, comm));
        for (int r = 0; r < size; r++)
            for (int j = 0; j < rc[r]; j++) CHECK(a2a_out[rd[r] / (int)sizeof(double) + j] == in_val(r * size + rank, j));
        /* reduce_scatter_block and reduce_scatter (integers: exact) */
        const long per = n < 500 ? n : 500;
        const long rs_room = (per + 1) * size;  /* reduce_scatter below takes up to per + 1 a rank */
        int* rsin = malloc(rs_room * sizeof(int));
        int* rsout = malloc(rs_room * sizeof(int));
        for (long i = 0; i < rs_room; i++) rsin[i] = in_int(rank, i);
        CHECK_MPI(MPI_Reduce_scatter_block(rsin, rsout, (int)per, MPI_INT, MPI_SUM, comm));
        for (long i = 0; i < per; i++) {
            int s = 0;
            for (int r = 0; r < size; r++) s += in_int(r, rank * per + i);
            CHECK(rsout[i] == s);
        }
        int* rcounts = malloc(size * sizeof(int));
        long at = 0;
        for (int r = 0; r < size; r++) rcounts[r] = (int)(per / (r + 1) + 1);
        for (int r = 0; r < rank; r++) at += rcounts[r];
        CHECK_MPI(MPI_Reduce_scatter(rsin, rsout, rcounts, MPI_INT, MPI_SUM, comm));
        for (int i = 0; i < rcounts[rank]; i++) {
            int s = 0;
            for (int r = 0; r < size; r++) s += in_int(r, at + i);
            CHECK(rsout[i] == s);
        }
        /* scan and exscan */
        CHECK_MPI(MPI_Scan(ii, io, (int)n, MPI_INT, MPI_SUM, comm));
        for (long i = 0; i < n; i++) {
            int s = 0;
            for (int r = 0; r <= rank; r++) s += in_int(r, i);
            CHECK(io[i] == s);
        }
        CHECK_MPI(MPI_Exscan(ii, io, (int)n, MPI_INT, MPI_SUM, comm));
        if (rank > 0)
            for (long i = 0; i < n; i++) {
                int s = 0;
                for (int r = 0; r < rank; r++) s += in_int(r, i);
                CHECK(io[i] == s);
            }
        /* non-blocking forms */
        MPI_Request rq[3];
        CHECK_MPI(MPI_Ibarrier(comm, &rq[0]));
        for (long i = 0; i < n; i++) out[i] = rank == 0 ? in_val(0, i) : 0;
        CHECK_MPI(MPI_Ibcast(out, (int)n, MPI_DOUBLE, 0, comm, &rq[1]));
        CHECK_MPI(MPI_Iallreduce(ii, io, (int)n, MPI_INT, MPI_SUM, comm, &rq[2]));
        CHECK_MPI(MPI_Waitall(3, rq, MPI_STATUSES_IGNORE));
        for (long i = 0; i < n; i++) {
            int s = 0;
            for (int r = 0; r < size; r++) s += in_int(r, i);
            CHECK(io[i] == s && out[i] == in_val(0, i));
        }
        free(rcounts);
        free(rsin);
        free(rsout);
        free(types);
        free(sc);
        free(sd);
        free(rc);
        free(rd);
        free(a2a_in);
        free(a2a_out);
        free(vout);
        free(counts);
        free(displs);
        free(in);
        free(out);
        free(ref);
        free(ii);
        free(io);
    }
    if (rank == 0) printf("collectives on %s (%d ranks): PASS\n", name, size);
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank = wrank;
    check_comm(MPI_COMM_WORLD, "world");
    MPI_Comm dup, half, odd;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    check_comm(dup, "dup of world");
    /* split in two halves, ranks reversed in each */
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, wrank < size / 2, size - wrank, &half));
    int hr, hs;
    MPI_Comm_rank(half, &hr);
    MPI_Comm_size(half, &hs);
    CHECK(hs == (wrank < size / 2 ? size / 2 : size - size / 2));
    check_comm(half, "split halves");
    /* every other rank, by parity */
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &odd));
    check_comm(odd, "split by parity");
    /* a message on the dup does not match a receive on world (communicator ids in the tags) */
    if (size >= 2) {
        int v = 0;
        if (wrank == 0) {
            int a = 1, b = 2;
            CHECK_MPI(MPI_Send(&a, 1, MPI_INT, 1, 5, dup));
            CHECK_MPI(MPI_Send(&b, 1, MPI_INT, 1, 5, MPI_COMM_WORLD));
        } else if (wrank == 1) {
            CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(v == 2);
            CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 0, 5, dup, MPI_STATUS_IGNORE));
            CHECK(v == 1);
        }
    }
    MPI_Comm_free(&dup);
    MPI_Comm_free(&half);
    MPI_Comm_free(&odd);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("coll PASS rank %d of %d\n", wrank, size);
    MPI_Finalize();
    return 0;
}
