// JobService's Async calls (ScheduleAsync, RescheduleAsync, CancelAsync),
// for a caller on gRPC's thread: each answers what its blocking twin
// answers, writes once per change, declines while the job's lock is held,
// and under inline writes (--sync=none) answers on the calling thread.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/job_store.h"
#include "tests/server/core/job_service_test_util.h"

namespace delayd::server::testing {
namespace {

using ::testing::HasSubstr;

std::optional<absl::StatusOr<v1::ScheduleResponse>> ScheduleAsyncAndWait(
    JobService& service, const v1::ScheduleRequest& req) {
  return RunAsync<v1::ScheduleResponse>([&](JobWriter::ScheduleDone& done) {
    return service.ScheduleAsync(req, done);
  });
}

std::optional<absl::StatusOr<v1::CancelResponse>> CancelAsyncAndWait(
    JobService& service, const v1::CancelRequest& req) {
  return RunAsync<v1::CancelResponse>([&](JobWriter::CancelDone& done) {
    return service.CancelAsync(req, done);
  });
}

std::optional<absl::StatusOr<v1::RescheduleResponse>> RescheduleAsyncAndWait(
    JobService& service, const v1::RescheduleRequest& req) {
  return RunAsync<v1::RescheduleResponse>([&](JobWriter::RescheduleDone& done) {
    return service.RescheduleAsync(req, done);
  });
}

// ScheduleAsync answers what Schedule answers, writes once per change
// (synced), and writes nothing for an identical retry or a refusal.
TEST_F(JobServiceTest, ScheduleAsyncAnswersAsScheduleDoes) {
  v1::ScheduleRequest req =
      ScheduleReq("t", "a", 30'000, "p", v1::IF_EXISTS_FAIL);
  auto created = ScheduleAsyncAndWait(service(), req);
  ASSERT_TRUE(created.has_value());
  ASSERT_OK(*created);
  EXPECT_TRUE((*created)->created());
  EXPECT_EQ(Ms((*created)->job().fire_at()), kStartMs + 30'000);
  std::optional<storage::JobRecord> stored = Stored("t", "a");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->job().SerializeAsString(),
            (*created)->job().SerializeAsString());
  EXPECT_EQ(memory_.stats().synced_writes, 1u);
  EXPECT_EQ(service().timers_pending(), 1u);
  EXPECT_EQ(Counts("t").live, 1);
  const std::string before = State();

  // An identical retry: the same job, created = false, nothing written.
  auto retry = ScheduleAsyncAndWait(service(), req);
  ASSERT_TRUE(retry.has_value());
  ASSERT_OK(*retry);
  EXPECT_FALSE((*retry)->created());
  EXPECT_EQ((*retry)->job().SerializeAsString(),
            (*created)->job().SerializeAsString());
  // A different spec: refused, as Schedule refuses it.
  v1::ScheduleRequest other = ScheduleReq("t", "a", 60'000, "q");
  auto refused = ScheduleAsyncAndWait(service(), other);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(refused->status(), service().Schedule(other).status());
  // Invalid: refused naming the field.
  v1::ScheduleRequest invalid = ScheduleReq("", "b", 1000);
  auto bad = ScheduleAsyncAndWait(service(), invalid);
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad->status().message()), HasSubstr("job.topic"));
  EXPECT_EQ(State(), before);
  EXPECT_EQ(memory_.stats().synced_writes, 1u);

  // REPLACE: written, the timer moved.
  other.set_if_exists(v1::IF_EXISTS_REPLACE);
  auto replaced = ScheduleAsyncAndWait(service(), other);
  ASSERT_TRUE(replaced.has_value());
  ASSERT_OK(*replaced);
  EXPECT_TRUE((*replaced)->created());
  EXPECT_EQ(Ms(Stored("t", "a")->job().fire_at()), kStartMs + 60'000);
  EXPECT_EQ(memory_.stats().synced_writes, 2u);
  EXPECT_EQ(service().timers_pending(), 1u);
  EXPECT_EQ(Counts("t").live, 1);
}

// With the job's key lock held (a write of it under way), ScheduleAsync
// does nothing and says so, for the caller to run Schedule, which waits.
TEST_F(JobServiceTest, ScheduleAsyncDeclinesWhileTheJobIsLocked) {
  const std::string before = State();
  {
    KeyLocks::Guard held(service().LocksForTesting(), KeyHash("t", "x"));
    EXPECT_FALSE(ScheduleAsyncAndWait(service(), ScheduleReq("t", "x", 1000))
                     .has_value());
    EXPECT_EQ(State(), before);
    EXPECT_EQ(memory_.stats().synced_writes, 0u);
    // Another job is not held up.
    auto other = ScheduleAsyncAndWait(service(), ScheduleReq("t", "y", 1000));
    ASSERT_TRUE(other.has_value());
    EXPECT_OK(*other);
  }
  auto now_free = ScheduleAsyncAndWait(service(), ScheduleReq("t", "x", 1000));
  ASSERT_TRUE(now_free.has_value());
  EXPECT_OK(*now_free);
  EXPECT_EQ(Counts("t").live, 2);
}

// CancelAsync answers what Cancel answers: a scheduled job canceled
// (written once, synced, its timer and counts gone), an absent one
// NOT_FOUND and a bad key INVALID_ARGUMENT without a write; it declines,
// writing nothing, while the job's lock is held.
TEST_F(JobServiceTest, CancelAsyncAnswersAsCancelDoes) {
  MustSchedule("t", "a", 30'000);
  MustSchedule("t", "b", 30'000);
  ASSERT_EQ(memory_.stats().synced_writes, 2u);
  auto canceled = CancelAsyncAndWait(service(), CancelReq("t", "a"));
  ASSERT_TRUE(canceled.has_value());
  ASSERT_OK(*canceled);
  EXPECT_EQ((*canceled)->outcome(), v1::CANCEL_OUTCOME_CANCELED);
  EXPECT_EQ((*canceled)->job().state(), v1::JOB_STATE_CANCELED);
  EXPECT_FALSE(Stored("t", "a").has_value());
  EXPECT_EQ(memory_.stats().synced_writes, 3u);
  EXPECT_EQ(service().timers_pending(), 1u);
  EXPECT_EQ(Counts("t").live, 1);
  const std::string before = State();

  auto absent = CancelAsyncAndWait(service(), CancelReq("t", "a"));
  ASSERT_TRUE(absent.has_value());
  ASSERT_OK(*absent);
  EXPECT_EQ((*absent)->outcome(), v1::CANCEL_OUTCOME_NOT_FOUND);
  auto bad = CancelAsyncAndWait(service(), CancelReq("", "a"));
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad->status().message()), HasSubstr("key.topic"));
  {
    KeyLocks::Guard held(service().LocksForTesting(), KeyHash("t", "b"));
    EXPECT_FALSE(
        CancelAsyncAndWait(service(), CancelReq("t", "b")).has_value());
  }
  EXPECT_EQ(State(), before);
  EXPECT_EQ(memory_.stats().synced_writes, 3u);
}

// RescheduleAsync answers what Reschedule answers: the job moved (written
// once, synced; its due entry and timer moved), an absent job NOT_FOUND,
// one IN_FLIGHT FAILED_PRECONDITION and a bad key or time INVALID_ARGUMENT,
// each without a write; it declines, writing nothing, while the job's lock
// is held.
TEST_F(JobServiceTest, RescheduleAsyncAnswersAsRescheduleDoes) {
  MustSchedule("t", "a", 30'000, "p");
  PutRecord("t", "flying", v1::JOB_STATE_IN_FLIGHT, kStartMs - 5);
  const uint64_t writes = memory_.stats().synced_writes;
  const int64_t live = Counts("t").live;
  clock_.AdvanceMs(5);
  auto moved = RescheduleAsyncAndWait(
      service(), RescheduleAtReq("t", "a", kStartMs + 90'000));
  ASSERT_TRUE(moved.has_value());
  ASSERT_OK(*moved);
  EXPECT_EQ(Ms((*moved)->job().fire_at()), kStartMs + 90'000);
  EXPECT_EQ(Ms((*moved)->job().updated_at()), kStartMs + 5);
  EXPECT_EQ((*moved)->job().payload(), "p");
  std::optional<storage::JobRecord> stored = Stored("t", "a");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->job().SerializeAsString(),
            (*moved)->job().SerializeAsString());
  EXPECT_EQ(memory_.stats().synced_writes, writes + 1);
  EXPECT_EQ(service().timers_pending(), 1u);
  EXPECT_EQ(Counts("t").live, live);
  const std::string before = State();

  v1::RescheduleRequest negative;
  *negative.mutable_key() = Key("t", "a");
  *negative.mutable_delay() = DurationMs(-1);
  for (const v1::RescheduleRequest& req :
       {RescheduleAtReq("t", "missing", kStartMs + 1),
        RescheduleAtReq("t", "flying", kStartMs + 1),
        RescheduleAtReq("", "a", kStartMs + 1), negative}) {
    auto refused = RescheduleAsyncAndWait(service(), req);
    ASSERT_TRUE(refused.has_value()) << req.DebugString();
    EXPECT_FALSE(refused->ok()) << req.DebugString();
    EXPECT_EQ(refused->status(), service().Reschedule(req).status());
  }
  {
    KeyLocks::Guard held(service().LocksForTesting(), KeyHash("t", "a"));
    EXPECT_FALSE(RescheduleAsyncAndWait(service(),
                                        RescheduleAtReq("t", "a", kStartMs + 1))
                     .has_value());
  }
  EXPECT_EQ(State(), before);
  EXPECT_EQ(memory_.stats().synced_writes, writes + 1);
}

// With inline writes (--sync=none), the Async calls write on the calling
// thread: answered before they return, nothing through the commit queue. A
// write that would stall goes through the queue after all; a write error is
// answered as it is.
TEST_F(JobServiceTest, InlineWritesAnswerOnTheCallingThread) {
  service().SetInlineWrites(true);
  std::optional<absl::StatusOr<v1::ScheduleResponse>> scheduled;
  JobWriter::ScheduleDone schedule_done =
      [&](absl::StatusOr<v1::ScheduleResponse> r) { scheduled = std::move(r); };
  ASSERT_TRUE(
      service().ScheduleAsync(ScheduleReq("t", "a", 30'000), schedule_done));
  ASSERT_TRUE(scheduled.has_value());
  ASSERT_OK(*scheduled);
  EXPECT_TRUE((*scheduled)->created());
  EXPECT_TRUE(Stored("t", "a").has_value());
  EXPECT_EQ(service().timers_pending(), 1u);

  std::optional<absl::StatusOr<v1::RescheduleResponse>> moved;
  JobWriter::RescheduleDone reschedule_done =
      [&](absl::StatusOr<v1::RescheduleResponse> r) { moved = std::move(r); };
  ASSERT_TRUE(service().RescheduleAsync(
      RescheduleAtReq("t", "a", kStartMs + 90'000), reschedule_done));
  ASSERT_TRUE(moved.has_value());
  ASSERT_OK(*moved);
  EXPECT_EQ(Ms(Stored("t", "a")->job().fire_at()), kStartMs + 90'000);

  std::optional<absl::StatusOr<v1::CancelResponse>> canceled;
  JobWriter::CancelDone cancel_done =
      [&](absl::StatusOr<v1::CancelResponse> r) { canceled = std::move(r); };
  ASSERT_TRUE(service().CancelAsync(CancelReq("t", "a"), cancel_done));
  ASSERT_TRUE(canceled.has_value());
  ASSERT_OK(*canceled);
  EXPECT_EQ((*canceled)->outcome(), v1::CANCEL_OUTCOME_CANCELED);
  EXPECT_FALSE(Stored("t", "a").has_value());
  EXPECT_EQ(service().timers_pending(), 0u);
  EXPECT_EQ(service().commits().writes(), 0);

  // Would stall: written through the queue instead.
  store_.FailNextWrites(1, storage::WouldStallError());
  auto queued = ScheduleAsyncAndWait(service(), ScheduleReq("t", "b", 1000));
  ASSERT_TRUE(queued.has_value());
  ASSERT_OK(*queued);
  EXPECT_TRUE(Stored("t", "b").has_value());
  EXPECT_EQ(service().commits().writes(), 1);
  EXPECT_EQ(Counts("t").live, 1);

  // A write error: answered, nothing written, not tried again.
  store_.FailNextWrites(1, absl::UnavailableError("disk on fire"));
  auto failed = ScheduleAsyncAndWait(service(), ScheduleReq("t", "c", 1000));
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(Stored("t", "c").has_value());
  EXPECT_EQ(service().commits().writes(), 1);
  EXPECT_EQ(Counts("t").live, 1);
}

// With inline writes, the gatherer's Async calls (gRPC's polling thread)
// keep their writes, each job locked, until WriteGathered writes them as
// one store write and answers each; nothing is answered before. A job
// whose write is gathered declines another Async call on it.
TEST_F(JobServiceTest, TheGathererWritesItsCallsAsOneWrite) {
  ASSERT_OK(service().Schedule(ScheduleReq("t", "z", 30'000)));
  service().SetInlineWrites(true);
  service().GatherOnThisThread();
  const uint64_t writes = memory_.stats().writes;
  std::vector<std::optional<absl::StatusOr<v1::ScheduleResponse>>> scheduled(2);
  for (int i = 0; i < 2; ++i) {
    JobWriter::ScheduleDone done = [&,
                                    i](absl::StatusOr<v1::ScheduleResponse> r) {
      scheduled[i] = std::move(r);
    };
    ASSERT_TRUE(service().ScheduleAsync(
        ScheduleReq("t", i == 0 ? "a" : "b", 30'000), done));
  }
  std::optional<absl::StatusOr<v1::CancelResponse>> canceled;
  JobWriter::CancelDone cancel_done =
      [&](absl::StatusOr<v1::CancelResponse> r) { canceled = std::move(r); };
  ASSERT_TRUE(service().CancelAsync(CancelReq("t", "z"), cancel_done));
  // A refusal writes nothing, and is answered at once.
  std::optional<absl::StatusOr<v1::ScheduleResponse>> invalid;
  JobWriter::ScheduleDone invalid_done =
      [&](absl::StatusOr<v1::ScheduleResponse> r) { invalid = std::move(r); };
  ASSERT_TRUE(
      service().ScheduleAsync(ScheduleReq("", "c", 1000), invalid_done));
  ASSERT_TRUE(invalid.has_value());
  EXPECT_EQ(invalid->status().code(), absl::StatusCode::kInvalidArgument);
  // Nothing written nor answered yet; "a" is locked until written.
  EXPECT_FALSE(scheduled[0].has_value());
  EXPECT_FALSE(scheduled[1].has_value());
  EXPECT_FALSE(canceled.has_value());
  EXPECT_EQ(memory_.stats().writes, writes);
  EXPECT_FALSE(Stored("t", "a").has_value());
  EXPECT_FALSE(ScheduleAsyncAndWait(service(), ScheduleReq("t", "a", 30'000))
                   .has_value());

  EXPECT_TRUE(service().WriteGathered());
  EXPECT_EQ(memory_.stats().writes, writes + 1);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(scheduled[i].has_value()) << i;
    ASSERT_OK(*scheduled[i]);
    EXPECT_TRUE((*scheduled[i])->created());
  }
  ASSERT_TRUE(canceled.has_value());
  ASSERT_OK(*canceled);
  EXPECT_EQ((*canceled)->outcome(), v1::CANCEL_OUTCOME_CANCELED);
  EXPECT_TRUE(Stored("t", "a").has_value());
  EXPECT_TRUE(Stored("t", "b").has_value());
  EXPECT_FALSE(Stored("t", "z").has_value());
  EXPECT_EQ(Counts("t").live, 2);
  EXPECT_EQ(service().timers_pending(), 2u);
  EXPECT_FALSE(service().WriteGathered());
  EXPECT_EQ(service().commits().writes(), 0);
}

// A gathered write that would stall, or fails, reaches each of its calls
// through the commit queue, which writes where it may wait (alone when a
// write of several fails): a failure reaches no call whose write would
// have succeeded.
TEST_F(JobServiceTest, AGatheredWriteThatFailsGoesThroughTheQueue) {
  service().SetInlineWrites(true);
  service().GatherOnThisThread();
  const absl::Status faults[] = {storage::WouldStallError(),
                                 absl::UnavailableError("disk on fire")};
  for (int f = 0; f < 2; ++f) {
    const absl::Status& fault = faults[f];
    SCOPED_TRACE(fault.ToString());
    const int64_t queued = service().commits().writes();
    std::vector<std::shared_ptr<absl::Notification>> answered;
    std::vector<std::shared_ptr<absl::StatusOr<v1::ScheduleResponse>>> results;
    std::vector<std::string> ids;
    for (int i = 0; i < 3; ++i) {
      answered.push_back(std::make_shared<absl::Notification>());
      results.push_back(
          std::make_shared<absl::StatusOr<v1::ScheduleResponse>>());
      ids.push_back(absl::StrCat(f, "-", i));
      JobWriter::ScheduleDone done =
          [n = answered[i],
           r = results[i]](absl::StatusOr<v1::ScheduleResponse> result) {
            *r = std::move(result);
            n->Notify();
          };
      ASSERT_TRUE(
          service().ScheduleAsync(ScheduleReq("t", ids[i], 1000), done));
    }
    store_.FailNextWrites(1, fault);
    EXPECT_TRUE(service().WriteGathered());
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(answered[i]->WaitForNotificationWithTimeout(kWait)) << i;
      ASSERT_OK(*results[i]);
      EXPECT_TRUE(Stored("t", ids[i]).has_value()) << i;
    }
    // Through the queue, in one to three writes (its committer may take
    // the first before the others come).
    EXPECT_GE(service().commits().writes(), queued + 1);
    EXPECT_LE(service().commits().writes(), queued + 3);
  }
  EXPECT_EQ(Counts("t").live, 6);
}

}  // namespace
}  // namespace delayd::server::testing
