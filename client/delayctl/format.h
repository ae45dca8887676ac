// Text helpers of delayctl: parsing the times and durations users type, and
// rendering times, durations, payloads and aligned tables for people.
// Pure functions (the current time is an argument); thread-compatible.
#ifndef DELAYD_CLIENT_DELAYCTL_FORMAT_H_
#define DELAYD_CLIENT_DELAYCTL_FORMAT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"

namespace delayd::delayctl {

// A duration such as "30m", "1h30m", "1.5s", "250ms", "2d12h" or "0".
// Negative durations are refused. `what` names the argument in errors.
absl::StatusOr<absl::Duration> ParseDuration(const std::string& text,
                                             const std::string& what);

// When a job is due: a delay from now (see ParseDuration; "now" is 0) or an
// absolute RFC 3339 time ("2026-11-22T06:30:00Z", "...+01:00").
struct When {
  bool absolute = false;
  absl::Duration delay;  // when !absolute
  absl::Time at;         // when absolute
};
absl::StatusOr<When> ParseWhen(const std::string& text,
                               const std::string& what);

// A point in time given as RFC 3339 or as a duration from `now`.
absl::StatusOr<absl::Time> ParseTimeOrDelay(const std::string& text,
                                            const std::string& what,
                                            absl::Time now);

// What delayctl sends for a parsed duration or time: delayd::ToProto
// (delayd/proto_time.h) of the value saturated to int64 nanoseconds (about
// 292 years; 1677-09-21 to 2262-04-11). So "inf" and far-off times reach
// the server as that bound, valid fields it judges by its own limits, as
// delayctl has always sent them.
google::protobuf::Duration ToProtoSaturated(absl::Duration d);
google::protobuf::Timestamp ToProtoSaturated(absl::Time t);

// "29m58s", "1h30m", "2d4h", "250ms": the two largest units, for people.
std::string HumanDuration(absl::Duration d);
// "2026-11-22 06:30:00Z" (UTC; `millis` adds ".123").
std::string AbsoluteTime(absl::Time t, bool millis = false);
// "in 29m58s (2026-11-22 06:30:00Z)", "3s ago (...)", "now (...)".
std::string RelativeTime(absl::Time t, absl::Time now, bool millis = false);

// A payload for one line: quoted text if it is printable UTF-8, else escaped;
// cut to `max_chars` with "..." and the full size.
std::string PayloadPreview(const std::string& payload, size_t max_chars);

// Rows of cells printed with columns padded to their widest cell, two spaces
// apart; the last column is not padded.
std::string Table(const std::vector<std::vector<std::string>>& rows);

}  // namespace delayd::delayctl

#endif  // DELAYD_CLIENT_DELAYCTL_FORMAT_H_
