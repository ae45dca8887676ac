// Fuzz target: what storage/ decodes from disk — job records
// (storage/job_record.h ParseJobRecord) and the keys and values of its
// column families (storage/key_codec.h). A corrupt or hostile data dir must
// give an error status, never a crash or undefined behaviour.
//
// The input: one byte N, then a key of N bytes (fewer when the input ends),
// then a value. The key is decoded as a jobs key and as a due key, the
// value as an attempt mark and as a JobRecord (under the key, and under the
// key the record names, so that the checks after a successful parse are
// reached). Properties: decoded keys and marks encode back to what decodes
// the same; a record that parses names its key, has a format version this
// code reads, serializes and parses to the same record, and yields index
// entries in the index's domain.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "storage/job_record.h"
#include "storage/key_codec.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/proto_util.h"

namespace {

namespace storage = delayd::storage;

void CheckJobKey(std::string_view key) {
  absl::StatusOr<storage::JobKeyView> job = storage::DecodeJobKey(key);
  if (!job.ok()) {
    FUZZ_CHECK(job.status().code() == absl::StatusCode::kDataLoss);
    return;
  }
  FUZZ_CHECK(!job->topic.empty());
  FUZZ_CHECK(job->topic.find('\0') == std::string_view::npos);
  FUZZ_CHECK(storage::EncodeJobKey(job->topic, job->id) == key);
}

void CheckDueKey(std::string_view key) {
  absl::StatusOr<storage::DueKeyView> due = storage::DecodeDueKey(key);
  if (!due.ok()) {
    FUZZ_CHECK(due.status().code() == absl::StatusCode::kDataLoss);
    return;
  }
  FUZZ_CHECK(due->due_ms >= 0);
  FUZZ_CHECK(storage::EncodeDueKey(due->due_ms, due->topic, due->id) == key);
}

void CheckDueValue(std::string_view key, std::string_view value) {
  absl::StatusOr<storage::DueValue> decoded =
      storage::DecodeDueValue(key, value);
  if (!decoded.ok()) {
    FUZZ_CHECK(decoded.status().code() == absl::StatusCode::kDataLoss);
    FUZZ_CHECK(!value.empty());
    return;
  }
  if (value.empty()) FUZZ_CHECK(*decoded == storage::DueValue{});
  const std::string encoded = storage::EncodeDueValue(*decoded);
  FUZZ_CHECK(encoded.size() <= value.size());
  absl::StatusOr<storage::DueValue> again =
      storage::DecodeDueValue(key, encoded);
  FUZZ_CHECK(again.ok() && *again == *decoded);
}

// The index entries of a record read from disk, as recovery and every
// rewrite of it compute them.
void CheckIndexEntries(const storage::JobRecord& record) {
  const std::optional<int64_t> due = storage::DueIndexEntryOf(record);
  FUZZ_CHECK(due.has_value() == storage::IsLive(record.job().state()));
  if (due.has_value()) {
    FUZZ_CHECK(*due >= 0);
    const std::string& topic = record.job().topic();
    if (topic.find('\0') == std::string::npos) {  // EncodeDueKey REQUIRES
      absl::StatusOr<storage::DueKeyView> key = storage::DecodeDueKey(
          storage::EncodeDueKey(*due, topic, record.job().id()));
      FUZZ_CHECK(key.ok() == !topic.empty());
      if (key.ok()) FUZZ_CHECK(key->due_ms == *due);
    }
  }
  const std::optional<int64_t> expiry = storage::ExpiryIndexEntryOf(record);
  FUZZ_CHECK(expiry.has_value() == storage::IsRetained(record));
  if (expiry.has_value()) FUZZ_CHECK(*expiry > 0);
  const uint32_t mark = storage::DueMarkOf(record);
  FUZZ_CHECK(mark == 0 || mark == storage::kRecurringMark ||
             mark == storage::kAheadMark);
  const storage::DueValue value = storage::DueValueOf(record);
  FUZZ_CHECK(value.mark == mark);
  FUZZ_CHECK(value.payload_bytes == record.job().payload().size());
  // A fire_at that is a valid Timestamp round-trips through unix ms.
  const google::protobuf::Timestamp& fire_at = record.job().fire_at();
  constexpr int64_t kMaxSeconds = 253402300799;  // 9999-12-31T23:59:59Z
  if (fire_at.seconds() >= -62135596800 && fire_at.seconds() <= kMaxSeconds &&
      fire_at.nanos() >= 0 && fire_at.nanos() < 1'000'000'000) {
    const int64_t ms = storage::TimestampToUnixMs(fire_at);
    FUZZ_CHECK(storage::TimestampToUnixMs(storage::UnixMsToTimestamp(ms)) ==
               ms);
  }
}

void CheckRecord(storage::JobKeyView key, std::string_view value) {
  absl::StatusOr<storage::JobRecord> record =
      storage::ParseJobRecord(key, value);
  if (!record.ok()) {
    const absl::StatusCode code = record.status().code();
    FUZZ_CHECK(code == absl::StatusCode::kDataLoss ||
               code == absl::StatusCode::kFailedPrecondition);
    return;
  }
  FUZZ_CHECK(record->format_version() >= 1 &&
             record->format_version() <= storage::kJobRecordFormatVersion);
  FUZZ_CHECK(record->job().topic() == key.topic);
  FUZZ_CHECK(record->job().id() == key.id);
  const std::string bytes = Deterministic(*record);
  absl::StatusOr<storage::JobRecord> again =
      storage::ParseJobRecord(key, bytes);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(Deterministic(*again) == bytes);
  CheckIndexEntries(*record);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = delayd::fuzz::AsText(data, size);
  if (in.empty()) return 0;
  const size_t key_size =
      std::min<size_t>(static_cast<unsigned char>(in.front()), in.size() - 1);
  in.remove_prefix(1);
  const std::string_view key = in.substr(0, key_size);
  const std::string_view value = in.substr(key_size);

  CheckJobKey(key);
  CheckDueKey(key);
  CheckDueValue(key, value);
  if (absl::StatusOr<storage::JobKeyView> job = storage::DecodeJobKey(key);
      job.ok()) {
    CheckRecord(*job, value);
  }
  // The key the value names, when it parses at all: the checks past the
  // key comparison, without the fuzzer having to match both.
  storage::JobRecord named;
  if (named.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
    CheckRecord({named.job().topic(), named.job().id()}, value);
  }
  return 0;
}
