// owner_only.hpp: what a run creates is its owner's only (issue 17): directories 0700, files and
// sockets 0600 (no group or other bits), so another user can neither read the counters and
// captures nor reach the telemetry socket that takes live WAN changes, nor a memif link.
//
// Two tools: a umask held while DPDK creates what it creates (EAL runtime dir and config, the
// telemetry socket, memif sockets: paths we do not open ourselves), and a directory maker that
// refuses a path someone else owns or planted as a symlink (the run directory is a predictable
// /tmp/iccs-<id>).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <string>

namespace iccs {

// umask 077 for the lifetime of the object (process-wide: hold it during single-threaded set-up).
class OwnerOnlyUmask {
   public:
    OwnerOnlyUmask() : old_(::umask(077)) {}
    ~OwnerOnlyUmask() { ::umask(old_); }
    OwnerOnlyUmask(const OwnerOnlyUmask&) = delete;
    OwnerOnlyUmask& operator=(const OwnerOnlyUmask&) = delete;

   private:
    mode_t old_;
};

// Create directory `path` with mode 0700, or accept it if it exists, is a real directory (not a
// symlink) and belongs to this user (then its mode is set to 0700). Checked and changed through
// one descriptor (O_NOFOLLOW, fstat, fchmod). false with err naming the path and the reason
// ("owned by UID N", "a symlink", the errno text).
bool make_private_dir(const std::string& path, std::string& err);

// Open `path` for writing, created or truncated, mode 0600 whatever it was, through one
// descriptor: O_NOFOLLOW (a planted symlink fails), then fstat (a regular file of this user's,
// or it is refused untouched, even for root), then fchmod and ftruncate. Returns the fd, or -1
// with err.
int open_private_file(const std::string& path, std::string& err);

}  // namespace iccs
