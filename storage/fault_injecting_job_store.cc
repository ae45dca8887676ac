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
