// The key layout of delayd's RocksDB store, and the functions that encode and
// decode its keys. Pure functions; thread-safe.
//
// Layout version 7 (kStoreLayoutVersion in job_record.h; bump it on any
// change here, see storage/job_record.proto; version 1 had no `expiry`,
// version 2 no attempt marks, version 3 no recurring marks, version 4 no
// ahead marks, version 5 no payload sizes, version 6 no crowds):
//
//   column family   key                                   value
//   -------------   -----------------------------------   ----------------
//   default         "delayd.meta"                         StoreMeta
//   default         "delayd.crowd." be64(due_ms)          empty
//   jobs            topic '\0' id                         JobRecord
//   due             be64(due_ms) topic '\0' id            DueValue
//   expiry          be64(expires_at_ms) topic '\0' id     empty
//
// * topic is 1-128 bytes of [A-Za-z0-9._:-] and id is UTF-8 without control
//   characters, so neither contains '\0' and the first '\0' splits a key
//   unambiguously. Since '\0' sorts before every topic byte, the jobs of one
//   topic are contiguous, ordered by id (byte order), and topic "a" sorts
//   entirely before topic "a.b".
// * be64 is the 8-byte big-endian unsigned due time in unix milliseconds, so
//   byte order is due order; entries of one millisecond are ordered by
//   topic '\0' id.
// * Clamping: due_ms is unix ms >= 0. A negative due time (a fire_at before
//   1970) is stored as 0: such a job is overdue and fires at once, and it
//   sorts before every later due entry. Encode and every caller that derives
//   a due time from a record (DueIndexEntryOf) clamp the same way.
// * expiry keys are encoded exactly like due keys (EncodeDueKey,
//   DecodeDueKey), with the time a retained DONE or CANCELED record expires
//   (> 0): the sweeper finds expired records in expiry order without
//   reading any record, and recovery's scan of `due` never meets them.
// * A due entry's value is a DueValue (EncodeDueValue): a mark and the
//   byte size of the job's payload (layout 6). The mark is 0 (none) or an
//   attempt mark, attempt >= 1, written when a delivery of the job goes out
//   (Mutation::MarkAttempt). The record keeps the job as it was before the
//   delivery; the mark alone says, after a crash, that delivery `attempt`
//   was out. Every put of the record rewrites the entry with
//   DueMarkOf(record) (job_record.h) and the record's payload size: for a
//   one-shot job mark 0, which clears an attempt mark; every delete removes
//   it. The payload size lets recovery count the payload bytes pending per
//   topic (the `pending_bytes` quota) without reading a record.
// * The due entry of a recurring job (layout 4) is marked kRecurringMark,
//   by every put of its record: the fire path and recovery tell its entries
//   from those of one-shot jobs without reading a record. A recurring job
//   is never delivered itself, so it never has an attempt mark.
// * The due entry of an occurrence made ahead of its time (layout 5), not
//   yet delivered, is marked kAheadMark: recovery finds those whose time
//   passed while the server was down without reading any other record.
//   Its first delivery's attempt mark replaces it.
// * A crowd (layout 7; JobStore::ScanCrowd): a millisecond whose many jobs
//   are being fired, noted under "delayd.crowd." be64(due_ms) until every
//   job due there has left it. Meanwhile the entries removed from that
//   millisecond stay in `due` (stale: their job is gone, or due elsewhere)
//   and go all at once, with the note, by one range deletion. Open clears
//   the crowds a crash left: it deletes each noted millisecond's entries
//   that no record is due at, then the note.
#ifndef DELAYD_STORAGE_KEY_CODEC_H_
#define DELAYD_STORAGE_KEY_CODEC_H_

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace delayd::storage {

// Column family names and the meta key.
inline constexpr char kJobsColumnFamily[] = "jobs";
inline constexpr char kDueColumnFamily[] = "due";
inline constexpr char kExpiryColumnFamily[] = "expiry";
inline constexpr char kMetaKey[] = "delayd.meta";

inline constexpr char kCrowdKeyPrefix[] = "delayd.crowd.";

// Size of the big-endian due time that prefixes a due key.
inline constexpr size_t kDueTimeBytes = 8;

// Names a job without owning its strings.
struct JobKeyView {
  std::string_view topic;
  std::string_view id;
};

// A decoded due index key; the views point into the encoded key.
struct DueKeyView {
  int64_t due_ms = 0;
  std::string_view topic;
  std::string_view id;
};

// Clamps a unix-ms due time into the due index's domain [0, INT64_MAX].
inline int64_t ClampDueMs(int64_t due_ms) { return due_ms < 0 ? 0 : due_ms; }
// The end of the range of one millisecond [ms, ms + 1), saturated: a range
// ending at INT64_MAX, like any, excludes it.
inline int64_t EndOfMs(int64_t ms) {
  return ms < std::numeric_limits<int64_t>::max() ? ms + 1 : ms;
}

// `topic \0 id`.
// REQUIRES: topic contains no '\0'.
std::string EncodeJobKey(std::string_view topic, std::string_view id);

// Splits a jobs key at its first '\0'. DATA_LOSS when there is none or the
// topic is empty.
absl::StatusOr<JobKeyView> DecodeJobKey(std::string_view key);

// `be64(ClampDueMs(due_ms)) topic \0 id`.
// REQUIRES: topic contains no '\0'.
std::string EncodeDueKey(int64_t due_ms, std::string_view topic,
                         std::string_view id);

// The 8-byte big-endian prefix alone: the first key of millisecond due_ms,
// usable as an inclusive lower or exclusive upper scan bound.
std::string EncodeDueTime(int64_t due_ms);

// Decodes a due key. DATA_LOSS when it is shorter than 9 bytes, its time is
// above INT64_MAX or its job key does not decode.
absl::StatusOr<DueKeyView> DecodeDueKey(std::string_view key);

// `"delayd.crowd." be64(ClampDueMs(due_ms))`: the note of a crowd.
std::string EncodeCrowdKey(int64_t due_ms);

// The millisecond of a crowd's note. DATA_LOSS when `key` is not one.
absl::StatusOr<int64_t> DecodeCrowdKey(std::string_view key);

// The mark of a recurring job's due entry; never an attempt (max_attempts
// is far below it).
inline constexpr uint32_t kRecurringMark = 0xffffffff;
// The mark of an occurrence made ahead and not yet delivered (JobRecord
// made_ahead); never an attempt either.
inline constexpr uint32_t kAheadMark = 0xfffffffe;

// A due entry's value: the entry's mark and the size of its job's payload.
struct DueValue {
  // 0 (none), an attempt (>= 1, Mutation::MarkAttempt), kRecurringMark or
  // kAheadMark.
  uint32_t mark = 0;
  // The byte size of the job's payload (layout 6): recovery counts the
  // payload bytes pending per topic from the due index alone.
  uint64_t payload_bytes = 0;

  bool operator==(const DueValue&) const = default;
};

// Empty when both are 0; otherwise varint32(mark), followed by
// varint64(payload_bytes) when that is not 0.
std::string EncodeDueValue(const DueValue& value);

// Decodes what EncodeDueValue wrote, and also a layout 3-5 value (empty, or
// a lone varint32 mark; payload_bytes 0). DATA_LOSS naming `key` (a due key)
// when the value is neither.
absl::StatusOr<DueValue> DecodeDueValue(std::string_view key,
                                        std::string_view value);

// A key range [begin, end) of the jobs column family.
struct KeyRange {
  std::string begin;
  std::string end;
};

// The jobs keys of `topic` whose id starts with id_prefix and is greater
// than start_after_id (empty: no lower bound). Empty when begin >= end.
KeyRange JobScanRange(std::string_view topic, std::string_view id_prefix,
                      std::string_view start_after_id);

// The smallest key greater than every key starting with `prefix`, or "" when
// there is none (prefix empty or all 0xff).
std::string PrefixSuccessor(std::string_view prefix);

// A key made printable for error messages ('\0' shows as "\000").
std::string PrintableKey(std::string_view key);

}  // namespace delayd::storage

#endif  // DELAYD_STORAGE_KEY_CODEC_H_
