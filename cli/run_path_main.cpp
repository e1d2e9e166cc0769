// run_path_main.cpp: iccs-run, the launcher of `iccs run PATH` without DPDK. It takes iccs-cli's
// command line; `run PATH ...` (a program given by path) over direct or delay it runs itself, with
// compute/'s launcher of programs given by path, and anything else (another subcommand, a built-in
// program, a run over the proxies) it hands to iccs-cli beside it: exec, the same arguments. Why:
// iccs-cli links the proxies, the benchmarks and the applications, and with them DPDK's libraries,
// which the dynamic loader maps and relocates, and whose constructors it runs, before main: on the
// critical path of every run, before the launcher forks a cluster process. A program given by path
// loads the iccs transport itself when its run asks for it (compute/README.md, "The iccs transport
// as a module"), so its launcher over shared memory needs none of it.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>

#include "run_rt.hpp"
#include "run_table.hpp"

namespace {

char** g_argv = nullptr;  // main's, for the hand-over

}  // namespace

[[noreturn]] void iccs::hand_run_to_iccs_cli() {
    char self[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    std::string cli = "iccs-cli";
    if (n > 0) {
        self[n] = '\0';
        const char* slash = std::strrchr(self, '/');
        cli = std::string(self, slash != nullptr ? size_t(slash - self + 1) : 0) + "iccs-cli";
    }
    std::fflush(nullptr);
    g_argv[0] = cli.data();
    execv(cli.c_str(), g_argv);
    std::fprintf(stderr, "iccs-run: cannot start %s: %s (build it: ninja -C build cli/iccs-cli)\n", cli.c_str(),
                 std::strerror(errno));
    _exit(2);
}

int main(int argc, char** argv) {
    g_argv = argv;
    if (argc >= 3 && std::strcmp(argv[1], "run") == 0 && std::strchr(argv[2], '/') != nullptr) {
        static const iccs::ProgramRow row = iccs::path_row();
        return iccs::run_row(row, argc - 2, argv + 2);
    }
    iccs::hand_run_to_iccs_cli();
}
