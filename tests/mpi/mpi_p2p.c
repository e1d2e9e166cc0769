/* mpi_p2p.c: point-to-point MPI over the provider, every rank checking what it gets: blocking
   send/recv of 0 B .. 4 MiB between every pair, non-blocking with the wait/test variants,
   synchronous sends, probe / iprobe / mprobe / improbe, MPI_ANY_SOURCE and MPI_ANY_TAG, the order
   of one pair's messages, a truncated receive, a cancelled receive, messages to itself. */
#include <string.h>

#include "mpi_check.h"

static const long kSizes[] = {0, 1, 8, 100, 1392, 1393, 4096, 65536, 65600, 262144 + 3, (1 << 20) + 13, 4 << 20};
#define NSIZES ((int)(sizeof kSizes / sizeof kSizes[0]))

static int rank, size;

/* Every ordered pair (a, b), a != b, exchanges one message of each size, blocking. */
static void blocking_all_pairs(unsigned char* sb, unsigned char* rb) {
    for (int s = 0; s < NSIZES; s++) {
        const long n = kSizes[s];
        for (int d = 1; d < size; d++) {
            const int to = (rank + d) % size, from = (rank - d + size) % size;
            fill(sb, n, rank, to, s);
            memset(rb, 0xEE, n + 1);
            MPI_Status st;
            CHECK_MPI(MPI_Sendrecv(sb, (int)n, MPI_BYTE, to, 100 + s, rb, (int)n + 1, MPI_BYTE, from, 100 + s,
                                   MPI_COMM_WORLD, &st));
            int cnt = -1;
            MPI_Get_count(&st, MPI_BYTE, &cnt);
            CHECK(cnt == n && st.MPI_SOURCE == from && st.MPI_TAG == 100 + s);
            CHECK(verify(rb, n, from, rank, s));
            CHECK(rb[n] == 0xEE); /* nothing beyond the message */
        }
    }
}

/* Non-blocking: each rank posts receives from everybody for several sizes, then sends; completes
   them with waitall / waitany / waitsome / testall / testany / testsome in turn. */
static void nonblocking(void) {
    const long sizes[] = {0, 64, 1500, 70000, 300000};
    const int ns = 5, per = ns * (size - 1);
    unsigned char** rbufs = calloc(per, sizeof *rbufs);
    unsigned char** sbufs = calloc(per, sizeof *sbufs);
    MPI_Request* rr = calloc(per, sizeof *rr);
    MPI_Request* sr = calloc(per, sizeof *sr);
    for (int variant = 0; variant < 6; variant++) {
        int k = 0;
        for (int d = 1; d < size; d++)
            for (int s = 0; s < ns; s++, k++) {
                const int from = (rank - d + size) % size;
                rbufs[k] = malloc(sizes[s] + 1);
                CHECK_MPI(MPI_Irecv(rbufs[k], (int)sizes[s], MPI_BYTE, from, 1000 + variant * 10 + s, MPI_COMM_WORLD, &rr[k]));
            }
        MPI_Barrier(MPI_COMM_WORLD);
        k = 0;
        for (int d = 1; d < size; d++)
            for (int s = 0; s < ns; s++, k++) {
                const int to = (rank + d) % size;
                sbufs[k] = malloc(sizes[s] + 1);
                fill(sbufs[k], sizes[s], rank, to, variant * 10 + s);
                CHECK_MPI(MPI_Isend(sbufs[k], (int)sizes[s], MPI_BYTE, to, 1000 + variant * 10 + s, MPI_COMM_WORLD, &sr[k]));
            }
        int done = 0, flag = 0, idx = 0, outc = 0;
        int* outs = calloc(per, sizeof *outs);
        switch (variant) {
            case 0: CHECK_MPI(MPI_Waitall(per, rr, MPI_STATUSES_IGNORE)); break;
            case 1:
                for (done = 0; done < per; done++) {
                    CHECK_MPI(MPI_Waitany(per, rr, &idx, MPI_STATUS_IGNORE));
                    CHECK(idx >= 0 && idx < per);
                }
                break;
            case 2:
                while (done < per) {
                    CHECK_MPI(MPI_Waitsome(per, rr, &outc, outs, MPI_STATUSES_IGNORE));
                    CHECK(outc > 0);
                    done += outc;
                }
                break;
            case 3:
                while (!flag) CHECK_MPI(MPI_Testall(per, rr, &flag, MPI_STATUSES_IGNORE));
                break;
            case 4:
                while (done < per) {
                    CHECK_MPI(MPI_Testany(per, rr, &idx, &flag, MPI_STATUS_IGNORE));
                    if (flag && idx != MPI_UNDEFINED) done++;
                }
                break;
            default:
                while (done < per) {
                    CHECK_MPI(MPI_Testsome(per, rr, &outc, outs, MPI_STATUSES_IGNORE));
                    if (outc != MPI_UNDEFINED) done += outc;
                }
        }
        free(outs);
        CHECK_MPI(MPI_Waitall(per, sr, MPI_STATUSES_IGNORE));
        k = 0;
        for (int d = 1; d < size; d++)
            for (int s = 0; s < ns; s++, k++) {
                const int from = (rank - d + size) % size;
                CHECK(verify(rbufs[k], sizes[s], from, rank, variant * 10 + s));
                free(rbufs[k]);
                free(sbufs[k]);
            }
    }
    free(rbufs);
    free(sbufs);
    free(rr);
    free(sr);
}

