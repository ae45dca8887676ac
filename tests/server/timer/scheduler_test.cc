#include "server/timer/scheduler.h"

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/timer/clock.h"
#include "server/timer/fake_clock.h"
#include "server/timer/tsan_mutex.h"

namespace delayd::timer {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int64_t kT0 = 1795316400250;
constexpr int64_t kHour = 3600 * 1000;
// When a scheduler holding an entry due at kT0 + kHour sleeps until: the
// start of the second before that entry's second, to open its slot ahead.
constexpr int64_t kOpenAheadOfT0PlusHour = kT0 + kHour - 250 - 1000;
// Real time allowed for the timer thread to react; never slept, only waited.
constexpr absl::Duration kPatience = absl::Seconds(20);

// Records what the scheduler fires, and the clock reading when it did.
class Collector {
 public:
  explicit Collector(const Clock* clock) : clock_(clock) {}

  Scheduler::FireCallback Callback() {
    return [this](std::vector<TimerEntry> fired) {
      const int64_t now = clock_->NowMs();
      internal::MutexLock lock(&mu_);
      batch_sizes_.push_back(fired.size());
      for (const TimerEntry& e : fired) {
        entries_.push_back(e);
        fire_times_.push_back(now);
      }
    };
  }

  // Waits (real time, bounded) until at least `n` entries have fired.
  bool AwaitCount(size_t n) {
    internal::MutexLock lock(&mu_);
    return internal::AwaitWithTimeout(
        &mu_,
        [this, n]()
            ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return entries_.size() >= n; },
        kPatience);
  }

  std::vector<TimerEntry> entries() {
    internal::MutexLock lock(&mu_);
    return entries_;
  }
  std::vector<uint64_t> tags() {
    internal::MutexLock lock(&mu_);
    std::vector<uint64_t> tags;
    for (const TimerEntry& e : entries_) tags.push_back(e.tag);
    return tags;
  }
  std::vector<size_t> batch_sizes() {
    internal::MutexLock lock(&mu_);
    return batch_sizes_;
  }
  std::vector<int64_t> fire_times() {
    internal::MutexLock lock(&mu_);
    return fire_times_;
  }

 private:
  const Clock* const clock_;
  absl::Mutex mu_;
  std::vector<TimerEntry> entries_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> batch_sizes_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> fire_times_ ABSL_GUARDED_BY(mu_);
};

class SchedulerTest : public ::testing::Test {
 protected:
  SchedulerTest()
      : collector_(&clock_), scheduler_(&clock_, collector_.Callback()) {
    scheduler_.Start();
  }

  FakeClock clock_{kT0};
  Collector collector_;
  Scheduler scheduler_;
};

TEST_F(SchedulerTest, IdleThreadWaitsWithoutDeadline) {
  EXPECT_TRUE(clock_.AwaitWaiter(Clock::kNoDeadline, kPatience));
  const int64_t waits = clock_.waits();
  for (int i = 0; i < 100; ++i) clock_.AdvanceMs(1000);
  EXPECT_TRUE(clock_.AwaitWaiter(Clock::kNoDeadline, kPatience));
  EXPECT_EQ(clock_.waits(), waits);  // no tick while idle
}

TEST_F(SchedulerTest, FiresAtTheRightTimeNotBefore) {
  scheduler_.Add(kT0 + 100, 1);
  ASSERT_TRUE(clock_.AwaitWaiter(kT0 + 100, kPatience));
  const int64_t waits = clock_.waits();
  for (int i = 0; i < 99; ++i) clock_.AdvanceMs(1);
  // Still asleep until kT0 + 100: no wakeup for the 99 earlier milliseconds.
  EXPECT_TRUE(clock_.AwaitWaiter(kT0 + 100, kPatience));
  EXPECT_EQ(clock_.waits(), waits);
  EXPECT_THAT(collector_.entries(), IsEmpty());
  clock_.AdvanceMs(1);
  ASSERT_TRUE(collector_.AwaitCount(1));
  EXPECT_THAT(collector_.entries(), ElementsAre(TimerEntry{kT0 + 100, 1}));
  EXPECT_THAT(collector_.fire_times(), ElementsAre(kT0 + 100));
  EXPECT_TRUE(clock_.AwaitWaiter(Clock::kNoDeadline, kPatience));
}

