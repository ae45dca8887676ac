// JobService: the job logic behind the rpcs, owner and face of its parts.
// Takes and returns API messages and absl::Status; knows nothing of gRPC
// transport, so tests drive it directly over an in-memory store and a fake
// clock. Its parts, each a type of its own:
//   JobWriter      Schedule, ScheduleBatch, Reschedule, Cancel,
//                  CancelByPrefix, Redrive (synced writes)
//   JobQuery       GetJob, ListJobs, GetStats, PreviewSchedule
//   FirePath       fired timers -> the due index -> ready queues
//   HorizonLoader  the memory horizon (--memory-horizon)
//   Deliverer      subscribers, leases, Ack/Nack/ExtendLease (delivery/)
//   Sweeper        deletes retained jobs once they expire (--retention)
// and the state they share: the Scheduler (timing wheel thread), KeyLocks,
// and the bookkeeping kept by JobLedger — TopicTable, JobTimers,
// TerminalStateCounter, the job-flow metrics.
//
// Recovery: Recover reads only the due index (the fast path): it rebuilds
// the timers and the live counts. Start then runs a background scan of the
// job records that counts the DEAD, DONE and CANCELED jobs
// (TerminalStateCounter) and finishes canceled-in-flight records left over
// from an earlier process; after a read error it tries again (100 ms,
// doubling up to 5 s, by the injected clock) until it succeeds or Stop.
//
// Thread-safe. Per-job read-modify-write is serialized by KeyLocks.
#ifndef DELAYD_SERVER_CORE_JOB_SERVICE_H_
#define DELAYD_SERVER_CORE_JOB_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "delayd/v1/delayd.pb.h"
#include "server/core/fire_path.h"
#include "server/core/horizon_loader.h"
#include "server/core/job_query.h"
#include "server/core/job_writer.h"
#include "server/core/occurrences.h"
#include "server/core/sweeper.h"
#include "server/delivery/deliverer.h"
#include "server/jobs/job_ledger.h"
#include "server/jobs/job_timers.h"
#include "server/jobs/key_locks.h"
#include "server/jobs/limits.h"
#include "server/jobs/retention.h"
#include "server/jobs/terminal_state_counter.h"
#include "server/jobs/topic_table.h"
#include "server/metrics/delivery_metrics.h"
#include "server/timer/clock.h"
#include "server/timer/scheduler.h"
#include "storage/job_store.h"

namespace delayd::server {

class JobService {
 public:
  struct RecoveryStats {
    int64_t jobs = 0;     // live jobs found in the due index
    int64_t overdue = 0;  // of which already due (they fire at once)
    // Of which were out for delivery when the last process ended (their due
    // entry had an attempt mark), now IN_FLIGHT records without a lease.
    int64_t in_flight = 0;
    // Of which recurring jobs, and those whose next occurrence moved
    // (computed again with this process's tzdata).
    int64_t recurring = 0;
    int64_t recurring_moved = 0;
    // Occurrences made ahead whose time passed more than the misfire
    // threshold before the start: withdrawn, left to the misfire policy.
    int64_t ahead_withdrawn = 0;
    absl::Duration duration;
  };

  // `store`, `clock` and `metrics` must outlive the service. Without
  // `metrics` the service counts into a registry of its own. `retention`:
  // how long finished jobs are kept (0: not at all); REQUIRES: within
  // [0, Retention::kMax].
  JobService(storage::JobStore* store, timer::Clock* clock,
             const Limits& limits, DeliveryMetrics* metrics = nullptr,
             absl::Duration retention = absl::ZeroDuration());
  JobService(const JobService&) = delete;
  JobService& operator=(const JobService&) = delete;
  ~JobService();

  // Keeps timers only for jobs due within `horizon` from now (zero: no
  // horizon, every job has one). REQUIRES: horizon zero or >= 1 s; called
  // before Recover.
  void SetMemoryHorizon(absl::Duration horizon) {
    horizon_.SetHorizon(horizon);
  }
  // Whether the unary Schedule, Reschedule and Cancel write on gRPC's
  // thread instead of through the commit queue
  // (JobWriter::SetInlineWrites): for a store that does not sync. REQUIRES:
  // called before the service serves.
  void SetInlineWrites(bool on) { writer_.SetInlineWrites(on); }
  bool inline_writes() const { return writer_.inline_writes(); }
  // JobWriter::GatherOnThisThread and WriteGathered.
  void GatherOnThisThread() { writer_.GatherOnThisThread(); }
  bool WriteGathered() { return writer_.WriteGathered(commits_); }
  // How crowds are taken ahead (FirePath::SchedulerAhead; lead_ms 0: not
  // at all). REQUIRES: called before Start.
  void SetFireAhead(int64_t lead_ms, size_t min_jobs) {
    scheduler_.SetAhead(FirePath::SchedulerAhead(lead_ms, min_jobs));
  }
  // The due time up to which jobs have timers; JobTimers::kNoHorizon
  // without a horizon.
  int64_t memory_horizon_ms() const { return timers_.horizon(); }