/* Synchronous sends (their acknowledgement is a message of the provider's with no completion). */
static void synchronous(unsigned char* sb, unsigned char* rb) {
    const long n = 5000;
    for (int d = 1; d < size; d++) {
        const int to = (rank + d) % size, from = (rank - d + size) % size;
        MPI_Request r;
        CHECK_MPI(MPI_Irecv(rb, (int)n, MPI_BYTE, from, 7, MPI_COMM_WORLD, &r));
        fill(sb, n, rank, to, 77);
        CHECK_MPI(MPI_Ssend(sb, (int)n, MPI_BYTE, to, 7, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(verify(rb, n, from, rank, 77));
        MPI_Request s;
        CHECK_MPI(MPI_Issend(sb, 0, MPI_BYTE, to, 8, MPI_COMM_WORLD, &s));
        CHECK_MPI(MPI_Recv(rb, 0, MPI_BYTE, from, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
    }
}

/* Probes and wildcards: rank 0 receives one message from every other rank by probing first, in
   three rounds (a barrier between them: an any-source probe may find any sender's message). */
static void probes(unsigned char* sb, unsigned char* rb) {
    if (rank != 0) {
        const long n = 100 + rank * 1000;
        for (int round = 0; round < 3; round++) {
            fill(sb, n, rank, 0, 5 + round);
            CHECK_MPI(MPI_Send(sb, (int)n, MPI_BYTE, 0, 40 + 20 * round + rank, MPI_COMM_WORLD));
            MPI_Barrier(MPI_COMM_WORLD);
        }
        return;
    }
    int* seen = calloc(size, sizeof(int));
    for (int i = 1; i < size; i++) {  /* MPI_Probe, any source, any tag */
        MPI_Status st;
        CHECK_MPI(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        const int src = st.MPI_SOURCE;
        CHECK(src > 0 && src < size && !seen[src] && st.MPI_TAG == 40 + src);
        seen[src] = 1;
        int cnt;
        MPI_Get_count(&st, MPI_BYTE, &cnt);
        CHECK(cnt == 100 + src * 1000);
        CHECK_MPI(MPI_Recv(rb, cnt, MPI_BYTE, src, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(verify(rb, cnt, src, 0, 5));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int src = 1; src < size; src++) {  /* MPI_Iprobe until it is there, directed */
        int flag = 0;
        MPI_Status st;
        while (!flag) CHECK_MPI(MPI_Iprobe(src, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
        CHECK(st.MPI_SOURCE == src && st.MPI_TAG == 60 + src);
        CHECK_MPI(MPI_Recv(rb, 100 + src * 1000, MPI_BYTE, MPI_ANY_SOURCE, 60 + src, MPI_COMM_WORLD, &st));
        CHECK(st.MPI_SOURCE == src && verify(rb, 100 + src * 1000, src, 0, 6));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 1; i < size; i++) {  /* matched probes: the message is taken by the probe */
        MPI_Message msg;
        MPI_Status st;
        if (i % 2) {
            CHECK_MPI(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &st));
        } else {
            int flag = 0;
            while (!flag) CHECK_MPI(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &msg, &st));
        }
        const int src = st.MPI_SOURCE;
        CHECK(st.MPI_TAG == 80 + src);
        int cnt;
        MPI_Get_count(&st, MPI_BYTE, &cnt);
        CHECK_MPI(MPI_Mrecv(rb, cnt, MPI_BYTE, &msg, &st));
        CHECK(st.MPI_SOURCE == src && verify(rb, cnt, src, 0, 7));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int flag = 1;  /* nothing left: an iprobe says so */
    CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
    CHECK(!flag);
    free(seen);
}

/* One pair's messages arrive in order (same tag, and the receiver takes them any-tag too). */
static void ordering(void) {
    const int n = 500;
    const int to = (rank + 1) % size, from = (rank - 1 + size) % size;
    int* in = malloc(n * sizeof(int));
    MPI_Request* rq = malloc(n * sizeof(MPI_Request));
    for (int i = 0; i < n; i++) CHECK_MPI(MPI_Irecv(&in[i], 1, MPI_INT, from, i % 2 ? 3 : MPI_ANY_TAG, MPI_COMM_WORLD, &rq[i]));
    for (int i = 0; i < n; i++) {
        int v = i;
        CHECK_MPI(MPI_Send(&v, 1, MPI_INT, to, 3, MPI_COMM_WORLD));
    }
    CHECK_MPI(MPI_Waitall(n, rq, MPI_STATUSES_IGNORE));
    for (int i = 0; i < n; i++) CHECK(in[i] == i);
    /* unexpected messages are matched later in arrival order */
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < n; i++) CHECK_MPI(MPI_Send(&i, 1, MPI_INT, to, 9, MPI_COMM_WORLD));
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < n; i++) {
        int v = -1;
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(v == i);
    }
    free(in);
    free(rq);
}

/* A message longer than the receive buffer: MPI_ERR_TRUNCATE, the buffer holds its start. */
static void truncation(unsigned char* sb, unsigned char* rb) {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const int to = (rank + 1) % size, from = (rank - 1 + size) % size;
    const long n = 3000, cap = 1000;
    fill(sb, n, rank, to, 11);
    memset(rb, 0xEE, n);
    MPI_Request r;
    CHECK_MPI(MPI_Irecv(rb, (int)cap, MPI_BYTE, from, 12, MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Send(sb, (int)n, MPI_BYTE, to, 12, MPI_COMM_WORLD));
    MPI_Status st;
    const int rc = MPI_Wait(&r, &st);
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc == MPI_SUCCESS ? st.MPI_ERROR : rc, &cls);
    CHECK(cls == MPI_ERR_TRUNCATE);
    CHECK(verify(rb, cap, from, rank, 11) && rb[cap] == 0xEE);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

/* A receive nobody sends to is cancelled; messages to oneself. */
static void cancel_and_self(unsigned char* sb, unsigned char* rb) {
    MPI_Request r;
    CHECK_MPI(MPI_Irecv(rb, 10, MPI_BYTE, (rank + 1) % size, 999, MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Cancel(&r));
    MPI_Status st;
    CHECK_MPI(MPI_Wait(&r, &st));
    int cancelled = 0;
    MPI_Test_cancelled(&st, &cancelled);
    CHECK(cancelled);
    fill(sb, 70000, rank, rank, 21);
    CHECK_MPI(MPI_Sendrecv(sb, 70000, MPI_BYTE, rank, 21, rb, 70000, MPI_BYTE, rank, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(verify(rb, 70000, rank, rank, 21));
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank = rank;
    CHECK(size >= 2);
    unsigned char* sb = malloc((4 << 20) + 64);
    unsigned char* rb = malloc((4 << 20) + 64);
    blocking_all_pairs(sb, rb);
    nonblocking();
    synchronous(sb, rb);
    probes(sb, rb);
    MPI_Barrier(MPI_COMM_WORLD);
    ordering();
    truncation(sb, rb);
    cancel_and_self(sb, rb);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("p2p PASS rank %d of %d\n", rank, size);
    free(sb);
    free(rb);
    MPI_Finalize();
    return 0;
}
