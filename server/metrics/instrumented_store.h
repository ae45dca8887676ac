// InstrumentedStore: a JobStore decorator that times every write into
// delayd_store_write_duration_seconds and counts failed ones in
// delayd_store_write_failures_total{code}; reads pass straight through.
//
// A failed write is sticky in the store (later writes fail too). When the
// cause may pass — disk full, RESOURCE_EXHAUSTED — the next write first asks
// the store to Resume(), at most once a second, so writes succeed again once
// space is freed, without a restart.
// Thread-safe as the wrapped store is. Does not own the wrapped store.
#ifndef DELAYD_SERVER_METRICS_INSTRUMENTED_STORE_H_
#define DELAYD_SERVER_METRICS_INSTRUMENTED_STORE_H_

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "storage/job_store.h"

namespace delayd::server {

class InstrumentedStore final : public storage::JobStore {
 public:
  InstrumentedStore(storage::JobStore* store, prometheus::Registry& registry);

  absl::Status Apply(std::span<const storage::Mutation> mutations,
                     storage::Durability durability) override;
  absl::StatusOr<std::optional<storage::JobRecord>> Get(
      std::string_view topic, std::string_view id) const override {
    return store_->Get(topic, id);
  }
  absl::StatusOr<std::vector<std::optional<storage::JobRecord>>> MultiGet(
      std::span<const storage::JobKeyView> keys) const override {
    return store_->MultiGet(keys);
  }
  absl::Status ScanDue(int64_t from_ms, int64_t to_ms,
                       DueVisitor visitor) const override {
    return store_->ScanDue(from_ms, to_ms, visitor);
  }
  absl::Status ScanFireMillisecond(int64_t ms, DueVisitor visitor) override {
    return store_->ScanFireMillisecond(ms, visitor);
  }
  absl::Status ScanCrowd(int64_t ms, DueVisitor visitor) override {
    return store_->ScanCrowd(ms, visitor);
  }
  absl::Status ScanDueFrom(int64_t from_ms, std::string_view from_topic,
                           std::string_view from_id, int64_t to_ms,
                           MarkedDueVisitor visitor) const override {
    return store_->ScanDueFrom(from_ms, from_topic, from_id, to_ms, visitor);
  }
  absl::Status ScanDueMarked(int64_t from_ms, int64_t to_ms,
                             MarkedDueVisitor visitor) const override {
    return store_->ScanDueMarked(from_ms, to_ms, visitor);
  }
  absl::Status ScanExpiry(int64_t from_ms, int64_t to_ms,
                          DueVisitor visitor) const override {
    return store_->ScanExpiry(from_ms, to_ms, visitor);
  }
  absl::Status ScanJobs(std::string_view topic, std::string_view id_prefix,
                        std::string_view start_after_id,
                        JobVisitor visitor) const override {
    return store_->ScanJobs(topic, id_prefix, start_after_id, visitor);
  }
  absl::Status ScanTopics(TopicVisitor visitor) const override {
    return store_->ScanTopics(visitor);
  }
  absl::Status Resume() override { return store_->Resume(); }
  storage::StoreStats stats() const override { return store_->stats(); }

 private:
  storage::JobStore* const store_;
  prometheus::Histogram& synced_latency_;
  prometheus::Histogram& unsynced_latency_;
  prometheus::Family<prometheus::Counter>& failures_;
  absl::Mutex mu_;
  absl::flat_hash_map<int, prometheus::Counter*> failures_by_code_
      ABSL_GUARDED_BY(mu_);
  // Set while the store refuses writes for lack of space.
  bool out_of_space_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_resume_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_METRICS_INSTRUMENTED_STORE_H_
