// PollUntil: waits in real time for a condition that another thread or
// process brings about, checking it every `interval` until it holds or a
// deadline passes. For what a fake clock cannot advance: worker threads, a
// real server. Header-only and free of gRPC, so that unit tests under
// tests/server may use it without linking more. Thread-compatible.
#ifndef DELAYD_TESTS_SUPPORT_POLL_H_
#define DELAYD_TESTS_SUPPORT_POLL_H_

#include "absl/functional/function_ref.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace delayd::testing {

// True as soon as `done` returns true; false when it has not by `timeout`
// from now. `done` is checked once more after the deadline, so a condition
// that held by then is seen however slow the checks were.
inline bool PollUntil(absl::FunctionRef<bool()> done, absl::Duration timeout,
                      absl::Duration interval = absl::Milliseconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(interval);
  }
  return done();
}

}  // namespace delayd::testing

#endif  // DELAYD_TESTS_SUPPORT_POLL_H_
