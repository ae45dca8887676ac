// IdGenerator: makes job ids for Schedule requests that leave the id empty.
// Ids are unique and ordered by creation time: 12 hex digits of the unix
// millisecond, '-', 16 hex digits of a counter that starts at a random value
// and increments (so ids made in one millisecond sort in creation order, and
// a restart does not repeat earlier ids). Thread-safe.
#ifndef DELAYD_SERVER_JOBS_ID_GENERATOR_H_
#define DELAYD_SERVER_JOBS_ID_GENERATOR_H_

#include <atomic>
#include <cstdint>
#include <random>
#include <string>

#include "absl/strings/str_format.h"

namespace delayd::server {

class IdGenerator {
 public:
  IdGenerator() : counter_(std::random_device{}() * 0x9E3779B97F4A7C15ull) {}

  std::string Next(int64_t now_ms) {
    const uint64_t n = counter_.fetch_add(1, std::memory_order_relaxed);
    return absl::StrFormat("%012x-%016x", now_ms, n);
  }

 private:
  std::atomic<uint64_t> counter_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_JOBS_ID_GENERATOR_H_
