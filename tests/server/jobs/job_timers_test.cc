// JobTimers with a memory horizon, over a real Scheduler on a FakeClock:
// Arm beyond the horizon drops the key's timer; the loader's timers never
// move a tracked one, and still reach a key whose tracked timer already
// fired for nothing.
#include "server/jobs/job_timers.h"

#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/timer/fake_clock.h"
#include "server/timer/scheduler.h"
#include "tests/support/poll.h"

namespace delayd::server {
namespace {

using ::delayd::testing::PollUntil;

constexpr int64_t kT0 = 1'700'000'000'000;
constexpr absl::Duration kPatience = absl::Seconds(10);
constexpr uint64_t kHash = 42;
constexpr uint32_t kCheck = 7;

class TimerIndexTest : public ::testing::Test {
 protected:
  TimerIndexTest()
      : scheduler_(&clock_,
                   [this](std::vector<timer::TimerEntry> fired) {
                     absl::MutexLock lock(&mu_);
                     for (const timer::TimerEntry& e : fired) {
                       fired_.push_back(e);
                     }
                   }),
        index_(&scheduler_) {
    scheduler_.Start();
  }
  ~TimerIndexTest() override { scheduler_.Stop(); }

  size_t FiredCount() {
    absl::MutexLock lock(&mu_);
    return fired_.size();
  }

  timer::FakeClock clock_{kT0};
  absl::Mutex mu_;
  std::vector<timer::TimerEntry> fired_ ABSL_GUARDED_BY(mu_);
  timer::Scheduler scheduler_;
  JobTimers index_;
};

TEST_F(TimerIndexTest, ArmBeyondTheHorizonDropsTheTimer) {
  index_.SetHorizon(kT0 + 1000);
  index_.Arm(kHash, kCheck, kT0 + 500);
  EXPECT_EQ(scheduler_.size(), 1u);
  index_.Arm(kHash, kCheck, kT0 + 5000);  // moved past the horizon
  EXPECT_EQ(scheduler_.size(), 0u);
  EXPECT_EQ(index_.tracked(), 0u);
}

TEST_F(TimerIndexTest, HorizonTimersLeaveATrackedTimerWhereItIs) {
  index_.SetHorizon(kT0 + 1000);
  index_.Arm(kHash, kCheck, kT0 + 300);  // a concurrent, newer Arm
  index_.AddHorizonTimers({{{kT0 + 600, kHash, kCheck}}});  // a stale read
  EXPECT_EQ(scheduler_.size(), 2u);  // the loader's is an untracked hint
  // Disarm cancels the tracked timer, the one Arm set, not the hint.
  index_.Disarm(kHash, kCheck);
  EXPECT_EQ(scheduler_.size(), 1u);
}

// The loader once armed a key from an entry that was stale (its job had
// moved past the horizon); that timer fired for nothing and stayed tracked.
// When the horizon reaches the job's real due time, it still gets a timer.
TEST_F(TimerIndexTest, AKeyWhoseTrackedTimerFiredForNothingGetsANewOne) {
  index_.SetHorizon(kT0 + 1000);
  index_.AddHorizonTimers({{{kT0 + 10, kHash, kCheck}}});
  // The timer thread has seen the timer (it sleeps until it); only then
  // does a sleep "until woken" mean that it fired. (Awaiting that alone
  // raced: the thread could still be in its sleep from before the add.)
  ASSERT_TRUE(clock_.AwaitWaiter(kT0 + 10, kPatience));
  clock_.SetMs(kT0 + 10);
  ASSERT_TRUE(clock_.AwaitWaiter(timer::Clock::kNoDeadline, kPatience));
  ASSERT_EQ(FiredCount(), 1u);  // nobody calls Fired: it was for nothing
  EXPECT_EQ(scheduler_.size(), 0u);
  index_.SetHorizon(kT0 + 5000);
  index_.AddHorizonTimers({{{kT0 + 4000, kHash, kCheck}}});
  EXPECT_EQ(scheduler_.size(), 1u);
  clock_.SetMs(kT0 + 4000);
  PollUntil([&] { return FiredCount() >= 2; }, kPatience,
            absl::Milliseconds(1));
  EXPECT_EQ(FiredCount(), 2u);
}

// FiredBatch, after the timers of a millisecond fired: a key whose timer
// was disarmed since, or armed again (pending), is not due by it; an
// untracked key (another key holds its hash) is, as is a tracked one whose
// timer fired and stayed.
TEST_F(TimerIndexTest, FiredBatchTellsTheTimersThatStillStand) {
  constexpr uint32_t kOther = kCheck + 1;  // a second key of kHash
  const JobTimers::Entry kept{0, kHash, kCheck};
  const JobTimers::Entry shared{0, kHash, kOther};
  const JobTimers::Entry disarmed{0, 1, 1};
  const JobTimers::Entry moved{0, 2, 2};
  for (const JobTimers::Entry& e : {kept, shared, disarmed, moved}) {
    index_.Arm(e.hash, e.check, kT0 + 10);
  }
  EXPECT_EQ(index_.tracked(), 3u);  // kHash's second key is untracked
  ASSERT_TRUE(clock_.AwaitWaiter(kT0 + 10, kPatience));
  clock_.SetMs(kT0 + 10);
  ASSERT_TRUE(clock_.AwaitWaiter(timer::Clock::kNoDeadline, kPatience));
  ASSERT_EQ(FiredCount(), 4u);
  index_.Disarm(disarmed.hash, disarmed.check);
  index_.Arm(moved.hash, moved.check, kT0 + 500);
  EXPECT_EQ(index_.FiredBatch({{kept, shared, disarmed, moved}}),
            (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ(index_.tracked(), 1u);  // the moved key's new timer
  // Its new timer fires: now it is due by it.
  clock_.SetMs(kT0 + 500);
  ASSERT_TRUE(clock_.AwaitWaiter(timer::Clock::kNoDeadline, kPatience));
  EXPECT_EQ(index_.FiredBatch({{moved, disarmed}}),
            (std::vector<bool>{true, false}));
  EXPECT_EQ(index_.tracked(), 0u);
  // kHash's tracked key is gone: its untracked second key is still due.
  EXPECT_EQ(index_.FiredBatch({{shared}}), (std::vector<bool>{true}));
}

}  // namespace
}  // namespace delayd::server
