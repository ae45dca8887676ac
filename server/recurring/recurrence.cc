#include "server/recurring/recurrence.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace delayd::server::recurring {
namespace {

// Whether `name` is a zone of the system's zone database: "UTC", or the
// path of a regular file under $TZDIR (default /usr/share/zoneinfo, as
// Abseil reads it) made of parts of [A-Za-z0-9_+-], none starting with '.'
// or '-' or empty, at most 64 bytes in all. absl::LoadTimeZone opens any
// path it is given ("/etc/passwd", "../x", "file:..."; a FIFO would block
// the thread) and caches every name it was asked for, loaded or not; only
// names checked here reach it, so its cache holds at most the database.
constexpr size_t kMaxZoneBytes = 64;

bool InZoneDatabase(absl::string_view name) {
  if (name == "UTC") return true;
  if (name.empty() || name.size() > kMaxZoneBytes) return false;
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (part.empty() || part[0] == '.' || part[0] == '-') return false;
    for (const char c : part) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' &&
          c != '+' && c != '-') {
        return false;
      }
    }
  }
  const char* dir = std::getenv("TZDIR");
  const std::string path = absl::StrCat(
      dir != nullptr && *dir != '\0' ? dir : "/usr/share/zoneinfo", "/", name);
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// protobuf's Timestamp range: 0001-01-01 to 9999-12-31 UTC.
constexpr int64_t kMinTimestampSeconds = -62'135'596'800;
constexpr int64_t kMaxTimestampSeconds = 253'402'300'799;

absl::Status Invalid(absl::string_view field, absl::string_view sub,
                     absl::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, sub.empty() ? "" : ".", sub, ": ", message));
}

bool ValidTimestamp(const google::protobuf::Timestamp& t) {
  return t.seconds() >= kMinTimestampSeconds &&
         t.seconds() <= kMaxTimestampSeconds && t.nanos() >= 0 &&
         t.nanos() < 1'000'000'000;
}

