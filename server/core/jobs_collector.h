// JobsCollector: gauges read from the JobService when Prometheus scrapes —
// delayd_jobs{topic,state}, delayd_subscribers{topic},
// delayd_deliveries_unwritten{topic}, delayd_pending_payload_bytes{topic},
// delayd_wheel_entries, delayd_jobs_due_within{topic,window}, the counters
// delayd_commit_{writes,jobs}_total of the CommitQueue and, with a
// memory horizon, delayd_memory_horizon_timestamp_seconds. Computing
// them at scrape time keeps the hot paths free of metric updates.
//
// The due-within counts come from GetStats, a scan of the due index over
// the next day: its cost grows with the jobs due within a day (~0.15 s per
// million), so its result is reused for kDueCacheTtl, whoever scrapes.
// Thread-safe.
#ifndef DELAYD_SERVER_CORE_JOBS_COLLECTOR_H_
#define DELAYD_SERVER_CORE_JOBS_COLLECTOR_H_

#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "delayd/v1/delayd.pb.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "server/core/job_service.h"

namespace delayd::server {

class JobsCollector final : public prometheus::Collectable {
 public:
  static constexpr absl::Duration kDueCacheTtl = absl::Seconds(10);

  // `jobs` must outlive the collector's registration.
  explicit JobsCollector(JobService* jobs) : jobs_(jobs) {}

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  // delayd_jobs_due_within, from a GetStats at most kDueCacheTtl old.
  prometheus::MetricFamily DueWithin() const;

  JobService* const jobs_;
  mutable absl::Mutex mu_;
  mutable absl::Time due_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  mutable v1::GetStatsResponse due_ ABSL_GUARDED_BY(mu_);
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_CORE_JOBS_COLLECTOR_H_
