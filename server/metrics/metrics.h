// Metrics: the Prometheus registry of one delayd server, and its scrape in
// the text exposition format (what the HTTP server serves on /metrics;
// server/http/). Metric families are created by the parts that update them,
// from registry(); all names carry the prefix delayd_.
//
// Thread-safe: prometheus-cpp metrics may be updated from any thread, and
// Scrape may run on several at once.
#ifndef DELAYD_SERVER_METRICS_METRICS_H_
#define DELAYD_SERVER_METRICS_METRICS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "prometheus/collectable.h"
#include "prometheus/registry.h"

namespace delayd::server {

class Metrics {
 public:
  // A registry holding delayd_build_info.
  Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  prometheus::Registry& registry() { return *registry_; }

  // Adds metrics computed at scrape time; kept for the Metrics' lifetime.
  void AddCollectable(std::shared_ptr<prometheus::Collectable> collectable);

  // Every metric now, in the text exposition format 0.0.4.
  std::string Scrape() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::shared_ptr<prometheus::Registry> registry_;
  absl::Mutex mu_;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_METRICS_METRICS_H_
