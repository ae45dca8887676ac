// JobService: the job logic behind the scheduling rpcs — validate, read the
// stored job, decide, write one batch to the store, then move the job's
// timer. Takes and returns API protos and absl::Status; knows nothing of
// gRPC transport, so tests drive it directly over an in-memory store and a
// fake clock.
//
// Durability: Schedule, ScheduleBatch, Reschedule, Cancel and CancelByPrefix
// write with Durability::kSync, so OK means durable (under --sync=always).
// A refused request writes nothing; a failed store write leaves store, timers
// and counts as they were.
//
// Firing: the Scheduler hands fired tags to OnFired (on the timer thread),
// which queues them; a worker thread matches them against the due index and
// moves the due jobs to their topic's ready queue, then kicks the Deliverer
// (deliverer.h), which owns subscriptions and leases. Lease timers share the
// Scheduler (tags with kLeaseTagBit) and are handed to the Deliverer.
//
// DEAD counts: Recover reads only the due index; Start runs a background
// scan of the job records that adds the DEAD jobs (TerminalStateCounter), and
// the DONE and CANCELED ones.
//
// Retention (retention.h): with --retention set, an acked job is kept as
// DONE and a canceled one as CANCELED, for the retention after it finished;
// the Sweeper (its own thread) then deletes it. Such a retained job, like a
// job canceled in flight while retention is on, still takes its id:
//   * Schedule, IF_EXISTS_FAIL: an identical retry (same spec digest)
//     returns the finished job, created = false — the retry of a request
//     whose job already ran does not run it again; a different spec is
//     ALREADY_EXISTS naming the state. IF_EXISTS_KEEP returns the finished
//     job. IF_EXISTS_REPLACE schedules a new job (created_at now).
//   * Reschedule: FAILED_PRECONDITION naming the state.
//   * Cancel: ALREADY_DONE for DONE; CANCELED again for CANCELED (nothing
//     written, the expiry not extended).
// With retention off none of this arises: finished jobs are deleted (a job
// canceled in flight keeps a CANCELED record until its delivery ends, which
// Schedule and Reschedule treat as absent, as before).
//
// Memory horizon (SetMemoryHorizon, off by default): only jobs due within
// the horizon from now have a timer (JobTimers); the others live only in
// the store. A loader thread, woken by a timer of its own (kHorizonTag)
// every quarter of the horizon, moves the horizon on and arms the jobs that
// came within it from the due index, each well before its due time.
//
// Thread-safe. Per-job read-modify-write is serialized by KeyLocks.
#ifndef DELAYD_SERVER_CORE_JOB_SERVICE_H_
#define DELAYD_SERVER_CORE_JOB_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "delayd/v1/delayd.pb.h"
#include "server/core/sweeper.h"
#include "server/delivery/deliverer.h"
#include "server/jobs/id_generator.h"
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
  void SetMemoryHorizon(absl::Duration horizon);
  // The due time up to which jobs have timers; JobTimers::kNoHorizon
  // without a horizon.
  int64_t memory_horizon_ms() const { return timers_.horizon(); }

  // Rebuilds the timers and counts from the store's due index. Call once,
  // before Start.
  absl::StatusOr<RecoveryStats> Recover();
  // Starts the timer, fire and delivery threads, the sweeper (when there is
  // anything to sweep), and the background scan that counts DEAD, DONE and
  // CANCELED jobs.
  void Start();
  // Stops them; pending timers stay unfired. Idempotent.
  void Stop();

  absl::StatusOr<v1::ScheduleResponse> Schedule(const v1::ScheduleRequest& req);
  absl::StatusOr<v1::ScheduleBatchResponse> ScheduleBatch(
      const v1::ScheduleBatchRequest& req);
  absl::StatusOr<v1::RescheduleResponse> Reschedule(
      const v1::RescheduleRequest& req);
  absl::StatusOr<v1::CancelResponse> Cancel(const v1::CancelRequest& req);
  absl::StatusOr<v1::CancelByPrefixResponse> CancelByPrefix(
      const v1::CancelByPrefixRequest& req);
  absl::StatusOr<v1::Job> GetJob(const v1::GetJobRequest& req);
  absl::StatusOr<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest& req);
  absl::StatusOr<v1::GetStatsResponse> GetStats(const v1::GetStatsRequest& req);

  // Delivery (see Deliverer).
  absl::StatusOr<v1::AckResponse> Ack(const v1::AckRequest& req) {
    return deliverer_->Ack(req);
  }
  absl::StatusOr<v1::NackResponse> Nack(const v1::NackRequest& req) {
    return deliverer_->Nack(req);
  }
  absl::StatusOr<v1::ExtendLeaseResponse> ExtendLease(
      const v1::ExtendLeaseRequest& req) {
    return deliverer_->ExtendLease(req);
  }
  // Puts the DEAD jobs of a topic whose id starts with a prefix back to
  // SCHEDULED, due now, attempts reset; synced like Schedule.
  absl::StatusOr<v1::RedriveResponse> Redrive(const v1::RedriveRequest& req);

  Deliverer& deliverer() { return *deliverer_; }
  Sweeper& sweeper() { return sweeper_; }
  const Retention& retention() const { return retention_; }
  // True when the fire and delivery threads have nothing queued and are not
  // working (the timer thread may still hold due timers).
  bool IdleForTesting();
  const TopicTable& topics() const { return topics_; }
  size_t timers_pending() const { return scheduler_.size(); }

 private:
  // One Schedule request after validation, ready to be decided.
  struct Planned {
    v1::ScheduleRequest request;  // with the id filled in
    int64_t due_ms = 0;
    uint64_t digest = 0;
  };
  // What deciding a planned request against the stored job yields.
  struct Decision {
    std::optional<storage::Mutation> mutation;
    v1::Job job;  // as the reply shows it
    bool created = false;
    bool canceled = false;  // the mutation cancels the job
    absl::Status status;    // non-OK: refused (nothing to write)
    // The stored record's state; JOB_STATE_UNSPECIFIED when none.
    v1::JobState was = v1::JOB_STATE_UNSPECIFIED;
  };

  absl::StatusOr<Planned> Plan(absl::string_view field,
                               const v1::ScheduleRequest& req, int64_t now_ms);
  Decision Decide(const Planned& plan,
                  const std::optional<storage::JobRecord>& stored,
                  int64_t now_ms);
  // Cancel of the stored job; fills response's outcome and job.
  Decision DecideCancel(const std::optional<storage::JobRecord>& stored,
                        int64_t now_ms, v1::CancelResponse& response);
  // Changes the jobs of `topic` whose id starts with `id_prefix` and whose
  // state `selects` (CancelByPrefix, Redrive): in synced chunks of 500, each
  // scanned, re-read under its keys' locks, decided by `decide` and written
  // in one batch. Returns how many changed. On a store error the chunks
  // written before it stand.
  absl::StatusOr<uint64_t> ChangeByPrefix(
      const std::string& topic, const std::string& id_prefix,
      absl::FunctionRef<bool(v1::JobState)> selects,
      absl::FunctionRef<Decision(const storage::JobRecord&, int64_t)> decide);
  // After a successful write of `d`: timers and counts.
  void Commit(const Decision& d);
  // Whether the stored record takes its id for Schedule and Reschedule: a
  // live or DEAD job, a retained one, or (with retention on) a job canceled
  // in flight.
  bool Occupied(const std::optional<storage::JobRecord>& stored) const;
  // Writes d's mutation, if any, synced; then Commit. On a write error
  // nothing changed.
  absl::Status WriteAndCommit(const Decision& d);

  // The job as clients see it: a SCHEDULED job whose time has come is READY.
  v1::Job Present(const storage::JobRecord& record, int64_t now_ms) const;

  void OnFired(std::vector<timer::TimerEntry> fired);
  void FireLoop();
  void FireBatch(const std::vector<timer::TimerEntry>& all);

  // ---- job_service_horizon.cc ----
  // How often the loader moves the horizon: a quarter of it, 100 ms-60 s.
  int64_t HorizonStepMs() const;
  void HorizonLoop();
  // Moves the horizon to now + horizon and arms the jobs it passed.
  void AdvanceHorizon();

  // Constant after construction.
  storage::JobStore* const store_;
  timer::Clock* const clock_;
  const Limits limits_;
  std::unique_ptr<DeliveryMetrics> own_metrics_;  // when none was given
  DeliveryMetrics* const metrics_;
  const Retention retention_;

  IdGenerator ids_;
  KeyLocks locks_;
  TopicTable topics_;
  timer::Scheduler scheduler_;
  JobTimers timers_;
  TerminalStateCounter dead_;
  JobLedger ledger_;
  std::unique_ptr<Deliverer> deliverer_;
  Sweeper sweeper_;

  absl::Mutex fire_mu_;
  std::deque<std::vector<timer::TimerEntry>> fire_queue_
      ABSL_GUARDED_BY(fire_mu_);
  bool fire_stop_ ABSL_GUARDED_BY(fire_mu_) = false;
  bool fire_busy_ ABSL_GUARDED_BY(fire_mu_) = false;
  std::thread fire_thread_;

  std::atomic<bool> dead_scan_stop_{false};
  std::thread dead_scan_thread_;

  int64_t horizon_ms_ = 0;  // 0: no memory horizon; set before Recover
  absl::Mutex horizon_mu_;
  bool horizon_due_ ABSL_GUARDED_BY(horizon_mu_) = false;
  bool horizon_stop_ ABSL_GUARDED_BY(horizon_mu_) = false;
  std::thread horizon_thread_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_CORE_JOB_SERVICE_H_
