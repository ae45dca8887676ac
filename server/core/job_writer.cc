// JobWriter: Schedule, ScheduleBatch, Reschedule and Cancel. CancelByPrefix
// and Redrive are in job_writer_prefix.cc.
#include "server/core/job_writer.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "server/jobs/job_key.h"
#include "server/jobs/present.h"
#include "server/jobs/validation.h"
#include "storage/job_record.h"

namespace delayd::server {
namespace {

using storage::DueIndexEntryOf;
using storage::IsLive;
using storage::JobRecord;
using storage::Mutation;
using storage::PayloadBytesOf;
using storage::UnixMsToTimestamp;

// FNV-1a over the deterministic serialization of the spec: stable across
// restarts (it is stored), so an identical retry is recognized later too.
uint64_t SpecDigest(const v1::JobSpec& spec) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);
    spec.SerializeToCodedStream(&out);
  }
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h == 0 ? 1 : h;  // 0 means "unknown" in the record
}

using storage::ExpiryIndexEntryOf;
using storage::IsFinished;

// A record of a job that has not finished (live or DEAD).
bool Unfinished(const std::optional<JobRecord>& stored) {
  return stored.has_value() && !IsFinished(stored->job().state());
}

// The state of what is stored; UNSPECIFIED for nothing.
v1::JobState StateOf(const std::optional<JobRecord>& stored) {
  return stored.has_value() ? stored->job().state() : v1::JOB_STATE_UNSPECIFIED;
}

std::string KeyText(absl::string_view topic, absl::string_view id) {
  return absl::StrCat("(", topic, ", \"", id, "\")");
}

}  // namespace

bool JobWriter::Occupied(const std::optional<JobRecord>& stored) const {
  if (!stored.has_value()) return false;
  return !IsFinished(stored->job().state()) || storage::IsRetained(*stored) ||
         d_.retention->enabled();
}

absl::StatusOr<JobWriter::Locked> JobWriter::LockAndRead(
    std::span<const storage::JobKeyView> keys, std::vector<uint64_t> hashes) {
  while (true) {
    Locked out;
    out.guard = std::make_unique<KeyLocks::Guard>(*d_.locks, hashes);
    if (keys.size() == 1) {
      absl::StatusOr<std::optional<JobRecord>> one =
          d_.store->Get(keys[0].topic, keys[0].id);
      if (!one.ok()) return one.status();
      out.stored.push_back(*std::move(one));
    } else {
      absl::StatusOr<std::vector<std::optional<JobRecord>>> many =
          d_.store->MultiGet(keys);
      if (!many.ok()) return many.status();
      out.stored = *std::move(many);
    }
    d_.deliverer->OverlayLeases(out.stored);
    out.ahead.resize(keys.size());
    std::vector<std::string> ids;  // reserved: the views below stay valid
    ids.reserve(keys.size());
    std::vector<storage::JobKeyView> child_keys;
    std::vector<size_t> of;
    bool held = true;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!out.stored[i].has_value()) continue;
      std::optional<std::string> id = AheadChildId(*out.stored[i]);
      if (!id.has_value()) continue;
      ids.push_back(*std::move(id));
      child_keys.push_back({keys[i].topic, ids.back()});
      of.push_back(i);
      const uint64_t hash = KeyHash(AsAbsl(keys[i].topic), ids.back());
      if (std::find(hashes.begin(), hashes.end(), hash) == hashes.end()) {
        hashes.push_back(hash);
        held = false;
      }
    }
    if (!held) continue;  // again, with those locks too
    if (child_keys.empty()) return out;
    absl::StatusOr<std::vector<std::optional<JobRecord>>> children =
        d_.store->MultiGet(child_keys);
    if (!children.ok()) return children.status();
    d_.deliverer->OverlayLeases(*children);
    for (size_t k = 0; k < of.size(); ++k) {
      out.ahead[of[k]] = std::move((*children)[k]);
    }
    return out;
  }
}

absl::StatusOr<JobWriter::Planned> JobWriter::Plan(
    absl::string_view field, const v1::ScheduleRequest& req, int64_t now_ms) {
  const std::string job_field = absl::StrCat(field, "job");
  if (absl::Status s = ValidateSpec(job_field, req.job(), *d_.limits);
      !s.ok()) {
    return s;
  }
  if (!v1::IfExists_IsValid(req.if_exists())) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, "if_exists: unknown value ", static_cast<int>(req.if_exists())));
  }
  Planned plan{req, 0, 0, std::nullopt};
  if (req.job().has_recurrence()) {
    absl::StatusOr<PreparedRecurrence> recurrence = PrepareRecurrence(
        absl::StrCat(job_field, "."), req.job(), *d_.limits, now_ms);
    if (!recurrence.ok()) return recurrence.status();
    plan.due_ms = recurrence->first_ms;
    plan.recurrence = *std::move(recurrence);
  } else {
    absl::StatusOr<int64_t> due =
        ResolveDueMs(job_field, req.job(), now_ms, *d_.limits);
    if (!due.ok()) return due.status();
    plan.due_ms = *due;
  }
  if (plan.request.job().id().empty()) {
    plan.request.mutable_job()->set_id(ids_.Next(now_ms));
  }
  plan.digest = SpecDigest(plan.request.job());
  return plan;
}

