// owner_only.cpp: see owner_only.hpp.
#include "owner_only.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace iccs {

// Both take the object by a descriptor opened without following a symlink, then check and change
// that object (fstat, fchmod): nothing can be swapped in between a check by name and a use by
// name (issue 37).

bool make_private_dir(const std::string& path, std::string& err) {
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
        err = path + ": cannot create the directory: " + std::strerror(errno);
        return false;
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        struct stat st{};
        if (errno == ELOOP || (errno == ENOTDIR && ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)))
            err = path + ": is a symlink, not a directory of ours (refused)";
        else if (errno == ENOTDIR)
            err = path + ": exists and is not a directory";
        else
            err = path + ": " + std::strerror(errno);
        return false;
    }
    struct stat st{};
    bool ok = false;
    if (::fstat(fd, &st) != 0)
        err = path + ": " + std::strerror(errno);
    else if (st.st_uid != ::geteuid())
        err = path + ": permission denied: owned by UID " + std::to_string(st.st_uid);
    else if ((st.st_mode & 077) != 0 && ::fchmod(fd, 0700) != 0)
        err = path + ": cannot make it owner-only: " + std::strerror(errno);
    else
        ok = true;
    ::close(fd);
    return ok;
}

int open_private_file(const std::string& path, std::string& err) {
    // No O_TRUNC here: an existing file is cut only once it is known to be ours.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    if (fd < 0) {
        err = path + (errno == ELOOP ? ": is a symlink (refused)" : ": cannot create: " + std::string(std::strerror(errno)));
        return -1;
    }
    struct stat st{};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        err = path + ": not a regular file (refused)";
    } else if (st.st_uid != ::geteuid()) {
        err = path + ": permission denied: owned by UID " + std::to_string(st.st_uid);
    } else if (::fchmod(fd, 0600) != 0 || ::ftruncate(fd, 0) != 0) {  // it existed with another mode
        err = path + ": cannot make it owner-only: " + std::strerror(errno);
    } else {
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        return fd;
    }
    ::close(fd);
    return -1;
}

}  // namespace iccs