  // Rebuilds the timers and counts from the store's due index, and writes
  // each job whose due entry has an attempt mark (a delivery out when the
  // last process ended: its lease is gone) as IN_FLIGHT with the marked
  // attempts, so Dispatch delivers it again as the next attempt, or makes
  // it DEAD when none is left. Call once, before Start.
  // Before that, it withdraws the occurrences made ahead whose time passed
  // more than the misfire threshold ago (the server was down through it):
  // their recurring jobs then plan them by the misfire policy.
  // recompute_recurring: compute every recurring job's next occurrence
  // again (a read per recurring job): the caller knows the tzdata changed,
  // or cannot tell.
  absl::StatusOr<RecoveryStats> Recover(bool recompute_recurring = true);
  // Starts the timer, fire and delivery threads, the horizon loader and
  // the sweeper (when they have anything to do), and the background scan
  // that counts DEAD, DONE and CANCELED jobs.
  void Start();
  // Stops them; pending timers stay unfired. Idempotent.
  void Stop();

  absl::StatusOr<v1::ScheduleResponse> Schedule(
      const v1::ScheduleRequest& req) {
    return writer_.Schedule(req);
  }
  // Schedule, Reschedule and Cancel for a caller that must not wait
  // (JobWriter::ScheduleAsync): false when it would have to, and the caller
  // then runs Schedule, Reschedule or Cancel.
  bool ScheduleAsync(const v1::ScheduleRequest& req,
                     JobWriter::ScheduleDone& done) {
    return writer_.ScheduleAsync(req, commits_, done);
  }
  bool RescheduleAsync(const v1::RescheduleRequest& req,
                       JobWriter::RescheduleDone& done) {
    return writer_.RescheduleAsync(req, commits_, done);
  }
  bool CancelAsync(const v1::CancelRequest& req, JobWriter::CancelDone& done) {
    return writer_.CancelAsync(req, commits_, done);
  }
  absl::StatusOr<v1::ScheduleBatchResponse> ScheduleBatch(
      const v1::ScheduleBatchRequest& req) {
    return writer_.ScheduleBatch(req);
  }
  // The requests of a ScheduleStream, answered in order (JobWriter::Stream).
  std::vector<v1::StreamAnswer> Stream(
      std::span<const v1::StreamRequest* const> requests) {
    return writer_.Stream(requests);
  }
  absl::StatusOr<v1::RescheduleResponse> Reschedule(
      const v1::RescheduleRequest& req) {
    return writer_.Reschedule(req);
  }
  absl::StatusOr<v1::CancelResponse> Cancel(const v1::CancelRequest& req) {
    return writer_.Cancel(req);
  }
  absl::StatusOr<v1::CancelByPrefixResponse> CancelByPrefix(
      const v1::CancelByPrefixRequest& req) {
    return writer_.CancelByPrefix(req);
  }
  // Puts the DEAD jobs of a topic whose id starts with a prefix back to
  // SCHEDULED, due now, attempts reset; synced like Schedule.
  absl::StatusOr<v1::RedriveResponse> Redrive(const v1::RedriveRequest& req) {
    return writer_.Redrive(req);
  }
  // Recurring jobs: stop and restart their schedule.
  absl::StatusOr<v1::PauseJobResponse> PauseJob(
      const v1::PauseJobRequest& req) {
    return writer_.PauseJob(req);
  }
  absl::StatusOr<v1::ResumeJobResponse> ResumeJob(
      const v1::ResumeJobRequest& req) {
    return writer_.ResumeJob(req);
  }
  absl::StatusOr<v1::Job> GetJob(const v1::GetJobRequest& req) {
    return query_.GetJob(req);
  }
  absl::StatusOr<v1::ListJobsResponse> ListJobs(
      const v1::ListJobsRequest& req) {
    return query_.ListJobs(req);
  }
  absl::StatusOr<v1::GetStatsResponse> GetStats(
      const v1::GetStatsRequest& req) {
    return query_.GetStats(req);
  }
  absl::StatusOr<v1::PreviewScheduleResponse> PreviewSchedule(
      const v1::PreviewScheduleRequest& req) {
    return query_.PreviewSchedule(req);
  }