JobWriter::Decision JobWriter::Decide(const Planned& plan,
                                      const std::optional<JobRecord>& stored,
                                      const std::optional<JobRecord>& ahead,
                                      int64_t now_ms) {
  const v1::JobSpec& spec = plan.request.job();
  Decision d;
  d.was = StateOf(stored);
  d.was_payload_bytes = stored ? PayloadBytesOf(*stored) : 0;
  if (Occupied(stored)) {
    switch (plan.request.if_exists()) {
      case v1::IF_EXISTS_KEEP:
        d.job = PresentJob(*stored, now_ms);
        return d;
      case v1::IF_EXISTS_REPLACE:
        break;
      default:  // FAIL and UNSPECIFIED
        if (stored->spec_digest() == plan.digest) {
          // An identical retry; of a finished job: it does not run again.
          d.job = PresentJob(*stored, now_ms);
          return d;
        }
        d.status = absl::AlreadyExistsError(absl::StrCat(
            "job: ", KeyText(spec.topic(), spec.id()),
            IsFinished(d.was)
                ? absl::StrCat(" exists (", v1::JobState_Name(d.was),
                               ", kept by --retention) with a different spec "
                               "(if_exists=IF_EXISTS_FAIL; use "
                               "IF_EXISTS_REPLACE to schedule it again)")
                : " exists with a different spec (if_exists=IF_EXISTS_FAIL; "
                  "use IF_EXISTS_REPLACE or IF_EXISTS_KEEP)"));
        return d;
    }
  }
  JobRecord record;
  v1::Job& job = *record.mutable_job();
  job.set_topic(spec.topic());
  job.set_id(spec.id());
  job.set_payload(spec.payload());
  job.set_state(v1::JOB_STATE_SCHEDULED);
  *job.mutable_fire_at() = UnixMsToTimestamp(plan.due_ms);
  *job.mutable_retry() = EffectiveRetry(spec.retry());
  job.mutable_labels()->insert(spec.labels().begin(), spec.labels().end());
  // An upsert of an unfinished job keeps the original creation time; a
  // finished one is scheduled anew.
  *job.mutable_created_at() = Unfinished(stored) ? stored->job().created_at()
                                                 : UnixMsToTimestamp(now_ms);
  *job.mutable_updated_at() = UnixMsToTimestamp(now_ms);
  record.set_spec_digest(plan.digest);
  if (plan.recurrence.has_value()) {
    StartRecurring(*plan.recurrence, now_ms, record);
  }
  d.job = PresentJob(record, now_ms);
  d.created = true;
  if (stored.has_value()) {
    // A recurring job replaced: its occurrence made ahead goes with it.
    JobRecord old = *stored;
    d.withdraw = WithdrawAhead(old, ahead, now_ms);
    d.withdraw_payload_bytes = ahead ? PayloadBytesOf(*ahead) : 0;
  }
  d.mutation = Mutation::Put(
      std::move(record), stored ? DueIndexEntryOf(*stored) : std::nullopt,
      stored ? ExpiryIndexEntryOf(*stored) : std::nullopt);
  return d;
}

void JobWriter::Commit(const Decision& d) {
  if (d.withdraw.has_value()) {
    d_.ledger->Apply(JobLedger::Of(*d.withdraw, v1::JOB_STATE_SCHEDULED,
                                   d.withdraw_payload_bytes,
                                   JobLedger::Cause::kOther));
  }
  if (!d.mutation.has_value()) return;
  const Mutation& m = *d.mutation;
  JobLedger::Change change =
      JobLedger::Of(m, d.was, d.was_payload_bytes,
                    d.created    ? JobLedger::Cause::kScheduled
                    : d.canceled ? JobLedger::Cause::kCanceled
                                 : JobLedger::Cause::kOther);
  // Due already: READY at once (StartReadying). Only a plain job: a
  // recurring job's entry makes occurrences, an occurrence made ahead is
  // counted by recovery.
  change.ready_now =
      ready_at_once_.load(std::memory_order_relaxed) &&
      m.kind() == Mutation::Kind::kPut && storage::DueMarkOf(m.record()) == 0 &&
      change.due_ms.has_value() && *change.due_ms <= d_.clock->NowMs();
  const bool readied = d_.ledger->Apply(change);
  const absl::string_view topic = AsAbsl(m.topic());
  const absl::string_view id = AsAbsl(m.id());
  if (m.kind() == Mutation::Kind::kPut &&
      m.record().job().state() == v1::JOB_STATE_CANCELED &&
      d.was == v1::JOB_STATE_IN_FLIGHT) {
    // Canceled in flight: the delivery stands.
    d_.deliverer->OnCanceledInFlight(topic, id);
  } else {
    // Replaced (or deleted): a delivery out is superseded.
    d_.deliverer->DropLease(topic, id);
  }
  if (readied) {
    d_.ledger->CountFired(topic, 1);
    d_.deliverer->Kick(topic);
  }
}

