#include "server/delivery/ack_handler.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/base/stage_cpu.h"
#include "server/delivery/ack_token.h"
#include "server/jobs/validation.h"
#include "storage/job_record.h"

namespace delayd::server {
namespace {

using storage::JobRecord;
using storage::Mutation;
using storage::UnixMsToTimestamp;

absl::Status Stale(absl::string_view field) {
  return absl::FailedPreconditionError(absl::StrCat(
      field,
      ": stale: that delivery's lease has ended (acked, nacked, expired, "
      "released or superseded) or the server restarted since"));
}

// A token that decodes, naming a valid key; INVALID_ARGUMENT otherwise.
absl::StatusOr<AckToken> Decode(absl::string_view field, absl::string_view text,
                                const Limits& limits) {
  absl::StatusOr<AckToken> token = DecodeAckToken(
      field, text,
      MaxAckTokenChars(limits.max_topic_bytes, limits.max_id_bytes));
  if (!token.ok()) return token.status();
  if (!ValidateTopic("", token->topic, limits).ok() ||
      !ValidateId("", token->id, limits).ok() || token->id.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": not an ack token issued by this server"));
  }
  return token;
}

// `d` in whole milliseconds, a sub-millisecond part rounded up (never
// shorter than asked), when it is a valid Duration from 0 (1 ns when
// `positive`) to `max`; INVALID_ARGUMENT naming `field` and the range
// otherwise. The range is checked before any arithmetic, so no value of
// seconds can overflow.
absl::StatusOr<int64_t> DurationArgMs(absl::string_view field,
                                      const google::protobuf::Duration& d,
                                      bool positive, absl::Duration max) {
  const int64_t max_ms = absl::ToInt64Milliseconds(max);
  const bool in_range =
      d.seconds() >= 0 && d.seconds() <= max_ms / 1000 && d.nanos() >= 0 &&
      d.nanos() < 1'000'000'000 &&
      d.seconds() * 1000 + (d.nanos() + 999'999) / 1'000'000 <= max_ms &&
      !(positive && d.seconds() == 0 && d.nanos() == 0);
  if (!in_range) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": must be ", positive ? "> 0" : ">= 0", " and at most ",
        max_ms / 1000, " s, got {seconds: ", d.seconds(),
        ", nanos: ", d.nanos(), "}"));
  }
  return d.seconds() * 1000 + (d.nanos() + 999'999) / 1'000'000;
}

}  // namespace

