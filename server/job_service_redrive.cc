// JobService: Redrive — DEAD jobs back to SCHEDULED, due now.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/job_key.h"
#include "server/job_service.h"
#include "server/validation.h"
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
  constexpr size_t kChunk = 500;
  v1::RedriveResponse response;
  std::string after;
  bool more = true;
  while (more) {
    // A chunk of DEAD ids, then one synced write under their locks,
    // re-reading each: a job may have changed since the scan.
    std::vector<std::string> ids;
    more = false;
    absl::Status scan =
        store_->ScanJobs(req.topic(), req.id_prefix(), after,
                         [&](const storage::JobRecord& record) {
                           if (ids.size() == kChunk) {
                             more = true;
                             return false;
                           }
                           if (record.job().state() == v1::JOB_STATE_DEAD) {
                             ids.push_back(record.job().id());
                           }
                           after = record.job().id();
                           return true;
                         });
    if (!scan.ok()) return scan;
    if (ids.empty()) break;
    const int64_t now_ms = clock_->NowMs();
    std::vector<uint64_t> hashes;
    std::vector<storage::JobKeyView> keys;
    for (const std::string& id : ids) {
      hashes.push_back(KeyHash(req.topic(), id));
      keys.push_back({req.topic(), id});
    }
    KeyLocks::Guard guard(locks_, hashes);
    absl::StatusOr<std::vector<std::optional<storage::JobRecord>>> stored =
        store_->MultiGet(keys);
    if (!stored.ok()) return stored.status();
    std::vector<Decision> decisions;
    std::vector<storage::Mutation> mutations;
    for (const std::optional<storage::JobRecord>& old : *stored) {
      if (!old || old->job().state() != v1::JOB_STATE_DEAD) continue;
      storage::JobRecord record = *old;
      v1::Job& job = *record.mutable_job();
      job.set_state(v1::JOB_STATE_SCHEDULED);
      job.set_attempts(0);
      *job.mutable_fire_at() = storage::UnixMsToTimestamp(now_ms);
      *job.mutable_updated_at() = storage::UnixMsToTimestamp(now_ms);
      record.set_lease_expires_at_ms(0);
      Decision& d = decisions.emplace_back();
      d.was = v1::JOB_STATE_DEAD;
      d.mutation = storage::Mutation::Put(std::move(record),
                                          storage::DueIndexEntryOf(*old));
      mutations.push_back(*d.mutation);
    }
    if (absl::Status s = store_->Apply(mutations, storage::Durability::kSync);
        !s.ok()) {
      return s;
    }
    for (const Decision& d : decisions) Commit(d);
    response.set_redriven(response.redriven() + decisions.size());
  }
  return response;
}

}  // namespace delayd::server
