// JobWriter: Schedule, ScheduleBatch, Reschedule and Cancel. CancelByPrefix
// and Redrive are in job_writer_prefix.cc.
#include "server/core/job_writer.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
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

// A unary rpc's result as a ScheduleStream answer: the response in `field`,
// or the code and message.
template <typename Response>
void Answer(v1::StreamAnswer& answer, absl::StatusOr<Response> result,
            Response* (v1::StreamAnswer::*field)()) {
  if (result.ok()) {
    (answer.*field)()->Swap(&*result);
    return;
  }
  answer.set_code(static_cast<int>(result.status().code()));
  answer.set_message(std::string(result.status().message()));
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

absl::StatusOr<v1::ScheduleBatchResponse> JobWriter::ScheduleBatch(
    const v1::ScheduleBatchRequest& req) {
  const size_t n = req.requests_size();
  if (n == 0 || n > d_.limits->max_batch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "requests: must hold 1-", d_.limits->max_batch, " requests, got ", n));
  }
  std::vector<const v1::ScheduleRequest*> requests;
  requests.reserve(n);
  for (const v1::ScheduleRequest& r : req.requests()) requests.push_back(&r);
  absl::StatusOr<std::vector<absl::StatusOr<v1::ScheduleResponse>>> results =
      ScheduleMany(
          requests, [](size_t i) { return absl::StrCat("requests[", i, "]."); },
          /*limit_reply=*/true);
  if (!results.ok()) return results.status();
  v1::ScheduleBatchResponse response;
  for (absl::StatusOr<v1::ScheduleResponse>& r : *results) {
    v1::ScheduleResult* result = response.add_results();
    if (!r.ok()) {
      result->set_code(static_cast<int>(r.status().code()));
      result->set_message(std::string(r.status().message()));
      continue;
    }
    result->mutable_job()->Swap(r->mutable_job());
    result->set_created(r->created());
  }
  return response;
}

absl::StatusOr<std::vector<absl::StatusOr<v1::ScheduleResponse>>>
JobWriter::ScheduleMany(std::span<const v1::ScheduleRequest* const> requests,
                        absl::FunctionRef<std::string(size_t)> field_of,
                        bool limit_reply) {
  const size_t n = requests.size();
  const int64_t now_ms = d_.clock->NowMs();
  std::vector<absl::StatusOr<v1::ScheduleResponse>> results(
      n, v1::ScheduleResponse());
  std::vector<std::optional<Planned>> plans(n);
  absl::flat_hash_map<JobKey, size_t> first_of;
  std::vector<uint64_t> hashes;
  std::vector<storage::JobKeyView> keys;
  for (size_t i = 0; i < n; ++i) {
    const std::string field = field_of(i);
    absl::StatusOr<Planned> plan = Plan(field, *requests[i], now_ms);
    if (!plan.ok()) {
      results[i] = plan.status();
      continue;
    }
    const v1::JobSpec& spec = plan->request.job();
    auto [it, inserted] =
        first_of.try_emplace(JobKey{spec.topic(), spec.id()}, i);
    if (!inserted) {
      std::string first = field_of(it->second);
      if (!first.empty() && first.back() == '.') first.pop_back();
      results[i] = absl::InvalidArgumentError(
          absl::StrCat(field, "job.id: names the same job as ", first));
      continue;
    }
    plans[i] = *std::move(plan);
    hashes.push_back(KeyHash(spec.topic(), spec.id()));
  }
  for (const auto& plan : plans) {
    if (plan)
      keys.push_back({plan->request.job().topic(), plan->request.job().id()});
  }

  absl::StatusOr<Locked> locked = LockAndRead(keys, std::move(hashes));
  if (!locked.ok()) return locked.status();
  std::vector<Decision> decisions(n);
  std::vector<Mutation> mutations;
  for (size_t i = 0, k = 0; i < n; ++i) {
    if (!plans[i]) continue;
    decisions[i] =
        Decide(*plans[i], locked->stored[k], locked->ahead[k], now_ms);
    ++k;
    if (decisions[i].mutation) mutations.push_back(*decisions[i].mutation);
    std::optional<Mutation>& withdraw = decisions[i].withdraw;
    if (withdraw.has_value() &&
        first_of.contains(JobKey{std::string(withdraw->topic()),
                                 std::string(withdraw->id())})) {
      // The batch schedules that occurrence's id itself: the request
      // decides it, not the withdrawal.
      withdraw.reset();
    }
    if (withdraw.has_value()) mutations.push_back(*withdraw);
  }
  if (limit_reply) {
    // Refuse, before writing, a batch whose reply the client could not
    // receive (16 bytes a result over-estimate its framing, code and flag).
    size_t reply_bytes = 0;
    for (size_t i = 0; i < n; ++i) {
      reply_bytes += 16;
      if (!plans[i]) {
        reply_bytes += results[i].status().message().size();
        continue;
      }
      reply_bytes += decisions[i].status.ok()
                         ? decisions[i].job.ByteSizeLong()
                         : decisions[i].status.message().size();
    }
    if (reply_bytes > d_.limits->max_reply_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "requests: the reply would hold ", reply_bytes,
          " bytes, over the limit of ", d_.limits->max_reply_bytes,
          " (what a gRPC client receives by default); send fewer or smaller "
          "jobs per batch"));
    }
  }
  if (absl::Status s = d_.store->Apply(mutations, storage::Durability::kSync);
      !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!plans[i]) continue;
    Decision& d = decisions[i];
    if (!d.status.ok()) {
      results[i] = d.status;
      continue;
    }
    Commit(d);
    *results[i]->mutable_job() = std::move(d.job);
    results[i]->set_created(d.created);
  }
  return results;
}

