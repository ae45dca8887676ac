// The occurrence planner: what a recurring job does when its parent falls
// due — which occurrences become children now, how many were misfired, and
// when the parent is due next. Pure: the job lifecycle (the fire path)
// applies the plan under the parent's key lock.
//
// Misfires. An occurrence is misfired when it is older than
// kMisfireThresholdMs at the time the parent is handled: the server was
// down or the job paused through it. Occurrences within the threshold fire
// normally, each as a child, late but whole (a busy server is not a
// misfire; Quartz's misfireThreshold, 60 s by default, draws the same line).
// Of the misfired ones:
//   FIRE_ONCE (default)  one child, for the latest of them;
//   SKIP                 none;
//   FIRE_ALL             one child each, the latest kMaxCatchUp of them.
// The others count as misfired. A run of more than kMaxCounted misfired
// occurrences (a per-second job down for 12 days) is counted up to that
// bound, and the children above come from the counted ones. max_occurrences
// caps the children over the job's life, misfired ones not counted; once
// reached, or once the recurrence has no occurrence left, the job ends (next_ms
// unset).
//
// Thread-safe: pure functions.
#ifndef DELAYD_SERVER_RECURRING_PLANNER_H_
#define DELAYD_SERVER_RECURRING_PLANNER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "delayd/v1/recurrence.pb.h"
#include "server/recurring/recurrence.h"

namespace delayd::server::recurring {

inline constexpr int64_t kMisfireThresholdMs = 60'000;
// FIRE_ALL's cap on the children of one catch-up.
inline constexpr size_t kMaxCatchUp = 1000;
// Misfired occurrences are counted one by one up to this many per plan;
// beyond it the count says "at least" (misfired_capped).
inline constexpr uint64_t kMaxCounted = 1'000'000;

struct Plan {
  // Nominal times of the children to make now, in time order.
  std::vector<int64_t> children;
  // Occurrences passed over by the misfire policy.
  uint64_t misfired = 0;
  bool misfired_capped = false;  // more were passed over than counted
  // When the parent is due next; unset: the schedule has ended.
  std::optional<int64_t> next_ms;
};

// The plan of a parent due at `due_ms` (its next nominal occurrence, <=
// now_ms), with `fired` children made so far, handled at `now_ms`.
// REQUIRES: due_ms is an occurrence of `recurrence` (NextAfter gave it).
Plan PlanOccurrences(const Recurrence& recurrence, v1::MisfirePolicy misfire,
                     uint64_t max_occurrences, uint64_t fired, int64_t due_ms,
                     int64_t now_ms);

// The jitter of occurrence `nominal_ms` of the job whose key hashes to
// `key_hash`: fixed per (job, occurrence), uniform in [0, jitter_ms].
int64_t JitterMs(uint64_t key_hash, int64_t nominal_ms, int64_t jitter_ms);

}  // namespace delayd::server::recurring

#endif  // DELAYD_SERVER_RECURRING_PLANNER_H_