TEST_F(SchedulerTest, DueNowOrInThePastFiresAtOnceOldestFirst) {
  ASSERT_TRUE(clock_.AwaitWaiter(Clock::kNoDeadline, kPatience));
  const std::vector<TimerEntry> batch = {
      {kT0, 1}, {kT0 - 2 * kHour, 2}, {kT0 - 5, 3}};
  scheduler_.AddBatch(batch);
  ASSERT_TRUE(collector_.AwaitCount(3));
  EXPECT_THAT(collector_.tags(), ElementsAre(2, 3, 1));
}

TEST_F(SchedulerTest, WakesWhenAnEarlierEntryArrives) {
  scheduler_.Add(kT0 + kHour, 1);
  // Asleep until a second before its second starts, to open its slot ahead.
  ASSERT_TRUE(clock_.AwaitWaiter(kOpenAheadOfT0PlusHour, kPatience));
  scheduler_.Add(kT0 + 10, 2);
  ASSERT_TRUE(clock_.AwaitWaiter(kT0 + 10, kPatience));
  const TimerHandle h = scheduler_.Add(kT0 + 2 * kHour, 3);
  ASSERT_TRUE(scheduler_.Reschedule(h, kT0 + 5));  // earlier: wakes it too
  ASSERT_TRUE(clock_.AwaitWaiter(kT0 + 5, kPatience));
  clock_.AdvanceMs(10);
  ASSERT_TRUE(collector_.AwaitCount(2));
  EXPECT_THAT(collector_.tags(), ElementsAre(3, 2));
  EXPECT_TRUE(clock_.AwaitWaiter(kOpenAheadOfT0PlusHour, kPatience));
}

TEST_F(SchedulerTest, HandsEntriesOverInBatchesInDueOrder) {
  ASSERT_TRUE(clock_.AwaitWaiter(Clock::kNoDeadline, kPatience));
  std::vector<TimerEntry> batch;
  for (uint64_t i = 0; i < 10000; ++i) batch.push_back({kT0 + 500, i});
  batch.push_back({kT0 + 499, 99999});
  scheduler_.AddBatch(batch);
  ASSERT_TRUE(clock_.AwaitWaiter(kT0 + 499, kPatience));
  clock_.AdvanceMs(1000);  // both milliseconds at once: one batch
  ASSERT_TRUE(collector_.AwaitCount(batch.size()));
  EXPECT_THAT(collector_.batch_sizes(), ElementsAre(batch.size()));
  const std::vector<uint64_t> tags = collector_.tags();
  EXPECT_EQ(tags[0], 99999);
  for (uint64_t i = 0; i < 10000; ++i) EXPECT_EQ(tags[i + 1], i);
  EXPECT_EQ(scheduler_.stats().fired, 10001);
}

TEST_F(SchedulerTest, OpensACrowdedSecondAheadOfTime) {
  const int64_t second = kT0 - 250 + 5000;  // a second boundary, 5 s ahead
  std::vector<TimerEntry> batch;
  for (uint64_t i = 0; i < 100000; ++i) {
    batch.push_back({second + 7 + static_cast<int64_t>(i % 993), i});
  }
  scheduler_.AddBatch(batch);
  // Asleep until a second before, then it opens the slot and sleeps until
  // the exact first due millisecond — with nothing left to do at `second`.
  ASSERT_TRUE(clock_.AwaitWaiter(second - 1000, kPatience));
  clock_.SetMs(second - 1000);
  ASSERT_TRUE(clock_.AwaitWaiter(second + 7, kPatience));
  EXPECT_THAT(collector_.entries(), IsEmpty());
  clock_.SetMs(second + 1000);
  ASSERT_TRUE(collector_.AwaitCount(batch.size()));
}

