// owner_only.cpp: see owner_only.hpp.
#include "owner_only.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace iccs {

bool make_private_dir(const std::string& path, std::string& err) {
    if (::mkdir(path.c_str(), 0700) == 0) return true;
    if (errno != EEXIST) {
        err = path + ": cannot create the directory: " + std::strerror(errno);
        return false;
    }
    struct stat st{};
    if (::lstat(path.c_str(), &st) != 0) {
        err = path + ": " + std::strerror(errno);
        return false;
    }
    if (S_ISLNK(st.st_mode)) {
        err = path + ": is a symlink, not a directory of ours (refused)";
        return false;
    }
    if (!S_ISDIR(st.st_mode)) {
        err = path + ": exists and is not a directory";
        return false;
    }
    if (st.st_uid != ::geteuid()) {
        err = path + ": permission denied: owned by UID " + std::to_string(st.st_uid);
        return false;
    }
    if ((st.st_mode & 077) != 0 && ::chmod(path.c_str(), 0700) != 0) {
        err = path + ": cannot make it owner-only: " + std::strerror(errno);
        return false;
    }
    return true;
}

int open_private_file(const std::string& path, std::string& err) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        err = path + ": cannot create: " + std::strerror(errno);
        return -1;
    }
    if (::fchmod(fd, 0600) != 0) {  // it existed with another mode
        err = path + ": cannot make it owner-only: " + std::strerror(errno);
        ::close(fd);
        return -1;
    }
    return fd;
}

}  // namespace iccs
