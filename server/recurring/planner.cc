#include "server/recurring/planner.h"

#include <algorithm>
#include <deque>
#include <limits>

namespace delayd::server::recurring {
namespace {

// splitmix64's finalizer: a fixed mix (absl::Hash is salted per process, and
// a jitter must stay the same across restarts).
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

Plan PlanOccurrences(const Recurrence& recurrence, v1::MisfirePolicy misfire,
                     uint64_t max_occurrences, uint64_t fired, int64_t due_ms,
                     int64_t now_ms) {
  Plan plan;
  // Older than the cutoff: misfired. Saturated: now_ms may be near INT64_MIN
  // only in tests, never wrapping.
  const int64_t cutoff =
      now_ms < std::numeric_limits<int64_t>::min() + kMisfireThresholdMs
          ? std::numeric_limits<int64_t>::min()
          : now_ms - kMisfireThresholdMs;
  // How many of the latest misfired occurrences become children.
  const size_t keep = misfire == v1::MISFIRE_POLICY_SKIP       ? 0
                      : misfire == v1::MISFIRE_POLICY_FIRE_ALL ? kMaxCatchUp
                                                               : 1;
  std::deque<int64_t> kept;  // the latest misfired ones, up to `keep`
  uint64_t misfired = 0;
  std::optional<int64_t> o = due_ms;
  while (o.has_value() && *o <= now_ms) {
    if (*o < cutoff) {
      ++misfired;
      if (keep > 0) {
        kept.push_back(*o);
        if (kept.size() > keep) kept.pop_front();
      }
      if (misfired == kMaxCounted) {
        // Enough counted: on from the cutoff, where the ones that fire
        // normally begin.
        plan.misfired_capped = true;
        o = recurrence.NextAfter(cutoff - 1);
        continue;
      }
    } else {
      plan.children.push_back(*o);
    }
    o = recurrence.NextAfter(*o);
  }
  plan.misfired = misfired - kept.size();
  plan.children.insert(plan.children.begin(), kept.begin(), kept.end());
  plan.next_ms = o;
  if (max_occurrences > 0) {
    const uint64_t left = max_occurrences > fired ? max_occurrences - fired : 0;
    if (plan.children.size() > left) plan.children.resize(left);
    if (fired + plan.children.size() >= max_occurrences) plan.next_ms.reset();
  }
  return plan;
}

int64_t JitterMs(uint64_t key_hash, int64_t nominal_ms, int64_t jitter_ms) {
  if (jitter_ms <= 0) return 0;
  const uint64_t h = Mix(key_hash ^ Mix(static_cast<uint64_t>(nominal_ms)));
  return static_cast<int64_t>(h % (static_cast<uint64_t>(jitter_ms) + 1));
}

}  // namespace delayd::server::recurring
