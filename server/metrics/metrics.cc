#include "server/metrics/metrics.h"

#include <exception>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "prometheus/gauge.h"

namespace delayd::server {

Metrics::Metrics(std::shared_ptr<prometheus::Registry> registry,
                 std::unique_ptr<prometheus::Exposer> exposer, int port)
    : registry_(std::move(registry)),
      exposer_(std::move(exposer)),
      port_(port) {}

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Start(
    const std::string& listen) {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildGauge()
      .Name("delayd_build_info")
      .Help("Always 1; the labels name the running build")
      .Register(*registry)
      .Add({{"version", DELAYD_VERSION}})
      .Set(1);
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    // civetweb reports a bind failure by throwing from the constructor.
    exposer = std::make_unique<prometheus::Exposer>(listen, /*num_threads=*/1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "--metrics_listen: cannot serve /metrics on ", listen, ": ", e.what()));
  }
  exposer->RegisterCollectable(registry);
  const std::vector<int> ports = exposer->GetListeningPorts();
  const int port = ports.empty() ? 0 : ports.front();
  return std::unique_ptr<Metrics>(
      new Metrics(std::move(registry), std::move(exposer), port));
}

void Metrics::AddCollectable(
    std::shared_ptr<prometheus::Collectable> collectable) {
  if (exposer_ != nullptr) exposer_->RegisterCollectable(collectable);
  collectables_.push_back(std::move(collectable));
}

void Metrics::StopServing() {
  exposer_.reset();
  collectables_.clear();
}

}  // namespace delayd::server
