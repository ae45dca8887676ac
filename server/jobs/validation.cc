#include "server/jobs/validation.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "delayd/proto_time.h"
#include "server/base/saturating.h"

namespace delayd::server {
namespace {

using ::delayd::v1::JobSpec;
using ::delayd::v1::RetryPolicy;

// google.protobuf.Timestamp's valid range: 0001-01-01 to 9999-12-31 UTC.
constexpr int64_t kMinTimestampSeconds = -62135596800;
constexpr int64_t kMaxTimestampSeconds = 253402300799;
// google.protobuf.Duration's valid range: +-10,000 years.
constexpr int64_t kMaxDurationSeconds = 315576000000;

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

bool IsTopicChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' || c == '-';
}

// True if `s` is well-formed UTF-8 (no overlong forms, no surrogates, at
// most U+10FFFF) and, when reject_control, holds no control character (C0,
// DEL, C1).
bool ScanUtf8(absl::string_view s, bool reject_control) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    uint32_t cp;
    size_t len;
    if (b0 < 0x80) {
      cp = b0;
      len = 1;
    } else if ((b0 & 0xE0) == 0xC0) {
      cp = b0 & 0x1F;
      len = 2;
    } else if ((b0 & 0xF0) == 0xE0) {
      cp = b0 & 0x0F;
      len = 3;
    } else if ((b0 & 0xF8) == 0xF0) {
      cp = b0 & 0x07;
      len = 4;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    static constexpr uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[len] || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    if (reject_control && (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F))) {
      return false;
    }
    i += len;
  }
  return true;
}

bool IsCleanUtf8(absl::string_view s) { return ScanUtf8(s, true); }

// "100 years", "12h", "1m30s": whole (Julian) years read better than
// hours.
std::string HumanDuration(absl::Duration d) {
  const absl::Duration kYear = absl::Hours(24) * 365.25;
  absl::Duration rest;
  const int64_t years = absl::IDivDuration(d, kYear, &rest);
  if (years > 0 && rest == absl::ZeroDuration()) {
    return absl::StrCat(years, years == 1 ? " year" : " years");
  }
  return absl::FormatDuration(d);
}

bool ValidDuration(const google::protobuf::Duration& d) {
  if (d.seconds() < -kMaxDurationSeconds || d.seconds() > kMaxDurationSeconds)
    return false;
  if (d.nanos() <= -1000000000 || d.nanos() >= 1000000000) return false;
  return !((d.seconds() > 0 && d.nanos() < 0) ||
           (d.seconds() < 0 && d.nanos() > 0));
}

bool ValidTimestamp(const google::protobuf::Timestamp& t) {
  return t.seconds() >= kMinTimestampSeconds &&
         t.seconds() <= kMaxTimestampSeconds && t.nanos() >= 0 &&
         t.nanos() < 1000000000;
}

// A non-negative, bounded Duration field.
absl::Status ValidateDuration(absl::string_view field,
                              const google::protobuf::Duration& d,
                              absl::Duration max) {
  if (!ValidDuration(d)) return Invalid(field, "not a valid Duration");
  if (d.seconds() < 0 || d.nanos() < 0) return Invalid(field, "must be >= 0");
  if (absl::Milliseconds(DurationMs(d)) > max) {
    return Invalid(field, absl::StrCat("must be at most ", HumanDuration(max)));
  }
  return absl::OkStatus();
}

// The due ms of a `when` oneof given by its two alternatives.
absl::StatusOr<int64_t> ResolveWhen(absl::string_view field,
                                    const google::protobuf::Duration* delay,
                                    const google::protobuf::Timestamp* fire_at,
                                    int64_t now_ms, const Limits& limits) {
  const int64_t max_ahead_ms =
      absl::ToInt64Milliseconds(limits.max_schedule_ahead);
  if (delay != nullptr) {
    const std::string name = absl::StrCat(field, "delay");
    if (!ValidDuration(*delay)) return Invalid(name, "not a valid Duration");
    if (delay->seconds() < 0 || delay->nanos() < 0) {
      return Invalid(name, "must be >= 0");
    }
    if (DurationMs(*delay) > max_ahead_ms) {
      return Invalid(name,
                     absl::StrCat("must be at most ",
                                  HumanDuration(limits.max_schedule_ahead)));
    }
    // A sub-millisecond part rounds up: due never before the time asked for.
    return now_ms + DurationMs(*delay) + (delay->nanos() % 1000000 != 0);
  }
  if (fire_at != nullptr) {
    const std::string name = absl::StrCat(field, "fire_at");
    if (!ValidTimestamp(*fire_at)) {
      return Invalid(name,
                     "not a valid Timestamp (0001-01-01 to 9999-12-31 UTC)");
    }
    const int64_t ms = fire_at->seconds() * 1000 +
                       (fire_at->nanos() + 999999) / 1000000;  // round up
    if (ms > SaturatingAdd(now_ms, max_ahead_ms)) {
      return Invalid(
          name,
          absl::StrCat("must be at most ",
                       HumanDuration(limits.max_schedule_ahead), " ahead"));
    }
    // A time in the past is due now; before 1970 it is due at the epoch.
    return ms < 0 ? 0 : ms;
  }
  return now_ms;
}

}  // namespace

bool IsValidUtf8(absl::string_view s) { return ScanUtf8(s, false); }

absl::Status ValidateTimestamp(absl::string_view field,
                               const google::protobuf::Timestamp& t) {
  if (!ValidTimestamp(t)) {
    return Invalid(field,
                   "not a valid Timestamp (0001-01-01 to 9999-12-31 UTC)");
  }
  return absl::OkStatus();
}

