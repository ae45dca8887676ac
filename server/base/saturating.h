// Saturating int64 arithmetic for times in milliseconds: a sum past the
// int64 range stays at its end instead of wrapping (a due time of "never"
// rather than one in 1970). Header-only, no state.
#ifndef DELAYD_SERVER_BASE_SATURATING_H_
#define DELAYD_SERVER_BASE_SATURATING_H_

#include <cstdint>
#include <limits>

namespace delayd::server {

// a + b, clamped to [INT64_MIN, INT64_MAX].
inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? std::numeric_limits<int64_t>::max()
               : std::numeric_limits<int64_t>::min();
}

}  // namespace delayd::server

#endif  // DELAYD_SERVER_BASE_SATURATING_H_
