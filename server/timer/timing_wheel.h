// TimingWheel: the in-memory index of pending timers, a hierarchical timing
// wheel keyed by due time in unix milliseconds. A plain single-owner data
// structure: it never reads a clock (every call that needs time takes
// `now_ms`) and it is not thread-safe — Scheduler wraps it with a mutex and a
// thread. Entries are compact (a caller-chosen 64-bit tag, the due time and
// its slot position, 28 bytes); payloads and ids live elsewhere.

#ifndef DELAYD_SERVER_TIMER_TIMING_WHEEL_H_
#define DELAYD_SERVER_TIMER_TIMING_WHEEL_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "server/timer/entry_pool.h"
#include "server/timer/slot_bitmap.h"

namespace delayd::timer {

// Names one insertion into a TimingWheel: (pool index, generation) packed in
// 64 bits. It stays valid across Reschedule and becomes stale, for good, when
// the entry fires or is canceled; stale handles are refused, not misapplied
// (a slot must be reused 2^31 times before a stale handle could alias). The
// default-constructed handle is never valid.
class TimerHandle {
 public:
  constexpr TimerHandle() = default;
  static constexpr TimerHandle FromRaw(uint64_t raw) {
    return TimerHandle(raw);
  }
  constexpr uint64_t raw() const { return raw_; }
  constexpr uint32_t index() const { return static_cast<uint32_t>(raw_); }
  constexpr uint32_t generation() const {
    return static_cast<uint32_t>(raw_ >> 32);
  }
  friend constexpr bool operator==(TimerHandle, TimerHandle) = default;

