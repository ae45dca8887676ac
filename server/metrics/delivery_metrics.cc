#include "server/metrics/delivery_metrics.h"

#include <algorithm>
#include <map>
#include <utility>

namespace delayd::server {
namespace {

prometheus::Family<prometheus::Counter>& CounterFamily(
    prometheus::Registry& registry, const char* name, const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

}  // namespace

DeliveryMetrics::DeliveryMetrics()
    : DeliveryMetrics(std::make_shared<prometheus::Registry>()) {}

DeliveryMetrics::DeliveryMetrics(std::shared_ptr<prometheus::Registry> own)
    : DeliveryMetrics(own, *own) {}

DeliveryMetrics::DeliveryMetrics(prometheus::Registry& registry)
    : DeliveryMetrics(nullptr, registry) {}

DeliveryMetrics::DeliveryMetrics(std::shared_ptr<prometheus::Registry> own,
                                 prometheus::Registry& registry)
    : own_registry_(std::move(own)),
      scheduled_(CounterFamily(
          registry, "delayd_jobs_scheduled_total",
          "Jobs created or replaced by Schedule or ScheduleBatch, by topic")),
      canceled_(CounterFamily(registry, "delayd_jobs_canceled_total",
                              "Jobs canceled (also in flight), by topic")),
      fired_(CounterFamily(registry, "delayd_jobs_fired_total",
                           "Jobs that fell due and became ready, by topic")),
      delivered_(CounterFamily(registry, "delayd_jobs_delivered_total",
                               "Deliveries sent to subscribers, by topic")),
      acked_(CounterFamily(registry, "delayd_jobs_acked_total",
                           "Deliveries acked, by topic")),
      nacked_(CounterFamily(registry, "delayd_jobs_nacked_total",
                            "Deliveries given back by Nack, by topic")),
      redelivered_(CounterFamily(
          registry, "delayd_jobs_redelivered_total",
          "Deliveries of a job after its first attempt, by topic")),
      dead_lettered_(CounterFamily(registry, "delayd_jobs_dead_lettered_total",
                                   "Jobs moved to DEAD, by topic")),
      occurrences_fired_(CounterFamily(
          registry, "delayd_occurrences_fired_total",
          "Occurrences of recurring jobs made into jobs, by topic")),
      occurrences_misfired_(CounterFamily(
          registry, "delayd_occurrences_misfired_total",
          "Occurrences of recurring jobs passed over by the misfire policy "
          "(missed while down or paused), by topic")),
      occurrences_overlapped_(CounterFamily(
          registry, "delayd_occurrences_overlapped_total",
          "Occurrences of recurring jobs passed over by the overlap policy "
          "(the previous one still live), by topic")),
      lateness_(
          prometheus::BuildHistogram()
              .Name("delayd_fire_lateness_seconds")
              .Help("Delivery send time minus the job's due time")
              .Register(registry)
              .Add({}, prometheus::Histogram::BucketBoundaries{
                           0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1,
                           0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300})) {}

const DeliveryMetrics::Topic& DeliveryMetrics::For(absl::string_view topic) {
  absl::MutexLock lock(&mu_);
  auto it = topics_.find(topic);
  if (it != topics_.end()) return it->second;
  const std::map<std::string, std::string> labels = {
      {"topic", std::string(topic)}};
  Topic t{&scheduled_.Add(labels),
          &canceled_.Add(labels),
          &fired_.Add(labels),
          &delivered_.Add(labels),
          &acked_.Add(labels),
          &nacked_.Add(labels),
          &redelivered_.Add(labels),
          &dead_lettered_.Add(labels),
          &occurrences_fired_.Add(labels),
          &occurrences_misfired_.Add(labels),
          &occurrences_overlapped_.Add(labels)};
  return topics_.try_emplace(std::string(topic), t).first->second;
}

void DeliveryMetrics::ObserveLateness(double seconds) {
  lateness_.Observe(std::max(0.0, seconds));
}

DeliveryMetrics::Totals DeliveryMetrics::TotalsOf(absl::string_view topic) {
  absl::MutexLock lock(&mu_);
  auto it = topics_.find(topic);
  if (it == topics_.end()) return {};
  return {static_cast<uint64_t>(it->second.fired->Value()),
          static_cast<uint64_t>(it->second.acked->Value())};
}

std::vector<DeliveryMetrics::Bucket> DeliveryMetrics::Lateness() const {
  std::vector<Bucket> buckets;
  for (const prometheus::ClientMetric::Bucket& b :
       lateness_.Collect().histogram.bucket) {
    buckets.push_back({b.upper_bound, b.cumulative_count});
  }
  return buckets;
}

}  // namespace delayd::server
