// group_counters.cpp: what group_counters.hpp declares: counters summed, and flattened to words and back.
#include "group_counters.hpp"

#include <algorithm>

namespace iccs::group {

void Counters::add(const Counters& o) {
    for (size_t i = 0; i < std::size(coll); ++i) {
        CollCounters& a = coll[i];
        const CollCounters& b = o.coll[i];
        a.calls += b.calls;
        a.msgs += b.msgs;
        a.bytes += b.bytes;
        a.wan_msgs += b.wan_msgs;
        a.wan_bytes += b.wan_bytes;
        a.wan_bytes_min += b.wan_bytes_min;
        a.wan_hops_max = std::max(a.wan_hops_max, b.wan_hops_max);
        a.shm_copies += b.shm_copies;
        a.shm_bytes += b.shm_bytes;
        a.relayed += b.relayed;
        a.items_crossed += b.items_crossed;
        a.item_crossings_max = std::max(a.item_crossings_max, b.item_crossings_max);
    }
    if (link.size() < o.link.size()) link.resize(o.link.size());
    sites = std::max(sites, o.sites);
    for (size_t i = 0; i < o.link.size(); ++i) {
        link[i].msgs += o.link[i].msgs;
        link[i].bytes += o.link[i].bytes;
        link[i].items += o.link[i].items;
    }
}

std::vector<uint64_t> Counters::to_words() const {
    std::vector<uint64_t> w;
    for (const CollCounters& c : coll)
        w.insert(w.end(), {c.calls, c.msgs, c.bytes, c.wan_msgs, c.wan_bytes, c.wan_bytes_min, c.wan_hops_max,
                           c.shm_copies, c.shm_bytes, c.relayed, c.items_crossed, c.item_crossings_max});
    for (const LinkCounters& l : link) w.insert(w.end(), {l.msgs, l.bytes, l.items});
    return w;
}

bool Counters::from_words(std::span<const uint64_t> w, uint16_t s) {
    const size_t n = std::size(coll) * 12 + size_t{s} * s * 3;
    if (w.size() != n) return false;
    size_t i = 0;
    for (CollCounters& c : coll) {
        uint64_t* f[] = {&c.calls, &c.msgs, &c.bytes, &c.wan_msgs, &c.wan_bytes, &c.wan_bytes_min, &c.wan_hops_max,
                         &c.shm_copies, &c.shm_bytes, &c.relayed, &c.items_crossed, &c.item_crossings_max};
        for (uint64_t* p : f) *p = w[i++];
    }
    sites = s;
    link.assign(size_t{s} * s, {});
    for (LinkCounters& l : link) {
        l.msgs = w[i++];
        l.bytes = w[i++];
        l.items = w[i++];
    }
    return true;
}

}  // namespace iccs::group
