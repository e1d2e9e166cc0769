/* magpie_check.c: every collective libiccs-magpie replaces, checked against a sequential
 * reference computed in the same program, as a plain MPI program (it knows nothing of the
 * library: it is relinked with it, preloaded with it, or run without it).
 *
 * Communicators: MPI_COMM_WORLD, a split by parity, a group of 3 ranks (0, n/2, n-1: two sites
 * whenever there are two), a dup of MPI_COMM_WORLD and a split that reverses the rank order; an
 * inter-communicator between the parities (which the library passes to MPI unchanged).
 * Datatypes: int, double, contiguous, vector, indexed, struct, a struct listed out of address
 * order; receive buffers start filled with a pattern and the holes of a datatype must keep it.
 * Reductions: every predefined operation on the types it is defined for, a commutative user
 * operation on derived types, a non-commutative one (affine maps composed in rank order).
 * In-place forms, zero counts, unequal counts with zeros in the v-forms, several roots.
 *
 * Every rank prints "magpie_check rank R: N checks, F failures" and exits 1 on any failure, so
 * the verdict needs no collective. Options: --counts 0,1,7,5000 (elements), --rounds N,
 * --comms world,parity,trio,dup,reversed (which communicators),
 * --bad root|count|coll|skip (a mismatched call on purpose, or rank 1 skipping one: the run must end
 * with an MPI error, for skip once ICCS_MAGPIE_TIMEOUT_MS passed),
 * --wan-allreduce N (last: one MPI_Allreduce of N ints, MPI_SUM, on MPI_COMM_WORLD, then one
 * MPI_Reduce of them to rank 0; rank 0 prints "magpie_check allreduce N wan_bytes W" and
 * "magpie_check reduce N wan_bytes W" with W the library's wide-area data bytes of that call
 * summed over the ranks, read through iccs_magpie_counter when the library is there).
 */
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { P_INT, P_DOUBLE };
typedef struct {
    int off, kind;
} Prim;
typedef struct {
    const char* name;
    MPI_Datatype type;
    int nprim;
    Prim prim[3];
    MPI_Aint extent;
} Type;

static Type types[8];
static int ntypes;
static long checks, failures;
static int world_rank;
static const char* where = "";

#define PATTERN 0x5a

static void fail(const char* what, long a, long b) {
    if (failures < 20)
        printf("FAIL rank %d: %s: %s (got %ld, want %ld)\n", world_rank, where, what, a, b);
    ++failures;
}

/* The value of primitive p of element e contributed by rank r in test `salt`. */
static long value(int r, long e, int p, int salt, int small) {
    long v = (r * 7 + e * 13 + p * 5 + salt * 3) % 1000;
    return small ? v % 3 + 1 : v - 300;
}

static void put(char* elem, const Prim* pr, long v) {
    if (pr->kind == P_INT) {
        int x = (int)v;
        memcpy(elem + pr->off, &x, sizeof x);
    } else {
        double x = (double)v;
        memcpy(elem + pr->off, &x, sizeof x);
    }
}
static long get(const char* elem, const Prim* pr) {
    if (pr->kind == P_INT) {
        int x;
        memcpy(&x, elem + pr->off, sizeof x);
        return x;
    }
    double x;
    memcpy(&x, elem + pr->off, sizeof x);
    return (long)x;
}

static char* alloc_elems(const Type* t, long n) {
    char* b = malloc((size_t)(t->extent * (n > 0 ? n : 1)) + 8);
    memset(b, PATTERN, (size_t)(t->extent * (n > 0 ? n : 1)) + 8);
    return b;
}
static void fill(const Type* t, char* buf, long n, int r, int salt, int small) {
    for (long e = 0; e < n; ++e)
        for (int p = 0; p < t->nprim; ++p) put(buf + e * t->extent, &t->prim[p], value(r, e, p, salt, small));
}
/* Elements [0, n) of buf must hold rank r's values (data) and the pattern (holes). */
static void expect_rank(const Type* t, const char* buf, long n, int r, int salt, const char* what) {
    for (long e = 0; e < n; ++e) {
        const char* el = buf + e * t->extent;
        char mask[64];
        memset(mask, 0, sizeof mask);
        for (int p = 0; p < t->nprim; ++p) {
            ++checks;
            long got = get(el, &t->prim[p]), want = value(r, e, p, salt, 0);
            if (got != want) {
                fail(what, got, want);
                return;
            }
            memset(mask + t->prim[p].off, 1, t->prim[p].kind == P_INT ? 4 : 8);
        }
        for (int b = 0; b < t->extent && b < 64; ++b)
            if (!mask[b] && (unsigned char)el[b] != PATTERN) {
                fail("a hole of the datatype was written", (unsigned char)el[b], PATTERN);
                return;
            }
    }
}
static void expect_untouched(const char* buf, long bytes, const char* what) {
    for (long i = 0; i < bytes; ++i)
        if ((unsigned char)buf[i] != PATTERN) {
            fail(what, (unsigned char)buf[i], PATTERN);
            return;
        }
}

