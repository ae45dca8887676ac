// Conversions between the API's time fields (google.protobuf.Duration and
// Timestamp) and Abseil's time types, for the server, the client library,
// delayctl and the tests alike. Pure functions; thread-safe.
//
// The server keeps milliseconds: DurationMs truncates a Duration to them.
#ifndef DELAYD_PROTO_TIME_H_
#define DELAYD_PROTO_TIME_H_

#include <cstdint>

#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"

namespace delayd {

// The last millisecond a google.protobuf.Timestamp can hold:
// 9999-12-31T23:59:59.999Z.
inline constexpr int64_t kMaxTimestampUnixMs = 253'402'300'799'999;

// Whole seconds and the nanoseconds below them (the same sign as seconds, as
// Duration requires).
google::protobuf::Duration ToProto(absl::Duration d);
// Seconds since the epoch (floored) and nanoseconds 0..999'999'999.
google::protobuf::Timestamp ToProto(absl::Time t);
absl::Duration FromProto(const google::protobuf::Duration& d);
absl::Time FromProto(const google::protobuf::Timestamp& t);

// The duration in whole milliseconds, truncated.
// REQUIRES: |seconds| small enough that seconds * 1000 does not overflow:
// the caller range-checked `d` first (a validated api field, e.g. at most
// protobuf's 10,000 years), or it uses DurationMsSaturated.
inline int64_t DurationMs(const google::protobuf::Duration& d) {
  return d.seconds() * 1000 + d.nanos() / 1'000'000;
}

// DurationMs for any `d`, also one outside protobuf's range: saturated at
// the int64 range instead of overflowing.
int64_t DurationMsSaturated(const google::protobuf::Duration& d);

}  // namespace delayd

#endif  // DELAYD_PROTO_TIME_H_
