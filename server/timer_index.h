// TimerIndex: for each live job that waits for its due time, the handle of
// its timer in the Scheduler, so that Reschedule and Cancel move or remove it
// in O(1). Keyed by KeyHash, with KeyCheck to tell colliding keys apart; it
// holds no strings (about 28 bytes per job).
//
// Timers are hints, verified when they fire: a fired tag is matched against
// the store's due index at that millisecond, which holds exactly the live
// jobs. So a timer may fire for nothing (harmless), but every live job must
// have a timer at or before its due time. When two live keys share a
// KeyHash, the second one's timers are untracked (never moved or canceled,
// only verified on firing) — correct, merely lazier.
//
// Thread-safe. REQUIRES of callers: the KeyLocks stripe of the key is held
// around each call, so one key's Arm/Disarm/Fired never interleave.
#ifndef DELAYD_SERVER_TIMER_INDEX_H_
#define DELAYD_SERVER_TIMER_INDEX_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "server/timer/scheduler.h"

namespace delayd::server {

class TimerIndex {
 public:
  struct Entry {
    int64_t due_ms;
    uint64_t hash;
    uint32_t check;
  };

  explicit TimerIndex(timer::Scheduler* scheduler) : scheduler_(scheduler) {}
  TimerIndex(const TimerIndex&) = delete;
  TimerIndex& operator=(const TimerIndex&) = delete;

  // Makes the key's timer fire at due_ms: moves its tracked timer, or adds
  // one.
  void Arm(uint64_t hash, uint32_t check, int64_t due_ms);
  // Cancels the key's tracked timer, if any.
  void Disarm(uint64_t hash, uint32_t check);
  // The key's timer has fired (its job is due): forget the handle.
  void Fired(uint64_t hash, uint32_t check);
  // Bulk Arm for recovery and the horizon loader (no key has a timer yet).
  void ArmBatch(std::span<const Entry> entries);

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
  absl::flat_hash_map<uint64_t, Slot> slots_ ABSL_GUARDED_BY(mu_);
  // Hashes shared by two live keys: their timers beyond the first are
  // untracked.
  absl::flat_hash_set<uint64_t> shared_ ABSL_GUARDED_BY(mu_);
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_TIMER_INDEX_H_
