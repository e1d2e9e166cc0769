// shm_ring.hpp: a single-producer single-consumer ring of variable-length records in memory that
// two processes map (mpi/provider/README.md, "The shared region").
//
// The one idea: the ring lives at an offset of a shared mapping (no pointers in it: every process
// maps the region at its own address), and each side keeps its own position privately and
// publishes it with one release store: the producer's `head` after a record is written, the
// consumer's `tail` after it is taken. A record is a frame (8-byte length and kind, then the
// bytes, padded to 8) that never wraps: when it does not fit before the end, a pad frame fills
// the rest and the record starts at the beginning. Nothing blocks: a full ring says so
// (reserve() returns nullptr) and the caller tries later.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

namespace iccs::mpi {

// The shared part of one ring: the two positions, on cache lines of their own (the producer
// writes `head`, the consumer `tail`), then `capacity` bytes of frames.
struct alignas(64) ShmRingCtl {
    alignas(64) std::atomic<uint64_t> head;  // bytes ever written (the producer's)
    alignas(64) std::atomic<uint64_t> tail;  // bytes ever taken (the consumer's)
};
static_assert(sizeof(ShmRingCtl) == 128);

struct ShmFrameHdr {
    uint32_t len;   // bytes of the record (not of the padding)
    uint32_t kind;  // kFrameData or kFramePad
};
inline constexpr uint32_t kFrameData = 1;
inline constexpr uint32_t kFramePad = 2;
inline constexpr uint64_t kFrameHdrLen = sizeof(ShmFrameHdr);

// The bytes a record of len bytes takes in the ring.
constexpr uint64_t shm_frame_bytes(uint64_t len) { return (kFrameHdrLen + len + 7) & ~uint64_t{7}; }
// The largest record a ring of `capacity` bytes always takes when empty: a quarter of it, so a
// record never waits for more than the three before it.
constexpr uint64_t shm_max_record(uint64_t capacity) { return capacity / 4 - kFrameHdrLen; }

// Where a ring sits in a region: its control block at `offset`, the frames right after it.
struct ShmRingDesc {
    uint64_t offset = 0;    // from the start of the region
    uint64_t capacity = 0;  // frame bytes, a power of two
};

// The producer's view (one per ring, in the process that writes it).
class ShmRingProducer {
   public:
    ShmRingProducer() = default;
    ShmRingProducer(uint8_t* region, const ShmRingDesc& d)
        : ctl_(reinterpret_cast<ShmRingCtl*>(region + d.offset)),
          data_(region + d.offset + sizeof(ShmRingCtl)),
          cap_(d.capacity),
          head_(ctl_->head.load(std::memory_order_acquire)),
          tail_seen_(ctl_->tail.load(std::memory_order_acquire)) {}
    bool valid() const { return ctl_ != nullptr; }
    // Room for a record of len bytes: where to write them, or nullptr while the ring is too full.
    // Nothing is visible to the consumer before commit().
    uint8_t* reserve(uint64_t len) {
        const uint64_t need = shm_frame_bytes(len);
        const uint64_t off = head_ & (cap_ - 1);
        const uint64_t pad = cap_ - off < need ? cap_ - off : 0;
        if (cap_ - (head_ - tail_seen_) < pad + need) {
            tail_seen_ = ctl_->tail.load(std::memory_order_acquire);
            if (cap_ - (head_ - tail_seen_) < pad + need) return nullptr;
        }
        uint64_t at = off;
        if (pad != 0) {
            auto* p = reinterpret_cast<ShmFrameHdr*>(data_ + off);
            p->len = 0;
            p->kind = kFramePad;
            at = 0;
        }
        auto* f = reinterpret_cast<ShmFrameHdr*>(data_ + at);
        f->len = static_cast<uint32_t>(len);
        f->kind = kFrameData;
        pending_ = head_ + pad + need;
        return data_ + at + kFrameHdrLen;
    }
    // Publish the record reserve() gave out.
    void commit() {
        head_ = pending_;
        ctl_->head.store(head_, std::memory_order_release);
    }
    // Bytes a record could take now (at most; a record that would wrap needs its padding too).
    uint64_t free_bytes() {
        tail_seen_ = ctl_->tail.load(std::memory_order_acquire);
        return cap_ - (head_ - tail_seen_);
    }
    // Nothing written is still untaken (the consumer caught up).
    bool drained() { return ctl_->tail.load(std::memory_order_acquire) == head_; }
    // The consumer's position as it published it: reads no cached state of this producer, so
    // another thread may call it beside reserve() (a sleeper's look: has the reader taken since?).
    uint64_t consumer_position() const { return ctl_->tail.load(std::memory_order_acquire); }
    uint64_t capacity() const { return cap_; }

   private:
    ShmRingCtl* ctl_ = nullptr;
    uint8_t* data_ = nullptr;
    uint64_t cap_ = 0;
    uint64_t head_ = 0, tail_seen_ = 0, pending_ = 0;
};

// The consumer's view (one per ring, in the process that reads it).
class ShmRingConsumer {
   public:
    ShmRingConsumer() = default;
    ShmRingConsumer(uint8_t* region, const ShmRingDesc& d)
        : ctl_(reinterpret_cast<ShmRingCtl*>(region + d.offset)),
          data_(region + d.offset + sizeof(ShmRingCtl)),
          cap_(d.capacity),
          tail_(ctl_->tail.load(std::memory_order_acquire)),
          head_seen_(ctl_->head.load(std::memory_order_acquire)) {}
    bool valid() const { return ctl_ != nullptr; }
    // The next record (len: its bytes), or nullptr when there is none. It stays until pop().
    const uint8_t* peek(uint32_t& len) {
        while (true) {
            if (tail_ == head_seen_) {
                head_seen_ = ctl_->head.load(std::memory_order_acquire);
                if (tail_ == head_seen_) return nullptr;
            }
            const uint64_t off = tail_ & (cap_ - 1);
            const auto* f = reinterpret_cast<const ShmFrameHdr*>(data_ + off);
            if (f->kind != kFrameData) {  // padding up to the end: the record is at the start
                tail_ += cap_ - off;
                ctl_->tail.store(tail_, std::memory_order_release);
                continue;
            }
            len = f->len;
            cur_ = shm_frame_bytes(f->len);
            return data_ + off + kFrameHdrLen;
        }
    }
    // Take the record peek() returned.
    void pop() {
        tail_ += cur_;
        ctl_->tail.store(tail_, std::memory_order_release);
    }
    // A record may be waiting: the shared positions alone (any thread may ask).
    bool maybe_nonempty() const {
        return ctl_->head.load(std::memory_order_acquire) != ctl_->tail.load(std::memory_order_acquire);
    }
    bool empty() {
        if (tail_ != head_seen_) return false;
        head_seen_ = ctl_->head.load(std::memory_order_acquire);
        return tail_ == head_seen_;
    }

   private:
    ShmRingCtl* ctl_ = nullptr;
    const uint8_t* data_ = nullptr;
    uint64_t cap_ = 0;
    uint64_t tail_ = 0, head_seen_ = 0, cur_ = 0;
};

}  // namespace iccs::mpi
