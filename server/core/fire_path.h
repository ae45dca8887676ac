// FirePath: what happens when due timers fire. The Scheduler hands fired
// tags to OnFired on the timer thread, which only queues them (the timer
// thread never does I/O); the fire thread then sorts them:
//   * lease timers (kLeaseTagBit) go to the Deliverer, which ends expired
//     leases;
//   * the memory horizon's own timer (kHorizonTag) wakes the HorizonLoader;
//   * the Deliverer's retry of leftover CANCELED records (kLeftoverRetryTag)
//     goes to the Deliverer;
//   * due timers are hints (JobTimers): under the keys' locks, the due index
//     at the fired millisecond says which jobs are really due (not
//     canceled, not moved). Those join their topic's ready queue through the
//     JobLedger, and the Deliverer is kicked. Recurring jobs (their entries
//     marked kRecurringMark) are queued instead to the OccurrenceMaker,
//     whose workers make their occurrences into jobs.
// A herd (many jobs due at one millisecond) is readied in chunks of kChunk
// (the first one smaller, kFirstChunk):
// a scan of the due index at that millisecond, without locks, finds the
// fired jobs in key order; each chunk's keys are then locked, its range of
// the index read again to keep only the jobs still due, those readied, and
// delivery kicked, so that the first deliveries leave while later chunks
// are read.
// A crowd (kAheadMinJobs or more jobs due at one millisecond) comes from the
// Scheduler kAheadLeadMs early (Scheduler::Ahead; job timers only, never a
// lease's): the fire thread builds its tag set during the lead, then waits
// on the clock for the due millisecond before it scans (as a crowd, below),
// locks and readies anything, so the first deliveries leave at the instant
// rather than after O(crowd) work. While it waits it fires the
// batches that fall due meanwhile, so the lead makes nothing else late. A
// job canceled or moved during the lead is not found by the re-read under
// its lock, as with any change between a timer firing and the lock.
// A crowd is scanned with JobStore::ScanCrowd (kCrowdMinJobs), which may
// leave stale entries in the due index at its millisecond: the entry of a
// job canceled, moved or deleted there since the crowd was scanned. The
// fire path passes over most of them, as it does over the entries of jobs
// whose timers did not fire, since only fired tags are looked for. A stale
// entry whose tag did fire (its job changed after its timer fired, before
// its chunk was read) is told by the job's timer: the ledger readies only
// a job whose timer has fired and was neither disarmed nor armed again
// since (JobTimers::FiredBatch). That holds for any later read of the
// millisecond too (a retry, or a timer armed there since).
// A failed read of the due index is tried again 100 ms later, at the same
// millisecond: the fired entries wait in a retry list, and a timer of the
// fire path's own (kFireRetryTag) brings them back. (Re-arming the tags at
// the retry time instead would scan the retry's millisecond, where the jobs'
// due entries are not, and strand them until a restart.)
//
// Thread-safe.
#ifndef DELAYD_SERVER_CORE_FIRE_PATH_H_
#define DELAYD_SERVER_CORE_FIRE_PATH_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "server/core/horizon_loader.h"
#include "server/core/occurrences.h"
#include "server/delivery/deliverer.h"
#include "server/jobs/job_ledger.h"
#include "server/jobs/key_locks.h"
#include "server/timer/clock.h"
#include "server/timer/scheduler.h"
#include "storage/job_store.h"

namespace delayd::server {

class FirePath {
 public:
  // What the fire path borrows from its owner; all must outlive it.
  struct Deps {
    storage::JobStore* store;
    timer::Clock* clock;
    KeyLocks* locks;
    JobLedger* ledger;
    timer::Scheduler* scheduler;
    Deliverer* deliverer;
    HorizonLoader* horizon;
    OccurrenceMaker* occurrences;
  };

  // Jobs of one millisecond are readied in chunks of this many, but for
  // the first of a millisecond, which is small: the Deliverer's first round
  // takes what is ready when it wakes, and the first jobs of a herd leave
  // when that round's writes and messages are done. A round of 256 took 10
  // to 13 ms on the herd's instant (cold caches, 2 cores shared with the
  // subscribers), one of 64 a few.
  static constexpr size_t kChunk = 1024;
  static constexpr size_t kFirstChunk = 64;
  // Crowds taken ahead: at least this many timers in one millisecond, this
  // long before it. The lead covers the O(crowd) steps for a million jobs:
  // 40-70 ms on a two-core box with cheap page faults, 280 ms on the
  // project's VM, where a new 4 KiB page costs 11-15 us to fault in.
  // Taking the crowd earlier costs nothing but holding its tags sooner:
  // nothing is readied before the instant.
  static constexpr size_t kAheadMinJobs = 10'000;
  static constexpr int64_t kAheadLeadMs = 500;
  // A millisecond with at least this many fired timers is scanned as a
  // crowd (JobStore::ScanCrowd), at its instant: the store may then delete
  // its jobs' due entries all at once when the last has gone, rather than
  // one by one. Making a crowd costs the store a write that waits for the
  // writes under way: worth it only for many jobs.
  static constexpr size_t kCrowdMinJobs = 10'000;
  // The Scheduler::Ahead that takes crowds as above.
  static timer::Scheduler::Ahead SchedulerAhead(
      int64_t lead_ms = kAheadLeadMs, size_t min_jobs = kAheadMinJobs);

  explicit FirePath(const Deps& deps)
      : d_(deps), waiter_(deps.clock->NewWaiter()) {}
  FirePath(const FirePath&) = delete;
  FirePath& operator=(const FirePath&) = delete;
  ~FirePath() { Stop(); }

  // Starts / stops the fire thread; batches still queued at Stop are
  // dropped. Stop is idempotent.
  void Start();
  void Stop();

  // The Scheduler's callback: queues a fired batch. Never blocks on I/O.
  void OnFired(std::vector<timer::TimerEntry> fired);

  // True when nothing is queued and the fire thread is not working.
  bool Idle();
  // True when everything fired and due by the clock's now has been dealt
  // with: no queued batch is due, and the fire thread is either not working
  // or waiting for a crowd's later millisecond.
  bool SettledForTesting();

 private:
  void Loop();
  void FireBatch(const std::vector<timer::TimerEntry>& all);
  // The due timers of one millisecond.
  void FireMillisecond(int64_t ms, std::span<const timer::TimerEntry> entries);
  // Returns once the clock reads `ms` or later (at once if it does), firing
  // meanwhile the queued batches already due; false if stopping first.
  bool AwaitDue(int64_t ms);
  // A queued batch all due by `now`, taken off the queue, if any.
  std::optional<std::vector<timer::TimerEntry>> PopDueLocked(int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const Deps d_;

  absl::Mutex mu_;
  std::deque<std::vector<timer::TimerEntry>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  // The fire thread waits in AwaitDue: OnFired and Stop wake it.
  bool awaiting_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
  // The fire thread's sleep until a crowd's due time.
  const std::unique_ptr<timer::Clock::Waiter> waiter_;
  // Only the fire thread: true while AwaitDue fires other batches (which
  // then wait for their own time, if the clock steps back, without firing
  // more).
  bool nested_ = false;

  // Only the fire thread: the fired entries (at their original due time)
  // whose due-index read failed. Not empty iff a kFireRetryTag timer is
  // pending or fired and queued.
  std::vector<timer::TimerEntry> retries_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_CORE_FIRE_PATH_H_
