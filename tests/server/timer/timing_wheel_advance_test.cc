// TimingWheel: long gaps and sweeps, opening ahead, NextDueMs/NextWakeMs,
// crowds taken ahead.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/timer/timing_wheel.h"
#include "tests/server/timer/wheel_test_util.h"

namespace delayd::timer {
namespace {

using ::delayd::timer::wheel_test::kDay;
using ::delayd::timer::wheel_test::kHour;
using ::delayd::timer::wheel_test::kMin;
using ::delayd::timer::wheel_test::kSec;
using ::delayd::timer::wheel_test::kT0;
using ::delayd::timer::wheel_test::kYear;
using ::delayd::timer::wheel_test::Tags;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(TimingWheelTest, LongIdleGapsDoNoPerSlotWork) {
  TimingWheel wheel(kT0);
  wheel.Insert(kT0 + 3 * kDay + 5, 1);
  wheel.Insert(kT0 + 10 * kYear, 2);
  // A jump of two days: one sweep, which opens the two non-empty slots once.
  EXPECT_THAT(wheel.Advance(kT0 + 2 * kDay), IsEmpty());
  EXPECT_EQ(wheel.stats().sweeps, 1);
  EXPECT_LE(wheel.stats().coarse_slots_opened, 2);
  EXPECT_LE(wheel.stats().bitmap_words_read, 2 * 57 + 16);
  EXPECT_EQ(wheel.stats().fine_slots_fired, 0);
  EXPECT_THAT(Tags(wheel.Advance(kT0 + 3 * kDay + 5)), ElementsAre(1));
  // Empty stretches inside an hour are skipped by the bitmap too.
  const TimingWheel::Stats before = wheel.stats();
  EXPECT_THAT(wheel.Advance(kT0 + 3 * kDay + 59 * kMin), IsEmpty());
  EXPECT_EQ(wheel.stats().coarse_slots_opened, before.coarse_slots_opened);
  EXPECT_LE(wheel.stats().bitmap_words_read - before.bitmap_words_read, 100);
  // Ten years in one call.
  EXPECT_THAT(Tags(wheel.Advance(kT0 + 10 * kYear)), ElementsAre(2));
  EXPECT_LE(wheel.stats().coarse_slots_opened, 4);
  EXPECT_LE(wheel.stats().bitmap_words_read, 1000);
}

TEST(TimingWheelTest, SweepOverARevolutionFiresInOrderAndKeepsTheRest) {
  TimingWheel wheel(kT0);
  std::vector<TimerEntry> all;
  for (uint64_t i = 0; i < 5000; ++i) {
    all.push_back({kT0 + 1 + static_cast<int64_t>(i * 21601) % (3 * kHour), i});
    wheel.Insert(all.back().due_ms, i);
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const TimerEntry& a, const TimerEntry& b) {
                     return a.due_ms < b.due_ms;
                   });
  const int64_t cut = kT0 + 2 * kHour + 250;
  const auto split = std::upper_bound(
      all.begin(), all.end(), cut,
      [](int64_t t, const TimerEntry& e) { return t < e.due_ms; });
  EXPECT_EQ(wheel.Advance(cut), std::vector<TimerEntry>(all.begin(), split));
  EXPECT_EQ(wheel.stats().sweeps, 1);
  EXPECT_EQ(wheel.Advance(kT0 + 4 * kHour),
            std::vector<TimerEntry>(split, all.end()));
}

TEST(TimingWheelTest, OpenNextSecondOpensItAhead) {
  TimingWheel wheel(kT0);
  const int64_t next_second = kT0 + 750;  // kT0 is .250 into its second
  const TimerHandle a = wheel.Insert(next_second + 300, 1);
  wheel.Insert(next_second + kHour + 1, 2);   // same slot, one cycle more
  EXPECT_EQ(wheel.NextDueMs(), next_second);  // a lower bound
  EXPECT_TRUE(wheel.OpenNextSecond());
  EXPECT_FALSE(wheel.OpenNextSecond());  // already open
  EXPECT_EQ(wheel.stats().coarse_slots_opened, 1);
  EXPECT_EQ(wheel.stats().entries_scanned, 2);
  EXPECT_EQ(wheel.NextDueMs(), next_second + 300);  // exact now
  // Inserts into the open second go straight to its fine slots.
  wheel.Insert(next_second + 5, 3);
  EXPECT_EQ(wheel.NextDueMs(), next_second + 5);
  EXPECT_TRUE(wheel.Cancel(a));
  EXPECT_THAT(Tags(wheel.Advance(next_second + 299)), ElementsAre(3));
  // Entering the opened second opened no slot.
  EXPECT_EQ(wheel.stats().coarse_slots_opened, 1);
  EXPECT_THAT(wheel.Advance(next_second + kHour), IsEmpty());
  EXPECT_THAT(Tags(wheel.Advance(next_second + kHour + 1)), ElementsAre(2));
}

TEST(TimingWheelTest, OpenNextSecondInStepsResumesWhereItStopped) {
  TimingWheel wheel(kT0);
  const int64_t next_second = kT0 + 750;  // kT0 is .250 into its second
  std::vector<TimerHandle> h;
  for (uint64_t tag = 1; tag <= 6; ++tag) {
    // Tags 1-6 at ms 10, except 3, one revolution on.
    h.push_back(wheel.Insert(next_second + 10 + (tag == 3 ? kHour : 0), tag));
  }
  wheel.Insert(kT0 + 500, 100);  // in the current second
  // Two entries a step: 1 moves, 2 moves; then 3 stays, 4 moves.
  EXPECT_TRUE(wheel.OpenNextSecond(2));
  EXPECT_FALSE(wheel.NextSecondOpen());
  EXPECT_EQ(wheel.stats().coarse_slots_opened, 1);
  EXPECT_EQ(wheel.stats().entries_scanned, 2);
  EXPECT_EQ(wheel.NextDueMs(), kT0 + 500);
  EXPECT_TRUE(wheel.OpenNextSecond(2));
  EXPECT_FALSE(wheel.NextSecondOpen());
  EXPECT_EQ(wheel.NextDueMs(), kT0 + 500);
  // Between steps: cancel one moved (2), one kept (3) and one not looked
  // at (5); insert into the second being opened; fire the current second.
  EXPECT_TRUE(wheel.Cancel(h[1]));
  EXPECT_TRUE(wheel.Cancel(h[2]));
  EXPECT_TRUE(wheel.Cancel(h[4]));
  EXPECT_FALSE(wheel.Cancel(h[4]));
  wheel.Insert(next_second + 10, 7);
  EXPECT_THAT(Tags(wheel.Advance(kT0 + 500)), ElementsAre(100));
  EXPECT_FALSE(wheel.NextSecondOpen());
  EXPECT_EQ(wheel.NextDueMs(), next_second);  // a lower bound, as before
  // Rescheduled within it: moved (1) and not looked at (6) both stay due.
  EXPECT_TRUE(wheel.Reschedule(h[0], next_second + 20));
  EXPECT_TRUE(wheel.Reschedule(h[5], next_second + 5));
  EXPECT_TRUE(wheel.OpenNextSecond(1));
  EXPECT_TRUE(wheel.OpenNextSecond(10));
  EXPECT_TRUE(wheel.NextSecondOpen());
  EXPECT_FALSE(wheel.OpenNextSecond(10));
  EXPECT_EQ(wheel.stats().coarse_slots_opened, 1);
  EXPECT_EQ(wheel.NextDueMs(), next_second + 5);
  EXPECT_EQ(wheel.size(), 4u);
  // One millisecond's entries keep their order.
  EXPECT_THAT(Tags(wheel.Advance(next_second + 999)), ElementsAre(6, 4, 7, 1));
  EXPECT_EQ(wheel.stats().coarse_slots_opened, 1);
}

TEST(TimingWheelTest, AdvanceFinishesAnOpenLeftHalfway) {
  TimingWheel wheel(kT0);
  const int64_t next_second = kT0 + 750;
  for (uint64_t tag = 1; tag <= 5; ++tag) wheel.Insert(next_second + 1, tag);
  wheel.Insert(next_second + kHour, 9);  // a later revolution: stays
  ASSERT_TRUE(wheel.OpenNextSecond(3));
  ASSERT_FALSE(wheel.NextSecondOpen());
  EXPECT_THAT(Tags(wheel.Advance(next_second + 1)), ElementsAre(1, 2, 3, 4, 5));
  EXPECT_EQ(wheel.size(), 1u);
  EXPECT_THAT(Tags(wheel.Advance(next_second + kHour)), ElementsAre(9));
}

TEST(TimingWheelTest, CancelingTheLastEntryNotLookedAtFinishesTheOpen) {
  TimingWheel wheel(kT0);
  const int64_t next_second = kT0 + 750;
  wheel.Insert(next_second + 1, 1);
  const TimerHandle last = wheel.Insert(next_second + 2, 2);
  ASSERT_TRUE(wheel.OpenNextSecond(1));
  ASSERT_FALSE(wheel.NextSecondOpen());
  EXPECT_TRUE(wheel.Cancel(last));
  EXPECT_TRUE(wheel.NextSecondOpen());
  EXPECT_EQ(wheel.NextDueMs(), next_second + 1);  // exact: it is open
  EXPECT_THAT(Tags(wheel.Advance(next_second + 1)), ElementsAre(1));
  EXPECT_TRUE(wheel.empty());
}

TEST(TimingWheelTest, CrowdsAreMillisecondsOfOpenSecondsThatGrewToTheSize) {
  TimingWheel wheel(kT0);
  wheel.SetCrowdSize(3);
  const int64_t next_second = kT0 + 750;  // kT0 is .250 into its second
  for (int i = 0; i < 3; ++i) wheel.Insert(next_second + 40, 1);
  for (int i = 0; i < 2; ++i) wheel.Insert(kT0 + 100, 2);
  EXPECT_EQ(wheel.NextCrowdMs(), std::nullopt);  // next second not open
  EXPECT_FALSE(wheel.TakeCrowdFormed());
  ASSERT_TRUE(wheel.OpenNextSecond());
  EXPECT_EQ(wheel.NextCrowdMs(), next_second + 40);  // grew as it opened
  EXPECT_TRUE(wheel.TakeCrowdFormed());
  EXPECT_FALSE(wheel.TakeCrowdFormed());
  const TimerHandle h = wheel.Insert(kT0 + 100, 2);  // the third
  EXPECT_TRUE(wheel.TakeCrowdFormed());
  EXPECT_EQ(wheel.NextCrowdMs(), kT0 + 100);
  EXPECT_TRUE(wheel.Cancel(h));  // still a crowd: a hint, not a count
  EXPECT_EQ(wheel.NextCrowdMs(), kT0 + 100);
  EXPECT_EQ(wheel.Advance(kT0 + 100).size(), 2u);  // fired: no longer one
  EXPECT_EQ(wheel.NextCrowdMs(), next_second + 40);
  EXPECT_EQ(wheel.Advance(next_second + 40).size(), 3u);
  EXPECT_EQ(wheel.NextCrowdMs(), std::nullopt);
  // Without a crowd size nothing is ever a crowd.
  TimingWheel plain(kT0);
  for (int i = 0; i < 100; ++i) plain.Insert(kT0 + 1, 1);
  EXPECT_EQ(plain.NextCrowdMs(), std::nullopt);
}

TEST(TimingWheelTest, TakeAheadTakesTheAcceptedEntriesOfAnOpenMillisecond) {
  TimingWheel wheel(kT0);
  wheel.SetCrowdSize(6);
  const int64_t next_second = kT0 + 750;
  const int64_t crowd = next_second + 40;
  std::vector<TimerHandle> handles;
  for (uint64_t tag = 1; tag <= 6; ++tag) {
    handles.push_back(wheel.Insert(crowd, tag));
  }
  wheel.Insert(crowd + 1, 100);
  wheel.Insert(kT0, 300);  // due now: in the overdue slot
  // Not open yet, or not after now: nothing to take.
  EXPECT_THAT(wheel.TakeAhead(crowd, [](uint64_t) { return true; }), IsEmpty());
  EXPECT_THAT(wheel.TakeAhead(kT0, [](uint64_t) { return true; }), IsEmpty());
  ASSERT_TRUE(wheel.OpenNextSecond());
  EXPECT_EQ(wheel.NextCrowdMs(), crowd);
  // Odd tags go; even tags stay, and fire at their time.
  const std::vector<TimerEntry> taken =
      wheel.TakeAhead(crowd, [](uint64_t tag) { return tag % 2 == 1; });
  EXPECT_THAT(Tags(taken), ElementsAre(1, 3, 5));
  for (const TimerEntry& e : taken) EXPECT_EQ(e.due_ms, crowd);
  EXPECT_EQ(wheel.size(), 5u);
  EXPECT_EQ(wheel.stats().taken_ahead, 3u);
  EXPECT_EQ(wheel.NextCrowdMs(), std::nullopt);  // taken: no longer one
  // Taken handles are stale; the kept ones still cancel (positions moved).
  EXPECT_FALSE(wheel.Cancel(handles[0]));
  EXPECT_FALSE(wheel.Reschedule(handles[2], crowd + 5));
  EXPECT_TRUE(wheel.Cancel(handles[3]));                 // tag 4
  EXPECT_TRUE(wheel.Reschedule(handles[5], crowd + 1));  // tag 6
  EXPECT_THAT(Tags(wheel.Advance(crowd - 1)), ElementsAre(300));
  EXPECT_THAT(Tags(wheel.Advance(crowd)), ElementsAre(2));
  std::vector<uint64_t> last = Tags(wheel.Advance(crowd + 1));
  std::sort(last.begin(), last.end());
  EXPECT_THAT(last, ElementsAre(6, 100));
  EXPECT_TRUE(wheel.empty());
}

TEST(TimingWheelTest, TakeAheadOfAllEntriesEmptiesTheSlot) {
  TimingWheel wheel(kT0);
  wheel.Insert(kT0 + 10, 1);
  wheel.Insert(kT0 + 10, 2);
  wheel.Insert(kT0 + 20, 3);
  EXPECT_THAT(Tags(wheel.TakeAhead(kT0 + 10, [](uint64_t) { return true; })),
              ElementsAre(1, 2));
  EXPECT_EQ(wheel.NextDueMs(), kT0 + 20);
  EXPECT_THAT(wheel.Advance(kT0 + 19), IsEmpty());
  EXPECT_THAT(Tags(wheel.Advance(kT0 + 20)), ElementsAre(3));
}

TEST(TimingWheelTest, NextWakeMsLeavesASecondToOpenAhead) {
  TimingWheel wheel(kT0);
  EXPECT_EQ(wheel.NextWakeMs(), std::nullopt);
  const int64_t due = kT0 + 10 * kSec + 100;
  const int64_t due_second = due - 350;
  wheel.Insert(due, 1);
  wheel.OpenNextSecond();
  EXPECT_EQ(wheel.NextDueMs(), due_second);
  EXPECT_EQ(wheel.NextWakeMs(), due_second - kSec);
  EXPECT_THAT(wheel.Advance(due_second - kSec), IsEmpty());
  EXPECT_TRUE(wheel.OpenNextSecond());
  EXPECT_EQ(wheel.NextWakeMs(), due);
  EXPECT_THAT(Tags(wheel.Advance(due)), ElementsAre(1));
  EXPECT_EQ(wheel.NextWakeMs(), std::nullopt);
}

TEST(TimingWheelTest, SweepFiresAnOpenedNextSecond) {
  TimingWheel wheel(kT0);
  wheel.Insert(kT0 + 900, 1);
  wheel.Insert(kT0 + 800, 2);
  wheel.OpenNextSecond();
  wheel.Insert(kT0 + 2 * kHour, 3);
  EXPECT_THAT(Tags(wheel.Advance(kT0 + 3 * kHour)), ElementsAre(2, 1, 3));
  EXPECT_EQ(wheel.stats().sweeps, 1);
  EXPECT_TRUE(wheel.empty());
}

TEST(TimingWheelTest, NextDueMs) {
  TimingWheel wheel(kT0);
  EXPECT_EQ(wheel.NextDueMs(), std::nullopt);
  wheel.Insert(kT0 + 7 * kSec + 300, 1);
  // A coarse entry: the start of its second (a lower bound).
  EXPECT_EQ(wheel.NextDueMs(), kT0 - 250 + 7 * kSec);
  wheel.Insert(kT0 + 100, 2);  // the current second: exact
  EXPECT_EQ(wheel.NextDueMs(), kT0 + 100);
  wheel.Insert(kT0 - 1, 3);  // overdue
  EXPECT_EQ(wheel.NextDueMs(), kT0 - 1);
}

}  // namespace
}  // namespace delayd::timer