absl::Status JobWriter::WriteAndCommit(const Decision& d) {
  if (d.mutation.has_value()) {
    absl::Status s;
    if (d.withdraw.has_value()) {
      const Mutation both[] = {*d.mutation, *d.withdraw};
      s = d_.store->Apply(both, storage::Durability::kSync);
    } else {
      s = d_.store->Apply({&*d.mutation, 1}, storage::Durability::kSync);
    }
    if (!s.ok()) return s;
  }
  Commit(d);
  return absl::OkStatus();
}

absl::StatusOr<v1::ScheduleResponse> JobWriter::Schedule(
    const v1::ScheduleRequest& req) {
  const int64_t now_ms = d_.clock->NowMs();
  absl::StatusOr<Planned> plan = Plan("", req, now_ms);
  if (!plan.ok()) return plan.status();
  const v1::JobSpec& spec = plan->request.job();
  const storage::JobKeyView key{spec.topic(), spec.id()};
  absl::StatusOr<Locked> locked =
      LockAndRead({&key, 1}, {KeyHash(spec.topic(), spec.id())});
  if (!locked.ok()) return locked.status();
  Decision d = Decide(*plan, locked->stored[0], locked->ahead[0], now_ms);
  if (!d.status.ok()) return d.status;
  if (absl::Status s = WriteAndCommit(d); !s.ok()) return s;
  return ScheduleReply(d);
}

v1::ScheduleResponse JobWriter::ScheduleReply(Decision& d) {
  v1::ScheduleResponse response;
  *response.mutable_job() = std::move(d.job);
  response.set_created(d.created);
  return response;
}

absl::StatusOr<v1::RescheduleResponse> JobWriter::Reschedule(
    const v1::RescheduleRequest& req) {
  const int64_t now_ms = d_.clock->NowMs();
  absl::StatusOr<int64_t> due = PlanReschedule(req, now_ms);
  if (!due.ok()) return due.status();
  const v1::JobKey& key = req.key();
  const storage::JobKeyView view{key.topic(), key.id()};
  absl::StatusOr<Locked> locked =
      LockAndRead({&view, 1}, {KeyHash(key.topic(), key.id())});
  if (!locked.ok()) return locked.status();
  absl::StatusOr<Decision> d =
      DecideReschedule(req, *due, locked->stored[0], locked->ahead[0], now_ms);
  if (!d.ok()) return d.status();
  if (absl::Status s = WriteAndCommit(*d); !s.ok()) return s;
  return RescheduleReply(*d);
}

absl::StatusOr<int64_t> JobWriter::PlanReschedule(
    const v1::RescheduleRequest& req, int64_t now_ms) const {
  if (absl::Status s = ValidateKey("key", req.key(), *d_.limits); !s.ok()) {
    return s;
  }
  return ResolveDueMs("", req, now_ms, *d_.limits);
}

v1::RescheduleResponse JobWriter::RescheduleReply(Decision& d) {
  v1::RescheduleResponse response;
  *response.mutable_job() = std::move(d.job);
  return response;
}