static void make_types(void) {
    MPI_Datatype t;
    types[ntypes++] = (Type){"int", MPI_INT, 1, {{0, P_INT}}, 4};
    types[ntypes++] = (Type){"double", MPI_DOUBLE, 1, {{0, P_DOUBLE}}, 8};
    MPI_Type_contiguous(3, MPI_INT, &t);
    MPI_Type_commit(&t);
    types[ntypes++] = (Type){"contiguous", t, 3, {{0, P_INT}, {4, P_INT}, {8, P_INT}}, 12};
    MPI_Type_vector(2, 1, 2, MPI_INT, &t);
    MPI_Type_commit(&t);
    types[ntypes++] = (Type){"vector", t, 2, {{0, P_INT}, {8, P_INT}}, 12};
    int lens[2] = {1, 2}, disp[2] = {0, 3};
    MPI_Type_indexed(2, lens, disp, MPI_INT, &t);
    MPI_Type_commit(&t);
    types[ntypes++] = (Type){"indexed", t, 3, {{0, P_INT}, {12, P_INT}, {16, P_INT}}, 20};
    int bl[2] = {1, 1};
    MPI_Aint sd[2] = {0, 8};
    MPI_Datatype st[2] = {MPI_INT, MPI_DOUBLE}, s0;
    MPI_Type_create_struct(2, bl, sd, st, &s0);
    MPI_Type_create_resized(s0, 0, 16, &t);
    MPI_Type_commit(&t);
    MPI_Type_free(&s0);
    types[ntypes++] = (Type){"struct", t, 2, {{0, P_INT}, {8, P_DOUBLE}}, 16};
    MPI_Aint rd[2] = {8, 0};
    MPI_Datatype rt[2] = {MPI_DOUBLE, MPI_INT};
    MPI_Type_create_struct(2, bl, rd, rt, &s0);
    MPI_Type_create_resized(s0, 0, 16, &t);
    MPI_Type_commit(&t);
    MPI_Type_free(&s0);
    types[ntypes++] = (Type){"struct-reversed", t, 2, {{8, P_DOUBLE}, {0, P_INT}}, 16};
}

/* ---- data movement ------------------------------------------------------------------------ */

static int counts_v(int r, int base) { return r % 3 == 1 ? 0 : base + r % 4; } /* unequal, some 0 */

/* The blocks of every rank of comm: n each, or (v) unequal counts with `gap` elements before each
 * block; total: the elements the buffer spans. */
typedef struct {
    int me, size;
    int *counts, *displs;
    long total;
} Blocks;

static Blocks blocks_of(MPI_Comm comm, long n, int v, int gap) {
    Blocks b;
    MPI_Comm_rank(comm, &b.me);
    MPI_Comm_size(comm, &b.size);
    b.counts = malloc(sizeof(int) * b.size);
    b.displs = malloc(sizeof(int) * b.size);
    b.total = 0;
    for (int r = 0; r < b.size; ++r) {
        b.counts[r] = v ? counts_v(r, (int)n) : (int)n;
        b.displs[r] = (int)b.total + (v ? gap : 0);
        b.total = b.displs[r] + b.counts[r];
    }
    return b;
}
static void blocks_free(Blocks* b) {
    free(b->counts);
    free(b->displs);
}

static void test_bcast(MPI_Comm comm, const Type* t, long n, int root, int salt) {
    int me;
    MPI_Comm_rank(comm, &me);
    char* b = alloc_elems(t, n);
    if (me == root) fill(t, b, n, root, salt, 0);
    MPI_Bcast(b, (int)n, t->type, root, comm);
    expect_rank(t, b, n, root, salt, "bcast");
    free(b);
}

