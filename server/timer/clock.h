// Clock: where the timer gets the time and how its thread waits for it.
// Time is injected (STYLE.md habit 6): production uses SystemClock, the wall
// clock in unix milliseconds, because delayd promises "never early by the
// server's wall clock"; tests use FakeClock (fake_clock.h), whose waiters wake
// when the test moves time, so no test sleeps for a timer. Implementations
// are thread-safe.

#ifndef DELAYD_SERVER_TIMER_CLOCK_H_
#define DELAYD_SERVER_TIMER_CLOCK_H_

#include <cstdint>
#include <limits>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace delayd::timer {

class Clock {
 public:
  // A WaitUntil deadline meaning "until woken".
  static constexpr int64_t kNoDeadline = std::numeric_limits<int64_t>::max();

  // One thread's way to sleep until a time on this clock. Wake() may be
  // called from any thread; WaitUntil() by one thread at a time.
  class Waiter {
   public:
    virtual ~Waiter() = default;

    // Blocks until the clock reads >= `deadline_ms`, or Wake() has been
    // called since the previous WaitUntil returned (a wake is never lost: it
    // ends the next wait if none is in progress). May return early, e.g.
    // when a SystemClock waiter re-reads a wall clock that may have stepped;
    // callers re-check the time.
    virtual void WaitUntil(int64_t deadline_ms) = 0;

    virtual void Wake() = 0;
  };

  virtual ~Clock() = default;

  // Unix time in milliseconds.
  virtual int64_t NowMs() const = 0;

  // Unix time in microseconds, for measurements finer than the timer's
  // millisecond (e.g. fire lateness). Default: NowMs() * 1000.
  virtual int64_t NowUs() const { return NowMs() * 1000; }

  virtual std::unique_ptr<Waiter> NewWaiter() = 0;
};

// The wall clock (CLOCK_REALTIME via absl::Now). Its waiters sleep at most
// `max_wait_ms` (default 1000 ms) at a time and then re-read the clock, so
// that a wall-clock step — forward or back — is noticed within that bound.
class SystemClock final : public Clock {
 public:
  explicit SystemClock(int64_t max_wait_ms = 1000);

  // A process-wide instance with the default bound.
  static SystemClock* Default();

  int64_t NowMs() const override;
  int64_t NowUs() const override;
  std::unique_ptr<Waiter> NewWaiter() override;

 private:
  const int64_t max_wait_ms_;
};

}  // namespace delayd::timer

#endif  // DELAYD_SERVER_TIMER_CLOCK_H_