TEST_F(SchedulerTest, ClockSteppingBackNeverFiresEarly) {
  const int64_t base = kT0 - 250;  // a second boundary: deadlines are exact
  clock_.SetMs(base + 5000);
  scheduler_.Add(base + 6000, 1);  // the wheel follows the clock to +5 s
  ASSERT_TRUE(clock_.AwaitWaiter(base + 6000, kPatience));
  clock_.SetMs(base);  // the wall clock steps back 5 s
  // Due before the wheel's time but after the clock's: must wait for it.
  scheduler_.Add(base + 2000, 2);
  ASSERT_TRUE(clock_.AwaitWaiter(base + 2000, kPatience));
  clock_.SetMs(base + 1999);
  ASSERT_TRUE(clock_.AwaitWaiter(base + 2000, kPatience));
  EXPECT_THAT(collector_.entries(), IsEmpty());
  clock_.SetMs(base + 2000);
  ASSERT_TRUE(collector_.AwaitCount(1));
  ASSERT_TRUE(clock_.AwaitWaiter(base + 6000, kPatience));
  EXPECT_THAT(collector_.entries(), ElementsAre(TimerEntry{base + 2000, 2}));
  clock_.SetMs(base + 6000);
  ASSERT_TRUE(collector_.AwaitCount(2));
  EXPECT_THAT(collector_.tags(), ElementsAre(2, 1));
  EXPECT_THAT(collector_.fire_times(), ElementsAre(base + 2000, base + 6000));
}

TEST_F(SchedulerTest, ClockSteppingForwardFiresWhatBecameDue) {
  scheduler_.Add(kT0 + 2 * kHour, 2);
  scheduler_.Add(kT0 + kHour, 1);
  scheduler_.Add(kT0 + 30 * kHour, 3);
  ASSERT_TRUE(clock_.AwaitWaiter(kOpenAheadOfT0PlusHour, kPatience));
  clock_.SetMs(kT0 + 3 * kHour);
  ASSERT_TRUE(collector_.AwaitCount(2));
  EXPECT_THAT(collector_.tags(), ElementsAre(1, 2));
  EXPECT_EQ(scheduler_.size(), 1);
}

TEST_F(SchedulerTest, CallbackMayAddTimers) {
  Collector inner(&clock_);
  Scheduler* scheduler = nullptr;
  Scheduler rearming(&clock_, [&](std::vector<TimerEntry> fired) {
    for (const TimerEntry& e : fired) {
      if (e.tag < 5) scheduler->Add(e.due_ms + 10, e.tag + 1);
    }
    inner.Callback()(std::move(fired));
  });
  scheduler = &rearming;
  rearming.Start();
  rearming.Add(kT0 + 10, 1);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(clock_.AwaitWaiter(kT0 + 10 * (i + 1), kPatience));
    clock_.AdvanceMs(10);
    ASSERT_TRUE(inner.AwaitCount(static_cast<size_t>(i) + 1));
  }
  EXPECT_THAT(inner.tags(), ElementsAre(1, 2, 3, 4, 5));
}

