#include "delayd/proto_time.h"

#include <limits>

namespace delayd {

google::protobuf::Duration ToProto(absl::Duration d) {
  google::protobuf::Duration out;
  const int64_t s = absl::IDivDuration(d, absl::Seconds(1), &d);
  out.set_seconds(s);
  out.set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(d)));
  return out;
}

google::protobuf::Timestamp ToProto(absl::Time t) {
  google::protobuf::Timestamp out;
  const int64_t s = absl::ToUnixSeconds(t);  // floored
  out.set_seconds(s);
  out.set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(t - absl::FromUnixSeconds(s))));
  return out;
}

absl::Duration FromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

int64_t DurationMsSaturated(const google::protobuf::Duration& d) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  int64_t ms = 0;
  if (__builtin_mul_overflow(d.seconds(), int64_t{1000}, &ms) ||
      __builtin_add_overflow(ms, int64_t{d.nanos() / 1'000'000}, &ms)) {
    // Only towards the sign of seconds: nanos / 10^6 alone cannot.
    return d.seconds() < 0 ? kMin : kMax;
  }
  return ms;
}

absl::Time FromProto(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

}  // namespace delayd
