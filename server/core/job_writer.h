// JobWriter: the rpcs that change jobs — Schedule, ScheduleBatch,
// Reschedule, Cancel, CancelByPrefix and Redrive. Each validates, reads the
// stored job under its key lock, decides, writes one batch to the store,
// then applies the change to the JobLedger (counts, timer) and tells the
// Deliverer when a delivery out is superseded or canceled in flight.
//
// Durability: every write is Durability::kSync, so OK means durable (under
// --sync=always). A refused request writes nothing; a failed store write
// leaves store, timers and counts as they were.
//
// Retention (retention.h): with --retention set, an acked job is kept as
// DONE and a canceled one as CANCELED, for the retention after it finished.
// Such a retained job, like a job canceled in flight while retention is on,
// still takes its id:
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
// Schedule and Reschedule treat as absent).
//
// Thread-safe. Per-job read-modify-write is serialized by KeyLocks.
#ifndef DELAYD_SERVER_CORE_JOB_WRITER_H_
#define DELAYD_SERVER_CORE_JOB_WRITER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "delayd/v1/delayd.pb.h"
#include "server/core/commit_queue.h"
#include "server/core/occurrences.h"
#include "server/delivery/deliverer.h"
#include "server/jobs/id_generator.h"
#include "server/jobs/job_ledger.h"
#include "server/jobs/key_locks.h"
#include "server/jobs/limits.h"
#include "server/jobs/retention.h"
#include "server/timer/clock.h"
#include "storage/job_store.h"
#include "storage/mutation.h"

namespace delayd::server {

class JobWriter {
 public:
  // What the writer borrows from its owner; all must outlive it.
  struct Deps {
    storage::JobStore* store;
    timer::Clock* clock;
    const Limits* limits;
    KeyLocks* locks;
    JobLedger* ledger;
    Deliverer* deliverer;
    const Retention* retention;
  };

  explicit JobWriter(const Deps& deps) : d_(deps) {}
  // With `on`, the Async calls write on the calling thread, with
  // Durability::kSyncNoStall, instead of through the CommitQueue: for a
  // store that does not sync (--sync=none), where a write waits neither for
  // the disk nor for other calls, so the hand-offs to the queue's threads
  // would cost more than the write. A write that would stall goes to the
  // queue after all. REQUIRES: called before any Async call.
  void SetInlineWrites(bool on) { inline_writes_ = on; }
  bool inline_writes() const { return inline_writes_; }
  // Makes the calling thread the gatherer (gRPC's polling thread): from
  // now on, with inline writes, the Async calls it makes keep their
  // writes, each under its key lock, until it calls WriteGathered, which
  // writes them all as one store batch and then answers them. The calls
  // that came together share one store write (one WAL append), on the
  // thread that took them. (Not with a store that syncs: the thread would
  // wait for the disk, and every other call with it.) Async calls on
  // other threads are as before. REQUIRES: at most one gatherer.
  void GatherOnThisThread() {
    gatherer_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  }
  // On the gatherer: writes what it gathered as one batch and answers each
  // (when the batch fails or would stall, each goes through `commits`
  // instead, which writes it where it may wait, alone if need be). Returns
  // false when nothing was gathered. An answer may gather more (a stream's
  // next batch): the next call writes it.
  bool WriteGathered(CommitQueue& commits);
  // From now on a plain job committed already due (its due time at or
  // before now) is queued READY at once, instead of getting a timer that
  // fires at once and that the fire path then matches against the job's
  // millisecond of the due index. Jobs scheduled with one past fire_at all
  // share that millisecond, and each batch's match read every job there:
  // 200,000 of them scheduled in batches of 1000 cost the fire thread 78 s.
  // JobService::Start calls it: before, nothing fires.
  void StartReadying() {
    ready_at_once_.store(true, std::memory_order_relaxed);
  }
  JobWriter(const JobWriter&) = delete;
  JobWriter& operator=(const JobWriter&) = delete;