static void test_gather(MPI_Comm comm, const Type* t, long n, int root, int salt, int v, int in_place) {
    Blocks b = blocks_of(comm, n, v, 1);
    char* s = alloc_elems(t, b.counts[b.me]);
    fill(t, s, b.counts[b.me], b.me, salt, 0);
    char* rb = alloc_elems(t, b.total);
    if (in_place && b.me == root) fill(t, rb + b.displs[b.me] * t->extent, b.counts[b.me], b.me, salt, 0);
    const void* sbuf = in_place && b.me == root ? MPI_IN_PLACE : s;
    if (v)
        MPI_Gatherv(sbuf, b.counts[b.me], t->type, rb, b.counts, b.displs, t->type, root, comm);
    else
        MPI_Gather(sbuf, (int)n, t->type, rb, (int)n, t->type, root, comm);
    if (b.me == root) {
        for (int r = 0; r < b.size; ++r) expect_rank(t, rb + b.displs[r] * t->extent, b.counts[r], r, salt, v ? "gatherv" : "gather");
        if (v) expect_untouched(rb, t->extent * b.displs[0], "gatherv wrote before the first block");
    } else {
        expect_untouched(rb, t->extent * b.total, "gather wrote into a non-root's receive buffer");
    }
    free(s);
    free(rb);
    blocks_free(&b);
}

static void test_scatter(MPI_Comm comm, const Type* t, long n, int root, int salt, int v, int in_place) {
    Blocks b = blocks_of(comm, n, v, 2);
    char* s = alloc_elems(t, b.total);
    if (b.me == root)
        for (int r = 0; r < b.size; ++r) fill(t, s + b.displs[r] * t->extent, b.counts[r], r, salt, 0);
    char* rb = alloc_elems(t, b.counts[b.me]);
    void* rbuf = in_place && b.me == root ? MPI_IN_PLACE : rb;
    if (v)
        MPI_Scatterv(s, b.counts, b.displs, t->type, rbuf, b.counts[b.me], t->type, root, comm);
    else
        MPI_Scatter(s, (int)n, t->type, rbuf, (int)n, t->type, root, comm);
    if (rbuf == MPI_IN_PLACE) {
        expect_rank(t, s + b.displs[b.me] * t->extent, b.counts[b.me], b.me, salt, "scatter in place");
        expect_untouched(rb, t->extent * b.counts[b.me], "scatter in place wrote the receive buffer");
    } else {
        expect_rank(t, rb, b.counts[b.me], b.me, salt, v ? "scatterv" : "scatter");
    }
    free(s);
    free(rb);
    blocks_free(&b);
}

static void test_allgather(MPI_Comm comm, const Type* t, long n, int salt, int v, int in_place) {
    Blocks b = blocks_of(comm, n, v, 1);
    char* s = alloc_elems(t, b.counts[b.me]);
    fill(t, s, b.counts[b.me], b.me, salt, 0);
    char* rb = alloc_elems(t, b.total);
    if (in_place) fill(t, rb + b.displs[b.me] * t->extent, b.counts[b.me], b.me, salt, 0);
    const void* sbuf = in_place ? MPI_IN_PLACE : s;
    if (v)
        MPI_Allgatherv(sbuf, b.counts[b.me], t->type, rb, b.counts, b.displs, t->type, comm);
    else
        MPI_Allgather(sbuf, (int)n, t->type, rb, (int)n, t->type, comm);
    for (int r = 0; r < b.size; ++r) expect_rank(t, rb + b.displs[r] * t->extent, b.counts[r], r, salt, v ? "allgatherv" : "allgather");
    free(s);
    free(rb);
    blocks_free(&b);
}

/* Block from rank a to rank b: values of rank a*1000+b. */
static void test_alltoall(MPI_Comm comm, const Type* t, long n, int salt, int v, int in_place) {
    int me, size;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &size);
    int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size), *rc = malloc(sizeof(int) * size),
        *rd = malloc(sizeof(int) * size);
    long stot = 0, rtot = 0;
    for (int r = 0; r < size; ++r) {
        sc[r] = v ? counts_v(me + r, (int)n) : (int)n; /* me -> r */
        rc[r] = v ? counts_v(r + me, (int)n) : (int)n; /* r -> me: the same rule, so the counts agree */
        sd[r] = (int)stot + (v ? 1 : 0);
        stot = sd[r] + sc[r];
        rd[r] = (int)rtot + (v ? 1 : 0);
        rtot = rd[r] + rc[r];
    }
    if (in_place) { /* in place: one buffer, the receive layout (MPI: counts of both sides equal) */
        for (int r = 0; r < size; ++r) sc[r] = rc[r], sd[r] = rd[r];
    }
    char* s = alloc_elems(t, stot);
    char* rb = alloc_elems(t, rtot);
    char* src = in_place ? rb : s;
    for (int r = 0; r < size; ++r) fill(t, src + (in_place ? rd[r] : sd[r]) * t->extent, in_place ? rc[r] : sc[r], me * 1000 + r, salt, 0);
    const void* sbuf = in_place ? MPI_IN_PLACE : s;
    if (v)
        MPI_Alltoallv(sbuf, sc, sd, t->type, rb, rc, rd, t->type, comm);
    else
        MPI_Alltoall(sbuf, (int)n, t->type, rb, (int)n, t->type, comm);
    for (int r = 0; r < size; ++r) expect_rank(t, rb + rd[r] * t->extent, rc[r], r * 1000 + me, salt, v ? "alltoallv" : "alltoall");
    free(s);
    free(rb);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
}