  // Delivery (see Deliverer).
  absl::StatusOr<v1::AckResponse> Ack(const v1::AckRequest& req) {
    return deliverer_.Ack(req);
  }
  absl::StatusOr<v1::NackResponse> Nack(const v1::NackRequest& req) {
    return deliverer_.Nack(req);
  }
  absl::StatusOr<v1::ExtendLeaseResponse> ExtendLease(
      const v1::ExtendLeaseRequest& req) {
    return deliverer_.ExtendLease(req);
  }

  Deliverer& deliverer() { return deliverer_; }
  Sweeper& sweeper() { return sweeper_; }
  const Retention& retention() const { return retention_; }
  // True when the fire and delivery threads have nothing queued and are not
  // working (the timer thread may still hold due timers).
  bool IdleForTesting() {
    return fire_.Idle() && occurrences_.Idle() && deliverer_.IdleForTesting();
  }
  // True when the fire thread has dealt with every timer fired and due by
  // now (a crowd taken ahead may still wait for its millisecond).
  bool FireSettledForTesting() { return fire_.SettledForTesting(); }
  // True when the timer thread has fired every timer due by the clock's now
  // (Scheduler::SleepsPastForTesting): what a clock move brings is then
  // handed on, to be seen by IdleForTesting.
  bool TimersSettledForTesting() {
    return scheduler_.SleepsPastForTesting(clock_->NowMs());
  }
  const CommitQueue& commits() const { return commits_; }
  // The jobs' key locks, to hold one in a test.
  KeyLocks& LocksForTesting() { return locks_; }
  const TopicTable& topics() const { return topics_; }
  const Limits& limits() const { return limits_; }
  size_t timers_pending() const { return scheduler_.size(); }

 private:
  // A due entry with an attempt mark, found by Recover.
  struct Marked {
    std::string topic;
    std::string id;
    int64_t due_ms;
    uint32_t attempt;
  };
  // Reads the records of keys key(0..n-1) in chunks of 1024 and writes, one
  // synced batch per chunk, the mutations `rewrite` makes of them (nullopt:
  // none; absent records are skipped). Returns how many were written; on an
  // error the chunks before it stand.
  absl::StatusOr<int64_t> RewriteChunked(
      size_t n, absl::FunctionRef<storage::JobKeyView(size_t)> key,
      absl::FunctionRef<std::optional<storage::Mutation>(size_t,
                                                         storage::JobRecord&)>
          rewrite);
  // Computes the next occurrence of the recurring jobs `parents` again (a
  // tzdata update may have moved it) and stores those that moved, adding
  // their timers to `entries`. Returns how many moved.
  absl::StatusOr<int64_t> RecomputeRecurring(
      const std::vector<JobKey>& parents,
      std::vector<JobTimers::Entry>& entries);
  // Withdraws the occurrences made ahead (due entries marked kAheadMark)
  // due before `cutoff_ms`, rewinding their parents, in synced chunks, so
  // that the parents fire at once and plan them as misfires. Returns how
  // many were withdrawn.
  absl::StatusOr<int64_t> WithdrawMisfiredAhead(int64_t cutoff_ms);
  // Writes the jobs of `marked` as IN_FLIGHT with the marked attempts (see
  // Recover), in synced chunks.
  absl::Status RecoverInFlight(const std::vector<Marked>& marked);
  // The terminal-state scan thread's body: counts, retrying after read
  // errors, then hands the leftover CANCELED records to the Deliverer.
  void ScanTerminalStates();

  // Constant after construction.
  storage::JobStore* const store_;
  timer::Clock* const clock_;
  const Limits limits_;
  std::unique_ptr<DeliveryMetrics> own_metrics_;  // when none was given
  DeliveryMetrics* const metrics_;
  const Retention retention_;

  // The shared state (declared before the parts that borrow it).
  KeyLocks locks_;
  TopicTable topics_;
  timer::Scheduler scheduler_;
  JobTimers timers_;
  TerminalStateCounter terminal_;
  DueBook due_;
  JobLedger ledger_;

  // The parts.
  Deliverer deliverer_;
  HorizonLoader horizon_;
  OccurrenceMaker occurrences_;
  FirePath fire_;
  JobWriter writer_;
  JobQuery query_;
  Sweeper sweeper_;
  // After writer_, whose commits its callbacks finish: destroyed first, it
  // answers what is queued while the writer is still there.
  CommitQueue commits_;

  std::atomic<bool> terminal_scan_stop_{false};
  std::unique_ptr<timer::Clock::Waiter> terminal_scan_waiter_;  // by Start
  std::thread terminal_scan_thread_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_CORE_JOB_SERVICE_H_
