// Knobs of the crash tests, from the environment, so that a failure
// reproduces and slow builds (sanitizers) can run fewer rounds:
//   DELAYD_CRASH_SEED    the random seed (default: fresh each run, printed)
//   DELAYD_CRASH_ROUNDS  kills of the main crash test (default 20)
#ifndef DELAYD_TESTS_CRASH_CRASH_ENV_H_
#define DELAYD_TESTS_CRASH_CRASH_ENV_H_

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>

#include "absl/strings/numbers.h"

namespace delayd::crash {

// The same value for the whole run; printed once.
inline uint64_t CrashSeed() {
  static const uint64_t seed = [] {
    uint64_t s = 0;
    const char* env = std::getenv("DELAYD_CRASH_SEED");
    if (env == nullptr || !absl::SimpleAtoi(env, &s)) {
      s = (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
    }
    std::cout << "[ crash    ] DELAYD_CRASH_SEED=" << s << "\n";
    return s;
  }();
  return seed;
}

inline int CrashRounds(int default_rounds) {
  int rounds = 0;
  const char* env = std::getenv("DELAYD_CRASH_ROUNDS");
  if (env != nullptr && absl::SimpleAtoi(env, &rounds) && rounds > 0) {
    return rounds;
  }
  return default_rounds;
}

}  // namespace delayd::crash

#endif  // DELAYD_TESTS_CRASH_CRASH_ENV_H_
