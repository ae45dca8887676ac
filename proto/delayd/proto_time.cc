#include "delayd/proto_time.h"

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

absl::Time FromProto(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

}  // namespace delayd
