// Validation of client input against Limits. Every error is INVALID_ARGUMENT
// with a message that names the field (with its path, e.g.
// "requests[3].job.topic") and the limit. Pure functions; thread-safe.
#ifndef DELAYD_SERVER_JOBS_VALIDATION_H_
#define DELAYD_SERVER_JOBS_VALIDATION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "delayd/v1/delayd.pb.h"
#include "server/jobs/limits.h"

namespace delayd::server {

// Well-formed UTF-8: no overlong forms, no surrogates, at most U+10FFFF.
bool IsValidUtf8(absl::string_view s);

absl::Status ValidateTopic(absl::string_view field, absl::string_view topic,
                           const Limits& limits);
absl::Status ValidateId(absl::string_view field, absl::string_view id,
                        const Limits& limits);
absl::Status ValidateKey(absl::string_view field, const delayd::v1::JobKey& key,
                         const Limits& limits);
// An id prefix follows the rules of an id.
absl::Status ValidateIdPrefix(absl::string_view field, absl::string_view prefix,
                              const Limits& limits);

// A Timestamp within protobuf's range, 0001-01-01 to 9999-12-31 UTC.
absl::Status ValidateTimestamp(absl::string_view field,
                               const google::protobuf::Timestamp& t);

// Everything of a JobSpec but its `when` (see ResolveDueMs).
absl::Status ValidateSpec(absl::string_view field,
                          const delayd::v1::JobSpec& spec,
                          const Limits& limits);

// The due time in unix ms of a `when` given as delay or fire_at (neither set:
// now), a sub-millisecond part rounded up (never early). A past fire_at is
// due now (kept as given, so it sorts first).
// Errors: a negative delay, a fire_at beyond max_schedule_ahead, or a
// Duration/Timestamp outside protobuf's valid range.
absl::StatusOr<int64_t> ResolveDueMs(absl::string_view field,
                                     const delayd::v1::JobSpec& spec,
                                     int64_t now_ms, const Limits& limits);
absl::StatusOr<int64_t> ResolveDueMs(absl::string_view field,
                                     const delayd::v1::RescheduleRequest& req,
                                     int64_t now_ms, const Limits& limits);

// The effective retry policy: every unset field takes its default.
// REQUIRES: ValidateSpec accepted the policy.
delayd::v1::RetryPolicy EffectiveRetry(const delayd::v1::RetryPolicy& retry);

}  // namespace delayd::server

#endif  // DELAYD_SERVER_JOBS_VALIDATION_H_
