// magpie.hpp: the inside of libiccs-magpie.so, MagPIe's wide-area collectives for unmodified MPI
// programs (Kielmann et al., PPoPP 1999), through the MPI profiling interface.
//
// The library defines MPI_Barrier, MPI_Bcast, ... (profile.cpp) in front of the MPI library and
// implements them on the program's own point-to-point PMPI_ calls, so it works over any MPI
// transport. Every rank is in a cluster (ranks that share memory) and every cluster in a site
// (sites.hpp); the collectives keep MagPIe's two rules:
//   1. every sender-receiver path holds at most one wide-area (inter-site) link, and
//   2. every data item crosses into each receiving site at most once,
// with the ranks of a cluster meeting through the MPI library's shared memory, the clusters of a
// site through their leaders (the lowest rank, or the root), and the sites through one
// coordinator each; a long wide-area transfer into a site is cut into pieces sent in parallel to
// several of its cluster leaders ("several coordinators"), which pass them on inside the site.
//
// Layers: Comm (per communicator: where its ranks are, a private duplicate that carries every
// message of ours, a call counter) -> Call (one collective on one rank: tagged PMPI messages,
// their checks, time-out, counters) -> the algorithms (coll_*.cpp) -> profile.cpp (the MPI_
// entry points: argument checks, pass-throughs, errors).
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sites.hpp"

namespace iccs::magpie {

enum class Coll : uint8_t {
    kBarrier, kBcast, kReduce, kAllreduce, kGather, kGatherv, kScatter, kScatterv, kAllgather, kAllgatherv,
    kAlltoall, kAlltoallv, kReduceScatter, kReduceScatterBlock, kScan, kExscan,
    kCount
};
inline constexpr size_t kColls = static_cast<size_t>(Coll::kCount);
const char* to_string(Coll c);      // "barrier", "bcast", ..., "reduce_scatter_block", "exscan"
const char* mpi_name(Coll c);       // "MPI_Barrier", ...

// Why a call went to PMPI_ unchanged (each is counted).
enum class Pass : uint8_t {
    kIntercomm,     // an inter-communicator
    kArguments,     // arguments MPI refuses (MPI's own checks then give MPI's own error)
    kOutsideWorld,  // a communicator with processes outside this MPI_COMM_WORLD (spawn, connect)
    kUnplaced,      // no placement of the ranks (MPI_Init not seen by the library)
    kTooLarge,      // a message of more than INT_MAX bytes
    kDisabled,      // ICCS_MAGPIE=off
    kCount
};
inline constexpr size_t kPasses = static_cast<size_t>(Pass::kCount);
const char* to_string(Pass p);

// Counters of one collective on one rank (relaxed atomics: threads may call collectives on
// different communicators at once).
struct CollCounters {
    std::atomic<uint64_t> calls{0};        // calls done by the library
    std::atomic<uint64_t> passthrough{0};  // calls handed to PMPI_
    std::atomic<uint64_t> bytes{0};        // the calls' data on this rank (what it contributes or, for bcast and scatter, receives)
    std::atomic<uint64_t> msgs{0}, sent_bytes{0};       // point-to-point messages this rank sent, and their bytes
    std::atomic<uint64_t> shm_msgs{0}, shm_bytes{0};    // of those, to a rank of its own cluster
    std::atomic<uint64_t> wan_msgs{0}, wan_bytes{0};    // of those, to another site (wan_bytes: data only)
    std::atomic<uint64_t> wan_bytes_min{0};  // each data item once to each site that needs it (MagPIe's rule 2)
    std::atomic<uint64_t> wan_hops_max{0};   // most wide-area links behind any message sent (rule 1: <= 1; allreduce, reduce by blocks: 2)
};

struct Counters {
    std::array<CollCounters, kColls> coll;
    std::array<std::atomic<uint64_t>, kPasses> pass{};
    CollCounters& of(Coll c) { return coll[static_cast<size_t>(c)]; }
};
Counters& counters();

// Settings from the environment, read once at MPI_Init (README.md "Settings").
struct Settings {
    bool enabled = true;                 // ICCS_MAGPIE=off: every call passes through
    uint64_t timeout_ms = 0;             // ICCS_MAGPIE_TIMEOUT_MS: a call waiting longer fails; 0 = never
    uint32_t segment_bytes = 16 << 10;   // ICCS_MAGPIE_SEGMENT_BYTES: wide-area pieces are at least this long
    // ICCS_MAGPIE_BLOCKS_BYTES: an allreduce or reduce of at least this many bytes over 3 or more
    // sites goes by blocks (a reduce-scatter between the sites, then an allgather or a gather);
    // 0 = never. The default is the measured switch point (README.md "Allreduce by blocks").
    uint64_t blocks_bytes = 16 << 10;
    uint64_t block_chunks = 2;  // ICCS_MAGPIE_BLOCK_CHUNKS: a block crosses in at most this many chunks
    std::string counters_file;           // ICCS_MAGPIE_COUNTERS_FILE: each rank writes FILE.r<rank> (JSON)
    std::string report;                  // ICCS_MAGPIE_REPORT: "-" = a table on stderr, else a JSON file
};
const Settings& settings();

// The world as placed at MPI_Init; empty before (or when no placement was possible).
const std::vector<Place>& world_places();
int world_rank();

// One communicator as the library sees it: its ranks grouped by cluster and site (indices are
// dense and ordered by lowest rank), and `priv`, a duplicate only the library sends on.
struct Comm {
    MPI_Comm user = MPI_COMM_NULL, priv = MPI_COMM_NULL;
    MPI_Request dup_req = MPI_REQUEST_NULL;  // priv is being made (the first collective waits)
    bool passes = false;  // every call on it goes to PMPI_, for this reason
    Pass pass_reason = Pass::kArguments;
    int n = 0, me = 0;
    std::vector<uint32_t> site_of, cluster_of;       // by rank
    std::vector<uint32_t> cluster_site;              // by cluster
    std::vector<std::vector<int>> cluster_ranks;     // by cluster, ascending
    std::vector<std::vector<uint32_t>> site_clusters;  // by site, by lowest rank
    std::vector<std::vector<int>> site_ranks;        // by site, ascending
    std::vector<uint32_t> site_id;                   // by site: the placement's site id (links)
    uint32_t seq = 0;                                // collectives called on it so far
    int error = MPI_SUCCESS;                         // sticky: a failed call leaves it unusable
    std::string error_text;

