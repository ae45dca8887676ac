// JobLedger: the in-memory bookkeeping that follows every committed write of
// a job record, in one place. Every writer — the mutating rpcs, the fire
// path, dispatch, acks, nacks and lease ends, the sweeper — describes its
// write as a Change (the record's state before and after it) and applies it
// here, after the store has taken the write. From the two states alone the
// ledger keeps:
//   * TopicTable's live count (SCHEDULED + READY + IN_FLIGHT), their
//     payload bytes (from the Change's payload sizes) and its ready queue
//     (a live job that changes leaves it; a retry due now joins it);
//   * the terminal-state counts (TerminalStateCounter: DEAD, DONE, CANCELED);
//   * the due index counted by topic and second (DueBook), from the entry
//     the write removed and the one it added;
//   * the job's due timer (JobTimers): armed at the new due time while the
//     job waits (SCHEDULED), left alone while it is IN_FLIGHT (its timer has
//     fired; the lease has its own), dropped otherwise;
//   * the job-flow counters (DeliveryMetrics) that the states tell, and
//     those the Change's cause names (scheduled, canceled, acked, nacked).
// What it does not keep: the in-flight count and the subscribers' credit,
// which belong to the leases (delivery/), and waking the dispatcher, which
// the caller does when Apply says a job became ready.
//
// Thread-safe. REQUIRES of every caller: the key's KeyLocks held, and the
// write the Change describes committed.
#ifndef DELAYD_SERVER_JOBS_JOB_LEDGER_H_
#define DELAYD_SERVER_JOBS_JOB_LEDGER_H_

#include <cstdint>
#include <optional>
#include <span>

#include "absl/strings/string_view.h"
#include "delayd/v1/delayd.pb.h"
#include "server/jobs/due_book.h"
#include "server/jobs/job_timers.h"
#include "server/jobs/terminal_state_counter.h"
#include "server/jobs/topic_table.h"
#include "server/metrics/delivery_metrics.h"
#include "storage/mutation.h"

namespace delayd::server {

class JobLedger {
 public:
  // Why a record changed, for the counters its states cannot tell.
  enum class Cause { kOther, kScheduled, kCanceled, kAcked, kNacked };

  // One committed write of one job.
  struct Change {
    absl::string_view topic;
    absl::string_view id;
    // The stored state before and after; JOB_STATE_UNSPECIFIED: no record
    // (created, or deleted).
    v1::JobState before = v1::JOB_STATE_UNSPECIFIED;
    v1::JobState after = v1::JOB_STATE_UNSPECIFIED;
    // The record's due entry before the write (Mutation::previous_due_ms())
    // and after it (Mutation::new_due_ms()).
    std::optional<int64_t> previous_due_ms;
    std::optional<int64_t> due_ms;
    // The payload size of the stored record before the write and after it
    // (0 where there is none): what the job adds to its topic's live
    // payload bytes while it is live.
    int64_t payload_bytes_before = 0;
    int64_t payload_bytes_after = 0;
    // After SCHEDULED: the job is due already; queue it as READY at once
    // instead of arming a timer that would fire at once.
    bool ready_now = false;
    Cause cause = Cause::kOther;
  };

  // The Change a mutation makes of a record stored in state `before` with
  // a payload of `payload_bytes_before` bytes. REQUIRES: not a mark.
  static Change Of(const storage::Mutation& m, v1::JobState before,
                   int64_t payload_bytes_before, Cause cause = Cause::kOther);

  // Everything borrowed must outlive the ledger.
  JobLedger(TopicTable* topics, TerminalStateCounter* terminal,
            JobTimers* timers, DueBook* due, DeliveryMetrics* metrics)
      : topics_(topics),
        terminal_(terminal),
        timers_(timers),
        due_(due),
        metrics_(metrics) {}
  JobLedger(const JobLedger&) = delete;
  JobLedger& operator=(const JobLedger&) = delete;

  // Applies one change. Returns true when the job was queued as READY (the
  // caller kicks the topic's dispatch).
  bool Apply(const Change& c);
  // Apply of each change, with the same end state, but each table locked
  // once per run of one topic and the counts summed over it: an Ack of a
  // thousand jobs takes a few locks, not five a job. Returns how many jobs
  // were queued as READY. REQUIRES: no two changes name the same job.
  int64_t ApplyBatch(std::span<const Change> changes);

  // The job's due timer fired and its entry is in the due index at that
  // millisecond: unless its timer was disarmed or armed again since
  // (JobTimers::FiredBatch), it leaves the timers and joins the ready
  // queue. Returns false when it did not, or was queued already. Count the
  // topic's fired jobs with CountFired.
  bool Due(absl::string_view topic, absl::string_view id);
  // Due of each of a topic's ids, with one lock of the timers and one of
  // the topic table. Returns how many were queued.
  int64_t DueBatch(absl::string_view topic,
                   std::span<const absl::string_view> ids);
  void CountFired(absl::string_view topic, int64_t n);

  TopicTable& topics() { return *topics_; }
  JobTimers& timers() { return *timers_; }
  TerminalStateCounter& terminal() { return *terminal_; }
  DueBook& due() { return *due_; }
  DeliveryMetrics& metrics() { return *metrics_; }

 private:
  // ApplyBatch of changes that all name one topic.
  int64_t ApplyRun(std::span<const Change> run);

  TopicTable* const topics_;
  TerminalStateCounter* const terminal_;
  JobTimers* const timers_;
  DueBook* const due_;
  DeliveryMetrics* const metrics_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_JOBS_JOB_LEDGER_H_
