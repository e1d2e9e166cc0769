// args.hpp: the command-line helpers every subcommand shares: one message style for bad input
// ("iccs <cmd>: bad value 'x' for --flag: an integer from A to B is allowed"), exit status 2.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace iccs::cli {

// Prints "iccs <who>: <msg>" and exits with status 2 (a usage error).
[[noreturn]] inline void usage_error(const std::string& who, const std::string& msg) {
    std::fprintf(stderr, "iccs%s%s: %s\n", who.empty() ? "" : " ", who.c_str(), msg.c_str());
    std::exit(2);
}

// An integer flag value in [lo, hi], or a usage error naming the flag, the value and the range.
inline uint64_t parse_u64(const std::string& who, const std::string& flag, const char* v, uint64_t lo, uint64_t hi) {
    if (v == nullptr) usage_error(who, flag + " needs a value");
    char* end = nullptr;
    errno = 0;
    const unsigned long long x = std::strtoull(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || *v == '-' || x < lo || x > hi)
        usage_error(who, "bad value '" + std::string(v) + "' for " + flag + ": an integer from " + std::to_string(lo) +
                             " to " + std::to_string(hi) + " is allowed");
    return x;
}

}  // namespace iccs::cli
