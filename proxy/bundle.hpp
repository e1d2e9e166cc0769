// bundle.hpp: message combining's wire work (issue 21), pure logic on PktBufs (no DPDK, no
// proxy state), so it is tested on heap pools.
//
// Sending: small messages for one remote cluster that meet in one ring burst become one BUNDLE
// message (stack/conv_hdr.hpp: an outer ConvHdr, then records of a be16 length and one whole
// message). The first message's own buffer becomes the bundle: the outer header and its record
// length go into its headroom, the others are copied behind it into its tailroom and freed.
//
// Receiving: each record becomes a message of its own, copied into a fresh buffer of the proxy's
// pool. Not a view into the bundle: a message goes to a compute thread, and a view would share
// the bundle's buffer (its reference count, which is not atomic: stack/pktbuf.hpp) between that
// thread and the proxy, which still holds the bundle. The unpacking progress lives in the
// bundle's own header (conn_seq), so a delivery refused half-way (a full ring) goes on from the
// record it stopped at when slidwin offers the bundle again.
#pragma once

#include <cstdint>

#include "pktbuf.hpp"

namespace iccs {

struct OpenBundle {
    PktBuf* b = nullptr;  // the first message, then (2+ messages) the bundle built in its buffer
    uint32_t n = 0;       // messages in it
};

// Add m to o, or open o with m. limit: the largest bundle in bytes (one datagram within the MTU);
// below: headroom the layers under the bundle need in front of it. false: m cannot join (the
// caller sends o first, then tries m again, which opens a new one, or sends m alone); m is then
// untouched. On true m belongs to the bundle (freed once copied in).
bool bundle_add(OpenBundle& o, PktBuf* m, uint32_t limit, uint32_t below);

// True when msg (its header in the first segment) is a BUNDLE.
bool is_bundle(const PktBuf* msg);

// The offset of the record to unpack next; first is set on the first call for this bundle.
uint32_t bundle_resume(const PktBuf* b, bool& first);
// Keep off as the place to go on from (a delivery was refused there).
void bundle_keep(PktBuf* b, uint32_t off);

enum class BundleStep {
    kMsg,    // out: the record at off as a message of its own; next: the following record's offset
    kDone,   // no records left
    kBad,    // a malformed record (shorter than a header, past the end, a nested bundle): stop here
    kNoBuf,  // the pool had no buffer for it: try again later from the same off
};
BundleStep bundle_take(PktPool& pool, const PktBuf* b, uint32_t off, PktBuf*& out, uint32_t& next);

}  // namespace iccs
