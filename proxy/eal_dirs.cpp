// eal_dirs.cpp: the EAL's runtime directories (dpdk_env.hpp), apart from dpdk_env.cpp: the launcher
// of programs given by path (cli/'s iccs-run) removes them and must not link DPDK to do so.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "dpdk_env.hpp"

namespace iccs {

std::string eal_runtime_dir(const std::string& file_prefix) {
    // Mirrors eal_create_runtime_dir(): /var/run/dpdk for root, else $XDG_RUNTIME_DIR or /tmp.
    std::string base = "/var/run";
    if (getuid() != 0) {
        const char* xdg = std::getenv("XDG_RUNTIME_DIR");
        base = xdg != nullptr ? xdg : "/tmp";
    }
    return base + "/dpdk/" + file_prefix;
}

void eal_remove_runtime_dir(const std::string& file_prefix) {
    std::error_code ec;
    std::filesystem::remove_all(eal_runtime_dir(file_prefix), ec);
}

}  // namespace iccs
