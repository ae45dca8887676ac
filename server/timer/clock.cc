#include "server/timer/clock.h"

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/timer/tsan_mutex.h"

namespace delayd::timer {
namespace {

class SystemWaiter final : public Clock::Waiter {
 public:
  SystemWaiter(const SystemClock* clock, int64_t max_wait_ms)
      : clock_(clock), max_wait_ms_(max_wait_ms) {}

  void WaitUntil(int64_t deadline_ms) override {
    const int64_t now = clock_->NowMs();
    // deadline_ms - now only when it cannot wrap (a deadline long past,
    // INT64_MIN, is past: no wait).
    const int64_t until = deadline_ms > now && deadline_ms - now > max_wait_ms_
                              ? now + max_wait_ms_
                              : deadline_ms;
    internal::MutexLock lock(&mu_);
    internal::AwaitWithDeadline(
        &mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return woken_; },
        absl::FromUnixMillis(until));
    woken_ = false;
  }

  void Wake() override {
    internal::MutexLock lock(&mu_);
    woken_ = true;
  }

 private:
  const SystemClock* const clock_;
  const int64_t max_wait_ms_;
  absl::Mutex mu_;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

SystemClock::SystemClock(int64_t max_wait_ms) : max_wait_ms_(max_wait_ms) {}

SystemClock* SystemClock::Default() {
  static SystemClock* const clock = new SystemClock();
  return clock;
}

int64_t SystemClock::NowMs() const { return absl::ToUnixMillis(absl::Now()); }

int64_t SystemClock::NowUs() const { return absl::ToUnixMicros(absl::Now()); }

std::unique_ptr<Clock::Waiter> SystemClock::NewWaiter() {
  return std::make_unique<SystemWaiter>(this, max_wait_ms_);
}

}  // namespace delayd::timer