// Unix ms of a valid Timestamp, a sub-millisecond part rounded up (`up`) or
// down.
int64_t TimestampMs(const google::protobuf::Timestamp& t, bool up) {
  return t.seconds() * 1000 +
         (up ? (t.nanos() + 999'999) / 1'000'000 : t.nanos() / 1'000'000);
}

// A Duration's whole milliseconds (sub-millisecond part rounded up), when it
// lies within [min_ms, max_ms]; checked before any arithmetic.
absl::StatusOr<int64_t> DurationMs(absl::string_view field,
                                   absl::string_view sub,
                                   const google::protobuf::Duration& d,
                                   int64_t min_ms, int64_t max_ms,
                                   absl::string_view range) {
  const bool valid = d.seconds() >= 0 && d.seconds() <= max_ms / 1000 &&
                     d.nanos() >= 0 && d.nanos() < 1'000'000'000;
  const int64_t ms =
      valid ? d.seconds() * 1000 + (d.nanos() + 999'999) / 1'000'000 : -1;
  if (!valid || ms < min_ms || ms > max_ms) {
    return Invalid(field, sub,
                   absl::StrCat("must be ", range, ", got {seconds: ",
                                d.seconds(), ", nanos: ", d.nanos(), "}"));
  }
  return ms;
}

}  // namespace

absl::StatusOr<Recurrence> Recurrence::FromProto(absl::string_view field,
                                                 const v1::Recurrence& r,
                                                 int64_t now_ms) {
  Recurrence out;
  for (const auto& [sub, t] :
       {std::pair<const char*, const google::protobuf::Timestamp*>{
            "start_at", &r.start_at()},
        {"end_at", &r.end_at()},
        {"every.anchor", &r.every().anchor()}}) {
    if (!ValidTimestamp(*t)) {
      return Invalid(field, sub,
                     "not a valid Timestamp (0001-01-01 to 9999-12-31 UTC)");
    }
  }
  out.start_ms_ = r.has_start_at() ? TimestampMs(r.start_at(), true) : now_ms;
  if (r.has_end_at()) {
    out.end_ms_ = TimestampMs(r.end_at(), false);
    if (*out.end_ms_ < out.start_ms_) {
      return Invalid(field, "end_at", "must not be before start_at");
    }
  }
  if (r.has_jitter()) {
    absl::StatusOr<int64_t> jitter =
        DurationMs(field, "jitter", r.jitter(), 0, kMaxJitterMs, "0 to 1 h");
    if (!jitter.ok()) return jitter.status();
  }
  if (!v1::MisfirePolicy_IsValid(r.misfire())) {
    return Invalid(field, "misfire",
                   absl::StrCat("not a MisfirePolicy: ", r.misfire()));
  }
  if (!v1::OverlapPolicy_IsValid(r.overlap())) {
    return Invalid(field, "overlap",
                   absl::StrCat("not an OverlapPolicy: ", r.overlap()));
  }
  switch (r.schedule_case()) {
    case v1::Recurrence::kCron: {
      const v1::CronSchedule& cron = r.cron();
      if (cron.expression().size() > kMaxExpressionBytes) {
        return Invalid(field, "cron.expression",
                       absl::StrCat("must be at most ", kMaxExpressionBytes,
                                    " bytes, got ", cron.expression().size()));
      }
      if (!v1::CronDialect_IsValid(cron.dialect())) {
        return Invalid(field, "cron.dialect",
                       absl::StrCat("not a CronDialect: ", cron.dialect()));
      }
      const CronDialect dialect = cron.dialect() == v1::CRON_DIALECT_UNIX
                                      ? CronDialect::kUnix
                                      : CronDialect::kQuartz;
      absl::StatusOr<CronExpression> expression = CronExpression::Parse(
          absl::StrCat(field, ".cron.expression"), cron.expression(), dialect);
      if (!expression.ok()) return expression.status();
      out.cron_ = *std::move(expression);
      const std::string& zone = cron.time_zone();
      if (zone.size() > kMaxZoneBytes) {
        return Invalid(field, "cron.time_zone",
                       absl::StrCat("must be at most ", kMaxZoneBytes,
                                    " bytes, got ", zone.size()));
      }
      if (!zone.empty() &&
          (!InZoneDatabase(zone) || !absl::LoadTimeZone(zone, &out.zone_))) {
        return Invalid(field, "cron.time_zone",
                       absl::StrCat("unknown IANA time zone \"",
                                    absl::Utf8SafeCHexEscape(zone), "\""));
      }
      break;
    }
    case v1::Recurrence::kEvery: {
      absl::StatusOr<int64_t> interval =
          DurationMs(field, "every.interval", r.every().interval(),
                     kMinIntervalMs, kMaxIntervalMs, "1 s to 100 years");
      if (!interval.ok()) return interval.status();
      out.interval_ms_ = *interval;
      out.anchor_ms_ = r.every().has_anchor()
                           ? TimestampMs(r.every().anchor(), true)
                           : out.start_ms_;
      break;
    }
    case v1::Recurrence::SCHEDULE_NOT_SET:
      return Invalid(field, "",
                     "set one schedule: cron {expression, dialect, "
                     "time_zone} or every {interval, anchor}");
  }
  return out;
}

std::optional<int64_t> Recurrence::NextAfter(int64_t after_ms) const {
  // Strictly after `after_ms`, and at or after start_at.
  const int64_t from = std::max(after_ms, start_ms_ - 1);
  std::optional<int64_t> next;
  if (cron_.has_value()) {
    const std::optional<absl::Time> t =
        NextCronFiring(*cron_, zone_, absl::FromUnixMillis(from));
    if (t.has_value()) next = absl::ToUnixMillis(*t);
  } else if (from < anchor_ms_) {
    next = anchor_ms_;
  } else {
    // anchor + k * interval > from, k >= 1: no overflow, as both terms
    // stay within the Timestamp range plus one interval.
    const int64_t k = (from - anchor_ms_) / interval_ms_ + 1;
    next = anchor_ms_ + k * interval_ms_;
  }
  if (next.has_value() && end_ms_.has_value() && *next > *end_ms_) {
    return std::nullopt;
  }
  return next;
}

v1::Occurrence PresentOccurrence(int64_t at_ms, const absl::TimeZone& zone) {
  v1::Occurrence out;
  out.mutable_at()->set_seconds(at_ms >= 0 ? at_ms / 1000
                                           : -((-at_ms + 999) / 1000));
  out.mutable_at()->set_nanos(
      static_cast<int32_t>((at_ms - out.at().seconds() * 1000) * 1'000'000));
  const absl::Time t = absl::FromUnixMillis(at_ms);
  out.set_local_time(absl::FormatTime(
      at_ms % 1000 == 0 ? "%Y-%m-%dT%H:%M:%S%Ez" : "%Y-%m-%dT%H:%M:%E3S%Ez", t,
      zone));
  out.set_utc_offset_seconds(zone.At(t).offset);
  return out;
}

}  // namespace delayd::server::recurring