    uint32_t sites() const { return static_cast<uint32_t>(site_clusters.size()); }
    uint32_t my_site() const { return site_of[me]; }
    uint32_t my_cluster() const { return cluster_of[me]; }
    // The leader of a cluster: the root when it is there, else its lowest rank.
    int leader(uint32_t cluster, int root = -1) const;
    // The coordinator of a site: the root when it is there, else its first cluster's leader.
    int coord(uint32_t site, int root = -1) const;
    // A site's clusters with the root's (if there) first: piece j of a transfer goes to the
    // leader of clusters_for(site, root)[j].
    std::vector<uint32_t> clusters_for(uint32_t site, int root) const;
};

// The library's view of `c`, built on its first collective (which is collective: it duplicates
// the communicator); null with `why` when the calls on it pass through.
Comm* comm_of(MPI_Comm c, Pass& why);
void free_comms();  // at MPI_Finalize

// A datatype's layout, for typed scratch buffers and byte views.
struct TypeInfo {
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_Aint extent = 0, true_lb = 0, true_extent = 0;
    int size = 0;           // bytes of data in one element
    bool contiguous = false;  // count elements are size * count bytes from buf + true_lb
};
TypeInfo type_info(MPI_Datatype t);

// A buffer laid out as `count` elements of a datatype (holes included), owned.
class TypedBuf {
public:
    TypedBuf() = default;
    TypedBuf(const TypeInfo& t, size_t count);
    char* base() { return base_; }  // the address MPI calls take (may lie before the storage)
    char* at(size_t element) { return base_ + static_cast<MPI_Aint>(element) * extent_; }
    bool empty() const { return store_.empty(); }
private:
    std::vector<char> store_;
    char* base_ = nullptr;
    MPI_Aint extent_ = 0;
};

// Local copies between typed buffers (pack/unpack: any layout) and to/from packed bytes.
int copy_typed(const void* src, void* dst, int count, const TypeInfo& t);
int pack(const void* buf, int count, const TypeInfo& t, char* out);       // size * count bytes
int unpack(const char* in, void* buf, int count, const TypeInfo& t);

// A message's tag: which call (a signature of the communicator's call number and the root),
// which collective, and how many wide-area links the data in it has crossed.
struct TagCodec {
    uint32_t sig_mask = 0xff;  // from MPI_TAG_UB
    int make(uint32_t sig, Coll c, uint32_t hops) const {
        return static_cast<int>(((sig & sig_mask) << 7) | (static_cast<uint32_t>(c) << 2) | (hops & 3));
    }
    static Coll coll(int tag) { return static_cast<Coll>((static_cast<uint32_t>(tag) >> 2) & 31); }
    static uint32_t hops(int tag) { return static_cast<uint32_t>(tag) & 3; }
    uint32_t sig(int tag) const { return (static_cast<uint32_t>(tag) >> 7) & sig_mask; }
};
const TagCodec& tags();

// One collective call on one rank. Sends and receives are nonblocking and posted at once; wait()
// completes them. Every receive names its source and takes any tag, so a message of another call
// (another collective, root or order) is caught the moment it arrives instead of hanging; its
// length is checked against what this rank expects (counts that differ between ranks).
// After the first error every operation is a no-op and error() says what happened.
class Call {
public:
    Call(Comm& comm, Coll coll, int root);
    ~Call();  // adds this call's counters
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

