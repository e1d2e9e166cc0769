/* mpi_rma.c: one-sided communication (MPI-3 RMA) between the clusters, the pattern of one-sided
   latency and bandwidth benchmarks: windows of every flavour a program can make without shared
   memory (MPI_Win_create, MPI_Win_allocate, MPI_Win_create_dynamic with MPI_Win_attach), each
   rank's partner in the other half of the ranks (2 x 2 and 2 x 1: the other cluster), and every
   synchronisation: fence, post/start/complete/wait, lock/unlock (shared and exclusive),
   lock_all/flush/unlock_all. Put, Get, Rput/Rget, Accumulate (MPI_SUM, MPI_REPLACE),
   Get_accumulate, Fetch_and_op and Compare_and_swap, each checked against the value it must give.
   Whether the bytes crossed through the proxies is the launcher's check (run_mpi_cli.py: the
   agents' counters), not this program's: Open MPI's default one-sided component reaches a rank
   of the same host through its own shared memory and would go around them.
   Usage: mpi_rma [INTS] (window of INTS ints, default 65536: 256 KiB). */
#include <stdint.h>
#include <string.h>

#include "mpi_check.h"

static int rank, size, partner;
static long n_ints;
/* Displacement units per int: 1 in windows made with disp_unit sizeof(int), sizeof(int) in a
   dynamic window (displacements are addresses there). */
static MPI_Aint int_units = 1;

static int value(int owner, int k, long i) { return owner * 1000003 + k * 7919 + (int)i; }

/* A window of one of the three flavours over n_ints ints; *mem is where this rank's part lives,
   *disp the displacement a partner names for its start (an address for a dynamic window). */
