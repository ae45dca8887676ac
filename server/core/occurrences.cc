#include "server/core/occurrences.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/base/log.h"
#include "server/recurring/planner.h"
#include "server/recurring/recurrence.h"
#include "storage/mutation.h"

namespace delayd::server {
namespace {

using storage::DueIndexEntryOf;
using storage::ExpiryIndexEntryOf;
using storage::JobRecord;
using storage::Mutation;
using storage::PayloadBytesOf;
using storage::TimestampToUnixMs;
using storage::UnixMsToTimestamp;

// The recurrence of a stored parent. Its defaults were filled in when it
// was stored, so the time passed for them does not matter.
absl::StatusOr<recurring::Recurrence> LoadRecurrence(const JobRecord& parent) {
  return recurring::Recurrence::FromProto(
      "recurrence", parent.job().recurring().recurrence(),
      TimestampToUnixMs(parent.job().created_at()));
}

// Whether a child, as stored, still holds its occurrence (SCHEDULED, READY
// or IN_FLIGHT: lean leases keep an in-flight job's record as it was).
bool Live(const std::optional<JobRecord>& child) {
  return child.has_value() && storage::IsLive(child->job().state());
}

// Whether a child's key is taken: a live or DEAD job there is never
// overwritten.
bool Taken(const std::optional<JobRecord>& child) {
  return Live(child) ||
         (child.has_value() && child->job().state() == v1::JOB_STATE_DEAD);
}

// The parent's due time: a lead before its next occurrence (at it, when
// `at_occurrence`: the occurrence could not be made ahead), or sooner a
// recheck of its buffered one.
void SetDue(JobRecord& parent, int64_t now_ms, bool at_occurrence) {
  v1::Job& job = *parent.mutable_job();
  const v1::RecurringStatus& r = job.recurring();
  int64_t due = std::numeric_limits<int64_t>::max();
  if (r.has_next_occurrence()) {
    const int64_t next = TimestampToUnixMs(r.next_occurrence());
    due = at_occurrence ? next
                        : next - LeadMs(parent.occurrences_through_ms(), next);
  }
  if (r.has_buffered_occurrence()) {
    due = std::min(due, now_ms + kBufferRecheckMs);
  }
  *job.mutable_fire_at() = UnixMsToTimestamp(due);
}

// One parent being handled.
struct Firing {
  JobRecord old;
  JobRecord parent;               // advanced
  std::vector<int64_t> children;  // nominal times to make
  // The next occurrence, to make ahead if the overlap policy allows.
  std::optional<int64_t> ahead;
  std::optional<int64_t> after_ahead;  // the occurrence after it
  uint64_t misfired = 0;
  uint64_t overlapped = 0;
};

// The child of `parent` (as advanced) for nominal time t, made at now_ms.
JobRecord MakeChild(const v1::Job& parent, int64_t t, int64_t now_ms) {
  const v1::RecurringStatus& r = parent.recurring();
  // Recurrence::FromProto accepted it: whole milliseconds, 0 to 1 h.
  const int64_t jitter_ms = r.recurrence().jitter().seconds() * 1000 +
                            r.recurrence().jitter().nanos() / 1'000'000;
  JobRecord record;
  v1::Job& cj = *record.mutable_job();
  cj.set_topic(parent.topic());
  cj.set_id(OccurrenceId(parent.id(), t));
  cj.set_payload(parent.payload());
  cj.set_state(v1::JOB_STATE_SCHEDULED);
  *cj.mutable_fire_at() = UnixMsToTimestamp(
      t +
      recurring::JitterMs(KeyHash(parent.topic(), parent.id()), t, jitter_ms));
  *cj.mutable_retry() = parent.retry();
  cj.mutable_labels()->insert(parent.labels().begin(), parent.labels().end());
  *cj.mutable_created_at() = UnixMsToTimestamp(now_ms);
  *cj.mutable_updated_at() = UnixMsToTimestamp(now_ms);
  cj.mutable_occurrence_of()->set_id(parent.id());
  *cj.mutable_occurrence_of()->mutable_nominal_time() = UnixMsToTimestamp(t);
  return record;
}

}  // namespace

std::string OccurrenceId(absl::string_view parent_id, int64_t nominal_ms) {
  return absl::StrCat(parent_id, "@", nominal_ms);
}

int64_t LeadMs(int64_t through_ms, int64_t next_ms) {
  if (next_ms <= through_ms) return 0;
  // Halved before subtracting: the difference of two int64 never wraps.
  const int64_t half = next_ms / 2 - through_ms / 2;
  return std::clamp<int64_t>(half, 0, kMaxLeadMs);
}

std::optional<std::string> AheadChildId(const JobRecord& record) {
  if (!record.job().has_recurring() || record.ahead_ms() == 0 ||
      storage::IsFinished(record.job().state())) {
    return std::nullopt;
  }
  return OccurrenceId(record.job().id(), record.ahead_ms());
}

std::optional<Mutation> WithdrawAhead(JobRecord& parent,
                                      const std::optional<JobRecord>& ahead,
                                      int64_t due_after_ms) {
  if (!ahead.has_value() || parent.ahead_ms() == 0 ||
      storage::IsFinished(parent.job().state())) {
    return std::nullopt;
  }
  const v1::Job& child = ahead->job();
  if (!ahead->made_ahead() || child.attempts() != 0 ||
      child.state() != v1::JOB_STATE_SCHEDULED ||
      child.occurrence_of().id() != parent.job().id() ||
      TimestampToUnixMs(child.occurrence_of().nominal_time()) !=
          parent.ahead_ms() ||
      TimestampToUnixMs(child.fire_at()) <= due_after_ms) {
    return std::nullopt;
  }
  const int64_t nominal = parent.ahead_ms();
  v1::Job& job = *parent.mutable_job();
  v1::RecurringStatus& r = *job.mutable_recurring();
  *r.mutable_next_occurrence() = UnixMsToTimestamp(nominal);
  if (r.occurrences_fired() > 0) {
    r.set_occurrences_fired(r.occurrences_fired() - 1);
  }
  if (parent.last_before_ahead_ms() != 0) {
    *r.mutable_last_occurrence() =
        UnixMsToTimestamp(parent.last_before_ahead_ms());
  } else {
    r.clear_last_occurrence();
  }
  parent.set_occurrences_through_ms(nominal - 1);
  parent.set_ahead_ms(0);
  parent.set_last_before_ahead_ms(0);
  *job.mutable_fire_at() = UnixMsToTimestamp(nominal);
  return Mutation::Delete(child.topic(), child.id(), DueIndexEntryOf(*ahead),
                          ExpiryIndexEntryOf(*ahead));
}

absl::StatusOr<PreparedRecurrence> PrepareRecurrence(absl::string_view field,
                                                     const v1::JobSpec& spec,
                                                     const Limits& limits,
                                                     int64_t now_ms) {
  if (spec.when_case() != v1::JobSpec::WHEN_NOT_SET) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, spec.has_delay() ? "delay" : "fire_at",
        ": must be unset for a recurring job (its recurrence says when)"));
  }
  const size_t max_id = limits.max_id_bytes - kOccurrenceSuffixBytes;
  if (spec.id().size() > max_id) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, "id: a recurring job's id must be at most ", max_id,
        " bytes (its occurrences are <id>@<unix ms>), got ", spec.id().size()));
  }
  const std::string rfield = absl::StrCat(field, "recurrence");
  absl::StatusOr<recurring::Recurrence> recurrence =
      recurring::Recurrence::FromProto(rfield, spec.recurrence(), now_ms);
  if (!recurrence.ok()) return recurrence.status();
  PreparedRecurrence out;
  out.effective = spec.recurrence();
  if (!out.effective.has_start_at()) {
    *out.effective.mutable_start_at() = UnixMsToTimestamp(now_ms);
  }
  if (out.effective.has_every() && !out.effective.every().has_anchor()) {
    *out.effective.mutable_every()->mutable_anchor() = out.effective.start_at();
  }
  std::optional<int64_t> first = recurrence->NextAfter(now_ms - 1);
  if (!first.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(rfield,
                     ": has no occurrence from now on (check end_at, and the "
                     "expression's years)"));
  }
  out.first_ms = *first;
  return out;
}

