// doorbell.cpp: see doorbell.hpp.
#include "doorbell.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace iccs {

namespace {
constexpr size_t kBellBytes = 4096;
}

std::string doorbell_path(const std::string& dir, uint16_t cluster, uint16_t proxy) {
    return dir + "/bell-c" + std::to_string(cluster) + "p" + std::to_string(proxy);
}

std::unique_ptr<Doorbell> Doorbell::open(const std::string& path, std::string& err) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        err = "cannot open the doorbell " + path + ": " + std::strerror(errno);
        return nullptr;
    }
    // Both sides may create it; the same size either way, and a new file reads as zeros.
    if (ftruncate(fd, kBellBytes) != 0) {
        err = "cannot size the doorbell " + path + ": " + std::strerror(errno);
        ::close(fd);
        return nullptr;
    }
    void* p = mmap(nullptr, kBellBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) {
        err = "cannot map the doorbell " + path + ": " + std::strerror(errno);
        return nullptr;
    }
    return std::unique_ptr<Doorbell>(new Doorbell(static_cast<std::atomic<uint32_t>*>(p)));
}

Doorbell::~Doorbell() { munmap(word_, kBellBytes); }

void Doorbell::ring() {
    if (word_->load(std::memory_order_relaxed) == 0) return;
    if (watch()->load(std::memory_order_seq_cst) != 0) return;  // a compute thread polls its ports
    if (word_->exchange(0, std::memory_order_seq_cst) == 1) {
        syscall(SYS_futex, reinterpret_cast<uint32_t*>(word_), FUTEX_WAKE, 1, nullptr, nullptr, 0);
        ++rings_;
    }
}

}  // namespace iccs
