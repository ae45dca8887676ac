// JobService: recurring jobs — occurrences made into one-shot children by
// the fire path, at their time or ahead of it, the overlap and misfire
// policies, pause and resume, the end of a schedule, Reschedule with a new
// recurrence, the refusals, withdrawing an occurrence made ahead, and
// Recover computing the next occurrence again. FakeClock; the fire path
// runs on the service's threads, so tests poll the store with a short
// real-time deadline.
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/occurrences.h"
#include "tests/server/core/job_service_test_util.h"

namespace delayd::server::testing {
namespace {

using ::testing::HasSubstr;

// Every `interval_ms` from kStartMs + interval_ms on (anchor kStartMs).
v1::ScheduleRequest EveryReq(
    std::string_view id, int64_t interval_ms,
    v1::OverlapPolicy overlap = v1::OVERLAP_POLICY_UNSPECIFIED,
    v1::MisfirePolicy misfire = v1::MISFIRE_POLICY_UNSPECIFIED) {
  v1::ScheduleRequest req;
  v1::JobSpec& job = *req.mutable_job();
  job.set_topic("t");
  job.set_id(std::string(id));
  job.set_payload("tick");
  (*job.mutable_labels())["team"] = "books";
  v1::Recurrence& r = *job.mutable_recurrence();
  *r.mutable_every()->mutable_interval() = DurationMs(interval_ms);
  *r.mutable_every()->mutable_anchor() = TimestampMs(kStartMs);
  *r.mutable_start_at() = TimestampMs(kStartMs + 1);
  r.set_overlap(overlap);
  r.set_misfire(misfire);
  return req;
}

class RecurringTest : public JobServiceTest {
 protected:
  // Waits until the recurring job `id` has made `n` occurrences.
  bool WaitForFired(std::string_view id, uint64_t n) {
    return PollUntil(
        [&] {
          std::optional<storage::JobRecord> r = Stored("t", id);
          return r.has_value() && r->job().recurring().occurrences_fired() == n;
        },
        kWait, absl::Milliseconds(1));
  }
  // Waits until the parent `id`'s next occurrence is `next_ms`.
  bool WaitForNext(std::string_view id, int64_t next_ms) {
    return PollUntil(
        [&] {
          std::optional<storage::JobRecord> r = Stored("t", id);
          return r.has_value() &&
                 Ms(r->job().recurring().next_occurrence()) == next_ms;
        },
        kWait, absl::Milliseconds(1));
  }
  // The ids of the topic's jobs that are occurrences, in id order.
  std::vector<std::string> Children() {
    std::vector<std::string> out;
    EXPECT_OK(memory_.ScanJobs("t", "", "", [&](const auto& record) {
      if (record.job().has_occurrence_of()) out.push_back(record.job().id());
      return true;
    }));
    return out;
  }
  std::string Child(std::string_view id, int64_t nominal_ms) {
    return absl::StrCat(AsAbsl(id), "@", nominal_ms);
  }
  // Moves the clock to `ms` and waits until the parent has advanced past it.
  void FireAt(std::string_view id, int64_t ms, int64_t next_ms) {
    clock_.SetMs(ms);
    ASSERT_TRUE(WaitForNext(id, next_ms)) << "at " << ms;
  }
  // Moves the clock to the lead before occurrence `ms` (the previous one
  // handled at `through_ms`) and waits until the parent made it ahead.
  void MakeAhead(std::string_view id, int64_t through_ms, int64_t ms) {
    clock_.SetMs(ms - LeadMs(through_ms, ms));
    ASSERT_TRUE(PollUntil(
        [&] {
          std::optional<storage::JobRecord> r = Stored("t", id);
          return r.has_value() && r->ahead_ms() == ms;
        },
        kWait, absl::Milliseconds(1)))
        << "made ahead: " << ms;
  }
};

TEST_F(RecurringTest, EachOccurrenceBecomesAOneShotChildOfTheParent) {
  service().Start();
  ASSERT_OK_AND_ASSIGN(
      v1::ScheduleResponse r,
      service().Schedule(EveryReq("tick", 1000, v1::OVERLAP_POLICY_ALLOW)));
  EXPECT_EQ(r.job().state(), v1::JOB_STATE_SCHEDULED);
  // Due a lead before its first occurrence: half the time to it.
  EXPECT_EQ(Ms(r.job().fire_at()),
            kStartMs + 1000 - LeadMs(kStartMs - 1, kStartMs + 1000));
  EXPECT_EQ(Ms(r.job().fire_at()), kStartMs + 499);
  EXPECT_EQ(Ms(r.job().recurring().next_occurrence()), kStartMs + 1000);
  EXPECT_EQ(r.job().recurring().occurrences_fired(), 0u);
  // Never early: at 999 ms the first occurrence is made (ahead), not due.
  SettleAt(kStartMs + 999, kStartMs + 1000);
  EXPECT_THAT(Children(),
              ::testing::ElementsAre(Child("tick", kStartMs + 1000)));
  EXPECT_EQ(Counts("t").ready, 0);
  for (int k = 1; k <= 3; ++k) {
    FireAt("tick", kStartMs + k * 1000, kStartMs + (k + 1) * 1000);
    ASSERT_TRUE(WaitForReady("t", k));
  }
  EXPECT_THAT(Children(),
              ::testing::ElementsAre(Child("tick", kStartMs + 1000),
                                     Child("tick", kStartMs + 2000),
                                     Child("tick", kStartMs + 3000)));
  ASSERT_OK_AND_ASSIGN(
      v1::Job child,
      service().GetJob(GetReq("t", Child("tick", kStartMs + 2000))));
  EXPECT_EQ(child.payload(), "tick");
  EXPECT_EQ(child.labels().at("team"), "books");
  EXPECT_EQ(child.occurrence_of().id(), "tick");
  EXPECT_EQ(Ms(child.occurrence_of().nominal_time()), kStartMs + 2000);
  EXPECT_EQ(Ms(child.fire_at()), kStartMs + 2000);
  EXPECT_FALSE(child.has_recurring());
  ASSERT_OK_AND_ASSIGN(v1::Job parent, service().GetJob(GetReq("t", "tick")));
  EXPECT_EQ(parent.state(), v1::JOB_STATE_SCHEDULED);  // never READY
  EXPECT_EQ(parent.recurring().occurrences_fired(), 3u);
  EXPECT_EQ(Ms(parent.recurring().last_occurrence()), kStartMs + 3000);
  EXPECT_EQ(Ms(parent.fire_at()),
            kStartMs + 4000 - LeadMs(kStartMs + 3000, kStartMs + 4000));
  // The parent's due entry carries the recurring mark; a child made at its
  // time none.
  EXPECT_EQ(MarkOf("t", "tick"), storage::kRecurringMark);
  EXPECT_EQ(MarkOf("t", Child("tick", kStartMs + 2000)), 0u);
}

// The lead: a parent handled before its next occurrence makes it then,
// due at its time, so that it fires from the due index as a one-shot job.
TEST_F(RecurringTest, AnOccurrenceIsMadeAheadAndFiresAtItsTime) {
  service().Start();
  ASSERT_OK(service().Schedule(EveryReq("a", 20'000)));  // SKIP by default
  EXPECT_EQ(LeadMs(kStartMs - 1, kStartMs + 20'000), kMaxLeadMs);
  EXPECT_EQ(Ms(Stored("t", "a")->job().fire_at()), kStartMs + 10'000);
  MakeAhead("a", kStartMs - 1, kStartMs + 20'000);
  const std::string first = Child("a", kStartMs + 20'000);
  std::optional<storage::JobRecord> child = Stored("t", first);
  ASSERT_TRUE(child.has_value());
  EXPECT_TRUE(child->made_ahead());
  EXPECT_EQ(Ms(child->job().fire_at()), kStartMs + 20'000);
  EXPECT_EQ(MarkOf("t", first), storage::kAheadMark);
  const v1::Job parent = Stored("t", "a")->job();
  EXPECT_EQ(parent.recurring().occurrences_fired(), 1u);
  EXPECT_EQ(Ms(parent.recurring().last_occurrence()), kStartMs + 20'000);
  EXPECT_EQ(Ms(parent.recurring().next_occurrence()), kStartMs + 40'000);
  EXPECT_EQ(Ms(parent.fire_at()), kStartMs + 30'000);
  // Never early; then ready at its time, the parent untouched.
  SettleAt(kStartMs + 19'999, kStartMs + 20'000);
  EXPECT_EQ(Counts("t").ready, 0);
  clock_.SetMs(kStartMs + 20'000);
  ASSERT_TRUE(WaitForReady("t", 1));
  EXPECT_EQ(Stored("t", "a")->job().recurring().occurrences_fired(), 1u);
  // Acked (deleted): the next one is made ahead too.
  ASSERT_OK(service().Cancel(CancelReq("t", first)));
  MakeAhead("a", kStartMs + 20'000, kStartMs + 40'000);
  EXPECT_THAT(Children(),
              ::testing::ElementsAre(Child("a", kStartMs + 40'000)));
}

// SKIP and BUFFER_ONE keep their meaning: while the last occurrence is
// live at the lead, the next one is not made ahead but decided at its time.
TEST_F(RecurringTest, WhileTheLastIsLiveTheNextIsDecidedAtItsTime) {
  service().Start();
  ASSERT_OK(service().Schedule(EveryReq("s", 20'000)));  // SKIP
  MakeAhead("s", kStartMs - 1, kStartMs + 20'000);
  clock_.SetMs(kStartMs + 20'000);
  ASSERT_TRUE(WaitForReady("t", 1));  // live, not acked
  // At the lead of the next: not made; due at the occurrence instead.
  clock_.SetMs(kStartMs + 30'000);
  ASSERT_TRUE(PollUntil(
      [&] {
        return Ms(Stored("t", "s")->job().fire_at()) == kStartMs + 40'000;
      },
      kWait, absl::Milliseconds(1)));
  EXPECT_EQ(Children().size(), 1u);
  // The last one ends before it: the occurrence fires after all.
  ASSERT_OK(service().Cancel(CancelReq("t", Child("s", kStartMs + 20'000))));
  FireAt("s", kStartMs + 40'000, kStartMs + 60'000);
  EXPECT_THAT(Children(),
              ::testing::ElementsAre(Child("s", kStartMs + 40'000)));
  EXPECT_FALSE(Stored("t", Child("s", kStartMs + 40'000))->made_ahead());
  EXPECT_EQ(Stored("t", "s")->job().recurring().occurrences_skipped(), 0u);
}

// Pause, Reschedule, Cancel and Schedule IF_EXISTS_REPLACE withdraw an
// occurrence made ahead and not due yet; the parent counts it as never made.
TEST_F(RecurringTest, ChangingTheJobWithdrawsItsOccurrenceMadeAhead) {
  service().Start();
  ASSERT_OK(service().Schedule(EveryReq("p", 20'000)));
  MakeAhead("p", kStartMs - 1, kStartMs + 20'000);
  const std::string ahead = Child("p", kStartMs + 20'000);
  v1::PauseJobRequest pause;
  *pause.mutable_key() = Key("t", "p");
  ASSERT_OK_AND_ASSIGN(v1::PauseJobResponse paused, service().PauseJob(pause));
  EXPECT_FALSE(Stored("t", ahead).has_value());
  EXPECT_EQ(paused.job().recurring().occurrences_fired(), 0u);
  EXPECT_FALSE(paused.job().recurring().has_last_occurrence());
  EXPECT_EQ(Ms(paused.job().recurring().next_occurrence()), kStartMs + 20'000);
  EXPECT_EQ(Counts("t").live, 0);
  // Resumed before it: made again, delivered at its time.
  v1::ResumeJobRequest resume;
  *resume.mutable_key() = Key("t", "p");
  ASSERT_OK(service().ResumeJob(resume));
  clock_.SetMs(kStartMs + 20'000);
  ASSERT_TRUE(WaitForReady("t", 1));
  EXPECT_THAT(Children(), ::testing::ElementsAre(ahead));
  EXPECT_EQ(Stored("t", "p")->job().recurring().occurrences_fired(), 1u);
  ASSERT_OK(service().Cancel(CancelReq("t", ahead)));

  // Reschedule: the one made ahead was of the old schedule.
  MakeAhead("p", kStartMs + 20'000, kStartMs + 40'000);  // at 30 s
  v1::RescheduleRequest every_minute;
  *every_minute.mutable_key() = Key("t", "p");
  v1::Recurrence& minute = *every_minute.mutable_recurrence();
  *minute.mutable_every()->mutable_interval() = DurationMs(60'000);
  *minute.mutable_start_at() = TimestampMs(kStartMs + 100'000);
  // Withdrawing needs the occurrence's lock: RescheduleAsync declines.
  JobWriter::RescheduleDone not_async =
      [](absl::StatusOr<v1::RescheduleResponse>) { ADD_FAILURE(); };
  EXPECT_FALSE(service().RescheduleAsync(every_minute, not_async));
  EXPECT_THAT(Children(), ::testing::SizeIs(1));
  ASSERT_OK_AND_ASSIGN(v1::RescheduleResponse moved,
                       service().Reschedule(every_minute));
  EXPECT_THAT(Children(), ::testing::IsEmpty());
  EXPECT_EQ(moved.job().recurring().occurrences_fired(), 1u);
  EXPECT_EQ(Ms(moved.job().recurring().last_occurrence()), kStartMs + 20'000);

  // Schedule IF_EXISTS_REPLACE (scheduled at 30 s: the first at 40 s).
  ASSERT_OK(service().Schedule(EveryReq("r", 20'000)));
  MakeAhead("r", kStartMs + 29'999, kStartMs + 40'000);
  ASSERT_TRUE(Stored("t", Child("r", kStartMs + 40'000)).has_value());
  v1::ScheduleRequest replace = EveryReq("r", 30'000);
  replace.set_if_exists(v1::IF_EXISTS_REPLACE);
  // Withdrawing needs the occurrence's lock too: ScheduleAsync declines,
  // having changed nothing, and Schedule does it.
  JobWriter::ScheduleDone never = [](absl::StatusOr<v1::ScheduleResponse>) {
    ADD_FAILURE() << "answered";
  };
  EXPECT_FALSE(service().ScheduleAsync(replace, never));
  ASSERT_TRUE(Stored("t", Child("r", kStartMs + 40'000)).has_value());
  ASSERT_OK(service().Schedule(replace));
  EXPECT_FALSE(Stored("t", Child("r", kStartMs + 40'000)).has_value());

  // Cancel: withdrawn with the job; one already due stands.
  const int64_t now = clock_.NowMs();
  ASSERT_OK(service().Schedule(EveryReq("c", 20'000)));
  MakeAhead("c", now - 1, kStartMs + 40'000);
  ASSERT_TRUE(Stored("t", Child("c", kStartMs + 40'000)).has_value());
  ASSERT_OK_AND_ASSIGN(v1::CancelResponse canceled,
                       service().Cancel(CancelReq("t", "c")));
  EXPECT_EQ(canceled.outcome(), v1::CANCEL_OUTCOME_CANCELED);
  EXPECT_FALSE(Stored("t", Child("c", kStartMs + 40'000)).has_value());
  const int64_t later = clock_.NowMs();
  ASSERT_OK(service().Schedule(EveryReq("k", 20'000)));
  MakeAhead("k", later - 1, kStartMs + 40'000);
  clock_.SetMs(kStartMs + 40'000);
  ASSERT_TRUE(WaitForReady("t", 1));
  ASSERT_OK(service().Cancel(CancelReq("t", "k")));
  EXPECT_TRUE(Stored("t", Child("k", kStartMs + 40'000)).has_value());
}

TEST_F(RecurringTest, OverlapSkipPassesOverOccurrencesWhileTheLastIsLive) {
  service().Start();
  ASSERT_OK(service().Schedule(EveryReq("s", 1000)));  // SKIP by default
  FireAt("s", kStartMs + 1000, kStartMs + 2000);
  FireAt("s", kStartMs + 2000, kStartMs + 3000);  // first still READY
  EXPECT_THAT(Children(), ::testing::ElementsAre(Child("s", kStartMs + 1000)));
  // The first ends (canceled); the next occurrence fires.
  ASSERT_OK(service().Cancel(CancelReq("t", Child("s", kStartMs + 1000))));
  FireAt("s", kStartMs + 3000, kStartMs + 4000);
  EXPECT_THAT(Children(), ::testing::ElementsAre(Child("s", kStartMs + 3000)));
  ASSERT_OK_AND_ASSIGN(v1::Job parent, service().GetJob(GetReq("t", "s")));
  EXPECT_EQ(parent.recurring().occurrences_fired(), 2u);
  EXPECT_EQ(parent.recurring().occurrences_skipped(), 1u);
}

TEST_F(RecurringTest, ADeadOccurrenceDoesNotStopTheNext) {
  service().Start();
  ASSERT_OK(service().Schedule(EveryReq("d", 1000)));
  FireAt("d", kStartMs + 1000, kStartMs + 2000);
  PutRecord("t", Child("d", kStartMs + 1000), v1::JOB_STATE_DEAD,
            kStartMs + 1000);
  FireAt("d", kStartMs + 2000, kStartMs + 3000);
  EXPECT_THAT(Children(), ::testing::ElementsAre(Child("d", kStartMs + 2000)));
}

TEST_F(RecurringTest, OverlapBufferOneFiresTheLatestOnceTheLastHasEnded) {
  service().Start();
  ASSERT_OK(
      service().Schedule(EveryReq("b", 10'000, v1::OVERLAP_POLICY_BUFFER_ONE)));
  FireAt("b", kStartMs + 10'000, kStartMs + 20'000);
  clock_.SetMs(kStartMs + 20'000);  // live: this one waits
  ASSERT_TRUE(PollUntil(
      [&] {
        std::optional<storage::JobRecord> p = Stored("t", "b");
        return p && p->job().recurring().has_buffered_occurrence();
      },
      kWait, absl::Milliseconds(1)));
  EXPECT_EQ(Ms(Stored("t", "b")->job().recurring().buffered_occurrence()),
            kStartMs + 20'000);
  EXPECT_THAT(Children(),
              ::testing::ElementsAre(Child("b", kStartMs + 10'000)));
  // Still live at the recheck: it keeps waiting.
  clock_.SetMs(kStartMs + 21'000);
  ASSERT_TRUE(PollUntil(
      [&] {
        return Ms(Stored("t", "b")->job().fire_at()) == kStartMs + 22'000;
      },
      kWait, absl::Milliseconds(1)));
  EXPECT_EQ(Children().size(), 1u);
  ASSERT_OK(service().Cancel(CancelReq("t", Child("b", kStartMs + 10'000))));
  clock_.SetMs(kStartMs + 22'000);
  ASSERT_TRUE(WaitForFired("b", 2));
  EXPECT_THAT(Children(),
              ::testing::ElementsAre(Child("b", kStartMs + 20'000)));
  std::optional<storage::JobRecord> p = Stored("t", "b");
  EXPECT_FALSE(p->job().recurring().has_buffered_occurrence());
  EXPECT_EQ(Ms(p->job().fire_at()),
            kStartMs + 30'000 - LeadMs(kStartMs + 20'000, kStartMs + 30'000));
}

// A batch that replaces a recurring job and schedules the id of its
// occurrence made ahead: the request decides that id, not the withdrawal.
TEST_F(RecurringTest, ABatchSchedulingTheOccurrencesIdKeepsIt) {
  service().Start();
  ASSERT_OK(service().Schedule(EveryReq("b", 20'000)));
  MakeAhead("b", kStartMs - 1, kStartMs + 20'000);
  const std::string ahead = Child("b", kStartMs + 20'000);
  v1::ScheduleBatchRequest batch;
  v1::ScheduleRequest& replace = *batch.add_requests();
  replace = EveryReq("b", 30'000);
  replace.set_if_exists(v1::IF_EXISTS_REPLACE);
  v1::ScheduleRequest& mine = *batch.add_requests();
  mine.set_if_exists(v1::IF_EXISTS_REPLACE);
  mine.mutable_job()->set_topic("t");
  mine.mutable_job()->set_id(ahead);
  mine.mutable_job()->set_payload("mine");
  *mine.mutable_job()->mutable_delay() = DurationMs(60'000);
  ASSERT_OK_AND_ASSIGN(v1::ScheduleBatchResponse r,
                       service().ScheduleBatch(batch));
  ASSERT_EQ(r.results(0).code(), 0) << r.results(0).message();
  ASSERT_EQ(r.results(1).code(), 0) << r.results(1).message();
  std::optional<storage::JobRecord> kept = Stored("t", ahead);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->job().payload(), "mine");
  EXPECT_EQ(Counts("t").live, 2);  // the job and that one
}

// Occurrences missed while down, by policy: the server restarts ten minutes
// (600 occurrences) later. With `ahead`, the occurrence at 2 s had been made
// ahead before the stop: recovery withdraws it, and the policy decides it
// with the others.
class MisfireTest : public RecurringTest,
                    public ::testing::WithParamInterface<
                        std::tuple<v1::MisfirePolicy, bool>> {};

TEST_P(MisfireTest, MissedOccurrencesFollowThePolicyAfterARestart) {
  const auto [policy, ahead] = GetParam();
  service().Start();
  ASSERT_OK(service().Schedule(
      EveryReq("m", 1000, v1::OVERLAP_POLICY_ALLOW, policy)));
  FireAt("m", kStartMs + 1000, kStartMs + 2000);
  if (ahead) {
    MakeAhead("m", kStartMs + 1000, kStartMs + 2000);
    EXPECT_EQ(MarkOf("t", Child("m", kStartMs + 2000)), storage::kAheadMark);
  }
  service().Stop();
  Restart();
  const int64_t later = kStartMs + 601'500;
  clock_.SetMs(later);
  ASSERT_OK_AND_ASSIGN(JobService::RecoveryStats stats, service().Recover());
  EXPECT_EQ(stats.ahead_withdrawn, ahead ? 1 : 0);
  service().Start();
  ASSERT_TRUE(WaitForNext("m", kStartMs + 602'000));
  std::vector<std::string> children = Children();
  const v1::Job parent = Stored("t", "m")->job();
  // 600 occurrences from 2 s to 601 s; those in the last 60 s (542-601 s)
  // are late, not misfired, and fire whatever the policy.
  switch (policy) {
    case v1::MISFIRE_POLICY_SKIP:
      EXPECT_EQ(children.size(), 1u + 60u);
      EXPECT_EQ(parent.recurring().occurrences_skipped(), 540u);
      break;
    case v1::MISFIRE_POLICY_FIRE_ALL:
      EXPECT_EQ(children.size(), 601u);
      EXPECT_EQ(parent.recurring().occurrences_skipped(), 0u);
      break;
    default:  // FIRE_ONCE: the latest misfired one
      EXPECT_EQ(children.size(), 1u + 1u + 60u);
      EXPECT_THAT(children,
                  ::testing::Contains(Child("m", kStartMs + 541'000)));
      EXPECT_THAT(
          children,
          ::testing::Not(::testing::Contains(Child("m", kStartMs + 540'000))));
      EXPECT_EQ(parent.recurring().occurrences_skipped(), 539u);
      break;
  }
  EXPECT_EQ(parent.recurring().occurrences_fired(), children.size());
}

INSTANTIATE_TEST_SUITE_P(
    Policies, MisfireTest,
    ::testing::Combine(::testing::Values(v1::MISFIRE_POLICY_FIRE_ONCE,
                                         v1::MISFIRE_POLICY_SKIP,
                                         v1::MISFIRE_POLICY_FIRE_ALL),
                       ::testing::Bool()));

TEST_F(RecurringTest, PauseStopsTheScheduleAndResumeTreatsTheGapAsMisfires) {
  service().Start();
  ASSERT_OK(service().Schedule(
      EveryReq("p", 1000, v1::OVERLAP_POLICY_ALLOW, v1::MISFIRE_POLICY_SKIP)));
  FireAt("p", kStartMs + 1000, kStartMs + 2000);
  v1::PauseJobRequest pause;
  *pause.mutable_key() = Key("t", "p");
  ASSERT_OK_AND_ASSIGN(v1::PauseJobResponse paused, service().PauseJob(pause));
  EXPECT_EQ(paused.job().state(), v1::JOB_STATE_PAUSED);
  ASSERT_OK(service().PauseJob(pause));  // again: OK
  EXPECT_EQ(MarkOf("t", "p"), 0u);       // no due entry
  EXPECT_EQ(Counts("t").live, 1);        // the child only
  clock_.SetMs(kStartMs + 300'500);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(Children().size(), 1u);
  v1::ResumeJobRequest resume;
  *resume.mutable_key() = Key("t", "p");
  ASSERT_OK_AND_ASSIGN(v1::ResumeJobResponse resumed,
                       service().ResumeJob(resume));
  EXPECT_EQ(resumed.job().state(), v1::JOB_STATE_SCHEDULED);
  ASSERT_TRUE(WaitForNext("p", kStartMs + 301'000));
  // SKIP: those more than 60 s late were passed over; the last minute fired.
  EXPECT_EQ(Children().size(), 1u + 60u);
  // Neither rpc touches a one-shot job.
  MustSchedule("t", "once", 1000);
  *pause.mutable_key() = Key("t", "once");
  EXPECT_EQ(service().PauseJob(pause).status().code(),
            absl::StatusCode::kFailedPrecondition);
  *pause.mutable_key() = Key("t", "nobody");
  EXPECT_EQ(service().PauseJob(pause).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(RecurringTest, TheJobEndsAfterItsLastOccurrence) {
  service().Start();
  v1::ScheduleRequest req = EveryReq("e", 1000, v1::OVERLAP_POLICY_ALLOW);
  req.mutable_job()->mutable_recurrence()->set_max_occurrences(2);
  ASSERT_OK(service().Schedule(req));
  FireAt("e", kStartMs + 1000, kStartMs + 2000);
  clock_.SetMs(kStartMs + 2000);
  ASSERT_TRUE(PollUntil([&] { return !Stored("t", "e").has_value(); }, kWait,
                        absl::Milliseconds(1)));
  EXPECT_EQ(Children().size(), 2u);
  EXPECT_EQ(service().GetJob(GetReq("t", "e")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(RecurringTest, CancelStopsTheScheduleAndLeavesItsOccurrences) {
  service().Start();
  ASSERT_OK(service().Schedule(EveryReq("c", 1000)));
  FireAt("c", kStartMs + 1000, kStartMs + 2000);
  ASSERT_OK_AND_ASSIGN(v1::CancelResponse r,
                       service().Cancel(CancelReq("t", "c")));
  EXPECT_EQ(r.outcome(), v1::CANCEL_OUTCOME_CANCELED);
  clock_.SetMs(kStartMs + 5000);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_THAT(Children(), ::testing::ElementsAre(Child("c", kStartMs + 1000)));
  EXPECT_FALSE(Stored("t", "c").has_value());
}

TEST_F(RecurringTest, CancelByPrefixTakesAPausedJobAndItsOccurrences) {
  service().Start();
  ASSERT_OK(service().Schedule(EveryReq("c", 1000)));
  FireAt("c", kStartMs + 1000, kStartMs + 2000);
  v1::PauseJobRequest pause;
  *pause.mutable_key() = Key("t", "c");
  ASSERT_OK(service().PauseJob(pause));
  v1::CancelByPrefixRequest all;
  all.set_topic("t");
  all.set_id_prefix("c");
  ASSERT_OK_AND_ASSIGN(v1::CancelByPrefixResponse r,
                       service().CancelByPrefix(all));
  EXPECT_EQ(r.canceled(), 2u);  // the paused parent and its child
  EXPECT_FALSE(Stored("t", "c").has_value());
  EXPECT_THAT(Children(), ::testing::IsEmpty());
}

TEST_F(RecurringTest, RescheduleGivesANewRecurrenceAndKeepsTheCounts) {
  service().Start();
  ASSERT_OK(service().Schedule(EveryReq("r", 1000, v1::OVERLAP_POLICY_ALLOW)));
  FireAt("r", kStartMs + 1000, kStartMs + 2000);
  v1::RescheduleRequest req;
  *req.mutable_key() = Key("t", "r");
  *req.mutable_recurrence()->mutable_cron() = v1::CronSchedule();
  req.mutable_recurrence()->mutable_cron()->set_expression("0 0 * * * ?");
  ASSERT_OK_AND_ASSIGN(v1::RescheduleResponse moved, service().Reschedule(req));
  // kStartMs is 2023-11-14T22:13:20Z: the next whole hour is 23:00.
  const int64_t hour = kStartMs - kStartMs % 3'600'000 + 3'600'000;
  EXPECT_EQ(Ms(moved.job().recurring().next_occurrence()), hour);
  EXPECT_EQ(Ms(moved.job().fire_at()), hour - kMaxLeadMs);
  EXPECT_EQ(moved.job().recurring().occurrences_fired(), 1u);
  EXPECT_TRUE(moved.job().recurring().recurrence().has_cron());
  // One-shot and recurring rules do not mix.
  v1::RescheduleRequest with_time = req;
  *with_time.mutable_delay() = DurationMs(5);
  ExpectInvalid(service().Reschedule(with_time).status(), "delay");
  EXPECT_EQ(service()
                .Reschedule(RescheduleAtReq("t", "r", kStartMs + 9))
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  MustSchedule("t", "once", 1000);
  *req.mutable_key() = Key("t", "once");
  EXPECT_EQ(service().Reschedule(req).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(RecurringTest, ABadRecurrenceIsRefusedNamingTheFieldAndChangesNothing) {
  service().Start();
  const std::string before = State();
  v1::ScheduleRequest timed = EveryReq("x", 1000);
  *timed.mutable_job()->mutable_delay() = DurationMs(5);
  ExpectInvalid(service().Schedule(timed).status(), "job.delay");
  v1::ScheduleRequest long_id = EveryReq(std::string(237, 'i'), 1000);
  absl::Status s = service().Schedule(long_id).status();
  ExpectInvalid(s, "job.id");
  EXPECT_THAT(std::string(s.message()), HasSubstr("236"));
  v1::ScheduleRequest zone = EveryReq("z", 1000);
  v1::CronSchedule& cron =
      *zone.mutable_job()->mutable_recurrence()->mutable_cron();
  cron.set_expression("0 0 * * * ?");
  cron.set_time_zone("Mars/Olympus");
  ExpectInvalid(service().Schedule(zone).status(),
                "job.recurrence.cron.time_zone");
  v1::ScheduleRequest ended = EveryReq("e", 1000);
  *ended.mutable_job()->mutable_recurrence()->mutable_end_at() =
      TimestampMs(kStartMs + 500);  // before the first occurrence
  ExpectInvalid(service().Schedule(ended).status(), "job.recurrence");
  v1::ScheduleBatchRequest batch;
  *batch.add_requests() = zone;
  ASSERT_OK_AND_ASSIGN(v1::ScheduleBatchResponse r,
                       service().ScheduleBatch(batch));
  EXPECT_THAT(
      r.results(0).message(),
      ::testing::StartsWith("requests[0].job.recurrence.cron.time_zone:"));
  EXPECT_EQ(State(), before);
}

// A tzdata update can move a zone's rules: Recover computes each parent's
// next occurrence again and stores it where it moved. Planted here as a
// stored next occurrence that this process's rules do not give.
TEST_F(RecurringTest, RecoverComputesTheNextOccurrenceAgain) {
  service().Start();
  ASSERT_OK(service().Schedule(EveryReq("tz", 60'000)));
  service().Stop();
  storage::JobRecord stale = *Stored("t", "tz");
  const int64_t stored_due = *storage::DueIndexEntryOf(stale);
  EXPECT_EQ(stored_due, kStartMs + 60'000 - kMaxLeadMs);
  *stale.mutable_job()->mutable_recurring()->mutable_next_occurrence() =
      TimestampMs(kStartMs + 3'600'000);
  *stale.mutable_job()->mutable_fire_at() = TimestampMs(kStartMs + 3'600'000);
  const storage::Mutation m = storage::Mutation::Put(stale, stored_due);
  ASSERT_OK(memory_.Apply({&m, 1}, storage::Durability::kSync));
  // Told the tzdata is the one of the last start, Recover reads no parent.
  Restart();
  ASSERT_OK_AND_ASSIGN(JobService::RecoveryStats kept,
                       service().Recover(/*recompute_recurring=*/false));
  EXPECT_EQ(kept.recurring, 1);
  EXPECT_EQ(kept.recurring_moved, 0);
  EXPECT_EQ(Ms(Stored("t", "tz")->job().fire_at()), kStartMs + 3'600'000);
  Restart();
  ASSERT_OK_AND_ASSIGN(JobService::RecoveryStats stats, service().Recover());
  EXPECT_EQ(stats.recurring, 1);
  EXPECT_EQ(stats.recurring_moved, 1);
  EXPECT_EQ(Ms(Stored("t", "tz")->job().fire_at()),
            kStartMs + 60'000 - kMaxLeadMs);
  service().Start();
  FireAt("tz", kStartMs + 60'000, kStartMs + 120'000);
  EXPECT_EQ(Children().size(), 1u);
}

}  // namespace
}  // namespace delayd::server::testing