    // The communicator's private duplicate is there (the first call on it waits, time-out).
    bool ready();

    Comm& comm() { return comm_; }
    Coll coll() const { return coll_; }
    int root() const { return root_; }
    bool ok() const { return err_ == MPI_SUCCESS; }
    int error() const { return err_; }
    const std::string& error_text() const { return err_text_; }

    // Posts a send of `count` elements; `data_bytes` of it are data items (the rest headers).
    void send(const void* buf, int count, MPI_Datatype t, int dest, int64_t data_bytes = -1);
    void send_bytes(const void* buf, size_t n, int dest, int64_t data_bytes = -1) {
        send(buf, static_cast<int>(n), MPI_BYTE, dest, data_bytes);
    }
    // Posts a receive of exactly `count` elements; returns its handle for wait(h).
    int recv(void* buf, int count, MPI_Datatype t, int src);
    int recv_bytes(void* buf, size_t n, int src) { return recv(buf, static_cast<int>(n), MPI_BYTE, src); }
    // Receives a message of a length this rank does not know (blocking, with the time-out).
    bool recv_any_length(std::vector<char>& out, int src);

    bool wait(int handle);  // that receive (and any other that completes meanwhile)
    bool wait_all();        // everything posted

    // The most wide-area links behind any data this rank received in this call so far.
    uint32_t hops_in() const { return hops_in_; }
    void add_wan_min(uint64_t bytes) { wan_min_ += bytes; }
    void add_bytes(uint64_t bytes) { bytes_ += bytes; }
    bool fail(int mpi_err, std::string text);  // records the first error; false
    int raise(int mpi_err, std::string text) {  // the same, returning the call's error code
        fail(mpi_err, std::move(text));
        return err_;
    }

private:
    struct Pending {
        MPI_Request req = MPI_REQUEST_NULL;
        int src = -1;           // receives: the source; sends: -1
        int count = 0;
        MPI_Datatype type = MPI_DATATYPE_NULL;
        bool done = false;
    };
    bool finish(size_t i, const MPI_Status& st);
    bool wait_for(const std::vector<size_t>& which);
    std::string who_is_late(const std::vector<size_t>& which) const;

