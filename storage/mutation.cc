#include "storage/mutation.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace delayd::storage {
namespace {

std::string DueForMessage(int64_t due_ms) {
  return due_ms < 0 ? "none" : absl::StrCat(due_ms);
}

}  // namespace

Mutation::Mutation(Kind kind, JobRecord record, std::string topic,
                   std::string id, std::optional<int64_t> previous_due_ms,
                   std::optional<int64_t> previous_expiry_ms)
    : kind_(kind),
      record_(std::move(record)),
      topic_(std::move(topic)),
      id_(std::move(id)),
      previous_due_ms_(previous_due_ms),
      previous_expiry_ms_(previous_expiry_ms) {
  if (previous_due_ms_.has_value()) {
    previous_due_ms_ = ClampDueMs(*previous_due_ms_);
  }
  if (kind_ == Kind::kPut) {
    record_.set_format_version(kJobRecordFormatVersion);
    new_due_ms_ = DueIndexEntryOf(record_);
    new_expiry_ms_ = ExpiryIndexEntryOf(record_);
  }
}

Mutation Mutation::Put(JobRecord record, std::optional<int64_t> previous_due_ms,
                       std::optional<int64_t> previous_expiry_ms) {
  return Mutation(Kind::kPut, std::move(record), "", "", previous_due_ms,
                  previous_expiry_ms);
}

Mutation Mutation::Delete(std::string topic, std::string id,
                          std::optional<int64_t> previous_due_ms,
                          std::optional<int64_t> previous_expiry_ms) {
  return Mutation(Kind::kDelete, JobRecord(), std::move(topic), std::move(id),
                  previous_due_ms, previous_expiry_ms);
}

Mutation Mutation::MarkAttempt(std::string topic, std::string id,
                               int64_t due_ms, uint32_t attempt,
                               uint64_t payload_bytes) {
  Mutation m(Kind::kMarkAttempt, JobRecord(), std::move(topic), std::move(id),
             due_ms, std::nullopt);
  m.new_due_ms_ = m.previous_due_ms_;
  m.attempt_ = attempt;
  m.payload_bytes_ = payload_bytes;
  return m;
}

std::string_view Mutation::topic() const {
  const std::string& topic =
      kind_ == Kind::kPut ? record_.job().topic() : topic_;
  return topic;
}

std::string_view Mutation::id() const {
  const std::string& id = kind_ == Kind::kPut ? record_.job().id() : id_;
  return id;
}

absl::Status Mutation::Validate() const {
  const std::string_view t = topic();
  const std::string_view i = id();
  if (t.empty() || i.empty() || t.find('\0') != std::string_view::npos ||
      i.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "storage: mutation key \"", PrintableKey(EncodeJobKey(t, i)),
        "\": topic and id must be non-empty and free of \\000"));
  }
  if (kind_ == Kind::kPut &&
      record_.format_version() != kJobRecordFormatVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "storage: mutation key \"", PrintableKey(EncodeJobKey(t, i)),
        "\": record format_version ", record_.format_version(),
        " is not the current ", kJobRecordFormatVersion));
  }
  return absl::OkStatus();
}

absl::Status ValidateMutations(std::span<const Mutation> mutations) {
  absl::flat_hash_set<std::string> keys;
  keys.reserve(mutations.size());
  for (const Mutation& m : mutations) {
    if (absl::Status s = m.Validate(); !s.ok()) return s;
    std::string key = EncodeJobKey(m.topic(), m.id());
    if (!keys.insert(key).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("storage: two mutations of key \"", PrintableKey(key),
                       "\" in one Apply"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPreviousDue(const Mutation& m,
                              const std::optional<JobRecord>& stored) {
  // Due entries are >= 0 (clamped); -1 stands for "no entry". Plain ints
  // also keep GCC 12's -Wmaybe-uninitialized quiet about std::optional.
  constexpr int64_t kNone = -1;
  const int64_t actual =
      stored.has_value() ? DueIndexEntryOf(*stored).value_or(kNone) : kNone;
  const int64_t passed = m.previous_due_ms().value_or(kNone);
  const int64_t actual_expiry =
      stored.has_value() ? ExpiryIndexEntryOf(*stored).value_or(kNone) : kNone;
  const int64_t passed_expiry = m.previous_expiry_ms().value_or(kNone);
  if (m.kind() == Mutation::Kind::kMarkAttempt && actual == kNone) {
    return absl::FailedPreconditionError(
        absl::StrCat("storage: attempt mark of key \"",
                     PrintableKey(EncodeJobKey(m.topic(), m.id())),
                     "\": the job has no due entry",
                     stored.has_value() ? "" : " (no record stored)"));
  }
  if (actual == passed && actual_expiry == passed_expiry) {
    return absl::OkStatus();
  }
  const bool due = actual != passed;
  return absl::FailedPreconditionError(
      absl::StrCat("storage: mutation of key \"",
                   PrintableKey(EncodeJobKey(m.topic(), m.id())), "\" passes ",
                   due ? "previous_due_ms " : "previous_expiry_ms ",
                   DueForMessage(due ? passed : passed_expiry),
                   " but the stored record's ", due ? "due" : "expiry",
                   " entry is ", DueForMessage(due ? actual : actual_expiry),
                   stored.has_value() ? "" : " (no record stored)"));
}

}  // namespace delayd::storage
