// EntryPool: the TimingWheel's entry storage — a growable array of fixed
// 24-byte entries addressed by uint32 index, with a free list and a per-entry
// generation so that handles to freed entries are recognised as stale.
// Owned by one TimingWheel; not thread-safe.
//
// Storage is a list of 6 MiB chunks (2^18 entries) rather than one
// std::vector: growth never copies (no latency spike under the scheduler's
// lock at millions of entries), the slack is at most one chunk, and chunks
// are 2 MiB-aligned and advised for transparent huge pages, which removes
// most TLB misses from the random accesses that insert and cancel make.
// Capacity is a high-water mark: chunks are freed only with the pool.
//
// Invariants:
//  - an entry is in use iff its generation is odd; Allocate and Free each
//    add one to it, so (index, generation) names one use of an entry.
//  - free entries form a singly linked list through `pos`.

#ifndef DELAYD_SERVER_TIMER_ENTRY_POOL_H_
#define DELAYD_SERVER_TIMER_ENTRY_POOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace delayd::timer {

// The fields cancel reads (due_ms, pos, generation) come first: in the 1/4 of
// 24-byte entries that straddle two cache lines, they share one line in half.
struct WheelEntry {
  int64_t due_ms;
  uint32_t pos;         // in use: index in its slot's array; free: next free
  uint32_t generation;  // odd: in use
  uint64_t tag;
};
static_assert(sizeof(WheelEntry) == 24);

class EntryPool {
 public:
  EntryPool() = default;
  EntryPool(const EntryPool&) = delete;
  EntryPool& operator=(const EntryPool&) = delete;

  WheelEntry& operator[](uint32_t i) {
    return chunks_[i >> kChunkBits].get()[i & kChunkMask];
  }
  const WheelEntry& operator[](uint32_t i) const {
    return chunks_[i >> kChunkBits].get()[i & kChunkMask];
  }

  // Hints the CPU to fetch entry `i`. REQUIRES: i was allocated before.
  void Prefetch(uint32_t i) const { __builtin_prefetch(&(*this)[i]); }

  // Returns the index of a fresh in-use entry; fields other than generation
  // are unspecified. Crashes beyond 2^32 - 1 entries. Inline: on the path
  // of every insert.
  uint32_t Allocate() {
    if (free_head_ == kNone) return AllocateNew();
    const uint32_t i = free_head_;
    WheelEntry& e = (*this)[i];
    free_head_ = e.pos;
    --free_count_;
    ++e.generation;  // even -> odd: in use
    return i;
  }

  // REQUIRES: `i` is in use.
  void Free(uint32_t i) {
    WheelEntry& e = (*this)[i];
    ++e.generation;  // odd -> even: free; outstanding handles become stale
    e.pos = free_head_;
    free_head_ = i;
    ++free_count_;
  }

  // True iff `i` was handed out and is in use with `generation`.
  bool IsLive(uint32_t i, uint32_t generation) const {
    return i < high_water_ && (generation & 1) != 0 &&
           (*this)[i].generation == generation;
  }

  // Makes room for `n` more entries in use without further allocation.
  void Reserve(size_t n);

  // Bytes held: chunks, plus the chunk table.
  size_t MemoryBytes() const;

 private:
  static constexpr uint32_t kChunkBits = 18;
  static constexpr uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr uint32_t kChunkMask = kChunkSize - 1;
  static constexpr uint32_t kNone = 0xFFFFFFFFu;

  struct FreeDeleter {
    void operator()(WheelEntry* p) const;
  };
  using Chunk = std::unique_ptr<WheelEntry[], FreeDeleter>;

  void AddChunk();
  // Allocate() when the free list is empty: the next never-used entry.
  uint32_t AllocateNew();

  std::vector<Chunk> chunks_;
  uint32_t high_water_ = 0;  // entries [0, high_water_) have been handed out
  uint32_t free_head_ = kNone;
  size_t free_count_ = 0;
};

}  // namespace delayd::timer

#endif  // DELAYD_SERVER_TIMER_ENTRY_POOL_H_