absl::StatusOr<v1::AckResponse> AckHandler::Ack(const v1::AckRequest& req) {
  const size_t n = req.ack_tokens_size();
  if (n == 0 || n > d_.limits->max_batch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ack_tokens: must hold 1-", d_.limits->max_batch, " tokens, got ", n));
  }
  const stage_cpu::Scope stage(stage_cpu::Stage::kAck);
  stage_cpu::Splitter stages;
  v1::AckResponse response;
  std::vector<std::optional<AckToken>> tokens(n);
  absl::flat_hash_map<JobKey, size_t> first_of;  // key -> first token index
  std::vector<size_t> candidates;
  std::vector<size_t> duplicate_of(n, n);
  std::vector<uint64_t> hashes;
  first_of.reserve(n);
  candidates.reserve(n);
  hashes.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    v1::AckResult* result = response.add_results();
    result->set_ack_token(req.ack_tokens(i));
    // The field is named only in an error: decoded again to name it.
    absl::StatusOr<AckToken> token = Decode("", req.ack_tokens(i), *d_.limits);
    if (!token.ok()) {
      token = Decode(absl::StrCat("ack_tokens[", i, "]"), req.ack_tokens(i),
                     *d_.limits);
    }
    if (!token.ok()) {
      result->set_code(static_cast<int>(token.status().code()));
      result->set_message(std::string(token.status().message()));
      continue;
    }
    auto [it, inserted] =
        first_of.try_emplace(JobKey{token->topic, token->id}, i);
    if (!inserted) {
      duplicate_of[i] = it->second;
      tokens[i] = *std::move(token);
      continue;
    }
    hashes.push_back(KeyHash(token->topic, token->id));
    tokens[i] = *std::move(token);
    candidates.push_back(i);
  }
  stages.Mark(stage_cpu::Stage::kAckDecode);
  std::vector<size_t> acked;
  std::vector<bool> was_live;
  std::vector<int64_t> payload_bytes;  // of each acked job
  acked.reserve(candidates.size());
  was_live.reserve(candidates.size());
  payload_bytes.reserve(candidates.size());
  {
    KeyLocks::Guard guard(*d_.locks, hashes);
    stages.Mark(stage_cpu::Stage::kAckLock);
    std::vector<size_t> leased;  // tokens of current leases
    std::vector<Mutation> mutations;
    leased.reserve(candidates.size());
    mutations.reserve(candidates.size());
    {
      absl::MutexLock lock(&state_->mu);
      for (size_t i : candidates) {
        const LeaseTable::Lease* lease =
            state_->leases.Find(JobKey{tokens[i]->topic, tokens[i]->id});
        if (lease == nullptr ||
            !LeaseTable::Matches(*lease, tokens[i]->nonce, tokens[i]->check,
                                 tokens[i]->attempt)) {
          continue;
        }
        leased.push_back(i);
        if (d_.retention->enabled()) continue;  // kept as DONE: read below
        // Deleted. A current lease names the stored record exactly (the
        // lease changes with every change of a delivered record), so the
        // delete needs no read.
        acked.push_back(i);
        was_live.push_back(!lease->canceled);
        payload_bytes.push_back(lease->payload_bytes);
        mutations.push_back(Mutation::Delete(
            tokens[i]->topic, tokens[i]->id,
            lease->canceled ? std::nullopt
                            : std::optional<int64_t>(lease->due_ms)));
      }
    }
    if (d_.retention->enabled() && !leased.empty()) {
      std::vector<storage::JobKeyView> views;
      for (size_t i : leased) {
        views.push_back({tokens[i]->topic, tokens[i]->id});
      }
      absl::StatusOr<std::vector<std::optional<JobRecord>>> stored =
          d_.store->MultiGet(views);
      if (!stored.ok()) return stored.status();
      {
        absl::MutexLock lock(&state_->mu);
        for (std::optional<JobRecord>& record : *stored) {
          if (record.has_value()) state_->OverlayLeaseLocked(*record);
        }
      }
      const int64_t now_ms = d_.clock->NowMs();
      for (size_t k = 0; k < leased.size(); ++k) {
        const std::optional<JobRecord>& record = (*stored)[k];
        const size_t i = leased[k];
        if (!record || !LeaseEndings::IsDelivered(*record) ||
            record->delivery_nonce() != tokens[i]->nonce) {
          continue;
        }
        acked.push_back(i);
        was_live.push_back(record->job().state() == v1::JOB_STATE_IN_FLIGHT);
        payload_bytes.push_back(storage::PayloadBytesOf(*record));
        mutations.push_back(
            d_.retention->Finish(*record, v1::JOB_STATE_DONE, now_ms));
      }
    }
    stages.Mark(stage_cpu::Stage::kAckFind);
    if (absl::Status s =
            d_.store->Apply(mutations, storage::Durability::kNoSync);
        !s.ok()) {
      return s;
    }
    stages.Mark(stage_cpu::Stage::kAckDelete);
    std::vector<std::string> kick;
    {
      std::vector<JobKey> ended;
      ended.reserve(acked.size());
      for (size_t i : acked) ended.push_back({tokens[i]->topic, tokens[i]->id});
      absl::MutexLock lock(&state_->mu);
      state_->EndLeasesLocked(ended, kick);
    }
    stages.Mark(stage_cpu::Stage::kAckEndLease);
    std::vector<JobLedger::Change> changes;
    changes.reserve(acked.size());
    for (size_t k = 0; k < acked.size(); ++k) {
      changes.push_back(JobLedger::Of(
          mutations[k],
          was_live[k] ? v1::JOB_STATE_IN_FLIGHT : v1::JOB_STATE_CANCELED,
          payload_bytes[k], JobLedger::Cause::kAcked));
    }
    d_.ledger->ApplyBatch(changes);
    stages.Mark(stage_cpu::Stage::kAckLedger);
    UniqueTopics(kick);
    for (const std::string& topic : kick) loop_->Kick(topic);
  }
  std::vector<bool> ok(n, false);
  for (size_t i : acked) ok[i] = true;
  for (size_t i = 0; i < n; ++i) {
    if (!tokens[i].has_value()) continue;  // malformed, answered above
    const size_t first = duplicate_of[i];
    // A repeated token shares its first copy's fate; another delivery of
    // the same job in one request is stale.
    const bool good =
        first == n ? ok[i]
                   : ok[first] && tokens[first]->nonce == tokens[i]->nonce &&
                         tokens[first]->check == tokens[i]->check &&
                         tokens[first]->attempt == tokens[i]->attempt;
    if (good) continue;
    const absl::Status stale = Stale(absl::StrCat("ack_tokens[", i, "]"));
    response.mutable_results(i)->set_code(static_cast<int>(stale.code()));
    response.mutable_results(i)->set_message(std::string(stale.message()));
  }
  stages.Mark(stage_cpu::Stage::kAckAnswer);
  return response;
}

