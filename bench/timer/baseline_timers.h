// The timers people write by hand, as baselines for timer_bench, behind the
// same small interface as WheelTimer (an adaptor over TimingWheel):
//   Handle Insert(int64_t due_ms, uint64_t tag);
//   bool Cancel(Handle);          // true iff the timer was pending
//   std::vector<TimerEntry> Advance(int64_t now_ms);   // due entries, in order
//   void Idle();               // what a timer thread does with spare time
//   size_t MemoryBytes() const;                        // own accounting
// Single-threaded, like the wheel.
//
// Equal work. Every timer hands out a handle at insert and cancels through
// it; every one reclaims a canceled entry's memory within bounded time, so
// that a timer holding N pending entries under endless insert+cancel churn
// stays O(N) in memory (the state a long-running server is in). The wheel
// and the multimap free at once. The lazy heaps free a canceled entry when it
// reaches the top, and — like Go's runtime timers, which clean up once a
// quarter of the heap is deleted — compact (drop the dead, make_heap) when
// the dead entries are as many as the live ones: the cheapest amortized
// choice (2 entries rebuilt per cancel) that keeps the heap within 2x.
// Reclaiming is part of each Cancel's cost and timer_bench charges it.

#ifndef DELAYD_BENCH_TIMER_BASELINE_TIMERS_H_
#define DELAYD_BENCH_TIMER_BASELINE_TIMERS_H_

#include <time.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <queue>
#include <unordered_set>
#include <utility>
#include <vector>

#include "server/timer/timing_wheel.h"

namespace delayd::timer::bench {

// glibc malloc: 8 bytes of header, 16-byte granularity, 32-byte minimum.
constexpr size_t MallocBytes(size_t n) {
  const size_t with_header = n + 8;
  const size_t rounded = (with_header + 15) / 16 * 16;
  return rounded < 32 ? 32 : rounded;
}

inline double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) +
         1e-9 * static_cast<double>(ts.tv_nsec);
}

// TimingWheel driven like Scheduler drives it: when idle, it opens the next
// second ahead. With kOpenAhead = false it never does (Advance opens slots
// as it enters their seconds), to show what opening ahead buys.
template <bool kOpenAhead>
class BasicWheelTimer {
 public:
  using Handle = TimerHandle;
  explicit BasicWheelTimer(int64_t now_ms) : wheel_(now_ms) {}
  Handle Insert(int64_t due_ms, uint64_t tag) {
    return wheel_.Insert(due_ms, tag);
  }
  bool Cancel(Handle h) { return wheel_.Cancel(h); }
  std::vector<TimerEntry> Advance(int64_t now_ms) {
    return wheel_.Advance(now_ms);
  }
  void Idle() {
    if (kOpenAhead) wheel_.OpenNextSecond();
  }
  size_t MemoryBytes() const { return wheel_.MemoryBytes(); }
  size_t size() const { return wheel_.size(); }

 private:
  TimingWheel wheel_;
};

using WheelTimer = BasicWheelTimer<true>;
using WheelNoAheadTimer = BasicWheelTimer<false>;

// Records addressed by 32-bit index with a free list and a generation per
// record (odd: in use), so that (index, generation) is a handle that a stale
// cancel cannot misapply — the bookkeeping every cancel-by-handle timer needs.
template <typename Record>
class Slab {
 public:
  uint32_t Allocate() {
    uint32_t i;
    if (free_head_ != kNone) {
      i = free_head_;
      free_head_ = records_[i].next_free;
    } else {
      i = static_cast<uint32_t>(records_.size());
      records_.emplace_back();
    }
    ++records_[i].generation;  // even -> odd
    return i;
  }
  void Free(uint32_t i) {
    ++records_[i].generation;  // odd -> even: handles to it are stale
    records_[i].next_free = free_head_;
    free_head_ = i;
  }
  bool IsLive(uint32_t i, uint32_t generation) const {
    return i < records_.size() && (generation & 1) != 0 &&
           records_[i].generation == generation;
  }
  Record& operator[](uint32_t i) { return records_[i]; }
  const Record& operator[](uint32_t i) const { return records_[i]; }
  size_t MemoryBytes() const { return records_.capacity() * sizeof(Record); }

