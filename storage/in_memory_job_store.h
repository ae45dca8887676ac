// InMemoryJobStore: a JobStore held in ordered maps, for tests of the
// server logic. It uses the same key codec and keeps records serialized,
// decoding them on every read like RocksDbJobStore, so ordering, round trips
// and corrupt-record errors behave alike. Unlike RocksDbJobStore it always
// checks Apply's previous_due_ms and previous_expiry_ms precondition, to
// catch server bugs early.
// Durability is ignored (nothing survives the object); write errors never
// happen (wrap it in a FaultInjectingJobStore for those).
//
// Thread-safe: one mutex guards the maps. Scans copy the matching range
// under the lock, then visit without it (so visitors may call the store).
#ifndef DELAYD_STORAGE_IN_MEMORY_JOB_STORE_H_
#define DELAYD_STORAGE_IN_MEMORY_JOB_STORE_H_

#include <functional>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "storage/job_store.h"

namespace delayd::storage {

class InMemoryJobStore final : public JobStore {
 public:
  InMemoryJobStore() = default;
  InMemoryJobStore(const InMemoryJobStore&) = delete;
  InMemoryJobStore& operator=(const InMemoryJobStore&) = delete;

  absl::Status Apply(std::span<const Mutation> mutations,
                     Durability durability) override;
  absl::StatusOr<std::optional<JobRecord>> Get(
      std::string_view topic, std::string_view id) const override;
  absl::StatusOr<std::vector<std::optional<JobRecord>>> MultiGet(
      std::span<const JobKeyView> keys) const override;
  absl::Status ScanFireMillisecond(int64_t ms, DueVisitor visitor) override;
  absl::Status ScanDueFrom(int64_t from_ms, std::string_view from_topic,
                           std::string_view from_id, int64_t to_ms,
                           MarkedDueVisitor visitor) const override;
  absl::Status ScanDue(int64_t from_ms, int64_t to_ms,
                       DueVisitor visitor) const override;
  absl::Status ScanDueMarked(int64_t from_ms, int64_t to_ms,
                             MarkedDueVisitor visitor) const override;
  absl::Status ScanExpiry(int64_t from_ms, int64_t to_ms,
                          DueVisitor visitor) const override;
  absl::Status ScanJobs(std::string_view topic, std::string_view id_prefix,
                        std::string_view start_after_id,
                        JobVisitor visitor) const override;
  absl::Status ScanTopics(TopicVisitor visitor) const override;
  absl::Status Resume() override { return absl::OkStatus(); }
  StoreStats stats() const override { return counters_.Snapshot(); }

  // Stores `bytes` as the value of job (topic, id), due index untouched:
  // lets tests plant a corrupt record.
  void PutRawRecordForTesting(std::string_view topic, std::string_view id,
                              std::string bytes);

 private:
  absl::StatusOr<std::optional<JobRecord>> GetLocked(JobKeyView key) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // ScanDue(From) (expiry false) or ScanExpiry (true), from the key `start`
  // on (empty: from from_ms).
  absl::Status ScanIndex(bool expiry, int64_t from_ms, int64_t to_ms,
                         MarkedDueVisitor visitor,
                         std::string_view start = {}) const
      ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  // EncodeJobKey(topic, id) -> serialized JobRecord.
  std::map<std::string, std::string, std::less<>> jobs_ ABSL_GUARDED_BY(mu_);
  // EncodeDueKey(due_ms, topic, id) -> its value.
  std::map<std::string, DueValue, std::less<>> due_ ABSL_GUARDED_BY(mu_);
  // EncodeDueKey(expires_at_ms, topic, id) -> {} (no value).
  std::map<std::string, DueValue, std::less<>> expiry_ ABSL_GUARDED_BY(mu_);
  StoreCounters counters_;
};

}  // namespace delayd::storage

#endif  // DELAYD_STORAGE_IN_MEMORY_JOB_STORE_H_
