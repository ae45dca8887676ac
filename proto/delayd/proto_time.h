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

// Whole seconds and the nanoseconds below them (the same sign as seconds, as
// Duration requires).
google::protobuf::Duration ToProto(absl::Duration d);
// Seconds since the epoch (floored) and nanoseconds 0..999'999'999.
google::protobuf::Timestamp ToProto(absl::Time t);
absl::Duration FromProto(const google::protobuf::Duration& d);
absl::Time FromProto(const google::protobuf::Timestamp& t);

// The duration in whole milliseconds, truncated.
// REQUIRES: |seconds| small enough that seconds * 1000 does not overflow.
inline int64_t DurationMs(const google::protobuf::Duration& d) {
  return d.seconds() * 1000 + d.nanos() / 1'000'000;
}

}  // namespace delayd

#endif  // DELAYD_PROTO_TIME_H_