// Cancels race with firing: every entry must end up either canceled (Cancel
// returned true) or fired — exactly one of the two, exactly once. Time moves
// in 7 ms steps; after each, two threads each try 8 random cancels while the
// timer thread fires the step's entries.
TEST_F(SchedulerTest, CancelRacesWithFiringHaveDefiniteAnswers) {
  constexpr int kEntries = 20000;
  constexpr int kSteps = 2000 / 7 + 1;
  std::vector<TimerHandle> handles(kEntries);
  for (int i = 0; i < kEntries; ++i) {
    handles[i] = scheduler_.Add(kT0 + 1 + i % 2000, static_cast<uint64_t>(i));
  }
  std::vector<std::atomic<bool>> canceled(kEntries);
  for (auto& c : canceled) c = false;
  std::atomic<int> step{0};
  std::atomic<int> done{0};
  auto canceler = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (int s = 1; s <= kSteps; ++s) {
      while (step.load() < s) std::this_thread::yield();
      for (int k = 0; k < 8; ++k) {
        const auto i = static_cast<int>(rng() % kEntries);
        if (scheduler_.Cancel(handles[i])) {
          ASSERT_FALSE(canceled[i].exchange(true)) << "canceled twice: " << i;
        }
      }
      ++done;
    }
  };
  std::thread a(canceler, 1), b(canceler, 2);
  for (int s = 1; s <= kSteps; ++s) {
    clock_.AdvanceMs(7);
    step = s;
    while (done.load() < 2 * s) std::this_thread::yield();  // never sleeps
  }
  a.join();
  b.join();
  clock_.AdvanceMs(kHour);
  int n_canceled = 0;
  for (const auto& c : canceled) n_canceled += c.load() ? 1 : 0;
  ASSERT_TRUE(
      collector_.AwaitCount(static_cast<size_t>(kEntries - n_canceled)));
  std::vector<int> fired_count(kEntries, 0);
  const std::vector<TimerEntry> fired = collector_.entries();
  const std::vector<int64_t> at = collector_.fire_times();
  for (size_t i = 0; i < fired.size(); ++i) {
    ++fired_count[fired[i].tag];
    EXPECT_GE(at[i], fired[i].due_ms);
  }
  for (int i = 0; i < kEntries; ++i) {
    EXPECT_EQ(fired_count[i] + (canceled[i].load() ? 1 : 0), 1) << i;
  }
  EXPECT_EQ(scheduler_.size(), 0);
  EXPECT_GT(n_canceled, 0);
  EXPECT_LT(n_canceled, kEntries);
}

// A scheduler on a FakeClock at a second boundary (so deadlines are exact),
// started with crowds taken ahead as each test sets.
class SchedulerAheadTest : public ::testing::Test {
 protected:
  static constexpr int64_t kBase = kT0 - 250;

  void Start(Scheduler::Ahead ahead) {
    scheduler_.SetAhead(std::move(ahead));
    scheduler_.Start();
  }

  FakeClock clock_{kBase};
  Collector collector_{&clock_};
  Scheduler scheduler_{&clock_, collector_.Callback()};
};

// A crowd of at least min_entries timers at one millisecond is handed over
// lead_ms before it, only the tags the predicate accepts (even ones here),
// as one batch; the rest fire at their time. A smaller millisecond is not.
TEST_F(SchedulerAheadTest, HandsACrowdOverAheadOnlyTheAcceptedTags) {
  Start({100, 5, [](uint64_t tag) { return tag % 2 == 0; }});
  const int64_t crowd = kBase + 500;
  std::vector<TimerEntry> batch;
  for (uint64_t tag = 0; tag < 7; ++tag) batch.push_back({crowd, tag});
  for (uint64_t tag = 10; tag < 14; ++tag) {
    batch.push_back({crowd + 300, tag * 4});  // four: not a crowd
  }
  const std::vector<TimerHandle> handles = scheduler_.AddBatch(batch);
  ASSERT_TRUE(clock_.AwaitWaiter(crowd - 100, kPatience));
  clock_.SetMs(crowd - 101);
  ASSERT_TRUE(clock_.AwaitWaiter(crowd - 100, kPatience));
  EXPECT_THAT(collector_.entries(), IsEmpty());
  clock_.SetMs(crowd - 100);
  ASSERT_TRUE(collector_.AwaitCount(4));
  EXPECT_THAT(collector_.tags(), ElementsAre(0, 2, 4, 6));
  for (const TimerEntry& e : collector_.entries()) EXPECT_EQ(e.due_ms, crowd);
  EXPECT_THAT(collector_.fire_times(), ::testing::Each(crowd - 100));
  EXPECT_EQ(scheduler_.stats().ahead, 4);
  // Taken: no longer cancelable. Refused (odd): still pending.
  EXPECT_FALSE(scheduler_.Cancel(handles[2]));
  EXPECT_TRUE(scheduler_.Cancel(handles[1]));
  // Entries added afterwards, fewer than a crowd, fire at their time.
  scheduler_.Add(crowd, 20);
  scheduler_.Add(crowd, 22);
  ASSERT_TRUE(clock_.AwaitWaiter(crowd, kPatience));
  EXPECT_EQ(collector_.entries().size(), 4u);
  clock_.SetMs(crowd);
  ASSERT_TRUE(collector_.AwaitCount(4 + 4));
  ASSERT_TRUE(clock_.AwaitWaiter(crowd + 300, kPatience));
  const std::vector<uint64_t> tags = collector_.tags();
  EXPECT_THAT(std::vector<uint64_t>(tags.begin() + 4, tags.end()),
              ::testing::UnorderedElementsAre(3, 5, 20, 22));
  EXPECT_THAT(collector_.batch_sizes(), ElementsAre(4, 4));
  clock_.SetMs(crowd + 299);
  ASSERT_TRUE(clock_.AwaitWaiter(crowd + 300, kPatience));
  clock_.SetMs(crowd + 300);
  ASSERT_TRUE(collector_.AwaitCount(4 + 4 + 4));
  EXPECT_EQ(scheduler_.stats().ahead, 4);
  EXPECT_EQ(scheduler_.size(), 0);
}

