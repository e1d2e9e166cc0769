// dsm_config.cpp: the DSM's configuration: defaults, the ICCS_DSM_* variables, checks against
// this host.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "dsm_impl.hpp"

namespace iccs::dsm {

namespace {
// A number as strtoull reads it (decimal, 0x hex, 0 octal), but only digits from the first
// character: strtoull itself skips blanks and takes "-1" as 2^64 - 1.
bool parse_u64(const char* s, uint64_t& v, bool suffixes) {
    if (!s || *s < '0' || *s > '9') return false;
    char* end = nullptr;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 0);
    if (errno || end == s) return false;
    uint64_t mul = 1;
    if (suffixes && *end) {
        switch (*end) {
            case 'k': case 'K': mul = 1ull << 10; break;
            case 'm': case 'M': mul = 1ull << 20; break;
            case 'g': case 'G': mul = 1ull << 30; break;
            case 't': case 'T': mul = 1ull << 40; break;
            default: return false;
        }
        end++;
        if (*end == 'i' || *end == 'B') end++;
        if (*end == 'B') end++;
    }
    if (*end || uint64_t(x) > UINT64_MAX / mul) return false;
    v = uint64_t(x) * mul;
    return true;
}

// A variable of two values (`yes` sets `out`, `no` clears it); false with `err` when it has another.
bool parse_choice(const char* name, const char* yes, const char* no, bool& out, std::string& err) {
    const char* s = getenv(name);
    if (s == nullptr) return true;
    if (std::strcmp(s, yes) == 0) out = true;
    else if (std::strcmp(s, no) == 0) out = false;
    else {
        err = std::string(name) + "=" + s + ": allowed values are " + yes + ", " + no;
        return false;
    }
    return true;
}
}  // namespace

uint64_t dsm_default_region_bytes() {
    uint64_t host = 0;
    if (FILE* f = fopen("/proc/meminfo", "r")) {
        char key[64];
        unsigned long long kb;
        while (fscanf(f, "%63s %llu kB", key, &kb) == 2)
            if (!strcmp(key, "MemTotal:") || !strcmp(key, "SwapTotal:")) host += uint64_t(kb) << 10;
        fclose(f);
    }
    uint64_t r = 64ull << 30;
    while (r < host && r < (1ull << 46)) r <<= 1;
    return r;
}

bool dsm_config_check(const DsmConfig& cfg, std::string& err) {
    const uint64_t os = uint64_t(sysconf(_SC_PAGESIZE));
    if (cfg.page_bytes == 0 || cfg.page_bytes % os || cfg.page_bytes > (1u << 20)) {
        err = "dsm page size " + std::to_string(cfg.page_bytes) + " bytes: must be a multiple of the OS page (" +
              std::to_string(os) + ") up to 1 MiB";
        return false;
    }
    if (cfg.region_bytes == 0 || cfg.region_bytes % cfg.page_bytes) {
        err = "dsm region size " + std::to_string(cfg.region_bytes) + " bytes: must be a non-zero multiple of the page size (" +
              std::to_string(cfg.page_bytes) + ")";
        return false;
    }
    if (cfg.base_addr == 0 || cfg.base_addr % os) {
        err = "dsm base address " + std::to_string(cfg.base_addr) + ": must be a non-zero multiple of the OS page";
        return false;
    }
    if (cfg.max_sync_ids < 2) {
        err = "dsm max_sync_ids " + std::to_string(cfg.max_sync_ids) + ": must be at least 2";
        return false;
    }
    if (uint32_t(cfg.handler_base) + kDsmHandlers > kRtUserHandlers) {
        err = "dsm handler_base " + std::to_string(cfg.handler_base) + ": handlers must fit below " +
              std::to_string(kRtUserHandlers);
        return false;
    }
    return true;
}

bool dsm_config_from_env(DsmConfig& cfg, std::string& err) {
    uint64_t v = 0;
    if (const char* s = getenv("ICCS_DSM_BASE")) {
        if (!parse_u64(s, v, false)) {
            err = std::string("ICCS_DSM_BASE=") + s + ": expected an address (e.g. 0x200000000000)";
            return false;
        }
        cfg.base_addr = v;
    }
    if (const char* s = getenv("ICCS_DSM_SIZE")) {
        if (!parse_u64(s, v, true)) {
            err = std::string("ICCS_DSM_SIZE=") + s + ": expected bytes, optionally with K, M or G (e.g. 512M)";
            return false;
        }
        cfg.region_bytes = v;
    }
    if (const char* s = getenv("ICCS_DSM_PAGE")) {
        if (!parse_u64(s, v, true) || v > UINT32_MAX) {
            err = std::string("ICCS_DSM_PAGE=") + s + ": expected bytes, a multiple of the OS page (e.g. 4096, 16K)";
            return false;
        }
        cfg.page_bytes = uint32_t(v);
    }
    if (const char* s = getenv("ICCS_DSM_HOME")) {
        const std::string h = s;
        if (h == "round-robin") cfg.home = HomePolicy::kRoundRobin;
        else if (h == "block") cfg.home = HomePolicy::kBlock;
        else if (h == "alloc-block") cfg.home = HomePolicy::kAllocBlock;
        else {
            err = "ICCS_DSM_HOME=" + h + ": allowed values are round-robin, block, alloc-block";
            return false;
        }
    }
    if (!parse_choice("ICCS_DSM_GETSUB", "ordered", "counter", cfg.getsub_orders, err)) return false;
    if (!parse_choice("ICCS_DSM_MIGRATE", "barrier", "off", cfg.migrate_homes, err)) return false;
    if (!parse_choice("ICCS_DSM_KEEP_WRITTEN", "on", "off", cfg.keep_written, err)) return false;
    if (const char* s = getenv("ICCS_DSM_LOCK_GRACE_US")) {
        if (!parse_u64(s, v, false) || v > 1'000'000) {
            err = std::string("ICCS_DSM_LOCK_GRACE_US=") + s + ": expected microseconds, 0 .. 1000000";
            return false;
        }
        cfg.lock_grace_us = uint32_t(v);
    }
    if (const char* s = getenv("ICCS_DSM_LOCK_GRACE_IDLE_US")) {
        if (!parse_u64(s, v, false) || v > 1'000'000) {
            err = std::string("ICCS_DSM_LOCK_GRACE_IDLE_US=") + s + ": expected microseconds, 0 .. 1000000";
            return false;
        }
        cfg.lock_grace_idle_us = uint32_t(v);
    }
    if (const char* s = getenv("ICCS_DSM_GRANTS_AHEAD")) {
        if (!parse_u64(s, v, false) || v > kGrantsAhead) {
            err = std::string("ICCS_DSM_GRANTS_AHEAD=") + s + ": expected a count of locks, 0 .. " +
                  std::to_string(kGrantsAhead);
            return false;
        }
        cfg.grants_ahead = uint32_t(v);
    }
    if (const char* s = getenv("ICCS_DSM_LOCK_SPIN_US")) {
        if (!parse_u64(s, v, false) || v > 100'000) {
            err = std::string("ICCS_DSM_LOCK_SPIN_US=") + s + ": expected microseconds, 0 .. 100000";
            return false;
        }
        cfg.lock_spin_us = uint32_t(v);
    }
    if (cfg.region_bytes == 0) cfg.region_bytes = dsm_default_region_bytes();
    if (!dsm_config_check(cfg, err)) {
        err += " (from ICCS_DSM_BASE / ICCS_DSM_SIZE / ICCS_DSM_PAGE)";
        return false;
    }
    return true;
}

}  // namespace iccs::dsm
