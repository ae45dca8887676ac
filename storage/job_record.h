// Helpers around JobRecord, the stored form of one job (job_record.proto):
// format versions, which records are live and where they sit in the due
// index, and the one place that decodes a stored value. Pure functions;
// thread-safe.
#ifndef DELAYD_STORAGE_JOB_RECORD_H_
#define DELAYD_STORAGE_JOB_RECORD_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "delayd/v1/delayd.pb.h"
#include "storage/job_record.pb.h"
#include "storage/key_codec.h"

namespace delayd::storage {

// The JobRecord.format_version this code writes and the newest it reads.
// Procedure to change it: the header of storage/job_record.proto.
inline constexpr uint32_t kJobRecordFormatVersion = 1;

// The StoreMeta.layout_version this code writes and the newest it opens
// (column families and key layout, storage/key_codec.h).
// History: job_record.proto.
inline constexpr uint32_t kStoreLayoutVersion = 7;

// SCHEDULED, READY and IN_FLIGHT jobs are live: they have a due index entry.
// DEAD, DONE and CANCELED (and UNSPECIFIED) ones do not.
bool IsLive(delayd::v1::JobState state);

// DONE and CANCELED jobs are finished: they never fire again. A finished
// record is retained (kept until it expires, with an expiry index entry)
// when its expires_at_ms is set; a CANCELED record without it is a job
// canceled in flight whose delivery has not ended.
bool IsFinished(delayd::v1::JobState state);
bool IsRetained(const JobRecord& record);

// Unix milliseconds of a timestamp, sub-millisecond part truncated (floor),
// saturated at the int64 range.
int64_t TimestampToUnixMs(const google::protobuf::Timestamp& ts);

// The inverse, exact.
google::protobuf::Timestamp UnixMsToTimestamp(int64_t unix_ms);

// The due index entry the store keeps for `record`: ClampDueMs(fire_at in
// ms) when the job is live, nullopt otherwise. This is the value a caller
// passes as a Mutation's previous_due_ms for the record currently stored.
std::optional<int64_t> DueIndexEntryOf(const JobRecord& record);

// The mark a put of `record` gives its due entry: kRecurringMark for a
// recurring job (job.recurring set), kAheadMark for an occurrence made
// ahead that no delivery has reached (made_ahead, no attempt), 0 (none)
// otherwise.
uint32_t DueMarkOf(const JobRecord& record);

// The byte size of the record's payload.
inline int64_t PayloadBytesOf(const JobRecord& record) {
  return static_cast<int64_t>(record.job().payload().size());
}

// The value a put of `record` gives its due entry: DueMarkOf(record) and
// the byte size of its payload.
DueValue DueValueOf(const JobRecord& record);

// The expiry index entry the store keeps for `record`: its expires_at_ms
// when it is retained, nullopt otherwise. The value a caller passes as a
// Mutation's previous_expiry_ms for the record currently stored.
std::optional<int64_t> ExpiryIndexEntryOf(const JobRecord& record);

// Decodes the value stored under job key (topic, id). Errors name the key:
//   DATA_LOSS: not a JobRecord, format_version missing, or the record names
//     another job than its key;
//   FAILED_PRECONDITION: format_version newer than kJobRecordFormatVersion.
absl::StatusOr<JobRecord> ParseJobRecord(JobKeyView key,
                                         std::string_view bytes);

}  // namespace delayd::storage

#endif  // DELAYD_STORAGE_JOB_RECORD_H_
