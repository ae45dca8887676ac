// Shared by the TimingWheel tests: time constants and small helpers.

#ifndef DELAYD_TESTS_SERVER_TIMER_WHEEL_TEST_UTIL_H_
#define DELAYD_TESTS_SERVER_TIMER_WHEEL_TEST_UTIL_H_

#include <cstdint>
#include <vector>

#include "server/timer/timing_wheel.h"

namespace delayd::timer::wheel_test {

constexpr int64_t kSec = 1000;
constexpr int64_t kMin = 60 * kSec;
constexpr int64_t kHour = 60 * kMin;
constexpr int64_t kDay = 24 * kHour;
constexpr int64_t kYear = 365 * kDay;
// 2026-11-22 03:00:00.250 UTC: 250 ms past an hour boundary.
constexpr int64_t kT0 = 1795316400250;

inline std::vector<uint64_t> Tags(const std::vector<TimerEntry>& fired) {
  std::vector<uint64_t> tags;
  for (const TimerEntry& e : fired) tags.push_back(e.tag);
  return tags;
}

}  // namespace delayd::timer::wheel_test

#endif  // DELAYD_TESTS_SERVER_TIMER_WHEEL_TEST_UTIL_H_
