#include "server/timer/timing_wheel.h"

#include <algorithm>
#include <limits>

namespace delayd::timer {
namespace {

constexpr int64_t kMsPerSec = 1000;
// How many entries ahead a slot walk prefetches: enough to overlap several
// cache misses, few enough that the lines are still there when used.
constexpr size_t kPrefetchAhead = 8;

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t FloorMod(int64_t a, int64_t b) { return a - FloorDiv(a, b) * b; }

// Offset of fine `bank` among the fine slot ids.
uint32_t Bank(int bank) {
  return static_cast<uint32_t>(bank * TimingWheel::kFineSlots);
}

void SortByDue(std::vector<TimerEntry>* out, size_t first) {
  std::stable_sort(out->begin() + static_cast<ptrdiff_t>(first), out->end(),
                   [](const TimerEntry& a, const TimerEntry& b) {
                     return a.due_ms < b.due_ms;
                   });
}

}  // namespace

TimingWheel::TimingWheel(int64_t now_ms)
    : slots_(kNumSlots),
      now_ms_(now_ms),
      cur_sec_(FloorDiv(now_ms, kMsPerSec)) {
  UpdateCoarseFrom();
}

uint32_t TimingWheel::CoarseSlot(int64_t sec) {
  return kCoarseBase + static_cast<uint32_t>(FloorMod(sec, kCoarseSlots));
}

inline uint32_t TimingWheel::SlotFor(int64_t due_ms) const {
  // The common case — due after the open seconds, in a coarse slot — with
  // unsigned arithmetic (divisions by constants become multiplications).
  if (coarse_from_ms_ >= 0 && due_ms >= coarse_from_ms_) [[likely]] {
    const auto sec = static_cast<uint64_t>(due_ms) / kMsPerSec;
    return kCoarseBase + static_cast<uint32_t>(sec % kCoarseSlots);
  }
  if (due_ms <= now_ms_) return kOverdueSlot;
  const int64_t sec = FloorDiv(due_ms, kMsPerSec);
  const auto ms = static_cast<uint32_t>(due_ms - sec * kMsPerSec);
  if (sec == cur_sec_) return kFineBase + Bank(cur_bank_) + ms;
  if (sec == cur_sec_ + 1 && next_open_) {
    return kFineBase + Bank(1 - cur_bank_) + ms;
  }
  return CoarseSlot(sec);
}

inline uint32_t TimingWheel::SlotOf(uint32_t i) const {
  const WheelEntry& e = pool_[i];
  const uint32_t slot = SlotFor(e.due_ms);
  if (!opening_) [[likely]] {
    return slot;
  }
  if (slot != CoarseSlot(cur_sec_ + 1)) return slot;
  // Still in the coarse slot: kept, or not read yet (the places between
  // hold stale copies of the entries moved out).
  const SlotArray& v = slots_[slot];
  if ((e.pos < open_kept_ || (e.pos >= open_read_ && e.pos < v.size())) &&
      v[e.pos] == i) {
    return slot;
  }
  // Due in the second being opened, and already moved to its bank.
  return kFineBase + Bank(1 - cur_bank_) +
         static_cast<uint32_t>(e.due_ms - (cur_sec_ + 1) * kMsPerSec);
}

void TimingWheel::UpdateCoarseFrom() {
  const int64_t first = cur_sec_ + (next_open_ ? 2 : 1);
  constexpr int64_t kMaxSec = std::numeric_limits<int64_t>::max() / kMsPerSec;
  coarse_from_ms_ = first >= 0 && first <= kMaxSec ? first * kMsPerSec : -1;
}

inline void TimingWheel::SetBit(uint32_t slot) {
  if (slot >= kCoarseBase) {
    coarse_bits_.Set(slot - kCoarseBase);
  } else if (slot >= kFineBase) {
    const uint32_t f = slot - kFineBase;
    fine_bits_[f / kFineSlots].Set(f % kFineSlots);
  }
}

inline void TimingWheel::ClearBit(uint32_t slot) {
  if (slot >= kCoarseBase) {
    coarse_bits_.Clear(slot - kCoarseBase);
  } else if (slot >= kFineBase) {
    const uint32_t f = slot - kFineBase;
    fine_bits_[f / kFineSlots].Clear(f % kFineSlots);
    crowd_bits_[f / kFineSlots].Clear(f % kFineSlots);
  }
}

inline void TimingWheel::Append(uint32_t slot, uint32_t i) {
  SlotArray& v = slots_[slot];
  pool_[i].pos = static_cast<uint32_t>(v.size());
  v.push_back(i);
  if (v.size() == 1) SetBit(slot);
  if (v.size() == crowd_size_ && slot >= kFineBase && slot < kCoarseBase)
      [[unlikely]] {
    const uint32_t f = slot - kFineBase;
    crowd_bits_[f / kFineSlots].Set(f % kFineSlots);
    crowd_formed_ = true;
  }
}

inline void TimingWheel::Remove(uint32_t i) {
  const uint32_t slot = SlotOf(i);
  SlotArray& v = slots_[slot];
  const uint32_t pos = pool_[i].pos;
  if (opening_ && slot == CoarseSlot(cur_sec_ + 1)) [[unlikely]] {
    RemoveWhileOpening(v, pos);
    return;
  }
  const uint32_t last = v.back();
  v[pos] = last;
  pool_[last].pos = pos;
  v.pop_back();
  if (v.empty()) ClearBit(slot);
}

void TimingWheel::RemoveWhileOpening(SlotArray& v, uint32_t pos) {
  if (pos < open_kept_) {
    // The last entry kept fills the hole; its place joins the moved-out.
    const uint32_t moved = v[--open_kept_];
    v[pos] = moved;
    pool_[moved].pos = pos;
  } else {  // not looked at yet
    if (pos + 1 != v.size()) {
      const uint32_t last = v.back();
      v[pos] = last;
      pool_[last].pos = pos;
    }
    v.pop_back();
  }
  if (open_read_ == v.size()) OpenNextSecond(0);  // nothing left: finish
}

inline void TimingWheel::Place(uint32_t i) {
  const int64_t due = pool_[i].due_ms;
  const uint32_t slot = SlotFor(due);
  if (slot == kOverdueSlot &&
      (slots_[kOverdueSlot].empty() || due < overdue_min_ms_)) {
    overdue_min_ms_ = due;
  }
  Append(slot, i);
}

TimerHandle TimingWheel::Insert(int64_t due_ms, uint64_t tag) {
  const uint32_t i = pool_.Allocate();
  WheelEntry& e = pool_[i];
  e.due_ms = due_ms;
  e.tag = tag;
  Place(i);
  ++size_;
  return TimerHandle::FromRaw(uint64_t{e.generation} << 32 | i);
}

std::vector<TimerHandle> TimingWheel::InsertBatch(
    std::span<const TimerEntry> entries) {
  pool_.Reserve(entries.size());
  std::vector<TimerHandle> handles;
  handles.reserve(entries.size());
  for (const TimerEntry& t : entries) {
    handles.push_back(Insert(t.due_ms, t.tag));
  }
  return handles;
}

bool TimingWheel::Cancel(TimerHandle handle) {
  const uint32_t i = handle.index();
  if (!pool_.IsLive(i, handle.generation())) return false;
  Remove(i);
  pool_.Free(i);
  --size_;
  return true;
}

bool TimingWheel::Reschedule(TimerHandle handle, int64_t new_due_ms) {
  const uint32_t i = handle.index();
  if (!pool_.IsLive(i, handle.generation())) return false;
  Remove(i);
  pool_[i].due_ms = new_due_ms;
  Place(i);
  return true;
}

std::vector<TimerEntry> TimingWheel::Advance(int64_t now_ms) {
  std::vector<TimerEntry> out;
  FireOverdue(now_ms, &out);
  if (now_ms < now_ms_) return out;  // time went backwards: nothing else due

  const int64_t now_sec = FloorDiv(now_ms, kMsPerSec);
  // An open in steps is finished before its second is entered.
  if (opening_ && now_sec > cur_sec_) OpenNextSecond();
  if (now_sec - cur_sec_ >= kCoarseSlots) {
    Sweep(now_ms, &out);
    return out;
  }
  while (true) {
    const int last = cur_sec_ == now_sec
                         ? static_cast<int>(now_ms - now_sec * kMsPerSec)
                         : kFineSlots - 1;
    FireFine(cur_bank_, last, &out);
    if (cur_sec_ == now_sec) break;
    if (next_open_) {  // opened ahead: enter it by switching banks
      ++cur_sec_;
      cur_bank_ = 1 - cur_bank_;
      next_open_ = false;
      continue;
    }
    // The next second in (cur_sec_, now_sec] whose coarse slot is non-empty;
    // the seconds in between are skipped without being visited.
    const int d = coarse_bits_.FindCircular(
        static_cast<size_t>(FloorMod(cur_sec_ + 1, kCoarseSlots)),
        static_cast<size_t>(now_sec - cur_sec_), &stats_.bitmap_words_read);
    if (d == SlotBitmap<kCoarseSlots>::kNotFound) {
      cur_sec_ = now_sec;
      break;
    }
    cur_sec_ += 1 + d;
    OpenCoarse(cur_sec_, cur_bank_);
  }
  now_ms_ = now_ms;
  UpdateCoarseFrom();
  return out;
}

void TimingWheel::FireSlot(uint32_t slot, std::vector<TimerEntry>* out) {
  SlotArray& v = slots_[slot];
  const size_t n = v.size();
  for (size_t k = 0; k < n; ++k) {
    if (k + kPrefetchAhead < n) pool_.Prefetch(v[k + kPrefetchAhead]);
    const WheelEntry& e = pool_[v[k]];
    out->push_back(TimerEntry{e.due_ms, e.tag});
    pool_.Free(v[k]);
  }
  size_ -= n;
  v.clear();
  ClearBit(slot);
}

void TimingWheel::FireOverdue(int64_t now_ms, std::vector<TimerEntry>* out) {
  SlotArray& v = slots_[kOverdueSlot];
  if (v.empty() || overdue_min_ms_ > now_ms) return;
  const size_t first = out->size();
  int64_t new_min = std::numeric_limits<int64_t>::max();
  size_t kept = 0;
  for (const uint32_t i : v) {
    WheelEntry& e = pool_[i];
    if (e.due_ms <= now_ms) {
      out->push_back(TimerEntry{e.due_ms, e.tag});
      pool_.Free(i);
      --size_;
    } else {
      new_min = std::min(new_min, e.due_ms);
      e.pos = static_cast<uint32_t>(kept);
      v[kept++] = i;
    }
  }
  v.resize(kept);
  overdue_min_ms_ = new_min;
  SortByDue(out, first);
}

void TimingWheel::FireFine(int bank, int last, std::vector<TimerEntry>* out) {
  size_t begin = 0;
  while (true) {
    const int ms = fine_bits_[bank].FindInRange(
        begin, static_cast<size_t>(last) + 1, &stats_.bitmap_words_read);
    if (ms == SlotBitmap<kFineSlots>::kNotFound) return;
    FireSlot(kFineBase + Bank(bank) + static_cast<uint32_t>(ms), out);
    ++stats_.fine_slots_fired;
    begin = static_cast<size_t>(ms) + 1;
  }
}

void TimingWheel::MoveSecond(SlotArray& v, size_t begin, size_t end,
                             int64_t sec, int bank, uint32_t* kept) {
  const uint32_t fine = kFineBase + Bank(bank);
  for (size_t k = begin; k < end; ++k) {
    if (k + kPrefetchAhead < end) pool_.Prefetch(v[k + kPrefetchAhead]);
    const uint32_t i = v[k];
    WheelEntry& e = pool_[i];
    if (FloorDiv(e.due_ms, kMsPerSec) == sec) {
      Append(fine + static_cast<uint32_t>(e.due_ms - sec * kMsPerSec), i);
    } else {  // cycles remaining
      e.pos = *kept;
      v[(*kept)++] = i;
    }
  }
  stats_.entries_scanned += end - begin;
}

bool TimingWheel::OpenNextSecond(size_t max_entries) {
  if (next_open_) return false;
  const int64_t sec = cur_sec_ + 1;
  const uint32_t slot = CoarseSlot(sec);
  SlotArray& v = slots_[slot];
  if (!opening_) {
    ++stats_.coarse_slots_opened;
    opening_ = true;
    open_kept_ = 0;
    open_read_ = 0;
  }
  // As OpenCoarse, but resumable: the array is compacted only once all of
  // it has been read.
  const size_t n = v.size();  // entries added meanwhile come after
  const size_t stop = std::min(n, open_read_ + std::min(max_entries, n));
  MoveSecond(v, open_read_, stop, sec, 1 - cur_bank_, &open_kept_);
  open_read_ = static_cast<uint32_t>(stop);
  if (open_read_ < n) return true;
  v.resize(open_kept_);
  if (open_kept_ == 0) ClearBit(slot);
  opening_ = false;
  next_open_ = true;
  UpdateCoarseFrom();
  return true;
}

void TimingWheel::OpenCoarse(int64_t sec, int bank) {
  ++stats_.coarse_slots_opened;
  const uint32_t slot = CoarseSlot(sec);
  SlotArray& v = slots_[slot];
  uint32_t kept = 0;
  MoveSecond(v, 0, v.size(), sec, bank, &kept);
  v.resize(kept);
  if (kept == 0) ClearBit(slot);
}

void TimingWheel::Sweep(int64_t now_ms, std::vector<TimerEntry>* out) {
  ++stats_.sweeps;
  // The open seconds are long past: all due, and earlier than the rest.
  FireFine(cur_bank_, kFineSlots - 1, out);
  if (next_open_) FireFine(1 - cur_bank_, kFineSlots - 1, out);
  next_open_ = false;
  const uint32_t fine = kFineBase + Bank(cur_bank_);
  const size_t first = out->size();
  const int64_t now_sec = FloorDiv(now_ms, kMsPerSec);
  size_t begin = 0;
  while (true) {
    const int c = coarse_bits_.FindInRange(begin, kCoarseSlots,
                                           &stats_.bitmap_words_read);
    if (c == SlotBitmap<kCoarseSlots>::kNotFound) break;
    ++stats_.coarse_slots_opened;
    const uint32_t slot = kCoarseBase + static_cast<uint32_t>(c);
    SlotArray& v = slots_[slot];
    const size_t n = v.size();
    size_t kept = 0;
    for (size_t k = 0; k < n; ++k) {
      if (k + kPrefetchAhead < n) pool_.Prefetch(v[k + kPrefetchAhead]);
      const uint32_t i = v[k];
      WheelEntry& e = pool_[i];
      if (e.due_ms <= now_ms) {
        out->push_back(TimerEntry{e.due_ms, e.tag});
        pool_.Free(i);
        --size_;
      } else if (FloorDiv(e.due_ms, kMsPerSec) == now_sec) {
        Append(fine + static_cast<uint32_t>(e.due_ms - now_sec * kMsPerSec), i);
      } else {
        e.pos = static_cast<uint32_t>(kept);
        v[kept++] = i;
      }
    }
    stats_.entries_scanned += n;
    v.resize(kept);
    if (kept == 0) ClearBit(slot);
    begin = static_cast<size_t>(c) + 1;
  }
  SortByDue(out, first);
  cur_sec_ = now_sec;
  now_ms_ = now_ms;
  UpdateCoarseFrom();
}

std::vector<TimerEntry> TimingWheel::TakeAhead(
    int64_t due_ms, absl::FunctionRef<bool(uint64_t)> take) {
  std::vector<TimerEntry> out;
  const std::optional<uint32_t> slot = OpenFineSlot(due_ms);
  if (!slot) return out;
  SlotArray& v = slots_[*slot];
  out.reserve(v.size());
  // Kept entries move down over the taken ones, keeping their order.
  size_t kept = 0;
  for (size_t k = 0; k < v.size(); ++k) {
    const uint32_t i = v[k];
    const uint64_t tag = pool_[i].tag;
    if (take(tag)) {
      out.push_back(TimerEntry{due_ms, tag});
      pool_.Free(i);
    } else {
      pool_[i].pos = static_cast<uint32_t>(kept);
      v[kept++] = i;
    }
  }
  v.resize(kept);
  if (kept == 0) ClearBit(*slot);
  const uint32_t f = *slot - kFineBase;
  crowd_bits_[f / kFineSlots].Clear(f % kFineSlots);
  size_ -= out.size();
  stats_.taken_ahead += out.size();
  return out;
}

std::optional<int64_t> TimingWheel::NextCrowdMs() const {
  return FirstInOpenSeconds(crowd_bits_);
}

std::optional<uint32_t> TimingWheel::OpenFineSlot(int64_t due_ms) const {
  if (due_ms <= now_ms_) return std::nullopt;
  const int64_t sec = FloorDiv(due_ms, kMsPerSec);
  const auto ms = static_cast<uint32_t>(due_ms - sec * kMsPerSec);
  if (sec == cur_sec_) return kFineBase + Bank(cur_bank_) + ms;
  if (sec == cur_sec_ + 1 && next_open_) {
    return kFineBase + Bank(1 - cur_bank_) + ms;
  }
  return std::nullopt;
}

std::optional<int64_t> TimingWheel::NextFineMs() const {
  return FirstInOpenSeconds(fine_bits_);
}

std::optional<int64_t> TimingWheel::FirstInOpenSeconds(
    const SlotBitmap<kFineSlots> (&bits)[2]) const {
  uint64_t words = 0;  // const: these reads are not counted
  int ms = bits[cur_bank_].FindInRange(0, kFineSlots, &words);
  if (ms != SlotBitmap<kFineSlots>::kNotFound) {
    return cur_sec_ * kMsPerSec + ms;
  }
  if (!next_open_) return std::nullopt;
  ms = bits[1 - cur_bank_].FindInRange(0, kFineSlots, &words);
  if (ms == SlotBitmap<kFineSlots>::kNotFound) return std::nullopt;
  return (cur_sec_ + 1) * kMsPerSec + ms;
}

std::optional<int64_t> TimingWheel::NextCoarseSecond(int64_t after) const {
  uint64_t words = 0;
  const int d = coarse_bits_.FindCircular(
      static_cast<size_t>(FloorMod(after + 1, kCoarseSlots)), kCoarseSlots,
      &words);
  if (d == SlotBitmap<kCoarseSlots>::kNotFound) return std::nullopt;
  return after + 1 + d;
}

std::optional<int64_t> TimingWheel::NextDueMs() const {
  std::optional<int64_t> next;
  if (!slots_[kOverdueSlot].empty()) next = overdue_min_ms_;
  std::optional<int64_t> candidate = NextFineMs();
  if (!candidate.has_value()) {
    // An open second's coarse slot holds only later revolutions.
    const std::optional<int64_t> sec =
        NextCoarseSecond(next_open_ ? cur_sec_ + 1 : cur_sec_);
    if (sec.has_value()) candidate = *sec * kMsPerSec;
  }
  if (candidate.has_value() && (!next.has_value() || *candidate < *next)) {
    next = candidate;
  }
  return next;
}

std::optional<int64_t> TimingWheel::NextWakeMs() const {
  std::optional<int64_t> next = NextDueMs();
  if (!next.has_value()) return next;
  // The next coarse slot to open: wake at the start of the second before it.
  const std::optional<int64_t> sec =
      NextCoarseSecond(next_open_ ? cur_sec_ + 1 : cur_sec_);
  if (sec.has_value()) {
    next = std::min(*next, std::max(now_ms_, (*sec - 1) * kMsPerSec));
  }
  return next;
}

size_t TimingWheel::MemoryBytes() const {
  size_t bytes = sizeof(TimingWheel) + pool_.MemoryBytes() +
                 slots_.capacity() * sizeof(slots_[0]);
  for (const SlotArray& v : slots_) bytes += v.capacity() * sizeof(uint32_t);
  return bytes;
}

}  // namespace delayd::timer