/* Send as contiguous(3 ints), receive as 3x int: datatypes differ, signatures agree. */
static void test_mixed(MPI_Comm comm, long n, int salt) {
    int me, size;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &size);
    const Type *c3 = &types[2], *i1 = &types[0];
    char* s = alloc_elems(c3, n);
    for (long e = 0; e < n; ++e)
        for (int p = 0; p < 3; ++p) put(s + e * 12, &c3->prim[p], value(me, e * 3 + p, 0, salt, 0));
    char* rb = alloc_elems(i1, 3 * n * size);
    MPI_Allgather(s, (int)n, c3->type, rb, (int)(3 * n), MPI_INT, comm);
    for (int r = 0; r < size; ++r) expect_rank(i1, rb + r * 3 * n * 4, 3 * n, r, salt, "allgather contiguous -> int");
    free(s);
    free(rb);
}

/* ---- reductions --------------------------------------------------------------------------- */

#define AFFINE_M 1000003L
static MPI_Datatype affine_t; /* contiguous(2, MPI_INT): x -> a*x + b mod M */
static MPI_Op op_affine, op_struct_sum;

/* inout = in then inout: (a2, b2) o (a1, b1) = (a2*a1, a2*b1 + b2), in rank order. */
static void affine_fn(void* in, void* inout, int* len, MPI_Datatype* dt) {
    (void)dt;
    int* x = in;
    int* y = inout;
    for (int i = 0; i < *len; ++i) {
        long a1 = x[2 * i], b1 = x[2 * i + 1], a2 = y[2 * i], b2 = y[2 * i + 1];
        y[2 * i] = (int)(a2 * a1 % AFFINE_M);
        y[2 * i + 1] = (int)((a2 * b1 + b2) % AFFINE_M);
    }
}

/* Elementwise sum of every primitive of the derived types it is used with. */
static void struct_sum_fn(void* in, void* inout, int* len, MPI_Datatype* dt) {
    for (int k = 0; k < ntypes; ++k)
        if (types[k].type == *dt) {
            const Type* t = &types[k];
            for (int e = 0; e < *len; ++e)
                for (int p = 0; p < t->nprim; ++p)
                    put((char*)inout + e * t->extent, &t->prim[p],
                        get((char*)in + e * t->extent, &t->prim[p]) + get((char*)inout + e * t->extent, &t->prim[p]));
            return;
        }
    abort();
}

typedef struct {
    const char* name;
    MPI_Op* op;
    const Type* t;
    int small;  /* values 1..3 (products) */
    int kind;   /* 0 sum, 1 prod, 2 max, 3 min, 4 land, 5 band, 6 lor, 7 bor, 8 lxor, 9 bxor, 10 maxloc, 11 minloc, 12 affine, 13 user sum */
} Red;

static Type type_2int, type_affine;
static Red reds[32];
static int nreds;

static long combine(int kind, long a, long b) { /* a holds the earlier ranks */
    switch (kind) {
        case 0: case 13: return a + b;
        case 1: return a * b;
        case 2: return a > b ? a : b;
        case 3: return a < b ? a : b;
        case 4: return (a != 0) && (b != 0);
        case 5: return a & b;
        case 6: return (a != 0) || (b != 0);
        case 7: return a | b;
        case 8: return (a != 0) != (b != 0);
        case 9: return a ^ b;
    }
    abort();
}

/* Element e of rank r's input to reduction rd, at el. */
static void red_value(const Red* rd, char* el, int r, long e, int salt) {
    const Type* t = rd->t;
    if (rd->kind == 10 || rd->kind == 11) { /* (value, index): ties on purpose */
        put(el, &t->prim[0], value(r, e, 0, salt, 1));
        put(el, &t->prim[1], r);
    } else if (rd->kind == 12) {
        put(el, &t->prim[0], value(r, e, 0, salt, 0) + 1000);
        put(el, &t->prim[1], value(r, e, 1, salt, 0) + 1000);
    } else if (rd->kind == 4 || rd->kind == 6 || rd->kind == 8) { /* logical: 0/1 */
        put(el, &t->prim[0], value(r, e, 0, salt, 0) % 4 == 0 ? 0 : 1);
    } else {
        for (int p = 0; p < t->nprim; ++p) put(el, &t->prim[p], value(r, e, p, salt, rd->small));
    }
}

