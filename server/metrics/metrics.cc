#include "server/metrics/metrics.h"

#include <sstream>
#include <utility>

#include "prometheus/gauge.h"
#include "prometheus/metric_family.h"
#include "prometheus/text_serializer.h"

namespace delayd::server {

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::BuildGauge()
      .Name("delayd_build_info")
      .Help("Always 1; the labels name the running build")
      .Register(*registry_)
      .Add({{"version", DELAYD_VERSION}})
      .Set(1);
}

void Metrics::AddCollectable(
    std::shared_ptr<prometheus::Collectable> collectable) {
  absl::MutexLock lock(&mu_);
  collectables_.push_back(std::move(collectable));
}

std::string Metrics::Scrape() {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables;
  {
    absl::MutexLock lock(&mu_);
    collectables = collectables_;
  }
  // Collected outside the lock: a collectable may take locks of its own.
  for (const std::shared_ptr<prometheus::Collectable>& c : collectables) {
    std::vector<prometheus::MetricFamily> more = c->Collect();
    families.insert(families.end(), std::make_move_iterator(more.begin()),
                    std::make_move_iterator(more.end()));
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return std::move(out).str();
}

}  // namespace delayd::server
