#include "server/timer/timing_wheel.h"

#include <cstdint>
#include <optional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/timer/wheel_test_util.h"

namespace delayd::timer {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

using ::delayd::timer::wheel_test::kHour;
using ::delayd::timer::wheel_test::kMin;
using ::delayd::timer::wheel_test::kSec;
using ::delayd::timer::wheel_test::kT0;
using ::delayd::timer::wheel_test::kYear;
using ::delayd::timer::wheel_test::Tags;

// Inserts one entry `delta` ms after kT0 and checks that it fires at its due
// millisecond, not one ms before: advancing in one jump, advancing to
// NextDueMs() step by step, and advancing the way the Scheduler does
// (OpenNextSecond() when idle, then to NextWakeMs()).
void ExpectFiresExactlyAt(int64_t delta) {
  SCOPED_TRACE(delta);
  const int64_t due = kT0 + delta;
  {
    TimingWheel wheel(kT0);
    wheel.Insert(due, 7);
    EXPECT_THAT(wheel.Advance(due - 1), IsEmpty());
    EXPECT_THAT(wheel.Advance(due), ElementsAre(TimerEntry{due, 7}));
    EXPECT_TRUE(wheel.empty());
  }
  {
    TimingWheel wheel(kT0);
    wheel.Insert(due, 7);
    std::vector<TimerEntry> fired;
    int wakeups = 0;
    while (fired.empty()) {
      const std::optional<int64_t> next = wheel.NextDueMs();
      ASSERT_TRUE(next.has_value());
      ASSERT_LE(*next, due);  // a lower bound
      fired = wheel.Advance(*next);
      ++wakeups;
      ASSERT_LT(wakeups, 200000);
    }
    EXPECT_THAT(fired, ElementsAre(TimerEntry{due, 7}));
    EXPECT_EQ(wheel.now_ms(), due);
    // One wakeup per revolution (entry's slot comes round) plus a couple.
    EXPECT_LE(wakeups, delta / TimingWheel::kCoarseSlots / kSec + 3);
  }
  {
    // The Scheduler's way: open the next second when idle, sleep until
    // NextWakeMs().
    TimingWheel wheel(kT0);
    wheel.Insert(due, 7);
    std::vector<TimerEntry> fired;
    int wakeups = 0;
    while (fired.empty()) {
      wheel.OpenNextSecond();
      const std::optional<int64_t> wake = wheel.NextWakeMs();
      ASSERT_TRUE(wake.has_value());
      ASSERT_LE(*wake, due);
      fired = wheel.Advance(*wake);
      ++wakeups;
      ASSERT_LT(wakeups, 400000);
    }
    EXPECT_THAT(fired, ElementsAre(TimerEntry{due, 7}));
    EXPECT_EQ(wheel.now_ms(), due);
    EXPECT_LE(wakeups, 2 * (delta / TimingWheel::kCoarseSlots / kSec) + 4);
  }
}

TEST(TimingWheelTest, FiresAtExactlyItsDueMillisecond) {
  for (int64_t delta : {int64_t{1}, int64_t{2}, int64_t{749}, int64_t{750},
                        kSec, kSec + 1, 59 * kMin + 59 * kSec + 999, kHour,
                        kHour + 1, kHour - 250, 25 * kHour, 10 * kYear}) {
    ExpectFiresExactlyAt(delta);
  }
}

TEST(TimingWheelTest, HundredYearsAhead) {
  TimingWheel wheel(kT0);
  const int64_t due = kT0 + 100 * kYear + 123;
  wheel.Insert(due, 1);
  EXPECT_THAT(wheel.Advance(due - 1), IsEmpty());
  EXPECT_THAT(wheel.Advance(due), ElementsAre(TimerEntry{due, 1}));
}

TEST(TimingWheelTest, DueNowOrInThePastFiresAtNextAdvanceOldestFirst) {
  TimingWheel wheel(kT0);
  wheel.Insert(kT0, 1);
  wheel.Insert(kT0 - 5 * kSec, 2);
  wheel.Insert(kT0 - 10 * kYear, 3);
  wheel.Insert(kT0 - 1, 4);
  EXPECT_EQ(wheel.NextDueMs(), kT0 - 10 * kYear);
  EXPECT_THAT(Tags(wheel.Advance(kT0)), ElementsAre(3, 2, 4, 1));
  EXPECT_EQ(wheel.NextDueMs(), std::nullopt);
}

TEST(TimingWheelTest, SecondAndRevolutionBoundaries) {
  // kT0 is .250 into a second; the next second starts at kT0 + 750.
  TimingWheel wheel(kT0);
  const int64_t next_second = kT0 + 750;
  wheel.Insert(next_second - 1, 1);  // last ms of the current second
  wheel.Insert(next_second, 2);      // first ms of the next
  wheel.Insert(next_second + kHour, 3);
  wheel.Insert(next_second + kHour - 1, 4);
  EXPECT_THAT(Tags(wheel.Advance(next_second - 1)), ElementsAre(1));
  EXPECT_THAT(Tags(wheel.Advance(next_second)), ElementsAre(2));
  EXPECT_THAT(wheel.Advance(next_second + kHour - 2), IsEmpty());
  EXPECT_THAT(Tags(wheel.Advance(next_second + kHour)), ElementsAre(4, 3));
}

TEST(TimingWheelTest, WrapsAroundTheCoarseWheel) {
  // Start in the last second of a revolution (slot 3599).
  const int64_t start = (kT0 / kHour + 1) * kHour - 500;
  TimingWheel wheel(start);
  wheel.Insert(start + 600, 1);   // slot 0
  wheel.Insert(start + 1600, 2);  // slot 1
  EXPECT_EQ(wheel.NextDueMs(), start + 500);
  EXPECT_THAT(Tags(wheel.Advance(start + 2 * kSec)), ElementsAre(1, 2));
}

TEST(TimingWheelTest, NegativeTimesWork) {
  TimingWheel wheel(-1500);
  wheel.Insert(-1200, 1);
  wheel.Insert(-1, 2);
  wheel.Insert(0, 3);
  wheel.Insert(-kHour - 1, 4);
  EXPECT_THAT(Tags(wheel.Advance(-1200)), ElementsAre(4, 1));
  EXPECT_THAT(Tags(wheel.Advance(5)), ElementsAre(2, 3));
}

TEST(TimingWheelTest, FiresInDueOrderThenInsertionOrder) {
  TimingWheel wheel(kT0);
  wheel.Insert(kT0 + 3 * kSec + 5, 1);
  wheel.Insert(kT0 + 2, 2);
  wheel.Insert(kT0 + 3 * kSec + 5, 3);
  wheel.Insert(kT0 + kHour + 2, 4);
  wheel.Insert(kT0 + 900, 5);
  EXPECT_THAT(Tags(wheel.Advance(kT0 + 2 * kHour)), ElementsAre(2, 5, 1, 3, 4));
}

TEST(TimingWheelTest, ManyEntriesInOneMillisecond) {
  TimingWheel wheel(kT0);
  constexpr int kCount = 100000;
  const int64_t due = kT0 + 42 * kSec + 17;
  for (int i = 0; i < kCount; ++i) wheel.Insert(due, i);
  EXPECT_THAT(wheel.Advance(due - 1), IsEmpty());
  const std::vector<TimerEntry> fired = wheel.Advance(due);
  ASSERT_EQ(fired.size(), kCount);
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(fired[i].tag, uint64_t(i));
  EXPECT_EQ(wheel.stats().fine_slots_fired, 1);
}

TEST(TimingWheelTest, CancelBeforeCascading) {
  TimingWheel wheel(kT0);
  const TimerHandle h = wheel.Insert(kT0 + kHour + 500, 1);
  wheel.Insert(kT0 + kHour + 501, 2);
  EXPECT_TRUE(wheel.Cancel(h));
  EXPECT_FALSE(wheel.Cancel(h));
  EXPECT_EQ(wheel.size(), 1);
  EXPECT_THAT(Tags(wheel.Advance(kT0 + 2 * kHour)), ElementsAre(2));
}

TEST(TimingWheelTest, CancelAfterCascading) {
  TimingWheel wheel(kT0);
  const int64_t due = kT0 + 10 * kSec + 500;
  const TimerHandle h = wheel.Insert(due, 1);
  wheel.Insert(due + 1, 2);
  // Enter the due second: its coarse slot is opened, both move to fine slots.
  EXPECT_THAT(wheel.Advance(due - 100), IsEmpty());
  EXPECT_EQ(wheel.stats().coarse_slots_opened, 1);
  EXPECT_EQ(wheel.NextDueMs(), due);  // exact now that it is in the fine level
  EXPECT_TRUE(wheel.Cancel(h));
  EXPECT_EQ(wheel.NextDueMs(), due + 1);
  EXPECT_THAT(Tags(wheel.Advance(due + kSec)), ElementsAre(2));
  EXPECT_FALSE(wheel.Cancel(h));
}

TEST(TimingWheelTest, CancelOverdueEntry) {
  TimingWheel wheel(kT0);
  const TimerHandle h = wheel.Insert(kT0 - 1, 1);
  EXPECT_TRUE(wheel.Cancel(h));
  EXPECT_EQ(wheel.NextDueMs(), std::nullopt);
  EXPECT_THAT(wheel.Advance(kT0 + 1), IsEmpty());
}

TEST(TimingWheelTest, RescheduleEarlierAndLaterKeepsTheHandle) {
  TimingWheel wheel(kT0);
  const TimerHandle h = wheel.Insert(kT0 + 2 * kHour, 1);
  EXPECT_TRUE(wheel.Reschedule(h, kT0 + 5));  // earlier: into the fine level
  EXPECT_EQ(wheel.NextDueMs(), kT0 + 5);
  EXPECT_TRUE(wheel.Reschedule(h, kT0 + 25 * kHour));  // later
  EXPECT_THAT(wheel.Advance(kT0 + 25 * kHour - 1), IsEmpty());
  // After cascading into the fine level, move it again.
  EXPECT_THAT(wheel.Advance(kT0 + 25 * kHour - 1), IsEmpty());
  EXPECT_TRUE(wheel.Reschedule(h, kT0 + 25 * kHour + 3 * kSec));
  EXPECT_THAT(wheel.Advance(kT0 + 25 * kHour + 3 * kSec - 1), IsEmpty());
  EXPECT_THAT(Tags(wheel.Advance(kT0 + 25 * kHour + 3 * kSec)), ElementsAre(1));
  EXPECT_FALSE(wheel.Reschedule(h, kT0 + 30 * kHour));
  EXPECT_TRUE(wheel.empty());
}

TEST(TimingWheelTest, RescheduleIntoThePastFiresAtNextAdvance) {
  TimingWheel wheel(kT0);
  const TimerHandle h = wheel.Insert(kT0 + kHour, 9);
  ASSERT_TRUE(wheel.Reschedule(h, kT0 - kSec));
  EXPECT_EQ(wheel.NextDueMs(), kT0 - kSec);
  EXPECT_THAT(wheel.Advance(kT0), ElementsAre(TimerEntry{kT0 - kSec, 9}));
}

TEST(TimingWheelTest, StaleAndForgedHandlesAreRefused) {
  TimingWheel wheel(kT0);
  EXPECT_FALSE(wheel.Cancel(TimerHandle()));
  const TimerHandle fired = wheel.Insert(kT0 + 1, 1);
  wheel.Advance(kT0 + 1);
  // The freed entry is reused by the next insert: the old handle stays stale.
  const TimerHandle reused = wheel.Insert(kT0 + 10, 2);
  EXPECT_EQ(reused.index(), fired.index());
  EXPECT_FALSE(wheel.Cancel(fired));
  EXPECT_FALSE(wheel.Reschedule(fired, kT0 + 2));
  // A sentinel's index, an index never handed out, a free entry's generation.
  EXPECT_FALSE(wheel.Cancel(TimerHandle::FromRaw(uint64_t{1} << 32 | 5)));
  EXPECT_FALSE(wheel.Cancel(TimerHandle::FromRaw(uint64_t{1} << 32 | 999999)));
  EXPECT_FALSE(wheel.Cancel(TimerHandle::FromRaw(
      uint64_t{reused.generation() + 1} << 32 | reused.index())));
  EXPECT_THAT(Tags(wheel.Advance(kT0 + 10)), ElementsAre(2));
}

TEST(TimingWheelTest, TimeGoingBackwardsNeverFiresEarly) {
  TimingWheel wheel(kT0);
  wheel.Insert(kT0 + 10, 1);
  EXPECT_THAT(wheel.Advance(kT0 - kHour), IsEmpty());
  EXPECT_EQ(wheel.now_ms(), kT0);  // keeps its state
  // Inserted while the clock is behind the wheel: due <= the wheel's now, so
  // overdue — yet fired only once the caller's now reaches it.
  wheel.Insert(kT0 - 30 * kMin, 2);
  wheel.Insert(kT0 - 50 * kMin, 3);
  EXPECT_EQ(wheel.NextDueMs(), kT0 - 50 * kMin);
  EXPECT_THAT(Tags(wheel.Advance(kT0 - 40 * kMin)), ElementsAre(3));
  EXPECT_EQ(wheel.NextDueMs(), kT0 - 30 * kMin);
  EXPECT_THAT(wheel.Advance(kT0 - 31 * kMin), IsEmpty());
  EXPECT_THAT(Tags(wheel.Advance(kT0 + 10)), ElementsAre(2, 1));
}

TEST(TimingWheelTest, InsertBatch) {
  TimingWheel wheel(kT0);
  std::vector<TimerEntry> batch;
  for (int i = 0; i < 1000; ++i)
    batch.push_back({kT0 + kHour + i * 7, 100u + i});
  const std::vector<TimerHandle> handles = wheel.InsertBatch(batch);
  ASSERT_EQ(handles.size(), batch.size());
  EXPECT_TRUE(wheel.Cancel(handles[3]));
  batch.erase(batch.begin() + 3);
  EXPECT_EQ(wheel.Advance(kT0 + 2 * kHour), batch);
}

TEST(TimingWheelTest, MemoryPerEntryIsSmall) {
  TimingWheel wheel(kT0);
  constexpr int kCount = 1000000;
  wheel.Reserve(kCount);
  for (int64_t i = 0; i < kCount; ++i)
    wheel.Insert(kT0 + (i * 7919) % kHour, i);
  EXPECT_LE(static_cast<double>(wheel.MemoryBytes()) / kCount, 36.0);
}

}  // namespace
}  // namespace delayd::timer
