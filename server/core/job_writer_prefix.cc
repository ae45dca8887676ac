// JobWriter: the rpcs that change many jobs by id prefix — CancelByPrefix
// and Redrive — in synced chunks.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/core/job_writer.h"
#include "server/jobs/job_key.h"
#include "server/jobs/validation.h"
#include "storage/job_record.h"

namespace delayd::server {

using storage::IsLive;
using storage::JobRecord;
using storage::Mutation;

absl::StatusOr<v1::CancelByPrefixResponse> JobWriter::CancelByPrefix(
    const v1::CancelByPrefixRequest& req) {
  absl::StatusOr<uint64_t> canceled = ChangeByPrefix(
      req.topic(), "id_prefix", req.id_prefix(), /*exact=*/false,
      // A paused recurring job is a schedule waiting too.
      [](v1::JobState state) {
        return IsLive(state) || state == v1::JOB_STATE_PAUSED;
      },
      [this](const JobRecord& stored, int64_t now_ms) {
        v1::CancelResponse ignored;
        return DecideCancel(stored, std::nullopt, now_ms, ignored);
      });
  if (!canceled.ok()) return canceled.status();
  v1::CancelByPrefixResponse response;
  response.set_canceled(*canceled);
  return response;
}

absl::StatusOr<uint64_t> JobWriter::ChangeByPrefix(
    const std::string& topic, absl::string_view prefix_field,
    const std::string& id_prefix, bool exact,
    absl::FunctionRef<bool(v1::JobState)> selects,
    absl::FunctionRef<Decision(const JobRecord&, int64_t)> decide) {
  if (absl::Status s = ValidateTopic("topic", topic, *d_.limits); !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateIdPrefix(prefix_field, id_prefix, *d_.limits);
      !s.ok()) {
    return s;
  }
  constexpr size_t kChunk = 500;
  uint64_t changed = 0;
  std::string after;
  bool more = true;
  while (more) {
    // Collect a chunk of selected ids, then change them in one synced write
    // under their locks, re-reading each: a job may have changed since the
    // scan.
    std::vector<std::string> ids;
    more = false;
    const auto collect = [&](const JobRecord& record) {
      // With `exact`, the id itself sorts first among those it prefixes.
      if (exact && record.job().id() != id_prefix) return false;
      if (ids.size() == kChunk) {
        more = true;
        return false;
      }
      if (selects(record.job().state())) ids.push_back(record.job().id());
      after = record.job().id();
      return true;
    };
    absl::Status scan = d_.store->ScanJobs(topic, id_prefix, after, collect);
    if (!scan.ok()) return scan;
    if (ids.empty()) break;
    const int64_t now_ms = d_.clock->NowMs();
    std::vector<uint64_t> hashes;
    std::vector<storage::JobKeyView> keys;
    for (const std::string& id : ids) {
      hashes.push_back(KeyHash(topic, id));
      keys.push_back({topic, id});
    }
    KeyLocks::Guard guard(*d_.locks, hashes);
    absl::StatusOr<std::vector<std::optional<JobRecord>>> stored =
        d_.store->MultiGet(keys);
    if (!stored.ok()) return stored.status();
    d_.deliverer->OverlayLeases(*stored);
    std::vector<Decision> decisions;
    std::vector<Mutation> mutations;
    for (const std::optional<JobRecord>& old : *stored) {
      // A job whose state changed since the scan is left alone.
      if (!old || !selects(old->job().state())) continue;
      decisions.push_back(decide(*old, now_ms));
      mutations.push_back(*decisions.back().mutation);
    }
    if (absl::Status s = d_.store->Apply(mutations, storage::Durability::kSync);
        !s.ok()) {
      return s;
    }
    for (const Decision& d : decisions) Commit(d);
    changed += decisions.size();
  }
  return changed;
}

absl::StatusOr<v1::RedriveResponse> JobWriter::Redrive(
    const v1::RedriveRequest& req) {
  if (!req.id().empty() && !req.id_prefix().empty()) {
    return absl::InvalidArgumentError(
        "id: give id (one job) or id_prefix (many), not both");
  }
  const bool exact = !req.id().empty();
  absl::StatusOr<uint64_t> redriven = ChangeByPrefix(
      req.topic(), exact ? "id" : "id_prefix",
      exact ? req.id() : req.id_prefix(), exact,
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
        d.was_payload_bytes = storage::PayloadBytesOf(old);
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