static void red_input(const Red* rd, char* buf, long n, int r, int salt) {
    for (long e = 0; e < n; ++e) red_value(rd, buf + e * rd->t->extent, r, e, salt);
}

/* The reference: ranks [lo, hi] folded in rank order into `out` (n elements). */
static void red_reference(const Red* rd, char* out, long n, int lo, int hi, int salt) {
    const Type* t = rd->t;
    char* x = alloc_elems(t, 1);
    for (long e = 0; e < n; ++e) {
        char* acc = out + e * t->extent;
        red_value(rd, acc, lo, e, salt);
        for (int r = lo + 1; r <= hi; ++r) {
            red_value(rd, x, r, e, salt);
            if (rd->kind == 10 || rd->kind == 11) {
                long av = get(acc, &t->prim[0]), ai = get(acc, &t->prim[1]);
                long bv = get(x, &t->prim[0]), bi = get(x, &t->prim[1]);
                int take_b = rd->kind == 10 ? (bv > av || (bv == av && bi < ai)) : (bv < av || (bv == av && bi < ai));
                if (take_b) put(acc, &t->prim[0], bv), put(acc, &t->prim[1], bi);
            } else if (rd->kind == 12) {
                long a1 = get(acc, &t->prim[0]), b1 = get(acc, &t->prim[1]);
                long a2 = get(x, &t->prim[0]), b2 = get(x, &t->prim[1]);
                put(acc, &t->prim[0], a2 * a1 % AFFINE_M);
                put(acc, &t->prim[1], (a2 * b1 + b2) % AFFINE_M);
            } else {
                for (int p = 0; p < t->nprim; ++p) put(acc, &t->prim[p], combine(rd->kind, get(acc, &t->prim[p]), get(x, &t->prim[p])));
            }
        }
    }
    free(x);
}

static void expect_equal(const Type* t, const char* got, const char* want, long n, const char* what) {
    for (long e = 0; e < n; ++e)
        for (int p = 0; p < t->nprim; ++p) {
            ++checks;
            long g = get(got + e * t->extent, &t->prim[p]), w = get(want + e * t->extent, &t->prim[p]);
            if (g != w) {
                fail(what, g, w);
                return;
            }
        }
}

static void make_reds(void) {
    MPI_Op_create(affine_fn, 0, &op_affine);
    MPI_Op_create(struct_sum_fn, 1, &op_struct_sum);
    MPI_Type_contiguous(2, MPI_INT, &affine_t);
    MPI_Type_commit(&affine_t);
    type_affine = (Type){"affine", affine_t, 2, {{0, P_INT}, {4, P_INT}}, 8};
    type_2int = (Type){"2int", MPI_2INT, 2, {{0, P_INT}, {4, P_INT}}, 8};
    static MPI_Op sum, prod, max, min, land, band, lor, bor, lxor, bxor, maxloc, minloc;
    sum = MPI_SUM, prod = MPI_PROD, max = MPI_MAX, min = MPI_MIN, land = MPI_LAND, band = MPI_BAND, lor = MPI_LOR,
    bor = MPI_BOR, lxor = MPI_LXOR, bxor = MPI_BXOR, maxloc = MPI_MAXLOC, minloc = MPI_MINLOC;
    const Type *ti = &types[0], *td = &types[1];
    reds[nreds++] = (Red){"sum int", &sum, ti, 0, 0};
    reds[nreds++] = (Red){"prod int", &prod, ti, 1, 1};
    reds[nreds++] = (Red){"max int", &max, ti, 0, 2};
    reds[nreds++] = (Red){"min int", &min, ti, 0, 3};
    reds[nreds++] = (Red){"land int", &land, ti, 0, 4};
    reds[nreds++] = (Red){"band int", &band, ti, 0, 5};
    reds[nreds++] = (Red){"lor int", &lor, ti, 0, 6};
    reds[nreds++] = (Red){"bor int", &bor, ti, 0, 7};
    reds[nreds++] = (Red){"lxor int", &lxor, ti, 0, 8};
    reds[nreds++] = (Red){"bxor int", &bxor, ti, 0, 9};
    reds[nreds++] = (Red){"sum double", &sum, td, 0, 0};
    reds[nreds++] = (Red){"prod double", &prod, td, 1, 1};
    reds[nreds++] = (Red){"max double", &max, td, 0, 2};
    reds[nreds++] = (Red){"min double", &min, td, 0, 3};
    reds[nreds++] = (Red){"maxloc 2int", &maxloc, &type_2int, 0, 10};
    reds[nreds++] = (Red){"minloc 2int", &minloc, &type_2int, 0, 11};
    reds[nreds++] = (Red){"affine (non-commutative user op)", &op_affine, &type_affine, 0, 12};
    for (int k = 2; k < ntypes; ++k) reds[nreds++] = (Red){types[k].name, &op_struct_sum, &types[k], 0, 13};
}

