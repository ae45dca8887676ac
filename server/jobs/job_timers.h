// JobTimers: for each live job that waits for its due time, the handle of
// its timer in the Scheduler, so that Reschedule and Cancel move or remove it
// in O(1). Keyed by KeyHash, with KeyCheck to tell colliding keys apart; it
// holds no strings (about 28 bytes per job).
//
// Timers are hints, verified when they fire: a fired tag is matched against
// the store's due index at that millisecond, then against the key's timer
// here (FiredBatch): the job is due when its entry is there and its tracked
// timer has fired and was neither disarmed nor armed again since. (The
// index alone is not enough: a crowd's millisecond keeps the entries of
// jobs removed from it until the last is gone, JobStore::ScanCrowd.) So a
// timer may fire for nothing (harmless), but every live job must have a
// timer at or before its due time. When two live keys share a
// KeyHash, the second one's timers are untracked (never moved or canceled,
// only verified on firing) — correct, merely lazier.
//
// Memory horizon (optional): only jobs due up to horizon() get a timer; Arm
// of a later due time drops the key's timer instead, and the horizon loader
// (JobService) arms those jobs from the due index as the horizon advances.
// So the rule above becomes: every live job due by horizon() has a timer at
// or before its due time.
//
// Thread-safe. REQUIRES of callers: the key's KeyLocks lock is held
// around each call, so one key's Arm/Disarm/Fired never interleave (except
// AddHorizonTimers, which needs no lock).
#ifndef DELAYD_SERVER_JOBS_JOB_TIMERS_H_
#define DELAYD_SERVER_JOBS_JOB_TIMERS_H_

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "server/base/huge_page_allocator.h"
#include "server/timer/scheduler.h"

namespace delayd::server {

class JobTimers {
 public:
  struct Entry {
    int64_t due_ms;
    uint64_t hash;
    uint32_t check;
  };

  explicit JobTimers(timer::Scheduler* scheduler) : scheduler_(scheduler) {}
  JobTimers(const JobTimers&) = delete;
  JobTimers& operator=(const JobTimers&) = delete;

  // No horizon: every live job has a timer.
  static constexpr int64_t kNoHorizon = std::numeric_limits<int64_t>::max();

  // Makes the key's timer fire at due_ms: moves its tracked timer, or adds
  // one. Beyond the horizon: removes its timer instead.
  void Arm(uint64_t hash, uint32_t check, int64_t due_ms);
  // Cancels the key's tracked timer, if any.
  void Disarm(uint64_t hash, uint32_t check);
  // Disarm of each entry, under one lock. Entry::due_ms is not read.
  void DisarmBatch(std::span<const Entry> entries);
  // The keys' timers have fired and their due entries were found at the
  // fired millisecond: says of each whether its job is due, and forgets the
  // handles of those that are. Not due: a key with no timer here (disarmed
  // since it fired: canceled, deleted, queued ready at once, moved beyond
  // the horizon), or whose timer is pending (armed again since; its own
  // firing readies the job). An untracked key (its hash held by another
  // key) is due: its entry is all there is to go by. Under one lock (a
  // herd's chunk). Each key's lock is held. Entry::due_ms is not read.
  std::vector<bool> FiredBatch(std::span<const Entry> entries);
  // Bulk Arm for recovery (no key has a timer yet).
  void ArmBatch(std::span<const Entry> entries);

  // The due time up to which jobs have timers (kNoHorizon by default).
  int64_t horizon() const;
  // Moves the horizon to `end_ms`. Arm calls that read the new horizon
  // arm up to it; the caller then adds, with AddHorizonTimers, the due
  // index between the old and the new horizon as read after this call.
  void SetHorizon(int64_t end_ms);
  // For the horizon loader: adds a timer for every entry, tracked when its
  // key has no tracked timer, else left untracked (a hint verified when it
  // fires), so that a concurrent Arm's timer, from a newer due time, is
  // never moved. Needs no key lock: an entry read before a concurrent change
  // of its job at worst adds a timer that fires for nothing. And a key whose
  // tracked timer already fired for nothing (a stale entry of an earlier
  // pass) still gets its timer.
  void AddHorizonTimers(std::span<const Entry> entries);

  size_t tracked() const;

 private:
  struct Slot {
    uint64_t handle;
    uint32_t check;
  };
  void TrackLocked(uint64_t hash, uint32_t check, timer::TimerHandle handle)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  timer::Scheduler* const scheduler_;
  mutable absl::Mutex mu_;
  // A slot per live job, probed at random: on huge pages.
  HugePageHashMap<uint64_t, Slot> slots_ ABSL_GUARDED_BY(mu_);
  // Hashes shared by two live keys: their timers beyond the first are
  // untracked.
  absl::flat_hash_set<uint64_t> shared_ ABSL_GUARDED_BY(mu_);
  int64_t horizon_ms_ ABSL_GUARDED_BY(mu_) = kNoHorizon;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_JOBS_JOB_TIMERS_H_