 private:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;
  std::vector<Record> records_;
  uint32_t free_head_ = kNone;
};

constexpr uint64_t PackHandle(uint32_t index, uint32_t generation) {
  return uint64_t{generation} << 32 | index;
}

// The lower bound for insert+cancel by handle: a slab with no order at all
// (insert = take a free record and fill it; cancel = check the generation and
// free it). It cannot advance; timer_bench runs it only in InsertCancel, to
// show what any structure must pay before it orders anything.
class UnorderedSlab {
 public:
  using Handle = uint64_t;
  explicit UnorderedSlab(int64_t /*now_ms*/) {}
  Handle Insert(int64_t due_ms, uint64_t tag) {
    const uint32_t i = slab_.Allocate();
    slab_[i].due_ms = due_ms;
    slab_[i].tag = tag;
    return PackHandle(i, slab_[i].generation);
  }
  bool Cancel(Handle h) {
    const auto i = static_cast<uint32_t>(h);
    if (!slab_.IsLive(i, static_cast<uint32_t>(h >> 32))) return false;
    slab_.Free(i);
    return true;
  }
  size_t MemoryBytes() const { return slab_.MemoryBytes(); }

 private:
  struct Record {
    int64_t due_ms;
    uint64_t tag;
    uint32_t generation = 0;
    uint32_t next_free;
  };
  Slab<Record> slab_;
};

// A std::priority_queue (min-heap) with lazy deletion; `Policy` decides what
// a handle is and how a heap item is known to be dead. Cancel only marks the
// timer dead; the dead item is dropped when it reaches the top, or by a
// compaction once dead items are as many as live ones (see the file comment).
template <typename Policy>
class LazyHeapTimer {
 public:
  using Handle = typename Policy::Handle;
  using Item = typename Policy::Item;
  explicit LazyHeapTimer(int64_t /*now_ms*/) {}
  Handle Insert(int64_t due_ms, uint64_t tag) {
    Item item;
    const Handle h = policy_.Make(due_ms, tag, &item);
    heap_.push(item);
    return h;
  }
  bool Cancel(Handle h) {
    if (!policy_.Kill(h)) return false;
    ++dead_;
    if (dead_ >= kMinCompaction && dead_ >= heap_.size() - dead_) Compact();
    return true;
  }
  void Idle() {}
  std::vector<TimerEntry> Advance(int64_t now_ms) {
    std::vector<TimerEntry> out;
    while (!heap_.empty() && heap_.top().due_ms <= now_ms) {
      const Item item = heap_.top();
      heap_.pop();
      uint64_t tag;
      if (policy_.Take(item, &tag)) {
        out.push_back({item.due_ms, tag});
      } else {
        --dead_;
      }
    }
    return out;
  }
  size_t MemoryBytes() const {
    return heap_.capacity() * sizeof(Item) + policy_.MemoryBytes();
  }
  size_t compactions() const { return compactions_; }
  double compaction_seconds() const { return compaction_seconds_; }

 private:
  static constexpr size_t kMinCompaction = 1024;
  struct Later {
    bool operator()(const Item& a, const Item& b) const {
      return a.due_ms > b.due_ms;
    }
  };
  struct Heap : std::priority_queue<Item, std::vector<Item>, Later> {
    size_t capacity() const { return this->c.capacity(); }
    template <typename Dead>
    void RemoveIf(Dead dead) {
      std::erase_if(this->c, dead);
      std::make_heap(this->c.begin(), this->c.end(), this->comp);
    }
  };

  void Compact() {
    const double start = ThreadCpuSeconds();
    heap_.RemoveIf([this](const Item& item) { return policy_.IsDead(item); });
    policy_.Compacted();
    dead_ = 0;
    ++compactions_;
    compaction_seconds_ += ThreadCpuSeconds() - start;
  }

  Heap heap_;
  Policy policy_;
  size_t dead_ = 0;  // heap items of canceled timers
  size_t compactions_ = 0;
  double compaction_seconds_ = 0;
};

