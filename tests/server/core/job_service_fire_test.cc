// JobService: firing by the fake clock (never early, moved and canceled jobs
// not at their old time), Recover from a populated store, and store write
// failures (the rpc fails and nothing changes). The fire path runs on the
// service's threads; tests move the FakeClock and poll the ready counts with
// a short real-time deadline, never sleeping for a timer.
#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/fire_path.h"
#include "tests/server/core/job_service_test_util.h"

namespace delayd::server::testing {
namespace {

constexpr int64_t kNever = timer::Clock::kNoDeadline;

// `n` jobs of `topic`, ids c0, c1, ..., all due `delay_ms` from the start.
v1::ScheduleBatchRequest Crowd(std::string_view topic, int n,
                               int64_t delay_ms) {
  v1::ScheduleBatchRequest batch;
  for (int i = 0; i < n; ++i) {
    *batch.add_requests() = ScheduleReq(topic, absl::StrCat("c", i), delay_ms);
  }
  return batch;
}

TEST_F(JobServiceTest, FiresAtTheDueMillisecondNeverBefore) {
  service().Start();
  MustSchedule("t", "a", 500);
  SettleAt(kStartMs + 499, kStartMs + 500);
  EXPECT_EQ(Counts("t").ready, 0);
  EXPECT_EQ(service().timers_pending(), 1u);
  clock_.SetMs(kStartMs + 500);
  ASSERT_TRUE(WaitForReady("t", 1));
  EXPECT_EQ(service().timers_pending(), 0u);
  ASSERT_OK_AND_ASSIGN(v1::GetStatsResponse stats, service().GetStats({}));
  EXPECT_EQ(stats.topics(0).ready(), 1u);
  EXPECT_EQ(stats.topics(0).scheduled(), 0u);
  ASSERT_OK_AND_ASSIGN(v1::Job job, service().GetJob(GetReq("t", "a")));
  EXPECT_EQ(job.state(), v1::JOB_STATE_READY);
}

TEST_F(JobServiceTest, FiresJobsAcrossSecondsAndHoursEachOnTime) {
  service().Start();
  const std::vector<int64_t> delays = {1200, 1700, 3'600'000 + 5,
                                       2 * 3'600'000 + 1234};
  for (size_t i = 0; i < delays.size(); ++i) {
    MustSchedule("t", absl::StrCat("j", i), delays[i]);
  }
  for (size_t i = 0; i < delays.size(); ++i) {
    const int64_t due = kStartMs + delays[i];
    SettleAt(due - 1, due);
    EXPECT_EQ(Counts("t").ready, static_cast<int64_t>(i)) << "early: j" << i;
    clock_.SetMs(due);
    ASSERT_TRUE(WaitForReady("t", static_cast<int64_t>(i) + 1)) << "j" << i;
  }
  SettleAt(kStartMs + 3 * 3'600'000, kNever);
  EXPECT_EQ(Counts("t").ready, 4);
}

// A fire_at or delay with a sub-millisecond part is due at the next whole
// millisecond: firing at the truncated one would be early by the wall clock.
TEST_F(JobServiceTest, SubMillisecondDueTimesRoundUpNeverEarly) {
  service().Start();
  v1::ScheduleRequest at = ScheduleReq("t", "at", 0);
  *at.mutable_job()->mutable_fire_at() = TimestampMs(kStartMs + 300);
  at.mutable_job()->mutable_fire_at()->set_nanos(at.job().fire_at().nanos() +
                                                 1);
  ASSERT_OK_AND_ASSIGN(v1::ScheduleResponse r, service().Schedule(at));
  EXPECT_EQ(Ms(r.job().fire_at()), kStartMs + 301);
  SettleAt(kStartMs + 300, kStartMs + 301);
  EXPECT_EQ(Counts("t").ready, 0);
  clock_.SetMs(kStartMs + 301);
  ASSERT_TRUE(WaitForReady("t", 1));

  v1::ScheduleRequest in = ScheduleReq("t", "in", 100);
  in.mutable_job()->mutable_delay()->set_nanos(100'000'001);
  ASSERT_OK_AND_ASSIGN(r, service().Schedule(in));
  EXPECT_EQ(Ms(r.job().fire_at()), kStartMs + 402);
  SettleAt(kStartMs + 401, kStartMs + 402);
  EXPECT_EQ(Counts("t").ready, 1);
  clock_.SetMs(kStartMs + 402);
  ASSERT_TRUE(WaitForReady("t", 2));
}

TEST_F(JobServiceTest, PastAndNowJobsFireAtOnceAfterStart) {
  v1::ScheduleRequest past = ScheduleReq("t", "past", 0);
  *past.mutable_job()->mutable_fire_at() = TimestampMs(kStartMs - 60'000);
  ASSERT_OK(service().Schedule(past));
  v1::ScheduleRequest before_1970 = ScheduleReq("t", "1969", 0);
  before_1970.mutable_job()->mutable_fire_at()->set_seconds(-86'400);
  ASSERT_OK(service().Schedule(before_1970));
  EXPECT_EQ(Counts("t").ready, 0);  // not started: nothing fires
  service().Start();
  ASSERT_TRUE(WaitForReady("t", 2));
  MustSchedule("t", "now", 0);
  ASSERT_TRUE(WaitForReady("t", 3));
}

// Jobs scheduled with a fire time already past are READY at once, with no
// timer: the fire path does not search their millisecond of the due index.
// Before, each batch's timers fired at once and the fire path read every
// job of that millisecond to find the batch's own, so jobs sharing one past
// fire_at cost a read of all of them per batch (200,000 in batches of 1000:
// 78 s of the fire thread's CPU).
TEST_F(JobServiceTest, JobsDueAtOnePastMillisecondAreReadyWithoutSearchingIt) {
  service().Start();
  std::atomic<int64_t> read{0};
  store_.StallScanDue([&](size_t) { ++read; });
  constexpr int kBatches = 20;
  constexpr int kPerBatch = 100;
  for (int b = 0; b < kBatches; ++b) {
    v1::ScheduleBatchRequest batch;
    for (int i = 0; i < kPerBatch; ++i) {
      v1::ScheduleRequest req = ScheduleReq("t", absl::StrCat(b, "-", i), 0);
      *req.mutable_job()->mutable_fire_at() = TimestampMs(kStartMs - 60'000);
      *batch.add_requests() = req;
    }
    ASSERT_OK(service().ScheduleBatch(batch));
  }
  ASSERT_TRUE(WaitForReady("t", kBatches * kPerBatch));
  // Before: at least one read of all 2,000, and up to 21,000.
  EXPECT_LT(read.load(), kPerBatch);
  EXPECT_EQ(service().timers_pending(), 0u);
  store_.StallScanDue(nullptr);
}

TEST_F(JobServiceTest, RescheduleLaterDoesNotFireAtTheOldTime) {
  service().Start();
  MustSchedule("t", "a", 300);
  MustSchedule("sentinel", "s", 300);
  ASSERT_OK(service().Reschedule(RescheduleAtReq("t", "a", kStartMs + 700)));
  clock_.SetMs(kStartMs + 300);
  ASSERT_TRUE(WaitForReady("sentinel", 1));
  EXPECT_EQ(Counts("t").ready, 0);
  SettleAt(kStartMs + 699, kStartMs + 700);
  EXPECT_EQ(Counts("t").ready, 0);
  clock_.SetMs(kStartMs + 700);
  ASSERT_TRUE(WaitForReady("t", 1));
}

TEST_F(JobServiceTest, RescheduleEarlierFiresAtTheNewTimeOnce) {
  service().Start();
  MustSchedule("t", "a", 900);
  ASSERT_OK(service().Reschedule(RescheduleAtReq("t", "a", kStartMs + 200)));
  SettleAt(kStartMs + 199, kStartMs + 200);
  EXPECT_EQ(Counts("t").ready, 0);
  clock_.SetMs(kStartMs + 200);
  ASSERT_TRUE(WaitForReady("t", 1));
  SettleAt(kStartMs + 950, kNever);
  EXPECT_EQ(Counts("t").ready, 1);
  EXPECT_EQ(service().timers_pending(), 0u);
}

TEST_F(JobServiceTest, ReplaceMovesTheFiringTime) {
  service().Start();
  MustSchedule("t", "a", 300);
  MustSchedule("sentinel", "s", 300);
  ASSERT_OK(service().Schedule(
      ScheduleReq("t", "a", 800, "v2", v1::IF_EXISTS_REPLACE)));
  clock_.SetMs(kStartMs + 300);
  ASSERT_TRUE(WaitForReady("sentinel", 1));
  EXPECT_EQ(Counts("t").ready, 0);
  SettleAt(kStartMs + 799, kStartMs + 800);
  EXPECT_EQ(Counts("t").ready, 0);
  clock_.SetMs(kStartMs + 800);
  ASSERT_TRUE(WaitForReady("t", 1));
}

TEST_F(JobServiceTest, CancelPreventsFiring) {
  service().Start();
  MustSchedule("t", "a", 300);
  MustSchedule("t", "b", 300);
  MustSchedule("t", "gone-by-prefix", 300);
  MustSchedule("sentinel", "s", 300);
  ASSERT_OK(service().Cancel(CancelReq("t", "a")));
  v1::CancelByPrefixRequest by_prefix;
  by_prefix.set_topic("t");
  by_prefix.set_id_prefix("gone-");
  ASSERT_OK(service().CancelByPrefix(by_prefix));
  EXPECT_EQ(service().timers_pending(), 2u);
  clock_.SetMs(kStartMs + 300);
  ASSERT_TRUE(WaitForReady("sentinel", 1));
  SettleAt(kStartMs + 301, kNever);
  EXPECT_EQ(Counts("t").ready, 1);  // b only
  EXPECT_EQ(Counts("t").live, 1);
}

TEST_F(JobServiceTest, CancelOrRescheduleOfAReadyJobLeavesTheReadyQueue) {
  service().Start();
  MustSchedule("t", "a", 100);
  MustSchedule("t", "b", 100);
  clock_.SetMs(kStartMs + 100);
  ASSERT_TRUE(WaitForReady("t", 2));
  ASSERT_OK_AND_ASSIGN(v1::CancelResponse c,
                       service().Cancel(CancelReq("t", "a")));
  EXPECT_EQ(c.outcome(), v1::CANCEL_OUTCOME_CANCELED);
  EXPECT_EQ(Counts("t").ready, 1);
  EXPECT_EQ(Counts("t").live, 1);

  ASSERT_OK(service().Reschedule(RescheduleAtReq("t", "b", kStartMs + 900)));
  EXPECT_EQ(Counts("t").ready, 0);
  EXPECT_EQ(Counts("t").scheduled(), 1);
  ASSERT_OK_AND_ASSIGN(v1::Job b, service().GetJob(GetReq("t", "b")));
  EXPECT_EQ(b.state(), v1::JOB_STATE_SCHEDULED);
  SettleAt(kStartMs + 899, kStartMs + 900);
  EXPECT_EQ(Counts("t").ready, 0);
  clock_.SetMs(kStartMs + 900);
  ASSERT_TRUE(WaitForReady("t", 1));
}

TEST_F(JobServiceTest, AThousandJobsDueInOneMillisecondAllFire) {
  service().Start();
  v1::ScheduleBatchRequest batch;
  for (int i = 0; i < 1000; ++i) {
    *batch.add_requests() =
        ScheduleReq(i % 2 == 0 ? "even" : "odd", absl::StrCat("j", i), 600);
  }
  ASSERT_OK(service().ScheduleBatch(batch));
  SettleAt(kStartMs + 599, kStartMs + 600);
  EXPECT_EQ(Counts("even").ready + Counts("odd").ready, 0);
  clock_.SetMs(kStartMs + 600);
  ASSERT_TRUE(WaitForReady("even", 500));
  ASSERT_TRUE(WaitForReady("odd", 500));
  EXPECT_EQ(service().timers_pending(), 0u);
}

// A herd's first chunk is small (kFirstChunk), so that delivery's first
// round is: those jobs are ready while the rest of the millisecond is still
// being read. Before, the first jobs waited for a whole chunk of kChunk.
TEST_F(JobServiceTest, AHerdsFirstChunkIsReadiedAloneAndSmall) {
  service().Start();
  constexpr int kJobs = 1000;  // a batch's most; more than kFirstChunk
  ASSERT_OK(service().ScheduleBatch(Crowd("herd", kJobs, 600)));
  SettleAt(kStartMs + 599, kStartMs + 600);
  std::atomic<int64_t> ready_then{-1};
  // Before the scan visits the entry after the first chunk's last.
  store_.StallScanDue([&](size_t index) {
    if (index == FirePath::kFirstChunk) ready_then = Counts("herd").ready;
  });
  clock_.SetMs(kStartMs + 600);
  ASSERT_TRUE(WaitForReady("herd", kJobs));
  store_.StallScanDue(nullptr);
  EXPECT_EQ(ready_then.load(), static_cast<int64_t>(FirePath::kFirstChunk));
}

// A crowd (200 jobs at one millisecond; crowds from 100 here) is taken out
// of the wheel during its lead and prepared, but none of it is ready before
// its millisecond. A job due during the lead fires on time meanwhile; a
// crowd job canceled or moved during the lead is not readied with it.
TEST_F(JobServiceTest, ACrowdTakenAheadIsReadiedAtItsMillisecondNeverBefore) {
  service().SetFireAhead(100, 100);
  service().Start();
  ASSERT_OK(service().ScheduleBatch(Crowd("crowd", 200, 600)));
  MustSchedule("other", "early", 550);
  // Asleep until the lead begins, before the earlier job.
  SettleAt(kStartMs + 499, kStartMs + 500);
  EXPECT_EQ(service().timers_pending(), 201u);
  clock_.SetMs(kStartMs + 500);
  // The fire thread holds the prepared crowd until its millisecond.
  ASSERT_TRUE(clock_.AwaitWaiter(kStartMs + 600, kWait));
  EXPECT_EQ(service().timers_pending(), 1u);
  EXPECT_EQ(Counts("crowd").ready, 0);
  ASSERT_OK(service().Cancel(CancelReq("crowd", "c0")));
  ASSERT_OK(
      service().Reschedule(RescheduleAtReq("crowd", "c1", kStartMs + 700)));
  clock_.SetMs(kStartMs + 550);
  ASSERT_TRUE(WaitForReady("other", 1));
  SettleAt(kStartMs + 599, kStartMs + 600);
  EXPECT_EQ(Counts("crowd").ready, 0);
  clock_.SetMs(kStartMs + 600);
  ASSERT_TRUE(WaitForReady("crowd", 198));
  ASSERT_OK_AND_ASSIGN(v1::Job moved, service().GetJob(GetReq("crowd", "c1")));
  EXPECT_EQ(moved.state(), v1::JOB_STATE_SCHEDULED);
  SettleAt(kStartMs + 699, kStartMs + 700);
  EXPECT_EQ(Counts("crowd").ready, 198);
  clock_.SetMs(kStartMs + 700);
  ASSERT_TRUE(WaitForReady("crowd", 199));
  EXPECT_EQ(Counts("crowd").live, 199);
}

TEST_F(JobServiceTest, StopDuringACrowdsLeadReturns) {
  service().SetFireAhead(100, 100);
  service().Start();
  ASSERT_OK(service().ScheduleBatch(Crowd("crowd", 100, 600)));
  SettleAt(kStartMs + 500, kStartMs + 600);  // taken at once
  ASSERT_TRUE(clock_.AwaitWaiter(kStartMs + 600, kWait));
  EXPECT_EQ(service().timers_pending(), 0u);
  service().Stop();
  EXPECT_EQ(Counts("crowd").ready, 0);
}

TEST_F(JobServiceTest, RecoverRestoresTimersAndCountsAndFiresOverdueAtStart) {
  MustSchedule("t1", "over1", 100);
  MustSchedule("t1", "over2", 200);
  MustSchedule("t1", "future", 5000);
  MustSchedule("t2", "x", 150);
  PutRecord("t1", "flying", v1::JOB_STATE_IN_FLIGHT, kStartMs + 50);
  PutRecord("t1", "dead", v1::JOB_STATE_DEAD, kStartMs + 50);
  PutRecord("t1", "done", v1::JOB_STATE_DONE, kStartMs + 50);

  clock_.SetMs(kStartMs + 1000);  // down for a second
  Restart();
  EXPECT_EQ(service().timers_pending(), 0u);
  ASSERT_OK_AND_ASSIGN(JobService::RecoveryStats rs, service().Recover());
  EXPECT_EQ(rs.jobs, 5);
  EXPECT_EQ(rs.overdue, 4);
  EXPECT_EQ(service().timers_pending(), 5u);
  EXPECT_EQ(Counts("t1").live, 4);
  EXPECT_EQ(Counts("t2").live, 1);
  EXPECT_EQ(Counts("t1").ready, 0);  // not started yet

  service().Start();
  ASSERT_TRUE(WaitForReady("t1", 3));  // over1, over2 and the one in flight
  ASSERT_TRUE(WaitForReady("t2", 1));
  SettleAt(kStartMs + 4999, kStartMs + 5000);
  EXPECT_EQ(Counts("t1").ready, 3);
  clock_.SetMs(kStartMs + 5000);
  ASSERT_TRUE(WaitForReady("t1", 4));
  ASSERT_OK_AND_ASSIGN(v1::GetStatsResponse stats, service().GetStats({}));
  ASSERT_EQ(stats.topics_size(), 2);
  EXPECT_EQ(stats.topics(0).ready(), 4u);
  EXPECT_EQ(stats.topics(0).scheduled(), 0u);
  EXPECT_EQ(stats.topics(1).ready(), 1u);
}

TEST_F(JobServiceTest, RecoveredTimersCanBeCanceledAndMoved) {
  MustSchedule("t", "cancel-me", 300);
  MustSchedule("t", "move-me", 300);
  MustSchedule("sentinel", "s", 300);
  Restart();
  ASSERT_OK(service().Recover());
  service().Start();
  ASSERT_OK(service().Cancel(CancelReq("t", "cancel-me")));
  ASSERT_OK(
      service().Reschedule(RescheduleAtReq("t", "move-me", kStartMs + 700)));
  EXPECT_EQ(service().timers_pending(), 2u);
  clock_.SetMs(kStartMs + 300);
  ASSERT_TRUE(WaitForReady("sentinel", 1));
  SettleAt(kStartMs + 699, kStartMs + 700);
  EXPECT_EQ(Counts("t").ready, 0);
  clock_.SetMs(kStartMs + 700);
  ASSERT_TRUE(WaitForReady("t", 1));
  EXPECT_EQ(Counts("t").live, 1);
}

TEST_F(JobServiceTest, RecoverOfAnEmptyStore) {
  ASSERT_OK_AND_ASSIGN(JobService::RecoveryStats rs, service().Recover());
  EXPECT_EQ(rs.jobs, 0);
  EXPECT_EQ(rs.overdue, 0);
  service().Start();
  SettleAt(kStartMs + 10, kNever);
  EXPECT_THAT(service().topics().Topics(), ::testing::IsEmpty());
}

TEST_F(JobServiceTest, ScheduleWriteFailureChangesNothing) {
  service().Start();
  MustSchedule("t", "existing", 300, "old");
  const std::string before = State();
  store_.FailNextWrites(1, storage::FaultInjectingJobStore::IoError());
  EXPECT_EQ(service().Schedule(ScheduleReq("t", "new", 0)).status().code(),
            absl::StatusCode::kUnavailable);
  store_.FailNextWrites(1, storage::FaultInjectingJobStore::NoSpace());
  EXPECT_EQ(service()
                .Schedule(ScheduleReq("t", "existing", 900, "new",
                                      v1::IF_EXISTS_REPLACE))
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted);
  store_.FailNextWrites(1, storage::FaultInjectingJobStore::IoError());
  v1::ScheduleBatchRequest batch;
  for (int i = 0; i < 10; ++i) {
    *batch.add_requests() = ScheduleReq("t", absl::StrCat("b", i), 0);
  }
  EXPECT_EQ(service().ScheduleBatch(batch).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(State(), before);
  EXPECT_EQ(store_.injected_failures(), 3);

  // The old job still fires at its old time; the failed ones never do.
  clock_.SetMs(kStartMs + 300);
  ASSERT_TRUE(WaitForReady("t", 1));
  SettleAt(kStartMs + 301, kNever);
  EXPECT_EQ(Counts("t").ready, 1);
  ASSERT_OK_AND_ASSIGN(v1::Job job, service().GetJob(GetReq("t", "existing")));
  EXPECT_EQ(job.payload(), "old");

  // Once the fault is gone, the same calls work.
  EXPECT_OK(service().Schedule(ScheduleReq("t", "new", 0)));
  ASSERT_OK_AND_ASSIGN(v1::ScheduleBatchResponse r,
                       service().ScheduleBatch(batch));
  for (const v1::ScheduleResult& result : r.results())
    EXPECT_EQ(result.code(), 0);
  ASSERT_TRUE(WaitForReady("t", 12));
}

TEST_F(JobServiceTest, RescheduleWriteFailureKeepsTheOldTime) {
  service().Start();
  MustSchedule("t", "a", 300);
  MustSchedule("t", "b", 800);
  const std::string before = State();
  store_.FailWritesUntilResume(storage::FaultInjectingJobStore::IoError());
  EXPECT_EQ(service()
                .Reschedule(RescheduleAtReq("t", "a", kStartMs + 900))
                .status()
                .code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(service()
                .Reschedule(RescheduleAtReq("t", "b", kStartMs + 100))
                .status()
                .code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(State(), before);
  ASSERT_OK(store_.Resume());
  // Had b moved to +100, it would have fired by +299.
  SettleAt(kStartMs + 299, kStartMs + 300);
  EXPECT_EQ(Counts("t").ready, 0);
  clock_.SetMs(kStartMs + 300);
  ASSERT_TRUE(WaitForReady("t", 1));
  SettleAt(kStartMs + 799, kStartMs + 800);
  EXPECT_EQ(Counts("t").ready, 1);
  clock_.SetMs(kStartMs + 800);
  ASSERT_TRUE(WaitForReady("t", 2));

  // A failed reschedule of a READY job leaves it ready.
  store_.FailNextWrites(1, storage::FaultInjectingJobStore::NoSpace());
  EXPECT_EQ(service()
                .Reschedule(RescheduleAtReq("t", "a", kStartMs + 5000))
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Counts("t").ready, 2);
  ASSERT_OK(service().Reschedule(RescheduleAtReq("t", "a", kStartMs + 5000)));
  EXPECT_EQ(Counts("t").ready, 1);
}

TEST_F(JobServiceTest, CancelWriteFailureLeavesTheJobToFire) {
  service().Start();
  MustSchedule("t", "a", 300);
  MustSchedule("t", "b", 300);
  const std::string before = State();
  store_.FailWritesUntilResume(storage::FaultInjectingJobStore::NoSpace());
  EXPECT_EQ(service().Cancel(CancelReq("t", "a")).status().code(),
            absl::StatusCode::kResourceExhausted);
  v1::CancelByPrefixRequest all;
  all.set_topic("t");
  EXPECT_EQ(service().CancelByPrefix(all).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(State(), before);
  ASSERT_OK(store_.Resume());
  clock_.SetMs(kStartMs + 300);
  ASSERT_TRUE(WaitForReady("t", 2));

  // A failed cancel of a READY job leaves it ready; then it works.
  store_.FailNextWrites(1, storage::FaultInjectingJobStore::IoError());
  EXPECT_EQ(service().Cancel(CancelReq("t", "a")).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(Counts("t").ready, 2);
  ASSERT_OK_AND_ASSIGN(v1::CancelResponse r,
                       service().Cancel(CancelReq("t", "a")));
  EXPECT_EQ(r.outcome(), v1::CANCEL_OUTCOME_CANCELED);
  ASSERT_OK_AND_ASSIGN(v1::CancelByPrefixResponse p,
                       service().CancelByPrefix(all));
  EXPECT_EQ(p.canceled(), 1u);
  EXPECT_EQ(Counts("t").ready, 0);
  EXPECT_EQ(Counts("t").live, 0);
}

TEST_F(JobServiceTest, CancelByPrefixWriteFailureOnALargeSetThenRetry) {
  for (int b = 0; b < 2; ++b) {
    v1::ScheduleBatchRequest batch;
    for (int i = 0; i < 600; ++i) {
      *batch.add_requests() = ScheduleReq("t", absl::StrCat(b, "-", i), 1000);
    }
    ASSERT_OK(service().ScheduleBatch(batch));
  }
  const std::string before = State();
  store_.FailNextWrites(1, storage::FaultInjectingJobStore::IoError());
  v1::CancelByPrefixRequest all;
  all.set_topic("t");
  EXPECT_EQ(service().CancelByPrefix(all).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(State(), before);
  ASSERT_OK_AND_ASSIGN(v1::CancelByPrefixResponse r,
                       service().CancelByPrefix(all));
  EXPECT_EQ(r.canceled(), 1200u);
  EXPECT_EQ(Counts("t").live, 0);
  EXPECT_EQ(service().timers_pending(), 0u);
}

// Many threads schedule, replace, reschedule and cancel a small set of keys
// while the clock moves; afterwards the counts agree with the store and every
// live job has fired exactly once.
TEST_F(JobServiceTest, ConcurrentMutationsKeepCountsConsistentWithTheStore) {
  service().Start();
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 400; ++i) {
        const std::string id = absl::StrCat("k", rng() % 40);
        const int64_t delay = rng() % 50;
        switch (rng() % 4) {
          case 0:
            EXPECT_OK(service().Schedule(
                ScheduleReq("t", id, delay, "", v1::IF_EXISTS_REPLACE)));
            break;
          case 1:
            EXPECT_OK(service().Cancel(CancelReq("t", id)));
            break;
          case 2: {
            absl::Status s = service()
                                 .Reschedule(RescheduleAtReq(
                                     "t", id, clock_.NowMs() + delay))
                                 .status();
            EXPECT_TRUE(s.ok() || absl::IsNotFound(s)) << s;
            break;
          }
          default:
            (void)service().Schedule(
                ScheduleReq("t", id, delay, "", v1::IF_EXISTS_KEEP));
        }
      }
    });
  }
  std::thread ticker([&] {
    while (!stop.load()) {
      clock_.AdvanceMs(3);
      std::this_thread::yield();
    }
  });
  for (std::thread& th : threads) th.join();
  stop = true;
  ticker.join();

  clock_.AdvanceMs(1000);  // everything left is due
  int64_t live = 0;
  ASSERT_OK(memory_.ScanJobs("t", "", "", [&](const storage::JobRecord& rec) {
    EXPECT_EQ(rec.job().state(), v1::JOB_STATE_SCHEDULED);
    ++live;
    return true;
  }));
  EXPECT_EQ(Counts("t").live, live);
  EXPECT_TRUE(WaitForReady("t", live)) << Counts("t").ready << " vs " << live;
  SettleAt(clock_.NowMs() + 1, kNever);
  EXPECT_EQ(Counts("t").ready, live);
}

}  // namespace
}  // namespace delayd::server::testing
