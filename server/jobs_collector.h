// JobsCollector: gauges read from the JobService when Prometheus scrapes —
// delayd_jobs{topic,state}, delayd_subscribers{topic} and
// delayd_wheel_entries. Computing them at scrape
// time keeps the hot paths free of metric updates. Thread-safe.
#ifndef DELAYD_SERVER_JOBS_COLLECTOR_H_
#define DELAYD_SERVER_JOBS_COLLECTOR_H_

#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "server/job_service.h"

namespace delayd::server {

class JobsCollector final : public prometheus::Collectable {
 public:
  // `jobs` must outlive the collector's registration.
  explicit JobsCollector(const JobService* jobs) : jobs_(jobs) {}

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const JobService* const jobs_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_JOBS_COLLECTOR_H_