absl::Status ValidateTopic(absl::string_view field, absl::string_view topic,
                           const Limits& limits) {
  const std::string rule = absl::StrCat("must be 1-", limits.max_topic_bytes,
                                        " bytes of [A-Za-z0-9._:-]");
  if (topic.empty() || topic.size() > limits.max_topic_bytes) {
    return Invalid(field, absl::StrCat(rule, ", got ", topic.size(), " bytes"));
  }
  for (char c : topic) {
    if (!IsTopicChar(c)) return Invalid(field, rule);
  }
  return absl::OkStatus();
}

absl::Status ValidateId(absl::string_view field, absl::string_view id,
                        const Limits& limits) {
  if (id.size() > limits.max_id_bytes) {
    return Invalid(field, absl::StrCat("must be at most ", limits.max_id_bytes,
                                       " bytes, got ", id.size()));
  }
  if (!IsCleanUtf8(id)) {
    return Invalid(field, "must be UTF-8 without control characters");
  }
  return absl::OkStatus();
}

absl::Status ValidateIdPrefix(absl::string_view field, absl::string_view prefix,
                              const Limits& limits) {
  return ValidateId(field, prefix, limits);
}

absl::Status ValidateKey(absl::string_view field, const delayd::v1::JobKey& key,
                         const Limits& limits) {
  if (absl::Status s =
          ValidateTopic(absl::StrCat(field, ".topic"), key.topic(), limits);
      !s.ok()) {
    return s;
  }
  return ValidateId(absl::StrCat(field, ".id"), key.id(), limits);
}

absl::Status ValidateSpec(absl::string_view field, const JobSpec& spec,
                          const Limits& limits) {
  if (absl::Status s =
          ValidateTopic(absl::StrCat(field, ".topic"), spec.topic(), limits);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          ValidateId(absl::StrCat(field, ".id"), spec.id(), limits);
      !s.ok()) {
    return s;
  }
  if (spec.payload().size() > limits.max_payload_bytes) {
    return Invalid(absl::StrCat(field, ".payload"),
                   absl::StrCat("must be at most ", limits.max_payload_bytes,
                                " bytes, got ", spec.payload().size()));
  }
  if (spec.labels_size() > static_cast<int>(limits.max_labels)) {
    return Invalid(absl::StrCat(field, ".labels"),
                   absl::StrCat("at most ", limits.max_labels, " labels"));
  }
  for (const auto& [key, value] : spec.labels()) {
    const std::string name = absl::StrCat(field, ".labels[", key, "]");
    if (key.empty() || key.size() > limits.max_label_key_bytes ||
        !IsCleanUtf8(key)) {
      return Invalid(
          absl::StrCat(field, ".labels"),
          absl::StrCat("keys must be 1-", limits.max_label_key_bytes,
                       " bytes of UTF-8 without control characters"));
    }
    if (value.size() > limits.max_label_value_bytes || !IsCleanUtf8(value)) {
      return Invalid(
          name, absl::StrCat("must be at most ", limits.max_label_value_bytes,
                             " bytes of UTF-8 without control "
                             "characters"));
    }
  }
  if (spec.has_retry()) {
    const RetryPolicy& r = spec.retry();
    const std::string retry = absl::StrCat(field, ".retry");
    if (r.max_attempts() > limits.max_attempts) {
      return Invalid(absl::StrCat(retry, ".max_attempts"),
                     absl::StrCat("must be at most ", limits.max_attempts));
    }
    if (r.has_lease()) {
      if (absl::Status s = ValidateDuration(absl::StrCat(retry, ".lease"),
                                            r.lease(), limits.max_lease);
          !s.ok()) {
        return s;
      }
      if (DurationMs(r.lease()) < 1) {
        return Invalid(absl::StrCat(retry, ".lease"), "must be >= 1ms");
      }
    }
    for (const auto& [name, d] :
         {std::pair{"initial_backoff", &r.initial_backoff()},
          std::pair{"max_backoff", &r.max_backoff()}}) {
      if (absl::Status s = ValidateDuration(absl::StrCat(retry, ".", name), *d,
                                            limits.max_schedule_ahead);
          !s.ok()) {
        return s;
      }
    }
    if (!(r.backoff_multiplier() == 0 ||
          (r.backoff_multiplier() >= 1 && r.backoff_multiplier() <= 100))) {
      return Invalid(absl::StrCat(retry, ".backoff_multiplier"),
                     "must be 0 (default) or in [1, 100]");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ResolveDueMs(absl::string_view field,
                                     const JobSpec& spec, int64_t now_ms,
                                     const Limits& limits) {
  return ResolveWhen(
      absl::StrCat(field, "."),
      spec.when_case() == JobSpec::kDelay ? &spec.delay() : nullptr,
      spec.when_case() == JobSpec::kFireAt ? &spec.fire_at() : nullptr, now_ms,
      limits);
}

absl::StatusOr<int64_t> ResolveDueMs(absl::string_view field,
                                     const delayd::v1::RescheduleRequest& req,
                                     int64_t now_ms, const Limits& limits) {
  using Req = delayd::v1::RescheduleRequest;
  return ResolveWhen(field,
                     req.when_case() == Req::kDelay ? &req.delay() : nullptr,
                     req.when_case() == Req::kFireAt ? &req.fire_at() : nullptr,
                     now_ms, limits);
}

RetryPolicy EffectiveRetry(const RetryPolicy& retry) {
  RetryPolicy out = retry;
  if (out.max_attempts() == 0) out.set_max_attempts(10);
  if (!out.has_lease()) out.mutable_lease()->set_seconds(30);
  if (!out.has_initial_backoff()) out.mutable_initial_backoff()->set_seconds(1);
  if (!out.has_max_backoff()) out.mutable_max_backoff()->set_seconds(600);
  if (out.backoff_multiplier() == 0) out.set_backoff_multiplier(2);
  return out;
}

}  // namespace delayd::server
