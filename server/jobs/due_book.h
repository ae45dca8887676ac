// DueBook: the due index counted in memory, by topic and whole second, so
// that GetStats and the console's due-soon chart answer without reading the
// index. Every write of a due entry goes through JobLedger (the entry it
// removes, the entry it adds), and Recover adds what it scans; so for each
// topic the book holds how many due entries fall in each second — whatever
// the record's state, as the index does.
//
// Counting a window (now, now + W] to the millisecond takes the whole
// seconds between its two ends from here (Below, O(1) amortized per topic:
// each topic keeps a running count below each of a few cursors, moved by
// the seconds that passed since the last call), and the two partial seconds
// at its ends from the due index itself (JobQuery reads them: a second of
// entries at most).
//
// Memory: one map entry (~20 B) per (topic, second) that holds a due entry;
// at most one per job, far fewer when a topic's jobs share seconds.
//
// Thread-safe.
#ifndef DELAYD_SERVER_JOBS_DUE_BOOK_H_
#define DELAYD_SERVER_JOBS_DUE_BOOK_H_

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace delayd::server {

class DueBook {
 public:
  // How many seconds Below answers at once.
  static constexpr size_t kCursors = 4;
  using Seconds = std::array<int64_t, kCursors>;
  using Counts = std::array<int64_t, kCursors>;

  DueBook() = default;
  DueBook(const DueBook&) = delete;
  DueBook& operator=(const DueBook&) = delete;

  // The whole second that holds `ms` (rounded down, also before 1970).
  static int64_t SecondOf(int64_t ms);

  // A write removed the topic's due entry at `from` (when set) and added
  // one at `to` (when set).
  void Move(absl::string_view topic, std::optional<int64_t> from,
            std::optional<int64_t> to);
  // Move of each (from, to) of one topic, under one lock; the moves within
  // one second are summed first (an Ack of a herd removes a thousand
  // entries of one second).
  struct Entries {
    std::optional<int64_t> from;
    std::optional<int64_t> to;
  };
  void MoveBatch(absl::string_view topic, std::span<const Entries> moves);
  // Adds `n` entries at `due_ms` (recovery; n may be negative).
  void Add(absl::string_view topic, int64_t due_ms, int64_t n = 1);

  // For each of `seconds`: how many of the topic's entries fall in an
  // earlier second. Cheapest when each call's seconds are at or a little
  // after the last call's for the same topic.
  Counts Below(absl::string_view topic, const Seconds& seconds);

  // Entries per bucket of `width_s` seconds, `n` buckets from second
  // `from_s` on: of one topic, or of every topic when `topic` is empty.
  std::vector<uint64_t> Histogram(absl::string_view topic, int64_t from_s,
                                  int64_t width_s, size_t n) const;

  // Entries of every topic (for tests and metrics).
  int64_t total() const;

 private:
  using Map = absl::btree_map<int64_t, int64_t>;  // second -> entries
  struct Topic {
    Map seconds;
    Seconds cursor;
    Counts below{};  // entries in a second before cursor[k]
    Topic() { cursor.fill(std::numeric_limits<int64_t>::min()); }
  };
  static void AddTo(Map& map, int64_t second, int64_t n);
  void AddLocked(absl::string_view topic, int64_t second, int64_t n)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Count(const Map& map, int64_t from_s, int64_t width_s,
                    std::vector<uint64_t>& buckets);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Topic> topics_ ABSL_GUARDED_BY(mu_);
  Map all_ ABSL_GUARDED_BY(mu_);  // every topic's entries
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_JOBS_DUE_BOOK_H_
