#include "storage/fault_injecting_job_store.h"

#include <utility>

namespace delayd::storage {

absl::Status FaultInjectingJobStore::IoError() {
  return absl::UnavailableError(
      "storage: write failed: IO error: injected by FaultInjectingJobStore");
}

absl::Status FaultInjectingJobStore::NoSpace() {
  return absl::ResourceExhaustedError(
      "storage: write failed: IO error: No space left on device: injected "
      "by FaultInjectingJobStore");
}

absl::Status FaultInjectingJobStore::ReadError() {
  return absl::UnavailableError(
      "storage: read failed: IO error: injected by FaultInjectingJobStore");
}

void FaultInjectingJobStore::FailNextWrites(int count, absl::Status error) {
  absl::MutexLock lock(&mu_);
  error_ = std::move(error);
  remaining_ = count;
  until_resume_ = false;
}

void FaultInjectingJobStore::FailWritesUntilResume(absl::Status error) {
  absl::MutexLock lock(&mu_);
  error_ = std::move(error);
  remaining_ = 0;
  until_resume_ = true;
}

int64_t FaultInjectingJobStore::injected_failures() const {
  absl::MutexLock lock(&mu_);
  return injected_;
}

void FaultInjectingJobStore::FailNextReads(Read kind, int count,
                                           absl::Status error) {
  absl::MutexLock lock(&mu_);
  read_faults_[static_cast<size_t>(kind)] = {std::move(error), count, false};
}

void FaultInjectingJobStore::FailReadsUntilCleared(Read kind,
                                                   absl::Status error) {
  absl::MutexLock lock(&mu_);
  read_faults_[static_cast<size_t>(kind)] = {std::move(error), 0, true};
}

void FaultInjectingJobStore::ClearReadFaults() {
  absl::MutexLock lock(&mu_);
  read_faults_.fill(ReadFault());
}

int64_t FaultInjectingJobStore::injected_read_failures() const {
  absl::MutexLock lock(&mu_);
  return injected_reads_;
}

absl::Status FaultInjectingJobStore::ReadFaultFor(Read kind) const {
  absl::MutexLock lock(&mu_);
  for (Read k : {kind, Read::kAny}) {
    ReadFault& fault = read_faults_[static_cast<size_t>(k)];
    if (fault.until_cleared || fault.remaining > 0) {
      if (fault.remaining > 0) --fault.remaining;
      ++injected_reads_;
      return fault.error;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<JobRecord>> FaultInjectingJobStore::Get(
    std::string_view topic, std::string_view id) const {
  if (absl::Status s = ReadFaultFor(Read::kGet); !s.ok()) return s;
  return target_.Get(topic, id);
}

absl::StatusOr<std::vector<std::optional<JobRecord>>>
FaultInjectingJobStore::MultiGet(std::span<const JobKeyView> keys) const {
  if (absl::Status s = ReadFaultFor(Read::kMultiGet); !s.ok()) return s;
  return target_.MultiGet(keys);
}

absl::Status FaultInjectingJobStore::ScanDue(int64_t from_ms, int64_t to_ms,
                                             DueVisitor visitor) const {
  return StalledScan(visitor, [&](DueVisitor v) {
    return target_.ScanDue(from_ms, to_ms, v);
  });
}

absl::Status FaultInjectingJobStore::ScanFireMillisecond(int64_t ms,
                                                         DueVisitor visitor) {
  return StalledScan(visitor, [&](DueVisitor v) {
    return target_.ScanFireMillisecond(ms, v);
  });
}

absl::Status FaultInjectingJobStore::ScanCrowd(int64_t ms, DueVisitor visitor) {
  return StalledScan(visitor,
                     [&](DueVisitor v) { return target_.ScanCrowd(ms, v); });
}

absl::Status FaultInjectingJobStore::StalledScan(
    DueVisitor visitor,
    absl::FunctionRef<absl::Status(DueVisitor)> scan) const {
  if (absl::Status s = ReadFaultFor(Read::kScanDue); !s.ok()) return s;
  std::function<void(size_t)> stall;
  {
    absl::MutexLock lock(&mu_);
    stall = stall_scan_due_;
  }
  if (!stall) return scan(visitor);
  size_t index = 0;
  return scan([&](int64_t due_ms, std::string_view topic, std::string_view id) {
    stall(index++);
    return visitor(due_ms, topic, id);
  });
}

void FaultInjectingJobStore::StallScanDue(
    std::function<void(size_t index)> stall) {
  absl::MutexLock lock(&mu_);
  stall_scan_due_ = std::move(stall);
}

absl::Status FaultInjectingJobStore::ScanDueFrom(
    int64_t from_ms, std::string_view from_topic, std::string_view from_id,
    int64_t to_ms, MarkedDueVisitor visitor) const {
  if (absl::Status s = ReadFaultFor(Read::kScanDue); !s.ok()) return s;
  return target_.ScanDueFrom(from_ms, from_topic, from_id, to_ms, visitor);
}

absl::Status FaultInjectingJobStore::ScanDueMarked(
    int64_t from_ms, int64_t to_ms, MarkedDueVisitor visitor) const {
  if (absl::Status s = ReadFaultFor(Read::kScanDue); !s.ok()) return s;
  return target_.ScanDueMarked(from_ms, to_ms, visitor);
}

absl::Status FaultInjectingJobStore::ScanExpiry(int64_t from_ms, int64_t to_ms,
                                                DueVisitor visitor) const {
  if (absl::Status s = ReadFaultFor(Read::kScanExpiry); !s.ok()) return s;
  return target_.ScanExpiry(from_ms, to_ms, visitor);
}

absl::Status FaultInjectingJobStore::ScanJobs(std::string_view topic,
                                              std::string_view id_prefix,
                                              std::string_view start_after_id,
                                              JobVisitor visitor) const {
  if (absl::Status s = ReadFaultFor(Read::kScanJobs); !s.ok()) return s;
  return target_.ScanJobs(topic, id_prefix, start_after_id, visitor);
}

absl::Status FaultInjectingJobStore::ScanTopics(TopicVisitor visitor) const {
  if (absl::Status s = ReadFaultFor(Read::kScanTopics); !s.ok()) return s;
  return target_.ScanTopics(visitor);
}

absl::Status FaultInjectingJobStore::Apply(std::span<const Mutation> mutations,
                                           Durability durability) {
  if (!mutations.empty()) {
    absl::MutexLock lock(&mu_);
    if (until_resume_ || remaining_ > 0) {
      if (remaining_ > 0) --remaining_;
      ++injected_;
      return error_;
    }
  }
  return target_.Apply(mutations, durability);
}

absl::Status FaultInjectingJobStore::Resume() {
  {
    absl::MutexLock lock(&mu_);
    until_resume_ = false;
  }
  return target_.Resume();
}

StoreStats FaultInjectingJobStore::stats() const {
  StoreStats stats = target_.stats();
  absl::MutexLock lock(&mu_);
  stats.writes += static_cast<uint64_t>(injected_);
  stats.write_failures += static_cast<uint64_t>(injected_);
  return stats;
}

}  // namespace delayd::storage
