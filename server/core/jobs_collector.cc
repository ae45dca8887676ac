#include "server/core/jobs_collector.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace delayd::server {
namespace {

prometheus::ClientMetric Gauge(
    std::vector<prometheus::ClientMetric::Label> labels, double value) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  return metric;
}

prometheus::ClientMetric Counter(double value) {
  prometheus::ClientMetric metric;
  metric.counter.value = value;
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
  prometheus::MetricFamily unwritten{
      "delayd_deliveries_unwritten",
      "Deliveries handed to subscribers' streams and not yet written, by "
      "topic (a subscriber that stops reading holds at most max_in_flight)",
      prometheus::MetricType::Gauge,
      {}};
  prometheus::MetricFamily payload_bytes{
      "delayd_pending_payload_bytes",
      "Payload bytes of the live (scheduled, ready, in flight) jobs, by "
      "topic: what a pending_bytes quota counts",
      prometheus::MetricType::Gauge,
      {}};
  const absl::flat_hash_map<std::string, size_t> unwritten_by_topic =
      jobs_->deliverer().UnwrittenByTopic();
  const TopicTable& topics = jobs_->topics();
  for (const std::string& topic : topics.Topics()) {
    const TopicTable::Counts c = topics.CountsOf(topic);
    subscribers.metric.push_back(
        Gauge({{"topic", topic}}, static_cast<double>(c.subscribers)));
    payload_bytes.metric.push_back(
        Gauge({{"topic", topic}}, static_cast<double>(c.live_payload_bytes)));
    const auto u = unwritten_by_topic.find(topic);
    unwritten.metric.push_back(Gauge(
        {{"topic", topic}},
        static_cast<double>(u == unwritten_by_topic.end() ? 0 : u->second)));
    // DEAD, DONE and CANCELED counts may dip below zero briefly after a
    // restart, until the background scan has counted those jobs (see
    // TerminalStateCounter).
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
  const CommitQueue& commits = jobs_->commits();
  prometheus::MetricFamily commit_writes{
      "delayd_commit_writes_total",
      "Synced store writes made by the commit queue, which unary Schedules "
      "and Cancels share",
      prometheus::MetricType::Counter,
      {Counter(static_cast<double>(commits.writes()))}};
  prometheus::MetricFamily commit_jobs{
      "delayd_commit_jobs_total",
      "Unary Schedules and Cancels written by the commit queue; per "
      "delayd_commit_writes_total, the calls that shared an fsync",
      prometheus::MetricType::Counter,
      {Counter(static_cast<double>(commits.written()))}};
  std::vector<prometheus::MetricFamily> families = {
      std::move(jobs),          std::move(subscribers), std::move(unwritten),
      std::move(payload_bytes), std::move(wheel),       DueWithin(),
      std::move(commit_writes), std::move(commit_jobs)};
  if (const int64_t horizon = jobs_->memory_horizon_ms();
      horizon != JobTimers::kNoHorizon) {
    families.push_back(prometheus::MetricFamily{
        "delayd_memory_horizon_timestamp_seconds",
        "With --memory_horizon: jobs due up to this unix time have timers in "
        "memory; later ones wait on disk",
        prometheus::MetricType::Gauge,
        {Gauge({}, static_cast<double>(horizon) / 1000)}});
  }
  return families;
}

prometheus::MetricFamily JobsCollector::DueWithin() const {
  prometheus::MetricFamily due{
      "delayd_jobs_due_within",
      "SCHEDULED jobs due within the window from now, by topic (refreshed "
      "at most every 10 s)",
      prometheus::MetricType::Gauge,
      {}};
  absl::MutexLock lock(&mu_);
  if (absl::Now() - due_at_ >= kDueCacheTtl) {
    absl::StatusOr<v1::GetStatsResponse> stats =
        jobs_->GetStats(v1::GetStatsRequest());
    // On a read error the last answer stands (and is retried next scrape).
    if (stats.ok()) {
      due_ = *std::move(stats);
      due_at_ = absl::Now();
    }
  }
  for (const v1::TopicStats& t : due_.topics()) {
    for (const auto& [window, value] : {std::pair{"1m", t.due_next_minute()},
                                        std::pair{"1h", t.due_next_hour()},
                                        std::pair{"1d", t.due_next_day()}}) {
      due.metric.push_back(Gauge({{"topic", t.topic()}, {"window", window}},
                                 static_cast<double>(value)));
    }
  }
  return due;
}

}  // namespace delayd::server
