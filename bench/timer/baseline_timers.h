// The timers people write by hand, as baselines for timer_bench, behind the
// same small interface as WheelTimer (an adaptor over TimingWheel):
//   Handle Insert(int64_t due_ms, uint64_t tag);
//   void Cancel(Handle);
//   std::vector<TimerEntry> Advance(int64_t now_ms);   // due entries, in order
//   void Idle();               // what a timer thread does with spare time
//   size_t MemoryBytes() const;                        // own accounting
// Single-threaded, like the wheel. Tags must be distinct (the benchmark uses
// 0, 1, 2, ...), since the heaps cancel by tag.

#ifndef DELAYD_BENCH_TIMER_BASELINE_TIMERS_H_
#define DELAYD_BENCH_TIMER_BASELINE_TIMERS_H_

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
  void Cancel(Handle h) { wheel_.Cancel(h); }
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

// A min-heap (std::priority_queue) of (due, tag); cancel marks the tag, and
// the marked entry is dropped when it reaches the top (lazy deletion). A
// canceled entry's memory is held until its due time.
template <typename Tombstones>
class LazyHeapTimer {
 public:
  using Handle = uint64_t;  // the tag
  explicit LazyHeapTimer(int64_t /*now_ms*/) {}
  Handle Insert(int64_t due_ms, uint64_t tag) {
    heap_.push({due_ms, tag});
    tombstones_.Prepare(tag);
    return tag;
  }
  void Cancel(Handle tag) { tombstones_.Mark(tag); }
  void Idle() {}
  std::vector<TimerEntry> Advance(int64_t now_ms) {
    std::vector<TimerEntry> out;
    while (!heap_.empty() && heap_.top().first <= now_ms) {
      const auto [due, tag] = heap_.top();
      heap_.pop();
      if (!tombstones_.TakeMark(tag)) out.push_back({due, tag});
    }
    return out;
  }
  size_t MemoryBytes() const {
    return heap_.capacity() * sizeof(Item) + tombstones_.MemoryBytes();
  }

 private:
  using Item = std::pair<int64_t, uint64_t>;
  struct Heap : std::priority_queue<Item, std::vector<Item>, std::greater<>> {
    size_t capacity() const { return this->c.capacity(); }
  };
  Heap heap_;
  Tombstones tombstones_;
};

// Canceled tags in a std::unordered_set (any tag values).
class HashSetTombstones {
 public:
  void Prepare(uint64_t) {}
  void Mark(uint64_t tag) { set_.insert(tag); }
  bool TakeMark(uint64_t tag) { return set_.erase(tag) != 0; }
  size_t MemoryBytes() const {
    // Bucket array, plus one node (next pointer, value, cached hash) each.
    return set_.bucket_count() * sizeof(void*) +
           set_.size() * MallocBytes(3 * sizeof(void*));
  }

 private:
  std::unordered_set<uint64_t> set_;
};

// Canceled tags as bytes in a vector indexed by tag (dense tags only).
class VectorTombstones {
 public:
  void Prepare(uint64_t tag) {
    if (tag >= marks_.size()) marks_.resize(tag + 1);
  }
  void Mark(uint64_t tag) { marks_[tag] = 1; }
  bool TakeMark(uint64_t tag) { return marks_[tag] != 0; }
  size_t MemoryBytes() const { return marks_.capacity(); }

 private:
  std::vector<uint8_t> marks_;
};

using HeapHashSetTimer = LazyHeapTimer<HashSetTombstones>;
using HeapVectorTimer = LazyHeapTimer<VectorTombstones>;

// A std::multimap keyed by due time; the handle is the iterator, so cancel
// erases directly.
class MultimapTimer {
 public:
  using Handle = std::multimap<int64_t, uint64_t>::iterator;
  explicit MultimapTimer(int64_t /*now_ms*/) {}
  Handle Insert(int64_t due_ms, uint64_t tag) {
    return map_.emplace(due_ms, tag);
  }
  void Cancel(Handle it) { map_.erase(it); }
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