std::vector<v1::StreamAnswer> JobWriter::Stream(
    std::span<const v1::StreamRequest* const> requests) {
  std::vector<v1::StreamAnswer> out(requests.size());
  size_t i = 0;
  while (i < requests.size()) {
    const v1::StreamRequest& request = *requests[i];
    if (!request.has_schedule()) {
      if (request.has_reschedule()) {
        Answer(out[i], Reschedule(request.reschedule()),
               &v1::StreamAnswer::mutable_reschedule);
      } else if (request.has_cancel()) {
        Answer(out[i], Cancel(request.cancel()),
               &v1::StreamAnswer::mutable_cancel);
      } else {
        out[i].set_code(static_cast<int>(absl::StatusCode::kInvalidArgument));
        out[i].set_message("request: must hold schedule, reschedule or cancel");
      }
      ++i;
      continue;
    }
    // The run: consecutive Schedules of distinct jobs (an empty id is made
    // by the server, distinct), an occurrence's id alone.
    std::vector<const v1::ScheduleRequest*> run;
    absl::flat_hash_set<JobKey> named;
    size_t end = i;
    for (; end < requests.size() && requests[end]->has_schedule(); ++end) {
      const v1::JobSpec& spec = requests[end]->schedule().job();
      const bool alone = absl::StrContains(spec.id(), '@');
      if (!run.empty() &&
          (alone || (!spec.id().empty() &&
                     named.contains(JobKey{spec.topic(), spec.id()})))) {
        break;
      }
      if (!spec.id().empty()) named.insert(JobKey{spec.topic(), spec.id()});
      run.push_back(&requests[end]->schedule());
      if (alone) {
        ++end;
        break;
      }
    }
    absl::StatusOr<std::vector<absl::StatusOr<v1::ScheduleResponse>>> results =
        ScheduleMany(
            run, [](size_t) { return std::string(); }, /*limit_reply=*/false);
    for (size_t k = 0; k < run.size(); ++k) {
      Answer(out[i + k],
             results.ok()
                 ? std::move((*results)[k])
                 : absl::StatusOr<v1::ScheduleResponse>(results.status()),
             &v1::StreamAnswer::mutable_schedule);
    }
    i = end;
  }
  return out;
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
