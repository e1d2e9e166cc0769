// uring_probe.cpp: what the kernel's io_uring offers (uring_probe, uring_udp.hpp), tried before
// any cluster starts, and the ring set-up the port shares with it.
#include "uring_udp_impl.hpp"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace iccs {

namespace uring_detail {

const char* const kAlternative = "use fabric = \"memif\" or \"af_packet\"";

std::string refused(const char* call, int e) {
    return std::string("fabric \"udp\" needs io_uring, which this kernel refused (") + call + ": " +
           std::strerror(e) + "); " + kAlternative;
}

size_t page_round(size_t n) {
    const size_t pg = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return (n + pg - 1) / pg * pg;
}

void* map_anon(size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
}

bool env_off(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && std::strcmp(v, "0") == 0;
}

bool env_set(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

constexpr unsigned kDeferFlags =
    IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_R_DISABLED;

int ring_init(unsigned entries, io_uring& ring, bool want_coop, bool sqpoll, bool& coop, bool want_defer,
              bool* defer) {
    io_uring_params p{};
    if (defer != nullptr) *defer = false;
    if (sqpoll) {
        p.flags = IORING_SETUP_SQPOLL;
        p.sq_thread_idle = 10;
        coop = false;
        return io_uring_queue_init_params(entries, &ring, &p);
    }
    if (want_defer) {
        p.flags = kDeferFlags;
        if (io_uring_queue_init_params(entries, &ring, &p) == 0) {
            coop = true;  // the TASKRUN flag says when there is deferred work, as with coop
            *defer = true;
            return 0;
        }
        p = io_uring_params{};
    }
    if (want_coop) {
        p.flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
        const int r = io_uring_queue_init_params(entries, &ring, &p);
        if (r != -EINVAL) {
            coop = r == 0;
            return r;
        }
        p = io_uring_params{};
    }
    coop = false;
    return io_uring_queue_init_params(entries, &ring, &p);
}

}  // namespace uring_detail

using namespace uring_detail;

namespace {

// Multishot recvmsg with a provided-buffer ring, tried for real: a socket sends itself one byte
// and a multishot receive must return it in a selected buffer. An older kernel refuses the
// buffer ring (before 5.19) or the multishot flag (before 6.0) at once.
bool probe_multishot(io_uring& ring) {
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    const size_t ring_bytes = page_round(sizeof(io_uring_buf));
    auto* br = static_cast<io_uring_buf_ring*>(map_anon(ring_bytes));
    bool ok = false;
    alignas(64) static thread_local uint8_t buf[256];
    msghdr m{};
    m.msg_namelen = sizeof(sockaddr_in);
    if (br != nullptr && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &al) == 0) {
        io_uring_buf_reg reg{};
        reg.ring_addr = reinterpret_cast<uint64_t>(br);
        reg.ring_entries = 1;
        reg.bgid = kBufGroup;
        if (io_uring_register_buf_ring(&ring, &reg, 0) == 0) {
            io_uring_buf_ring_init(br);
            io_uring_buf_ring_add(br, buf, sizeof buf, 0, io_uring_buf_ring_mask(1), 0);
            io_uring_buf_ring_advance(br, 1);
            io_uring_sqe* sqe = io_uring_get_sqe(&ring);
            io_uring_prep_recvmsg_multishot(sqe, fd, &m, 0);
            sqe->flags |= IOSQE_BUFFER_SELECT;
            sqe->buf_group = kBufGroup;
            io_uring_sqe_set_data64(sqe, 1);
            if (io_uring_submit(&ring) == 1 &&
                sendto(fd, "x", 1, 0, reinterpret_cast<sockaddr*>(&a), sizeof a) == 1) {
                __kernel_timespec ts{1, 0};
                io_uring_cqe* cqe = nullptr;
                if (io_uring_wait_cqe_timeout(&ring, &cqe, &ts) == 0 && cqe != nullptr) {
                    ok = cqe->res > 0 && (cqe->flags & IORING_CQE_F_BUFFER) != 0;
                    io_uring_cqe_seen(&ring, cqe);
                }
            }
            // Cancel the receive and wait for it before the buffer ring is unmapped.
            io_uring_sqe* c = io_uring_get_sqe(&ring);
            io_uring_prep_cancel64(c, 1, 0);
            io_uring_sqe_set_data64(c, 2);
            io_uring_submit(&ring);
            for (int i = 0; i < 4; ++i) {
                __kernel_timespec ts{0, 50'000'000};
                io_uring_cqe* cqe = nullptr;
                if (io_uring_wait_cqe_timeout(&ring, &cqe, &ts) != 0) break;
                const bool done = cqe->user_data == 1 && !(cqe->flags & IORING_CQE_F_MORE);
                io_uring_cqe_seen(&ring, cqe);
                if (done) break;
            }
            io_uring_unregister_buf_ring(&ring, kBufGroup);
        }
    }
    close(fd);
    if (br != nullptr) munmap(br, ring_bytes);
    return ok;
}

}  // namespace

bool uring_probe(UringCaps& caps, std::string& err) {
    caps = UringCaps{};
    if (env_set("ICCS_URING_DISABLE")) {
        err = refused("io_uring_queue_init", EPERM) + " [simulated: ICCS_URING_DISABLE is set]";
        return false;
    }
    io_uring ring{};
    bool coop = false;
    const int r = ring_init(8, ring, true, false, coop);
    if (r < 0) {
        err = refused("io_uring_queue_init", -r);
        return false;
    }
    caps.coop_taskrun = coop;
    io_uring_probe* probe = io_uring_get_probe_ring(&ring);
    const bool ops = probe != nullptr && io_uring_opcode_supported(probe, IORING_OP_SENDMSG) &&
                     io_uring_opcode_supported(probe, IORING_OP_RECVMSG);
    caps.send_zc = probe != nullptr && io_uring_opcode_supported(probe, IORING_OP_SENDMSG_ZC);
    if (probe != nullptr) io_uring_free_probe(probe);
    if (!ops) {
        utsname u{};
        uname(&u);
        err = std::string("fabric \"udp\" needs io_uring with sendmsg and recvmsg (Linux 5.3 or later), which this "
                          "kernel (") + u.release + ") lacks; " + kAlternative;
        io_uring_queue_exit(&ring);
        return false;
    }
    caps.multishot_recvmsg = probe_multishot(ring);
    io_uring_queue_exit(&ring);
    io_uring dr{};
    bool dc = false, df = false;
    if (ring_init(8, dr, false, false, dc, true, &df) == 0) {
        caps.defer_taskrun = df;
        io_uring_queue_exit(&dr);
    }
    return true;
}

}  // namespace iccs
