// Recurrence: a validated delayd.v1.Recurrence — a cron schedule in a time
// zone, or a fixed interval — bounded by start_at and end_at, and the
// calendar that yields its occurrences in unix milliseconds.
//
// Thread-safe: immutable once made.
#ifndef DELAYD_SERVER_RECURRING_RECURRENCE_H_
#define DELAYD_SERVER_RECURRING_RECURRENCE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "delayd/v1/recurrence.pb.h"
#include "server/recurring/cron.h"

namespace delayd::server::recurring {

// Limits of a Recurrence (documented in recurrence.proto).
inline constexpr size_t kMaxExpressionBytes = 256;
inline constexpr int64_t kMinIntervalMs = 1000;
inline constexpr int64_t kMaxIntervalMs = int64_t{100} * 366 * 86'400'000;
inline constexpr int64_t kMaxJitterMs = 3'600'000;

class Recurrence {
 public:
  // Validates `r`, read at `now_ms` (the default of start_at and of an
  // interval's anchor). INVALID_ARGUMENT naming the field under `field`
  // (e.g. "recurrence.cron.time_zone") otherwise.
  static absl::StatusOr<Recurrence> FromProto(absl::string_view field,
                                              const v1::Recurrence& r,
                                              int64_t now_ms);

  // The first nominal occurrence strictly after `after_ms`, not before
  // start_at nor after end_at; nullopt when there is none.
  std::optional<int64_t> NextAfter(int64_t after_ms) const;

  // The zone local times are shown in: the cron schedule's, UTC for an
  // interval.
  const absl::TimeZone& zone() const { return zone_; }

 private:
  Recurrence() = default;

  std::optional<CronExpression> cron_;
  absl::TimeZone zone_ = absl::UTCTimeZone();
  int64_t interval_ms_ = 0;
  int64_t anchor_ms_ = 0;
  int64_t start_ms_ = 0;
  std::optional<int64_t> end_ms_;
};

// An occurrence as PreviewSchedule shows it: `at_ms` in `zone`.
v1::Occurrence PresentOccurrence(int64_t at_ms, const absl::TimeZone& zone);

}  // namespace delayd::server::recurring

#endif  // DELAYD_SERVER_RECURRING_RECURRENCE_H_