// Handles are (record index, generation) in a Slab that holds the tags; heap
// items carry the generation they were pushed with, so cancel frees the
// record at once (its generation moves on) and the item is recognised as
// dead by a generation mismatch. Any tag values.
struct SlabPolicy {
  using Handle = uint64_t;
  struct Item {
    int64_t due_ms;
    uint32_t index;
    uint32_t generation;
  };
  struct Record {
    uint64_t tag;
    uint32_t generation = 0;
    uint32_t next_free;
  };
  Handle Make(int64_t due_ms, uint64_t tag, Item* item) {
    const uint32_t i = slab.Allocate();
    slab[i].tag = tag;
    *item = Item{due_ms, i, slab[i].generation};
    return PackHandle(i, item->generation);
  }
  bool Kill(Handle h) {
    const auto i = static_cast<uint32_t>(h);
    if (!slab.IsLive(i, static_cast<uint32_t>(h >> 32))) return false;
    slab.Free(i);
    return true;
  }
  bool IsDead(const Item& item) const {
    return slab[item.index].generation != item.generation;
  }
  bool Take(const Item& item, uint64_t* tag) {
    if (IsDead(item)) return false;
    *tag = slab[item.index].tag;
    slab.Free(item.index);
    return true;
  }
  void Compacted() {}
  size_t MemoryBytes() const { return slab.MemoryBytes(); }
  Slab<Record> slab;
};

// Handles are the tags themselves (which must be distinct); canceled tags
// are kept in a std::unordered_set until their item leaves the heap. No
// side table of live timers, so cancel cannot tell a pending timer from a
// fired one: it reports whether the tag was newly marked.
struct HashSetPolicy {
  using Handle = uint64_t;
  struct Item {
    int64_t due_ms;
    uint64_t tag;
  };
  Handle Make(int64_t due_ms, uint64_t tag, Item* item) {
    *item = Item{due_ms, tag};
    return tag;
  }
  bool Kill(Handle tag) { return canceled.insert(tag).second; }
  bool IsDead(const Item& item) const { return canceled.contains(item.tag); }
  bool Take(const Item& item, uint64_t* tag) {
    if (canceled.erase(item.tag) != 0) return false;
    *tag = item.tag;
    return true;
  }
  void Compacted() { canceled.clear(); }
  size_t MemoryBytes() const {
    // Bucket array, plus one node (next pointer, value, cached hash) each.
    return canceled.bucket_count() * sizeof(void*) +
           canceled.size() * MallocBytes(3 * sizeof(void*));
  }
  std::unordered_set<uint64_t> canceled;
};

using HeapTimer = LazyHeapTimer<SlabPolicy>;
using HeapHashSetTimer = LazyHeapTimer<HashSetPolicy>;

// A std::multimap keyed by due time; the handle is the iterator, so cancel
// erases directly (a stale iterator is undefined behaviour: the caller must
// forget it when the timer fires).
class MultimapTimer {
 public:
  using Handle = std::multimap<int64_t, uint64_t>::iterator;
  explicit MultimapTimer(int64_t /*now_ms*/) {}
  Handle Insert(int64_t due_ms, uint64_t tag) {
    return map_.emplace(due_ms, tag);
  }
  bool Cancel(Handle it) {
    map_.erase(it);
    return true;
  }
  void Idle() {}
  std::vector<TimerEntry> Advance(int64_t now_ms) {
    std::vector<TimerEntry> out;
    while (!map_.empty() && map_.begin()->first <= now_ms) {
      out.push_back({map_.begin()->first, map_.begin()->second});
      map_.erase(map_.begin());
    }
    return out;
  }
  size_t MemoryBytes() const {
    // A red-black tree node: color, parent, left, right, then the value.
    return map_.size() * MallocBytes(4 * sizeof(void*) + 16);
  }

 private:
  std::multimap<int64_t, uint64_t> map_;
};

}  // namespace delayd::timer::bench

#endif  // DELAYD_BENCH_TIMER_BASELINE_TIMERS_H_
