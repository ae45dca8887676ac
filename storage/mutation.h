// Mutation: one change to one stored job (a put of its full record, a
// delete, or an attempt mark on its due entry), as JobStore::Apply takes it.
// A value type; not synchronized.
//
// The store keeps the due index from what a mutation says: it removes the
// entry at previous_due_ms (when set) and, for a put, adds the entry at
// new_due_ms() (when set). previous_due_ms must therefore describe what is
// stored — see JobStore::Apply for the precondition. The expiry index of
// retained records is kept the same way, from previous_expiry_ms and
// new_expiry_ms(); previous_expiry_ms defaults to nullopt, right for every
// stored record that is not retained (ExpiryIndexEntryOf).
#ifndef DELAYD_STORAGE_MUTATION_H_
#define DELAYD_STORAGE_MUTATION_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "storage/job_record.h"
#include "storage/key_codec.h"

namespace delayd::storage {

class Mutation {
 public:
  enum class Kind { kPut, kDelete, kMarkAttempt };

  // Stores `record` under (record.job().topic(), record.job().id()),
  // replacing any stored record, and sets its format_version to
  // kJobRecordFormatVersion. previous_due_ms: DueIndexEntryOf(the record
  // stored now), previous_expiry_ms: ExpiryIndexEntryOf(it); nullopt when
  // none is stored.
  static Mutation Put(JobRecord record, std::optional<int64_t> previous_due_ms,
                      std::optional<int64_t> previous_expiry_ms = std::nullopt);

  // Deletes the record of (topic, id), its due entry at previous_due_ms
  // (DueIndexEntryOf(the record stored now)) and its expiry entry at
  // previous_expiry_ms (ExpiryIndexEntryOf(it)). Deleting an absent job
  // (with both nullopt) is a no-op.
  static Mutation Delete(
      std::string topic, std::string id, std::optional<int64_t> previous_due_ms,
      std::optional<int64_t> previous_expiry_ms = std::nullopt);

  // Marks the due entry of (topic, id) at due_ms with `attempt` (key_codec.h):
  // a delivery of the job, its attempt-th, is out. The record is left as it
  // is. attempt 0 clears the mark. REQUIRES: due_ms is DueIndexEntryOf(the
  // record stored now) (it is both previous_due_ms() and new_due_ms()), and
  // payload_bytes the size of that record's payload (the entry keeps it).
  static Mutation MarkAttempt(std::string topic, std::string id, int64_t due_ms,
                              uint32_t attempt, uint64_t payload_bytes);

  Kind kind() const { return kind_; }
  std::string_view topic() const;
  std::string_view id() const;
  JobKeyView key() const { return {topic(), id()}; }
  // REQUIRES: kind() == kPut.
  const JobRecord& record() const { return record_; }
  // REQUIRES: kind() == kMarkAttempt.
  uint32_t attempt() const { return attempt_; }
  uint64_t payload_bytes() const { return payload_bytes_; }
  // For a caller that keeps the mutation after Apply and wants its record's
  // parts without a copy (topic() and id() read it). REQUIRES: kind() ==
  // kPut.
  JobRecord& mutable_record() { return record_; }
  std::optional<int64_t> previous_due_ms() const { return previous_due_ms_; }
  // The due entry this mutation leaves: DueIndexEntryOf(record()) for a put,
  // nullopt for a delete, the marked entry for a mark.
  std::optional<int64_t> new_due_ms() const { return new_due_ms_; }
  std::optional<int64_t> previous_expiry_ms() const {
    return previous_expiry_ms_;
  }
  // The expiry entry this mutation leaves: ExpiryIndexEntryOf(record()) for
  // a put, nullopt for a delete.
  std::optional<int64_t> new_expiry_ms() const { return new_expiry_ms_; }

  // INVALID_ARGUMENT when the topic or id is empty (the server names
  // id-less jobs before storing them) or contains '\0', or a put's
  // format_version is not kJobRecordFormatVersion.
  absl::Status Validate() const;

 private:
  Mutation(Kind kind, JobRecord record, std::string topic, std::string id,
           std::optional<int64_t> previous_due_ms,
           std::optional<int64_t> previous_expiry_ms);

  Kind kind_;
  JobRecord record_;   // Kind::kPut only.
  std::string topic_;  // not for Kind::kPut: a put's key is in record_.
  std::string id_;
  std::optional<int64_t> previous_due_ms_;
  std::optional<int64_t> new_due_ms_;
  std::optional<int64_t> previous_expiry_ms_;
  std::optional<int64_t> new_expiry_ms_;
  uint32_t attempt_ = 0;        // Kind::kMarkAttempt only.
  uint64_t payload_bytes_ = 0;  // Kind::kMarkAttempt only.
};

// Checks the preconditions of JobStore::Apply that need no stored data:
// every mutation valid, no two naming the same job. INVALID_ARGUMENT
// naming the offending key otherwise.
absl::Status ValidateMutations(std::span<const Mutation> mutations);

// FAILED_PRECONDITION naming the key when `m.previous_due_ms()` is not
// DueIndexEntryOf(*stored), or `m.previous_expiry_ms()` is not
// ExpiryIndexEntryOf(*stored) (both nullopt when nothing is stored), or `m`
// marks a job that has no due entry.
absl::Status CheckPreviousDue(const Mutation& m,
                              const std::optional<JobRecord>& stored);

}  // namespace delayd::storage

#endif  // DELAYD_STORAGE_MUTATION_H_
