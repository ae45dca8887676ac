#include "server/timer/fake_clock.h"

#include <cstdint>
#include <memory>
#include <thread>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/timer/clock.h"

namespace delayd::timer {
namespace {

constexpr int64_t kT0 = 1795316400250;
// Real time allowed for a thread to go to sleep; never slept, only waited.
constexpr absl::Duration kPatience = absl::Seconds(20);
// A waiter's thread needs a moment to run once woken; these checks come
// right after the wake, so repeat them to catch a stale answer.
constexpr int kRounds = 200;

TEST(FakeClockTest, AWokenWaiterIsNoLongerAsleepBeforeItsThreadRuns) {
  FakeClock clock(kT0);
  const std::unique_ptr<Clock::Waiter> waiter = clock.NewWaiter();
  for (int i = 0; i < kRounds; ++i) {
    std::thread sleeper([&] { waiter->WaitUntil(kT0 + 100); });
    ASSERT_TRUE(clock.AwaitWaiter(kT0 + 100, kPatience));
    waiter->Wake();
    EXPECT_FALSE(clock.AwaitWaiter(kT0 + 100, absl::ZeroDuration()))
        << "round " << i;
    sleeper.join();
  }
}

TEST(FakeClockTest, AWaiterWhoseDeadlineHasComeIsNoLongerAsleep) {
  FakeClock clock(kT0);
  const std::unique_ptr<Clock::Waiter> waiter = clock.NewWaiter();
  for (int i = 0; i < kRounds; ++i) {
    std::thread sleeper([&] { waiter->WaitUntil(kT0 + i + 1); });
    ASSERT_TRUE(clock.AwaitWaiter(kT0 + i + 1, kPatience));
    clock.SetMs(kT0 + i + 1);
    EXPECT_FALSE(clock.AwaitWaiter(kT0 + i + 1, absl::ZeroDuration()))
        << "round " << i;
    sleeper.join();
  }
}

TEST(FakeClockTest, AWaiterUntilWokenIsSeenAsleepUntilWoken) {
  FakeClock clock(kT0);
  const std::unique_ptr<Clock::Waiter> waiter = clock.NewWaiter();
  std::thread sleeper([&] { waiter->WaitUntil(Clock::kNoDeadline); });
  ASSERT_TRUE(clock.AwaitWaiter(Clock::kNoDeadline, kPatience));
  clock.SetMs(kT0 + 3'600'000);
  EXPECT_TRUE(clock.AwaitWaiter(Clock::kNoDeadline, absl::ZeroDuration()));
  EXPECT_FALSE(clock.AwaitWaiter(kT0 + 3'600'000, absl::ZeroDuration()));
  waiter->Wake();
  sleeper.join();
  EXPECT_FALSE(clock.AwaitWaiter(Clock::kNoDeadline, absl::ZeroDuration()));
  EXPECT_EQ(clock.waits(), 1);
}

}  // namespace
}  // namespace delayd::timer