 private:
  constexpr explicit TimerHandle(uint64_t raw) : raw_(raw) {}
  uint64_t raw_ = 0;
};

// A timer as seen from outside: input of InsertBatch, output of Advance.
struct TimerEntry {
  int64_t due_ms;  // unix milliseconds; the entry fires once now >= due_ms
  uint64_t tag;    // opaque to the wheel (the server's compact job handle)
  friend bool operator==(const TimerEntry&, const TimerEntry&) = default;
};

// Design
// ------
// Time is cut into seconds. The *fine level* holds the entries due in the
// current second, `cur_sec` = floor(now / 1000), in 1000 one-millisecond
// slots. The *coarse wheel* holds every later entry in 3600 one-second slots,
// entry -> slot (due_second mod 3600), so one revolution is an hour. An entry
// more than an hour away shares its slot with nearer ones; its cycle number
// (revolutions remaining) is implicit — (due_second - cur_sec) / 3600 — and
// not stored, because `due_ms` already determines it. Entries inserted at or
// before `now` go to an *overdue slot*. A slot is an array of pool indices
// (EntryPool holds the entries); each entry records its position in its
// slot's array, and which slot it is in follows from its due time, so cancel
// is an O(1) swap-remove through the handle. Bitmaps mark the non-empty
// slots.
//
// Advance(now) fires, in due order: the overdue slot (sorted), then the fine
// slots up to `now`; then, while `now` lies in a later second, it finds the
// next non-empty coarse slot with the bitmap (skipping empty seconds without
// visiting them), makes that second current and *opens* its slot: entries due
// in that second move to their fine slot, entries with cycles remaining stay.
// A gap of an hour or more (idle server, clock jump) is handled in one sweep:
// each non-empty coarse slot is opened once, everything due is fired (sorted),
// the rest stays — never 3600 x hours iterations. Slot arrays are walked in
// order with the entries prefetched a few ahead, so opening and firing run at
// memory bandwidth rather than one cache miss at a time.
//
// Opening ahead. Opening a slot costs time proportional to its entries (about
// 20 ms for a million), which would make the first jobs of a crowded second
// late. So the fine level has a second bank: OpenNextSecond() opens the slot
// of second cur_sec + 1 into it ahead of time, and Advance then enters that
// second by switching banks, at no cost. The Scheduler calls it whenever it
// has nothing to fire and sleeps until NextWakeMs(), which includes the start
// of the second before the next coarse slot to open.
//
// Crowds. With SetCrowdSize(k), a fine slot that grows to k entries is
// marked in a bitmap of its own, so that the Scheduler can find a crowded
// millisecond in a few word reads and take its entries out ahead of time
// (TakeAhead), before its instant, rather than spend O(crowd) at it.
//
// Costs (n = pending entries, f = entries fired, s = entries in the coarse
// slots opened):
//   Insert, Cancel, Reschedule     O(1) (amortized: slot arrays grow)
//   Advance, OpenNextSecond        O(f + s + bitmap words), where the bitmap
//                                  words read are at most 73 per second
//                                  entered (57 coarse + 16 fine); a gap of an
//                                  hour or more costs O(n_coarse + f log f).
//   NextDueMs, NextWakeMs          at most 89 bitmap word reads
//   NextCrowdMs                    at most 32 bitmap word reads
//   TakeAhead                      O(entries in the slot)
// `s` includes entries with cycles remaining: an entry a year away is looked
// at once per hour (when its slot comes round) — the accepted cost of cycle
// numbers, which buys a single level and O(1) insert for any horizon.
// Memory: a 24-byte entry plus its 4-byte index in a slot array (plus array
// slack), in 6 MiB pool chunks; capacity is kept at its high-water mark.
//
// Worked example. now = 10:00:00.250, so cur_sec = 10:00:00.
//   Insert A due 10:00:00.700 -> fine slot 700.
//   Insert B due 10:00:05.120 -> coarse slot of 10:00:05.
//   Insert C due 11:00:05.300 -> the same coarse slot, one cycle remaining.
//   Insert D due 09:59:59.000 -> overdue slot (already due).
//   NextDueMs() = 09:59:59.000 (D).
//   Advance(10:00:06.000) returns D, A, B: D from the overdue slot, A from
//   fine slot 700; the bitmap then jumps straight to 10:00:05, whose slot is
//   opened: B moves to fine slot 120 and fires, C stays (due in a later
//   revolution). cur_sec = 10:00:06; one coarse slot opened, two entries
//   scanned. NextDueMs() = 11:00:05.000: the slot's next opening, a lower
//   bound (here C's second; for a slot whose entries are all more revolutions
//   away the caller wakes, advances, finds nothing and sleeps again).
//   NextWakeMs() = 11:00:04.000, when OpenNextSecond() can open C's slot.
//
// Contract:
//  - Advance(now) returns every pending entry with due_ms <= now exactly once,
//    never one with due_ms > now, in non-decreasing due_ms order (entries due
//    in the same millisecond in no particular order).
//  - An entry due at or before the last Advance's `now` when inserted is due
//    at once: the next Advance returns it (NextDueMs reports it).
//  - Time going backwards (now < a previous now) fires only overdue entries
//    that are due by the new `now`, keeps all state, and never fires early.
//  - Any int64 due_ms is accepted (delayd limits it to 100 years ahead).
//
// Invariants (`now` = the greatest `now_ms` seen, cur_sec = floor(now/1000)),
// between calls:
//  - an entry is in slot SlotFor(due_ms): the overdue slot if due_ms <= now;
//    else the current fine bank's slot (due_ms mod 1000) if due in cur_sec,
//    or the other bank's if due in cur_sec + 1 and that second is open;
//    else coarse slot (due_second mod 3600); and slots_[slot][pos] is it.
//    The one exception: while the next second is being opened in steps
//    (opening_), an entry due in it is in the other bank's slot if it has
//    been moved, else still in the coarse slot (SlotOf tells which);
//  - the other fine bank is empty unless the next second is open or opening;
//  - while opening_, the coarse slot of cur_sec + 1 has entries not looked
//    at yet (open_read_ < its size), and its bit is set;
//  - a bitmap bit is set iff its slot's array is non-empty.
//
// Thread safety: none; the owner serializes every call (Scheduler holds its
// mutex around each one).
class TimingWheel {
 public:
  static constexpr int kCoarseSlots = 3600;  // one-second slots: one hour
  static constexpr int kFineSlots = 1000;    // one-millisecond slots a bank

  // Work counters, for tests and metrics.
  struct Stats {
    uint64_t coarse_slots_opened = 0;  // coarse slots opened (incl. sweeps)
    uint64_t fine_slots_fired = 0;     // fine slots emptied by firing
    uint64_t entries_scanned = 0;      // entries looked at in opened slots
    uint64_t bitmap_words_read = 0;    // 64-bit words read by slot searches
    uint64_t sweeps = 0;               // advances over an hour or more
    uint64_t taken_ahead = 0;          // entries handed out by TakeAhead
  };

  // `now_ms` is the wheel's initial time: entries due at or before it are due
  // at once.
  explicit TimingWheel(int64_t now_ms);
  TimingWheel(const TimingWheel&) = delete;
  TimingWheel& operator=(const TimingWheel&) = delete;

  // Adds a timer; O(1).
  TimerHandle Insert(int64_t due_ms, uint64_t tag);

