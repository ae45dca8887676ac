// Metrics: the Prometheus registry of one delayd server and the HTTP exposer
// that serves it on /metrics. Metric families are created by the parts that
// update them, from registry(); all names carry the prefix delayd_.
//
// Thread-safe: prometheus-cpp metrics may be updated from any thread.
#ifndef DELAYD_SERVER_METRICS_METRICS_H_
#define DELAYD_SERVER_METRICS_METRICS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"

namespace delayd::server {

class Metrics {
 public:
  // Starts serving /metrics on `listen` (host:port; port 0 picks one).
  // Returns UNAVAILABLE when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<Metrics>> Start(
      const std::string& listen);

  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  prometheus::Registry& registry() { return *registry_; }
  // The port actually bound.
  int port() const { return port_; }

  // Adds metrics computed at scrape time. Kept alive until StopServing.
  void AddCollectable(std::shared_ptr<prometheus::Collectable> collectable);

  // Stops serving /metrics; the registry stays usable. Takes up to ~2 s
  // (civetweb's poll quantum), so shutdown runs it beside the gRPC drain.
  void StopServing();

 private:
  Metrics(std::shared_ptr<prometheus::Registry> registry,
          std::unique_ptr<prometheus::Exposer> exposer, int port);

  const std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
  const int port_;
};

}  // namespace delayd::server

#endif  // DELAYD_SERVER_METRICS_METRICS_H_