enum { R_REDUCE, R_ALLREDUCE, R_SCAN, R_EXSCAN, R_RS, R_RSB };

static void test_reduction(MPI_Comm comm, int which, const Red* rd, long n, int root, int salt, int in_place) {
    int me, size;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &size);
    const Type* t = rd->t;
    int* counts = malloc(sizeof(int) * size);
    long total = 0, before = 0;
    for (int r = 0; r < size; ++r) {
        counts[r] = which == R_RS ? counts_v(r, (int)n) : (int)n;
        if (r < me) before += counts[r];
        total += counts[r];
    }
    long in_n = which == R_RS || which == R_RSB ? (which == R_RS ? total : n * size) : n;
    long out_n = which == R_RS ? counts[me] : n;
    char* in = alloc_elems(t, in_n);
    char* out = alloc_elems(t, in_place ? in_n : out_n);
    char* want = alloc_elems(t, in_n);
    in_place = in_place && (which != R_REDUCE || me == root); /* MPI_IN_PLACE only at a reduce's root */
    red_input(rd, in_place ? out : in, in_n, me, salt);
    const void* sbuf = in_place ? MPI_IN_PLACE : in;
    const char* what = "";
    int check = 1;
    switch (which) {
        case R_REDUCE:
            what = "reduce";
            MPI_Reduce(sbuf, out, (int)n, t->type, *rd->op, root, comm);
            check = me == root;
            red_reference(rd, want, n, 0, size - 1, salt);
            break;
        case R_ALLREDUCE:
            what = "allreduce";
            MPI_Allreduce(sbuf, out, (int)n, t->type, *rd->op, comm);
            red_reference(rd, want, n, 0, size - 1, salt);
            break;
        case R_SCAN:
            what = "scan";
            MPI_Scan(sbuf, out, (int)n, t->type, *rd->op, comm);
            red_reference(rd, want, n, 0, me, salt);
            break;
        case R_EXSCAN:
            what = "exscan";
            MPI_Exscan(sbuf, out, (int)n, t->type, *rd->op, comm);
            check = me > 0;
            if (check) red_reference(rd, want, n, 0, me - 1, salt);
            break;
        case R_RS:
        case R_RSB: {
            what = which == R_RS ? "reduce_scatter" : "reduce_scatter_block";
            if (which == R_RS)
                MPI_Reduce_scatter(sbuf, out, counts, t->type, *rd->op, comm);
            else
                MPI_Reduce_scatter_block(sbuf, out, (int)n, t->type, *rd->op, comm);
            char* all = alloc_elems(t, in_n);
            red_reference(rd, all, in_n, 0, size - 1, salt);
            memcpy(want, all + before * t->extent, (size_t)(out_n * t->extent));
            free(all);
            break;
        }
    }
    if (check) expect_equal(t, out, want, out_n, what);
    free(in);
    free(out);
    free(want);
    free(counts);
}

/* ---- driver ------------------------------------------------------------------------------- */

