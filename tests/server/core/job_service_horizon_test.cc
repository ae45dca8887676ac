// JobService with a memory horizon: jobs due beyond it have no timer until
// the loader reaches them, and each still fires at its due millisecond —
// after a jump of the clock, a reschedule across the horizon and a restart.
// The loader runs on the service's threads, woken by its own timer on the
// fake clock; tests poll with a short real-time deadline.
#include <string>

#include "gtest/gtest.h"
#include "tests/server/core/job_service_test_util.h"

namespace delayd::server::testing {
namespace {

constexpr int64_t kSecond = 1000;
constexpr int64_t kMinute = 60 * kSecond;
constexpr int64_t kHour = 60 * kMinute;

class HorizonTest : public JobServiceTest {
 protected:
  // A fresh service with a 1-minute horizon, recovered and started.
  void StartWithHorizon() {
    Restart();
    service().SetMemoryHorizon(absl::Minutes(1));
    ASSERT_OK(service().Recover());
    service().Start();
  }

  // Polls until the wheel holds `n` timers (the loader's own included).
  bool WaitForTimers(size_t n) {
    return PollUntil([&] { return service().timers_pending() == n; }, kWait,
                     absl::Milliseconds(1));
  }
};

TEST_F(HorizonTest, OnlyJobsWithinTheHorizonHaveTimersUntilItReachesThem) {
  StartWithHorizon();
  EXPECT_EQ(service().memory_horizon_ms(), kStartMs + kMinute);
  MustSchedule("t", "near", 30 * kSecond);
  MustSchedule("t", "far", 10 * kMinute + 250);
  MustSchedule("t", "farther", 2 * kHour);
  // near and the loader's timer; far and farther wait on disk.
  EXPECT_EQ(service().timers_pending(), 2u);
  EXPECT_EQ(Counts("t").live, 3);

  // The clock jumps to 1 ms before far is due: the loader's timer fires,
  // the horizon moves to a minute from then and arms far; near fires.
  const int64_t far_due = kStartMs + 10 * kMinute + 250;
  clock_.SetMs(far_due - 1);
  ASSERT_TRUE(WaitForReady("t", 1));
  ASSERT_TRUE(WaitForTimers(2));  // far and the loader's next timer
  EXPECT_EQ(service().memory_horizon_ms(), far_due - 1 + kMinute);
  // The timer thread now sleeps until far's due millisecond: armed exactly.
  SettleAt(far_due - 1, far_due);
  EXPECT_EQ(Counts("t").ready, 1);
  clock_.SetMs(far_due);
  ASSERT_TRUE(WaitForReady("t", 2));
  ASSERT_TRUE(WaitForTimers(1));  // farther is still on disk only

  // Moved within the horizon, farther gets its timer at once.
  ASSERT_OK(service().Reschedule(
      RescheduleAtReq("t", "farther", far_due + 20 * kSecond)));
  EXPECT_EQ(service().timers_pending(), 2u);
  clock_.SetMs(far_due + 20 * kSecond);
  ASSERT_TRUE(WaitForReady("t", 3));
}

TEST_F(HorizonTest, ARescheduleBeyondTheHorizonDropsTheTimerAndStillFires) {
  StartWithHorizon();
  MustSchedule("t", "a", 30 * kSecond);
  EXPECT_EQ(service().timers_pending(), 2u);
  const int64_t later = kStartMs + 5 * kMinute + 250;
  ASSERT_OK(service().Reschedule(RescheduleAtReq("t", "a", later)));
  EXPECT_EQ(service().timers_pending(), 1u);  // the loader's only
  // Not at its old time...
  clock_.SetMs(kStartMs + 30 * kSecond);
  ASSERT_TRUE(WaitForTimers(1));
  EXPECT_EQ(Counts("t").ready, 0);
  // ...loaded as the horizon passes it, and fired at the new one.
  clock_.SetMs(later - 1);
  ASSERT_TRUE(WaitForTimers(2));
  EXPECT_EQ(Counts("t").ready, 0);
  clock_.SetMs(later);
  ASSERT_TRUE(WaitForReady("t", 1));
}

TEST_F(HorizonTest, RecoverCountsEveryJobButArmsOnlyThoseWithinTheHorizon) {
  service().Start();
  MustSchedule("t", "soon", 10 * kSecond);
  MustSchedule("t", "hour", kHour);
  MustSchedule("t", "day", 24 * kHour);
  service().Stop();

  Restart();
  service().SetMemoryHorizon(absl::Minutes(1));
  ASSERT_OK_AND_ASSIGN(JobService::RecoveryStats stats, service().Recover());
  EXPECT_EQ(stats.jobs, 3);
  EXPECT_EQ(Counts("t").live, 3);
  EXPECT_EQ(service().timers_pending(), 1u);  // soon
  service().Start();
  clock_.SetMs(kStartMs + kHour - 1);
  ASSERT_TRUE(WaitForReady("t", 1));
  ASSERT_TRUE(WaitForTimers(2));  // hour and the loader's
  EXPECT_EQ(Counts("t").ready, 1);
  clock_.SetMs(kStartMs + kHour);
  ASSERT_TRUE(WaitForReady("t", 2));
  ASSERT_OK_AND_ASSIGN(v1::GetStatsResponse s, service().GetStats({}));
  EXPECT_EQ(s.topics(0).scheduled(), 1u);  // day, on disk only
}

}  // namespace
}  // namespace delayd::server::testing

namespace delayd::server::testing {
namespace {

// Config refuses an unbounded --memory-horizon, and the arithmetic saturates
// anyway: now + an infinite horizon is "every job", not a time in the past
// (which armed nothing, and no job fired).
TEST_F(HorizonTest, AnInfiniteHorizonSaturatesAndJobsStillFire) {
  Restart();
  service().SetMemoryHorizon(absl::InfiniteDuration());
  ASSERT_OK(service().Recover());
  service().Start();
  EXPECT_GT(service().memory_horizon_ms(), kStartMs + 100 * 365 * 24 * kHour);
  MustSchedule("t", "a", 30 * kSecond);
  clock_.SetMs(kStartMs + 30 * kSecond);
  ASSERT_TRUE(WaitForReady("t", 1));
}

}  // namespace
}  // namespace delayd::server::testing
