// JobService: Redrive — DEAD jobs back to SCHEDULED, due now.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/core/job_service.h"
#include "server/jobs/job_key.h"
#include "server/jobs/validation.h"
#include "storage/job_record.h"

namespace delayd::server {

absl::StatusOr<v1::RedriveResponse> JobService::Redrive(
    const v1::RedriveRequest& req) {
  if (absl::Status s = ValidateTopic("topic", req.topic(), limits_); !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateIdPrefix("id_prefix", req.id_prefix(), limits_);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<uint64_t> redriven = ChangeByPrefix(
      req.topic(), req.id_prefix(),
      [](v1::JobState state) { return state == v1::JOB_STATE_DEAD; },
      [](const storage::JobRecord& old, int64_t now_ms) {
        storage::JobRecord record = old;
        v1::Job& job = *record.mutable_job();
        job.set_state(v1::JOB_STATE_SCHEDULED);
        job.set_attempts(0);
        *job.mutable_fire_at() = storage::UnixMsToTimestamp(now_ms);
        *job.mutable_updated_at() = storage::UnixMsToTimestamp(now_ms);
        record.set_lease_expires_at_ms(0);
        Decision d;
        d.was = v1::JOB_STATE_DEAD;
        d.mutation = storage::Mutation::Put(std::move(record),
                                            storage::DueIndexEntryOf(old));
        return d;
      });
  if (!redriven.ok()) return redriven.status();
  v1::RedriveResponse response;
  response.set_redriven(*redriven);
  return response;
}

}  // namespace delayd::server
