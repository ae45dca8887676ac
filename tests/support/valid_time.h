// InvalidTimeFields: every google.protobuf.Timestamp and Duration anywhere in
// a message (nested, repeated, map values) that is outside the range the
// protobuf documentation allows, by field path. Tests assert that no API reply
// ever carries one:
//
//   EXPECT_THAT(InvalidTimeFields(reply), ::testing::IsEmpty());
//
// Timestamp: seconds in [0001-01-01, 9999-12-31T23:59:59], nanos 0..999999999.
// Duration: |seconds| <= 315576000000 (10,000 years), |nanos| <= 999999999,
// and nanos of the same sign as seconds. Header-only and gRPC-free.
// Thread-compatible.
#ifndef DELAYD_TESTS_SUPPORT_VALID_TIME_H_
#define DELAYD_TESTS_SUPPORT_VALID_TIME_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/message.h"
#include "google/protobuf/timestamp.pb.h"
#include "google/protobuf/util/time_util.h"

namespace delayd::testing {

namespace valid_time_internal {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::util::TimeUtil;

inline bool ValidTimestamp(int64_t seconds, int64_t nanos) {
  return seconds >= TimeUtil::kTimestampMinSeconds &&
         seconds <= TimeUtil::kTimestampMaxSeconds && nanos >= 0 &&
         nanos <= 999'999'999;
}

inline bool ValidDuration(int64_t seconds, int64_t nanos) {
  return seconds >= TimeUtil::kDurationMinSeconds &&
         seconds <= TimeUtil::kDurationMaxSeconds && nanos >= -999'999'999 &&
         nanos <= 999'999'999 && !(seconds > 0 && nanos < 0) &&
         !(seconds < 0 && nanos > 0);
}

inline void Collect(const Message& m, const std::string& path,
                    std::vector<std::string>& out) {
  const std::string& type = m.GetDescriptor()->full_name();
  if (type == "google.protobuf.Timestamp" ||
      type == "google.protobuf.Duration") {
    const auto* d = m.GetDescriptor();
    const auto* r = m.GetReflection();
    const int64_t seconds = r->GetInt64(m, d->FindFieldByName("seconds"));
    const int64_t nanos = r->GetInt32(m, d->FindFieldByName("nanos"));
    const bool ok = type == "google.protobuf.Timestamp"
                        ? ValidTimestamp(seconds, nanos)
                        : ValidDuration(seconds, nanos);
    if (!ok) {
      out.push_back(absl::StrCat(path, " = {seconds: ", seconds,
                                 ", nanos: ", nanos, "}"));
    }
    return;
  }
  const auto* r = m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const FieldDescriptor* f : fields) {
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;
    const std::string name = path.empty() ? f->name() : path + "." + f->name();
    if (f->is_repeated()) {
      for (int i = 0; i < r->FieldSize(m, f); ++i) {
        Collect(r->GetRepeatedMessage(m, f, i), absl::StrCat(name, "[", i, "]"),
                out);
      }
    } else {
      Collect(r->GetMessage(m, f), name, out);
    }
  }
}

}  // namespace valid_time_internal

// The paths (e.g. "jobs[3].fire_at = {seconds: ..., nanos: ...}") of the
// out-of-range Timestamps and Durations in `message`; empty when all are
// valid.
inline std::vector<std::string> InvalidTimeFields(
    const google::protobuf::Message& message) {
  std::vector<std::string> out;
  valid_time_internal::Collect(message, "", out);
  return out;
}

}  // namespace delayd::testing

#endif  // DELAYD_TESTS_SUPPORT_VALID_TIME_H_
