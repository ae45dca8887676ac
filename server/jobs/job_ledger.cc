#include "server/jobs/job_ledger.h"

#include <vector>

#include "server/jobs/job_key.h"
#include "storage/job_record.h"

namespace delayd::server {

JobLedger::Change JobLedger::Of(const storage::Mutation& m, v1::JobState before,
                                int64_t payload_bytes_before, Cause cause) {
  const bool put = m.kind() == storage::Mutation::Kind::kPut;
  Change c;
  c.topic = AsAbsl(m.topic());
  c.id = AsAbsl(m.id());
  c.before = before;
  c.after = put ? m.record().job().state() : v1::JOB_STATE_UNSPECIFIED;
  c.payload_bytes_before = payload_bytes_before;
  c.payload_bytes_after =
      put ? static_cast<int64_t>(m.record().job().payload().size()) : 0;
  c.previous_due_ms = m.previous_due_ms();
  c.due_ms = m.new_due_ms();
  c.cause = cause;
  return c;
}

bool JobLedger::Apply(const Change& c) {
  const bool live_before = storage::IsLive(c.before);
  const bool live_after = storage::IsLive(c.after);
  const bool waiting =
      c.after == v1::JOB_STATE_SCHEDULED || c.after == v1::JOB_STATE_READY;
  // Whatever changed, a queued READY entry no longer stands: the job is
  // gone, or waits for its (new) due time. A job taken for delivery has
  // just left the queue.
  if (live_before && c.after != v1::JOB_STATE_IN_FLIGHT) {
    topics_->RemoveReady(c.topic, c.id);
  }
  terminal_->NoteChange(c.topic, c.id, c.before, c.after);
  due_->Move(c.topic, c.previous_due_ms, c.due_ms);
  bool queued = false;
  if (waiting && c.due_ms.has_value()) {
    if (c.ready_now) {
      // A timer it had (moved into the past) would fire for nothing.
      timers_->Disarm(KeyHash(c.topic, c.id), KeyCheck(c.topic, c.id));
      queued = topics_->PushReady(c.topic, c.id);
    } else {
      timers_->Arm(KeyHash(c.topic, c.id), KeyCheck(c.topic, c.id), *c.due_ms);
    }
  } else if (c.after != v1::JOB_STATE_IN_FLIGHT) {
    timers_->Disarm(KeyHash(c.topic, c.id), KeyCheck(c.topic, c.id));
  }
  const int64_t jobs = (live_after ? 1 : 0) - (live_before ? 1 : 0);
  const int64_t payload_bytes = (live_after ? c.payload_bytes_after : 0) -
                                (live_before ? c.payload_bytes_before : 0);
  if (jobs != 0 || payload_bytes != 0) {
    topics_->AddLive(c.topic, jobs, payload_bytes);
  }

  const bool dead_lettered =
      c.after == v1::JOB_STATE_DEAD && c.before != v1::JOB_STATE_DEAD;
  if (c.cause == Cause::kOther && !dead_lettered) return queued;
  const DeliveryMetrics::Topic& metrics = metrics_->For(c.topic);
  switch (c.cause) {
    case Cause::kScheduled:
      metrics.scheduled->Increment();
      break;
    case Cause::kCanceled:
      metrics.canceled->Increment();
      break;
    case Cause::kAcked:
      metrics.acked->Increment();
      break;
    case Cause::kNacked:
      metrics.nacked->Increment();
      break;
    case Cause::kOther:
      break;
  }
  if (dead_lettered) metrics.dead_lettered->Increment();
  return queued;
}

bool JobLedger::Due(absl::string_view topic, absl::string_view id) {
  return DueBatch(topic, std::span<const absl::string_view>(&id, 1)) == 1;
}

int64_t JobLedger::DueBatch(absl::string_view topic,
                            std::span<const absl::string_view> ids) {
  std::vector<JobTimers::Entry> fired;
  fired.reserve(ids.size());
  for (absl::string_view id : ids) {
    fired.push_back({0, KeyHash(topic, id), KeyCheck(topic, id)});
  }
  timers_->FiredBatch(fired);
  return topics_->PushReadyBatch(topic, ids);
}

void JobLedger::CountFired(absl::string_view topic, int64_t n) {
  if (n > 0) metrics_->For(topic).fired->Increment(static_cast<double>(n));
}

}  // namespace delayd::server
