// parmacs_globals.cpp: the program's ordinary globals at WAIT_FOR_END. Under replay every cluster
// process has its own copy of the program's globals (.data, .bss): identical at CREATE, private
// after. SPLASH programs sometimes let a worker set a global that main prints after WAIT_FOR_END
// (water's XTT), which one process sees and a cluster that did not run that worker does not. At
// WAIT_FOR_END each cluster sends the bytes of the program's globals its threads changed since
// CREATE; every cluster applies every cluster's changes in cluster order, so all epilogues see the
// same globals, as the threads of one process would. Only the program's own variables take part:
// named objects of the executable's symbol table in writable sections whose names are plain C or
// C++ global-namespace identifiers; the runtime's own state (namespace iccs, mangled), copies of
// libc's variables (stdout@GLIBC...) and compiler-reserved names (leading underscore) do not.
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "parmacs_globals.hpp"

namespace iccs::parmacs {

namespace {

// The main program's load bias (PIE): the first object dl_iterate_phdr reports.
uintptr_t main_program_bias() {
    uintptr_t bias = 0;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* out) {
            *static_cast<uintptr_t*>(out) = info->dlpi_addr;
            return 1;  // the first is the executable
        },
        &bias);
    return bias;
}

bool plain_name(const char* n) {
    if (n == nullptr || *n == '\0' || *n == '_') return false;   // reserved, and every mangled C++ name
    if (std::strncmp(n, "iccs_", 5) == 0) return false;          // the PARMACS layer's C names
    return std::strchr(n, '@') == nullptr;                       // a copy of a shared library's variable
}

}  // namespace

bool ProgramGlobals::find(std::string& why) {
    ranges_.clear();
    const int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        why = "cannot open /proc/self/exe";
        return false;
    }
    struct stat st {};
    if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
        close(fd);
        why = "cannot read the executable";
        return false;
    }
    const size_t size = static_cast<size_t>(st.st_size);
    void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        why = "cannot map the executable";
        return false;
    }
    const auto* base = static_cast<const uint8_t*>(map);
    const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(base);
    bool ok = std::memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
              eh->e_shentsize == sizeof(Elf64_Shdr) && eh->e_shoff + uint64_t(eh->e_shnum) * sizeof(Elf64_Shdr) <= size;
    const Elf64_Shdr* sh = ok ? reinterpret_cast<const Elf64_Shdr*>(base + eh->e_shoff) : nullptr;
    const uintptr_t bias = main_program_bias();
    bool have_symtab = false;
    for (unsigned i = 0; ok && i < eh->e_shnum; ++i) {
        if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
        const Elf64_Shdr& strs = sh[sh[i].sh_link];
        if (sh[i].sh_offset + sh[i].sh_size > size || strs.sh_offset + strs.sh_size > size) break;
        have_symtab = true;
        const auto* sym = reinterpret_cast<const Elf64_Sym*>(base + sh[i].sh_offset);
        const size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
        const char* names = reinterpret_cast<const char*>(base + strs.sh_offset);
        for (size_t k = 0; k < n; ++k) {
            const Elf64_Sym& s = sym[k];
            if (ELF64_ST_TYPE(s.st_info) != STT_OBJECT || s.st_size == 0 || s.st_shndx == SHN_UNDEF ||
                s.st_shndx >= eh->e_shnum || s.st_name >= strs.sh_size)
                continue;
            const Elf64_Shdr& sec = sh[s.st_shndx];
            // Writable, in memory, not thread-local (.data, .bss and the like).
            if ((sec.sh_flags & (SHF_WRITE | SHF_ALLOC)) != (SHF_WRITE | SHF_ALLOC) || (sec.sh_flags & SHF_TLS)) continue;
            if (!plain_name(names + s.st_name)) continue;
            ranges_.push_back({bias + s.st_value, s.st_size});
        }
    }
    munmap(map, size);
    if (!ok) {
        why = "the executable is not a 64-bit ELF file";
        return false;
    }
    if (!have_symtab) {
        why = "the executable has no symbol table (stripped)";
        return false;
    }
    // Sorted and merged, so a byte is compared once.
    std::sort(ranges_.begin(), ranges_.end(), [](const Range& a, const Range& b) { return a.addr < b.addr; });
    std::vector<Range> merged;
    for (const Range& r : ranges_) {
        if (!merged.empty() && r.addr <= merged.back().addr + merged.back().len)
            merged.back().len = std::max(merged.back().len, r.addr + r.len - merged.back().addr);
        else
            merged.push_back(r);
    }
    ranges_ = std::move(merged);
    bytes_ = 0;
    for (const Range& r : ranges_) bytes_ += r.len;
    return true;
}

void ProgramGlobals::snapshot() {
    snap_.resize(bytes_);
    size_t at = 0;
    for (const Range& r : ranges_) {
        std::memcpy(snap_.data() + at, reinterpret_cast<const void*>(r.addr), r.len);
        at += r.len;
    }
}

// Runs of changed bytes: u64 address, u32 length, the bytes.
std::vector<uint8_t> ProgramGlobals::changes() const {
    std::vector<uint8_t> out;
    size_t at = 0;
    for (const Range& r : ranges_) {
        const auto* now = reinterpret_cast<const uint8_t*>(r.addr);
        const uint8_t* was = snap_.data() + at;
        for (size_t i = 0; i < r.len;) {
            if (now[i] == was[i]) {
                ++i;
                continue;
            }
            size_t j = i + 1;
            while (j < r.len && now[j] != was[j]) ++j;
            const uint64_t addr = r.addr + i;
            const uint32_t len = static_cast<uint32_t>(j - i);
            const size_t o = out.size();
            out.resize(o + 12 + len);
            std::memcpy(out.data() + o, &addr, 8);
            std::memcpy(out.data() + o + 8, &len, 4);
            std::memcpy(out.data() + o + 12, now + i, len);
            i = j;
        }
        at += r.len;
    }
    return out;
}

bool ProgramGlobals::apply(const std::vector<uint8_t>& runs) const {
    size_t o = 0;
    while (o + 12 <= runs.size()) {
        uint64_t addr;
        uint32_t len;
        std::memcpy(&addr, runs.data() + o, 8);
        std::memcpy(&len, runs.data() + o + 8, 4);
        if (o + 12 + len > runs.size() || !covers(addr, len)) return false;  // never outside the globals
        std::memcpy(reinterpret_cast<void*>(addr), runs.data() + o + 12, len);
        o += 12 + len;
    }
    return o == runs.size();
}

bool ProgramGlobals::covers(uint64_t addr, uint64_t len) const {
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), addr,
                               [](uint64_t a, const Range& r) { return a < r.addr; });
    if (it == ranges_.begin()) return false;
    --it;
    return addr >= it->addr && addr + len <= it->addr + it->len && addr + len >= addr;
}

}  // namespace iccs::parmacs