absl::StatusOr<v1::NackResponse> AckHandler::Nack(const v1::NackRequest& req) {
  absl::StatusOr<AckToken> token =
      Decode("ack_token", req.ack_token(), *d_.limits);
  if (!token.ok()) return token.status();
  std::optional<int64_t> retry_after_ms;
  if (req.has_retry_after()) {
    absl::StatusOr<int64_t> ms =
        DurationArgMs("retry_after", req.retry_after(), /*positive=*/false,
                      d_.limits->max_schedule_ahead);
    if (!ms.ok()) return ms.status();
    retry_after_ms = *ms;
  }
  const JobKey key{token->topic, token->id};
  KeyLocks::Guard guard(*d_.locks, KeyHash(key.topic, key.id));
  {
    absl::MutexLock lock(&state_->mu);
    if (!state_->leases.IsCurrent(key, token->nonce, token->check,
                                  token->attempt)) {
      return Stale("ack_token");
    }
  }
  absl::StatusOr<std::optional<JobRecord>> stored =
      d_.store->Get(key.topic, key.id);
  if (!stored.ok()) return stored.status();
  if (stored->has_value()) {
    absl::MutexLock lock(&state_->mu);
    state_->OverlayLeaseLocked(**stored);
  }
  if (!stored->has_value() || !LeaseEndings::IsDelivered(**stored) ||
      (*stored)->delivery_nonce() != token->nonce) {
    return Stale("ack_token");
  }
  const JobRecord& record = **stored;
  // Now rounded up to the millisecond: the retry is never earlier than
  // retry_after from the moment of the call.
  const int64_t now_ms = (d_.clock->NowUs() + 999) / 1000;
  const int64_t delay_ms = retry_after_ms.value_or(
      BackoffMs(record.job().retry(), record.job().attempts()));
  absl::StatusOr<std::vector<v1::Job>> ended = endings_->EndDeliveries(
      {LeaseEndings::Ending{key, record, LaterMs(now_ms, delay_ms),
                            req.dead_letter(), req.reason(), true}});
  if (!ended.ok()) return ended.status();
  v1::NackResponse response;
  *response.mutable_job() = std::move(ended->front());
  return response;
}

absl::StatusOr<v1::ExtendLeaseResponse> AckHandler::ExtendLease(
    const v1::ExtendLeaseRequest& req) {
  absl::StatusOr<AckToken> token =
      Decode("ack_token", req.ack_token(), *d_.limits);
  if (!token.ok()) return token.status();
  absl::StatusOr<int64_t> extend_ms = DurationArgMs(
      "extend_by", req.extend_by(), /*positive=*/true, d_.limits->max_lease);
  if (!extend_ms.ok()) return extend_ms.status();
  const JobKey key{token->topic, token->id};
  // The lease is in memory only (the deadline is never stored): nothing to
  // read or write, but to tell a gone job from a stale token.
  KeyLocks::Guard guard(*d_.locks, KeyHash(key.topic, key.id));
  const int64_t deadline_ms = LaterMs(d_.clock->NowMs(), *extend_ms);
  {
    absl::MutexLock lock(&state_->mu);
    LeaseTable::Lease* lease = state_->leases.Find(key);
    if (lease != nullptr && LeaseTable::Matches(*lease, token->nonce,
                                                token->check, token->attempt)) {
      lease->deadline_ms = deadline_ms;
      state_->leases.Rearm(key, *lease, deadline_ms);
      v1::ExtendLeaseResponse response;
      *response.mutable_lease_expires_at() = UnixMsToTimestamp(deadline_ms);
      return response;
    }
  }
  absl::StatusOr<std::optional<JobRecord>> stored =
      d_.store->Get(key.topic, key.id);
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) {
    return absl::NotFoundError(
        absl::StrCat("ack_token: no job (", key.topic, ", \"", key.id, "\")"));
  }
  return Stale("ack_token");
}

}  // namespace delayd::server
