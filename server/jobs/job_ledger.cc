#include "server/jobs/job_ledger.h"

#include <algorithm>
#include <array>
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

int64_t JobLedger::ApplyBatch(std::span<const Change> changes) {
  int64_t queued = 0;
  size_t begin = 0;
  while (begin < changes.size()) {
    size_t end = begin + 1;
    while (end < changes.size() && changes[end].topic == changes[begin].topic) {
      ++end;
    }
    queued += ApplyRun(changes.subspan(begin, end - begin));
    begin = end;
  }
  return queued;
}

int64_t JobLedger::ApplyRun(std::span<const Change> run) {
  // What Apply does change by change, gathered by table. The keys are
  // distinct, so the order between tables does not matter; within one
  // table it is kept.
  const absl::string_view topic = run.front().topic;
  std::vector<absl::string_view> unready;  // RemoveReady
  std::vector<absl::string_view> ready;    // PushReady, in order
  std::vector<DueBook::Entries> moves;
  std::vector<JobTimers::Entry> disarm;
  std::vector<JobTimers::Entry> arm;
  int64_t jobs = 0;
  int64_t payload_bytes = 0;
  std::array<int64_t, 5> causes{};  // by Cause
  int64_t dead_lettered = 0;
  for (const Change& c : run) {
    const bool live_before = storage::IsLive(c.before);
    const bool live_after = storage::IsLive(c.after);
    const bool waiting =
        c.after == v1::JOB_STATE_SCHEDULED || c.after == v1::JOB_STATE_READY;
    if (live_before && c.after != v1::JOB_STATE_IN_FLIGHT) {
      unready.push_back(c.id);
    }
    terminal_->NoteChange(c.topic, c.id, c.before, c.after);
    // (An attempt mark moves no entry: a dispatch round's changes all keep
    // theirs, and need no lock of the due book.)
    if (c.previous_due_ms != c.due_ms) {
      moves.push_back({c.previous_due_ms, c.due_ms});
    }
    if (waiting && c.due_ms.has_value()) {
      if (c.ready_now) {
        disarm.push_back({0, KeyHash(c.topic, c.id), KeyCheck(c.topic, c.id)});
        ready.push_back(c.id);
      } else {
        arm.push_back(
            {*c.due_ms, KeyHash(c.topic, c.id), KeyCheck(c.topic, c.id)});
      }
    } else if (c.after != v1::JOB_STATE_IN_FLIGHT) {
      disarm.push_back({0, KeyHash(c.topic, c.id), KeyCheck(c.topic, c.id)});
    }
    jobs += (live_after ? 1 : 0) - (live_before ? 1 : 0);
    payload_bytes += (live_after ? c.payload_bytes_after : 0) -
                     (live_before ? c.payload_bytes_before : 0);
    ++causes[static_cast<size_t>(c.cause)];
    if (c.after == v1::JOB_STATE_DEAD && c.before != v1::JOB_STATE_DEAD) {
      ++dead_lettered;
    }
  }
  if (!unready.empty()) topics_->RemoveReadyBatch(topic, unready);
  if (!moves.empty()) due_->MoveBatch(topic, moves);
  if (!disarm.empty()) timers_->DisarmBatch(disarm);
  for (const JobTimers::Entry& e : arm) timers_->Arm(e.hash, e.check, e.due_ms);
  const int64_t queued =
      ready.empty() ? 0 : topics_->PushReadyBatch(topic, ready);
  if (jobs != 0 || payload_bytes != 0) {
    topics_->AddLive(topic, jobs, payload_bytes);
  }
  if (causes[static_cast<size_t>(Cause::kOther)] ==
          static_cast<int64_t>(run.size()) &&
      dead_lettered == 0) {
    return queued;
  }
  const DeliveryMetrics::Topic& metrics = metrics_->For(topic);
  const auto add = [](prometheus::Counter* counter, int64_t n) {
    if (n > 0) counter->Increment(static_cast<double>(n));
  };
  add(metrics.scheduled, causes[static_cast<size_t>(Cause::kScheduled)]);
  add(metrics.canceled, causes[static_cast<size_t>(Cause::kCanceled)]);
  add(metrics.acked, causes[static_cast<size_t>(Cause::kAcked)]);
  add(metrics.nacked, causes[static_cast<size_t>(Cause::kNacked)]);
  add(metrics.dead_lettered, dead_lettered);
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
  const std::vector<bool> due = timers_->FiredBatch(fired);
  if (std::find(due.begin(), due.end(), false) == due.end()) {
    return topics_->PushReadyBatch(topic, ids);
  }
  std::vector<absl::string_view> ready;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (due[i]) ready.push_back(ids[i]);
  }
  return topics_->PushReadyBatch(topic, ready);
}

void JobLedger::CountFired(absl::string_view topic, int64_t n) {
  if (n > 0) metrics_->For(topic).fired->Increment(static_cast<double>(n));
}

}  // namespace delayd::server
