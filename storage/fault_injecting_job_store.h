// FaultInjectingJobStore: wraps another JobStore (borrowed, must outlive it)
// and makes writes fail on demand, for tests of how the server handles a
// full or broken disk. Reads, scans and successful writes pass through.
// Thread-safe. Part of delayd_storage_testing.
#ifndef DELAYD_STORAGE_FAULT_INJECTING_JOB_STORE_H_
#define DELAYD_STORAGE_FAULT_INJECTING_JOB_STORE_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "storage/job_store.h"

namespace delayd::storage {

class FaultInjectingJobStore final : public JobStore {
 public:
  // The errors RocksDbJobStore returns for a failed WAL write and a full
  // disk (codes UNAVAILABLE and RESOURCE_EXHAUSTED), marked as injected.
  static absl::Status IoError();
  static absl::Status NoSpace();

  explicit FaultInjectingJobStore(JobStore& target) : target_(target) {}
  FaultInjectingJobStore(const FaultInjectingJobStore&) = delete;
  FaultInjectingJobStore& operator=(const FaultInjectingJobStore&) = delete;

  // The next `count` non-empty Apply calls fail with `error` and change
  // nothing. Replaces any earlier arming.
  // REQUIRES: !error.ok(), count >= 0.
  void FailNextWrites(int count, absl::Status error) ABSL_LOCKS_EXCLUDED(mu_);

  // Like RocksDbJobStore after a real failure: every Apply fails with
  // `error` until Resume().
  // REQUIRES: !error.ok().
  void FailWritesUntilResume(absl::Status error) ABSL_LOCKS_EXCLUDED(mu_);

  // Apply calls failed by injection so far.
  int64_t injected_failures() const ABSL_LOCKS_EXCLUDED(mu_);

  absl::Status Apply(std::span<const Mutation> mutations,
                     Durability durability) override;
  absl::StatusOr<std::optional<JobRecord>> Get(
      std::string_view topic, std::string_view id) const override {
    return target_.Get(topic, id);
  }
  absl::StatusOr<std::vector<std::optional<JobRecord>>> MultiGet(
      std::span<const JobKeyView> keys) const override {
    return target_.MultiGet(keys);
  }
  absl::Status ScanDue(int64_t from_ms, int64_t to_ms,
                       DueVisitor visitor) const override {
    return target_.ScanDue(from_ms, to_ms, visitor);
  }
  absl::Status ScanExpiry(int64_t from_ms, int64_t to_ms,
                          DueVisitor visitor) const override {
    return target_.ScanExpiry(from_ms, to_ms, visitor);
  }
  absl::Status ScanJobs(std::string_view topic, std::string_view id_prefix,
                        std::string_view start_after_id,
                        JobVisitor visitor) const override {
    return target_.ScanJobs(topic, id_prefix, start_after_id, visitor);
  }
  absl::Status ScanTopics(TopicVisitor visitor) const override {
    return target_.ScanTopics(visitor);
  }
  // Ends FailWritesUntilResume, then resumes the target.
  absl::Status Resume() override ABSL_LOCKS_EXCLUDED(mu_);
  // The target's stats, plus the injected failures as failed writes.
  StoreStats stats() const override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  JobStore& target_;

  mutable absl::Mutex mu_;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  int remaining_ ABSL_GUARDED_BY(mu_) = 0;
  bool until_resume_ ABSL_GUARDED_BY(mu_) = false;
  int64_t injected_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace delayd::storage

#endif  // DELAYD_STORAGE_FAULT_INJECTING_JOB_STORE_H_
