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
//   * makes occurrences into one-shot children `<id>@<nominal unix ms>`
//     (payload, retry and labels of the parent; due at the nominal time
//     plus the jitter; job.occurrence_of set), which then live as any
//     one-shot job;
//   * advances the parent: counts, last occurrence, next occurrence, or
//     DONE (through Retention) when the schedule has ended.
//
// Made ahead. A parent is due a lead before its next occurrence
// (LeadMs: at most kMaxLeadMs, at most half the time since the previous
// one), so that the occurrence's writes are done before its instant and it
// fires as a one-shot job would, from the due index. Handled then, the
// parent makes that one occurrence ahead (JobRecord.made_ahead, its due
// entry marked kAheadMark) when the overlap policy allows it already: the
// previous occurrence has ended (an ended job stays ended; a Redrive of a
// DEAD one is the documented exception), or ALLOW. Otherwise (the previous
// one still live, or one buffered) the parent becomes due at the
// occurrence itself and decides there, as below. The parent keeps in
// ahead_ms and last_before_ahead_ms what withdrawing the occurrence needs:
// Pause, Reschedule, Cancel and Schedule IF_EXISTS_REPLACE withdraw one not
// yet due (WithdrawAhead), and recovery withdraws one whose time passed
// more than kMisfireThresholdMs before the start, so that the misfire
// policy decides it as if it had never been made.
//
// At the occurrence (a parent due at or after it: not made ahead, after a
// downtime, after a resume), the planner (recurring/planner.h) says which
// occurrences are made now, by the misfire policy.
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
// occurrence counts as overlapped (and is not made ahead).
//
// A failed read or write is tried again kRetryMs later, the same parents at
// the same millisecond, until it succeeds or Stop.
//
// Thread-safe.
#ifndef DELAYD_SERVER_CORE_OCCURRENCES_H_
#define DELAYD_SERVER_CORE_OCCURRENCES_H_

#include <cstdint>
#include <deque>
#include <optional>
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
#include "storage/mutation.h"

namespace delayd::server {

// An occurrence's id is `<id>@<nominal unix ms>`: a recurring job's id
// leaves room for it.
inline constexpr size_t kOccurrenceSuffixBytes = 20;
// BUFFER_ONE: how often a parent with a buffered occurrence looks again.
inline constexpr int64_t kBufferRecheckMs = 1000;
// The longest lead an occurrence is made ahead by.
inline constexpr int64_t kMaxLeadMs = 10'000;

// How long before occurrence `next_ms` a parent whose occurrences are
// handled through `through_ms` is due: min(kMaxLeadMs, half the gap), never
// negative. Half the gap: the previous occurrence has come by then, and at
// most one occurrence is ever made ahead.
int64_t LeadMs(int64_t through_ms, int64_t next_ms);

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

// The occurrence `parent` made ahead, when it can still be withdrawn: the
// record `ahead` (read under its lock, leases overlaid) is that child, no
// delivery has reached it, and it is due after `due_after_ms` (the time of
// the call: not due yet). Returns its deletion, and rewinds `parent` (a
// copy of the stored one) to before it was made: its next occurrence is
// that one again, the count and last occurrence as they were, its due
// time that occurrence. nullopt (parent untouched) otherwise.
std::optional<storage::Mutation> WithdrawAhead(
    storage::JobRecord& parent, const std::optional<storage::JobRecord>& ahead,
    int64_t due_after_ms);

// The key of the occurrence `record` made ahead last, if it is a live
// recurring job that did; the child may have been delivered since.
std::optional<std::string> AheadChildId(const storage::JobRecord& record);

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
