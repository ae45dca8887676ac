#include "storage/in_memory_job_store.h"

#include <utility>

#include "absl/time/clock.h"
#include "storage/key_codec.h"

namespace delayd::storage {

absl::Status InMemoryJobStore::Apply(std::span<const Mutation> mutations,
                                     Durability durability) {
  if (mutations.empty()) return absl::OkStatus();
  const absl::Time start = absl::Now();
  // Malformed calls and violated preconditions are caller bugs, not write
  // failures: not counted (as in RocksDbJobStore).
  if (absl::Status s = ValidateMutations(mutations); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  // Check every precondition before changing anything: all or nothing.
  for (const Mutation& m : mutations) {
    absl::StatusOr<std::optional<JobRecord>> stored = GetLocked(m.key());
    if (!stored.ok()) return stored.status();
    if (absl::Status s = CheckPreviousDue(m, *stored); !s.ok()) return s;
  }
  for (const Mutation& m : mutations) {
    if (m.kind() == Mutation::Kind::kMarkAttempt) {
      due_[EncodeDueKey(*m.new_due_ms(), m.topic(), m.id())] = {
          m.attempt(), m.payload_bytes()};
      continue;
    }
    if (m.previous_due_ms().has_value()) {
      due_.erase(EncodeDueKey(*m.previous_due_ms(), m.topic(), m.id()));
    }
    if (m.previous_expiry_ms().has_value()) {
      expiry_.erase(EncodeDueKey(*m.previous_expiry_ms(), m.topic(), m.id()));
    }
    std::string key = EncodeJobKey(m.topic(), m.id());
    if (m.kind() == Mutation::Kind::kDelete) {
      jobs_.erase(key);
      continue;
    }
    jobs_[std::move(key)] = m.record().SerializeAsString();
    if (m.new_due_ms().has_value()) {
      due_[EncodeDueKey(*m.new_due_ms(), m.topic(), m.id())] =
          DueValueOf(m.record());
    }
    if (m.new_expiry_ms().has_value()) {
      expiry_[EncodeDueKey(*m.new_expiry_ms(), m.topic(), m.id())] = {};
    }
  }
  counters_.RecordWrite(true, durability != Durability::kNoSync,
                        mutations.size(), absl::Now() - start);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<JobRecord>> InMemoryJobStore::GetLocked(
    JobKeyView key) const {
  auto it = jobs_.find(EncodeJobKey(key.topic, key.id));
  if (it == jobs_.end()) return std::nullopt;
  absl::StatusOr<JobRecord> record = ParseJobRecord(key, it->second);
  if (!record.ok()) return record.status();
  return std::optional<JobRecord>(*std::move(record));
}

absl::StatusOr<std::optional<JobRecord>> InMemoryJobStore::Get(
    std::string_view topic, std::string_view id) const {
  absl::ReaderMutexLock lock(&mu_);
  return GetLocked({topic, id});
}

absl::StatusOr<std::vector<std::optional<JobRecord>>>
InMemoryJobStore::MultiGet(std::span<const JobKeyView> keys) const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::optional<JobRecord>> out;
  out.reserve(keys.size());
  for (const JobKeyView& key : keys) {
    absl::StatusOr<std::optional<JobRecord>> record = GetLocked(key);
    if (!record.ok()) return record.status();
    out.push_back(*std::move(record));
  }
  return out;
}

namespace {

// A DueVisitor as a MarkedDueVisitor that ignores the mark.
auto IgnoringMarks(JobStore::DueVisitor visitor) {
  return [visitor](int64_t due_ms, std::string_view topic, std::string_view id,
                   const DueValue&) { return visitor(due_ms, topic, id); };
}

}  // namespace

absl::Status InMemoryJobStore::ScanDue(int64_t from_ms, int64_t to_ms,
                                       DueVisitor visitor) const {
  return ScanIndex(false, from_ms, to_ms, IgnoringMarks(visitor));
}

absl::Status InMemoryJobStore::ScanFireMillisecond(int64_t ms,
                                                   DueVisitor visitor) {
  return ScanDue(ms, EndOfMs(ms), visitor);
}

absl::Status InMemoryJobStore::ScanDueMarked(int64_t from_ms, int64_t to_ms,
                                             MarkedDueVisitor visitor) const {
  return ScanIndex(false, from_ms, to_ms, visitor);
}

absl::Status InMemoryJobStore::ScanDueFrom(int64_t from_ms,
                                           std::string_view from_topic,
                                           std::string_view from_id,
                                           int64_t to_ms,
                                           MarkedDueVisitor visitor) const {
  return ScanIndex(false, from_ms, to_ms, visitor,
                   EncodeDueKey(from_ms, from_topic, from_id));
}

absl::Status InMemoryJobStore::ScanExpiry(int64_t from_ms, int64_t to_ms,
                                          DueVisitor visitor) const {
  return ScanIndex(true, from_ms, to_ms, IgnoringMarks(visitor));
}

absl::Status InMemoryJobStore::ScanIndex(bool expiry, int64_t from_ms,
                                         int64_t to_ms,
                                         MarkedDueVisitor visitor,
                                         std::string_view start) const {
  const std::string begin =
      start.empty() ? EncodeDueTime(from_ms) : std::string(start);
  const std::string end = EncodeDueTime(to_ms);
  std::vector<std::pair<std::string, DueValue>> entries;
  {
    absl::ReaderMutexLock lock(&mu_);
    const std::map<std::string, DueValue, std::less<>>& index =
        expiry ? expiry_ : due_;
    for (auto it = index.lower_bound(begin);
         it != index.end() && it->first < end; ++it) {
      entries.push_back(*it);
    }
  }
  for (const auto& [key, value] : entries) {
    absl::StatusOr<DueKeyView> due = DecodeDueKey(key);
    if (!due.ok()) return due.status();
    if (!visitor(due->due_ms, due->topic, due->id, value)) break;
  }
  return absl::OkStatus();
}

absl::Status InMemoryJobStore::ScanJobs(std::string_view topic,
                                        std::string_view id_prefix,
                                        std::string_view start_after_id,
                                        JobVisitor visitor) const {
  const KeyRange range = JobScanRange(topic, id_prefix, start_after_id);
  std::vector<std::pair<std::string, std::string>> entries;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (auto it = jobs_.lower_bound(range.begin);
         it != jobs_.end() && it->first < range.end; ++it) {
      entries.emplace_back(it->first, it->second);
    }
  }
  for (const auto& [key, bytes] : entries) {
    absl::StatusOr<JobKeyView> job_key = DecodeJobKey(key);
    if (!job_key.ok()) return job_key.status();
    absl::StatusOr<JobRecord> record = ParseJobRecord(*job_key, bytes);
    if (!record.ok()) return record.status();
    if (!visitor(*record)) break;
  }
  return absl::OkStatus();
}

absl::Status InMemoryJobStore::ScanTopics(TopicVisitor visitor) const {
  std::vector<std::string> topics;
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = jobs_.begin();
    while (it != jobs_.end()) {
      absl::StatusOr<JobKeyView> key = DecodeJobKey(it->first);
      if (!key.ok()) return key.status();
      topics.emplace_back(key->topic);
      // Every key of the topic starts with `topic \0`; skip past them.
      it = jobs_.lower_bound(PrefixSuccessor(EncodeJobKey(key->topic, "")));
    }
  }
  for (const std::string& topic : topics) {
    if (!visitor(topic)) break;
  }
  return absl::OkStatus();
}

void InMemoryJobStore::PutRawRecordForTesting(std::string_view topic,
                                              std::string_view id,
                                              std::string bytes) {
  absl::MutexLock lock(&mu_);
  jobs_[EncodeJobKey(topic, id)] = std::move(bytes);
}

}  // namespace delayd::storage