// A crowd that forms one Add at a time, at the millisecond the thread
// already sleeps until, wakes it to sleep until the lead instead.
TEST_F(SchedulerAheadTest, ACrowdFormingWakesTheThreadForItsLead) {
  Start({100, 5, [](uint64_t) { return true; }});
  const int64_t crowd = kBase + 700;
  scheduler_.Add(crowd, 1);
  ASSERT_TRUE(clock_.AwaitWaiter(crowd, kPatience));
  for (uint64_t tag = 2; tag <= 5; ++tag) scheduler_.Add(crowd, tag);
  ASSERT_TRUE(clock_.AwaitWaiter(crowd - 100, kPatience));
  clock_.SetMs(crowd - 100);
  ASSERT_TRUE(collector_.AwaitCount(5));
  EXPECT_EQ(scheduler_.stats().ahead, 5);
}

// An earlier timer still fires at its own time while a crowd's lead runs,
// and a crowd in the next second is seen once that second is opened ahead.
TEST_F(SchedulerAheadTest, ACrowdInTheNextSecondAndEarlierTimers) {
  Start({200, 3, [](uint64_t) { return true; }});
  const int64_t crowd = kBase + 1050;  // 50 ms into the next second
  for (uint64_t tag = 1; tag <= 3; ++tag) scheduler_.Add(crowd, tag);
  scheduler_.Add(kBase + 900, 9);
  ASSERT_TRUE(clock_.AwaitWaiter(kBase + 850, kPatience));
  clock_.SetMs(kBase + 850);
  ASSERT_TRUE(collector_.AwaitCount(3));
  EXPECT_THAT(collector_.tags(), ElementsAre(1, 2, 3));
  ASSERT_TRUE(clock_.AwaitWaiter(kBase + 900, kPatience));
  clock_.SetMs(kBase + 900);
  ASSERT_TRUE(collector_.AwaitCount(4));
  EXPECT_THAT(collector_.fire_times(),
              ElementsAre(kBase + 850, kBase + 850, kBase + 850, kBase + 900));
  EXPECT_TRUE(clock_.AwaitWaiter(Clock::kNoDeadline, kPatience));
}

TEST(SchedulerStopTest, StopJoinsAndNothingFiresAfterwards) {
  FakeClock clock(kT0);
  Collector collector(&clock);
  Scheduler scheduler(&clock, collector.Callback());
  scheduler.Stop();  // before Start: fine
  Scheduler running(&clock, collector.Callback());
  running.Start();
  running.Add(kT0 + 50, 1);
  ASSERT_TRUE(clock.AwaitWaiter(kT0 + 50, kPatience));
  running.Stop();
  running.Stop();  // idempotent
  running.Add(kT0, 2);
  clock.AdvanceMs(kHour);
  EXPECT_THAT(collector.entries(), IsEmpty());
  EXPECT_EQ(running.size(), 2);
}

