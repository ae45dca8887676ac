#include "storage/job_record.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace delayd::storage {
namespace {

std::string KeyForMessage(JobKeyView key) {
  return PrintableKey(EncodeJobKey(key.topic, key.id));
}

}  // namespace

bool IsLive(delayd::v1::JobState state) {
  switch (state) {
    case delayd::v1::JOB_STATE_SCHEDULED:
    case delayd::v1::JOB_STATE_READY:
    case delayd::v1::JOB_STATE_IN_FLIGHT:
      return true;
    default:
      return false;
  }
}

bool IsFinished(delayd::v1::JobState state) {
  return state == delayd::v1::JOB_STATE_DONE ||
         state == delayd::v1::JOB_STATE_CANCELED;
}

bool IsRetained(const JobRecord& record) {
  return IsFinished(record.job().state()) && record.expires_at_ms() > 0;
}

int64_t TimestampToUnixMs(const google::protobuf::Timestamp& ts) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const int64_t seconds = ts.seconds();
  // Valid timestamps have nanos in [0, 1e9): integer division floors. A
  // record read from disk is not checked, so its nanos may be anything an
  // int32 holds: the sum saturates.
  int64_t ms = 0;
  if (__builtin_mul_overflow(seconds, int64_t{1000}, &ms) ||
      __builtin_add_overflow(ms, int64_t{ts.nanos() / 1'000'000}, &ms)) {
    return seconds > 0 ? kMax : kMin;
  }
  return ms;
}

google::protobuf::Timestamp UnixMsToTimestamp(int64_t unix_ms) {
  int64_t seconds = unix_ms / 1000;
  int64_t millis = unix_ms % 1000;
  if (millis < 0) {  // Floor towards -inf so that nanos stay non-negative.
    seconds -= 1;
    millis += 1000;
  }
  google::protobuf::Timestamp ts;
  ts.set_seconds(seconds);
  ts.set_nanos(static_cast<int32_t>(millis * 1'000'000));
  return ts;
}

std::optional<int64_t> DueIndexEntryOf(const JobRecord& record) {
  if (!IsLive(record.job().state())) return std::nullopt;
  return ClampDueMs(TimestampToUnixMs(record.job().fire_at()));
}

uint32_t DueMarkOf(const JobRecord& record) {
  if (record.job().has_recurring()) return kRecurringMark;
  return record.made_ahead() && record.job().attempts() == 0 ? kAheadMark : 0;
}

DueValue DueValueOf(const JobRecord& record) {
  return {DueMarkOf(record), static_cast<uint64_t>(PayloadBytesOf(record))};
}

std::optional<int64_t> ExpiryIndexEntryOf(const JobRecord& record) {
  if (!IsRetained(record)) return std::nullopt;
  return record.expires_at_ms();
}

absl::StatusOr<JobRecord> ParseJobRecord(JobKeyView key,
                                         std::string_view bytes) {
  JobRecord record;
  if (!record.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError(absl::StrCat(
        "storage: corrupt job record under key \"", KeyForMessage(key),
        "\": ", bytes.size(), " bytes that do not parse as a JobRecord"));
  }
  if (record.format_version() == 0) {
    return absl::DataLossError(absl::StrCat(
        "storage: corrupt job record under key \"", KeyForMessage(key),
        "\": format_version missing (", bytes.size(), " bytes)"));
  }
  if (record.format_version() > kJobRecordFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "storage: job record under key \"", KeyForMessage(key),
        "\" has format_version ", record.format_version(),
        ", newer than this binary reads (", kJobRecordFormatVersion,
        "); it was written by a newer delayd: run that version"));
  }
  if (record.job().topic() != key.topic || record.job().id() != key.id) {
    return absl::DataLossError(absl::StrCat(
        "storage: corrupt job record under key \"", KeyForMessage(key),
        "\": it names job \"",
        PrintableKey(EncodeJobKey(record.job().topic(), record.job().id())),
        "\""));
  }
  return record;
}

}  // namespace delayd::storage