static void run_all(MPI_Comm comm, const char* cname, const long* counts, int ncounts, int round) {
    int me, size;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &size);
    char label[256];
    int salt = round * 101;
    int roots[2] = {0, size - 1};
    for (int ci = 0; ci < ncounts; ++ci) {
        long n = counts[ci];
        for (int k = 0; k < ntypes; ++k) {
            const Type* t = &types[k];
            /* The long counts only for the basic types (the others cover the layouts). */
            if (n > 100 && k > 1 && k != 3) continue;
            for (int ri = 0; ri < (size > 1 ? 2 : 1); ++ri) {
                int root = roots[ri];
                snprintf(label, sizeof label, "%s, %s x %ld, root %d", cname, t->name, n, root);
                where = label;
                ++salt;
                test_bcast(comm, t, n, root, salt);
                test_gather(comm, t, n, root, ++salt, 0, 0);
                test_gather(comm, t, n, root, ++salt, 1, ri == 1);
                test_gather(comm, t, n, root, ++salt, 0, 1);
                test_scatter(comm, t, n, root, ++salt, 0, ri == 1);
                test_scatter(comm, t, n, root, ++salt, 1, ri == 0);
            }
            snprintf(label, sizeof label, "%s, %s x %ld", cname, t->name, n);
            where = label;
            test_allgather(comm, t, n, ++salt, 0, 0);
            test_allgather(comm, t, n, ++salt, 1, 1);
            test_allgather(comm, t, n, ++salt, 0, 1);
            test_alltoall(comm, t, n > 1000 ? n / 8 : n, ++salt, 0, 0);
            test_alltoall(comm, t, n > 1000 ? n / 8 : n, ++salt, 1, 0);
            test_alltoall(comm, t, n > 1000 ? n / 8 : n, ++salt, 0, 1);
        }
        snprintf(label, sizeof label, "%s, contiguous -> int x %ld", cname, n);
        where = label;
        test_mixed(comm, n, ++salt);
        for (int k = 0; k < nreds; ++k) {
            const Red* rd = &reds[k];
            if (n > 100 && k != 0 && k != 10 && k != 16) continue; /* long: sum int, sum double, affine */
            snprintf(label, sizeof label, "%s, %s x %ld", cname, rd->name, n);
            where = label;
            for (int ri = 0; ri < (size > 1 ? 2 : 1); ++ri) test_reduction(comm, R_REDUCE, rd, n, roots[ri], ++salt, ri == 1);
            test_reduction(comm, R_ALLREDUCE, rd, n, 0, ++salt, 0);
            test_reduction(comm, R_ALLREDUCE, rd, n, 0, ++salt, 1);
            test_reduction(comm, R_SCAN, rd, n, 0, ++salt, k % 2);
            test_reduction(comm, R_EXSCAN, rd, n, 0, ++salt, k % 2 == 0);
            test_reduction(comm, R_RS, rd, n > 1000 ? n / 8 : n, 0, ++salt, k % 2);
            test_reduction(comm, R_RSB, rd, n > 1000 ? n / 8 : n, 0, ++salt, k % 2 == 0);
        }
        snprintf(label, sizeof label, "%s, barrier", cname);
        where = label;
        MPI_Barrier(comm);
    }
}

