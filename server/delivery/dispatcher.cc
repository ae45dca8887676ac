#include "server/delivery/dispatcher.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "delayd/proto_time.h"
#include "server/base/log.h"
#include "server/base/stage_cpu.h"
#include "server/delivery/ack_token.h"
#include "server/delivery/lease_endings.h"
#include "storage/job_record.h"

namespace delayd::server {

using storage::JobRecord;
using storage::Mutation;
using storage::PayloadBytesOf;
using storage::TimestampToUnixMs;
using storage::UnixMsToTimestamp;

namespace {

JobRecord OutOfAttempts(JobRecord record, int64_t now_ms) {
  v1::Job& job = *record.mutable_job();
  if (job.state() == v1::JOB_STATE_IN_FLIGHT) {
    job.set_last_error(
        "out of attempts: the last delivery was lost in a restart");
  }
  job.set_state(v1::JOB_STATE_DEAD);
  *job.mutable_updated_at() = UnixMsToTimestamp(now_ms);
  record.set_lease_expires_at_ms(0);
  return record;
}

}  // namespace

JobLedger::Change Dispatcher::LeaseChange(const storage::Mutation& mark,
                                          v1::JobState before,
                                          v1::JobState after) {
  JobLedger::Change change;
  change.topic = AsAbsl(mark.topic());
  change.id = AsAbsl(mark.id());
  change.before = before;
  change.after = after;
  change.previous_due_ms = mark.previous_due_ms();  // a mark moves no entry
  change.due_ms = mark.new_due_ms();
  // Nor does it change the payload.
  change.payload_bytes_before = static_cast<int64_t>(mark.payload_bytes());
  change.payload_bytes_after = change.payload_bytes_before;
  return change;
}

void Dispatcher::UndoOrphans(const std::vector<size_t>& orphans,
                             const std::vector<Prior>& priors,
                             const std::vector<Mutation>& mutations) {
  std::vector<Mutation> undo;
  for (size_t k : orphans) {
    const Mutation& mark = mutations[k];
    // The mark as it was before: the stored attempts (0 clears it).
    undo.push_back(Mutation::MarkAttempt(
        std::string(mark.topic()), std::string(mark.id()), *mark.new_due_ms(),
        priors[k].attempts, mark.payload_bytes()));
  }
  if (absl::Status s = d_.store->Apply(undo, storage::Durability::kNoSync);
      !s.ok()) {
    // The mark stays one attempt ahead: it counts only if a crash comes
    // before the job's next delivery, which overwrites it.
    DELAYD_LOG_ERROR(
        "dispatch: cannot undo %d attempt marks of a gone "
        "subscriber: %s",
        undo.size(), s.ToString());
  }
  for (size_t k : orphans) {
    JobLedger::Change change =
        LeaseChange(mutations[k], v1::JOB_STATE_IN_FLIGHT, priors[k].state);
    change.ready_now = true;  // it was due: queued again (by the caller)
    d_.ledger->Apply(change);
  }
}

void Dispatcher::Dispatch(const std::string& topic) {
  const stage_cpu::Scope stage(stage_cpu::Stage::kDispatch);
  stage_cpu::Splitter stages;
  auto round = rounds_.find(topic);
  const size_t want = round == rounds_.end() ? kChunk : round->second;
  TopicTable& topics = d_.ledger->topics();
  // A deep backlog's rounds go to one subscriber after another: fewer,
  // larger stream messages and Acks. A shallower queue is split evenly.
  const size_t per_turn =
      want > kChunk && topics.CountsOf(topic).ready >= kTurnBacklog ? want : 1;
  std::vector<uint64_t> slots;
  {
    absl::MutexLock lock(&state_->mu);
    slots = state_->subscribers.Reserve(topic, want, per_turn);
  }
  if (slots.empty()) return;
  const std::vector<std::string> ids = topics.PopReady(topic, slots.size());
  if (ids.size() == slots.size()) loop_->Kick(topic);  // there may be more
  if (ids.size() < slots.size()) {
    // The queue is empty: the next backlog starts small again.
    if (round != rounds_.end()) rounds_.erase(round);
  } else if (slots.size() == want) {
    // A backlog, and credit for all of it: the next round takes more.
    const size_t next = std::min(kMaxRound, 2 * want);
    if (round == rounds_.end()) {
      rounds_.emplace(topic, next);
    } else {
      round->second = next;
    }
  }  // else credit bound this round: the next asks for as much again.
  std::vector<uint64_t> hashes;
  std::vector<storage::JobKeyView> keys;
  hashes.reserve(ids.size());
  keys.reserve(ids.size());
  for (const std::string& id : ids) {
    hashes.push_back(KeyHash(topic, id));
    keys.push_back({topic, id});
  }
  struct Send {
    std::shared_ptr<DeliverySink> sink;
    v1::Delivery delivery;
  };
  stages.Mark(stage_cpu::Stage::kDispatchPop);
  std::vector<Send> sends;
  sends.reserve(ids.size());
  bool backoff = false;
  {
    KeyLocks::Guard guard(*d_.locks, hashes);
    stages.Mark(stage_cpu::Stage::kDispatchLock);
    absl::StatusOr<std::vector<std::optional<JobRecord>>> stored =
        ids.empty() ? std::vector<std::optional<JobRecord>>()
                    : d_.store->MultiGet(keys);
    if (!stored.ok()) {
      DELAYD_LOG_ERROR("dispatch %s: cannot read jobs: %s", topic,
                       stored.status().ToString());
    }
    stages.Mark(stage_cpu::Stage::kDispatchRead);
    const int64_t now_ms = d_.clock->NowMs();
    std::vector<size_t> picked;  // index into ids
    std::vector<v1::JobState> before;
    // The attempt marks of the leases, then the out of attempts.
    std::vector<Mutation> mutations;
    std::vector<JobRecord> leased;  // as the leases show them, IN_FLIGHT
    std::vector<Prior> priors;      // of the leases
    std::vector<Mutation> dead;
    std::vector<v1::JobState> dead_before;
    picked.reserve(ids.size());
    before.reserve(ids.size());
    mutations.reserve(ids.size());
    leased.reserve(ids.size());
    priors.reserve(ids.size());
    if (stored.ok()) {
      absl::MutexLock lock(&state_->mu);
      for (size_t i = 0; i < ids.size(); ++i) {
        std::optional<JobRecord>& old = (*stored)[i];
        if (!old.has_value()) continue;  // gone since it fell due
        // Leased: not ready (it was queued twice).
        if (state_->leases.Contains(JobKey{topic, ids[i]})) continue;
        const v1::Job& job = old->job();
        const v1::JobState state = job.state();
        // IN_FLIGHT without a lease: a delivery of an earlier process
        // (recovered from its attempt mark), as good as READY.
        if (state != v1::JOB_STATE_IN_FLIGHT &&
            state != v1::JOB_STATE_SCHEDULED && state != v1::JOB_STATE_READY) {
          continue;  // canceled in flight, dead: not deliverable
        }
        const int64_t due_ms = TimestampToUnixMs(job.fire_at());
        if (due_ms > now_ms) {
          // Moved later, or the wall clock stepped back since it fired:
          // never early. Its timer fires again at the due time.
          d_.ledger->timers().Arm(hashes[i], KeyCheck(topic, ids[i]), due_ms);
          continue;
        }
        const std::optional<int64_t> due_entry = storage::DueIndexEntryOf(*old);
        if (job.attempts() >= job.retry().max_attempts()) {
          // Out of attempts (its last delivery was lost with an earlier
          // process): DEAD, not delivered again.
          dead.push_back(
              Mutation::Put(OutOfAttempts(*std::move(old), now_ms), due_entry));
          dead_before.push_back(state);
          continue;
        }
        priors.push_back({state, job.attempts()});
        // The record is read for this delivery only: change it in place
        // into what the lease shows. Only its attempt mark is written.
        JobRecord& record = leased.emplace_back(*std::move(old));
        v1::Job& next = *record.mutable_job();
        next.set_state(v1::JOB_STATE_IN_FLIGHT);
        next.set_attempts(next.attempts() + 1);
        *next.mutable_updated_at() = UnixMsToTimestamp(now_ms);
        record.set_delivery_nonce(state_->leases.NewNonce());
        record.set_lease_expires_at_ms(LaterMs(
            now_ms,
            std::max<int64_t>(1, DurationMsSaturated(next.retry().lease()))));
        before.push_back(state);
        mutations.push_back(Mutation::MarkAttempt(
            topic, ids[i], *due_entry, next.attempts(), next.payload().size()));
        picked.push_back(i);
      }
    }
    stages.Mark(stage_cpu::Stage::kDispatchPick);
    for (Mutation& m : dead) mutations.push_back(std::move(m));
    absl::Status written =
        stored.ok() ? d_.store->Apply(mutations, storage::Durability::kNoSync)
                    : stored.status();
    if (!written.ok()) {
      DELAYD_LOG_ERROR("dispatch %s: cannot write %d leases: %s", topic,
                       mutations.size(), written.ToString());
      picked.clear();
      mutations.clear();
      dead_before.clear();
    }
    stages.Mark(stage_cpu::Stage::kDispatchMark);
    // One by one: a lease's change takes no lock of the ledger's tables
    // (ApplyBatch measured slower here; BENCHMARKS.md, "Issue 19: the
    // ledger told once an Ack, shared lease timers, ...").
    for (size_t k = 0; k < picked.size(); ++k) {
      d_.ledger->Apply(
          LeaseChange(mutations[k], before[k], v1::JOB_STATE_IN_FLIGHT));
    }
    for (size_t k = 0; k < dead_before.size(); ++k) {
      // A job put DEAD keeps its payload.
      const Mutation& m = mutations[picked.size() + k];
      d_.ledger->Apply(
          JobLedger::Of(m, dead_before[k], PayloadBytesOf(m.record())));
    }
    stages.Mark(stage_cpu::Stage::kDispatchLedger);
    std::vector<size_t> orphans;  // index into picked
    std::vector<JobKey> lease_keys;
    std::vector<LeaseTable::Lease> leases;
    lease_keys.reserve(picked.size());
    leases.reserve(picked.size());
    {
      absl::MutexLock lock(&state_->mu);
      for (size_t k = 0; k < picked.size(); ++k) {
        const std::string& id = ids[picked[k]];
        JobRecord& record = leased[k];
        SubscriberSet::Subscriber* sub = state_->subscribers.Find(slots[k]);
        if (sub == nullptr) {
          // Its stream ended meanwhile: undone below.
          orphans.push_back(k);
          continue;
        }
        LeaseTable::Lease& lease = leases.emplace_back();
        lease.subscriber = sub->id;
        lease.nonce = record.delivery_nonce();
        lease.attempt = record.job().attempts();
        lease.payload_bytes =
            static_cast<uint32_t>(record.job().payload().size());
        lease.deadline_ms = record.lease_expires_at_ms();
        lease.due_ms = *mutations[k].new_due_ms();
        lease.check = state_->leases.NewNonce();
        lease.started_ms = now_ms;
        lease_keys.push_back(JobKey{topic, id});
        Send& send = sends.emplace_back();
        send.sink = sub->sink;
        send.delivery.set_ack_token(
            EncodeAckToken({topic, id, record.job().attempts(),
                            record.delivery_nonce(), lease.check}));
        send.delivery.set_attempt(record.job().attempts());
        *send.delivery.mutable_lease_expires_at() =
            UnixMsToTimestamp(record.lease_expires_at_ms());
        // The job as the lease shows it (PresentJob would copy it
        // unchanged); the record is needed no more.
        send.delivery.mutable_job()->Swap(record.mutable_job());
      }
      // One lease timer for the round's leases of one deadline.
      state_->StartLeasesLocked(lease_keys, leases);
      // Credit reserved for nobody (fewer ready than reserved, jobs gone or
      // not due) returns, and the round-robin goes on from there.
      state_->subscribers.GiveBack(
          topic, absl::MakeConstSpan(slots).subspan(picked.size()));
    }
    stages.Mark(stage_cpu::Stage::kDispatchLease);
    topics.AddInFlight(topic, static_cast<int64_t>(sends.size()));
    if (!written.ok()) {
      for (const std::string& id : ids) topics.PushReady(topic, id);
      backoff = true;
    }
    if (!orphans.empty()) {
      UndoOrphans(orphans, priors, mutations);
      for (size_t k : orphans) topics.PushReady(topic, ids[picked[k]]);
    }
    if (!orphans.empty() || backoff) loop_->Kick(topic);
  }
  if (backoff) {
    // Try again shortly rather than spin on a failing store.
    absl::SleepFor(absl::Milliseconds(100));
  }
  if (sends.empty()) return;
  DeliveryMetrics& metrics = d_.ledger->metrics();
  const DeliveryMetrics::Topic& counters = metrics.For(topic);
  int64_t redelivered = 0;
  const int64_t now_us = d_.clock->NowUs();
  for (const Send& send : sends) {
    const int64_t due_us =
        TimestampToUnixMs(send.delivery.job().fire_at()) * 1000;
    if (send.delivery.attempt() > 1) ++redelivered;
    metrics.ObserveLateness(static_cast<double>(now_us - due_us) / 1e6);
  }
  // Each subscriber's share goes to its sink at once, in order: one stream
  // message when its caps allow.
  stages.Mark(stage_cpu::Stage::kDispatchMetrics);
  std::vector<std::pair<DeliverySink*, std::vector<v1::Delivery>>> batches;
  for (Send& send : sends) {
    auto it = std::find_if(batches.begin(), batches.end(), [&](const auto& b) {
      return b.first == send.sink.get();
    });
    if (it == batches.end()) {
      it = batches.insert(batches.end(), {send.sink.get(), {}});
    }
    it->second.push_back(std::move(send.delivery));
  }
  for (auto& [sink, deliveries] : batches) sink->Send(std::move(deliveries));
  stages.Mark(stage_cpu::Stage::kDispatchSend);
  counters.delivered->Increment(static_cast<double>(sends.size()));
  if (redelivered > 0) {
    counters.redelivered->Increment(static_cast<double>(redelivered));
  }
}

}  // namespace delayd::server
