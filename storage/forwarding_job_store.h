// ForwardingJobStore: a JobStore that passes every call to another (borrowed,
// must outlive it). Tests derive from it and override only the calls they
// want to observe, stall or fail. Thread-safe when the target is. Part of
// delayd_storage_testing.
#ifndef DELAYD_STORAGE_FORWARDING_JOB_STORE_H_
#define DELAYD_STORAGE_FORWARDING_JOB_STORE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "storage/job_store.h"

namespace delayd::storage {

class ForwardingJobStore : public JobStore {
 public:
  explicit ForwardingJobStore(JobStore& target) : target_(target) {}
  ForwardingJobStore(const ForwardingJobStore&) = delete;
  ForwardingJobStore& operator=(const ForwardingJobStore&) = delete;

  absl::Status Apply(std::span<const Mutation> mutations,
                     Durability durability) override {
    return target_.Apply(mutations, durability);
  }
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
  absl::Status ScanFireMillisecond(int64_t ms, DueVisitor visitor) override {
    return target_.ScanFireMillisecond(ms, visitor);
  }
  absl::Status ScanCrowd(int64_t ms, DueVisitor visitor) override {
    return target_.ScanCrowd(ms, visitor);
  }
  absl::Status ScanDueFrom(int64_t from_ms, std::string_view from_topic,
                           std::string_view from_id, int64_t to_ms,
                           MarkedDueVisitor visitor) const override {
    return target_.ScanDueFrom(from_ms, from_topic, from_id, to_ms, visitor);
  }
  absl::Status ScanDueMarked(int64_t from_ms, int64_t to_ms,
                             MarkedDueVisitor visitor) const override {
    return target_.ScanDueMarked(from_ms, to_ms, visitor);
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
  absl::Status Resume() override { return target_.Resume(); }
  StoreStats stats() const override { return target_.stats(); }

 protected:
  JobStore& target() const { return target_; }

 private:
  JobStore& target_;
};

}  // namespace delayd::storage

#endif  // DELAYD_STORAGE_FORWARDING_JOB_STORE_H_