absl::StatusOr<JobWriter::Decision> JobWriter::DecideReschedule(
    const v1::RescheduleRequest& req, int64_t due_ms,
    const std::optional<JobRecord>& stored,
    const std::optional<JobRecord>& ahead, int64_t now_ms) {
  const v1::JobKey& key = req.key();
  if (!Occupied(stored)) {
    return absl::NotFoundError(
        absl::StrCat("key: no job ", KeyText(key.topic(), key.id())));
  }
  const v1::JobState state = stored->job().state();
  const bool recurring = stored->job().has_recurring();
  if (!IsFinished(state) && recurring != req.has_recurrence()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "key: job ", KeyText(key.topic(), key.id()),
        recurring ? " is recurring; give a recurrence to change its schedule"
                  : " is not recurring; Schedule it with IF_EXISTS_REPLACE and "
                    "a recurrence to make it one"));
  }
  if (recurring && !IsFinished(state)) {
    return DecideRescheduleRecurring(req, *stored, ahead, now_ms);
  }
  if (IsFinished(state)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "key: job ", KeyText(key.topic(), key.id()), " is ",
        v1::JobState_Name(state),
        " (kept by --retention); Schedule it with IF_EXISTS_REPLACE to run "
        "it again"));
  }
  if (state == v1::JOB_STATE_DEAD) {
    return absl::FailedPreconditionError(
        absl::StrCat("key: job ", KeyText(key.topic(), key.id()),
                     " is DEAD; Redrive it first"));
  }
  if (state == v1::JOB_STATE_IN_FLIGHT) {
    return absl::FailedPreconditionError(
        absl::StrCat("key: job ", KeyText(key.topic(), key.id()),
                     " is IN_FLIGHT; Nack it with retry_after, or Cancel it"));
  }
  JobRecord record = *stored;
  record.mutable_job()->set_state(v1::JOB_STATE_SCHEDULED);
  *record.mutable_job()->mutable_fire_at() = UnixMsToTimestamp(due_ms);
  *record.mutable_job()->mutable_updated_at() = UnixMsToTimestamp(now_ms);
  Decision d;
  d.was = state;
  d.was_payload_bytes = PayloadBytesOf(*stored);
  d.job = PresentJob(record, now_ms);
  d.mutation = Mutation::Put(std::move(record), DueIndexEntryOf(*stored));
  return d;
}

JobWriter::Decision JobWriter::DecideCancel(
    const std::optional<JobRecord>& stored,
    const std::optional<JobRecord>& ahead, int64_t now_ms,
    v1::CancelResponse& response) {
  Decision d;
  if (!stored.has_value()) {
    response.set_outcome(v1::CANCEL_OUTCOME_NOT_FOUND);
    return d;
  }
  // A recurring job's occurrence made ahead, not due yet, goes with it:
  // the job is canceled (and shown) with its counts rewound, and its due
  // entry, which Finish derives from the record it is given, as stored.
  JobRecord old = *stored;
  d.withdraw = WithdrawAhead(old, ahead, now_ms);
  d.withdraw_payload_bytes = ahead ? PayloadBytesOf(*ahead) : 0;
  *old.mutable_job()->mutable_fire_at() = stored->job().fire_at();
  *response.mutable_job() = PresentJob(old, now_ms);
  switch (old.job().state()) {
    case v1::JOB_STATE_DONE:
      response.set_outcome(v1::CANCEL_OUTCOME_ALREADY_DONE);
      return d;
    case v1::JOB_STATE_CANCELED:
      response.set_outcome(v1::CANCEL_OUTCOME_CANCELED);
      return d;
    default:
      break;
  }
  d.was = old.job().state();
  d.was_payload_bytes = PayloadBytesOf(old);
  d.canceled = true;
  if (old.job().state() == v1::JOB_STATE_IN_FLIGHT) {
    // The delivery stands (its ack is accepted); the record stays, CANCELED,
    // until that ack or the lease's end finishes it (Retention).
    JobRecord record = old;
    record.mutable_job()->set_state(v1::JOB_STATE_CANCELED);
    *record.mutable_job()->mutable_updated_at() = UnixMsToTimestamp(now_ms);
    d.mutation = Mutation::Put(std::move(record), DueIndexEntryOf(old));
    response.set_outcome(v1::CANCEL_OUTCOME_CANCELED_IN_FLIGHT);
  } else {
    d.mutation = d_.retention->Finish(old, v1::JOB_STATE_CANCELED, now_ms);
    response.set_outcome(v1::CANCEL_OUTCOME_CANCELED);
  }
  response.mutable_job()->set_state(v1::JOB_STATE_CANCELED);
  *response.mutable_job()->mutable_updated_at() = UnixMsToTimestamp(now_ms);
  return d;
}

absl::StatusOr<v1::CancelResponse> JobWriter::Cancel(
    const v1::CancelRequest& req) {
  if (absl::Status s = ValidateKey("key", req.key(), *d_.limits); !s.ok()) {
    return s;
  }
  const int64_t now_ms = d_.clock->NowMs();
  const v1::JobKey& key = req.key();
  const storage::JobKeyView view{key.topic(), key.id()};
  absl::StatusOr<Locked> locked =
      LockAndRead({&view, 1}, {KeyHash(key.topic(), key.id())});
  if (!locked.ok()) return locked.status();
  v1::CancelResponse response;
  const Decision d =
      DecideCancel(locked->stored[0], locked->ahead[0], now_ms, response);
  if (absl::Status s = WriteAndCommit(d); !s.ok()) return s;
  return response;
}

}  // namespace delayd::server
