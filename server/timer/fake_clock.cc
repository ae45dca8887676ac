#include "server/timer/fake_clock.h"

#include "server/timer/tsan_mutex.h"

namespace delayd::timer {

class FakeClock::FakeWaiter final : public Clock::Waiter {
 public:
  explicit FakeWaiter(FakeClock* clock) : clock_(clock) {}

  void WaitUntil(int64_t deadline_ms) override {
    internal::MutexLock lock(&clock_->mu_);
    deadline_ms_ = deadline_ms;
    clock_->blocked_.insert(this);
    ++clock_->waits_;
    const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(clock_->mu_) {
      return woken_ || clock_->now_ms_ >= deadline_ms_;
    };
    internal::Await(&clock_->mu_, ready);
    clock_->blocked_.erase(this);
    woken_ = false;
  }

  void Wake() override {
    internal::MutexLock lock(&clock_->mu_);
    woken_ = true;
  }

  // Whether this waiter's thread sleeps until `deadline_ms` and nothing has
  // ended that sleep yet. The caller holds the clock's mutex (the analysis
  // cannot tell that clock_->mu_ is the caller's mu_).
  bool AsleepUntil(int64_t deadline_ms) const {
    clock_->mu_.AssertHeld();
    return deadline_ms_ == deadline_ms && !woken_ &&
           clock_->now_ms_ < deadline_ms_;
  }

 private:
  FakeClock* const clock_;
  int64_t deadline_ms_ ABSL_GUARDED_BY(clock_->mu_) = 0;
  bool woken_ ABSL_GUARDED_BY(clock_->mu_) = false;
};

FakeClock::FakeClock(int64_t now_ms) : now_ms_(now_ms) {}

int64_t FakeClock::NowMs() const {
  internal::MutexLock lock(&mu_);
  return now_ms_;
}

std::unique_ptr<Clock::Waiter> FakeClock::NewWaiter() {
  return std::make_unique<FakeWaiter>(this);
}

void FakeClock::SetMs(int64_t now_ms) {
  internal::MutexLock lock(
      &mu_);  // waiters' conditions are re-checked on unlock
  now_ms_ = now_ms;
}

void FakeClock::AdvanceMs(int64_t delta_ms) {
  internal::MutexLock lock(&mu_);
  now_ms_ += delta_ms;
}

bool FakeClock::AwaitWaiter(int64_t deadline_ms, absl::Duration timeout) {
  internal::MutexLock lock(&mu_);
  return internal::AwaitWithTimeout(
      &mu_,
      [this, deadline_ms]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        for (const FakeWaiter* w : blocked_) {
          if (w->AsleepUntil(deadline_ms)) return true;
        }
        return false;
      },
      timeout);
}

int64_t FakeClock::waits() const {
  internal::MutexLock lock(&mu_);
  return waits_;
}

}  // namespace delayd::timer