static void bad_call(const char* mode, int rank, int size) {
    int x[4] = {1, 2, 3, 4}, y[5] = {0};
    if (strcmp(mode, "root") == 0) { /* rank 1 thinks the root is itself */
        MPI_Bcast(x, 4, MPI_INT, rank == 1 ? 1 : 0, MPI_COMM_WORLD);
        MPI_Bcast(x, 4, MPI_INT, 0, MPI_COMM_WORLD);
    } else if (strcmp(mode, "count") == 0) { /* rank 1 reduces one element more */
        MPI_Allreduce(x, y, rank == 1 ? 5 : 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    } else if (strcmp(mode, "coll") == 0) { /* rank 1 calls another collective */
        if (rank == 1)
            MPI_Reduce(x, y, 4, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
        else
            MPI_Allreduce(x, y, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    } else if (strcmp(mode, "skip") == 0) { /* rank 1 does not come: the others wait, then time out */
        if (rank != 1)
            MPI_Allreduce(x, y, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        else
            sleep(60); /* the job must end well before: the others' error aborts it */
    } else {
        fprintf(stderr, "magpie_check: --bad root|count|coll|skip\n");
        exit(2);
    }
    (void)size;
    MPI_Barrier(MPI_COMM_WORLD);
    printf("magpie_check rank %d: the mismatched call returned\n", rank);
}

/* One MPI_Allreduce and one MPI_Reduce of n ints on MPI_COMM_WORLD; rank 0 prints the wide-area
 * bytes each moved. */
static void wan_of_allreduce(long n) {
    unsigned long long (*counter)(const char*, const char*) =
        (unsigned long long (*)(const char*, const char*))dlsym(RTLD_DEFAULT, "iccs_magpie_counter");
    int* x = malloc(sizeof(int) * (size_t)(n + 1));
    int* y = malloc(sizeof(int) * (size_t)(n + 1));
    for (long i = 0; i < n; ++i) x[i] = (int)(world_rank + i);
    const unsigned long long before = counter ? counter("allreduce", "wan_bytes") : 0;
    MPI_Allreduce(x, y, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    unsigned long long mine = counter ? counter("allreduce", "wan_bytes") - before : 0, all = 0;
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    where = "wan-allreduce";
    for (long i = 0; i < n; ++i) { /* sum over r of (r + i) */
        ++checks;
        const long want = (long)size * (size - 1) / 2 + (long)size * i;
        if (y[i] != want) fail("allreduce", y[i], want);
    }
    PMPI_Reduce(&mine, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD); /* not counted */
    if (world_rank == 0 && counter) printf("magpie_check allreduce %ld wan_bytes %llu\n", n, all);
    /* The same vector reduced to rank 0. */
    const unsigned long long reduce_before = counter ? counter("reduce", "wan_bytes") : 0;
    for (long i = 0; i < n; ++i) y[i] = -1;
    MPI_Reduce(x, y, (int)n, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    mine = counter ? counter("reduce", "wan_bytes") - reduce_before : 0;
    for (long i = 0; i < n && world_rank == 0; ++i) {
        ++checks;
        const long want = (long)size * (size - 1) / 2 + (long)size * i;
        if (y[i] != want) fail("reduce", y[i], want);
    }
    PMPI_Reduce(&mine, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (world_rank == 0 && counter) printf("magpie_check reduce %ld wan_bytes %llu\n", n, all);
    free(x);
    free(y);
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long counts[16] = {0, 1, 7, 5000};
    int ncounts = 4, rounds = 1;
    const char* bad = NULL;
    long wan_allreduce = -1;
    const char* only = "world,parity,trio,dup,reversed";
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--counts") == 0 && i + 1 < argc) {
            ncounts = 0;
            for (char* s = strtok(argv[++i], ","); s && ncounts < 16; s = strtok(NULL, ",")) counts[ncounts++] = atol(s);
        } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--comms") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else if (strcmp(argv[i], "--bad") == 0 && i + 1 < argc) {
            bad = argv[++i];
        } else if (strcmp(argv[i], "--wan-allreduce") == 0 && i + 1 < argc) {
            wan_allreduce = atol(argv[++i]);
        } else {
            if (world_rank == 0) fprintf(stderr, "magpie_check: unknown argument %s\n", argv[i]);
            MPI_Finalize();
            return 2;
        }
    }
    if (bad) {
        bad_call(bad, world_rank, size);
        MPI_Finalize();
        return 0;
    }
    make_types();
    make_reds();
    MPI_Comm parity, trio = MPI_COMM_NULL, dup, reversed;
    MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &parity);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - world_rank, &reversed);
    if (size >= 3) {
        MPI_Group wg, tg;
        int members[3] = {0, size / 2, size - 1};
        MPI_Comm_group(MPI_COMM_WORLD, &wg);
        MPI_Group_incl(wg, 3, members, &tg);
        MPI_Comm_create(MPI_COMM_WORLD, tg, &trio);
        MPI_Group_free(&wg);
        MPI_Group_free(&tg);
    }
    if (size >= 2) { /* an inter-communicator (passed to MPI unchanged): each group sums the other's ranks */
        MPI_Comm inter;
        MPI_Intercomm_create(parity, 0, MPI_COMM_WORLD, world_rank % 2 ? 0 : 1, 77, &inter);
        int mine = world_rank + 1, sum = 0, want = 0;
        for (int r = 0; r < size; ++r)
            if (r % 2 != world_rank % 2) want += r + 1;
        where = "inter-communicator";
        MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, inter);
        ++checks;
        if (sum != want) fail("allreduce over an inter-communicator", sum, want);
        MPI_Barrier(inter);
        MPI_Comm_free(&inter);
    }
    for (int round = 0; round < rounds; ++round) {
        if (strstr(only, "world")) run_all(MPI_COMM_WORLD, "world", counts, ncounts, round);
        if (strstr(only, "parity")) run_all(parity, "parity", counts, ncounts, round);
        if (strstr(only, "trio") && trio != MPI_COMM_NULL) run_all(trio, "trio", counts, ncounts, round);
        if (strstr(only, "dup")) run_all(dup, "dup", counts, ncounts, round);
        if (strstr(only, "reversed")) run_all(reversed, "reversed", counts, ncounts, round);
    }
    MPI_Comm_free(&parity);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&reversed);
    if (trio != MPI_COMM_NULL) MPI_Comm_free(&trio);
    if (wan_allreduce > 0) wan_of_allreduce(wan_allreduce);
    printf("magpie_check rank %d: %ld checks, %ld failures\n", world_rank, checks, failures);
    fflush(stdout);
    MPI_Finalize();
    return failures ? 1 : 0;
}
