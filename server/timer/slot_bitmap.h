// SlotBitmap: a fixed-size bitmap with "find the next set bit" searches, used
// by TimingWheel to jump over empty slots instead of visiting them one by one.
// A plain value type; not thread-safe (its owner synchronizes).
//
// Searches cost O(kBits / 64) word reads at most; each word read is counted in
// a caller-supplied counter so that tests can assert the bound.

#ifndef DELAYD_SERVER_TIMER_SLOT_BITMAP_H_
#define DELAYD_SERVER_TIMER_SLOT_BITMAP_H_

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace delayd::timer {

template <size_t kBits>
class SlotBitmap {
 public:
  static constexpr int kNotFound = -1;

  // REQUIRES: i < kBits (for the three accessors below).
  void Set(size_t i) { words_[i / 64] |= uint64_t{1} << (i % 64); }
  void Clear(size_t i) { words_[i / 64] &= ~(uint64_t{1} << (i % 64)); }
  bool Test(size_t i) const { return (words_[i / 64] >> (i % 64)) & 1; }

  // Returns the lowest set bit in [begin, end), or kNotFound.
  // REQUIRES: begin <= end <= kBits.
  int FindInRange(size_t begin, size_t end, uint64_t* words_read) const {
    if (begin >= end) return kNotFound;
    size_t w = begin / 64;
    uint64_t bits = words_[w] & (~uint64_t{0} << (begin % 64));
    const size_t last_word = (end - 1) / 64;
    while (true) {
      ++*words_read;
      if (bits != 0) {
        const size_t i = w * 64 + static_cast<size_t>(std::countr_zero(bits));
        return i < end ? static_cast<int>(i) : kNotFound;
      }
      if (w == last_word) return kNotFound;
      bits = words_[++w];
    }
  }

  // Returns the distance d in [0, max_distance) of the first set bit met when
  // walking circularly from `start` (bit (start + d) % kBits), or kNotFound.
  // REQUIRES: start < kBits, max_distance <= kBits.
  int FindCircular(size_t start, size_t max_distance,
                   uint64_t* words_read) const {
    const size_t first_end =
        start + max_distance < kBits ? start + max_distance : kBits;
    int i = FindInRange(start, first_end, words_read);
    if (i != kNotFound) return i - static_cast<int>(start);
    const size_t wrapped = start + max_distance - first_end;
    i = FindInRange(0, wrapped, words_read);
    if (i != kNotFound) return static_cast<int>(kBits - start) + i;
    return kNotFound;
  }

  bool Empty() const {
    for (uint64_t w : words_) {
      if (w != 0) return false;
    }
    return true;
  }

 private:
  std::array<uint64_t, (kBits + 63) / 64> words_{};
};

}  // namespace delayd::timer

#endif  // DELAYD_SERVER_TIMER_SLOT_BITMAP_H_