  absl::StatusOr<v1::ScheduleResponse> Schedule(const v1::ScheduleRequest& req);
  // (job_writer_async.cc, with CancelAsync)
  // Schedule without waiting on the calling thread (gRPC's): answers
  // exactly what Schedule would, through `done`, which runs on this thread
  // or, after the write, on the CommitQueue's. The job's key lock is taken
  // only if it is free, and the synced write goes to `commits`, shared
  // with the writes queued beside it. Returns false, having done nothing
  // and without calling `done`, when it would have had to wait for the key
  // lock, or when the stored job made an occurrence ahead (which needs a
  // second lock): the caller then runs Schedule where it may wait.
  using ScheduleDone =
      absl::AnyInvocable<void(absl::StatusOr<v1::ScheduleResponse>) &&>;
  bool ScheduleAsync(const v1::ScheduleRequest& req, CommitQueue& commits,
                     ScheduleDone& done);
  // (job_writer_batch.cc, with Stream)
  absl::StatusOr<v1::ScheduleBatchResponse> ScheduleBatch(
      const v1::ScheduleBatchRequest& req);
  // Requests of one ScheduleStream, in the order they came: each gets
  // exactly what its unary rpc would have answered, called alone after the
  // ones before it. A run of consecutive Schedules of distinct jobs is
  // decided together and written in one synced batch (one fsync for the
  // run). A Schedule that names a job already in the run starts a new run,
  // and one whose id holds '@' runs alone: only an occurrence's id holds
  // it, and a Schedule that replaces a recurring job may withdraw its
  // occurrence made ahead, which a later request of the same run would
  // otherwise see still there.
  std::vector<v1::StreamAnswer> Stream(
      std::span<const v1::StreamRequest* const> requests);
  absl::StatusOr<v1::RescheduleResponse> Reschedule(
      const v1::RescheduleRequest& req);
  // Reschedule without waiting on the calling thread, as ScheduleAsync
  // (job_writer_async.cc).
  using RescheduleDone =
      absl::AnyInvocable<void(absl::StatusOr<v1::RescheduleResponse>) &&>;
  bool RescheduleAsync(const v1::RescheduleRequest& req, CommitQueue& commits,
                       RescheduleDone& done);
  absl::StatusOr<v1::CancelResponse> Cancel(const v1::CancelRequest& req);
  // Cancel without waiting on the calling thread, as ScheduleAsync
  // (job_writer_async.cc).
  using CancelDone =
      absl::AnyInvocable<void(absl::StatusOr<v1::CancelResponse>) &&>;
  bool CancelAsync(const v1::CancelRequest& req, CommitQueue& commits,
                   CancelDone& done);
  // ---- job_writer_prefix.cc ----
  absl::StatusOr<v1::CancelByPrefixResponse> CancelByPrefix(
      const v1::CancelByPrefixRequest& req);
  // Puts the DEAD jobs of a topic whose id starts with a prefix back to
  // SCHEDULED, due now, attempts reset.
  absl::StatusOr<v1::RedriveResponse> Redrive(const v1::RedriveRequest& req);
  // ---- job_writer_recurring.cc ----
  absl::StatusOr<v1::PauseJobResponse> PauseJob(const v1::PauseJobRequest& req);
  absl::StatusOr<v1::ResumeJobResponse> ResumeJob(
      const v1::ResumeJobRequest& req);

 private:
  // One Schedule request after validation, ready to be decided.
  struct Planned {
    v1::ScheduleRequest request;  // with the id filled in
    int64_t due_ms = 0;
    uint64_t digest = 0;
    // Set for a recurring job; due_ms is then its first occurrence.
    std::optional<PreparedRecurrence> recurrence;
  };
  // What deciding a request against the stored job yields.
  struct Decision {
    std::optional<storage::Mutation> mutation;
    v1::Job job;  // as the reply shows it
    bool created = false;
    bool canceled = false;  // the mutation cancels the job
    absl::Status status;    // non-OK: refused (nothing to write)
    // The stored record's state; JOB_STATE_UNSPECIFIED when none.
    v1::JobState was = v1::JOB_STATE_UNSPECIFIED;
    // The stored record's payload size; 0 when none.
    int64_t was_payload_bytes = 0;
    // The deletion of the occurrence a recurring job made ahead (see
    // WithdrawAhead), written in the same batch, and that occurrence's
    // payload size.
    std::optional<storage::Mutation> withdraw;
    int64_t withdraw_payload_bytes = 0;
  };
  // Jobs read under their locks, leases overlaid; for each recurring job
  // that made an occurrence ahead (AheadChildId), that occurrence read
  // under its lock too, at the same index of `ahead` (nullopt otherwise):
  // what a write needs to withdraw it.
  struct Locked {
    std::unique_ptr<KeyLocks::Guard> guard;
    std::vector<std::optional<storage::JobRecord>> stored;
    std::vector<std::optional<storage::JobRecord>> ahead;
  };