  // Adds many timers, reserving pool capacity once; returns their handles in
  // input order. Meant for bulk loads (recovery, the memory-horizon loader
  // pulling the next window of far-future jobs from disk); input sorted by
  // due time inserts fastest (neighbouring entries share slots and cache
  // lines) but any order is correct.
  std::vector<TimerHandle> InsertBatch(std::span<const TimerEntry> entries);

  // Removes a pending timer; O(1). Returns false, changing nothing, if the
  // handle is stale (already fired or canceled) or was never valid.
  bool Cancel(TimerHandle handle);

  // Moves a pending timer to `new_due_ms`, keeping its handle and tag; O(1).
  // A time at or before now makes it due at once. Returns false, changing
  // nothing, if the handle is stale or invalid.
  bool Reschedule(TimerHandle handle, int64_t new_due_ms);

  // True while the handle's timer is in the wheel: neither fired nor
  // canceled.
  bool Pending(TimerHandle handle) const {
    return pool_.IsLive(handle.index(), handle.generation());
  }

  // Returns the entries due by `now_ms` (see the contract above) and makes
  // `now_ms` the current time if it is later than the current one.
  std::vector<TimerEntry> Advance(int64_t now_ms);

  // Opens the coarse slot of the second after the current one into the fine
  // level now, so that entering that second costs nothing. Returns false if
  // it was open already. Optional: Advance opens what it needs itself.
  //
  // In steps: it looks at no more than `max_entries` entries of the slot a
  // call, and a later call goes on where it stopped. The second is open once
  // NextSecondOpen(); until then the entries moved so far fire and count as
  // pending as usual, but are not seen as crowds. Advance into the next
  // second finishes an open left halfway. O(min(max_entries, slot size)).
  bool OpenNextSecond(size_t max_entries = SIZE_MAX);
  // Whether the second after the current one is open (fully).
  bool NextSecondOpen() const { return next_open_; }

  // A lower bound on the earliest due_ms pending, exact when that entry is
  // overdue or in an open second; nullopt when empty. When the bound is the
  // start of a coarse slot's second the slot may hold only entries of later
  // revolutions: advancing to it fires nothing and moves the bound on.
  std::optional<int64_t> NextDueMs() const;

  // When a driver that calls OpenNextSecond() whenever idle should wake next:
  // the earlier of NextDueMs() and the start of the second before the next
  // coarse slot to open. nullopt when empty.
  std::optional<int64_t> NextWakeMs() const;

  // Crowds: a millisecond of the open seconds (the current one and, once
  // opened ahead, the next) becomes a crowd when its slot grows to `n`
  // entries (0: never), by inserts or as its second is opened, and stays one
  // until it is fired, emptied or taken (TakeAhead). Only slots that grow
  // after the call are seen.
  void SetCrowdSize(size_t n) { crowd_size_ = n; }
  // The first crowd's millisecond, after now; nullopt if there is none. At
  // most 32 bitmap word reads.
  std::optional<int64_t> NextCrowdMs() const;
  // Whether a millisecond became a crowd since the last call.
  bool TakeCrowdFormed() { return std::exchange(crowd_formed_, false); }

  // Takes out of the fine slot of `due_ms` the entries whose tag `take`
  // accepts, ahead of their due time, and returns them (due time `due_ms`
  // each); their handles become stale, as if they had fired. Entries it
  // refuses stay and fire as usual; the millisecond is no longer a crowd.
  // Takes nothing unless `due_ms` is after now in an open second.
  // O(slot size). For the Scheduler's crowds: a caller that acts on what it
  // took must itself wait for `due_ms`.
  std::vector<TimerEntry> TakeAhead(int64_t due_ms,
                                    absl::FunctionRef<bool(uint64_t)> take);