    Comm& comm_;
    Coll coll_;
    int root_;
    uint32_t sig_;
    uint32_t hops_in_ = 0;
    std::vector<Pending> pending_;
    int err_ = MPI_SUCCESS;
    std::string err_text_;
    uint64_t msgs_ = 0, sent_bytes_ = 0, shm_msgs_ = 0, shm_bytes_ = 0, wan_msgs_ = 0, wan_bytes_ = 0, wan_min_ = 0,
             bytes_ = 0, hops_max_ = 0;
};

// A wide-area transfer of `len` bytes (or elements) into site `site` is cut into this many
// pieces, one per cluster leader of that site at most (MagPIe's segmentation).
uint32_t pieces_for(const Comm& c, uint32_t site, uint64_t len_bytes, uint64_t elements);
// Piece j of n over `total` units: [first, first + count).
void piece_range(uint64_t total, uint32_t n, uint32_t j, uint64_t& first, uint64_t& count);

// Within this rank's cluster: `buf` from `leader` to every rank of the cluster down a binomial
// tree (posts and waits).
bool cluster_bcast(Call& call, void* buf, int count, MPI_Datatype t, int leader);

// Inside this rank's site: piece j of n of `total` units (elements of t, `unit` bytes apart: an
// extent, or 1 for bytes) is at the leader of clusters[j] (the root's cluster: the root); after it,
// every rank of the site has all of buf. Sites of at most kFanOutRanks ranks: each holder sends its
// piece straight to every other rank (one hop); larger ones: the holders swap pieces among the
// leaders, then each leader passes the whole down its cluster (two). A holder calls it with its
// piece in place.
inline constexpr size_t kFanOutRanks = 8;
bool spread_in_site(Call& call, char* buf, uint64_t total, uint32_t n, const std::vector<uint32_t>& clusters,
                    MPI_Datatype t, MPI_Aint unit, int root);

// Allreduce and reduce by blocks (reduce.cpp): taken when the vector of `bytes` is at least
// ICCS_MAGPIE_BLOCKS_BYTES and the communicator spans 3 or more sites (over 2 sites it moves as
// many bytes over each link as the whole-partials path, with one more wide-area latency). The
// vector is cut into `lanes` (one per cluster leader, as many in every site: the fewest any site
// gets by pieces_for) and each lane into one block per site; block (lane, site) is reduced at that
// site's leader of the lane and then sent to every other site's leader of the lane (reduce: to
// the root's site's).
bool by_blocks(const Comm& c, uint64_t bytes);
uint32_t block_lanes(const Comm& c, uint64_t bytes, uint64_t count);
// The elements [first, first + count) of block (lane, site) of a vector of `total` elements.
void block_range(uint64_t total, uint32_t lanes, uint32_t sites, uint32_t lane, uint32_t site, uint64_t& first,
                 uint64_t& count);
// A block of `block_n` elements crosses in this many chunks, so that the allgather of its first
// chunks overlaps the reduce-scatter of its last: ICCS_MAGPIE_BLOCK_CHUNKS at most, each at
// least ICCS_MAGPIE_SEGMENT_BYTES / 16 bytes (1 KiB by default) and one element.
uint32_t chunks_of_block(uint64_t block_n, int elem_size);

// Runs of `ranks` (ascending) as [first, last]: each a row of consecutive ranks of the
// communicator, or, when `split` is false, all of them in one (MPI lets a commutative
// reduction combine in any order).
std::vector<std::pair<int, int>> runs_of(const std::vector<int>& ranks, bool split);

// The least wide-area data a collective can move under MagPIe's rule 2 (each data item once to
// each site that needs it), from the topology and the counts alone (wan_min.cpp).
uint64_t wan_min_bcast(const Comm& c, int root, uint64_t bytes);
uint64_t wan_min_reduce(const Comm& c, int root, uint64_t count, int elem_size, bool split);
uint64_t wan_min_allreduce(const Comm& c, uint64_t count, int elem_size, bool split);
uint64_t wan_min_reduce_scatter(const Comm& c, const int* counts, int elem_size, bool split);
uint64_t wan_min_scan(const Comm& c, uint64_t bytes);

// Binomial tree over `ranks` (ranks[0] the root): this rank's parent (-1 at the root) and
// children, in the order to send to them (largest subtree first).
void binomial_tree(const std::vector<int>& ranks, int me, int& parent, std::vector<int>& children);

// A reduction's operation on a datatype: PMPI_Reduce_local with MPI's argument order.
struct Reduction {
    MPI_Op op = MPI_OP_NULL;
    TypeInfo t;
    int count = 0;
    bool commutative = true;
    // inout = in (op) inout for n elements, where `in` holds the ranks before `inout`'s.
    int apply(const void* in, void* inout, int n) const;
    MPI_Aint offset(uint64_t element) const { return static_cast<MPI_Aint>(element) * t.extent; }
};

// At a cluster's leader: every rank's input of a reduction (its own copied), in rank order.
bool cluster_inputs(Call& call, const void* in, const Reduction& red, std::vector<TypedBuf>& xs);

// The algorithms (bcast.cpp, reduce.cpp, scan.cpp, gather.cpp, allgather.cpp, alltoall.cpp). Arguments are MPI's, already checked by profile.cpp; each returns
// an MPI error code (MPI_SUCCESS) and leaves the details in call.error_text().
int barrier(Call& call);
int bcast(Call& call, void* buf, int count, const TypeInfo& t);
int reduce(Call& call, const void* in, void* out, const Reduction& red);
int allreduce(Call& call, const void* in, void* out, const Reduction& red);
int reduce_scatter(Call& call, const void* in, void* out, const int* counts, const Reduction& red);
int scan(Call& call, const void* in, void* out, const Reduction& red, bool exclusive);
// Blocks of every rank: counts and displacements in elements of `t`; null counts = `count` each.
struct Blocks {
    const int* counts = nullptr;
    const int* displs = nullptr;
    int count = 0;  // when counts is null
    TypeInfo t;
    int count_of(int r) const { return counts ? counts[r] : count; }
    MPI_Aint offset_of(int r) const {  // in bytes from the buffer
        return (displs ? static_cast<MPI_Aint>(displs[r]) : static_cast<MPI_Aint>(r) * count) * t.extent;
    }
    uint64_t bytes_of(int r) const { return uint64_t(count_of(r)) * uint64_t(t.size); }
};
int gather(Call& call, const void* sbuf, int scount, const TypeInfo& st, void* rbuf, const Blocks& rb);
int scatter(Call& call, const void* sbuf, const Blocks& sb, void* rbuf, int rcount, const TypeInfo& rt);
int allgather(Call& call, const void* sbuf, int scount, const TypeInfo& st, void* rbuf, const Blocks& rb);
int alltoall(Call& call, const void* sbuf, const Blocks& sb, void* rbuf, const Blocks& rb);

}  // namespace iccs::magpie