void StartRecurring(const PreparedRecurrence& prepared, int64_t now_ms,
                    JobRecord& record) {
  v1::RecurringStatus& r = *record.mutable_job()->mutable_recurring();
  r.Clear();
  *r.mutable_recurrence() = prepared.effective;
  *r.mutable_next_occurrence() = UnixMsToTimestamp(prepared.first_ms);
  record.set_occurrences_through_ms(now_ms - 1);
  record.set_ahead_ms(0);
  record.set_last_before_ahead_ms(0);
  *record.mutable_job()->mutable_fire_at() = UnixMsToTimestamp(
      prepared.first_ms - LeadMs(now_ms - 1, prepared.first_ms));
}

std::optional<JobRecord> RecomputeNextOccurrence(const JobRecord& parent) {
  const v1::RecurringStatus& r = parent.job().recurring();
  if (parent.job().state() != v1::JOB_STATE_SCHEDULED ||
      r.has_buffered_occurrence() || !r.has_next_occurrence()) {
    return std::nullopt;
  }
  absl::StatusOr<recurring::Recurrence> recurrence = LoadRecurrence(parent);
  if (!recurrence.ok()) return std::nullopt;  // the fire path reports it
  const std::optional<int64_t> next =
      recurrence->NextAfter(parent.occurrences_through_ms());
  const int64_t stored = TimestampToUnixMs(r.next_occurrence());
  // One that moved is stored, past or future (the fire path plans misfires
  // from it); none at all under the new rules is left to the fire path,
  // whose plan then ends the schedule.
  if (!next.has_value() || *next == stored) return std::nullopt;
  JobRecord moved = parent;
  *moved.mutable_job()->mutable_recurring()->mutable_next_occurrence() =
      UnixMsToTimestamp(*next);
  *moved.mutable_job()->mutable_fire_at() =
      UnixMsToTimestamp(*next - LeadMs(parent.occurrences_through_ms(), *next));
  return moved;
}