  // Locks `hashes` (those of `keys`, in any order), and reads as Locked
  // says. A job's occurrence made ahead is known only once the job is read:
  // when one is not locked yet, the locks are let go and taken again with
  // it, and the jobs read again.
  absl::StatusOr<Locked> LockAndRead(std::span<const storage::JobKeyView> keys,
                                     std::vector<uint64_t> hashes);
  absl::StatusOr<Planned> Plan(absl::string_view field,
                               const v1::ScheduleRequest& req, int64_t now_ms);
  // Schedule of `requests` decided together and written in one synced
  // batch (ScheduleBatch, and a run of a ScheduleStream). field_of(i) names
  // request i's fields in its errors ("requests[3]." or ""). With
  // limit_reply, refuses the whole set when its results would pass
  // Limits::max_reply_bytes. The outer status fails the whole set (also a
  // failed store write); otherwise each request has its own result.
  absl::StatusOr<std::vector<absl::StatusOr<v1::ScheduleResponse>>>
  ScheduleMany(std::span<const v1::ScheduleRequest* const> requests,
               absl::FunctionRef<std::string(size_t)> field_of,
               bool limit_reply);
  // `ahead`: the occurrence the stored job made ahead (Locked).
  Decision Decide(const Planned& plan,
                  const std::optional<storage::JobRecord>& stored,
                  const std::optional<storage::JobRecord>& ahead,
                  int64_t now_ms);
  // Cancel of the stored job; fills response's outcome and job.
  Decision DecideCancel(const std::optional<storage::JobRecord>& stored,
                        const std::optional<storage::JobRecord>& ahead,
                        int64_t now_ms, v1::CancelResponse& response);
  // Changes the jobs of `topic` whose id starts with `id_prefix` (is it,
  // when `exact`) and whose state `selects` (CancelByPrefix, Redrive): in
  // synced chunks of 500, each scanned, re-read under its keys' locks,
  // decided by `decide` and written in one batch. Returns how many changed;
  // INVALID_ARGUMENT naming `prefix_field` (or "topic") for a bad topic or
  // prefix. On a store error the chunks written before it stand.
  absl::StatusOr<uint64_t> ChangeByPrefix(
      const std::string& topic, absl::string_view prefix_field,
      const std::string& id_prefix, bool exact,
      absl::FunctionRef<bool(v1::JobState)> selects,
      absl::FunctionRef<Decision(const storage::JobRecord&, int64_t)> decide);
  // After a successful write of `d`: the ledger, and the delivery out.
  void Commit(const Decision& d);
  // Whether the stored record takes its id for Schedule and Reschedule: a
  // live or DEAD job, a retained one, or (with retention on) a job canceled
  // in flight.
  bool Occupied(const std::optional<storage::JobRecord>& stored) const;
  // Writes d's mutation, if any, synced; then Commit. On a write error
  // nothing changed.
  absl::Status WriteAndCommit(const Decision& d);
  // Schedule's reply for `d`, which gives up its job.
  static v1::ScheduleResponse ScheduleReply(Decision& d);
  // The first steps of an Async call on one job, on a thread that must not
  // wait: the job's key lock, only if it is free, and the stored job with
  // its lease overlaid. nullopt, holding nothing, when it would have to
  // wait: the lock is held, or the job made an occurrence ahead, whose lock
  // it would need too (the caller then runs the call where it may wait).
  struct LockedOne {
    std::unique_ptr<KeyLocks::Guard> guard;
    std::optional<storage::JobRecord> stored;
  };
  std::optional<absl::StatusOr<LockedOne>> TryLockAndRead(
      std::string_view topic, std::string_view id);
  // Hands d's mutation to `commits` (with inline writes, writes it here
  // unless that would stall); after the write, Commit (when it succeeded),
  // the lock given back, then `reply` with the write's status.
  // `d` withdraws nothing: TryLockAndRead declines a job that made an
  // occurrence ahead.
  // With inline writes, on the gatherer, it keeps them for WriteGathered
  // instead.
  using Reply = absl::AnyInvocable<void(absl::Status, Decision&) &&>;
  void SubmitDecision(CommitQueue& commits, std::unique_ptr<Decision> d,
                      std::unique_ptr<KeyLocks::Guard> guard, Reply reply);
  // SubmitDecision through `commits`.
  void Enqueue(CommitQueue& commits, std::unique_ptr<Decision> d,
               std::unique_ptr<KeyLocks::Guard> guard, Reply reply);
  // Reschedule's checks before the lock: the key, and the due time (ms).
  absl::StatusOr<int64_t> PlanReschedule(const v1::RescheduleRequest& req,
                                         int64_t now_ms) const;
  // Reschedule decided against the stored job (and its occurrence made
  // ahead): a refusal naming the state, or the record to write.
  absl::StatusOr<Decision> DecideReschedule(
      const v1::RescheduleRequest& req, int64_t due_ms,
      const std::optional<storage::JobRecord>& stored,
      const std::optional<storage::JobRecord>& ahead, int64_t now_ms);
  // Reschedule's reply for `d`, which gives up its job.
  static v1::RescheduleResponse RescheduleReply(Decision& d);
  // Reschedule of a recurring job (`stored`, SCHEDULED or PAUSED) with a
  // new recurrence: validated, its schedule restarted from now.
  absl::StatusOr<Decision> DecideRescheduleRecurring(
      const v1::RescheduleRequest& req, const storage::JobRecord& stored,
      const std::optional<storage::JobRecord>& ahead, int64_t now_ms);
  // PauseJob (pause) and ResumeJob (!pause).
  absl::StatusOr<v1::Job> SetPaused(const v1::JobKey& key, bool pause);

  // Constant after construction.
  const Deps d_;
  bool inline_writes_ = false;  // constant once calls come
  std::atomic<std::thread::id> gatherer_;
  // A decision kept by the gatherer for WriteGathered, with its lock.
  struct Gathered {
    std::unique_ptr<Decision> d;
    std::unique_ptr<KeyLocks::Guard> guard;
    Reply reply;
  };
  std::vector<Gathered> gathered_;  // the gatherer's alone
  std::atomic<bool> ready_at_once_{false};
  IdGenerator ids_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_CORE_JOB_WRITER_H_
