// JobWriter: Schedule, Reschedule and Cancel for a caller on gRPC's thread,
// which must not wait — the key lock only if free, the write through the
// CommitQueue, or under --sync=none on this thread unless it would stall
// (on the polling thread, gathered with the others of its turn:
// WriteGathered).
#include <memory>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "server/core/job_writer.h"
#include "server/core/occurrences.h"
#include "server/jobs/job_key.h"
#include "server/jobs/validation.h"
#include "storage/job_record.h"
#include "storage/job_store.h"

namespace delayd::server {

using storage::JobRecord;

namespace {

// SubmitDecision's reply to an Async call's `done`: the write's error, or
// `response(decision)` once written.
template <typename Response, typename Make>
auto ReplyOnceWritten(
    absl::AnyInvocable<void(absl::StatusOr<Response>) &&> done, Make response) {
  return [done = std::move(done), response = std::move(response)](
             absl::Status written, auto& decision) mutable {
    if (!written.ok()) {
      std::move(done)(std::move(written));
    } else {
      std::move(done)(response(decision));
    }
  };
}

}  // namespace

std::optional<absl::StatusOr<JobWriter::LockedOne>> JobWriter::TryLockAndRead(
    std::string_view topic, std::string_view id) {
  LockedOne out;
  out.guard = d_.locks->TryLock(KeyHash(AsAbsl(topic), AsAbsl(id)));
  if (out.guard == nullptr) return std::nullopt;
  std::vector<std::optional<JobRecord>> stored(1);
  {
    absl::StatusOr<std::optional<JobRecord>> one = d_.store->Get(topic, id);
    if (!one.ok()) return one.status();
    stored[0] = *std::move(one);
  }
  d_.deliverer->OverlayLeases(stored);
  if (stored[0].has_value() && AheadChildId(*stored[0]).has_value()) {
    return std::nullopt;  // its occurrence made ahead needs its lock too
  }
  out.stored = std::move(stored[0]);
  return out;
}

void JobWriter::SubmitDecision(CommitQueue& commits,
                               std::unique_ptr<Decision> d,
                               std::unique_ptr<KeyLocks::Guard> guard,
                               Reply reply) {
  if (inline_writes_) {
    if (gatherer_.load(std::memory_order_relaxed) ==
        std::this_thread::get_id()) {
      gathered_.push_back({std::move(d), std::move(guard), std::move(reply)});
      return;
    }
    absl::Status written =
        d_.store->Apply({&*d->mutation, 1}, storage::Durability::kSyncNoStall);
    if (!storage::IsWouldStall(written)) {
      if (written.ok()) Commit(*d);
      guard.reset();
      std::move(reply)(std::move(written), *d);
      return;
    }
  }
  Enqueue(commits, std::move(d), std::move(guard), std::move(reply));
}

void JobWriter::Enqueue(CommitQueue& commits, std::unique_ptr<Decision> d,
                        std::unique_ptr<KeyLocks::Guard> guard, Reply reply) {
  storage::Mutation mutation = *std::move(d->mutation);
  d->mutation.reset();
  commits.Submit(std::move(mutation),
                 [this, d = std::move(d), guard = std::move(guard),
                  reply = std::move(reply)](absl::Status written,
                                            storage::Mutation&& m) mutable {
                   if (written.ok()) {
                     d->mutation = std::move(m);
                     Commit(*d);
                   }
                   guard.reset();
                   std::move(reply)(std::move(written), *d);
                 });
}

bool JobWriter::WriteGathered(CommitQueue& commits) {
  if (gathered_.empty()) return false;
  std::vector<Gathered> group;
  group.swap(gathered_);  // answers may gather more meanwhile
  std::vector<storage::Mutation> mutations;
  mutations.reserve(group.size());
  for (Gathered& g : group) {
    mutations.push_back(*std::move(g.d->mutation));
    g.d->mutation.reset();
  }
  const absl::Status written =
      d_.store->Apply(mutations, storage::Durability::kSyncNoStall);
  for (size_t i = 0; i < group.size(); ++i) {
    Gathered& g = group[i];
    g.d->mutation = std::move(mutations[i]);
    if (!written.ok()) {
      // It would stall, or failed: through the queue, which may wait, and
      // writes each alone if their batch fails there too, so that a
      // failure reaches no call whose write would have succeeded alone.
      Enqueue(commits, std::move(g.d), std::move(g.guard), std::move(g.reply));
      continue;
    }
    Commit(*g.d);
    g.guard.reset();
    std::move(g.reply)(absl::OkStatus(), *g.d);
  }
  return true;
}

bool JobWriter::ScheduleAsync(const v1::ScheduleRequest& req,
                              CommitQueue& commits, ScheduleDone& done) {
  const int64_t now_ms = d_.clock->NowMs();
  absl::StatusOr<Planned> plan = Plan("", req, now_ms);
  if (!plan.ok()) {
    std::move(done)(plan.status());
    return true;
  }
  const v1::JobSpec& spec = plan->request.job();
  std::optional<absl::StatusOr<LockedOne>> locked =
      TryLockAndRead(spec.topic(), spec.id());
  if (!locked.has_value()) return false;
  if (!locked->ok()) {
    std::move(done)(locked->status());
    return true;
  }
  auto d = std::make_unique<Decision>(
      Decide(*plan, (*locked)->stored, std::nullopt, now_ms));
  if (!d->status.ok()) {
    std::move(done)(d->status);
  } else if (!d->mutation.has_value()) {
    std::move(done)(ScheduleReply(*d));
  } else {
    SubmitDecision(commits, std::move(d), std::move((*locked)->guard),
                   ReplyOnceWritten(std::move(done), &ScheduleReply));
  }
  return true;
}

bool JobWriter::RescheduleAsync(const v1::RescheduleRequest& req,
                                CommitQueue& commits, RescheduleDone& done) {
  const int64_t now_ms = d_.clock->NowMs();
  absl::StatusOr<int64_t> due = PlanReschedule(req, now_ms);
  if (!due.ok()) {
    std::move(done)(due.status());
    return true;
  }
  const v1::JobKey& key = req.key();
  std::optional<absl::StatusOr<LockedOne>> locked =
      TryLockAndRead(key.topic(), key.id());
  if (!locked.has_value()) return false;
  if (!locked->ok()) {
    std::move(done)(locked->status());
    return true;
  }
  absl::StatusOr<Decision> decided =
      DecideReschedule(req, *due, (*locked)->stored, std::nullopt, now_ms);
  if (!decided.ok()) {
    std::move(done)(decided.status());
    return true;
  }
  SubmitDecision(commits, std::make_unique<Decision>(*std::move(decided)),
                 std::move((*locked)->guard),
                 ReplyOnceWritten(std::move(done), &RescheduleReply));
  return true;
}

bool JobWriter::CancelAsync(const v1::CancelRequest& req, CommitQueue& commits,
                            CancelDone& done) {
  if (absl::Status s = ValidateKey("key", req.key(), *d_.limits); !s.ok()) {
    std::move(done)(s);
    return true;
  }
  const int64_t now_ms = d_.clock->NowMs();
  const v1::JobKey& key = req.key();
  std::optional<absl::StatusOr<LockedOne>> locked =
      TryLockAndRead(key.topic(), key.id());
  if (!locked.has_value()) return false;
  if (!locked->ok()) {
    std::move(done)(locked->status());
    return true;
  }
  v1::CancelResponse response;
  auto d = std::make_unique<Decision>(
      DecideCancel((*locked)->stored, std::nullopt, now_ms, response));
  if (!d->mutation.has_value()) {
    std::move(done)(std::move(response));
    return true;
  }
  SubmitDecision(
      commits, std::move(d), std::move((*locked)->guard),
      ReplyOnceWritten(std::move(done),
                       [response = std::move(response)](auto&) mutable {
                         return std::move(response);
                       }));
  return true;
}

}  // namespace delayd::server
