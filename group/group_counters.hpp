// group_counters.hpp: what a group World counts (group.hpp), per collective and per WAN link (site
// pair), summed over threads and flattened to words to be gathered across clusters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "group_setup.hpp"

namespace iccs::group {

struct CollCounters {
    uint64_t calls = 0;
    uint64_t msgs = 0, bytes = 0;              // messages (segments) sent and their payload bytes
    uint64_t wan_msgs = 0, wan_bytes = 0;      // of those, crossing sites; wan_bytes: data items only
    // each item once to each receiving site (summed over calls): MagPIe's count, which the
    // hierarchical family meets exactly; no floor for every algorithm (README.md, "Counters and MagPIe's rule")
    uint64_t wan_bytes_min = 0;
    uint64_t wan_hops_max = 0;                 // most WAN links behind any message sent (MagPIe: <= 1)
    uint64_t shm_copies = 0, shm_bytes = 0;    // cluster-local data moved through shared memory
    uint64_t relayed = 0;  // WAN segments a leader passed on to its site's coordinator (spreading)
    // Hierarchical family: data items a site's coordinator received over the WAN (a block of one
    // rank for another, or for all; a broadcast's buffer; a site's or cluster's partial), and the
    // most times one item of one call came into one site (MagPIe: 1). The flat family's messages
    // carry no item identities (its repeats show as wan_bytes > wan_bytes_min, where it repeats).
    uint64_t items_crossed = 0, item_crossings_max = 0;
};
struct LinkCounters {
    uint64_t msgs = 0, bytes = 0;  // messages and data-item bytes over this site pair (from -> to)
    uint64_t items = 0;            // hierarchical: data items that crossed it (counted on arrival)
};
struct Counters {
    CollCounters coll[static_cast<size_t>(Coll::kCount)];
    std::vector<LinkCounters> link;  // [from * sites + to], site indices
    uint16_t sites = 0;
    void add(const Counters& o);
    CollCounters& of(Coll c) { return coll[static_cast<size_t>(c)]; }
    const CollCounters& of(Coll c) const { return coll[static_cast<size_t>(c)]; }
    // Flat 8-byte words (for gathering counters across clusters) and back.
    std::vector<uint64_t> to_words() const;
    bool from_words(std::span<const uint64_t> w, uint16_t sites);
};

}  // namespace iccs::group