void OccurrenceMaker::Start() {
  for (int i = 0; i < kThreads; ++i) {
    threads_.emplace_back(&OccurrenceMaker::Work, this);
  }
}

void OccurrenceMaker::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void OccurrenceMaker::Enqueue(int64_t ms, std::vector<JobKey> parents) {
  absl::MutexLock lock(&mu_);
  queue_.push_back({ms, std::move(parents)});
}

bool OccurrenceMaker::Idle() {
  absl::MutexLock lock(&mu_);
  return queue_.empty() && busy_ == 0;
}

void OccurrenceMaker::Work() {
  while (true) {
    Batch batch;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](OccurrenceMaker* m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(m->mu_) {
            return m->stop_ || !m->queue_.empty();
          },
          this));
      if (stop_) return;
      batch = std::move(queue_.front());
      queue_.pop_front();
      ++busy_;
    }
    std::vector<uint64_t> hashes;
    hashes.reserve(batch.parents.size());
    for (const JobKey& key : batch.parents) {
      hashes.push_back(KeyHash(key.topic, key.id));
    }
    while (true) {
      absl::Status s;
      {
        KeyLocks::Guard guard(*d_.locks, hashes);
        s = Fire(batch.ms, batch.parents);
      }
      if (s.ok()) break;
      DELAYD_LOG_ERROR("recurring jobs due at %d: %s; trying again in %d ms",
                       batch.ms, s.ToString(), kRetryMs);
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(
              absl::Condition(
                  +[](OccurrenceMaker* m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                       m->mu_) { return m->stop_; },
                  this),
              absl::Milliseconds(kRetryMs))) {
        --busy_;
        return;
      }
    }
    absl::MutexLock lock(&mu_);
    --busy_;
  }
}

