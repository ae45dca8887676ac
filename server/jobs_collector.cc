#include "server/jobs_collector.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

namespace delayd::server {
namespace {

prometheus::ClientMetric Gauge(
    std::vector<prometheus::ClientMetric::Label> labels, double value) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  return metric;
}

}  // namespace

std::vector<prometheus::MetricFamily> JobsCollector::Collect() const {
  prometheus::MetricFamily jobs{"delayd_jobs",
                                "Jobs by topic and state",
                                prometheus::MetricType::Gauge,
                                {}};
  prometheus::MetricFamily subscribers{"delayd_subscribers",
                                       "Open Subscribe streams by topic",
                                       prometheus::MetricType::Gauge,
                                       {}};
  const TopicTable& topics = jobs_->topics();
  for (const std::string& topic : topics.Topics()) {
    const TopicTable::Counts c = topics.CountsOf(topic);
    subscribers.metric.push_back(
        Gauge({{"topic", topic}}, static_cast<double>(c.subscribers)));
    // DEAD, DONE and CANCELED counts may dip below zero briefly after a
    // restart, until the background scan has counted those jobs (see
    // DeadCounter).
    for (const auto& [state, value] :
         {std::pair{"scheduled", c.scheduled()}, std::pair{"ready", c.ready},
          std::pair{"in_flight", c.in_flight},
          std::pair{"dead", std::max<int64_t>(0, c.dead)},
          std::pair{"done", std::max<int64_t>(0, c.done)},
          std::pair{"canceled", std::max<int64_t>(0, c.canceled)}}) {
      jobs.metric.push_back(Gauge({{"topic", topic}, {"state", state}},
                                  static_cast<double>(value)));
    }
  }
  prometheus::MetricFamily wheel{
      "delayd_wheel_entries",
      "Timers pending in the timing wheel",
      prometheus::MetricType::Gauge,
      {Gauge({}, static_cast<double>(jobs_->timers_pending()))}};
  return {std::move(jobs), std::move(subscribers), std::move(wheel)};
}

}  // namespace delayd::server
