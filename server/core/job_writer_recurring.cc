// JobWriter: the writes only recurring jobs have — a new recurrence by
// Reschedule, PauseJob and ResumeJob.
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/core/job_writer.h"
#include "server/jobs/job_key.h"
#include "server/jobs/present.h"
#include "server/jobs/validation.h"
#include "storage/job_record.h"

namespace delayd::server {
namespace {

using storage::DueIndexEntryOf;
using storage::IsFinished;
using storage::JobRecord;
using storage::Mutation;
using storage::PayloadBytesOf;
using storage::TimestampToUnixMs;
using storage::UnixMsToTimestamp;

std::string KeyText(const v1::JobKey& key) {
  return absl::StrCat("(", key.topic(), ", \"", key.id(), "\")");
}

}  // namespace

absl::StatusOr<JobWriter::Decision> JobWriter::DecideRescheduleRecurring(
    const v1::RescheduleRequest& req, const JobRecord& stored,
    const std::optional<JobRecord>& ahead, int64_t now_ms) {
  if (req.when_case() != v1::RescheduleRequest::WHEN_NOT_SET) {
    return absl::InvalidArgumentError(
        absl::StrCat(req.has_delay() ? "delay" : "fire_at",
                     ": must be unset for a recurring job (its recurrence "
                     "says when)"));
  }
  // Validated as a spec of this job would be.
  v1::JobSpec spec;
  spec.set_id(stored.job().id());
  *spec.mutable_recurrence() = req.recurrence();
  absl::StatusOr<PreparedRecurrence> prepared =
      PrepareRecurrence("", spec, *d_.limits, now_ms);
  if (!prepared.ok()) return prepared.status();
  JobRecord record = stored;
  // Its occurrence made ahead, not due yet, is of the old schedule.
  std::optional<Mutation> withdraw = WithdrawAhead(record, ahead, now_ms);
  const int64_t withdraw_payload_bytes = ahead ? PayloadBytesOf(*ahead) : 0;
  v1::Job& job = *record.mutable_job();
  // The counts stay: it is the same job with a new schedule.
  const v1::RecurringStatus old = job.recurring();
  StartRecurring(*prepared, now_ms, record);
  v1::RecurringStatus& r = *job.mutable_recurring();
  r.set_occurrences_fired(old.occurrences_fired());
  r.set_occurrences_skipped(old.occurrences_skipped());
  if (old.has_last_occurrence()) {
    *r.mutable_last_occurrence() = old.last_occurrence();
  }
  *job.mutable_updated_at() = UnixMsToTimestamp(now_ms);
  Decision d;
  d.was = stored.job().state();
  d.was_payload_bytes = PayloadBytesOf(stored);
  d.job = PresentJob(record, now_ms);
  d.mutation = Mutation::Put(std::move(record), DueIndexEntryOf(stored));
  d.withdraw = std::move(withdraw);
  d.withdraw_payload_bytes = withdraw_payload_bytes;
  return d;
}

absl::StatusOr<v1::Job> JobWriter::SetPaused(const v1::JobKey& key,
                                             bool pause) {
  if (absl::Status s = ValidateKey("key", key, *d_.limits); !s.ok()) return s;
  const int64_t now_ms = d_.clock->NowMs();
  const storage::JobKeyView view{key.topic(), key.id()};
  absl::StatusOr<Locked> locked =
      LockAndRead({&view, 1}, {KeyHash(key.topic(), key.id())});
  if (!locked.ok()) return locked.status();
  const std::optional<JobRecord>* stored = &locked->stored[0];
  if (!stored->has_value() || IsFinished((*stored)->job().state())) {
    return absl::NotFoundError(
        absl::StrCat("key: no recurring job ", KeyText(key)));
  }
  const JobRecord& old = **stored;
  if (!old.job().has_recurring()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "key: job ", KeyText(key),
        " is not recurring; only a recurring job pauses (Cancel or "
        "Reschedule a one-shot job)"));
  }
  const bool paused = old.job().state() == v1::JOB_STATE_PAUSED;
  if (paused == pause) return PresentJob(old, now_ms);  // already so
  JobRecord record = old;
  v1::Job& job = *record.mutable_job();
  std::optional<Mutation> withdraw;
  int64_t withdraw_payload_bytes = 0;
  if (pause) {
    // Its occurrence made ahead, not due yet, is withdrawn: the next
    // occurrence is that one again.
    withdraw = WithdrawAhead(record, locked->ahead[0], now_ms);
    withdraw_payload_bytes =
        locked->ahead[0] ? PayloadBytesOf(*locked->ahead[0]) : 0;
    // No due entry while paused; fire_at keeps the next occurrence, to show.
    job.set_state(v1::JOB_STATE_PAUSED);
    if (job.recurring().has_next_occurrence()) {
      *job.mutable_fire_at() = job.recurring().next_occurrence();
    }
  } else {
    // Due a lead before its next occurrence, past ones included: the fire
    // path treats those missed while paused as misfires.
    job.set_state(v1::JOB_STATE_SCHEDULED);
    job.clear_last_error();
    const v1::RecurringStatus& r = job.recurring();
    int64_t due = std::numeric_limits<int64_t>::max();
    if (r.has_next_occurrence()) {
      const int64_t next = TimestampToUnixMs(r.next_occurrence());
      due = next - LeadMs(record.occurrences_through_ms(), next);
    }
    if (r.has_buffered_occurrence()) due = std::min(due, now_ms);
    if (!r.has_next_occurrence() && !r.has_buffered_occurrence()) {
      // Paused by the fire path past its end: it finishes now.
      due = now_ms;
    }
    *job.mutable_fire_at() = UnixMsToTimestamp(due);
  }
  *job.mutable_updated_at() = UnixMsToTimestamp(now_ms);
  Decision d;
  d.was = old.job().state();
  d.was_payload_bytes = PayloadBytesOf(old);
  d.job = PresentJob(record, now_ms);
  d.mutation = Mutation::Put(std::move(record), DueIndexEntryOf(old));
  d.withdraw = std::move(withdraw);
  d.withdraw_payload_bytes = withdraw_payload_bytes;
  if (absl::Status s = WriteAndCommit(d); !s.ok()) return s;
  return std::move(d.job);
}

absl::StatusOr<v1::PauseJobResponse> JobWriter::PauseJob(
    const v1::PauseJobRequest& req) {
  absl::StatusOr<v1::Job> job = SetPaused(req.key(), true);
  if (!job.ok()) return job.status();
  v1::PauseJobResponse response;
  *response.mutable_job() = *std::move(job);
  return response;
}

absl::StatusOr<v1::ResumeJobResponse> JobWriter::ResumeJob(
    const v1::ResumeJobRequest& req) {
  absl::StatusOr<v1::Job> job = SetPaused(req.key(), false);
  if (!job.ok()) return job.status();
  v1::ResumeJobResponse response;
  *response.mutable_job() = *std::move(job);
  return response;
}

}  // namespace delayd::server