absl::Status OccurrenceMaker::Fire(int64_t ms,
                                   std::span<const JobKey> parents) {
  const int64_t now_ms = d_.clock->NowMs();
  std::vector<storage::JobKeyView> keys;
  keys.reserve(parents.size());
  for (const JobKey& key : parents) keys.push_back({key.topic, key.id});
  absl::StatusOr<std::vector<std::optional<JobRecord>>> stored =
      d_.store->MultiGet(keys);
  if (!stored.ok()) return stored.status();

  std::vector<Firing> firings;
  firings.reserve(parents.size());
  for (std::optional<JobRecord>& record : *stored) {
    // The index and its records agree (JobStore's invariant): skip what
    // does not (as the one-shot fire path does).
    if (!record.has_value() || !record->job().has_recurring() ||
        DueIndexEntryOf(*record) != ms) {
      continue;
    }
    Firing f;
    f.old = *record;
    f.parent = *std::move(record);
    v1::Job& job = *f.parent.mutable_job();
    *job.mutable_updated_at() = UnixMsToTimestamp(now_ms);
    absl::StatusOr<recurring::Recurrence> recurrence = LoadRecurrence(f.old);
    if (!recurrence.ok()) {
      // The recurrence no longer loads (a time zone gone from the tzdata):
      // the job pauses, saying why, rather than fire at a guess.
      DELAYD_LOG_ERROR("recurring job (%s, %s) paused: %s", job.topic(),
                       job.id(), recurrence.status().ToString());
      job.set_state(v1::JOB_STATE_PAUSED);
      job.set_last_error(std::string(recurrence.status().message()));
      firings.push_back(std::move(f));
      continue;
    }
    v1::RecurringStatus& r = *job.mutable_recurring();
    const v1::Recurrence& spec = r.recurrence();
    if (r.has_next_occurrence() &&
        TimestampToUnixMs(r.next_occurrence()) <= now_ms) {
      // Occurrences due now, by the misfire policy.
      recurring::Plan plan = recurring::PlanOccurrences(
          *recurrence, spec.misfire(), spec.max_occurrences(),
          r.occurrences_fired(), TimestampToUnixMs(r.next_occurrence()),
          now_ms);
      f.children = std::move(plan.children);
      f.misfired = plan.misfired;
      if (plan.next_ms.has_value()) {
        *r.mutable_next_occurrence() = UnixMsToTimestamp(*plan.next_ms);
      } else {
        r.clear_next_occurrence();
      }
      f.parent.set_occurrences_through_ms(now_ms);
    } else if (r.has_next_occurrence() && !r.has_buffered_occurrence()) {
      // Within the lead of the next one: it may be made ahead.
      const int64_t next = TimestampToUnixMs(r.next_occurrence());
      if (next - now_ms <= LeadMs(f.parent.occurrences_through_ms(), next)) {
        f.ahead = next;
        const bool last = spec.max_occurrences() > 0 &&
                          r.occurrences_fired() + 1 >= spec.max_occurrences();
        if (!last) f.after_ahead = recurrence->NextAfter(next);
      }
    }
    firings.push_back(std::move(f));
  }

  // The last children (for overlap) and the new ones' keys (occupied?).
  std::vector<std::string> child_ids;
  std::vector<storage::JobKeyView> child_keys;
  auto count = [](const Firing& f) {
    const v1::RecurringStatus& r = f.parent.job().recurring();
    return (r.has_last_occurrence() ? 1 : 0) + f.children.size() +
           (r.has_buffered_occurrence() ? 1 : 0) + (f.ahead ? 1 : 0);
  };
  for (const Firing& f : firings) {
    const v1::RecurringStatus& r = f.parent.job().recurring();
    if (r.has_last_occurrence()) {
      child_ids.push_back(OccurrenceId(f.parent.job().id(),
                                       TimestampToUnixMs(r.last_occurrence())));
    }
    for (int64_t t : f.children) {
      child_ids.push_back(OccurrenceId(f.parent.job().id(), t));
    }
    if (r.has_buffered_occurrence()) {
      child_ids.push_back(OccurrenceId(
          f.parent.job().id(), TimestampToUnixMs(r.buffered_occurrence())));
    }
    if (f.ahead)
      child_ids.push_back(OccurrenceId(f.parent.job().id(), *f.ahead));
  }
  // child_ids no longer grows: views into it stay valid.
  size_t next_child = 0;
  for (const Firing& f : firings) {
    const size_t n = count(f);
    for (size_t i = 0; i < n; ++i) {
      child_keys.push_back({f.parent.job().topic(), child_ids[next_child++]});
    }
  }
  absl::StatusOr<std::vector<std::optional<JobRecord>>> children =
      d_.store->MultiGet(child_keys);
  if (!children.ok()) return children.status();

  std::vector<Mutation> mutations;
  // The stored state and payload size of each mutation's job.
  std::vector<v1::JobState> before;
  std::vector<int64_t> before_bytes;
  size_t c = 0;
  for (Firing& f : firings) {
    v1::Job& job = *f.parent.mutable_job();
    v1::RecurringStatus& r = *job.mutable_recurring();
    const bool last_live = r.has_last_occurrence() && Live((*children)[c++]);
    std::vector<std::pair<int64_t, const std::optional<JobRecord>*>> make;
    for (int64_t t : f.children) make.push_back({t, &(*children)[c++]});
    const std::optional<JobRecord>* buffered_child =
        r.has_buffered_occurrence() ? &(*children)[c++] : nullptr;
    const std::optional<JobRecord>* ahead_child =
        f.ahead ? &(*children)[c++] : nullptr;
    if (job.state() == v1::JOB_STATE_PAUSED) {
      // Paused above: only the parent changes.
      mutations.push_back(Mutation::Put(f.parent, DueIndexEntryOf(f.old),
                                        ExpiryIndexEntryOf(f.old)));
      before.push_back(f.old.job().state());
      before_bytes.push_back(PayloadBytesOf(f.old));
      continue;
    }
    const v1::OverlapPolicy overlap = r.recurrence().overlap();
    if (last_live && overlap != v1::OVERLAP_POLICY_ALLOW) {
      if (overlap == v1::OVERLAP_POLICY_BUFFER_ONE && !make.empty()) {
        // The latest waits; an older one waiting is passed over.
        if (r.has_buffered_occurrence()) ++f.overlapped;
        *r.mutable_buffered_occurrence() = UnixMsToTimestamp(make.back().first);
        make.pop_back();
        buffered_child = nullptr;
      }
      f.overlapped += make.size();
      make.clear();
    } else if (buffered_child != nullptr) {
      make.insert(make.begin(),
                  {TimestampToUnixMs(r.buffered_occurrence()), buffered_child});
      r.clear_buffered_occurrence();
    }
    // Made ahead only when nothing would stop it at its time: the last
    // child has ended (or ALLOW), and its key is free.
    bool at_occurrence = false;
    if (f.ahead) {
      if ((last_live && overlap != v1::OVERLAP_POLICY_ALLOW) ||
          Taken(*ahead_child)) {
        at_occurrence = true;  // decided at the occurrence, as above
      } else {
        f.parent.set_ahead_ms(*f.ahead);
        f.parent.set_last_before_ahead_ms(
            r.has_last_occurrence() ? TimestampToUnixMs(r.last_occurrence())
                                    : 0);
        f.parent.set_occurrences_through_ms(*f.ahead);
        if (f.after_ahead) {
          *r.mutable_next_occurrence() = UnixMsToTimestamp(*f.after_ahead);
        } else {
          r.clear_next_occurrence();
        }
        make.push_back({*f.ahead, ahead_child});
      }
    }
    for (const auto& [t, child] : make) {
      if (Taken(*child)) {
        ++f.overlapped;  // its key is taken
        continue;
      }
      JobRecord record = MakeChild(job, t, now_ms);
      record.set_made_ahead(f.ahead == t);  // only there when made ahead
      before.push_back(child->has_value() ? (*child)->job().state()
                                          : v1::JOB_STATE_UNSPECIFIED);
      before_bytes.push_back(child->has_value() ? PayloadBytesOf(**child) : 0);
      mutations.push_back(Mutation::Put(
          std::move(record),
          child->has_value() ? DueIndexEntryOf(**child) : std::nullopt,
          child->has_value() ? ExpiryIndexEntryOf(**child) : std::nullopt));
      r.set_occurrences_fired(r.occurrences_fired() + 1);
      if (!r.has_last_occurrence() ||
          TimestampToUnixMs(r.last_occurrence()) < t) {
        *r.mutable_last_occurrence() = UnixMsToTimestamp(t);
      }
    }
    r.set_occurrences_skipped(r.occurrences_skipped() + f.misfired +
                              f.overlapped);
    before.push_back(f.old.job().state());
    before_bytes.push_back(PayloadBytesOf(f.old));
    if (!r.has_next_occurrence() && !r.has_buffered_occurrence()) {
      mutations.push_back(
          d_.retention->Finish(f.parent, v1::JOB_STATE_DONE, now_ms));
    } else {
      SetDue(f.parent, now_ms, at_occurrence);
      mutations.push_back(Mutation::Put(f.parent, DueIndexEntryOf(f.old),
                                        ExpiryIndexEntryOf(f.old)));
    }
  }
  if (mutations.empty()) return absl::OkStatus();
  // Unsynced, in one batch: a crash loses the children and the parent's
  // advance together, and the parent fires again after the restart. (A
  // synced write after this one — an ack of a child — syncs it too.)
  if (absl::Status s = d_.store->Apply(mutations, storage::Durability::kNoSync);
      !s.ok()) {
    return s;
  }
  absl::flat_hash_map<std::string, int64_t> readied;
  for (size_t i = 0; i < mutations.size(); ++i) {
    const Mutation& m = mutations[i];
    JobLedger::Change change = JobLedger::Of(m, before[i], before_bytes[i]);
    const bool child = m.kind() == Mutation::Kind::kPut &&
                       m.record().job().has_occurrence_of();
    if (child) {
      change.cause = JobLedger::Cause::kScheduled;
      change.ready_now =
          m.new_due_ms().has_value() && *m.new_due_ms() <= now_ms;
    }
    if (d_.ledger->Apply(change)) ++readied[std::string(m.topic())];
  }
  for (const Firing& f : firings) {
    const DeliveryMetrics::Topic& t =
        d_.ledger->metrics().For(f.parent.job().topic());
    const uint64_t fired = f.parent.job().recurring().occurrences_fired() -
                           f.old.job().recurring().occurrences_fired();
    if (fired > 0) t.occurrences_fired->Increment(static_cast<double>(fired));
    if (f.misfired > 0) {
      t.occurrences_misfired->Increment(static_cast<double>(f.misfired));
    }
    if (f.overlapped > 0) {
      t.occurrences_overlapped->Increment(static_cast<double>(f.overlapped));
    }
  }
  for (const auto& [topic, n] : readied) {
    d_.ledger->CountFired(topic, n);
    d_.deliverer->Kick(topic);
  }
  return absl::OkStatus();
}

}  // namespace delayd::server
