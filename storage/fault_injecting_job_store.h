// FaultInjectingJobStore: wraps another JobStore (borrowed, must outlive it)
// and makes writes and reads fail on demand, for tests of how the server
// handles a full or broken disk. Unarmed, every call passes through. A read
// fault fails the whole call before it reads or visits anything (as a
// RocksDB iterator that fails on its first seek).
// Thread-safe. Part of delayd_storage_testing.
#ifndef DELAYD_STORAGE_FAULT_INJECTING_JOB_STORE_H_
#define DELAYD_STORAGE_FAULT_INJECTING_JOB_STORE_H_

#include <array>
#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "storage/job_store.h"

namespace delayd::storage {

class FaultInjectingJobStore final : public JobStore {
 public:
  // The errors RocksDbJobStore returns for a failed WAL write and a full
  // disk (codes UNAVAILABLE and RESOURCE_EXHAUSTED), marked as injected.
  static absl::Status IoError();
  static absl::Status NoSpace();
  // The error RocksDbJobStore returns for a failed read (UNAVAILABLE),
  // marked as injected.
  static absl::Status ReadError();

  // The kinds of read that can be made to fail; kAny stands for all.
  enum class Read {
    kGet,
    kMultiGet,
    kScanDue,  // and ScanFireMillisecond, ScanCrowd, ScanDueFrom, ScanDueMarked
    kScanExpiry,
    kScanJobs,
    kScanTopics,
    kAny,
  };

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

  // The next `count` reads of `kind` (kAny: of any kind) fail with `error`.
  // Replaces any earlier arming of that kind. A read matching both an armed
  // kind and kAny uses up the kind's arming first.
  // REQUIRES: !error.ok(), count >= 0.
  void FailNextReads(Read kind, int count, absl::Status error)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Every read of `kind` (kAny: every read) fails with `error` until
  // ClearReadFaults(). REQUIRES: !error.ok().
  void FailReadsUntilCleared(Read kind, absl::Status error)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Disarms every read fault.
  void ClearReadFaults() ABSL_LOCKS_EXCLUDED(mu_);
  // Reads failed by injection so far.
  int64_t injected_read_failures() const ABSL_LOCKS_EXCLUDED(mu_);

  // Calls `stall` before each entry a ScanDue, ScanFireMillisecond or
  // ScanCrowd visits, with the entry's index in that scan (from 0): a slow
  // read, to observe what happens meanwhile. Empty: no stall. Set it while
  // no such scan runs.
  void StallScanDue(std::function<void(size_t index)> stall)
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::Status Apply(std::span<const Mutation> mutations,
                     Durability durability) override;
  absl::StatusOr<std::optional<JobRecord>> Get(
      std::string_view topic, std::string_view id) const override;
  absl::StatusOr<std::vector<std::optional<JobRecord>>> MultiGet(
      std::span<const JobKeyView> keys) const override;
  absl::Status ScanFireMillisecond(int64_t ms, DueVisitor visitor) override;
  absl::Status ScanCrowd(int64_t ms, DueVisitor visitor) override;
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
  // Ends FailWritesUntilResume, then resumes the target.
  absl::Status Resume() override ABSL_LOCKS_EXCLUDED(mu_);
  // The target's stats, plus the injected failures as failed writes.
  StoreStats stats() const override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // A read fault of kind kScanDue, or `scan` of the target with `visitor`
  // (behind the stall, if one is set).
  absl::Status StalledScan(
      DueVisitor visitor,
      absl::FunctionRef<absl::Status(DueVisitor)> scan) const;

  JobStore& target_;

  mutable absl::Mutex mu_;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  std::function<void(size_t)> stall_scan_due_ ABSL_GUARDED_BY(mu_);
  int remaining_ ABSL_GUARDED_BY(mu_) = 0;
  bool until_resume_ ABSL_GUARDED_BY(mu_) = false;
  int64_t injected_ ABSL_GUARDED_BY(mu_) = 0;

  // One read fault per Read kind (kAny last).
  struct ReadFault {
    absl::Status error;
    int remaining = 0;
    bool until_cleared = false;
  };
  // The injected error for a read of `kind`, or OK to pass it through.
  absl::Status ReadFaultFor(Read kind) const ABSL_LOCKS_EXCLUDED(mu_);

  // Mutable: reads are const, and injecting a fault into one is state.
  mutable std::array<ReadFault, static_cast<size_t>(Read::kAny) + 1>
      read_faults_ ABSL_GUARDED_BY(mu_);
  mutable int64_t injected_reads_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace delayd::storage

#endif  // DELAYD_STORAGE_FAULT_INJECTING_JOB_STORE_H_