TEST(SchedulerStopTest, DestructorStopsAnIdleThread) {
  FakeClock clock(kT0);
  Collector collector(&clock);
  auto scheduler = std::make_unique<Scheduler>(&clock, collector.Callback());
  scheduler->Start();
  ASSERT_TRUE(clock.AwaitWaiter(Clock::kNoDeadline, kPatience));
  scheduler.reset();
  EXPECT_THAT(collector.entries(), IsEmpty());
}

// SleepsPastForTesting(ms) turns true only once the thread has fired what
// is due by ms and returned from the callback; a clock stepped back leaves
// it true.
TEST(SchedulerSleepsPastTest, TrueOnceEverythingDueHasBeenHandedOver) {
  FakeClock clock(kT0);
  std::atomic<int> calls{0};
  absl::Notification release;
  Scheduler scheduler(&clock, [&](std::vector<TimerEntry>) {
    ++calls;
    release.WaitForNotification();
  });
  scheduler.Start();
  ASSERT_TRUE(clock.AwaitWaiter(Clock::kNoDeadline, kPatience));
  EXPECT_TRUE(scheduler.SleepsPastForTesting(kT0 + kHour));
  scheduler.Add(kT0 + 100, 1);
  EXPECT_FALSE(scheduler.SleepsPastForTesting(kT0 + 100));
  ASSERT_TRUE(clock.AwaitWaiter(kT0 + 100, kPatience));
  EXPECT_TRUE(scheduler.SleepsPastForTesting(kT0 + 99));
  EXPECT_FALSE(scheduler.SleepsPastForTesting(kT0 + 100));
  clock.SetMs(kT0 + 100);
  // Until the thread has run, and while the callback runs.
  EXPECT_FALSE(scheduler.SleepsPastForTesting(kT0 + 100));
  const absl::Time deadline = absl::Now() + kPatience;
  while (calls == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(calls, 1);  // not ASSERT: the callback must be released
  EXPECT_FALSE(scheduler.SleepsPastForTesting(kT0 + 100));
  release.Notify();
  ASSERT_TRUE(clock.AwaitWaiter(Clock::kNoDeadline, kPatience));
  EXPECT_TRUE(scheduler.SleepsPastForTesting(kT0 + 100));
  clock.SetMs(kT0);  // back: nothing more is due
  EXPECT_TRUE(scheduler.SleepsPastForTesting(kT0));
  scheduler.Stop();
}

// The one test on the real wall clock: the SystemClock waiter wakes on time.
TEST(SchedulerSystemClockTest, FiresOnTheWallClockNotEarly) {
  SystemClock clock;
  Collector collector(&clock);
  Scheduler scheduler(&clock, collector.Callback());
  scheduler.Start();
  const int64_t due = clock.NowMs() + 30;
  scheduler.Add(due + kHour, 2);
  scheduler.Add(due, 1);
  ASSERT_TRUE(collector.AwaitCount(1));
  EXPECT_THAT(collector.tags(), ElementsAre(1));
  EXPECT_GE(collector.fire_times()[0], due);
  EXPECT_LT(collector.fire_times()[0], due + 5000);
}

// A deadline long past returns at once: WaitUntil must not compute
// deadline - now where it wraps (INT64_MIN - now became a wait of
// max_wait_ms).
TEST(SystemClockTest, ADeadlineLongPastDoesNotWait) {
  SystemClock clock(/*max_wait_ms=*/600'000);
  const std::unique_ptr<Clock::Waiter> waiter = clock.NewWaiter();
  const int64_t start = clock.NowMs();
  waiter->WaitUntil(std::numeric_limits<int64_t>::min());
  waiter->WaitUntil(start - 1);
  EXPECT_LT(clock.NowMs() - start, 60'000);
}

}  // namespace
}  // namespace delayd::timer
