// FakeClock: a Clock whose time moves only when a test says so. Thread-safe.
// Its waiters block on the clock's own mutex, so SetMs/AdvanceMs wake every
// thread whose deadline has come — a scheduler test advances time and the
// timer thread runs at once, without any real sleep. Time may be set
// backwards, to test wall-clock steps. Must outlive the waiters it made.

#ifndef DELAYD_SERVER_TIMER_FAKE_CLOCK_H_
#define DELAYD_SERVER_TIMER_FAKE_CLOCK_H_

#include <cstdint>
#include <memory>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/timer/clock.h"

namespace delayd::timer {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t now_ms);
  FakeClock(const FakeClock&) = delete;
  FakeClock& operator=(const FakeClock&) = delete;

  int64_t NowMs() const override;
  std::unique_ptr<Waiter> NewWaiter() override;

  // Sets the time (forwards or backwards) and wakes the waiters now due.
  void SetMs(int64_t now_ms);
  void AdvanceMs(int64_t delta_ms);

  // Blocks, for up to `timeout` of real time, until some thread is blocked in
  // WaitUntil(deadline_ms) (Clock::kNoDeadline for "until woken"). Lets a
  // test know that a timer thread has gone to sleep and until when. A waiter
  // already woken, or whose deadline has come, is not blocked any more, even
  // if its thread has yet to run. Returns false on timeout.
  bool AwaitWaiter(int64_t deadline_ms, absl::Duration timeout);

  // Number of WaitUntil calls begun so far (to check for busy loops).
  int64_t waits() const;

 private:
  class FakeWaiter;

  mutable absl::Mutex mu_;
  int64_t now_ms_ ABSL_GUARDED_BY(mu_);
  // The waiters whose threads are in WaitUntil (woken or not).
  std::set<const FakeWaiter*> blocked_ ABSL_GUARDED_BY(mu_);
  int64_t waits_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace delayd::timer

#endif  // DELAYD_SERVER_TIMER_FAKE_CLOCK_H_
