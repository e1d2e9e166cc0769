// parmacs_globals.hpp: the program's own globals (.data, .bss of the executable), found in its
// symbol table, snapshotted at CREATE and compared at WAIT_FOR_END, so that what the threads of
// every cluster wrote to them reaches every cluster's epilogue (parmacs.cpp; dsm/README.md,
// "Globals at WAIT_FOR_END").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace iccs::parmacs {

class ProgramGlobals {
public:
    // Reads /proc/self/exe's symbol table: the program's named variables in writable sections.
    // false with `why` when there is none to read (a stripped executable).
    bool find(std::string& why);
    size_t bytes() const { return bytes_; }
    // The current values, to compare with later.
    void snapshot();
    // The bytes that differ from the snapshot, as runs (address, length, bytes).
    std::vector<uint8_t> changes() const;
    // Writes runs (from any cluster: the same addresses, no ASLR); false, writing nothing more,
    // at a run that is malformed or outside the globals.
    bool apply(const std::vector<uint8_t>& runs) const;

private:
    struct Range {
        uint64_t addr, len;
    };
    bool covers(uint64_t addr, uint64_t len) const;
    std::vector<Range> ranges_;
    std::vector<uint8_t> snap_;
    size_t bytes_ = 0;
};

}  // namespace iccs::parmacs
