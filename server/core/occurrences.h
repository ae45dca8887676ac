// Recurring jobs in the job lifecycle (docs/design.md, "Recurring jobs").
//
// A recurring job is a parent record: JobSpec.recurrence made effective
// (defaults filled in) in job.recurring, its due entry marked
// kRecurringMark, its fire_at the next time it is handled. It is never
// delivered. When its due timer fires, the fire path (which found the mark
// under the key's lock) queues it to the OccurrenceMaker and goes on with
// the one-shot jobs of the millisecond: a herd of recurring jobs neither
// holds back the one-shot jobs due with it nor runs on the fire thread
// alone. One of kThreads workers then takes the parents' locks, checks
// each is still due then and recurring (it may have been changed since),
// and in one store write:
//   * makes the occurrences the planner (recurring/planner.h) says are due
//     into one-shot children `<id>@<nominal unix ms>` (payload, retry and
//     labels of the parent; due at the nominal time plus the jitter;
//     job.occurrence_of set), which then live as any one-shot job;
//   * advances the parent: counts, last occurrence, next occurrence, or
//     DONE (through Retention) when the schedule has ended.
// Overlap: the policy looks at the child made last before this firing
// (read, not locked: a child that ends meanwhile is seen live, which errs
// towards not firing). A child is live while its record is SCHEDULED,
// READY or IN_FLIGHT; a DEAD, finished or absent one is not. The children
// of one catch-up (FIRE_ALL) are made together.
//   SKIP        no child while the last one is live (counted overlapped);
//   BUFFER_ONE  the latest such occurrence waits in buffered_occurrence,
//               and the parent is handled again every kBufferRecheckMs
//               until the last child has ended; then it fires;
//   ALLOW       always.
// A child key held by a live job of another origin is not overwritten: that
// occurrence counts as overlapped.
//
// A failed read or write is tried again kRetryMs later, the same parents at
// the same millisecond, until it succeeds or Stop.
//
// Thread-safe.
#ifndef DELAYD_SERVER_CORE_OCCURRENCES_H_
#define DELAYD_SERVER_CORE_OCCURRENCES_H_

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "delayd/v1/delayd.pb.h"
#include "server/delivery/deliverer.h"
#include "server/jobs/job_key.h"
#include "server/jobs/job_ledger.h"
#include "server/jobs/key_locks.h"
#include "server/jobs/limits.h"
#include "server/jobs/retention.h"
#include "server/timer/clock.h"
#include "storage/job_record.h"
#include "storage/job_store.h"

namespace delayd::server {

// An occurrence's id is `<id>@<nominal unix ms>`: a recurring job's id
// leaves room for it.
inline constexpr size_t kOccurrenceSuffixBytes = 20;
// BUFFER_ONE: how often a parent with a buffered occurrence looks again.
inline constexpr int64_t kBufferRecheckMs = 1000;

std::string OccurrenceId(absl::string_view parent_id, int64_t nominal_ms);

// A recurrence as Schedule stores it.
struct PreparedRecurrence {
  v1::Recurrence effective;  // start_at and an interval's anchor filled in
  int64_t first_ms = 0;      // the first occurrence
};

// Validates `spec.recurrence` (set) of a job scheduled at now_ms, with the
// rest of the spec: no `when`, an id leaving room for the occurrence
// suffix. INVALID_ARGUMENT naming the field under `field` ("job." or
// "requests[3].job.").
absl::StatusOr<PreparedRecurrence> PrepareRecurrence(absl::string_view field,
                                                     const v1::JobSpec& spec,
                                                     const Limits& limits,
                                                     int64_t now_ms);

// Fills `record` as the parent of a recurring job, from its prepared
// recurrence: job.recurring, fire_at, occurrences_through_ms.
void StartRecurring(const PreparedRecurrence& prepared, int64_t now_ms,
                    storage::JobRecord& record);

// Recovery: the parent's next occurrence computed again from
// occurrences_through_ms, with the tzdata of this process. Returns the
// record to store when it moved (a tzdata update changed the zone's rules),
// nullopt when it stands. A parent with a buffered occurrence, paused or
// whose recurrence no longer loads is left as it is.
std::optional<storage::JobRecord> RecomputeNextOccurrence(
    const storage::JobRecord& parent);

class OccurrenceMaker {
 public:
  struct Deps {
    storage::JobStore* store;
    timer::Clock* clock;
    KeyLocks* locks;
    JobLedger* ledger;
    Deliverer* deliverer;
    const Retention* retention;
  };

  static constexpr int kThreads = 2;
  static constexpr int64_t kRetryMs = 100;

  explicit OccurrenceMaker(const Deps& deps) : d_(deps) {}
  OccurrenceMaker(const OccurrenceMaker&) = delete;
  OccurrenceMaker& operator=(const OccurrenceMaker&) = delete;
  ~OccurrenceMaker() { Stop(); }

  // Starts / stops the workers; batches still queued at Stop are dropped
  // (their parents stay due, and fire again after a restart). Idempotent.
  void Start();
  void Stop();

  // Queues the recurring jobs `parents`, whose due entries at `ms` were
  // found marked kRecurringMark. Never blocks on I/O.
  void Enqueue(int64_t ms, std::vector<JobKey> parents);

  // True when nothing is queued and no worker is busy.
  bool Idle();

  // Handles `parents` due at `ms` under their key locks, which the caller
  // holds. One store write for all; on an error nothing changed.
  absl::Status Fire(int64_t ms, std::span<const JobKey> parents);

 private:
  struct Batch {
    int64_t ms;
    std::vector<JobKey> parents;
  };
  void Work();

  const Deps d_;
  absl::Mutex mu_;
  std::deque<Batch> queue_ ABSL_GUARDED_BY(mu_);
  int busy_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_CORE_OCCURRENCES_H_
