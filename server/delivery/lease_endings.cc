#include "server/delivery/lease_endings.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "delayd/proto_time.h"
#include "server/base/log.h"
#include "server/base/saturating.h"
#include "server/jobs/present.h"

namespace delayd::server {
namespace {

using storage::JobRecord;
using storage::Mutation;
using storage::UnixMsToTimestamp;

// At most `max` bytes of `s`, cut at a UTF-8 character boundary.
std::string Truncate(absl::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return std::string(s.substr(0, n));
}

// Leases handled per store write.
constexpr size_t kChunk = 256;

}  // namespace

int64_t BackoffMs(const v1::RetryPolicy& retry, uint32_t attempt) {
  const int64_t cap =
      std::max<int64_t>(0, DurationMsSaturated(retry.max_backoff()));
  const int64_t initial =
      std::clamp<int64_t>(DurationMsSaturated(retry.initial_backoff()), 0, cap);
  // Checked floating point: initial > 0 and a power >= 1 (finite or +inf)
  // give a product that is never NaN; 0 * inf is never formed.
  if (initial == 0 || initial == cap) return initial;
  const double multiplier =
      retry.backoff_multiplier() >= 1 ? retry.backoff_multiplier() : 1;
  const double delay =
      static_cast<double>(initial) *
      std::pow(multiplier,
               static_cast<double>(std::max<uint32_t>(attempt, 1) - 1));
  // Compared as doubles before the cast: a delay at or past the cap
  // (infinity included) is the cap, so the cast is always in range.
  if (!(delay < static_cast<double>(cap))) return cap;
  return static_cast<int64_t>(delay);
}

int64_t LaterMs(int64_t now_ms, int64_t delay_ms) {
  return std::min(SaturatingAdd(now_ms, delay_ms), kMaxTimestampUnixMs);
}

absl::StatusOr<std::vector<v1::Job>> LeaseEndings::EndDeliveries(
    const std::vector<Ending>& endings) {
  const int64_t now_ms = d_.clock->NowMs();
  std::vector<Mutation> mutations;
  std::vector<v1::Job> out;
  for (const Ending& e : endings) {
    if (e.record.job().state() == v1::JOB_STATE_CANCELED) {
      // Canceled in flight: the delivery has ended, so has the job (deleted,
      // or kept as CANCELED under --retention).
      mutations.push_back(
          d_.retention->Finish(e.record, v1::JOB_STATE_CANCELED, now_ms));
      out.push_back(PresentJob(e.record, now_ms));
      continue;
    }
    const std::optional<int64_t> previous = storage::DueIndexEntryOf(e.record);
    JobRecord record = e.record;
    v1::Job& job = *record.mutable_job();
    job.set_last_error(Truncate(e.reason, d_.limits->max_reason_bytes));
    *job.mutable_updated_at() = UnixMsToTimestamp(now_ms);
    record.set_lease_expires_at_ms(0);
    if (e.dead_letter || job.attempts() >= job.retry().max_attempts()) {
      job.set_state(v1::JOB_STATE_DEAD);
    } else {
      job.set_state(v1::JOB_STATE_SCHEDULED);
      *job.mutable_fire_at() = UnixMsToTimestamp(e.retry_at_ms);
    }
    out.push_back(PresentJob(record, now_ms));
    mutations.push_back(Mutation::Put(std::move(record), previous));
  }
  if (absl::Status s = d_.store->Apply(mutations, storage::Durability::kNoSync);
      !s.ok()) {
    return s;
  }
  std::vector<std::string> kick;
  {
    absl::MutexLock lock(&state_->mu);
    for (const Ending& e : endings) state_->EndLeaseLocked(e.key, kick);
  }
  for (size_t i = 0; i < endings.size(); ++i) {
    const Ending& e = endings[i];
    JobLedger::Change change = JobLedger::Of(
        mutations[i], e.record.job().state(), storage::PayloadBytesOf(e.record),
        e.nacked ? JobLedger::Cause::kNacked : JobLedger::Cause::kOther);
    change.ready_now = e.retry_at_ms <= now_ms;
    if (d_.ledger->Apply(change)) kick.push_back(e.key.topic);
  }
  UniqueTopics(kick);
  for (const std::string& topic : kick) loop_->Kick(topic);
  return out;
}

void LeaseEndings::ReleaseLeases(const std::vector<JobKey>& keys,
                                 const std::vector<uint64_t>& seqs,
                                 const std::string& reason) {
  std::vector<uint64_t> hashes;
  for (const JobKey& key : keys) hashes.push_back(KeyHash(key.topic, key.id));
  KeyLocks::Guard guard(*d_.locks, hashes);
  const int64_t now_ms = d_.clock->NowMs();
  // The leases still to end: released ones not acked meanwhile; expired
  // ones whose timer is the one that fired and whose deadline has come.
  std::vector<JobKey> current;
  std::vector<uint64_t> nonces;
  {
    absl::MutexLock lock(&state_->mu);
    for (size_t i = 0; i < keys.size(); ++i) {
      LeaseTable::Lease* lease = state_->leases.Find(keys[i]);
      if (lease == nullptr) continue;
      if (seqs.empty()) {
        if (lease->subscriber != 0) continue;
      } else {
        if (lease->seq != seqs[i]) continue;  // extended meanwhile
        if (lease->deadline_ms > now_ms) {
          // The wall clock stepped back since the timer fired.
          state_->leases.ArmAgain(*lease, lease->deadline_ms);
          continue;
        }
      }
      current.push_back(keys[i]);
      nonces.push_back(lease->nonce);
    }
  }
  if (current.empty()) return;
  std::vector<storage::JobKeyView> views;
  for (const JobKey& key : current) views.push_back({key.topic, key.id});
  absl::StatusOr<std::vector<std::optional<JobRecord>>> stored =
      d_.store->MultiGet(views);
  absl::Status status = stored.status();
  if (status.ok()) {
    {
      absl::MutexLock lock(&state_->mu);
      for (std::optional<JobRecord>& record : *stored) {
        if (record.has_value()) state_->OverlayLeaseLocked(*record);
      }
    }
    std::vector<Ending> endings;
    std::vector<std::string> kick;
    for (size_t i = 0; i < current.size(); ++i) {
      const std::optional<JobRecord>& record = (*stored)[i];
      if (!record || !IsDelivered(*record) ||
          record->delivery_nonce() != nonces[i]) {
        // Not this delivery's record any more (cannot happen while the
        // lease is kept right); just forget the lease.
        absl::MutexLock lock(&state_->mu);
        state_->EndLeaseLocked(current[i], kick);
        continue;
      }
      endings.push_back({current[i], *record, now_ms, false, reason, false});
    }
    for (const std::string& topic : kick) loop_->Kick(topic);
    status = EndDeliveries(endings).status();
  }
  if (!status.ok()) {
    // Leave the leases; their timers (re-armed shortly for expired ones)
    // try again.
    DELAYD_LOG_ERROR("cannot end %d leases (%s): %s", current.size(), reason,
                     status.ToString());
    absl::MutexLock lock(&state_->mu);
    for (const JobKey& key : current) {
      if (LeaseTable::Lease* lease = state_->leases.Find(key)) {
        state_->leases.ArmAgain(*lease, now_ms + 1000);
      }
    }
  }
}

void LeaseEndings::ExpireLeases(const std::vector<uint64_t>& tags) {
  std::vector<JobKey> keys;
  std::vector<uint64_t> seqs;
  {
    absl::MutexLock lock(&state_->mu);
    for (uint64_t tag : tags) {
      const uint64_t seq = tag & ~kLeaseTagBit;
      // Each key that had the sequence: ReleaseLeases passes over those that
      // ended or moved to another since.
      const std::vector<JobKey>* had = state_->leases.KeysOf(seq);
      if (had == nullptr) continue;  // all ended meanwhile
      for (const JobKey& key : *had) {
        keys.push_back(key);
        seqs.push_back(seq);
      }
    }
  }
  for (size_t begin = 0; begin < keys.size(); begin += kChunk) {
    const size_t end = std::min(keys.size(), begin + kChunk);
    ReleaseLeases({keys.begin() + begin, keys.begin() + end},
                  {seqs.begin() + begin, seqs.begin() + end}, "lease expired");
  }
}

void LeaseEndings::DeleteLeftoverCanceled(const std::vector<JobKey>& keys) {
  // How long after a failed read or write the keys are tried again.
  constexpr int64_t kLeftoverRetryMs = 1000;
  std::vector<JobKey> failed;
  for (size_t begin = 0; begin < keys.size(); begin += kChunk) {
    const size_t end = std::min(keys.size(), begin + kChunk);
    std::vector<uint64_t> hashes;
    std::vector<storage::JobKeyView> views;
    for (size_t i = begin; i < end; ++i) {
      hashes.push_back(KeyHash(keys[i].topic, keys[i].id));
      views.push_back({keys[i].topic, keys[i].id});
    }
    KeyLocks::Guard guard(*d_.locks, hashes);
    absl::StatusOr<std::vector<std::optional<JobRecord>>> stored =
        d_.store->MultiGet(views);
    if (!stored.ok()) {
      DELAYD_LOG_ERROR("cannot read canceled jobs: %s; trying again in %d ms",
                       stored.status().ToString(), kLeftoverRetryMs);
      failed.insert(failed.end(), keys.begin() + begin, keys.begin() + end);
      continue;
    }
    std::vector<Mutation> mutations;
    const int64_t now_ms = d_.clock->NowMs();
    {
      absl::MutexLock lock(&state_->mu);
      for (size_t i = begin; i < end; ++i) {
        const std::optional<JobRecord>& record = (*stored)[i - begin];
        if (!record || record->job().state() != v1::JOB_STATE_CANCELED ||
            storage::IsRetained(*record) || state_->leases.Contains(keys[i])) {
          continue;
        }
        mutations.push_back(
            d_.retention->Finish(*record, v1::JOB_STATE_CANCELED, now_ms));
      }
    }
    if (absl::Status s =
            d_.store->Apply(mutations, storage::Durability::kNoSync);
        !s.ok()) {
      DELAYD_LOG_ERROR("cannot delete canceled jobs: %s; trying again in %d ms",
                       s.ToString(), kLeftoverRetryMs);
      failed.insert(failed.end(), keys.begin() + begin, keys.begin() + end);
      continue;
    }
    for (const Mutation& m : mutations) {
      // Not live before or after: no payload bytes to count.
      d_.ledger->Apply(JobLedger::Of(m, v1::JOB_STATE_CANCELED, 0));
    }
  }
  if (failed.empty()) return;
  absl::MutexLock lock(&retry_mu_);
  if (retry_.empty()) {
    d_.scheduler->Add(d_.clock->NowMs() + kLeftoverRetryMs, kLeftoverRetryTag);
  }
  retry_.insert(retry_.end(), std::make_move_iterator(failed.begin()),
                std::make_move_iterator(failed.end()));
}

void LeaseEndings::RetryLeftoverCanceled() {
  std::vector<JobKey> keys;
  {
    absl::MutexLock lock(&retry_mu_);
    keys.swap(retry_);
  }
  DeleteLeftoverCanceled(keys);
}

}  // namespace delayd::server
