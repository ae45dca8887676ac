#include "server/server.h"

#include <chrono>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace delayd::server {
namespace {

// "127.0.0.1:0" + 4711 -> "127.0.0.1:4711".
std::string WithPort(const std::string& address, int port) {
  return absl::StrCat(address.substr(0, address.rfind(':')), ":", port);
}

}  // namespace

Server::Server(const Config& config, std::unique_ptr<Metrics> metrics)
    : config_(config), metrics_(std::move(metrics)) {}

Server::~Server() { Shutdown(); }

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const Config& config) {
  absl::StatusOr<std::unique_ptr<Metrics>> metrics =
      Metrics::Start(config.metrics_listen);
  if (!metrics.ok()) return metrics.status();
  std::unique_ptr<Server> server(new Server(config, *std::move(metrics)));

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(config.listen, grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&server->service_);
  server->grpc_server_ = builder.BuildAndStart();
  if (server->grpc_server_ == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("--listen: cannot serve gRPC on ", config.listen));
  }
  server->grpc_address_ = WithPort(config.listen, port);
  server->metrics_address_ =
      WithPort(config.metrics_listen, server->metrics_->port());
  grpc::HealthCheckServiceInterface* health =
      server->grpc_server_->GetHealthCheckService();
  health->SetServingStatus(kServiceName, true);
  health->SetServingStatus(true);
  return server;
}

void Server::Shutdown() {
  if (grpc_server_ == nullptr) return;
  grpc_server_->GetHealthCheckService()->SetServingStatus(false);
  std::thread stop_metrics([this] { metrics_->StopServing(); });
  const auto deadline = std::chrono::system_clock::now() +
                        absl::ToChronoMilliseconds(config_.shutdown_grace);
  grpc_server_->Shutdown(deadline);
  grpc_server_->Wait();
  grpc_server_.reset();
  stop_metrics.join();
}

}  // namespace delayd::server