  // Makes room for `n` more pending entries without allocating.
  void Reserve(size_t n) { pool_.Reserve(n); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t now_ms() const { return now_ms_; }
  const Stats& stats() const { return stats_; }

  // Bytes held by the wheel: entry pool and slot arrays (capacity, not just
  // size), bitmaps.
  size_t MemoryBytes() const;

 private:
  using SlotArray = std::vector<uint32_t>;

  // Slot ids: index into slots_. Fine bank b, millisecond m: kFineBase +
  // b * kFineSlots + m.
  static constexpr uint32_t kOverdueSlot = 0;
  static constexpr uint32_t kFineBase = 1;
  static constexpr uint32_t kCoarseBase = kFineBase + 2 * kFineSlots;
  static constexpr uint32_t kNumSlots = kCoarseBase + kCoarseSlots;

  // The slot an entry due at `due_ms` belongs in (see the invariants).
  uint32_t SlotFor(int64_t due_ms) const;
  // The slot entry `i` is in: SlotFor(its due_ms), but for an entry already
  // moved by an open in steps.
  uint32_t SlotOf(uint32_t i) const;
  // The coarse slot of second `sec`.
  static uint32_t CoarseSlot(int64_t sec);
  // Recomputes coarse_from_ms_ after cur_sec_ or next_open_ changed.
  void UpdateCoarseFrom();
  void SetBit(uint32_t slot);
  void ClearBit(uint32_t slot);
  // Appends entry `i` to `slot`. REQUIRES: `i` is in no slot.
  void Append(uint32_t slot, uint32_t i);
  // Removes entry `i` from its slot (swap with the slot's last entry).
  void Remove(uint32_t i);
  // Remove from the coarse slot being opened, whose array `v` is, at `pos`;
  // finishes the open if nothing is left to look at.
  void RemoveWhileOpening(SlotArray& v, uint32_t pos);
  // Puts entry `i` (due_ms set, in no slot) in SlotFor(its due_ms).
  void Place(uint32_t i);
  // Fires and frees every entry of `slot`, emptying it.
  void FireSlot(uint32_t slot, std::vector<TimerEntry>* out);
  // Fires the overdue entries due by `now_ms`, sorted by due time.
  void FireOverdue(int64_t now_ms, std::vector<TimerEntry>* out);
  // Fires the slots of fine `bank` up to and including millisecond `last`.
  void FireFine(int bank, int last, std::vector<TimerEntry>* out);
  // Moves the entries of coarse slot `sec` due in second `sec` to fine
  // `bank`. REQUIRES: `bank` is empty.
  void OpenCoarse(int64_t sec, int bank);
  // Reads v[begin, end) of second `sec`'s coarse slot in order: the entries
  // due in `sec` go to fine `bank` (one millisecond's keep their order), the
  // others to v[*kept] onwards, *kept counting them.
  void MoveSecond(SlotArray& v, size_t begin, size_t end, int64_t sec, int bank,
                  uint32_t* kept);
  // Advance over a gap of at least one revolution.
  void Sweep(int64_t now_ms, std::vector<TimerEntry>* out);
  // The first second > `after` whose coarse slot is non-empty, if any.
  std::optional<int64_t> NextCoarseSecond(int64_t after) const;
  // The first non-empty millisecond of the open seconds, if any.
  std::optional<int64_t> NextFineMs() const;
  // The first set bit of per-bank `bits` in the open seconds, if any.
  std::optional<int64_t> FirstInOpenSeconds(
      const SlotBitmap<kFineSlots> (&bits)[2]) const;
  // The fine slot of `due_ms` if it is after now in an open second.
  std::optional<uint32_t> OpenFineSlot(int64_t due_ms) const;

  EntryPool pool_;
  std::vector<SlotArray> slots_;  // kNumSlots arrays of indices
  SlotBitmap<kFineSlots> fine_bits_[2];
  // The fine slots that are crowds (SetCrowdSize); a subset of fine_bits_.
  SlotBitmap<kFineSlots> crowd_bits_[2];
  size_t crowd_size_ = 0;
  bool crowd_formed_ = false;
  SlotBitmap<kCoarseSlots> coarse_bits_;
  int64_t now_ms_;
  int64_t cur_sec_;         // floor(now_ms_ / 1000)
  int cur_bank_ = 0;        // the fine bank of second cur_sec_
  bool next_open_ = false;  // second cur_sec_ + 1 is in bank 1 - cur_bank_
  // Second cur_sec_ + 1 is being opened in steps (OpenNextSecond with a
  // budget). Its coarse slot's array: [0, open_kept_) looked at, due in
  // later revolutions; [open_kept_, open_read_) stale copies of the entries
  // moved out; [open_read_, size) not looked at yet.
  bool opening_ = false;
  uint32_t open_kept_ = 0;
  uint32_t open_read_ = 0;
  // The start of the first second after the open ones: entries due at or
  // after it are in coarse slots (SlotFor's fast path); -1 if that start is
  // negative or beyond int64 (then SlotFor takes the general path).
  int64_t coarse_from_ms_ = -1;
  // Lower bound on the due times in the overdue slot (if non-empty).
  int64_t overdue_min_ms_ = 0;
  size_t size_ = 0;
  Stats stats_;
};

}  // namespace delayd::timer

#endif  // DELAYD_SERVER_TIMER_TIMING_WHEEL_H_