static MPI_Win make_window(int flavour, int** mem, MPI_Aint* disp) {
    MPI_Win win;
    const MPI_Aint bytes = (MPI_Aint)n_ints * (MPI_Aint)sizeof(int);
    *disp = 0;
    if (flavour == 0) {
        CHECK_MPI(MPI_Alloc_mem(bytes, MPI_INFO_NULL, mem));
        CHECK_MPI(MPI_Win_create(*mem, bytes, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    } else if (flavour == 1) {
        CHECK_MPI(MPI_Win_allocate(bytes, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, mem, &win));
    } else {
        CHECK_MPI(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
        *mem = malloc((size_t)bytes);
        CHECK(*mem != NULL);
        CHECK_MPI(MPI_Win_attach(win, *mem, bytes));
        MPI_Aint mine;
        CHECK_MPI(MPI_Get_address(*mem, &mine));
        CHECK_MPI(MPI_Sendrecv(&mine, 1, MPI_AINT, partner, 0, disp, 1, MPI_AINT, partner, 0, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
    }
    return win;
}

static void free_window(int flavour, MPI_Win* win, int* mem) {
    if (flavour == 2) CHECK_MPI(MPI_Win_detach(*win, mem));
    CHECK_MPI(MPI_Win_free(win));
    if (flavour == 0) MPI_Free_mem(mem);
    if (flavour == 2) free(mem);
}

static void fill_ints(int* b, int owner, int k) {
    for (long i = 0; i < n_ints; i++) b[i] = value(owner, k, i);
}

static void expect_ints(const int* b, int owner, int k) {
    for (long i = 0; i < n_ints; i++) CHECK(b[i] == value(owner, k, i));
}

/* fence: a whole window's worth put into the partner; then got back from it. */
static void fence_put_get(MPI_Win win, int* mem, MPI_Aint disp, int* buf, int k) {
    memset(mem, 0, (size_t)n_ints * sizeof(int));
    fill_ints(buf, rank, k);
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Put(buf, (int)n_ints, MPI_INT, partner, disp, (int)n_ints, MPI_INT, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    expect_ints(mem, partner, k);
    memset(buf, 0, (size_t)n_ints * sizeof(int));
    CHECK_MPI(MPI_Get(buf, (int)n_ints, MPI_INT, partner, disp, (int)n_ints, MPI_INT, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    expect_ints(buf, rank, k);  /* what this rank put there */
}

/* post/start/complete/wait: each rank exposes to its partner and accesses the partner's. */
static void pscw_put(MPI_Win win, int* mem, MPI_Aint disp, int* buf, int k) {
    MPI_Group world, pair;
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
    CHECK_MPI(MPI_Group_incl(world, 1, &partner, &pair));
    memset(mem, 0, (size_t)n_ints * sizeof(int));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    fill_ints(buf, rank, k);
    CHECK_MPI(MPI_Win_post(pair, 0, win));
    CHECK_MPI(MPI_Win_start(pair, 0, win));
    CHECK_MPI(MPI_Put(buf, (int)n_ints, MPI_INT, partner, disp, (int)n_ints, MPI_INT, win));
    CHECK_MPI(MPI_Win_complete(win));
    CHECK_MPI(MPI_Win_wait(win));
    expect_ints(mem, partner, k);
    MPI_Group_free(&pair);
    MPI_Group_free(&world);
}

/* passive target: Rput/Rget under a shared lock, accumulates under lock_all with flush. */
static void passive(MPI_Win win, int* mem, MPI_Aint disp, int* buf, int k) {
    memset(mem, 0, (size_t)n_ints * sizeof(int));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    fill_ints(buf, rank, k);
    MPI_Request req;
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, partner, 0, win));
    CHECK_MPI(MPI_Rput(buf, (int)n_ints, MPI_INT, partner, disp, (int)n_ints, MPI_INT, win, &req));
    CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Win_unlock(partner, win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));  /* the local copy, synchronised */
    expect_ints(mem, partner, k);
    CHECK_MPI(MPI_Win_unlock(rank, win));
    int* back = malloc((size_t)n_ints * sizeof(int));
    CHECK(back != NULL);
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, partner, 0, win));
    CHECK_MPI(MPI_Rget(back, (int)n_ints, MPI_INT, partner, disp, (int)n_ints, MPI_INT, win, &req));
    CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Win_unlock(partner, win));
    expect_ints(back, rank, k);
    free(back);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* The partner adds its rank + 1 to the first 64 ints of this rank's window (under lock_all,
       flushed): each ends with the value put there plus that. */
    const int adds = 64;
    int one[64];
    for (int i = 0; i < adds; i++) one[i] = rank + 1;
    CHECK_MPI(MPI_Win_lock_all(0, win));
    CHECK_MPI(MPI_Accumulate(one, adds, MPI_INT, partner, disp, adds, MPI_INT, MPI_SUM, win));
    CHECK_MPI(MPI_Win_flush(partner, win));
    CHECK_MPI(MPI_Win_unlock_all(win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    for (int i = 0; i < adds; i++) CHECK(mem[i] == value(partner, k, i) + partner + 1);
    CHECK_MPI(MPI_Win_unlock(rank, win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* Get_accumulate (fetch then add), Fetch_and_op and Compare_and_swap on the partner's int 100. */
    int add = 5, got = -1, fetched = -1;
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, partner, 0, win));
    CHECK_MPI(MPI_Get_accumulate(&add, 1, MPI_INT, &got, 1, MPI_INT, partner, disp + 100 * int_units, 1, MPI_INT, MPI_SUM, win));
    CHECK_MPI(MPI_Win_flush(partner, win));
    CHECK(got == value(rank, k, 100));
    CHECK_MPI(MPI_Fetch_and_op(&add, &fetched, MPI_INT, partner, disp + 100 * int_units, MPI_SUM, win));
    CHECK_MPI(MPI_Win_flush(partner, win));
    CHECK(fetched == value(rank, k, 100) + 5);
    int expected = fetched + 5, desired = -rank - 1, old = 0;
    CHECK_MPI(MPI_Compare_and_swap(&desired, &expected, &old, MPI_INT, partner, disp + 100 * int_units, win));
    CHECK_MPI(MPI_Win_flush(partner, win));
    CHECK(old == expected);
    int wrong = expected + 1, other = 12345;
    CHECK_MPI(MPI_Compare_and_swap(&other, &wrong, &old, MPI_INT, partner, disp + 100 * int_units, win));  /* no swap */
    CHECK_MPI(MPI_Win_flush(partner, win));
    CHECK(old == desired);
    int replaced = 777;
    CHECK_MPI(MPI_Accumulate(&replaced, 1, MPI_INT, partner, disp + 101 * int_units, 1, MPI_INT, MPI_REPLACE, win));
    CHECK_MPI(MPI_Win_unlock(partner, win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    CHECK(mem[100] == -partner - 1 && mem[101] == 777);
    CHECK_MPI(MPI_Win_unlock(rank, win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char** argv) {
    mpi_check_init(&argc, &argv, &rank, &size);
    CHECK(size >= 2 && size % 2 == 0);
    n_ints = argc > 1 ? atol(argv[1]) : 65536;
    CHECK(n_ints >= 128);
    partner = (rank + size / 2) % size;
    int* buf = malloc((size_t)n_ints * sizeof(int));
    CHECK(buf != NULL);
    for (int flavour = 0; flavour < 3; flavour++) {
        int* mem;
        MPI_Aint disp;
        int_units = flavour == 2 ? (MPI_Aint)sizeof(int) : 1;
        MPI_Win win = make_window(flavour, &mem, &disp);
        fence_put_get(win, mem, disp, buf, flavour * 10 + 1);
        pscw_put(win, mem, disp, buf, flavour * 10 + 2);
        passive(win, mem, disp, buf, flavour * 10 + 3);
        free_window(flavour, &win, mem);
    }
    free(buf);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("PASS rank %d of %d\n", rank, size);
    MPI_Finalize();
    return 0;
}
